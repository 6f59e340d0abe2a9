/* Shared declarations of kfmt's compiled kernels (the kfmt._speedups extension).
 *
 * Every kernel mirrors a pure-Python reference in the package (named in each file); the test suite
 * runs both and compares them (tests/format/test_speedups.py), so the two must agree byte for byte,
 * error messages and positions included. Wire formats: the project's docs/format.md (cited as
 * "docs/format.md §N").
 */
#ifndef KFMT_NATIVE_H
#define KFMT_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "layout.h" /* the layouts of docs/format.md, generated from kfmt/format/layout.py */

/* ---- The Arrow C data interface (https://arrow.apache.org/docs/format/CDataInterface.html) ----
 * A stable ABI: record columns cross into pyarrow without copies and without per-record objects. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_NULLABLE 2
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* ---- errors: a message and a byte position, turned into kfmt.errors.DataError by the wrapper ---- */
typedef struct {
    int set;
    int64_t position; /* -1: none */
    char message[320];
} kerr;

void kerr_set(kerr *e, int64_t position, const char *fmt, ...);
PyObject *raise_kerr(const kerr *e); /* raises _speedups.DecodeError(message, position); returns NULL */
extern PyObject *DecodeError;

/* ---- growable byte buffers (malloc'd; handed to Arrow or freed) ---- */
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
    int fixed; /* data is someone else's memory of `cap` bytes (a bytes object being filled): never grown */
} gbuf;

int gbuf_reserve(gbuf *b, size_t extra); /* 0 ok, -1 out of memory */
void gbuf_free(gbuf *b);

/* ---- big-endian loads and stores ---- */
static inline int64_t be64(const uint8_t *p) {
    uint64_t v = ((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) |
                 ((uint64_t)p[3] << 32) | ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) |
                 ((uint64_t)p[6] << 8) | (uint64_t)p[7];
    return (int64_t)v;
}
static inline int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline void put64(uint8_t *p, int64_t v) {
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) { p[i] = (uint8_t)u; u >>= 8; }
}
static inline void put32(uint8_t *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24); p[1] = (uint8_t)(u >> 16); p[2] = (uint8_t)(u >> 8); p[3] = (uint8_t)u;
}
static inline void put16(uint8_t *p, int16_t v) {
    uint16_t u = (uint16_t)v;
    p[0] = (uint8_t)(u >> 8); p[1] = (uint8_t)u;
}
/* Java's long arithmetic: wraps instead of overflowing (kfmt.format.wire.int64). */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* ---- zigzag varints (docs/format.md §0; kfmt.format.wire.read_varint / varint) ---- */
int read_varint_slow(const uint8_t *d, int64_t *pos, int64_t end, int max_bytes, int64_t *out, kerr *e);

/* One- and two-byte varints (lengths and deltas below 8192) decode inline; longer ones, and every
 * error, take the slow path. */
static inline int read_varint_n(const uint8_t *d, int64_t *pos, int64_t end, int max_bytes, int64_t *out,
                                kerr *e) {
    int64_t p = *pos;
    if (p + 1 < end) {
        uint64_t b0 = d[p];
        if (!(b0 & 0x80)) {
            *out = (int64_t)(b0 >> 1) ^ -(int64_t)(b0 & 1);
            *pos = p + 1;
            return 0;
        }
        uint64_t b1 = d[p + 1];
        if (!(b1 & 0x80)) {
            uint64_t r = (b0 & 0x7F) | (b1 << 7);
            *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
            *pos = p + 2;
            return 0;
        }
    } else if (p < end && !(d[p] & 0x80)) {
        uint64_t b0 = d[p];
        *out = (int64_t)(b0 >> 1) ^ -(int64_t)(b0 & 1);
        *pos = p + 1;
        return 0;
    }
    return read_varint_slow(d, pos, end, max_bytes, out, e);
}
static inline int read_varint(const uint8_t *d, int64_t *pos, int64_t end, int64_t *out, kerr *e) {
    return read_varint_n(d, pos, end, 5, out, e);
}
static inline int read_varlong(const uint8_t *d, int64_t *pos, int64_t end, int64_t *out, kerr *e) {
    return read_varint_n(d, pos, end, 10, out, e);
}
static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int varint_size_u(uint64_t n) {
    int size = 1;
    while (n >= 0x80) { n >>= 7; size++; }
    return size;
}
static inline uint8_t *put_varint_u(uint8_t *p, uint64_t n) {
    while (n >= 0x80) { *p++ = (uint8_t)((n & 0x7F) | 0x80); n >>= 7; }
    *p++ = (uint8_t)n;
    return p;
}

/* ---- checksums (crc.c) ---- */
void crc_init(void);
uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n); /* CRC-32C, v2 batches */
uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n);  /* CRC-32 (IEEE), v0/v1 */
const char *crc32c_implementation(void);
const char *crc32_implementation(void);

/* ---- Arrow columns (arrow.c) ---- */
/* Record columns being built (RECORD_SCHEMA: offset, timestamp, key, value, headers). */
typedef struct {
    int64_t n;
    int64_t *offsets, *timestamps;
    int32_t *key_offsets, *value_offsets, *header_list_offsets;
    uint8_t *key_valid, *value_valid; /* NULL while no null was seen */
    int64_t key_nulls, value_nulls;
    gbuf key_data, value_data;
    /* headers: one struct row per header */
    gbuf hkey_offsets, hvalue_offsets; /* int32, start with 0 */
    gbuf hkey_data, hvalue_data;
    gbuf hvalue_valid; /* bitmap; empty while no null was seen */
    int64_t headers, hvalue_nulls;
} columns;

int columns_init(columns *c, int64_t n, size_t data_capacity); /* 0 ok, -1 no memory */
void columns_free(columns *c);
int columns_null_key(columns *c, int64_t i); /* 0 ok, -1 no memory */
int columns_null_value(columns *c, int64_t i);
/* appends one header of the current record (vlen < 0: null value); 0 ok, -1 no memory */
int columns_add_header(columns *c, const uint8_t *k, int64_t klen, const uint8_t *v, int64_t vlen);
/* What one batch's (or message set's) decode added to columns that hold several, to take back when
 * the decode refuses it: a run kernel then stops there and returns the rows before it. Rows and
 * headers beyond the mark are never exported, so their validity bits need no repair; the counts and
 * lengths do. */
typedef struct {
    size_t key_len, value_len, hkey_offsets_len, hvalue_offsets_len, hkey_len, hvalue_len, hvalid_len;
    int64_t key_nulls, value_nulls, headers, hvalue_nulls;
} columns_mark;
columns_mark columns_marked(const columns *c);
void columns_back_to(columns *c, const columns_mark *m);
/* Hands the columns to pyarrow (RecordBatch._import_from_c with RECORD_SCHEMA); c is emptied. */
PyObject *columns_to_record_batch(columns *c);

/* Buffers of a sequence of bytes-like objects (decompressed payloads), held while a kernel reads them. */
typedef struct {
    PyObject *seq; /* PySequence_Fast of the sequence */
    Py_buffer *views;
    Py_ssize_t n;
} buffer_list;
int buffer_list_open(buffer_list *l, PyObject *sequence); /* 0 ok, -1 a Python error is set */
void buffer_list_release(buffer_list *l);

/* Reading a pyarrow RecordBatch with RECORD_SCHEMA's types through the C data interface. */
typedef struct {
    struct ArrowArray array;
    struct ArrowSchema schema;
    int64_t n;
    const int64_t *offsets, *timestamps;
    const int32_t *key_offsets, *value_offsets, *header_list_offsets, *hkey_offsets, *hvalue_offsets;
    const uint8_t *key_data, *value_data, *hkey_data, *hvalue_data;
    const uint8_t *key_valid, *value_valid, *hvalue_valid;
    /* physical index of logical row 0 in each buffer */
    int64_t off0, ts0, key0, value0, hlist0, hkey0, hvalue0;
} record_view;

/* 1: a view was made; 0: the batch has types or nulls the kernels leave to the Python reference
 * (caller returns NotImplemented); -1: a Python error is set. Release with record_view_release. */
int record_view_open(record_view *v, PyObject *record_batch);
void record_view_release(record_view *v);

static inline int bit_set(const uint8_t *bits, int64_t i) {
    return bits == NULL || (bits[i >> 3] >> (i & 7)) & 1;
}

extern PyObject *import_record_batch; /* pyarrow.RecordBatch._import_from_c */
extern PyObject *record_schema;       /* kfmt.format.model.RECORD_SCHEMA */

/* ---- Python entry points ---- */
PyObject *py_decode_v2_records(PyObject *self, PyObject *args);
PyObject *py_encode_v2_records(PyObject *self, PyObject *args);
PyObject *py_encode_v2_bodies(PyObject *self, PyObject *args);
PyObject *py_frame_v2_batches(PyObject *self, PyObject *args);
PyObject *py_record_hashes_sum(PyObject *self, PyObject *args);
PyObject *py_digest_v2_batches(PyObject *self, PyObject *args);
PyObject *py_decode_v2_batches(PyObject *self, PyObject *args);
PyObject *py_decode_v2_payloads(PyObject *self, PyObject *args);
PyObject *py_decode_legacy_payloads(PyObject *self, PyObject *args);
PyObject *py_digest_v2_records(PyObject *self, PyObject *args);
PyObject *py_key_md5s(PyObject *self, PyObject *args);
PyObject *py_offset_map_put(PyObject *self, PyObject *args);
PyObject *py_offset_map_get(PyObject *self, PyObject *args);
PyObject *py_scan_frames(PyObject *self, PyObject *args);
PyObject *py_frame_layout(PyObject *self, PyObject *args);
PyObject *py_index_frames(PyObject *self, PyObject *args);
PyObject *py_frames_describe(PyObject *self, PyObject *args);
PyObject *py_decode_legacy_messages(PyObject *self, PyObject *args);
PyObject *py_upgrade_legacy_messages(PyObject *self, PyObject *args);
PyObject *py_digest_legacy_messages(PyObject *self, PyObject *args);
PyObject *py_digest_legacy_set(PyObject *self, PyObject *args);
PyObject *py_clean_entries(PyObject *self, PyObject *args);
PyObject *py_entry_facts(PyObject *self, PyObject *args);
PyObject *py_v2_records_facts(PyObject *self, PyObject *args);
PyObject *py_legacy_set_facts(PyObject *self, PyObject *args);
PyObject *py_records_keep_rules(PyObject *self, PyObject *args);
PyObject *py_v2_record_lines(PyObject *self, PyObject *args);
PyObject *py_json_record_lines(PyObject *self, PyObject *args);
PyObject *py_decode_avro(PyObject *self, PyObject *args);
PyObject *py_decode_legacy_set(PyObject *self, PyObject *args);
PyObject *py_legacy_wrapper(PyObject *self, PyObject *args);
PyObject *py_encode_legacy_messages(PyObject *self, PyObject *args);
PyObject *py_message_info_layout(PyObject *self, PyObject *args);
PyObject *py_compressed_spans(PyObject *self, PyObject *args);
PyObject *py_walk_inflated(PyObject *self, PyObject *args);
PyObject *py_entries_digest(PyObject *self, PyObject *args);

/* ---- text output (the dump and JSON-lines writers) ---- */

/* A decimal integer, as snprintf's %lld writes it, without its cost (several per record). */
static inline uint8_t *put_long(uint8_t *p, long long v) {
    char tmp[20];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *p++ = '-';
    while (n) *p++ = (uint8_t)tmp[--n];
    return p;
}

#endif
