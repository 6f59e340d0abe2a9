/* kfmt info's facts (kfmt.inspect.info): how many records a run of entries holds, the offsets of the
 * first and last, and the range of their timestamps, taken straight from their bytes, many entries
 * in one call, without building columns.
 *
 * entry_facts: consecutive uncompressed v0/v1 messages and uncompressed v2 data batches of a
 *   segment's frame rows, each checked as the format plugins' decode checks it (structure, CRC) and
 *   its records walked (records_v2.h). It stops at the first row it leaves to the per-batch path:
 *   compressed or control batches, other magics, a row that does not describe its entry, anything
 *   decode would refuse (which the per-batch path then reports).
 * v2_records_facts: the records section of one (decompressed) v2 batch.
 * (legacy_set_facts, for a compressed v0/v1 wrapper's inner set, is in legacy.c beside its walk.)
 *
 * Timestamps are the records' as decode gives them (a LogAppendTime batch's for all of its records;
 * -1, NO_TIMESTAMP, is no timestamp and left out). Reference: kfmt.inspect.info's per-batch path
 * over decoded batches. */
#include "native.h"
#include "frames.h"
#include "records_v2.h"

static void note_timestamp(facts_acc *a, int64_t ts) {
    if (ts == -1) return;
    if (!a->has_ts) {
        a->min_ts = a->max_ts = ts;
        a->has_ts = 1;
        return;
    }
    if (ts < a->min_ts) a->min_ts = ts;
    if (ts > a->max_ts) a->max_ts = ts;
}

void facts_note(facts_acc *a, int64_t offset, int64_t ts) {
    if (!a->records) a->first = offset;
    else if (offset <= a->last) a->disordered = 1;
    a->last = offset;
    a->records++;
    note_timestamp(a, ts);
}

/* The records of a v2 batch's records section d[0..end) into a; 0 if decode would refuse them. */
static int v2_facts(const uint8_t *d, int64_t end, int64_t count, int64_t base_offset, int64_t base_ts, int has_lat,
                    int64_t lat, facts_acc *a) {
    kerr e = {0};
    int64_t pos = 0;
    if (count < 0 || count > end / V2_MIN_RECORD_SIZE) return 0;
    facts_acc batch = *a;
    for (int64_t i = 0; i < count; i++) {
        v2_record r;
        if (parse_v2_record(d, &pos, end, i, &r, &e)) return 0;
        facts_note(&batch, wrap_add(base_offset, r.off_delta), has_lat ? lat : wrap_add(base_ts, r.ts_delta));
    }
    if (pos != end) return 0;
    *a = batch;
    return 1;
}

PyObject *facts_result(const facts_acc *a) {
    PyObject *first = a->records ? PyLong_FromLongLong(a->first) : Py_NewRef(Py_None);
    PyObject *last = a->records ? PyLong_FromLongLong(a->last) : Py_NewRef(Py_None);
    PyObject *lo = a->has_ts ? PyLong_FromLongLong(a->min_ts) : Py_NewRef(Py_None);
    PyObject *hi = a->has_ts ? PyLong_FromLongLong(a->max_ts) : Py_NewRef(Py_None);
    return Py_BuildValue("LNNNNNi", (long long)a->records, first, last, lo, hi, PyBool_FromLong(!a->disordered),
                         a->magics);
}

/* entry_facts(data, rows, start, stop, base)
 *   -> (stopped_at, facts): facts (records, first_offset, last_offset, min_timestamp, max_timestamp,
 *   offsets_increasing, inner_magics), None where the run holds no record or no timestamp;
 *   inner_magics is a bit mask of the inner messages' magics (legacy_set_facts), else 0. */
PyObject *py_entry_facts(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    if (!PyArg_ParseTuple(args, "y*y*nnL", &data, &rows, &start, &stop, &base)) return NULL;
    if (frame_run_args("entry_facts", &data, &rows, start, stop)) return NULL;
    const frame *f = (const frame *)rows.buf;
    const uint8_t *d = data.buf;
    facts_acc a = {0};
    Py_ssize_t i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        const frame *row = &f[i];
        int64_t at = row->position - base, size = row->size;
        if (at < 0 || size < LOG_OVERHEAD + MIN_ENTRY_SIZE || at > (int64_t)data.len - size) break;
        const uint8_t *p = d + at;
        if (row->magic < MAGIC_V2) {
            if (!legacy_message_vouched(p, row, 1)) break;
            /* a v0 message has no timestamp: its row says -1 (frames.h), as decode does */
            facts_note(&a, row->base_offset, row->max_timestamp);
            continue;
        }
        if (size < V2_BATCH_OVERHEAD || !v2_row_describes(p, row) || row->compression != 0 ||
            (row->attributes & ATTR_CONTROL) ||
            crc32c_update(0, p + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM)) != row->crc)
            break;
        if (row->records_count == 0) continue; /* an empty batch: decode looks no further */
        if (!v2_facts(p + V2_BATCH_RECORDS_AT, size - V2_BATCH_RECORDS_AT, row->records_count, row->base_offset,
                      row->base_timestamp, row->timestamp_type == 1, row->max_timestamp, &a))
            break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    PyObject *facts = facts_result(&a);
    if (facts == NULL) return NULL;
    return Py_BuildValue("nN", i, facts);
}

/* v2_records_facts(payload, count, base_offset, base_timestamp, log_append_time | None)
 *   -> facts (as entry_facts') | NotImplemented where
 *   decode would refuse the records (it then reports). */
PyObject *py_v2_records_facts(PyObject *self, PyObject *args) {
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
    facts_acc a = {0};
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = count > 0 && v2_facts(buf.buf, buf.len, count, base_offset, base_ts, has_lat, lat, &a);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (!ok) Py_RETURN_NOTIMPLEMENTED;
    return facts_result(&a);
}
