/* kfmt verify's walk over a segment's entries, many at a time (kfmt.inspect.verify.log_runs).
 *
 * clean_entries: how many entries, from a row on, verify's per-entry checks would find nothing wrong
 * with: uncompressed v0/v1 messages and uncompressed v2 data batches whose bytes are intact (CRC,
 * record structure, as the format plugins' decode checks them) and whose records keep the rules
 * LogChecker._check_records holds them to (record offsets increasing and inside the batch's, CreateTime
 * record timestamps not above its maxTimestamp). It stops at the first entry it does not vouch for:
 * compressed and control batches, other magics, anything damaged; the per-entry checks then report
 * what they find there. Reference: LogChecker._check_batch, entry by entry. */
#include "native.h"
#include "frames.h"
#include "records_v2.h"

/* Whether an uncompressed v2 data batch's records parse and keep the record rules; *count its
 * records. */
static int v2_batch_clean(const uint8_t *p, const frame *f) {
    int64_t end = f->size - V2_BATCH_RECORDS_AT, count = f->records_count, pos = 0, previous = 0;
    const uint8_t *d = p + V2_BATCH_RECORDS_AT;
    kerr e = {0};
    if (count < 0 || count > end / V2_MIN_RECORD_SIZE) return 0;
    if (count == 0) return 1; /* an empty batch: decode looks no further */
    int create_time = f->timestamp_type == 0;
    for (int64_t i = 0; i < count; i++) {
        v2_record r;
        if (parse_v2_record(d, &pos, end, i, &r, &e)) return 0;
        int64_t offset = wrap_add(f->base_offset, r.off_delta);
        if (i == 0 ? offset < f->base_offset : offset <= previous) return 0;
        if (create_time && wrap_add(f->base_timestamp, r.ts_delta) > f->max_timestamp) return 0;
        previous = offset;
    }
    return pos == end && previous <= f->last_offset;
}

/* clean_entries(data, rows, start, stop, base) -> (stopped_at, records) */
PyObject *py_clean_entries(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    if (!PyArg_ParseTuple(args, "y*y*nnL", &data, &rows, &start, &stop, &base)) return NULL;
    if (frame_run_args("clean_entries", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    const uint8_t *d = data.buf;
    int64_t records = 0;
    Py_ssize_t i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        const frame *row = &f[i];
        int64_t at = row->position - base, size = row->size;
        if (at < 0 || size < LOG_OVERHEAD + MIN_ENTRY_SIZE || at > (int64_t)data.len - size) break;
        const uint8_t *p = d + at;
        if (row->magic < MAGIC_V2) {
            if (!legacy_message_vouched(p, row, 1)) break;
            records += 1;
            continue;
        }
        if (size < V2_BATCH_OVERHEAD || !v2_row_describes(p, row) || row->compression != 0 ||
            (row->attributes & ATTR_CONTROL) ||
            crc32c_update(0, p + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM)) != row->crc || !v2_batch_clean(p, row))
            break;
        records += row->records_count;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    return Py_BuildValue("nL", i, (long long)records);
}

/* records_keep_rules(records, base_offset, last_offset, wrapper, max_timestamp | None) -> bool |
 * NotImplemented: whether LogChecker._check_records would find nothing wrong with a decoded batch's
 * records: offsets increasing, inside [base_offset, last_offset] (a legacy wrapper's last record at
 * its last offset), and, when max_timestamp is given (CreateTime), no timestamp above it. */
PyObject *py_records_keep_rules(PyObject *self, PyObject *args) {
    PyObject *records, *o_max;
    long long base_offset, last_offset;
    int wrapper;
    if (!PyArg_ParseTuple(args, "OLLpO", &records, &base_offset, &last_offset, &wrapper, &o_max)) return NULL;
    int check_ts = o_max != Py_None;
    long long max_ts = 0;
    if (check_ts && (max_ts = PyLong_AsLongLong(o_max)) == -1 && PyErr_Occurred()) return NULL;
    record_view v;
    int r = record_view_open(&v, records);
    if (r != 1) {
        if (r < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    int ok = v.n > 0;
    const int64_t *offsets = v.offsets + v.off0, *timestamps = v.timestamps + v.ts0;
    for (int64_t i = 0; ok && i < v.n; i++) {
        if (i > 0 && offsets[i] <= offsets[i - 1]) ok = 0;
        if (check_ts && timestamps[i] > max_ts) ok = 0;
    }
    if (ok && (offsets[0] < base_offset || offsets[v.n - 1] > last_offset ||
               (wrapper && offsets[v.n - 1] != last_offset)))
        ok = 0;
    record_view_release(&v);
    return PyBool_FromLong(ok);
}
