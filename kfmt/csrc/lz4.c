/* Kafka's LZ4 frames (docs/format.md §5.4) inflated without a Python call, for the run walks
 * (compressed.c): a v2 lz4 batch is one LZ4 frame of independent blocks of at most 64 KiB.
 *
 * Written here from the public format descriptions (the LZ4 frame format and block format documents
 * of the lz4 project, and xxHash's XXH32 specification); no code of liblz4 or xxHash is used.
 *
 * The reference is the lz4 codec plugin (plugins/compression/lz4.py: its frame checks, then each
 * block through python-lz4's LZ4_decompress_safe with the frame's block maximum as the output
 * capacity). The kernel accepts a frame only where it is sure the reference gives the same bytes:
 * everything the plugin checks is checked alike, and a block is decoded only when it keeps the
 * parsing rules LZ4_decompress_safe enforces (literal and match lengths within the input's and the
 * output's limits, a match within the bytes already written, the end of the input reached by a
 * sequence of literals alone), with offset 0 (invalid) refused outright. Anything else -- a
 * damaged frame, an unusual one, output above max_size -- gives 0, and the caller leaves the entry
 * to the plugin, which raises its own error or decides otherwise. Every read and write is
 * bounds-checked. tests/format/test_lz4_kernel.py holds it to the plugin on random and damaged
 * frames and blocks, the corpus and other producers' frames. */
#include "native.h"

/* ---------------------------------------------------------------- XXH32 (seed 0) */

#define P32_1 0x9E3779B1U
#define P32_2 0x85EBCA77U
#define P32_3 0xC2B2AE3DU
#define P32_4 0x27D4EB2FU
#define P32_5 0x165667B1U

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint32_t xxh32_round(uint32_t acc, uint32_t lane) { return rotl32(acc + lane * P32_2, 13) * P32_1; }

uint32_t kfmt_xxh32(const uint8_t *p, size_t n) {
    const uint8_t *end = p + n;
    uint32_t h;
    if (n >= 16) {
        uint32_t v1 = P32_1 + P32_2, v2 = P32_2, v3 = 0, v4 = 0U - P32_1;
        const uint8_t *limit = end - 16;
        do {
            v1 = xxh32_round(v1, le32(p));
            v2 = xxh32_round(v2, le32(p + 4));
            v3 = xxh32_round(v3, le32(p + 8));
            v4 = xxh32_round(v4, le32(p + 12));
            p += 16;
        } while (p <= limit);
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
    } else {
        h = P32_5;
    }
    h += (uint32_t)n;
    while (end - p >= 4) {
        h = rotl32(h + le32(p) * P32_3, 17) * P32_4;
        p += 4;
    }
    while (p < end) {
        h = rotl32(h + (*p) * P32_5, 11) * P32_1;
        p++;
    }
    h ^= h >> 15;
    h *= P32_2;
    h ^= h >> 13;
    h *= P32_3;
    h ^= h >> 16;
    return h;
}

/* ---------------------------------------------------------------- one block */

/* Bytes beyond `cap` that lz4_block may scribble on (whole 16-byte copies where a literal run or a
 * match ends short of them): callers give dst room for cap + LZ4_SLACK bytes. */
#define LZ4_SLACK 32

static inline void copy16(uint8_t *to, const uint8_t *from) { memcpy(to, from, 16); }

/* The block src[0..n) decoded into dst (room for cap + LZ4_SLACK bytes, cap the frame's block
 * maximum): its length, or -1 where LZ4_decompress_safe(src, dst, n, cap) of liblz4 >= 1.9.4 could
 * refuse it or give other bytes. */
static int64_t lz4_block(const uint8_t *src, int64_t n, uint8_t *dst, int64_t cap) {
    int64_t ip = 0, op = 0;
    if (n <= 0) return -1;
    for (;;) {
        if (ip >= n) return -1;
        unsigned token = src[ip++];
        int64_t lit = token >> 4;
        if (lit == 15) { /* more length bytes: 15 input bytes must be left before the first, and after each */
            if (n - ip <= 15) return -1;
            unsigned s;
            do {
                s = src[ip++];
                lit += s;
                if (n - ip < 15) return -1;
            } while (s == 255);
        }
        if (op + lit > cap - 12 || (n - ip) - lit < 8) {
            /* within the output's or the input's last bytes: only the last sequence (literals, no
             * match) may reach there, and it must end the input exactly */
            if (n - ip != lit || op + lit > cap) return -1;
            memcpy(dst + op, src + ip, (size_t)lit);
            return op + lit;
        }
        if (lit <= 16 && n - ip >= 16) {
            copy16(dst + op, src + ip);
        } else {
            memcpy(dst + op, src + ip, (size_t)lit);
        }
        ip += lit;
        op += lit;
        int64_t offset = (int64_t)src[ip] | ((int64_t)src[ip + 1] << 8); /* (n - ip >= 8 here) */
        ip += 2;
        int64_t match = token & 15;
        if (match == 15) { /* more length bytes; 4 input bytes must be left after each (5 here) */
            unsigned s;
            do {
                if (n - ip <= 4) return -1;
                s = src[ip++];
                match += s;
                if (n - ip <= 4) return -1;
            } while (s == 255);
        }
        match += 4; /* MINMATCH */
        if (offset == 0 || offset > op || op + match > cap - 5) return -1; /* the last 5 bytes are literals */
        const uint8_t *from = dst + op - offset;
        uint8_t *to = dst + op, *end = to + match;
        if (offset >= 16) { /* whole 16-byte copies, each reading only bytes written before it */
            do {
                copy16(to, from);
                to += 16;
                from += 16;
            } while (to < end);
        } else if (offset >= 8) {
            do {
                memcpy(to, from, 8);
                to += 8;
                from += 8;
            } while (to < end);
        } else { /* overlapping: a pattern of `offset` bytes repeated, so of any multiple of it too */
            int64_t period = offset;
            while (period < 8) period += offset;
            uint8_t *first = match < period ? end : to + period;
            for (; to < first; to++, from++) *to = *from;
            for (from = to - period; to < end; to += 8, from += 8) memcpy(to, from, 8);
        }
        op += match;
    }
}

/* ---------------------------------------------------------------- the frame */

static const int64_t BLOCK_MAX[8] = {0, 0, 0, 0, 64 << 10, 256 << 10, 1 << 20, 4 << 20};

/* The frame src[0..n) of a message of `magic` inflated into out (emptied first): 1, or 0 where the
 * plugin's decompress should decide (it may raise, or give what this does not vouch for); -1 out of
 * memory. */
int lz4_frame_inflate(const uint8_t *src, int64_t n, int magic, int64_t max_size, gbuf *out) {
    out->len = 0;
    if (n < 7 || le32(src) != 0x184D2204U) return 0;
    unsigned flg = src[4], bd = src[5];
    if (flg >> 6 != 1 || (flg & 0x03) || !(flg & 0x20)) return 0;
    if ((bd & 0x8F) || BLOCK_MAX[(bd >> 4) & 7] == 0) return 0;
    int64_t block_max = BLOCK_MAX[(bd >> 4) & 7];
    int checksums = (flg & 0x10) != 0;
    int64_t pos = 6 + ((flg & 0x08) ? 8 : 0); /* a content size is skipped */
    if (n < pos + 1) return 0;
    /* the header checksum: of the descriptor; magic 0 frames carry Kafka's wrong one, not checked */
    if (magic != 0 && src[pos] != ((kfmt_xxh32(src + 4, (size_t)(pos - 4)) >> 8) & 0xFF)) return 0;
    pos++;
    for (;;) {
        if (n - pos < 4) return 0;
        uint32_t word = le32(src + pos);
        pos += 4;
        if (word == 0) return 1; /* the end mark: anything after it is ignored, as Kafka does */
        int64_t size = word & 0x7FFFFFFF;
        if (size > block_max || size > n - pos) return 0;
        const uint8_t *block = src + pos;
        pos += size;
        if (checksums) {
            if (n - pos < 4 || le32(src + pos) != kfmt_xxh32(block, (size_t)size)) return 0;
            pos += 4;
        }
        if (word & 0x80000000U) { /* stored raw */
            if ((int64_t)out->len + size > max_size) return 0;
            if (gbuf_reserve(out, (size_t)size)) return -1;
            memcpy(out->data + out->len, block, (size_t)size);
            out->len += (size_t)size;
            continue;
        }
        if (gbuf_reserve(out, (size_t)(block_max + LZ4_SLACK))) return -1;
        int64_t made = lz4_block(block, size, out->data + out->len, block_max);
        if (made < 0) return 0;
        out->len += (size_t)made;
        if ((int64_t)out->len > max_size) return 0;
    }
}

/* lz4_frame(data, magic, max_size) -> bytes | NotImplemented: lz4_frame_inflate, for the tests that
 * hold it to the plugin. */
PyObject *py_lz4_frame(PyObject *self, PyObject *args) {
    Py_buffer buf;
    int magic;
    long long max_size;
    if (!PyArg_ParseTuple(args, "y*iL", &buf, &magic, &max_size)) return NULL;
    gbuf out = {0};
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = lz4_frame_inflate(buf.buf, buf.len, magic, max_size, &out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    PyObject *result = ok < 0 ? PyErr_NoMemory()
                       : ok ? PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len)
                            : Py_NewRef(Py_NotImplemented);
    gbuf_free(&out);
    return result;
}

/* xxh32(data) -> int: XXH32 with seed 0, for the tests (against the xxhash package). */
PyObject *py_xxh32(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    uint32_t h = kfmt_xxh32(buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(h);
}
