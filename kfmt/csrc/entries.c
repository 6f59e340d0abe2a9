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
 * Reference: kfmt.format.copied_runs.entries_digest_reference. */
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
