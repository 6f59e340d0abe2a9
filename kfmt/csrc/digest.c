/* The content digest's per-record part (kfmt/report.py, digest version 2): the sum modulo 2**128 of
 * the XXH3-128 hashes of each record's canonical form. Reference: kfmt.format.digest.record_hashes_sum. */
#include "native.h"
#include "frames.h"
#include "records_v2.h"

#include "xxh3.h"

static uint8_t *put_sized(uint8_t *p, const uint8_t *data, int64_t len, int is_null) {
    if (is_null) {
        put32(p, -1);
        return p + 4;
    }
    put32(p, (int32_t)len);
    memcpy(p + 4, data, (size_t)len);
    return p + 4 + len;
}

/* record_hashes_sum(records) -> int, or NotImplemented where the Python reference decides. */
PyObject *py_record_hashes_sum(PyObject *self, PyObject *args) {
    PyObject *records;
    if (!PyArg_ParseTuple(args, "O", &records)) return NULL;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    uint64_t lo = 0, hi = 0;
    gbuf scratch = {0};
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < v.n && !nomem; i++) {
        int64_t k = v.key0 + i, val = v.value0 + i, hl = v.hlist0 + i;
        int key_null = !bit_set(v.key_valid, k), value_null = !bit_set(v.value_valid, val);
        int64_t klen = key_null ? 0 : v.key_offsets[k + 1] - v.key_offsets[k];
        int64_t vlen = value_null ? 0 : v.value_offsets[val + 1] - v.value_offsets[val];
        int64_t h0 = v.header_list_offsets[hl], h1 = v.header_list_offsets[hl + 1];
        size_t size = 16 + 4 + (size_t)klen + 4 + (size_t)vlen + 4;
        for (int64_t j = h0; j < h1; j++) {
            int64_t hk = v.hkey0 + j, hv = v.hvalue0 + j;
            size += 8 + (size_t)(v.hkey_offsets[hk + 1] - v.hkey_offsets[hk]);
            if (bit_set(v.hvalue_valid, hv)) size += (size_t)(v.hvalue_offsets[hv + 1] - v.hvalue_offsets[hv]);
        }
        scratch.len = 0;
        if (gbuf_reserve(&scratch, size)) {
            nomem = 1;
            break;
        }
        uint8_t *p = scratch.data;
        put64(p, v.offsets[v.off0 + i]);
        put64(p + 8, v.timestamps[v.ts0 + i]);
        p = put_sized(p + 16, v.key_data + (key_null ? 0 : v.key_offsets[k]), klen, key_null);
        p = put_sized(p, v.value_data + (value_null ? 0 : v.value_offsets[val]), vlen, value_null);
        put32(p, (int32_t)(h1 - h0));
        p += 4;
        for (int64_t j = h0; j < h1; j++) {
            int64_t hk = v.hkey0 + j, hv = v.hvalue0 + j;
            p = put_sized(p, v.hkey_data + v.hkey_offsets[hk], v.hkey_offsets[hk + 1] - v.hkey_offsets[hk], 0);
            int hv_null = !bit_set(v.hvalue_valid, hv);
            p = put_sized(p, v.hvalue_data + (hv_null ? 0 : v.hvalue_offsets[hv]),
                          hv_null ? 0 : v.hvalue_offsets[hv + 1] - v.hvalue_offsets[hv], hv_null);
        }
        kfmt_hash128 h = kfmt_xxh3_128(scratch.data, (size_t)(p - scratch.data));
        kfmt_sum128(&lo, &hi, h.lo, h.hi);
    }
    Py_END_ALLOW_THREADS
    gbuf_free(&scratch);
    record_view_release(&v);
    if (nomem) return PyErr_NoMemory();
    return Py_BuildValue("KK", (unsigned long long)hi, (unsigned long long)lo);
}

/* ---------------------------------------------------------------- batches walked in place */

/* Whether a row describes the header of its entry p (what kfmt.format.frames' rows say of it, as the frame
 * scan reads it): the walk trusts no row it did not check. */
static int row_describes(const uint8_t *p, const frame *f) {
    int16_t attributes = be16(p + V2_BATCH_ATTRIBUTES_AT);
    return p[V2_BATCH_MAGIC_AT] == MAGIC_V2 && f->magic == MAGIC_V2 &&
           be64(p + V2_BATCH_BASE_OFFSET_AT) == f->base_offset &&
           (int64_t)be32(p + V2_BATCH_BATCH_LENGTH_AT) + LOG_OVERHEAD == f->size &&
           be32(p + V2_BATCH_PARTITION_LEADER_EPOCH_AT) == f->partition_leader_epoch &&
           (uint32_t)be32(p + V2_BATCH_CRC_AT) == f->crc && attributes == f->attributes &&
           wrap_add(f->base_offset, be32(p + V2_BATCH_LAST_OFFSET_DELTA_AT)) == f->last_offset &&
           be64(p + V2_BATCH_BASE_TIMESTAMP_AT) == f->base_timestamp &&
           be64(p + V2_BATCH_MAX_TIMESTAMP_AT) == f->max_timestamp &&
           be64(p + V2_BATCH_PRODUCER_ID_AT) == f->producer_id &&
           be16(p + V2_BATCH_PRODUCER_EPOCH_AT) == f->producer_epoch &&
           be32(p + V2_BATCH_BASE_SEQUENCE_AT) == f->base_sequence &&
           be32(p + V2_BATCH_RECORDS_COUNT_AT) == f->records_count && f->compression == (attributes & CODEC_MASK) &&
           f->timestamp_type == (attributes & ATTR_LOG_APPEND_TIME ? 1 : 0);
}

int v2_row_describes(const uint8_t *p, const frame *f) { return row_describes(p, f); }

/* The sum of the record hashes of one uncompressed batch's records d[0..end) (decode_records' walk,
 * records_v2.h); 0 if decode would refuse them. */
static int hash_batch_records(const uint8_t *d, int64_t end, int64_t count, int64_t base_offset, int64_t base_ts,
                              int has_lat, int64_t lat, gbuf *scratch, uint64_t *lo, uint64_t *hi,
                              int64_t *first_offset, int *nomem, facts_acc *a) {
    kerr e = {0};
    int64_t pos = 0;
    if (count > end / V2_MIN_RECORD_SIZE) return 0;
    for (int64_t i = 0; i < count; i++) {
        v2_record r;
        int64_t record_start = pos;
        if (parse_v2_record(d, &pos, end, i, &r, &e)) return 0;
        /* kfmt.format.digest's canonical form: 28 bytes, the key, value and header bytes, 8 per header (a
         * header takes at least 2 bytes of the record): never more than 28 + 5 per record byte */
        size_t size = 28 + 5 * (size_t)(r.end - record_start);
        scratch->len = 0;
        if (gbuf_reserve(scratch, size)) {
            *nomem = 1;
            return 0;
        }
        int64_t offset = wrap_add(base_offset, r.off_delta), timestamp = has_lat ? lat : wrap_add(base_ts, r.ts_delta);
        if (i == 0) *first_offset = offset;
        if (a != NULL) facts_note(a, offset, timestamp);
        uint8_t *q = scratch->data;
        put64(q, offset);
        put64(q + 8, timestamp);
        q = put_sized(q + 16, r.key, r.klen, r.klen < 0);
        q = put_sized(q, r.value, r.vlen, r.vlen < 0);
        put32(q, (int32_t)r.hcount);
        q += 4;
        int64_t hpos = r.headers_at;
        for (int64_t h = 0; h < r.hcount; h++) {
            const uint8_t *hkey, *hvalue;
            int64_t hklen, hvlen;
            v2_next_header(d, &hpos, &r, &hkey, &hklen, &hvalue, &hvlen);
            q = put_sized(q, hkey, hklen, 0);
            q = put_sized(q, hvalue, hvlen, hvlen < 0);
        }
        kfmt_hash128 hash = kfmt_xxh3_128(scratch->data, (size_t)(q - scratch->data));
        kfmt_sum128(lo, hi, hash.lo, hash.hi);
    }
    return pos == end;
}

int v2_records_walk(const uint8_t *d, int64_t end, int64_t count, int64_t base_offset, int64_t base_ts, int has_lat,
                    int64_t lat, int want_digest, gbuf *scratch, facts_acc *a, uint64_t *lo, uint64_t *hi,
                    int *nomem) {
    if (count <= 0) return 0;
    if (want_digest) {
        int64_t first = 0;
        return hash_batch_records(d, end, count, base_offset, base_ts, has_lat, lat, scratch, lo, hi, &first, nomem,
                                  a);
    }
    /* the same walk without the hashes (facts.c's v2_facts) */
    kerr e = {0};
    int64_t pos = 0;
    if (count > end / V2_MIN_RECORD_SIZE) return 0;
    for (int64_t i = 0; i < count; i++) {
        v2_record r;
        if (parse_v2_record(d, &pos, end, i, &r, &e)) return 0;
        facts_note(a, wrap_add(base_offset, r.off_delta), has_lat ? lat : wrap_add(base_ts, r.ts_delta));
    }
    return pos == end;
}

/* digest_v2_records(payload, count, base_offset, base_timestamp, log_append_time | None)
 *   -> (records, digest_high, digest_low, first_offset) | NotImplemented
 * The content digest of a v2 batch's records from its (decompressed) records section, walked as
 * decode_records walks it (records_v2.h), without building columns; NotImplemented where decode
 * would refuse them (it then reports). */
PyObject *py_digest_v2_records(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long count, base_offset, base_ts;
    PyObject *o_lat;
    if (!PyArg_ParseTuple(args, "y*LLLO", &buf, &count, &base_offset, &base_ts, &o_lat)) return NULL;
    int has_lat = o_lat != Py_None;
    long long lat = 0;
    if (has_lat && (lat = PyLong_AsLongLong(o_lat)) == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    uint64_t lo = 0, hi = 0;
    int64_t first = 0;
    int nomem = 0, ok;
    gbuf scratch = {0};
    Py_BEGIN_ALLOW_THREADS
    ok = count > 0 && hash_batch_records(buf.buf, buf.len, count, base_offset, base_ts, has_lat, lat, &scratch, &lo,
                                         &hi, &first, &nomem, NULL);
    Py_END_ALLOW_THREADS
    gbuf_free(&scratch);
    PyBuffer_Release(&buf);
    if (nomem) return PyErr_NoMemory();
    if (!ok) Py_RETURN_NOTIMPLEMENTED;
    return Py_BuildValue("LKKL", count, (unsigned long long)hi, (unsigned long long)lo, (long long)first);
}

/* digest_v2_batches(data, rows, start, stop, base, check_crc)
 *   -> (stopped_at, records, digest_high, digest_low, first_offset | None)
 * The content digest (kfmt.format.digest) of the records of consecutive uncompressed v2 data batches, rows
 * [start, stop) of frames of `data` (the file from position `base` on), straight from their bytes: no
 * columns. Each batch is checked as plugins/formats/v2.py decode checks it (its CRC-32C when
 * check_crc, its record count, each record as decode_records parses it, records_v2.h). It stops at
 * the first row it leaves to that per-batch path: anything but an uncompressed v2 data batch
 * (compressed, control, another magic), a row that does not describe its entry, or a batch decode
 * refuses, which the per-batch path then reports. Reference: kfmt.format.batch_runs.digest_batches_reference. */
PyObject *py_digest_v2_batches(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*y*nnLp", &data, &rows, &start, &stop, &base, &check_crc)) return NULL;
    if (frame_run_args("digest_v2_batches", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    const uint8_t *d = data.buf;
    int64_t records = 0, first_offset = 0;
    int has_first = 0, nomem = 0;
    uint64_t lo = 0, hi = 0;
    gbuf scratch = {0};
    Py_ssize_t i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        const frame *row = &f[i];
        int64_t at = row->position - base, size = row->size;
        if (at < 0 || size < V2_BATCH_OVERHEAD || at > (int64_t)data.len - size) break;
        const uint8_t *p = d + at;
        if (!row_describes(p, row) || row->compression != 0 || (row->attributes & ATTR_CONTROL)) break;
        if (check_crc && crc32c_update(0, p + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM)) != row->crc) break;
        int64_t count = row->records_count;
        if (count < 0) break;
        if (count == 0) continue; /* an empty batch: decode looks no further (docs/format.md §4.7) */
        uint64_t batch_lo = 0, batch_hi = 0;
        int64_t batch_first = 0;
        int has_lat = row->timestamp_type == 1;
        if (!hash_batch_records(p + V2_BATCH_RECORDS_AT, size - V2_BATCH_RECORDS_AT, count, row->base_offset,
                                row->base_timestamp, has_lat, row->max_timestamp, &scratch, &batch_lo, &batch_hi,
                                &batch_first, &nomem, NULL))
            break;
        kfmt_sum128(&lo, &hi, batch_lo, batch_hi);
        records += count;
        if (!has_first) {
            first_offset = batch_first;
            has_first = 1;
        }
    }
    Py_END_ALLOW_THREADS
    gbuf_free(&scratch);
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    if (nomem) return PyErr_NoMemory();
    PyObject *first = has_first ? PyLong_FromLongLong(first_offset) : Py_NewRef(Py_None);
    return Py_BuildValue("nLKKN", i, (long long)records, (unsigned long long)hi, (unsigned long long)lo, first);
}

/* ---------------------------------------------------------------- the compaction offset map */

/* kfmt/format/offset_map.py: Kafka's SkimpyOffsetMap, an open-addressing table of `slots` rows of
 * three uint64 (key hash high, key hash low, offset + 1; 0: an empty slot), keyed by the MD5 of each
 * record key and probed linearly from hash-high mod slots. These are its Python reference's
 * operations, record by record instead of a batch at a time (same table contents). */
#include "md5.h"

/* key_md5s(records, indices) -> bytes: the MD5 of the key of each record named (an int64 array), 16
 * bytes each; NotImplemented where the Python reference decides (a null key, other column types). */
PyObject *py_key_md5s(PyObject *self, PyObject *args) {
    PyObject *records;
    Py_buffer idx;
    if (!PyArg_ParseTuple(args, "Oy*", &records, &idx)) return NULL;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        PyBuffer_Release(&idx);
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    const int64_t *indices = idx.buf;
    Py_ssize_t n = idx.len / 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 16);
    int refused = 0;
    if (out != NULL) {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < n; j++) {
            int64_t i = indices[j];
            if (i < 0 || i >= v.n || !bit_set(v.key_valid, v.key0 + i)) {
                refused = 1;
                break;
            }
            int64_t k = v.key0 + i;
            kfmt_md5(v.key_data + v.key_offsets[k], (size_t)(v.key_offsets[k + 1] - v.key_offsets[k]), o + 16 * j);
        }
        Py_END_ALLOW_THREADS
    }
    record_view_release(&v);
    PyBuffer_Release(&idx);
    if (out != NULL && refused) {
        Py_DECREF(out);
        Py_RETURN_NOTIMPLEMENTED;
    }
    return out;
}

static int map_args(Py_buffer *table, Py_buffer *hashes, uint64_t *slots) {
    *slots = (uint64_t)table->len / 24;
    if (*slots == 0 || table->len % 24 || hashes->len % 16) {
        PyErr_SetString(PyExc_ValueError, "offset map: a table of (slots, 3) and hashes of (n, 2) uint64");
        return -1;
    }
    return 0;
}

/* offset_map_put(table, hashes, offsets, max_entries, entries) -> (taken, entries): OffsetMap.put,
 * one record after the other: it stops before the first record met while the map is full. */
PyObject *py_offset_map_put(PyObject *self, PyObject *args) {
    Py_buffer table, hashes, offsets;
    long long max_entries, entries;
    if (!PyArg_ParseTuple(args, "w*y*y*LL", &table, &hashes, &offsets, &max_entries, &entries)) return NULL;
    uint64_t slots;
    Py_ssize_t n = hashes.len / 16, i = 0;
    if (map_args(&table, &hashes, &slots) || offsets.len != n * 8) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "offset map: one offset per hash");
        PyBuffer_Release(&table);
        PyBuffer_Release(&hashes);
        PyBuffer_Release(&offsets);
        return NULL;
    }
    uint64_t *t = table.buf;
    const uint64_t *h = hashes.buf;
    const int64_t *o = offsets.buf;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n && entries < max_entries; i++) {
        uint64_t hi = h[2 * i], lo = h[2 * i + 1], slot = hi % slots;
        for (;;) {
            uint64_t *row = t + 3 * slot;
            if (row[2] == 0) {
                row[0] = hi;
                row[1] = lo;
                row[2] = (uint64_t)o[i] + 1;
                entries++;
                break;
            }
            if (row[0] == hi && row[1] == lo) {
                row[2] = (uint64_t)o[i] + 1;
                break;
            }
            slot = slot + 1 == slots ? 0 : slot + 1;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&table);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&offsets);
    return Py_BuildValue("nL", i, entries);
}

/* offset_map_get(table, hashes) -> bytes of int64: OffsetMap.get, the mapped offset of each hash, -1
 * where the key is not in the map. */
PyObject *py_offset_map_get(PyObject *self, PyObject *args) {
    Py_buffer table, hashes;
    if (!PyArg_ParseTuple(args, "y*y*", &table, &hashes)) return NULL;
    uint64_t slots;
    if (map_args(&table, &hashes, &slots)) {
        PyBuffer_Release(&table);
        PyBuffer_Release(&hashes);
        return NULL;
    }
    Py_ssize_t n = hashes.len / 16;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out != NULL) {
        const uint64_t *t = table.buf, *h = hashes.buf;
        int64_t *result = (int64_t *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t hi = h[2 * i], lo = h[2 * i + 1], slot = hi % slots;
            result[i] = -1;
            for (;;) {
                const uint64_t *row = t + 3 * slot;
                if (row[2] == 0) break;
                if (row[0] == hi && row[1] == lo) {
                    result[i] = (int64_t)(row[2] - 1);
                    break;
                }
                slot = slot + 1 == slots ? 0 : slot + 1;
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&table);
    PyBuffer_Release(&hashes);
    return out;
}
