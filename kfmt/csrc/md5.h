/* MD5 (RFC 1321), for the key hashes of the compaction offset map: Kafka's SkimpyOffsetMap keys its
 * table by the MD5 of each record key (kfmt/compaction/offset_map.py; hashlib.md5 is the reference).
 * Keys are short, so this is the plain round function, one message at a time. */
#ifndef KFMT_MD5_H
#define KFMT_MD5_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static uint32_t md5_k[64];
static const uint8_t md5_r[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                  5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                  4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                  6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

/* K[i] = floor(|sin(i + 1)| * 2^32) (RFC 1321, 3.4) */
static void md5_init_table(void) {
    for (int i = 0; i < 64; i++) md5_k[i] = (uint32_t)(fabs(sin((double)(i + 1))) * 4294967296.0);
}

static inline uint32_t md5_rotl(uint32_t x, int c) { return (x << c) | (x >> (32 - c)); }

static void md5_block(uint32_t h[4], const uint8_t *block) {
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)block[4 * i] | (uint32_t)block[4 * i + 1] << 8 | (uint32_t)block[4 * i + 2] << 16 |
               (uint32_t)block[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) & 15; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) & 15; }
        else { f = c ^ (b | ~d); g = (7 * i) & 15; }
        uint32_t t = d;
        d = c;
        c = b;
        b = b + md5_rotl(a + f + md5_k[i] + m[g], md5_r[i]);
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

/* The 16-byte MD5 digest of p[0..n) */
static void md5(const uint8_t *p, size_t n, uint8_t out[16]) {
    uint32_t h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    size_t whole = n & ~(size_t)63;
    for (size_t at = 0; at < whole; at += 64) md5_block(h, p + at);
    uint8_t tail[128] = {0};
    size_t rest = n - whole;
    memcpy(tail, p + whole, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tail_len - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(h, tail);
    if (tail_len == 128) md5_block(h, tail + 64);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(h[i] >> (8 * j));
}

#endif
