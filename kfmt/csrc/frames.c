/* Frames of a segment as arrays, and the index-building walk over them.
 *
 * scan_frames: the entries of a byte range from their headers alone (docs/format.md §2, §3.1, §4.1), one
 * `frame` row each. It handles only what it is sure of: entries of the built-in formats (magics the
 * caller names) that read_header accepts. At anything else (the end of the range, a zero-filled head,
 * a short or oversized entry, another magic, a header read_header would refuse) it stops and returns
 * where: kfmt.format.segment's Python step then decides, with its own messages, exactly as before.
 * Reference: kfmt.format.segment.FrameScanner._scan and the read_header methods of plugins/formats.
 *
 * index_frames: LogSegment.recover's index walk (kfmt.partition.segment_recovery.SegmentIndexer.add, docs/format.md §6.3)
 * over rows of frames; it stops at the first row that add() would refuse, which the Python reference
 * then processes (and refuses with its own message). */
#include "native.h"
#include "frames.h"

#define INT32_MAX_ 2147483647LL

/* frame_layout() -> (itemsize, [(name, offset), ...]): the row layout, for numpy's dtype */
PyObject *py_frame_layout(PyObject *self, PyObject *args) {
#define FIELD(name) #name, (Py_ssize_t)offsetof(frame, name)
    return Py_BuildValue("n[(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)(sn)]",
                         (Py_ssize_t)sizeof(frame), FIELD(position), FIELD(base_offset),
                         FIELD(last_offset), FIELD(max_timestamp), FIELD(base_timestamp),
                         FIELD(producer_id), FIELD(size), FIELD(partition_leader_epoch),
                         FIELD(base_sequence), FIELD(records_count), FIELD(crc), FIELD(attributes),
                         FIELD(producer_epoch), FIELD(magic), FIELD(compression), FIELD(timestamp_type));
#undef FIELD
}

/* One entry's header at d[pos..pos+size+12) (its bounds already checked); 0 if read_header would
 * refuse it (the Python step then raises its message). */
static int read_frame(const uint8_t *p, int64_t entry_size, frame *f) {
    int magic = p[LOG_ENTRY_MAGIC_AT];
    f->magic = (int8_t)magic;
    f->size = (int32_t)entry_size;
    f->crc = (uint32_t)be32(p + (magic == MAGIC_V2 ? V2_BATCH_CRC_AT : V0_MESSAGE_CRC_AT));
    if (magic == MAGIC_V2) {
        if (entry_size < V2_BATCH_OVERHEAD) return 0;
        int16_t attrs = be16(p + V2_BATCH_ATTRIBUTES_AT);
        f->base_offset = be64(p + V2_BATCH_BASE_OFFSET_AT);
        f->partition_leader_epoch = be32(p + V2_BATCH_PARTITION_LEADER_EPOCH_AT);
        f->attributes = attrs;
        f->last_offset = wrap_add(f->base_offset, be32(p + V2_BATCH_LAST_OFFSET_DELTA_AT));
        f->base_timestamp = be64(p + V2_BATCH_BASE_TIMESTAMP_AT);
        f->max_timestamp = be64(p + V2_BATCH_MAX_TIMESTAMP_AT);
        f->producer_id = be64(p + V2_BATCH_PRODUCER_ID_AT);
        f->producer_epoch = be16(p + V2_BATCH_PRODUCER_EPOCH_AT);
        f->base_sequence = be32(p + V2_BATCH_BASE_SEQUENCE_AT);
        f->records_count = be32(p + V2_BATCH_RECORDS_COUNT_AT);
        f->compression = (int8_t)(attrs & CODEC_MASK);
        f->timestamp_type = attrs & ATTR_LOG_APPEND_TIME ? 1 : 0;
        return 1;
    }
    /* v0/v1: at least RECORD_OVERHEAD_V0 / _V1 bytes after the log overhead */
    if (entry_size < LOG_OVERHEAD + (magic == MAGIC_V0 ? RECORD_OVERHEAD_V0 : RECORD_OVERHEAD_V1)) return 0;
    int8_t attrs = (int8_t)p[V0_MESSAGE_ATTRIBUTES_AT];
    f->base_offset = f->last_offset = be64(p + V0_MESSAGE_OFFSET_AT);
    f->attributes = attrs;
    f->compression = (int8_t)(attrs & CODEC_MASK);
    f->partition_leader_epoch = -1;
    f->base_timestamp = -1;
    f->producer_id = -1;
    f->producer_epoch = -1;
    f->base_sequence = -1;
    /* a compressed wrapper's count (and first offset) are known only after decompression */
    f->records_count = f->compression ? -1 : 1;
    if (magic == MAGIC_V0) {
        f->timestamp_type = -1;
        f->max_timestamp = -1;
    } else {
        f->timestamp_type = attrs & ATTR_LOG_APPEND_TIME ? 1 : 0;
        f->max_timestamp = be64(p + V1_MESSAGE_TIMESTAMP_AT);
    }
    return 1;
}

/* Rows for entries from pos on; returns the number of rows, *next = where the scan stopped. */
static int64_t scan(const uint8_t *d, int64_t pos, int64_t end, int64_t base, unsigned magics,
                    int64_t max_rows, frame *rows, int64_t *next) {
    int64_t n = 0, prefetched = pos;
    while (n < max_rows) {
        int64_t remaining = end - pos;
        /* Each entry's size leads to the next, a chain of dependent loads: reading ahead along the
         * (contiguous) entries keeps small ones, such as legacy messages, from waiting on memory. */
        if (prefetched < pos) prefetched = pos;
        while (prefetched < pos + 4096 && prefetched < end) {
            __builtin_prefetch(d + prefetched);
            prefetched += 64;
        }
        if (remaining <= HEADER_SIZE_UP_TO_MAGIC) break; /* the clean end, or a truncated tail */
        const uint8_t *p = d + pos;
        int32_t size = be32(p + LOG_ENTRY_SIZE_AT);
        int magic = p[LOG_ENTRY_MAGIC_AT];
        /* (a zero-filled head has size 0: it stops here too) */
        if (size < MIN_ENTRY_SIZE || size > remaining - LOG_OVERHEAD || magic > MAGIC_V2 || !(magics >> magic & 1))
            break;
        frame *f = &rows[n];
        memset(f, 0, sizeof *f);
        if (!read_frame(p, (int64_t)size + LOG_OVERHEAD, f)) break;
        f->position = base + pos;
        pos += (int64_t)size + LOG_OVERHEAD;
        n++;
    }
    *next = pos;
    return n;
}

/* scan_frames(data, pos, end, base, magics, max_rows) -> (rows: bytes, count, next_pos)
 * `magics`: bit m set when magic m's format is the built-in one; `base` is added to positions. */
PyObject *py_scan_frames(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long pos, end, base, max_rows;
    unsigned int magics;
    if (!PyArg_ParseTuple(args, "y*LLLIL", &buf, &pos, &end, &base, &magics, &max_rows)) return NULL;
    if (pos < 0 || end > buf.len || pos > end || max_rows < 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "scan_frames: range outside the data");
        return NULL;
    }
    /* the smallest entry: log overhead + a v0 message's RECORD_OVERHEAD_V0 (26 bytes) */
    int64_t cap = (end - pos) / (LOG_OVERHEAD + MIN_ENTRY_SIZE) + 1;
    if (cap > max_rows) cap = max_rows;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(cap * (int64_t)sizeof(frame)));
    if (out == NULL) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int64_t n, next;
    frame *rows = (frame *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    n = scan(buf.buf, pos, end, base, magics, cap, rows, &next);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (n < cap && _PyBytes_Resize(&out, (Py_ssize_t)(n * (int64_t)sizeof(frame))) != 0) return NULL;
    return Py_BuildValue("NLL", out, (long long)n, (long long)next);
}

/* ---------------------------------------------------------------- index walk */

typedef struct {
    int64_t base_offset, interval, position, last_indexed_position, max_timestamp, offset_of_max;
    int64_t last_offset, last_time_entry; /* last_time_entry: -1 (NO_TIMESTAMP) when none */
    int has_last;
} recovery;

/* index_frames(rows, start, stop, state) -> (stopped_at, state, offset_entries, time_entries)
 * state = (base_offset, interval, position, last_indexed_position, max_timestamp, offset_of_max,
 *          last_offset | None, last_time_entry_timestamp); entries as bytes of int64 pairs
 * (offset, position) and (timestamp, offset). */
PyObject *py_index_frames(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, stop;
    recovery r = {0};
    PyObject *o_last;
    if (!PyArg_ParseTuple(args, "y*nn(LLLLLLOL)", &buf, &start, &stop, &r.base_offset, &r.interval,
                          &r.position, &r.last_indexed_position, &r.max_timestamp, &r.offset_of_max,
                          &o_last, &r.last_time_entry))
        return NULL;
    r.has_last = o_last != Py_None;
    if (r.has_last && (r.last_offset = PyLong_AsLongLong(o_last)) == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    const frame *rows = buf.buf;
    if (frame_run_args("index_frames", NULL, &buf, start, stop)) return NULL;
    gbuf offsets = {0}, times = {0};
    Py_ssize_t i = start;
    int nomem = 0;
    for (; i < stop; i++) {
        const frame *f = &rows[i];
        int64_t relative;
        /* SegmentIndexer._check: file order, the int32 relative offset, increasing offsets */
        if (f->position != r.position || __builtin_sub_overflow(f->last_offset, r.base_offset, &relative) ||
            relative < 0 || relative > INT32_MAX_ || (r.has_last && f->last_offset <= r.last_offset))
            break;
        if (f->max_timestamp > r.max_timestamp) {
            r.max_timestamp = f->max_timestamp;
            r.offset_of_max = f->last_offset;
        }
        if (r.position - r.last_indexed_position > r.interval) {
            int64_t entry[2] = {f->last_offset, r.position};
            if (gbuf_reserve(&offsets, 16)) { nomem = 1; break; }
            memcpy(offsets.data + offsets.len, entry, 16);
            offsets.len += 16;
            if (r.max_timestamp > r.last_time_entry) { /* TimeIndex.maybeAppend */
                int64_t t[2] = {r.max_timestamp, r.offset_of_max};
                if (gbuf_reserve(&times, 16)) { nomem = 1; break; }
                memcpy(times.data + times.len, t, 16);
                times.len += 16;
                r.last_time_entry = r.max_timestamp;
            }
            r.last_indexed_position = r.position;
        }
        r.position += f->size;
        r.last_offset = f->last_offset;
        r.has_last = 1;
    }
    PyBuffer_Release(&buf);
    PyObject *result = NULL;
    if (nomem) PyErr_NoMemory();
    else {
        PyObject *last = r.has_last ? PyLong_FromLongLong(r.last_offset) : Py_NewRef(Py_None);
        result = Py_BuildValue("n(LLLLLLNL)y#y#", i, r.base_offset, r.interval, r.position,
                               r.last_indexed_position, r.max_timestamp, r.offset_of_max, last,
                               r.last_time_entry, offsets.data ? (char *)offsets.data : "",
                               (Py_ssize_t)offsets.len, times.data ? (char *)times.data : "",
                               (Py_ssize_t)times.len);
    }
    gbuf_free(&offsets);
    gbuf_free(&times);
    return result;
}

/* ---------------------------------------------------------------- rows against their bytes */

/* frames_describe(data, rows, start, stop, base) -> the first row of [start, stop) whose entry (at its
 * position in `data`, the file from position `base` on) does not begin as the row says: stored offset
 * (a v2 batch's base offset, a legacy entry's own), size and magic; `stop` when every row does.
 * Reference: kfmt.format.frames.first_undescribed (numpy); kfmt.write.writer.checked_rows names the
 * culprit with checked_header. */
PyObject *py_frames_describe(PyObject *self, PyObject *args) {
    Py_buffer buf, rows_buf;
    Py_ssize_t start, stop;
    long long base;
    if (!PyArg_ParseTuple(args, "y*y*nnL", &buf, &rows_buf, &start, &stop, &base)) return NULL;
    const frame *rows = rows_buf.buf;
    if (frame_run_args("frames_describe", &buf, &rows_buf, start, stop)) return NULL;
    Py_ssize_t i = start;
    const uint8_t *d = buf.buf;
    for (; i < stop; i++) {
        const frame *f = &rows[i];
        int64_t at = f->position - base;
        if (at < 0 || f->size < HEADER_SIZE_UP_TO_MAGIC || at > (int64_t)buf.len - f->size) break;
        const uint8_t *p = d + at;
        int64_t stored = f->magic >= MAGIC_V2 ? f->base_offset : f->last_offset;
        if (be64(p + LOG_ENTRY_OFFSET_AT) != stored ||
            (int64_t)be32(p + LOG_ENTRY_SIZE_AT) + LOG_OVERHEAD != f->size || (int8_t)p[LOG_ENTRY_MAGIC_AT] != f->magic)
            break;
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows_buf);
    return PyLong_FromSsize_t(i);
}

int frame_run_args(const char *kernel, Py_buffer *data, Py_buffer *rows, Py_ssize_t start, Py_ssize_t stop) {
    Py_ssize_t n = rows->len / (Py_ssize_t)sizeof(frame);
    if (start >= 0 && stop <= n && start <= stop) return 0;
    if (data != NULL) PyBuffer_Release(data);
    PyBuffer_Release(rows);
    PyErr_Format(PyExc_ValueError, "%s: rows outside the array", kernel);
    return -1;
}
