/* Entries copied byte for byte (reindex, resegment, restore, retain, archive), checked as Kafka's log
 * recovery checks them and digested by their bytes, many at a time, never inflated.
 *
 * entries_digest(data, rows, start, stop, base) -> (stopped_at, digest_high, digest_low)
 *   For each row of [start, stop): its entry lies within `data` (the file from position `base` on), the
 *   row describes it (as the frame scan read it), and its CRC holds -- a v2 batch's CRC-32C from its
 *   attributes on, a v0/v1 message's (a compressed wrapper's too) CRC-32 from its magic on: what
 *   LogSegment.recover asks of a batch (RecordBatch.ensureValid), which covers the stored, compressed
 *   bytes. The digest is the sum modulo 2**128 of the XXH3-128 of each entry's bytes (the entries
 *   digest, kfmt.format.digest.EntriesDigest). It stops at the first row that fails, which the
 *   per-entry decode then reports.
 *
 * Reference: kfmt.format.copied_runs.entries_digest_reference.
 *
 * frame_v2_batches (below): v2 batches framed around records sections, many at a time. */
#include "native.h"
#include "frames.h"
#include "xxh3.h"

/* the layouts: layout.h (through native.h) */

/* Whether the entry p (described by row f) is whole and its CRC holds. */
static int entry_valid(const uint8_t *p, const frame *f) {
    int64_t size = f->size;
    if (f->magic == MAGIC_V2)
        return size >= V2_BATCH_OVERHEAD && v2_row_describes(p, f) &&
               crc32c_update(0, p + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM)) == f->crc;
    legacy_wrapper_t w;
    if (!legacy_wrapper_parse(p, size, &w) || !w.crc_valid) return 0;
    /* the row as the frame scan read it: the entry's own offset, magic, CRC and codec */
    return w.offset == f->last_offset && w.magic == f->magic && w.crc == f->crc &&
           (w.attributes & CODEC_MASK) == f->compression;
}

PyObject *py_entries_digest(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    if (!PyArg_ParseTuple(args, "y*y*nnL", &data, &rows, &start, &stop, &base)) return NULL;
    if (frame_run_args("entries_digest", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    const uint8_t *d = data.buf;
    uint64_t lo = 0, hi = 0;
    Py_ssize_t i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        const frame *row = &f[i];
        int64_t at = row->position - base, size = row->size;
        if (at < 0 || size < LOG_OVERHEAD + 5 || at > (int64_t)data.len - size) break;
        const uint8_t *p = d + at;
        if (!entry_valid(p, row)) break;
        kfmt_hash128 h = kfmt_xxh3_128(p, (size_t)size);
        kfmt_sum128(&lo, &hi, h.lo, h.hi);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    return Py_BuildValue("nKK", i, (unsigned long long)hi, (unsigned long long)lo);
}

/* frame_v2_batches(sections, table) -> (entries, sizes, crcs)
 *   v2 data batches framed around records sections that are already what each batch holds (compressed
 *   by its codec, or not): batch i holds sections[i] with table row i (int64: base offset, last offset,
 *   base timestamp, max timestamp, attributes, records count), no producer (id, epoch and base sequence
 *   -1) and partition leader epoch -1, as Kafka 4.0's conversion of a legacy wrapper writes them
 *   (docs/format.md §16.3); its CRC-32C covers the batch from its attributes on (§4.1). entries: the
 *   batches concatenated; sizes: bytes of int64, crcs: bytes of uint32, one each per batch. For
 *   kfmt.format.wrapper_runs: the headers of a block of converted wrappers made in one call, beside
 *   the codec's. Reference: kfmt.format.wrapper_runs.frame_v2_reference. */
enum { F_BASE_OFFSET, F_LAST_OFFSET, F_BASE_TS, F_MAX_TS, F_ATTRIBUTES, F_COUNT, F_FIELDS };

PyObject *py_frame_v2_batches(PyObject *self, PyObject *args) {
    PyObject *sections;
    Py_buffer table;
    if (!PyArg_ParseTuple(args, "Oy*", &sections, &table)) return NULL;
    buffer_list l;
    if (buffer_list_open(&l, sections)) {
        PyBuffer_Release(&table);
        return NULL;
    }
    const int64_t *t = table.buf;
    int64_t total = 0;
    int fits = table.len == (Py_ssize_t)(l.n * F_FIELDS * 8);
    for (Py_ssize_t i = 0; fits && i < l.n; i++) {
        fits = l.views[i].len <= INT32_MAX - V2_BATCH_OVERHEAD;  /* batchLength is an int32 */
        total += V2_BATCH_OVERHEAD + l.views[i].len;
    }
    if (!fits) {
        buffer_list_release(&l);
        PyBuffer_Release(&table);
        PyErr_SetString(PyExc_ValueError, "frame_v2_batches: six int64 facts per section, sections below 2 GB");
        return NULL;
    }
    PyObject *entries = PyBytes_FromStringAndSize(NULL, total);
    PyObject *sizes = PyBytes_FromStringAndSize(NULL, l.n * 8);
    PyObject *crcs = PyBytes_FromStringAndSize(NULL, l.n * 4);
    if (entries != NULL && sizes != NULL && crcs != NULL) {
        uint8_t *b = (uint8_t *)PyBytes_AS_STRING(entries);
        int64_t *size_of = (int64_t *)PyBytes_AS_STRING(sizes);
        uint32_t *crc_of = (uint32_t *)PyBytes_AS_STRING(crcs);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < l.n; i++) {
            const int64_t *f = t + i * F_FIELDS;
            int64_t size = V2_BATCH_OVERHEAD + l.views[i].len;
            put64(b + V2_BATCH_BASE_OFFSET_AT, f[F_BASE_OFFSET]);
            put32(b + V2_BATCH_BATCH_LENGTH_AT, (int32_t)(size - LOG_OVERHEAD));
            put32(b + V2_BATCH_PARTITION_LEADER_EPOCH_AT, -1);
            b[V2_BATCH_MAGIC_AT] = MAGIC_V2;
            put16(b + V2_BATCH_ATTRIBUTES_AT, (int16_t)f[F_ATTRIBUTES]);
            put32(b + V2_BATCH_LAST_OFFSET_DELTA_AT, (int32_t)(f[F_LAST_OFFSET] - f[F_BASE_OFFSET]));
            put64(b + V2_BATCH_BASE_TIMESTAMP_AT, f[F_BASE_TS]);
            put64(b + V2_BATCH_MAX_TIMESTAMP_AT, f[F_MAX_TS]);
            put64(b + V2_BATCH_PRODUCER_ID_AT, -1);
            put16(b + V2_BATCH_PRODUCER_EPOCH_AT, -1);
            put32(b + V2_BATCH_BASE_SEQUENCE_AT, -1);
            put32(b + V2_BATCH_RECORDS_COUNT_AT, (int32_t)f[F_COUNT]);
            memcpy(b + V2_BATCH_RECORDS_AT, l.views[i].buf, (size_t)l.views[i].len);
            uint32_t crc = crc32c_update(0, b + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM));
            put32(b + V2_BATCH_CRC_AT, (int32_t)crc);
            size_of[i] = size;
            crc_of[i] = crc;
            b += size;
        }
        Py_END_ALLOW_THREADS
    }
    buffer_list_release(&l);
    PyBuffer_Release(&table);
    if (entries == NULL || sizes == NULL || crcs == NULL) {
        Py_XDECREF(entries);
        Py_XDECREF(sizes);
        Py_XDECREF(crcs);
        return NULL;
    }
    return Py_BuildValue("NNN", entries, sizes, crcs);
}
