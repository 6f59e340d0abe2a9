/* `kfmt cat --format json`'s lines for the records of a data batch, written in one call
 * (kfmt.rows.json_lines). Reference: kfmt.cli.cat.records_of, a dict and a json.dumps per record.
 *
 * Keys, values and header values are base64 (ASCII); header keys are Java's UTF-8 decoding of their
 * bytes, JSON-escaped as json.dumps(ensure_ascii=False) escapes them. They are copied raw, escaping
 * only the ASCII characters JSON needs escaped: that is the text of valid UTF-8. The caller decodes
 * the block strictly and falls back to the reference when it is not valid (Java's replacement rules). */
#include "native.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static uint8_t *put_b64(uint8_t *p, const uint8_t *d, int64_t n) {
    *p++ = '"';
    int64_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        p[0] = B64[v >> 18];
        p[1] = B64[(v >> 12) & 63];
        p[2] = B64[(v >> 6) & 63];
        p[3] = B64[v & 63];
        p += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)d[i] << 16;
        p[0] = B64[v >> 18];
        p[1] = B64[(v >> 12) & 63];
        p[2] = p[3] = '=';
        p += 4;
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8;
        p[0] = B64[v >> 18];
        p[1] = B64[(v >> 12) & 63];
        p[2] = B64[(v >> 6) & 63];
        p[3] = '=';
        p += 4;
    }
    *p++ = '"';
    return p;
}

static size_t b64_size(int64_t n) { return (size_t)((n + 2) / 3 * 4 + 2); }

static uint8_t *put_bytes(uint8_t *p, const char *s, size_t n) {
    memcpy(p, s, n);
    return p + n;
}

#define PUT(p, literal) put_bytes(p, literal, sizeof(literal) - 1)


/* A JSON string of the bytes, escaped as Python's json module escapes text (ensure_ascii=False). */
static uint8_t *put_json_string(uint8_t *p, const uint8_t *d, int64_t n) {
    static const char HEX[] = "0123456789abcdef";
    *p++ = '"';
    for (int64_t i = 0; i < n; i++) {
        uint8_t c = d[i];
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = c;
        } else if (c < 0x20) {
            *p++ = '\\';
            switch (c) {
            case '\n': *p++ = 'n'; break;
            case '\r': *p++ = 'r'; break;
            case '\t': *p++ = 't'; break;
            case '\b': *p++ = 'b'; break;
            case '\f': *p++ = 'f'; break;
            default:
                p = PUT(p, "u00");
                *p++ = HEX[c >> 4];
                *p++ = HEX[c & 15];
            }
        } else {
            *p++ = c;
        }
    }
    *p++ = '"';
    return p;
}

/* json_record_lines(records, skip, timestamp_type_json, leader_epoch_json, where_json)
 *   -> bytes (the lines of records [skip, n), joined by "\n", no final newline) | NotImplemented
 * The *_json arguments are JSON text made by the caller: `"CreateTime"`, `5` or `null`, and the
 * members that follow leaderEpoch (`,"topic":"t","partition":0` or nothing). */
PyObject *py_json_record_lines(PyObject *self, PyObject *args) {
    PyObject *records;
    Py_ssize_t skip;
    const char *ts_type, *epoch, *where;
    Py_ssize_t ts_len, epoch_len, where_len;
    if (!PyArg_ParseTuple(args, "Ons#s#s#", &records, &skip, &ts_type, &ts_len, &epoch, &epoch_len, &where,
                          &where_len))
        return NULL;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (skip < 0) skip = 0;
    size_t total = 0, fixed = 120 + (size_t)(ts_len + epoch_len + where_len);
    for (int64_t i = skip; i < v.n; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i, hl = v.hlist0 + i;
        int64_t h0 = v.header_list_offsets[hl], h1 = v.header_list_offsets[hl + 1];
        total += fixed;
        if (bit_set(v.key_valid, k)) total += b64_size(v.key_offsets[k + 1] - v.key_offsets[k]);
        if (bit_set(v.value_valid, val)) total += b64_size(v.value_offsets[val + 1] - v.value_offsets[val]);
        for (int64_t j = h0; j < h1; j++) {
            int64_t hk = v.hkey0 + j, hv = v.hvalue0 + j;
            total += 32 + 6 * (size_t)(v.hkey_offsets[hk + 1] - v.hkey_offsets[hk]);
            if (bit_set(v.hvalue_valid, hv)) total += b64_size(v.hvalue_offsets[hv + 1] - v.hvalue_offsets[hv]);
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL) {
        record_view_release(&v);
        return NULL;
    }
    uint8_t *start = (uint8_t *)PyBytes_AS_STRING(out), *p = start;
    for (int64_t i = skip; i < v.n; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i, hl = v.hlist0 + i;
        if (i > skip) *p++ = '\n';
        p = PUT(p, "{\"offset\":");
        p = put_long(p, v.offsets[v.off0 + i]);
        p = PUT(p, ",\"timestamp\":");
        p = put_long(p, v.timestamps[v.ts0 + i]);
        p = PUT(p, ",\"timestampType\":");
        p = put_bytes(p, ts_type, (size_t)ts_len);
        p = PUT(p, ",\"key\":");
        if (bit_set(v.key_valid, k)) p = put_b64(p, v.key_data + v.key_offsets[k], v.key_offsets[k + 1] - v.key_offsets[k]);
        else p = PUT(p, "null");
        p = PUT(p, ",\"value\":");
        if (bit_set(v.value_valid, val))
            p = put_b64(p, v.value_data + v.value_offsets[val], v.value_offsets[val + 1] - v.value_offsets[val]);
        else p = PUT(p, "null");
        p = PUT(p, ",\"headers\":[");
        int64_t h0 = v.header_list_offsets[hl], h1 = v.header_list_offsets[hl + 1];
        for (int64_t j = h0; j < h1; j++) {
            int64_t hk = v.hkey0 + j, hv = v.hvalue0 + j;
            if (j > h0) *p++ = ',';
            p = PUT(p, "{\"key\":");
            p = put_json_string(p, v.hkey_data + v.hkey_offsets[hk], v.hkey_offsets[hk + 1] - v.hkey_offsets[hk]);
            p = PUT(p, ",\"value\":");
            if (bit_set(v.hvalue_valid, hv))
                p = put_b64(p, v.hvalue_data + v.hvalue_offsets[hv], v.hvalue_offsets[hv + 1] - v.hvalue_offsets[hv]);
            else p = PUT(p, "null");
            *p++ = '}';
        }
        p = PUT(p, "],\"leaderEpoch\":");
        p = put_bytes(p, epoch, (size_t)epoch_len);
        p = put_bytes(p, where, (size_t)where_len);
        *p++ = '}';
    }
    record_view_release(&v);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(p - start)) != 0) return NULL;
    return out;
}
