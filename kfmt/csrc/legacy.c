/* Runs of uncompressed v0/v1 messages (docs/format.md §3): every message is its own log entry, so a 1 GB
 * segment holds millions of them and per-message Python work cannot keep up. Two kernels over rows of
 * frames (frames.h):
 *
 * decode_legacy_messages: the records of a run as one column block. Reference: per entry,
 *   plugins/formats/legacy.py LegacyFormat.decode (LegacyMessage), the result concatenated.
 * upgrade_legacy_messages: the v2 batches Kafka 4.0 makes of them (docs/format.md §16.3; kfmt.format.convert):
 *   one single-record batch per message, or in --rebatch mode consecutive messages grouped by
 *   kfmt.format.legacy_runs.joins. Reference: kfmt.format.legacy_runs.upgrade_run_reference (kfmt.format.convert and
 *   plugins/formats/v2.py's encode, per batch).
 * decode_legacy_set: the messages of one entry, or of a compressed wrapper's inner message set.
 *
 * Both stop at the first row they are not sure of (a message the reference refuses, a bad CRC under a
 * strict read, a row that is not an uncompressed legacy message) and return where; the Python
 * wrapper hands that row to the reference path, which raises its own error. */
#include "native.h"
#include "frames.h"

#include "xxh3.h"

PyObject *facts_result(const facts_acc *a); /* facts.c */
#define INT32_MAX_ 2147483647LL

typedef struct {
    int64_t offset, timestamp, klen, vlen; /* klen/vlen -1: null */
    const uint8_t *entry, *key, *value;
    int magic, v2_timestamp_type; /* v0 becomes CreateTime (0) */
    int crc_valid;
} message;

/* LegacyMessage's checks on the entry at p of `size` bytes (log overhead included); 0 if it refuses
 * the entry or the entry is a compressed wrapper. */
static int parse_message(const uint8_t *p, int64_t size, message *m) {
    int magic = (int8_t)p[V0_MESSAGE_MAGIC_AT], attrs = (int8_t)p[V0_MESSAGE_ATTRIBUTES_AT];
    if (magic != MAGIC_V0 && magic != MAGIC_V1) return 0;
    if (size - LOG_OVERHEAD < RECORD_OVERHEAD(magic) || (attrs & CODEC_MASK)) return 0;
    int64_t pos = LEGACY_KEY_AT(magic);
    m->magic = magic;
    m->entry = p;
    m->offset = be64(p + V0_MESSAGE_OFFSET_AT);
    m->timestamp = magic == MAGIC_V1 ? be64(p + V1_MESSAGE_TIMESTAMP_AT) : -1;
    m->v2_timestamp_type = magic == MAGIC_V1 && (attrs & ATTR_LOG_APPEND_TIME) ? 1 : 0;
    for (int field = 0; field < 2; field++) {
        if (pos + 4 > size) return 0;
        int64_t n = be32(p + pos);
        pos += 4;
        if (n >= 0 && pos + n > size) return 0;
        if (field == 0) { m->key = p + pos; m->klen = n < 0 ? -1 : n; }
        else { m->value = p + pos; m->vlen = n < 0 ? -1 : n; }
        if (n > 0) pos += n;
    }
    if (pos != size) return 0;
    /* the CRC-32 covers magic .. end of value */
    m->crc_valid = crc32_update(0, p + V0_MESSAGE_MAGIC_AT, (size_t)(size - V0_MESSAGE_MAGIC_AT)) ==
                   (uint32_t)be32(p + V0_MESSAGE_CRC_AT);
    return 1;
}

/* The entry a row names, inside the data; NULL if it lies outside. */
static const uint8_t *entry_of(const uint8_t *d, int64_t len, int64_t base, const frame *f) {
    int64_t at = f->position - base;
    if (at < 0 || f->size < LOG_OVERHEAD || at > len - f->size) return NULL;
    return d + at;
}

/* The bytes the rows' entries span (an upper bound of what their records hold). */
static int64_t rows_bytes(const frame *f, Py_ssize_t start, Py_ssize_t stop) {
    int64_t total = 0;
    for (Py_ssize_t i = start; i < stop; i++) total += f[i].size > 0 ? f[i].size : 0;
    return total;
}

/* decode_legacy_messages(data, rows, start, stop, base, check_crc)
 *   -> (stopped_at, RecordBatch of rows [start, stopped_at), crc_valid: bytes of 0/1) */
PyObject *py_decode_legacy_messages(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*y*nnLp", &data, &rows, &start, &stop, &base, &check_crc)) return NULL;
    if (frame_run_args("decode_legacy_messages", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    int64_t n = stop - start, total = rows_bytes(f, start, stop);
    if (total > INT32_MAX_) { /* beyond Arrow's 32-bit offsets: the caller splits the run */
        PyBuffer_Release(&data);
        PyBuffer_Release(&rows);
        Py_RETURN_NOTIMPLEMENTED;
    }
    columns c;
    PyObject *valid = PyBytes_FromStringAndSize(NULL, n);
    if (valid == NULL || columns_init(&c, n, (size_t)total)) {
        Py_XDECREF(valid);
        PyBuffer_Release(&data);
        PyBuffer_Release(&rows);
        return valid == NULL ? NULL : PyErr_NoMemory();
    }
    uint8_t *valid_bytes = (uint8_t *)PyBytes_AS_STRING(valid);
    int64_t i = 0;
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n; i++) {
        const frame *row = &f[start + i];
        const uint8_t *p = entry_of(data.buf, data.len, base, row);
        message m;
        if (p == NULL || !parse_message(p, row->size, &m) || (check_crc && !m.crc_valid)) break;
        if (m.klen >= 0) {
            if (gbuf_reserve(&c.key_data, (size_t)m.klen)) { nomem = 1; break; }
            memcpy(c.key_data.data + c.key_data.len, m.key, (size_t)m.klen);
            c.key_data.len += (size_t)m.klen;
        } else if (columns_null_key(&c, i)) { nomem = 1; break; }
        if (m.vlen >= 0) {
            if (gbuf_reserve(&c.value_data, (size_t)m.vlen)) { nomem = 1; break; }
            memcpy(c.value_data.data + c.value_data.len, m.value, (size_t)m.vlen);
            c.value_data.len += (size_t)m.vlen;
        } else if (columns_null_value(&c, i)) { nomem = 1; break; }
        c.key_offsets[i + 1] = (int32_t)c.key_data.len;
        c.value_offsets[i + 1] = (int32_t)c.value_data.len;
        c.header_list_offsets[i + 1] = 0;
        c.offsets[i] = m.offset;
        c.timestamps[i] = m.timestamp;
        valid_bytes[i] = (uint8_t)m.crc_valid;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    if (nomem) {
        columns_free(&c);
        Py_DECREF(valid);
        return PyErr_NoMemory();
    }
    c.n = i; /* the rows decoded; bitmaps stay long enough */
    if (i < n && _PyBytes_Resize(&valid, (Py_ssize_t)i) != 0) {
        columns_free(&c);
        return NULL;
    }
    PyObject *batch = columns_to_record_batch(&c);
    if (batch == NULL) {
        Py_DECREF(valid);
        return NULL;
    }
    return Py_BuildValue("nNN", (Py_ssize_t)(start + i), batch, valid);
}

/* ---------------------------------------------------------------- one entry, or a wrapper's inner set */

/* Per-message facts the record columns do not carry (kfmt.format.model.LegacyMessageInfo), one row each;
 * plugins/formats/legacy.py views them as numpy rows (LEGACY_INFO_DTYPE). */
typedef struct {
    int64_t stored_timestamp;
    uint32_t crc;
    int8_t magic;
    int8_t attributes;
    uint8_t crc_valid;
} message_info;

/* The most messages a message set of `len` bytes can hold (the smallest v0 entry is 26 bytes). */
static int64_t set_capacity(int64_t len, int inner) { return inner ? len / (LOG_OVERHEAD + MIN_ENTRY_SIZE) + 1 : 1; }

/* The messages of d[0..end) into rows row0.. of c (their facts into info[0..], when not NULL), as
 * LegacyFormat decodes them: `inner` 0: d is one uncompressed entry (LegacyFormat.decode); 1: a
 * compressed wrapper's decompressed message set (LegacyFormat._parse_inner and _absolute_offsets,
 * docs/format.md §3.4, §3.5), has_lat: the wrapper's time lat when it is a LogAppendTime wrapper.
 * c must hold set_capacity(end, inner) more rows and end more key and value bytes. Returns 1 (and
 * *count), 0 for anything the reference refuses (c is then as it was), -1 out of memory. */
static int legacy_set_into(const uint8_t *d, int64_t end, int inner, int64_t wrapper_offset, int wrapper_magic,
                           int has_lat, int64_t lat, int check_crc, columns *c, int64_t row0, message_info *info,
                           int64_t *count) {
    columns_mark mark = columns_marked(c);
    int64_t pos = 0, n = 0;
    int ok = 1;
    /* the messages: each entry whole, a truncated final inner one dropped as Kafka does */
    while (end - pos >= LOG_OVERHEAD) {
        int64_t size = be32(d + pos + LOG_ENTRY_SIZE_AT), row = row0 + n;
        if (size < MIN_ENTRY_SIZE) { ok = 0; break; }
        if (pos + LOG_OVERHEAD + size > end) {
            if (!inner) ok = 0;
            break;
        }
        message m;
        if (!parse_message(d + pos, LOG_OVERHEAD + size, &m) || (check_crc && !m.crc_valid)) {
            ok = 0;
            break;
        }
        if (info != NULL) {
            memset(&info[n], 0, sizeof info[n]);
            info[n].stored_timestamp = m.timestamp;
            info[n].crc = (uint32_t)be32(m.entry + V0_MESSAGE_CRC_AT);
            info[n].magic = (int8_t)m.magic;
            info[n].attributes = (int8_t)m.entry[V0_MESSAGE_ATTRIBUTES_AT];
            info[n].crc_valid = (uint8_t)m.crc_valid;
        }
        if (m.klen >= 0) {
            memcpy(c->key_data.data + c->key_data.len, m.key, (size_t)m.klen);
            c->key_data.len += (size_t)m.klen;
        } else if (columns_null_key(c, row)) { ok = -1; break; }
        if (m.vlen >= 0) {
            memcpy(c->value_data.data + c->value_data.len, m.value, (size_t)m.vlen);
            c->value_data.len += (size_t)m.vlen;
        } else if (columns_null_value(c, row)) { ok = -1; break; }
        c->key_offsets[row + 1] = (int32_t)c->key_data.len;
        c->value_offsets[row + 1] = (int32_t)c->value_data.len;
        c->header_list_offsets[row + 1] = 0;
        c->offsets[row] = m.offset; /* made absolute below */
        /* §3.5: v0 messages have no timestamp; a LogAppendTime wrapper's time overrides */
        c->timestamps[row] = m.magic == MAGIC_V0 ? -1 : has_lat ? lat : m.timestamp;
        n++;
        pos += LOG_OVERHEAD + size;
        if (!inner) break;
    }
    if (ok == 1 && (n == 0 || (!inner && pos != end))) ok = 0;
    if (ok == 1 && inner && wrapper_magic == MAGIC_V1) {
        /* v0 inner offsets are absolute; v1 ones relative to the wrapper's (§3.4; a wrapper offset
         * of 0, written by some librdkafka versions, means base 0) */
        int64_t base = 0;
        if (wrapper_offset != 0) {
            if (wrapper_offset < c->offsets[row0 + n - 1]) ok = 0;
            else base = wrapper_offset - c->offsets[row0 + n - 1];
        }
        for (int64_t i = row0; ok == 1 && i < row0 + n; i++) c->offsets[i] = wrap_add(base, c->offsets[i]);
    }
    if (ok != 1) {
        columns_back_to(c, &mark);
        return ok;
    }
    *count = n;
    return 1;
}

/* decode_legacy_set(data, wrapper_offset, wrapper_magic, log_append_time, check_crc)
 *   -> (RecordBatch, infos: bytes of message_info rows) or NotImplemented.
 * wrapper_offset None: `data` is one uncompressed entry (LegacyFormat.decode). Otherwise `data` is a
 * compressed wrapper's decompressed message set (legacy_set_into); log_append_time: the wrapper's time
 * when it is a LogAppendTime wrapper. NotImplemented for anything the reference refuses (it then
 * raises its own error). */
PyObject *py_decode_legacy_set(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *o_wrapper, *o_lat;
    int wrapper_magic, check_crc;
    if (!PyArg_ParseTuple(args, "y*OiOp", &buf, &o_wrapper, &wrapper_magic, &o_lat, &check_crc)) return NULL;
    int inner = o_wrapper != Py_None, has_lat = o_lat != Py_None;
    long long wrapper_offset = 0, lat = 0;
    if ((inner && (wrapper_offset = PyLong_AsLongLong(o_wrapper)) == -1 && PyErr_Occurred()) ||
        (has_lat && (lat = PyLong_AsLongLong(o_lat)) == -1 && PyErr_Occurred())) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int64_t end = buf.len, n = 0;
    /* one pass, straight into the columns: keys and values are parts of the input, so nothing
     * needs to grow */
    int64_t n_max = set_capacity(end, inner);
    columns c;
    PyObject *infos = NULL;
    if (end > INT32_MAX_) {
        PyBuffer_Release(&buf);
        Py_RETURN_NOTIMPLEMENTED;
    }
    if ((infos = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n_max * (int64_t)sizeof(message_info)))) == NULL) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (columns_init(&c, n_max, (size_t)end) || gbuf_reserve(&c.key_data, (size_t)end)) {
        Py_DECREF(infos);
        PyBuffer_Release(&buf);
        return PyErr_NoMemory();
    }
    int ok = legacy_set_into(buf.buf, end, inner, wrapper_offset, wrapper_magic, has_lat, lat, check_crc, &c, 0,
                             (message_info *)PyBytes_AS_STRING(infos), &n);
    PyBuffer_Release(&buf);
    if (ok != 1) {
        columns_free(&c);
        Py_DECREF(infos);
        if (ok < 0) return PyErr_NoMemory();
        Py_RETURN_NOTIMPLEMENTED;
    }
    c.n = n;
    if (_PyBytes_Resize(&infos, (Py_ssize_t)(n * (int64_t)sizeof(message_info))) != 0) {
        columns_free(&c);
        return NULL;
    }
    PyObject *batch = columns_to_record_batch(&c);
    if (batch == NULL) {
        Py_DECREF(infos);
        return NULL;
    }
    return Py_BuildValue("NN", batch, infos);
}

/* decode_legacy_payloads(payloads, facts, check_crc) -> (stopped_at, RecordBatch, counts: bytes of int64)
 * The records of several compressed v0/v1 wrappers, each already inflated by its codec (the inner
 * message set, kfmt.format.batch_runs.inflated_wrapper), as one column block: payload i's messages as
 * decode_legacy_set gives them with facts row i (int64: wrapper offset, wrapper magic, LogAppendTime
 * 0/1, its time), concatenated; counts: how many records each payload gave. It stops at the first
 * payload the reference should decide (which the per-wrapper decode then reports). Reference:
 * kfmt.format.inflated_runs.inflated_blocks_reference. */
PyObject *py_decode_legacy_payloads(PyObject *self, PyObject *args) {
    PyObject *payloads;
    Py_buffer facts;
    int check_crc;
    if (!PyArg_ParseTuple(args, "Oy*p", &payloads, &facts, &check_crc)) return NULL;
    buffer_list l;
    if (buffer_list_open(&l, payloads)) {
        PyBuffer_Release(&facts);
        return NULL;
    }
    if (facts.len != (Py_ssize_t)(l.n * 4 * 8)) {
        buffer_list_release(&l);
        PyBuffer_Release(&facts);
        PyErr_SetString(PyExc_ValueError, "decode_legacy_payloads: four int64 facts per payload");
        return NULL;
    }
    const int64_t *fa = facts.buf;
    int64_t rows = 0, bytes = 0;
    Py_ssize_t limit = 0;
    for (; limit < l.n && bytes + l.views[limit].len <= INT32_MAX_; limit++) {
        rows += set_capacity(l.views[limit].len, 1);
        bytes += l.views[limit].len;
    }
    columns c;
    PyObject *counts = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(limit * 8));
    if (counts == NULL || columns_init(&c, rows, (size_t)bytes) || gbuf_reserve(&c.key_data, (size_t)bytes)) {
        if (counts != NULL) columns_free(&c);
        Py_XDECREF(counts);
        buffer_list_release(&l);
        PyBuffer_Release(&facts);
        return counts == NULL ? NULL : PyErr_NoMemory();
    }
    int64_t *count = (int64_t *)PyBytes_AS_STRING(counts), done = 0;
    int ok = 1;
    Py_ssize_t i = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < limit; i++) {
        const int64_t *f = fa + i * 4;
        ok = legacy_set_into(l.views[i].buf, l.views[i].len, 1, f[0], (int)f[1], f[2] != 0, f[3], check_crc, &c,
                             done, NULL, &count[i]);
        if (ok != 1) break;
        done += count[i];
    }
    Py_END_ALLOW_THREADS
    buffer_list_release(&l);
    PyBuffer_Release(&facts);
    if (ok < 0) {
        columns_free(&c);
        Py_DECREF(counts);
        return PyErr_NoMemory();
    }
    c.n = done;
    if (i < limit && _PyBytes_Resize(&counts, (Py_ssize_t)(i * 8)) != 0) {
        columns_free(&c);
        return NULL;
    }
    PyObject *batch = columns_to_record_batch(&c);
    if (batch == NULL) {
        Py_DECREF(counts);
        return NULL;
    }
    return Py_BuildValue("nNN", i, batch, counts);
}

/* message_info_layout() -> (itemsize, [(field, offset)]) */
PyObject *py_message_info_layout(PyObject *self, PyObject *args) {
#define FIELD(name) #name, (Py_ssize_t)offsetof(message_info, name)
    return Py_BuildValue("n[(sn)(sn)(sn)(sn)(sn)]", (Py_ssize_t)sizeof(message_info), FIELD(stored_timestamp),
                         FIELD(crc), FIELD(magic), FIELD(attributes), FIELD(crc_valid));
#undef FIELD
}

/* ---------------------------------------------------------------- upgrade */

static uint64_t message_hash_sum(const message *m, gbuf *scratch, int *nomem, uint64_t *hi) {
    /* kfmt.format.digest's canonical form: offset, timestamp, sized key, sized value, header count 0 */
    size_t size = 16 + 4 + (m->klen > 0 ? (size_t)m->klen : 0) + 4 + (m->vlen > 0 ? (size_t)m->vlen : 0) + 4;
    scratch->len = 0;
    if (gbuf_reserve(scratch, size)) {
        *nomem = 1;
        return 0;
    }
    uint8_t *p = scratch->data;
    put64(p, m->offset);
    put64(p + 8, m->timestamp);
    p += 16;
    put32(p, (int32_t)m->klen);
    p += 4;
    if (m->klen > 0) { memcpy(p, m->key, (size_t)m->klen); p += m->klen; }
    put32(p, (int32_t)m->vlen);
    p += 4;
    if (m->vlen > 0) { memcpy(p, m->value, (size_t)m->vlen); p += m->vlen; }
    put32(p, 0);
    p += 4;
    kfmt_hash128 h = kfmt_xxh3_128(scratch->data, (size_t)(p - scratch->data));
    *hi = h.hi;
    return h.lo;
}

static int64_t record_size(const message *m, int64_t base_offset, int64_t base_ts) {
    int64_t body = 1 + varint_size_u(zigzag(m->timestamp - base_ts)) + varint_size_u(zigzag(m->offset - base_offset)) +
                   (m->klen < 0 ? 1 : varint_size_u(zigzag(m->klen)) + m->klen) +
                   (m->vlen < 0 ? 1 : varint_size_u(zigzag(m->vlen)) + m->vlen) + 1;
    return varint_size_u(zigzag(body)) + body;
}

/* Appends one v2 batch holding `group` (1 or more messages) to `out` and its row to `out_rows`. */
static int write_batch(const message *group, int64_t n, int64_t out_position, gbuf *out, gbuf *out_rows) {
    const message *first = &group[0], *last = &group[n - 1];
    int64_t base_offset = first->offset, base_ts = first->timestamp, max_ts = first->timestamp;
    int64_t size = V2_BATCH_OVERHEAD;
    for (int64_t i = 0; i < n; i++) {
        size += record_size(&group[i], base_offset, base_ts);
        if (group[i].timestamp > max_ts) max_ts = group[i].timestamp;
    }
    if (gbuf_reserve(out, (size_t)size) || gbuf_reserve(out_rows, sizeof(frame))) return -1;
    uint8_t *b = out->data + out->len, *p = b + V2_BATCH_RECORDS_AT;
    int16_t attributes = first->v2_timestamp_type == 1 ? ATTR_LOG_APPEND_TIME : 0;
    for (int64_t i = 0; i < n; i++) {
        const message *m = &group[i];
        uint64_t zts = zigzag(m->timestamp - base_ts), zoff = zigzag(m->offset - base_offset);
        int64_t len = 1 + varint_size_u(zts) + varint_size_u(zoff) +
                      (m->klen < 0 ? 1 : varint_size_u(zigzag(m->klen)) + m->klen) +
                      (m->vlen < 0 ? 1 : varint_size_u(zigzag(m->vlen)) + m->vlen) + 1;
        p = put_varint_u(p, zigzag(len));
        *p++ = 0;
        p = put_varint_u(p, zts);
        p = put_varint_u(p, zoff);
        if (m->klen < 0) *p++ = 1;
        else { p = put_varint_u(p, zigzag(m->klen)); memcpy(p, m->key, (size_t)m->klen); p += m->klen; }
        if (m->vlen < 0) *p++ = 1;
        else { p = put_varint_u(p, zigzag(m->vlen)); memcpy(p, m->value, (size_t)m->vlen); p += m->vlen; }
        *p++ = 0; /* no headers */
    }
    put64(b + V2_BATCH_BASE_OFFSET_AT, base_offset);
    put32(b + V2_BATCH_BATCH_LENGTH_AT, (int32_t)(size - LOG_OVERHEAD));
    put32(b + V2_BATCH_PARTITION_LEADER_EPOCH_AT, -1); /* none */
    b[V2_BATCH_MAGIC_AT] = MAGIC_V2;
    put16(b + V2_BATCH_ATTRIBUTES_AT, attributes);
    put32(b + V2_BATCH_LAST_OFFSET_DELTA_AT, (int32_t)(last->offset - base_offset));
    put64(b + V2_BATCH_BASE_TIMESTAMP_AT, base_ts);
    put64(b + V2_BATCH_MAX_TIMESTAMP_AT, max_ts);
    put64(b + V2_BATCH_PRODUCER_ID_AT, -1); /* producer id, epoch, base sequence: none */
    put16(b + V2_BATCH_PRODUCER_EPOCH_AT, -1);
    put32(b + V2_BATCH_BASE_SEQUENCE_AT, -1);
    put32(b + V2_BATCH_RECORDS_COUNT_AT, (int32_t)n);
    uint32_t crc = crc32c_update(0, b + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM));
    put32(b + V2_BATCH_CRC_AT, (int32_t)crc);
    frame *row = (frame *)(out_rows->data + out_rows->len);
    memset(row, 0, sizeof *row);
    row->position = out_position + (int64_t)out->len;
    row->base_offset = base_offset;
    row->last_offset = wrap_add(base_offset, (int32_t)(last->offset - base_offset));
    row->max_timestamp = max_ts;
    row->base_timestamp = base_ts;
    row->producer_id = -1;
    row->size = (int32_t)size;
    row->partition_leader_epoch = -1;
    row->base_sequence = -1;
    row->records_count = (int32_t)n;
    row->crc = crc;
    row->attributes = attributes;
    row->producer_epoch = -1;
    row->magic = 2;
    row->compression = 0;
    row->timestamp_type = (int8_t)first->v2_timestamp_type;
    out->len += (size_t)size;
    out_rows->len += sizeof(frame);
    return 0;
}

/* Whether a message may join the open group in --rebatch mode (the reference is
 * kfmt.format.legacy_runs.joins, the rule of kfmt.transforms.upgrade): CreateTime messages only (a
 * LogAppendTime batch carries one time), as long as the legacy entries, which are larger than the v2
 * records they become, fit max_batch_bytes with a v2 batch header; and offset and timestamp deltas the
 * v2 fields hold. */
static int joins(const message *first, int64_t n, int64_t group_bytes, const message *m, int64_t entry_size,
                 int64_t max_batch_bytes) {
    if (n == 0 || m->v2_timestamp_type != 0 || first->v2_timestamp_type != 0) return 0;
    int64_t off_delta, ts_delta;
    if (__builtin_sub_overflow(m->offset, first->offset, &off_delta) || off_delta < 0 ||
        off_delta > INT32_MAX_ || __builtin_sub_overflow(m->timestamp, first->timestamp, &ts_delta))
        return 0;
    return V2_BATCH_OVERHEAD + group_bytes + entry_size <= max_batch_bytes;
}

/* The open group of upgrade_legacy_messages, and the content digest of its records. */
typedef struct {
    gbuf messages;
    int64_t n, bytes, first_row;
    uint64_t hash_lo, hash_hi;
} open_group;

typedef struct {
    gbuf out, out_rows;
    int64_t out_position, records;
    uint64_t hash_lo, hash_hi;
} upgrade_output;

static int close_group(open_group *g, upgrade_output *o) {
    if (g->n == 0) return 0;
    if (write_batch((const message *)g->messages.data, g->n, o->out_position, &o->out, &o->out_rows)) return -1;
    o->records += g->n;
    kfmt_sum128(&o->hash_lo, &o->hash_hi, g->hash_lo, g->hash_hi);
    g->n = g->bytes = 0;
    g->hash_lo = g->hash_hi = 0;
    g->messages.len = 0;
    return 0;
}

/* upgrade_legacy_messages(data, rows, start, stop, base, check_crc, out_position, rebatch,
 *                         max_batch_bytes, close_last)
 *   -> (stopped_at, refused, batches: bytes, out_rows: bytes, (records, digest_high, digest_low))
 * refused: the entry at stopped_at is one the kernel leaves to the reference. Otherwise stopped_at is
 * `stop`, or, in --rebatch mode without close_last, the first row of the group still open at `stop`
 * (the next call starts there, so groups never depend on where calls are cut). The digest is the
 * content digest's sum over the records converted (kfmt.format.digest). */
PyObject *py_upgrade_legacy_messages(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base, out_position, max_batch_bytes;
    int check_crc, rebatch, close_last;
    if (!PyArg_ParseTuple(args, "y*y*nnLpLpLp", &data, &rows, &start, &stop, &base, &check_crc,
                          &out_position, &rebatch, &max_batch_bytes, &close_last))
        return NULL;
    if (frame_run_args("upgrade_legacy_messages", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    upgrade_output o = {.out_position = out_position};
    open_group g = {0};
    gbuf scratch = {0};
    Py_ssize_t i = start;
    int nomem = 0, refused = 0;
    /* The output is written straight into bytes objects, sized for the worst case (a v2
     * single-record batch is at most 64 bytes longer than the legacy entry it replaces; at most one
     * batch per message) and trimmed at the end. */
    PyObject *batches = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(rows_bytes(f, start, stop) + 64 * (stop - start)));
    PyObject *out_rows = batches ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof(frame) * (size_t)(stop - start))) : NULL;
    if (out_rows == NULL) {
        Py_XDECREF(batches);
        PyBuffer_Release(&data);
        PyBuffer_Release(&rows);
        return NULL;
    }
    o.out = (gbuf){(uint8_t *)PyBytes_AS_STRING(batches), 0, (size_t)PyBytes_GET_SIZE(batches), 1};
    o.out_rows = (gbuf){(uint8_t *)PyBytes_AS_STRING(out_rows), 0, (size_t)PyBytes_GET_SIZE(out_rows), 1};
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop && !nomem; i++) {
        message m;
        const uint8_t *p = entry_of(data.buf, data.len, base, &f[i]);
        if (p == NULL || !parse_message(p, f[i].size, &m) || (check_crc && !m.crc_valid)) {
            refused = 1;
            break;
        }
        if (g.n && !(rebatch && joins((const message *)g.messages.data, g.n, g.bytes, &m, f[i].size,
                                      max_batch_bytes))) {
            if (close_group(&g, &o)) { nomem = 1; break; }
        }
        if (g.n == 0) g.first_row = i;
        if (gbuf_reserve(&g.messages, sizeof m)) { nomem = 1; break; }
        memcpy(g.messages.data + g.messages.len, &m, sizeof m);
        g.messages.len += sizeof m;
        g.bytes += f[i].size;
        g.n++;
        uint64_t h_hi = 0, h_lo = message_hash_sum(&m, &scratch, &nomem, &h_hi);
        kfmt_sum128(&g.hash_lo, &g.hash_hi, h_lo, h_hi);
        if (!rebatch && close_group(&g, &o)) { nomem = 1; break; }
    }
    if (!nomem && g.n) {
        if (refused || close_last || !rebatch) {
            if (close_group(&g, &o)) nomem = 1;
        } else {
            i = (Py_ssize_t)g.first_row; /* left open for the next call */
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    PyObject *result = NULL;
    if (nomem) PyErr_NoMemory();
    else if (_PyBytes_Resize(&batches, (Py_ssize_t)o.out.len) == 0 &&
             _PyBytes_Resize(&out_rows, (Py_ssize_t)o.out_rows.len) == 0)
        result = Py_BuildValue("nOOO(LKK)", i, refused ? Py_True : Py_False, batches, out_rows,
                               (long long)o.records, (unsigned long long)o.hash_hi,
                               (unsigned long long)o.hash_lo);
    Py_XDECREF(batches);
    Py_XDECREF(out_rows);
    gbuf_free(&g.messages);
    gbuf_free(&scratch);
    return result;
}

/* ---------------------------------------------------------------- encoding */

/* encode_legacy_messages(records, magic, base_offset, log_append_time | None) -> bytes | NotImplemented
 * The entries of uncompressed v0/v1 messages for the records, concatenated: each message's offset is
 * the record's minus base_offset (a v1 wrapper's inner messages are relative, §3.4), its timestamp the
 * record's or, for a LogAppendTime batch, log_append_time (with the attribute bit set, §3.5).
 * Reference: plugins/formats/legacy.py encode_message. NotImplemented for records with headers or
 * offsets beyond int64, which the reference refuses. */
PyObject *py_encode_legacy_messages(PyObject *self, PyObject *args) {
    PyObject *records, *o_lat;
    int magic;
    long long base_offset;
    if (!PyArg_ParseTuple(args, "OiLO", &records, &magic, &base_offset, &o_lat)) return NULL;
    int has_lat = o_lat != Py_None;
    long long lat = 0;
    if (has_lat && (lat = PyLong_AsLongLong(o_lat)) == -1 && PyErr_Occurred()) return NULL;
    if (magic != MAGIC_V0 && magic != MAGIC_V1) Py_RETURN_NOTIMPLEMENTED;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    int64_t total = 0, fixed = LOG_OVERHEAD + RECORD_OVERHEAD(magic); /* and the key and value */
    for (int64_t i = 0; i < v.n; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i, hl = v.hlist0 + i, relative;
        if (v.header_list_offsets[hl + 1] != v.header_list_offsets[hl] ||
            __builtin_sub_overflow(v.offsets[v.off0 + i], base_offset, &relative)) {
            record_view_release(&v);
            Py_RETURN_NOTIMPLEMENTED;
        }
        total += fixed;
        if (bit_set(v.key_valid, k)) total += v.key_offsets[k + 1] - v.key_offsets[k];
        if (bit_set(v.value_valid, val)) total += v.value_offsets[val + 1] - v.value_offsets[val];
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL) {
        record_view_release(&v);
        return NULL;
    }
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    int8_t attributes = has_lat ? ATTR_LOG_APPEND_TIME : 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < v.n; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i;
        uint8_t *entry = p, *q = p + LEGACY_KEY_AT(magic);
        entry[V0_MESSAGE_MAGIC_AT] = (uint8_t)magic;
        entry[V0_MESSAGE_ATTRIBUTES_AT] = (uint8_t)attributes;
        if (magic == MAGIC_V1) put64(entry + V1_MESSAGE_TIMESTAMP_AT, has_lat ? lat : v.timestamps[v.ts0 + i]);
        if (!bit_set(v.key_valid, k)) { put32(q, -1); q += 4; }
        else {
            int32_t n = v.key_offsets[k + 1] - v.key_offsets[k];
            put32(q, n);
            memcpy(q + 4, v.key_data + v.key_offsets[k], (size_t)n);
            q += 4 + n;
        }
        if (!bit_set(v.value_valid, val)) { put32(q, -1); q += 4; }
        else {
            int32_t n = v.value_offsets[val + 1] - v.value_offsets[val];
            put32(q, n);
            memcpy(q + 4, v.value_data + v.value_offsets[val], (size_t)n);
            q += 4 + n;
        }
        put64(entry + V0_MESSAGE_OFFSET_AT, v.offsets[v.off0 + i] - base_offset);
        put32(entry + V0_MESSAGE_MESSAGE_SIZE_AT, (int32_t)(q - entry - LOG_OVERHEAD));
        put32(entry + V0_MESSAGE_CRC_AT, (int32_t)crc32_update(0, entry + V0_MESSAGE_MAGIC_AT,
                                                                (size_t)(q - entry - V0_MESSAGE_MAGIC_AT)));
        p = q;
    }
    Py_END_ALLOW_THREADS
    record_view_release(&v);
    return out;
}

/* legacy_wrapper(entry) -> (offset, magic, attributes, crc, crc_valid, timestamp, value_at, value_len)
 * or NotImplemented: the facts of one v0/v1 message as LegacyMessage parses them (value_len -1 for a
 * null value), without copying its value (a compressed wrapper's value is the inner message set,
 * decompressed straight from the entry). NotImplemented for anything LegacyMessage refuses. */
int legacy_wrapper_parse(const uint8_t *p, int64_t size, legacy_wrapper_t *w) {
    if (size < V0_MESSAGE_KEY_AT) return 0;
    int magic = (int8_t)p[V0_MESSAGE_MAGIC_AT], attrs = (int8_t)p[V0_MESSAGE_ATTRIBUTES_AT];
    int64_t pos = LEGACY_KEY_AT(magic), n[2] = {0, 0}, at[2] = {0, 0};
    if (!((magic == MAGIC_V0 || magic == MAGIC_V1) && size - LOG_OVERHEAD >= RECORD_OVERHEAD(magic))) return 0;
    for (int field = 0; field < 2; field++) {
        if (pos + 4 > size) return 0;
        n[field] = be32(p + pos);
        pos += 4;
        at[field] = pos;
        if (n[field] >= 0) {
            if (pos + n[field] > size) return 0;
            pos += n[field];
        }
    }
    if (pos != size) return 0;
    w->offset = be64(p + V0_MESSAGE_OFFSET_AT);
    w->magic = magic;
    w->attributes = attrs;
    w->crc = (uint32_t)be32(p + V0_MESSAGE_CRC_AT);
    w->crc_valid = crc32_update(0, p + V0_MESSAGE_MAGIC_AT, (size_t)(size - V0_MESSAGE_MAGIC_AT)) == w->crc;
    w->timestamp = magic == MAGIC_V1 ? be64(p + V1_MESSAGE_TIMESTAMP_AT) : -1;
    w->value_at = at[1];
    w->value_len = n[1] < 0 ? -1 : n[1];
    return 1;
}

PyObject *py_legacy_wrapper(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    legacy_wrapper_t w;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = legacy_wrapper_parse(buf.buf, buf.len, &w);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (!ok) Py_RETURN_NOTIMPLEMENTED;
    return Py_BuildValue("LiiKOLLL", (long long)w.offset, w.magic, w.attributes, (unsigned long long)w.crc,
                         w.crc_valid ? Py_True : Py_False, (long long)w.timestamp, (long long)w.value_at,
                         (long long)w.value_len);
}

/* ---------------------------------------------------------------- checked and digested in place */

/* Whether a row describes its uncompressed legacy message p (what the frame scan reads of it): the
 * walk trusts no row it did not check. */
static int message_row_describes(const uint8_t *p, const frame *f, const message *m) {
    return f->magic == m->magic && f->compression == 0 && f->base_offset == m->offset &&
           f->last_offset == m->offset && f->records_count == 1 && f->crc == (uint32_t)be32(p + V0_MESSAGE_CRC_AT) &&
           f->attributes == (int8_t)p[V0_MESSAGE_ATTRIBUTES_AT] && f->max_timestamp == m->timestamp;
}

int legacy_message_vouched(const uint8_t *p, const frame *f, int check_crc) {
    message m;
    return f->magic < MAGIC_V2 && f->compression == 0 && parse_message(p, f->size, &m) &&
           message_row_describes(p, f, &m) && (!check_crc || m.crc_valid);
}

/* digest_legacy_messages(data, rows, start, stop, base, check_crc)
 *   -> (stopped_at, records, digest_high, digest_low, first_offset | None)
 * The content digest (kfmt.format.digest) of consecutive uncompressed v0/v1 messages, rows [start,
 * stop) of frames of `data` (the file from position `base` on), straight from their bytes: each
 * message checked as LegacyFormat.decode checks it (structure; its CRC-32 when check_crc) and hashed
 * in the canonical form of the record decode gives (offset, the stored timestamp or -1 for v0, key,
 * value, no headers). It stops at the first row it leaves to the per-entry path: a row that is not an
 * uncompressed legacy message, does not describe its entry, or one decode refuses. Reference:
 * kfmt.format.batch_runs.digest_messages_reference. */
PyObject *py_digest_legacy_messages(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*y*nnLp", &data, &rows, &start, &stop, &base, &check_crc)) return NULL;
    if (frame_run_args("digest_legacy_messages", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    int64_t first_offset = 0;
    int nomem = 0;
    uint64_t lo = 0, hi = 0;
    gbuf scratch = {0};
    Py_ssize_t i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        const frame *row = &f[i];
        const uint8_t *p = entry_of(data.buf, data.len, base, row);
        message m;
        if (p == NULL || row->magic >= MAGIC_V2 || row->compression != 0 || !parse_message(p, row->size, &m) ||
            !message_row_describes(p, row, &m) || (check_crc && !m.crc_valid))
            break;
        uint64_t h_hi = 0, h_lo = message_hash_sum(&m, &scratch, &nomem, &h_hi);
        if (nomem) break;
        kfmt_sum128(&lo, &hi, h_lo, h_hi);
        if (i == start) first_offset = m.offset;
    }
    Py_END_ALLOW_THREADS
    gbuf_free(&scratch);
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    if (nomem) return PyErr_NoMemory();
    PyObject *first = i > start ? PyLong_FromLongLong(first_offset) : Py_NewRef(Py_None);
    return Py_BuildValue("nLKKN", i, (long long)(i - start), (unsigned long long)hi, (unsigned long long)lo, first);
}

/* The messages of a compressed wrapper's decompressed inner set d[0..end) into `messages`, with the
 * offsets and timestamps decode_legacy_set gives their records; 0 wherever decode_legacy_set is
 * NotImplemented (the decode then decides). */
static int inner_set(const uint8_t *d, int64_t end, long long wrapper_offset, int wrapper_magic, int has_lat,
                     long long lat, int check_crc, gbuf *messages, int64_t *count, int *nomem) {
    int64_t pos = 0, n = 0;
    int ok = end <= INT32_MAX_;
    while (ok && end - pos >= LOG_OVERHEAD) {
        int64_t size = be32(d + pos + LOG_ENTRY_SIZE_AT);
        if (size < MIN_ENTRY_SIZE) { ok = 0; break; }
        if (pos + LOG_OVERHEAD + size > end) break; /* a truncated final inner message is dropped */
        message m;
        if (!parse_message(d + pos, LOG_OVERHEAD + size, &m) || (check_crc && !m.crc_valid)) { ok = 0; break; }
        if (gbuf_reserve(messages, sizeof m)) { *nomem = 1; return 0; }
        memcpy(messages->data + messages->len, &m, sizeof m);
        messages->len += sizeof m;
        n++;
        pos += LOG_OVERHEAD + size;
    }
    message *ms = (message *)messages->data;
    int64_t base = 0;
    if (ok && n == 0) ok = 0;
    /* v0 inner offsets are absolute; v1 ones relative to the wrapper's (§3.4; 0 means base 0) */
    if (ok && wrapper_magic == MAGIC_V1 && wrapper_offset != 0) {
        if (wrapper_offset < ms[n - 1].offset) ok = 0;
        else base = wrapper_offset - ms[n - 1].offset;
    }
    for (int64_t i = 0; ok && i < n; i++) {
        message *m = &ms[i];
        if (wrapper_magic == MAGIC_V1) m->offset = wrap_add(base, m->offset);
        m->timestamp = m->magic == MAGIC_V0 ? -1 : has_lat ? lat : m->timestamp;
    }
    *count = n;
    return ok;
}

int legacy_set_walk(const uint8_t *d, int64_t end, int64_t wrapper_offset, int wrapper_magic, int has_lat,
                    int64_t lat, int want_digest, gbuf *messages, gbuf *scratch, facts_acc *a, uint64_t *lo,
                    uint64_t *hi, int *nomem) {
    int64_t n = 0;
    messages->len = 0;
    if (!inner_set(d, end, wrapper_offset, wrapper_magic, has_lat, lat, 1, messages, &n, nomem)) return 0;
    const message *ms = (const message *)messages->data;
    for (int64_t i = 0; i < n; i++) {
        facts_note(a, ms[i].offset, ms[i].timestamp);
        a->magics |= 1 << ms[i].magic;
        if (want_digest) {
            uint64_t h_hi = 0, h_lo = message_hash_sum(&ms[i], scratch, nomem, &h_hi);
            if (*nomem) return 0;
            kfmt_sum128(lo, hi, h_lo, h_hi);
        }
    }
    return 1;
}

static int lat_arg(PyObject *o_lat, long long *lat) {
    *lat = 0;
    return o_lat != Py_None && (*lat = PyLong_AsLongLong(o_lat)) == -1 && PyErr_Occurred() ? -1 : 0;
}

/* digest_legacy_set(data, wrapper_offset, wrapper_magic, log_append_time | None, check_crc)
 *   -> (records, digest_high, digest_low, first_offset) | NotImplemented
 * The content digest of a compressed wrapper's records straight from its decompressed message set:
 * the records decode_legacy_set (above, the inner-set case) would make, hashed without building
 * their columns. NotImplemented wherever decode_legacy_set is (the decode then decides). */
PyObject *py_digest_legacy_set(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long wrapper_offset, lat;
    PyObject *o_lat;
    int wrapper_magic, check_crc;
    if (!PyArg_ParseTuple(args, "y*LiOp", &buf, &wrapper_offset, &wrapper_magic, &o_lat, &check_crc)) return NULL;
    if (lat_arg(o_lat, &lat)) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    gbuf messages = {0}, scratch = {0};
    int ok, nomem = 0;
    uint64_t lo = 0, hi = 0;
    int64_t first = 0, n = 0;
    Py_BEGIN_ALLOW_THREADS
    ok = inner_set(buf.buf, buf.len, wrapper_offset, wrapper_magic, o_lat != Py_None, lat, check_crc, &messages, &n,
                   &nomem);
    message *ms = (message *)messages.data;
    for (int64_t i = 0; ok && !nomem && i < n; i++) {
        uint64_t h_hi = 0, h_lo = message_hash_sum(&ms[i], &scratch, &nomem, &h_hi);
        kfmt_sum128(&lo, &hi, h_lo, h_hi);
    }
    if (ok && n) first = ms[0].offset;
    Py_END_ALLOW_THREADS
    gbuf_free(&messages);
    gbuf_free(&scratch);
    PyBuffer_Release(&buf);
    if (nomem) return PyErr_NoMemory();
    if (!ok) Py_RETURN_NOTIMPLEMENTED;
    return Py_BuildValue("LKKL", (long long)n, (unsigned long long)hi, (unsigned long long)lo, (long long)first);
}

/* legacy_set_facts(data, wrapper_offset, wrapper_magic, log_append_time | None, check_crc)
 *   -> facts (facts.c's entry_facts) | NotImplemented
 * kfmt info's and verify's facts (facts.c) of a compressed wrapper's records, from its decompressed message set
 * walked as digest_legacy_set walks it. */
PyObject *py_legacy_set_facts(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long wrapper_offset, lat;
    PyObject *o_lat;
    int wrapper_magic, check_crc;
    if (!PyArg_ParseTuple(args, "y*LiOp", &buf, &wrapper_offset, &wrapper_magic, &o_lat, &check_crc)) return NULL;
    if (lat_arg(o_lat, &lat)) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    gbuf messages = {0};
    int ok, nomem = 0;
    int64_t n = 0;
    facts_acc a = {0};
    Py_BEGIN_ALLOW_THREADS
    ok = inner_set(buf.buf, buf.len, wrapper_offset, wrapper_magic, o_lat != Py_None, lat, check_crc, &messages, &n,
                   &nomem);
    message *ms = (message *)messages.data;
    for (int64_t i = 0; ok && !nomem && i < n; i++) {
        facts_note(&a, ms[i].offset, ms[i].timestamp);
        a.magics |= 1 << ms[i].magic;
    }
    Py_END_ALLOW_THREADS
    gbuf_free(&messages);
    PyBuffer_Release(&buf);
    if (nomem) return PyErr_NoMemory();
    if (!ok) Py_RETURN_NOTIMPLEMENTED;
    return facts_result(&a);
}
