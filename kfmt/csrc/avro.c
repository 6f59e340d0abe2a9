/* Avro binary datums decoded in bulk into the Arrow buffers of their table's column
 * (kfmt.default_plugins.values.avro_program, which compiles each writer schema to a program this walks,
 * and avro_layout, which assembles the arrays). Reference: plugins/values/avro_decode.py (decode_datums:
 * a closure per type, one Python call per value) then evolution.conform (to the table type). Both give
 * the same columns and the same reasons, positions included.
 *
 * A program is a flat array of ops in preorder, OP_WIDTH int32 each: (op, slot, children, a, b); one
 * call takes several (one per writer schema, all writing into the same slots) and which one decodes
 * each row. A slot is one Arrow array of the table type: a validity byte per element (Python packs the
 * bits), the int32 offsets of a list, map, string or binary, and the value bytes. Schema resolution is
 * in the ops: an int or float op with b = 1 stores its value widened to long or double, OP_ABSENT
 * appends a null to a field the writer lacks, OP_DEFAULT decodes the reader's default (Avro binary,
 * default a of the defaults table) with its child ops instead of the datum's bytes. A datum that fails
 * is rolled back (every slot to its length before the datum) and becomes a null row; the others are
 * untouched.
 * Values the reference leaves to pyarrow's checks (an int beyond int32, a decimal beyond its
 * precision, a time of day outside [0, 24 h), a 10-byte varint beyond 64 bits) make the call return
 * NotImplemented: the reference then decodes the chunk, so its messages stay the single definition
 * of those cases. */
#include "native.h"

enum { OP_NULL, OP_BOOL, OP_INT32, OP_INT64, OP_MILLIS, OP_FLOAT, OP_DOUBLE, OP_BYTES, OP_STRING,
       OP_FIXED, OP_ENUM, OP_DECIMAL, OP_DECIMAL_FIXED, OP_RECORD, OP_ARRAY, OP_MAP, OP_UNION_BARE,
       OP_UNION_STRUCT, OP_TIME_MILLIS, OP_TIME_MICROS, OP_ABSENT, OP_DEFAULT };
#define OP_WIDTH 5
#define MAX_DEPTH 64

typedef struct {
    int op, slot, nchild, a, b;
    int first, next; /* the first child op, the next sibling (-1: none) */
} op_t;

typedef struct {
    gbuf valid, offsets, data;
    int64_t count, nulls; /* nulls: elements whose validity byte is 0 (none: no validity buffer) */
} slot_t;

typedef struct {
    size_t valid, offsets, data;
    int64_t count, nulls;
} mark_t;

typedef struct {
    const op_t *ops;
    slot_t *slots;
    const uint8_t *symbols; /* enum symbols: int32 offsets (nsymbols + 1), then the text */
    int nsym;
    const uint8_t *defaults; /* encoded defaults, laid out as the symbols */
    int ndef;
    const uint8_t *b; /* the datum */
    int64_t n;
    kerr err;
    int unsupported; /* a value the reference leaves to pyarrow */
    int oom;
} ctx_t;

#define FAIL(c, pos, ...) do { kerr_set(&(c)->err, (pos), __VA_ARGS__); return -1; } while (0)

static inline int put(ctx_t *c, gbuf *g, const void *v, size_t len) {
    /* the room test inline: gbuf_reserve is in another unit, and this runs for every value */
    if ((g->len + len > g->cap || g->data == NULL) && gbuf_reserve(g, len) < 0) { c->oom = 1; return -1; }
    memcpy(g->data + g->len, v, len);
    g->len += len;
    return 0;
}

static int put_valid(ctx_t *c, slot_t *s, uint8_t v) {
    s->count++;
    s->nulls += !v;
    return put(c, &s->valid, &v, 1);
}

static int put_offset(ctx_t *c, slot_t *s, int64_t end) {
    if (end > INT32_MAX) { c->unsupported = 1; return -1; }
    int32_t o = (int32_t)end;
    return put(c, &s->offsets, &o, 4);
}

/* Avro's zig-zag varint, as avro_decode._long reads it. */
static int read_long(ctx_t *c, int64_t *p, int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (*p >= c->n) FAIL(c, *p, "the datum ends inside a number");
        uint8_t byte = c->b[(*p)++];
        if (shift == 63 && byte > 1 && !(byte & 0x80)) { c->unsupported = 1; return -1; } /* beyond 64 bits */
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) break;
        shift += 7;
        if (shift > 63) FAIL(c, *p, "a number longer than 10 bytes");
    }
    *out = (int64_t)((result >> 1) ^ (~(result & 1) + 1));
    return 0;
}

static int take(ctx_t *c, int64_t *p, int64_t len) {
    if (len < 0) FAIL(c, *p, "a negative length %lld", (long long)len);
    if (len > c->n - *p) /* not *p + len: a length near INT64_MAX would wrap */
        FAIL(c, *p, "the datum ends inside a %lld-byte value", (long long)len);
    return 0;
}

static int utf8_valid(const uint8_t *s, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        uint8_t x = s[i];
        if (x < 0x80) { i++; continue; }
        int need;
        uint32_t cp;
        if (x >= 0xC2 && x <= 0xDF) { need = 1; cp = x & 0x1F; }
        else if (x >= 0xE0 && x <= 0xEF) { need = 2; cp = x & 0x0F; }
        else if (x >= 0xF0 && x <= 0xF4) { need = 3; cp = x & 0x07; }
        else return 0;
        if (i + need >= n) return 0;
        for (int k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += need + 1;
    }
    return 1;
}

/* A length-prefixed or fixed-size value into a binary or string slot. */
static int bytes_value(ctx_t *c, slot_t *s, int64_t *p, int64_t len, int utf8) {
    if (take(c, p, len) < 0) return -1;
    if (utf8 && !utf8_valid(c->b + *p, len)) FAIL(c, *p, "a string that is not UTF-8");
    if (put(c, &s->data, c->b + *p, (size_t)len) < 0 || put_offset(c, s, (int64_t)s->data.len) < 0)
        return -1;
    *p += len;
    return put_valid(c, s, 1);
}

/* A big-endian two's complement unscaled value as decimal128, when it fits `precision` digits. */
static int decimal_value(ctx_t *c, slot_t *s, int64_t *p, int64_t len, int precision) {
    if (take(c, p, len) < 0) return -1;
    if (len > 16) { c->unsupported = 1; return -1; }
    __int128 v = (len > 0 && (c->b[*p] & 0x80)) ? -1 : 0;
    for (int64_t k = 0; k < len; k++) v = (__int128)(((unsigned __int128)v << 8) | c->b[*p + k]);
    unsigned __int128 bound = 1, mag = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    for (int k = 0; k < precision; k++) bound *= 10;
    if (mag >= bound) { c->unsupported = 1; return -1; }
    *p += len;
    if (put(c, &s->data, &v, 16) < 0) return -1;
    return put_valid(c, s, 1);
}

/* One null element in the slots of op i (an Arrow struct's children get one too). */
static int append_null(ctx_t *c, int i) {
    const op_t *o = &c->ops[i];
    slot_t *s = &c->slots[o->slot];
    static const uint8_t zero[16] = {0};
    size_t width = 0;
    switch (o->op) {
    case OP_NULL: s->count++; return 0;
    case OP_BOOL: width = 1; break;
    case OP_INT32: case OP_FLOAT: width = o->b ? 8 : 4; break; /* b: widened to long, double */
    case OP_TIME_MILLIS: width = 4; break;
    case OP_INT64: case OP_MILLIS: case OP_TIME_MICROS: case OP_DOUBLE: width = 8; break;
    case OP_DECIMAL: case OP_DECIMAL_FIXED: width = 16; break;
    case OP_BYTES: case OP_STRING: case OP_FIXED: case OP_ENUM:
        if (put_offset(c, s, (int64_t)s->data.len) < 0) return -1;
        break;
    case OP_ARRAY: case OP_MAP:
        if (put_offset(c, s, c->slots[o->a].count) < 0) return -1;
        break;
    case OP_RECORD: case OP_UNION_STRUCT: /* a record's null-typed field counts too, a union's null branch not */
        for (int j = o->first; j >= 0; j = c->ops[j].next)
            if ((o->op == OP_RECORD || c->ops[j].op != OP_NULL) && append_null(c, j) < 0) return -1;
        break;
    case OP_ABSENT: case OP_DEFAULT: return append_null(c, o->first);
    case OP_UNION_BARE: /* the slot of its one non-null branch (or its own null slot) */
        for (int j = o->first; j >= 0; j = c->ops[j].next)
            if (c->ops[j].op != OP_NULL) return append_null(c, j);
        s->count++;
        return 0;
    }
    if (width && put(c, &s->data, zero, width) < 0) return -1;
    return put_valid(c, s, 0);
}

static int decode(ctx_t *c, int i, int64_t *p, int depth);

static int decode_blocks(ctx_t *c, const op_t *o, int64_t *p, int depth) {
    slot_t *s = &c->slots[o->slot];
    for (;;) {
        int64_t count, size;
        if (read_long(c, p, &count) < 0) return -1;
        if (count == 0) break;
        if (count < 0) {
            if (count == INT64_MIN) { c->unsupported = 1; return -1; }
            count = -count;
            if (read_long(c, p, &size) < 0) return -1;
        }
        if (o->b && count > o->b) /* b: the most items of no bytes a block holds (avro_decode.MAX_EMPTY_ITEMS) */
            FAIL(c, *p, "a block of %lld items of no bytes (at most %d)", (long long)count, o->b);
        if (!o->b && count > c->n - *p + 1) /* every item takes a byte at least */
            FAIL(c, *p, "a block of %lld items in %lld bytes", (long long)count, (long long)(c->n - *p));
        for (int64_t k = 0; k < count; k++) {
            if (o->op == OP_MAP) {
                int64_t len;
                if (read_long(c, p, &len) < 0 || bytes_value(c, &c->slots[o->a], p, len, 1) < 0) return -1;
            }
            if (decode(c, o->first, p, depth + 1) < 0) return -1;
        }
    }
    if (put_offset(c, s, c->slots[o->a].count) < 0) return -1;
    return put_valid(c, s, 1);
}

static int decode_union(ctx_t *c, int i, int64_t *p, int depth) {
    const op_t *o = &c->ops[i];
    int64_t branch;
    if (read_long(c, p, &branch) < 0) return -1;
    int branches = o->op == OP_UNION_STRUCT ? o->b : o->nchild; /* a struct's members of other versions follow */
    if (branch < 0 || branch >= branches) FAIL(c, *p, "union branch %lld of %d", (long long)branch, branches);
    int chosen = o->first;
    for (int64_t k = 0; k < branch; k++) chosen = c->ops[chosen].next;
    if (c->ops[chosen].op == OP_NULL) return append_null(c, i); /* [null, T]: T null; else the struct null */
    if (o->op == OP_UNION_BARE) return decode(c, chosen, p, depth + 1);
    for (int j = o->first; j >= 0; j = c->ops[j].next) {
        if (c->ops[j].op == OP_NULL) continue;
        if ((j == chosen ? decode(c, j, p, depth + 1) : append_null(c, j)) < 0) return -1;
    }
    return put_valid(c, &c->slots[o->slot], 1);
}

/* The reader's default of a field the writer lacks: its encoded bytes read by its ops (the child). */
static int decode_default(ctx_t *c, const op_t *o, int depth) {
    const int32_t *offs = (const int32_t *)c->defaults;
    const uint8_t *text = c->defaults + 4 * (c->ndef + 1);
    const uint8_t *b = c->b;
    int64_t n = c->n, at = 0;
    c->b = text + offs[o->a];
    c->n = offs[o->a + 1] - offs[o->a];
    int rc = decode(c, o->first, &at, depth + 1);
    if (rc == 0 && at != c->n) kerr_set(&c->err, at, "a default that does not fit its schema"), rc = -1;
    c->b = b, c->n = n;
    return rc;
}

/* One value of op i at *p. */
static int decode(ctx_t *c, int i, int64_t *p, int depth) {
    const op_t *o = &c->ops[i];
    slot_t *s = &c->slots[o->slot];
    int64_t v, len;
    if (depth > MAX_DEPTH) { c->unsupported = 1; return -1; }
    switch (o->op) {
    case OP_NULL: s->count++; return 0;
    case OP_BOOL: {
        if (*p >= c->n) FAIL(c, *p, "the datum ends inside a boolean");
        uint8_t b = c->b[(*p)++] != 0;
        if (put(c, &s->data, &b, 1) < 0) return -1;
        break;
    }
    case OP_INT32: case OP_TIME_MILLIS: /* pyarrow refuses a time of day outside [0, 24 h) */
        if (read_long(c, p, &v) < 0) return -1;
        if (v < INT32_MIN || v > INT32_MAX || (o->op == OP_TIME_MILLIS && (v < 0 || v >= 86400000LL))) {
            c->unsupported = 1;
            return -1;
        }
        if (o->b) { if (put(c, &s->data, &v, 8) < 0) return -1; break; }
        int32_t v32 = (int32_t)v;
        if (put(c, &s->data, &v32, 4) < 0) return -1;
        break;
    case OP_INT64: case OP_MILLIS: case OP_TIME_MICROS:
        if (read_long(c, p, &v) < 0) return -1;
        if (o->op == OP_TIME_MICROS && (v < 0 || v >= 86400000000LL)) { c->unsupported = 1; return -1; }
        if (o->op == OP_MILLIS && __builtin_mul_overflow(v, (int64_t)1000, &v)) { c->unsupported = 1; return -1; }
        if (put(c, &s->data, &v, 8) < 0) return -1;
        break;
    case OP_FLOAT: case OP_DOUBLE: {
        int64_t size = o->op == OP_FLOAT ? 4 : 8;
        if (*p + size > c->n) FAIL(c, *p, "the datum ends inside a %s", size == 4 ? "float" : "double");
        if (o->b) { /* a float stored as a double */
            float f;
            memcpy(&f, c->b + *p, 4);
            double d = f;
            if (put(c, &s->data, &d, 8) < 0) return -1;
        } else if (put(c, &s->data, c->b + *p, (size_t)size) < 0) return -1;
        *p += size;
        break;
    }
    case OP_BYTES: case OP_STRING:
        if (read_long(c, p, &len) < 0) return -1;
        return bytes_value(c, s, p, len, o->op == OP_STRING);
    case OP_FIXED: return bytes_value(c, s, p, o->a, 0);
    case OP_DECIMAL:
        if (read_long(c, p, &len) < 0) return -1;
        return decimal_value(c, s, p, len, o->a);
    case OP_DECIMAL_FIXED: return decimal_value(c, s, p, o->b, o->a);
    case OP_ENUM: {
        if (read_long(c, p, &v) < 0) return -1;
        if (v < 0 || v >= o->b) FAIL(c, *p, "enum index %lld of %d symbols", (long long)v, o->b);
        const int32_t *offs = (const int32_t *)c->symbols;
        const uint8_t *text = c->symbols + 4 * (c->nsym + 1);
        int64_t at = o->a + v;
        if (put(c, &s->data, text + offs[at], (size_t)(offs[at + 1] - offs[at])) < 0 ||
            put_offset(c, s, (int64_t)s->data.len) < 0)
            return -1;
        break;
    }
    case OP_RECORD:
        for (int j = o->first; j >= 0; j = c->ops[j].next)
            if (decode(c, j, p, depth + 1) < 0) return -1;
        break;
    case OP_ARRAY: case OP_MAP: return decode_blocks(c, o, p, depth);
    case OP_ABSENT: return append_null(c, o->first);
    case OP_DEFAULT: return decode_default(c, o, depth);
    case OP_UNION_BARE: case OP_UNION_STRUCT: return decode_union(c, i, p, depth);
    }
    return put_valid(c, s, 1);
}

/* ---- the call: program, symbols, slots, then every datum ---- */

static int link_ops(op_t *ops, int nops, int i, int *after) {
    /* children of op i start at i + 1; returns the index after its subtree in *after */
    int j = i + 1, prev = -1;
    ops[i].first = -1;
    ops[i].next = -1;
    for (int k = 0; k < ops[i].nchild; k++) {
        if (j >= nops) return -1;
        if (prev >= 0) ops[prev].next = j; else ops[i].first = j;
        prev = j;
        if (link_ops(ops, nops, j, &j) < 0) return -1;
    }
    *after = j;
    return 0;
}

/* A slot's buffer handed to Python without a copy: the kernel's malloc'd memory, exposed through the
 * buffer protocol (pa.py_buffer keeps this object alive as long as the Arrow buffer over it lives) and
 * freed with the last reference. Copying every slot into bytes was 10 % of the typed read's samples
 * (docs/performance.md "Typed export"). */
typedef struct {
    PyObject_HEAD
    uint8_t *data;
    Py_ssize_t len;
} kbuf_t;

static int kbuf_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    kbuf_t *k = (kbuf_t *)self;
    static uint8_t empty[8];
    return PyBuffer_FillInfo(view, self, k->data ? k->data : empty, k->len, 0, flags);
}

static void kbuf_dealloc(PyObject *self) {
    free(((kbuf_t *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs kbuf_as_buffer = {.bf_getbuffer = kbuf_getbuffer};

static PyTypeObject KernelBuffer = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kfmt._speedups.KernelBuffer",
    .tp_basicsize = sizeof(kbuf_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = kbuf_dealloc,
    .tp_as_buffer = &kbuf_as_buffer,
    .tp_doc = "memory a kernel filled, owned by this object (the buffer protocol gives it out)",
};

/* The gbuf's memory moved into a KernelBuffer (the gbuf is left empty), or NULL with an exception. */
static PyObject *kbuf_take(gbuf *g) {
    if (!(KernelBuffer.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&KernelBuffer) < 0) return NULL;
    kbuf_t *k = PyObject_New(kbuf_t, &KernelBuffer);
    if (!k) return NULL;
    k->data = g->data, k->len = (Py_ssize_t)g->len;
    g->data = NULL, g->len = g->cap = 0;
    return (PyObject *)k;
}

static PyObject *slots_result(slot_t *slots, int nslots) {
    PyObject *out = PyList_New(nslots);
    if (!out) return NULL;
    for (int k = 0; k < nslots; k++) {
        slot_t *s = &slots[k];
        PyObject *valid = s->nulls ? kbuf_take(&s->valid) : Py_NewRef(Py_None); /* None: no nulls */
        PyObject *offsets = valid ? kbuf_take(&s->offsets) : NULL;
        PyObject *data = offsets ? kbuf_take(&s->data) : NULL;
        PyObject *t = data ? Py_BuildValue("(LNNN)", (long long)s->count, valid, offsets, data) : NULL;
        if (!t) {
            if (!data) { Py_XDECREF(valid); Py_XDECREF(offsets); }
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, t);
    }
    return out;
}

static void mark(const slot_t *slots, mark_t *m, int nslots) {
    for (int k = 0; k < nslots; k++)
        m[k] = (mark_t){slots[k].valid.len, slots[k].offsets.len, slots[k].data.len, slots[k].count,
                        slots[k].nulls};
}

static void rollback(slot_t *slots, const mark_t *m, int nslots) {
    for (int k = 0; k < nslots; k++) {
        slots[k].valid.len = m[k].valid, slots[k].offsets.len = m[k].offsets;
        slots[k].data.len = m[k].data, slots[k].count = m[k].count, slots[k].nulls = m[k].nulls;
    }
}

/* Every datum (bytes[starts[r] : starts[r] + lengths[r]]) decoded by the program at roots[which[r]];
 * the failed ones as (row, reason). */
static PyObject *decode_all(ctx_t *c, int nslots, const uint8_t *data, const int64_t *starts,
                            const int64_t *lengths, const int32_t *roots, const int32_t *which,
                            Py_ssize_t rows, mark_t *marks) {
    PyObject *failed = PyList_New(0);
    if (!failed) return NULL;
    for (int k = 0; k < nslots; k++) /* every list, string and binary starts at offset 0 */
        if (put_offset(c, &c->slots[k], 0) < 0) break;
    for (Py_ssize_t r = 0; r < rows && !c->oom && !c->unsupported; r++) {
        int root = roots[which[r]];
        c->b = data + starts[r];
        c->n = lengths[r];
        c->err.set = 0;
        int64_t p = 0;
        mark(c->slots, marks, nslots);
        if (decode(c, root, &p, 0) == 0 && p != c->n)
            kerr_set(&c->err, p, "%lld bytes left after the datum", (long long)(c->n - p));
        if (c->oom || c->unsupported) break;
        if (!c->err.set) continue;
        rollback(c->slots, marks, nslots);
        PyObject *reason = PyUnicode_FromFormat("%s (byte %lld of %lld)", c->err.message,
                                                (long long)c->err.position, (long long)c->n);
        PyObject *item = reason ? Py_BuildValue("(nN)", r, reason) : NULL;
        if (!item || PyList_Append(failed, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(failed);
            return NULL;
        }
        Py_DECREF(item);
        if (append_null(c, root) < 0) break;
    }
    return failed;
}

/* A packed table (int32 count, int32 offsets, bytes) of `buf`: its count, or -1 when malformed. */
static int table_count(const Py_buffer *buf) {
    if (buf->len < 4) return -1;
    int n = *(const int32_t *)buf->buf;
    if (n < 0 || buf->len < 4 * ((Py_ssize_t)n + 2)) return -1;
    const int32_t *offs = (const int32_t *)buf->buf + 1;
    for (int k = 0; k < n; k++)
        if (offs[k] < 0 || offs[k + 1] < offs[k]) return -1;
    return buf->len - 4 * ((Py_ssize_t)n + 2) >= offs[n] ? n : -1;
}

/* The ops of the programs read and checked: every field in range, every program one tree. */
static int load_ops(op_t *ops, int nops, const int32_t *words, const int32_t *roots, int nroots,
                    int nslots, int nsym, int ndef) {
    for (int i = 0; i < nops; i++) {
        const int32_t *w = words + i * OP_WIDTH;
        ops[i] = (op_t){.op = w[0], .slot = w[1], .nchild = w[2], .a = w[3], .b = w[4]};
        int bad_a = (w[0] == OP_ARRAY || w[0] == OP_MAP) && (w[3] < 0 || w[3] >= nslots);
        int bad_enum = w[0] == OP_ENUM && (w[3] < 0 || w[4] < 0 || w[3] + w[4] > nsym);
        int bad_default = w[0] == OP_DEFAULT && (w[3] < 0 || w[3] >= ndef);
        int one_child = (w[0] == OP_ABSENT || w[0] == OP_DEFAULT) && w[2] != 1;
        if (w[1] < 0 || w[1] >= nslots || w[2] < 0 || bad_a || bad_enum || bad_default || one_child ||
            w[0] < 0 || w[0] > OP_DEFAULT)
            return -1;
    }
    for (int k = 0; k < nroots; k++) {
        int after = 0, end = k + 1 < nroots ? roots[k + 1] : nops;
        if (roots[k] < 0 || roots[k] >= nops || link_ops(ops, nops, roots[k], &after) < 0 || after != end)
            return -1;
    }
    return nroots > 0 && roots[0] == 0 ? 0 : -1;
}

/* decode_avro(ops, roots, symbols, defaults, nslots, data, starts, lengths, which) -> ([(count, valid,
 * offsets, data) per slot], [(row, reason)]) or NotImplemented. ops: int32 ops of every program; roots:
 * int32 first op of each; symbols, defaults: packed tables; data: the value bytes; starts, lengths:
 * int64 per datum; which: int32 program per datum. */
PyObject *py_decode_avro(PyObject *self, PyObject *args) {
    Py_buffer prog, rts, sym, dfl, data, st, ln, wh;
    int nslots;
    if (!PyArg_ParseTuple(args, "y*y*y*y*iy*y*y*y*", &prog, &rts, &sym, &dfl, &nslots, &data, &st, &ln, &wh))
        return NULL;
    PyObject *result = NULL;
    int bad_slots = nslots < 0;
    if (bad_slots) nslots = 0;
    int nops = (int)(prog.len / (OP_WIDTH * 4)), nroots = (int)(rts.len / 4);
    Py_ssize_t rows = st.len / 8;
    op_t *ops = calloc((size_t)nops + 1, sizeof(op_t));
    slot_t *slots = calloc((size_t)nslots + 1, sizeof(slot_t));
    mark_t *marks = calloc((size_t)nslots + 1, sizeof(mark_t));
    ctx_t c = {.ops = ops, .slots = slots, .nsym = table_count(&sym), .ndef = table_count(&dfl)};
    if (!ops || !slots || !marks) { PyErr_NoMemory(); goto done; }
    int bad = bad_slots || c.nsym < 0 || c.ndef < 0 || ln.len != st.len || wh.len != rows * 4 ||
              load_ops(ops, nops, prog.buf, rts.buf, nroots, nslots, c.nsym, c.ndef) < 0;
    for (Py_ssize_t r = 0; r < rows && !bad; r++)
        bad = ((const int32_t *)wh.buf)[r] < 0 || ((const int32_t *)wh.buf)[r] >= nroots;
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "not an Avro program (an op, table or program number out of range)");
        goto done;
    }
    c.symbols = (const uint8_t *)sym.buf + 4; /* the first int32 is the number of entries */
    c.defaults = (const uint8_t *)dfl.buf + 4;
    PyObject *failed = decode_all(&c, nslots, data.buf, st.buf, ln.buf, rts.buf, wh.buf, rows, marks);
    if (!failed) goto done;
    if (c.oom) { Py_DECREF(failed); PyErr_NoMemory(); goto done; }
    if (c.unsupported) { Py_DECREF(failed); result = Py_NewRef(Py_NotImplemented); goto done; }
    PyObject *buffers = slots_result(slots, nslots);
    result = buffers ? Py_BuildValue("(NN)", buffers, failed) : NULL;
    if (!buffers) Py_DECREF(failed);
done:
    if (slots) for (int k = 0; k < nslots; k++) {
        gbuf_free(&slots[k].valid); gbuf_free(&slots[k].offsets); gbuf_free(&slots[k].data);
    }
    free(ops); free(slots); free(marks);
    PyBuffer_Release(&prog); PyBuffer_Release(&rts); PyBuffer_Release(&sym); PyBuffer_Release(&dfl);
    PyBuffer_Release(&data); PyBuffer_Release(&st); PyBuffer_Release(&ln); PyBuffer_Release(&wh);
    return result;
}
