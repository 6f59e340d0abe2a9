/* Record columns to and from pyarrow through the Arrow C data interface.
 *
 * Building: the kernels fill a `columns` struct (plain malloc'd buffers); columns_to_record_batch
 * wraps them in ArrowArray nodes whose release callbacks free them, and pyarrow imports the tree
 * without copying (RecordBatch._import_from_c with kfmt.format.model.RECORD_SCHEMA).
 * Reading: record_view_open exports a RecordBatch (RecordBatch._export_to_c) and checks its types
 * against RECORD_SCHEMA's; anything else (other types, nulls where the schema has none) is left to
 * the pure-Python reference, which decides what such input means. */
#include "native.h"

PyObject *import_record_batch = NULL;
PyObject *record_schema = NULL;

/* ---------------------------------------------------------------- building */

int columns_init(columns *c, int64_t n, size_t data_capacity) {
    memset(c, 0, sizeof *c);
    c->n = n;
    size_t rows = (size_t)n;
    c->offsets = malloc(rows * 8 + 8);
    c->timestamps = malloc(rows * 8 + 8);
    c->key_offsets = malloc(rows * 4 + 4);
    c->value_offsets = malloc(rows * 4 + 4);
    c->header_list_offsets = malloc(rows * 4 + 4);
    if (!c->offsets || !c->timestamps || !c->key_offsets || !c->value_offsets ||
        !c->header_list_offsets || gbuf_reserve(&c->key_data, rows * 16 + 64) ||
        gbuf_reserve(&c->value_data, data_capacity + 64) || gbuf_reserve(&c->hkey_offsets, 4) ||
        gbuf_reserve(&c->hvalue_offsets, 4)) {
        columns_free(c);
        return -1;
    }
    c->key_offsets[0] = c->value_offsets[0] = c->header_list_offsets[0] = 0;
    memset(c->hkey_offsets.data, 0, 4);
    memset(c->hvalue_offsets.data, 0, 4);
    c->hkey_offsets.len = c->hvalue_offsets.len = 4;
    return 0;
}

void columns_free(columns *c) {
    free(c->offsets);
    free(c->timestamps);
    free(c->key_offsets);
    free(c->value_offsets);
    free(c->header_list_offsets);
    free(c->key_valid);
    free(c->value_valid);
    gbuf_free(&c->key_data);
    gbuf_free(&c->value_data);
    gbuf_free(&c->hkey_offsets);
    gbuf_free(&c->hvalue_offsets);
    gbuf_free(&c->hkey_data);
    gbuf_free(&c->hvalue_data);
    gbuf_free(&c->hvalue_valid);
    memset(c, 0, sizeof *c);
}

static uint8_t *all_valid_bitmap(int64_t n) {
    size_t bytes = (size_t)(n + 7) / 8 + 1;
    uint8_t *bits = malloc(bytes);
    if (bits != NULL) memset(bits, 0xFF, bytes);
    return bits;
}

static int null_bit(uint8_t **bits, int64_t n, int64_t i) {
    if (*bits == NULL && (*bits = all_valid_bitmap(n)) == NULL) return -1;
    (*bits)[i >> 3] &= (uint8_t)~(1u << (i & 7));
    return 0;
}

int columns_null_key(columns *c, int64_t i) {
    if (null_bit(&c->key_valid, c->n, i) != 0) return -1;
    c->key_nulls++;
    return 0;
}

int columns_null_value(columns *c, int64_t i) {
    if (null_bit(&c->value_valid, c->n, i) != 0) return -1;
    c->value_nulls++;
    return 0;
}

/* One header (key, value; vlen < 0: a null value) of the record being built. */
int columns_add_header(columns *c, const uint8_t *k, int64_t klen, const uint8_t *v, int64_t vlen) {
    int64_t h = c->headers;
    if (gbuf_reserve(&c->hkey_offsets, 4) || gbuf_reserve(&c->hvalue_offsets, 4) ||
        gbuf_reserve(&c->hkey_data, (size_t)klen) || gbuf_reserve(&c->hvalue_data, vlen > 0 ? (size_t)vlen : 0))
        return -1;
    memcpy(c->hkey_data.data + c->hkey_data.len, k, (size_t)klen);
    c->hkey_data.len += (size_t)klen;
    int32_t kend = (int32_t)c->hkey_data.len;
    memcpy(c->hkey_offsets.data + c->hkey_offsets.len, &kend, 4);
    c->hkey_offsets.len += 4;
    if (vlen >= 0) {
        memcpy(c->hvalue_data.data + c->hvalue_data.len, v, (size_t)vlen);
        c->hvalue_data.len += (size_t)vlen;
    }
    int32_t vend = (int32_t)c->hvalue_data.len;
    memcpy(c->hvalue_offsets.data + c->hvalue_offsets.len, &vend, 4);
    c->hvalue_offsets.len += 4;
    /* the validity bitmap exists from the first null value on; earlier rows are valid */
    if (vlen < 0 || c->hvalue_valid.data != NULL) {
        size_t need = (size_t)(h / 8 + 1);
        if (c->hvalue_valid.data == NULL) {
            if (gbuf_reserve(&c->hvalue_valid, need + 64)) return -1;
            memset(c->hvalue_valid.data, 0xFF, c->hvalue_valid.cap);
            c->hvalue_valid.len = need;
        } else if (need > c->hvalue_valid.len) {
            size_t old_cap = c->hvalue_valid.cap;
            if (gbuf_reserve(&c->hvalue_valid, need - c->hvalue_valid.len)) return -1;
            memset(c->hvalue_valid.data + old_cap, 0xFF, c->hvalue_valid.cap - old_cap);
            c->hvalue_valid.len = need;
        }
        if (vlen < 0) {
            c->hvalue_valid.data[h >> 3] &= (uint8_t)~(1u << (h & 7));
            c->hvalue_nulls++;
        }
    }
    c->headers = h + 1;
    return 0;
}

columns_mark columns_marked(const columns *c) {
    columns_mark m = {c->key_data.len, c->value_data.len, c->hkey_offsets.len, c->hvalue_offsets.len,
                      c->hkey_data.len, c->hvalue_data.len, c->hvalue_valid.len, c->key_nulls, c->value_nulls,
                      c->headers, c->hvalue_nulls};
    return m;
}

void columns_back_to(columns *c, const columns_mark *m) {
    c->key_data.len = m->key_len;
    c->value_data.len = m->value_len;
    c->hkey_offsets.len = m->hkey_offsets_len;
    c->hvalue_offsets.len = m->hvalue_offsets_len;
    c->hkey_data.len = m->hkey_len;
    c->hvalue_data.len = m->hvalue_len;
    if (c->hvalue_valid.data != NULL) c->hvalue_valid.len = m->hvalid_len;
    c->key_nulls = m->key_nulls;
    c->value_nulls = m->value_nulls;
    c->headers = m->headers;
    c->hvalue_nulls = m->hvalue_nulls;
}

int buffer_list_open(buffer_list *l, PyObject *sequence) {
    memset(l, 0, sizeof *l);
    if ((l->seq = PySequence_Fast(sequence, "a sequence of buffers")) == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(l->seq);
    if ((l->views = calloc(n ? (size_t)n : 1, sizeof *l->views)) == NULL) {
        Py_CLEAR(l->seq);
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(l->seq);
    for (; l->n < n; l->n++)
        if (PyObject_GetBuffer(items[l->n], &l->views[l->n], PyBUF_SIMPLE) != 0) {
            buffer_list_release(l);
            return -1;
        }
    return 0;
}

void buffer_list_release(buffer_list *l) {
    for (Py_ssize_t i = 0; i < l->n; i++) PyBuffer_Release(&l->views[i]);
    free(l->views);
    Py_CLEAR(l->seq);
    l->views = NULL;
    l->n = 0;
}

/* ArrowArray nodes: each owns its buffers and its children (the spec lets a consumer move a child
 * out, so each is released on its own). */
typedef struct {
    const void *buffers[3];
    void *owned[3];
    struct ArrowArray *children[5];
} node_data;

static void node_release(struct ArrowArray *a) {
    node_data *d = a->private_data;
    for (int64_t i = 0; i < a->n_children; i++) {
        struct ArrowArray *child = d->children[i];
        if (child->release != NULL) child->release(child);
        free(child);
    }
    for (int i = 0; i < 3; i++) free(d->owned[i]);
    free(d);
    a->release = NULL;
}

/* Fills `a` and takes ownership of b0..b2 (freed even when this fails); children are attached
 * afterwards with node_child. */
static int node_make(struct ArrowArray *a, int64_t length, int64_t null_count, int n_buffers,
                     void *b0, void *b1, void *b2) {
    node_data *d = calloc(1, sizeof *d);
    if (d == NULL) {
        free(b0); free(b1); free(b2);
        a->release = NULL;
        return -1;
    }
    d->buffers[0] = d->owned[0] = b0;
    d->buffers[1] = d->owned[1] = b1;
    d->buffers[2] = d->owned[2] = b2;
    memset(a, 0, sizeof *a);
    a->length = length;
    a->null_count = null_count;
    a->n_buffers = n_buffers;
    a->buffers = d->buffers;
    a->n_children = 0; /* raised as children are attached, so release frees only what exists */
    a->children = d->children;
    a->release = node_release;
    a->private_data = d;
    return 0;
}

static struct ArrowArray *node_child(struct ArrowArray *parent) {
    node_data *d = parent->private_data;
    struct ArrowArray *child = calloc(1, sizeof *child);
    if (child == NULL) return NULL;
    d->children[parent->n_children++] = child;
    return child;
}

static void *take(void **p) {
    void *v = *p;
    *p = NULL;
    return v;
}

static void *take_gbuf(gbuf *b) {
    void *v = b->data;
    if (v != NULL && b->cap > b->len + 4096) {
        /* buffers sized for the worst case give back what they did not use (shrinking in place) */
        void *shrunk = realloc(v, b->len ? b->len : 8);
        if (shrunk != NULL) v = shrunk;
    }
    if (v == NULL) v = malloc(8); /* Arrow wants a pointer for every non-null buffer */
    b->data = NULL;
    b->len = b->cap = 0;
    return v;
}

static int binary_node(struct ArrowArray *a, int64_t n, int64_t nulls, void *valid, void *offsets, gbuf *data) {
    if (nulls == 0) {
        free(valid);
        valid = NULL;
    }
    return node_make(a, n, nulls, 3, valid, offsets, take_gbuf(data));
}

PyObject *columns_to_record_batch(columns *c) {
    struct ArrowArray top;
    int64_t n = c->n, h = c->headers;
    if (import_record_batch == NULL) {
        columns_free(c);
        PyErr_SetString(PyExc_RuntimeError, "kfmt._speedups.configure() was not called");
        return NULL;
    }
    if (node_make(&top, n, 0, 1, NULL, NULL, NULL) != 0) goto nomem;
    struct ArrowArray *a;
    if ((a = node_child(&top)) == NULL || node_make(a, n, 0, 2, NULL, take((void **)&c->offsets), NULL))
        goto nomem_top;
    if ((a = node_child(&top)) == NULL ||
        node_make(a, n, 0, 2, NULL, take((void **)&c->timestamps), NULL))
        goto nomem_top;
    if ((a = node_child(&top)) == NULL ||
        binary_node(a, n, c->key_nulls, take((void **)&c->key_valid), take((void **)&c->key_offsets),
                    &c->key_data))
        goto nomem_top;
    if ((a = node_child(&top)) == NULL ||
        binary_node(a, n, c->value_nulls, take((void **)&c->value_valid),
                    take((void **)&c->value_offsets), &c->value_data))
        goto nomem_top;
    struct ArrowArray *list, *entries, *k, *v;
    if ((list = node_child(&top)) == NULL ||
        node_make(list, n, 0, 2, NULL, take((void **)&c->header_list_offsets), NULL))
        goto nomem_top;
    if ((entries = node_child(list)) == NULL || node_make(entries, h, 0, 1, NULL, NULL, NULL))
        goto nomem_top;
    if ((k = node_child(entries)) == NULL ||
        node_make(k, h, 0, 3, NULL, take_gbuf(&c->hkey_offsets), take_gbuf(&c->hkey_data)))
        goto nomem_top;
    if ((v = node_child(entries)) == NULL ||
        node_make(v, h, c->hvalue_nulls, 3, c->hvalue_nulls ? take_gbuf(&c->hvalue_valid) : NULL,
                  take_gbuf(&c->hvalue_offsets), take_gbuf(&c->hvalue_data)))
        goto nomem_top;
    columns_free(c);
    PyObject *batch = PyObject_CallFunction(import_record_batch, "KO",
                                            (unsigned long long)(uintptr_t)&top, record_schema);
    if (top.release != NULL) top.release(&top); /* not moved: the import failed */
    return batch;
nomem_top:
    if (top.release != NULL) top.release(&top);
nomem:
    columns_free(c);
    return PyErr_NoMemory();
}

/* ---------------------------------------------------------------- reading */

static int format_is(const struct ArrowSchema *s, const char *format) {
    return s->format != NULL && strcmp(s->format, format) == 0;
}

static int has_nulls(const struct ArrowArray *a) {
    return a->buffers[0] != NULL && a->null_count != 0;
}

int record_view_open(record_view *v, PyObject *record_batch) {
    memset(v, 0, sizeof *v);
    PyObject *r = PyObject_CallMethod(record_batch, "_export_to_c", "KK",
                                      (unsigned long long)(uintptr_t)&v->array,
                                      (unsigned long long)(uintptr_t)&v->schema);
    if (r == NULL) return -1;
    Py_DECREF(r);
    const struct ArrowSchema *s = &v->schema;
    const struct ArrowArray *a = &v->array;
    if (!format_is(s, "+s") || s->n_children != 5 || a->n_children != 5 || has_nulls(a)) goto other;
    static const char *formats[5] = {"l", "l", "z", "z", "+l"};
    for (int i = 0; i < 5; i++)
        if (!format_is(s->children[i], formats[i])) goto other;
    const struct ArrowSchema *es = s->children[4]->children[0];
    if (s->children[4]->n_children != 1 || !format_is(es, "+s") || es->n_children != 2 ||
        !format_is(es->children[0], "z") || !format_is(es->children[1], "z"))
        goto other;
    const struct ArrowArray *off = a->children[0], *ts = a->children[1], *key = a->children[2],
                            *value = a->children[3], *list = a->children[4];
    const struct ArrowArray *entries = list->children[0];
    const struct ArrowArray *hkey = entries->children[0], *hvalue = entries->children[1];
    if (has_nulls(off) || has_nulls(ts) || has_nulls(list) || has_nulls(entries) || has_nulls(hkey))
        goto other;
    v->n = a->length;
    v->offsets = off->buffers[1];
    v->off0 = a->offset + off->offset;
    v->timestamps = ts->buffers[1];
    v->ts0 = a->offset + ts->offset;
    v->key_valid = key->null_count ? key->buffers[0] : NULL;
    v->key_offsets = key->buffers[1];
    v->key_data = key->buffers[2];
    v->key0 = a->offset + key->offset;
    v->value_valid = value->null_count ? value->buffers[0] : NULL;
    v->value_offsets = value->buffers[1];
    v->value_data = value->buffers[2];
    v->value0 = a->offset + value->offset;
    v->header_list_offsets = list->buffers[1];
    v->hlist0 = a->offset + list->offset;
    v->hkey_offsets = hkey->buffers[1];
    v->hkey_data = hkey->buffers[2];
    v->hkey0 = entries->offset + hkey->offset;
    v->hvalue_valid = hvalue->null_count ? hvalue->buffers[0] : NULL;
    v->hvalue_offsets = hvalue->buffers[1];
    v->hvalue_data = hvalue->buffers[2];
    v->hvalue0 = entries->offset + hvalue->offset;
    return 1;
other:
    record_view_release(v);
    return 0;
}

void record_view_release(record_view *v) {
    if (v->array.release != NULL) v->array.release(&v->array);
    if (v->schema.release != NULL) v->schema.release(&v->schema);
}
