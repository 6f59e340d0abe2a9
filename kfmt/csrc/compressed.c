/* Runs of compressed data entries (v2 batches and v0/v1 wrappers) walked many at a time: what reindex,
 * resegment, restore, archive, retain, info and verify need of them (records, offsets, timestamps,
 * the content digest), without a Python call per entry but the codec's.
 *
 * compressed_spans: the entries of a run of frame rows checked as kfmt.format.inflated_runs
 *   .inflated_v2 / .inflated_wrapper check them before inflating (framing, CRC, attributes), and where
 *   each one's compressed bytes lie, with what the walk of its inflated records needs. It stops at the
 *   first row those would refuse (None), which the per-entry decode then reports.
 * walk_inflated: the inflated payloads of such entries walked as digest_v2_records / v2_records_facts
 *   and digest_legacy_set / legacy_set_facts walk each one: per entry its facts, and the content digest
 *   of the run. It stops at the first payload those refuse (NotImplemented).
 *
 * Reference: kfmt.format.inflated_runs.walk_reference (the per-entry kernels, entry by entry). */
#include "native.h"
#include "frames.h"
#include "xxh3.h"

/* One span row: int64 fields, in this order (kfmt.format.inflated_runs.SPAN_FIELDS). */
enum { S_VALUE_AT, S_VALUE_LEN, S_CODEC, S_MAGIC, S_COUNT, S_BASE_OFFSET, S_BASE_TS, S_HAS_LAT, S_LAT, S_FIELDS };
/* One facts row (kfmt.format.inflated_runs.WALK_FIELDS); flags: 1 a timestamp seen, 2 offsets not
 * increasing, bits 8..15 the inner messages' magics (wrappers). */
enum { W_RECORDS, W_FIRST, W_LAST, W_MIN_TS, W_MAX_TS, W_FLAGS, W_FIELDS };

/* The span of the compressed entry at p (described by row f, at data position `at`) into s; 0 where
 * the per-entry path should decide. */
static int entry_span(const uint8_t *p, int64_t at, const frame *f, int64_t *s) {
    int64_t size = f->size;
    if (f->magic == MAGIC_V2) {
        if (size < V2_BATCH_OVERHEAD || !v2_row_describes(p, f) || f->compression == 0 ||
            (f->attributes & ATTR_CONTROL) || f->records_count < 0)
            return 0;
        s[S_CODEC] = f->compression;
        s[S_MAGIC] = MAGIC_V2;
        s[S_COUNT] = f->records_count;
        s[S_BASE_OFFSET] = f->base_offset;
        s[S_BASE_TS] = f->base_timestamp;
        s[S_HAS_LAT] = (f->attributes & ATTR_LOG_APPEND_TIME) != 0;
        s[S_LAT] = f->max_timestamp;
        s[S_VALUE_AT] = at + V2_BATCH_RECORDS_AT;
        if (f->records_count == 0) { /* an empty batch: decode looks no further (docs/format.md §4.7) */
            s[S_VALUE_LEN] = -1;
            return 1;
        }
        if (crc32c_update(0, p + V2_CRC_FROM, (size_t)(size - V2_CRC_FROM)) != f->crc) return 0;
        s[S_VALUE_LEN] = size - V2_BATCH_RECORDS_AT;
        return 1;
    }
    legacy_wrapper_t w;
    if (!legacy_wrapper_parse(p, size, &w) || w.magic != f->magic || !(w.attributes & CODEC_MASK) ||
        (w.attributes & CODEC_MASK) != f->compression || w.value_len < 0 || !w.crc_valid || w.offset != f->last_offset)
        return 0;
    s[S_VALUE_AT] = at + w.value_at;
    s[S_VALUE_LEN] = w.value_len;
    s[S_CODEC] = w.attributes & CODEC_MASK;
    s[S_MAGIC] = w.magic;
    s[S_COUNT] = -1; /* known only inflated */
    s[S_BASE_OFFSET] = w.offset;
    s[S_BASE_TS] = -1;
    s[S_HAS_LAT] = w.magic == MAGIC_V1 && (w.attributes & ATTR_LOG_APPEND_TIME); /* the wrapper's time for all */
    s[S_LAT] = w.timestamp;
    return 1;
}

/* compressed_spans(data, rows, start, stop, base) -> (stopped_at, spans: bytes of int64 span rows) */
PyObject *py_compressed_spans(PyObject *self, PyObject *args) {
    Py_buffer data, rows;
    Py_ssize_t start, stop;
    long long base;
    if (!PyArg_ParseTuple(args, "y*y*nnL", &data, &rows, &start, &stop, &base)) return NULL;
    if (frame_run_args("compressed_spans", &data, &rows, start, stop)) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (stop - start) * S_FIELDS * 8);
    if (out == NULL) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&rows);
        return NULL;
    }
    int64_t *spans = (int64_t *)PyBytes_AS_STRING(out);
    const frame *f = (const frame *)rows.buf;
    Py_ssize_t i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        const frame *row = &f[i];
        int64_t at = row->position - base, size = row->size;
        if (at < 0 || size < LOG_OVERHEAD || at > (int64_t)data.len - size) break;
        if (!entry_span((const uint8_t *)data.buf + at, at, row, spans + (i - start) * S_FIELDS)) break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&rows);
    if (i < stop && _PyBytes_Resize(&out, (i - start) * S_FIELDS * 8) != 0) return NULL;
    return Py_BuildValue("nN", i, out);
}

/* walk_inflated(spans, payloads, want_digest)
 *   -> (stopped_at, facts: bytes of int64 facts rows, digest_high, digest_low)
 * payload i is span row i's entry inflated (b"" for an empty v2 batch); the digest is that of the
 * records of the entries walked. */
PyObject *py_walk_inflated(PyObject *self, PyObject *args) {
    Py_buffer spans_buf;
    PyObject *payloads;
    int want_digest;
    if (!PyArg_ParseTuple(args, "y*Op", &spans_buf, &payloads, &want_digest)) return NULL;
    buffer_list l;
    if (buffer_list_open(&l, payloads)) {
        PyBuffer_Release(&spans_buf);
        return NULL;
    }
    Py_ssize_t n = spans_buf.len / (S_FIELDS * 8);
    if (spans_buf.len % (S_FIELDS * 8) || l.n > n) {
        buffer_list_release(&l);
        PyBuffer_Release(&spans_buf);
        PyErr_SetString(PyExc_ValueError, "walk_inflated: span rows of int64, at most one payload each");
        return NULL;
    }
    n = l.n;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * W_FIELDS * 8);
    if (out == NULL) {
        buffer_list_release(&l);
        PyBuffer_Release(&spans_buf);
        return NULL;
    }
    const int64_t *spans = spans_buf.buf;
    int64_t *facts = (int64_t *)PyBytes_AS_STRING(out);
    uint64_t lo = 0, hi = 0;
    gbuf messages = {0}, scratch = {0};
    int nomem = 0;
    Py_ssize_t i = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n; i++) {
        const int64_t *s = spans + i * S_FIELDS;
        const uint8_t *d = l.views[i].buf;
        int64_t len = l.views[i].len;
        facts_acc a = {0};
        uint64_t entry_lo = 0, entry_hi = 0;
        int ok;
        if (s[S_MAGIC] == 2)
            ok = s[S_VALUE_LEN] < 0 ? len == 0
                                    : v2_records_walk(d, len, s[S_COUNT], s[S_BASE_OFFSET], s[S_BASE_TS],
                                                      (int)s[S_HAS_LAT], s[S_LAT], want_digest, &scratch, &a,
                                                      &entry_lo, &entry_hi, &nomem);
        else
            ok = len <= INT32_MAX &&
                 legacy_set_walk(d, len, s[S_BASE_OFFSET], (int)s[S_MAGIC], (int)s[S_HAS_LAT], s[S_LAT], want_digest,
                                 &messages, &scratch, &a, &entry_lo, &entry_hi, &nomem);
        if (!ok) break;
        kfmt_sum128(&lo, &hi, entry_lo, entry_hi);
        int64_t *w = facts + i * W_FIELDS;
        w[W_RECORDS] = a.records;
        w[W_FIRST] = a.records ? a.first : 0;
        w[W_LAST] = a.records ? a.last : 0;
        w[W_MIN_TS] = a.has_ts ? a.min_ts : 0;
        w[W_MAX_TS] = a.has_ts ? a.max_ts : 0;
        w[W_FLAGS] = (a.has_ts ? 1 : 0) | (a.disordered ? 2 : 0) | ((int64_t)a.magics << 8);
    }
    Py_END_ALLOW_THREADS
    gbuf_free(&messages);
    gbuf_free(&scratch);
    buffer_list_release(&l);
    PyBuffer_Release(&spans_buf);
    if (nomem) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    if (i < n && _PyBytes_Resize(&out, i * W_FIELDS * 8) != 0) return NULL;
    return Py_BuildValue("nNKK", i, out, (unsigned long long)hi, (unsigned long long)lo);
}
