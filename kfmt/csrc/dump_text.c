/* kafka-dump-log's record lines (--deep-iteration) for the records of a v2 data batch, formatted in
 * one call (kfmt.inspect.dump.text_blocks). Reference: kfmt.inspect.dump.text.record_line, one
 * record at a time.
 *
 * Keys, values and header keys are copied as raw bytes: Java's `new String(bytes, UTF_8)` gives back
 * exactly the text those bytes encode when they are valid UTF-8. The caller decodes the whole block
 * strictly and falls back to the reference when it is not valid (an invalid sequence inside a field
 * stays invalid next to the ASCII that surrounds every field), where Java's replacement rules apply. */
#include "native.h"

#define INT32_MAX_ 2147483647LL

static uint8_t *put_text(uint8_t *p, const char *s) {
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}


/* DefaultRecordBatch.incrementSequence */
static int64_t increment_sequence(int64_t sequence, int64_t increment) {
    if (sequence > INT32_MAX_ - increment) return increment - (INT32_MAX_ - sequence) - 1;
    return sequence + increment;
}

/* v2_record_lines(records, base_offset, base_sequence, timestamp_name, print_data_log)
 *   -> bytes (every record's line, each ending in "\n") | NotImplemented */
PyObject *py_v2_record_lines(PyObject *self, PyObject *args) {
    PyObject *records;
    long long base_offset, base_sequence;
    const char *ts_name;
    int print_data_log;
    if (!PyArg_ParseTuple(args, "OLLsp", &records, &base_offset, &base_sequence, &ts_name, &print_data_log))
        return NULL;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* the fixed text of a line is under 160 bytes plus the timestamp name; fields are copied */
    size_t name_len = strlen(ts_name), total = 0;
    for (int64_t i = 0; i < v.n; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i, hl = v.hlist0 + i;
        int64_t h0 = v.header_list_offsets[hl], h1 = v.header_list_offsets[hl + 1];
        total += 200 + name_len + (size_t)(h1 - h0);
        if (bit_set(v.key_valid, k)) total += (size_t)(v.key_offsets[k + 1] - v.key_offsets[k]);
        if (bit_set(v.value_valid, val)) total += (size_t)(v.value_offsets[val + 1] - v.value_offsets[val]);
        if (h1 > h0) total += (size_t)(v.hkey_offsets[v.hkey0 + h1] - v.hkey_offsets[v.hkey0 + h0]);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL) {
        record_view_release(&v);
        return NULL;
    }
    uint8_t *start = (uint8_t *)PyBytes_AS_STRING(out), *p = start;
    for (int64_t i = 0; i < v.n; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i, hl = v.hlist0 + i;
        int64_t offset = v.offsets[v.off0 + i];
        int key_null = !bit_set(v.key_valid, k), value_null = !bit_set(v.value_valid, val);
        int64_t klen = key_null ? -1 : v.key_offsets[k + 1] - v.key_offsets[k];
        int64_t vlen = value_null ? -1 : v.value_offsets[val + 1] - v.value_offsets[val];
        p = put_text(p, "| offset: ");
        p = put_long(p, offset);
        *p++ = ' ';
        memcpy(p, ts_name, name_len);
        p += name_len;
        p = put_text(p, ": ");
        p = put_long(p, v.timestamps[v.ts0 + i]);
        p = put_text(p, " keySize: ");
        p = put_long(p, klen);
        p = put_text(p, " valueSize: ");
        p = put_long(p, vlen);
        p = put_text(p, " sequence: ");
        p = put_long(p, base_sequence >= 0 ? increment_sequence(base_sequence, offset - base_offset) : -1);
        p = put_text(p, " headerKeys: [");
        int64_t h0 = v.header_list_offsets[hl], h1 = v.header_list_offsets[hl + 1];
        for (int64_t j = h0; j < h1; j++) {
            int64_t hk = v.hkey0 + j;
            if (j > h0) *p++ = ',';
            size_t n = (size_t)(v.hkey_offsets[hk + 1] - v.hkey_offsets[hk]);
            memcpy(p, v.hkey_data + v.hkey_offsets[hk], n);
            p += n;
        }
        *p++ = ']';
        if (print_data_log) {
            if (!key_null) {
                p = put_text(p, " key: ");
                memcpy(p, v.key_data + v.key_offsets[k], (size_t)klen);
                p += klen;
            }
            if (!value_null) {
                p = put_text(p, " payload: ");
                memcpy(p, v.value_data + v.value_offsets[val], (size_t)vlen);
                p += vlen;
            }
        }
        *p++ = '\n';
    }
    record_view_release(&v);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(p - start)) != 0) return NULL;
    return out;
}
