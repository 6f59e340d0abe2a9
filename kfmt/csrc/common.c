/* Small shared pieces: errors, growable buffers, the slow path of varint decoding. */
#include "native.h"

#include <stdarg.h>
#include <stdio.h>

void kerr_set(kerr *e, int64_t position, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->position = position;
    e->set = 1;
}

PyObject *raise_kerr(const kerr *e) {
    PyObject *args = e->position >= 0 ? Py_BuildValue("(sL)", e->message, (long long)e->position)
                                      : Py_BuildValue("(sO)", e->message, Py_None);
    if (args != NULL) {
        PyErr_SetObject(DecodeError, args);
        Py_DECREF(args);
    }
    return NULL;
}

int gbuf_reserve(gbuf *b, size_t extra) {
    if (b->len + extra <= b->cap && b->data != NULL) return 0;
    if (b->fixed) return -1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra) cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

void gbuf_free(gbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* kfmt.format.wire.read_varint: at most max_bytes bytes (5 for an int, 10 for a long); the value is cut to
 * the type's width before the zigzag step, as Java's int/long arithmetic does. */
int read_varint_slow(const uint8_t *d, int64_t *pos, int64_t end, int max_bytes, int64_t *out, kerr *e) {
    int64_t p = *pos;
    uint64_t result = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end) {
            kerr_set(e, p, "varint runs past the end of the data");
            return -1;
        }
        uint8_t b = d[p++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            if (max_bytes == 5) result &= 0xFFFFFFFFu;
            *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
            *pos = p;
            return 0;
        }
        shift += 7;
    }
    kerr_set(e, p - max_bytes, "varint longer than %d bytes", max_bytes);
    return -1;
}
