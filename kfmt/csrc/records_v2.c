/* The records of a v2 batch (docs/format.md §4.4) decoded into columns and encoded from them.
 * Reference implementation: kfmt/format/v2_records.py (decode_records, encode_records); the
 * checks, their order, messages and positions are the same. */
#include "native.h"

#include "frames.h"
#include "records_v2.h"

enum { OK = 0, BAD_DATA = -1, NO_MEMORY = -2 };

/* The records d[0..end) of one batch into rows row0.. of c (a run of batches fills one block). */
static int decode_records(const uint8_t *d, int64_t end, int64_t count, int64_t base_offset,
                          int64_t base_timestamp, int has_lat, int64_t lat, columns *c, int64_t row0, kerr *e) {
    int64_t pos = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t row = row0 + i;
        v2_record r;
        if (parse_v2_record(d, &pos, end, i, &r, e)) return BAD_DATA;
        /* (the data buffers hold the whole input: no record can need more) */
        if (r.klen >= 0) {
            memcpy(c->key_data.data + c->key_data.len, r.key, (size_t)r.klen);
            c->key_data.len += (size_t)r.klen;
        } else if (columns_null_key(c, row)) {
            return NO_MEMORY;
        }
        c->key_offsets[row + 1] = (int32_t)c->key_data.len;
        if (r.vlen >= 0) {
            memcpy(c->value_data.data + c->value_data.len, r.value, (size_t)r.vlen);
            c->value_data.len += (size_t)r.vlen;
        } else if (columns_null_value(c, row)) {
            return NO_MEMORY;
        }
        c->value_offsets[row + 1] = (int32_t)c->value_data.len;
        int64_t hpos = r.headers_at;
        for (int64_t h = 0; h < r.hcount; h++) {
            const uint8_t *hkey, *hvalue;
            int64_t hklen, hvlen;
            v2_next_header(d, &hpos, &r, &hkey, &hklen, &hvalue, &hvlen);
            if (columns_add_header(c, hkey, hklen, hvalue, hvlen < 0 ? -1 : hvlen)) return NO_MEMORY;
        }
        c->header_list_offsets[row + 1] = (int32_t)c->headers;
        c->offsets[row] = wrap_add(base_offset, r.off_delta);
        c->timestamps[row] = has_lat ? lat : wrap_add(base_timestamp, r.ts_delta);
    }
    if (pos != end) {
        kerr_set(e, pos, "%lld bytes follow the %lld declared records", (long long)(end - pos), (long long)count);
        return BAD_DATA;
    }
    return OK;
}

/* An int64 argument; 0 and NotImplemented-worthy when the value does not fit. */
static int arg_int64(PyObject *o, int64_t *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) return 0;
    *out = v;
    return 1;
}

/* decode_v2_records(data, count, base_offset, base_timestamp, log_append_time | None)
 *   -> pyarrow.RecordBatch (RECORD_SCHEMA), or NotImplemented for arguments beyond int64 or data
 *   beyond Arrow's 32-bit offsets; raises DecodeError(message, position) for bad data. */
PyObject *py_decode_v2_records(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *o_count, *o_base, *o_ts, *o_lat;
    if (!PyArg_ParseTuple(args, "y*OOOO", &buf, &o_count, &o_base, &o_ts, &o_lat)) return NULL;
    int64_t count, base_offset, base_ts, lat = 0;
    int has_lat = o_lat != Py_None, r;
    if ((r = arg_int64(o_count, &count)) != 1 || (r = arg_int64(o_base, &base_offset)) != 1 ||
        (r = arg_int64(o_ts, &base_ts)) != 1 || (has_lat && (r = arg_int64(o_lat, &lat)) != 1) ||
        buf.len > INT32_MAX) {
        PyBuffer_Release(&buf);
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    const uint8_t *d = buf.buf;
    int64_t end = buf.len;
    kerr e = {0};
    if (count > end / V2_MIN_RECORD_SIZE) {
        /* checked before the columns are allocated: a corrupt count must not cost gigabytes */
        kerr_set(&e, 0, "record batch declares %lld records but %lld bytes of records can hold at most %lld",
                 (long long)count, (long long)end, (long long)(end / V2_MIN_RECORD_SIZE));
        PyBuffer_Release(&buf);
        return raise_kerr(&e);
    }
    int64_t n = count < 0 ? 0 : count;
    columns c;
    /* key and value bytes are parts of the input: buffers of its size never need to grow */
    if (columns_init(&c, n, (size_t)end) || gbuf_reserve(&c.key_data, (size_t)end)) {
        PyBuffer_Release(&buf);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    r = decode_records(d, end, count, base_offset, base_ts, has_lat, lat, &c, 0, &e);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (r != OK) {
        columns_free(&c);
        return r == NO_MEMORY ? PyErr_NoMemory() : raise_kerr(&e);
    }
    return columns_to_record_batch(&c);
}

/* ---------------------------------------------------------------- runs of batches */

/* decode_v2_batches(data, rows, start, stop, base, check_crc) -> (stopped_at, RecordBatch)
 * The records of consecutive uncompressed v2 data batches, rows [start, stop) of frames of `data`
 * (the file from position `base` on), as one column block (RECORD_SCHEMA): what the v2 format's
 * decode of each gives (plugins/formats/v2.py: its CRC-32C when check_crc, its record count, each
 * record as decode_records parses it), concatenated; batch i's records are the next records_count
 * rows. It stops at the first row it leaves to that per-batch decode: anything but an uncompressed
 * v2 data batch, a row that does not describe its entry, a declared count its bytes cannot hold, or
 * a batch decode refuses (which the per-batch decode then reports, with its message and position),
 * and where the run's bytes would pass Arrow's 32-bit offsets. Reference:
 * kfmt.format.batch_runs.decode_run_reference. */
PyObject *py_decode_v2_batches(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*y*nnLp", &data, &rows, &start, &stop, &base, &check_crc)) return NULL;
    if (frame_run_args("decode_v2_batches", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    /* sizes first: the rows (records) and bytes the columns need, up to the first row whose header
     * alone rules it out (a corrupt count must not cost gigabytes) */
    int64_t records = 0, bytes = 0;
    Py_ssize_t limit = start;
    for (; limit < stop; limit++) {
        const frame *row = &f[limit];
        int64_t payload = (int64_t)row->size - V2_BATCH_RECORDS_AT;
        if (row->magic != MAGIC_V2 || row->compression != 0 || (row->attributes & ATTR_CONTROL) || payload < 0 ||
            row->records_count < 0 || row->records_count > payload / V2_MIN_RECORD_SIZE || bytes + payload > INT32_MAX)
            break;
        records += row->records_count;
        bytes += payload;
    }
    columns c;
    if (columns_init(&c, records, (size_t)bytes) || gbuf_reserve(&c.key_data, (size_t)bytes)) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&rows);
        return PyErr_NoMemory();
    }
    const uint8_t *d = data.buf;
    int64_t done = 0;
    int nomem = 0;
    Py_ssize_t i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < limit; i++) {
        const frame *row = &f[i];
        int64_t at = row->position - base, size = row->size;
        if (at < 0 || at > (int64_t)data.len - size) break;
        const uint8_t *p = d + at;
        if (!v2_row_describes(p, row)) break;
        if (check_crc && crc32c_update(0, p + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM)) != row->crc) break;
        int64_t count = row->records_count;
        if (count == 0) continue; /* decode looks no further (docs/format.md §4.7) */
        kerr e = {0};
        columns_mark mark = columns_marked(&c);
        int r = decode_records(p + V2_BATCH_RECORDS_AT, size - V2_BATCH_RECORDS_AT, count, row->base_offset,
                               row->base_timestamp, (row->attributes & ATTR_LOG_APPEND_TIME) != 0, row->max_timestamp,
                               &c, done, &e);
        if (r != OK) {
            columns_back_to(&c, &mark);
            nomem = r == NO_MEMORY;
            break;
        }
        done += count;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    if (nomem) {
        columns_free(&c);
        return PyErr_NoMemory();
    }
    c.n = done; /* the rows decoded; the buffers stay long enough */
    PyObject *batch = columns_to_record_batch(&c);
    if (batch == NULL) return NULL;
    return Py_BuildValue("nN", i, batch);
}

/* decode_v2_payloads(payloads, facts) -> (stopped_at, RecordBatch)
 * The records of several compressed v2 data batches, each already inflated by its codec (the records
 * section, kfmt.format.batch_runs.inflated_v2), as one column block: payload i decoded as the v2
 * format's decode_records decodes it with facts row i (int64: count, base offset, base timestamp,
 * LogAppendTime 0/1, its time), concatenated. It stops at the first payload decode refuses (or whose
 * declared count its bytes cannot hold, or past Arrow's 32-bit offsets); the per-batch decode then
 * reports it. Reference: kfmt.format.inflated_runs.inflated_blocks_reference. */
PyObject *py_decode_v2_payloads(PyObject *self, PyObject *args) {
    PyObject *payloads;
    Py_buffer facts;
    if (!PyArg_ParseTuple(args, "Oy*", &payloads, &facts)) return NULL;
    buffer_list l;
    if (buffer_list_open(&l, payloads)) {
        PyBuffer_Release(&facts);
        return NULL;
    }
    if (facts.len != (Py_ssize_t)(l.n * 5 * 8)) {
        buffer_list_release(&l);
        PyBuffer_Release(&facts);
        PyErr_SetString(PyExc_ValueError, "decode_v2_payloads: five int64 facts per payload");
        return NULL;
    }
    const int64_t *fa = facts.buf;
    int64_t records = 0, bytes = 0;
    Py_ssize_t limit = 0;
    for (; limit < l.n; limit++) {
        int64_t count = fa[limit * 5], len = l.views[limit].len;
        if (count < 0 || count > len / V2_MIN_RECORD_SIZE || bytes + len > INT32_MAX) break;
        records += count;
        bytes += len;
    }
    columns c;
    if (columns_init(&c, records, (size_t)bytes) || gbuf_reserve(&c.key_data, (size_t)bytes)) {
        buffer_list_release(&l);
        PyBuffer_Release(&facts);
        return PyErr_NoMemory();
    }
    int64_t done = 0;
    int nomem = 0;
    Py_ssize_t i = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < limit; i++) {
        const int64_t *f = fa + i * 5;
        kerr e = {0};
        columns_mark mark = columns_marked(&c);
        int r = decode_records(l.views[i].buf, l.views[i].len, f[0], f[1], f[2], f[3] != 0, f[4], &c, done, &e);
        if (r != OK) {
            columns_back_to(&c, &mark);
            nomem = r == NO_MEMORY;
            break;
        }
        done += f[0];
    }
    Py_END_ALLOW_THREADS
    buffer_list_release(&l);
    PyBuffer_Release(&facts);
    if (nomem) {
        columns_free(&c);
        return PyErr_NoMemory();
    }
    c.n = done;
    PyObject *batch = columns_to_record_batch(&c);
    if (batch == NULL) return NULL;
    return Py_BuildValue("nN", i, batch);
}

/* ---------------------------------------------------------------- encoding */

/* The record's size and, when out != NULL, its bytes (v2_records.encode_records). Returns -1 when a
 * delta leaves int64, where the Python reference's arbitrary-precision arithmetic decides. */
static int64_t encode_record(const record_view *v, int64_t i, int64_t base_offset, int64_t base_ts,
                             uint8_t *out) {
    int64_t offset = v->offsets[v->off0 + i], ts = v->timestamps[v->ts0 + i], ts_delta, off_delta;
    if (__builtin_sub_overflow(ts, base_ts, &ts_delta) || __builtin_sub_overflow(offset, base_offset, &off_delta))
        return -1;
    int64_t k = v->key0 + i, val = v->value0 + i, hl = v->hlist0 + i;
    int key_null = !bit_set(v->key_valid, k), value_null = !bit_set(v->value_valid, val);
    int64_t klen = key_null ? 0 : v->key_offsets[k + 1] - v->key_offsets[k];
    int64_t vlen = value_null ? 0 : v->value_offsets[val + 1] - v->value_offsets[val];
    int64_t h0 = v->header_list_offsets[hl], h1 = v->header_list_offsets[hl + 1];
    uint64_t zts = zigzag(ts_delta), zoff = zigzag(off_delta);
    int64_t body = 1 + varint_size_u(zts) + varint_size_u(zoff) +
                   (key_null ? 1 : varint_size_u(zigzag(klen)) + klen) +
                   (value_null ? 1 : varint_size_u(zigzag(vlen)) + vlen) + varint_size_u(zigzag(h1 - h0));
    for (int64_t j = h0; j < h1; j++) {
        int64_t hk = v->hkey0 + j, hv = v->hvalue0 + j;
        int64_t hklen = v->hkey_offsets[hk + 1] - v->hkey_offsets[hk];
        body += varint_size_u(zigzag(hklen)) + hklen;
        if (!bit_set(v->hvalue_valid, hv)) body += 1;
        else {
            int64_t hvlen = v->hvalue_offsets[hv + 1] - v->hvalue_offsets[hv];
            body += varint_size_u(zigzag(hvlen)) + hvlen;
        }
    }
    int64_t total = varint_size_u(zigzag(body)) + body;
    if (out == NULL) return total;
    uint8_t *p = put_varint_u(out, zigzag(body));
    *p++ = 0; /* attributes */
    p = put_varint_u(p, zts);
    p = put_varint_u(p, zoff);
    if (key_null) *p++ = 1;
    else {
        p = put_varint_u(p, zigzag(klen));
        memcpy(p, v->key_data + v->key_offsets[k], (size_t)klen);
        p += klen;
    }
    if (value_null) *p++ = 1;
    else {
        p = put_varint_u(p, zigzag(vlen));
        memcpy(p, v->value_data + v->value_offsets[val], (size_t)vlen);
        p += vlen;
    }
    p = put_varint_u(p, zigzag(h1 - h0));
    for (int64_t j = h0; j < h1; j++) {
        int64_t hk = v->hkey0 + j, hv = v->hvalue0 + j;
        int64_t hklen = v->hkey_offsets[hk + 1] - v->hkey_offsets[hk];
        p = put_varint_u(p, zigzag(hklen));
        memcpy(p, v->hkey_data + v->hkey_offsets[hk], (size_t)hklen);
        p += hklen;
        if (!bit_set(v->hvalue_valid, hv)) *p++ = 1;
        else {
            int64_t hvlen = v->hvalue_offsets[hv + 1] - v->hvalue_offsets[hv];
            p = put_varint_u(p, zigzag(hvlen));
            memcpy(p, v->hvalue_data + v->hvalue_offsets[hv], (size_t)hvlen);
            p += hvlen;
        }
    }
    return total;
}

/* encode_v2_records(records, base_offset, base_timestamp) -> bytes, or NotImplemented where the
 * Python reference decides (types other than RECORD_SCHEMA's, nulls the schema forbids, deltas
 * beyond int64). */
PyObject *py_encode_v2_records(PyObject *self, PyObject *args) {
    PyObject *records, *o_base, *o_ts;
    if (!PyArg_ParseTuple(args, "OOO", &records, &o_base, &o_ts)) return NULL;
    int64_t base_offset, base_ts;
    int r;
    if ((r = arg_int64(o_base, &base_offset)) != 1 || (r = arg_int64(o_ts, &base_ts)) != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    record_view v;
    if ((r = record_view_open(&v, records)) != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    int64_t total = 0;
    for (int64_t i = 0; i < v.n; i++) {
        int64_t size = encode_record(&v, i, base_offset, base_ts, NULL);
        if (size < 0) {
            record_view_release(&v);
            Py_RETURN_NOTIMPLEMENTED;
        }
        total += size;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        record_view_release(&v);
        return NULL;
    }
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < v.n; i++) p += encode_record(&v, i, base_offset, base_ts, p);
    Py_END_ALLOW_THREADS
    record_view_release(&v);
    return out;
}


/* encode_v2_bodies(records, table) -> (bodies, sizes) or NotImplemented: the records sections of many
 * uncompressed v2 batches at once, batch b being the next table[3b] records of `records` encoded
 * against base offset table[3b+1] and base timestamp table[3b+2] (encode_v2_records' bytes for each,
 * concatenated; `sizes` bytes of int64, one per batch). NotImplemented where encode_v2_records would
 * give it for some batch. For kfmt.format.wrapper_runs: one call per block of converted wrappers. */
PyObject *py_encode_v2_bodies(PyObject *self, PyObject *args) {
    PyObject *records;
    Py_buffer table;
    if (!PyArg_ParseTuple(args, "Oy*", &records, &table)) return NULL;
    const int64_t *t = table.buf;
    Py_ssize_t batches = table.len / 24;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        PyBuffer_Release(&table);
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *sizes = PyBytes_FromStringAndSize(NULL, batches * 8);
    int64_t total = 0, row = 0, ok = sizes != NULL && table.len % 24 == 0;
    for (Py_ssize_t b = 0; ok && b < batches; b++) {
        int64_t size = 0;
        for (int64_t i = 0; ok && i < t[3 * b]; i++) {
            int64_t one = row + i < v.n ? encode_record(&v, row + i, t[3 * b + 1], t[3 * b + 2], NULL) : -1;
            ok = one >= 0;
            size += one;
        }
        ((int64_t *)PyBytes_AS_STRING(sizes))[b] = size;
        total += size;
        row += t[3 * b];
    }
    PyObject *bodies = ok && row == v.n ? PyBytes_FromStringAndSize(NULL, total) : NULL;
    if (bodies != NULL) {
        uint8_t *p = (uint8_t *)PyBytes_AS_STRING(bodies);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t b = 0, i = 0; b < batches; b++)
            for (int64_t end = i + t[3 * b]; i < end; i++) p += encode_record(&v, i, t[3 * b + 1], t[3 * b + 2], p);
        Py_END_ALLOW_THREADS
    }
    record_view_release(&v);
    PyBuffer_Release(&table);
    if (bodies == NULL) {
        Py_XDECREF(sizes);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    return Py_BuildValue("NN", bodies, sizes);
}
