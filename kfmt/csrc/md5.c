/* MD5 as RFC 1321 defines it (see md5.h). Keys are short, so this hashes one message at a time with
 * no streaming state: the whole 64-byte blocks straight from the input, then the padded tail. */
#include "md5.h"

#include <string.h>

/* The additive constants: word i is floor(2**32 * |sin(i + 1)|), radians (RFC 1321, 3.4). Generated
 * with Python: [int(abs(math.sin(i + 1)) * 2**32) for i in range(64)]. */
static const uint32_t SINE[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

/* The four auxiliary functions, one per round, written in fewer operations than the RFC's forms:
 * F picks y or z by the bits of x, G picks x or y by the bits of z. */
static inline uint32_t pick_by_x(uint32_t x, uint32_t y, uint32_t z) { return z ^ (x & (y ^ z)); }
static inline uint32_t pick_by_z(uint32_t x, uint32_t y, uint32_t z) { return y ^ (z & (x ^ y)); }
static inline uint32_t parity(uint32_t x, uint32_t y, uint32_t z) { return x ^ y ^ z; }
static inline uint32_t y_xor_x_or_not_z(uint32_t x, uint32_t y, uint32_t z) { return y ^ (x | ~z); }

static inline uint32_t rotate_left(uint32_t x, unsigned s) { return (x << s) | (x >> (32 - s)); }

/* Round r visits the block's sixteen words in the order start + stride * j (mod 16) and rotates by
 * the four amounts of its row in turn. */
static const unsigned WORD_START[4] = {0, 1, 5, 0}, WORD_STRIDE[4] = {1, 5, 3, 7};
static const unsigned SHIFTS[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

/* one round's sixteen operations: each updates one of a, d, c, b (in that order, again and again) as
 * itself = next + ((itself + f(next, next-but-one, last) + word + sine) <<< shift) */
#define MD5_ROUND(f, r)                                                                              \
    for (unsigned j = 0; j < 16; j++) {                                                              \
        uint32_t word = x[(WORD_START[r] + WORD_STRIDE[r] * j) & 15];                                \
        uint32_t sum = s[0] + f(s[1], s[2], s[3]) + word + SINE[16 * (r) + j];                       \
        uint32_t next = s[1] + rotate_left(sum, SHIFTS[r][j & 3]);                                   \
        /* the roles move one place: the old d becomes a, the new value becomes b */                 \
        s[0] = s[3], s[3] = s[2], s[2] = s[1], s[1] = next;                                          \
    }

static void compress(uint32_t state[4], const uint8_t block[64]) {
    uint32_t x[16], s[4];
    for (int i = 0; i < 16; i++)
        x[i] = (uint32_t)block[4 * i] | (uint32_t)block[4 * i + 1] << 8 | (uint32_t)block[4 * i + 2] << 16 |
               (uint32_t)block[4 * i + 3] << 24;
    memcpy(s, state, sizeof s);
    MD5_ROUND(pick_by_x, 0)
    MD5_ROUND(pick_by_z, 1)
    MD5_ROUND(parity, 2)
    MD5_ROUND(y_xor_x_or_not_z, 3)
    for (int i = 0; i < 4; i++) state[i] += s[i];
}

void kfmt_md5(const void *data, size_t len, uint8_t digest[16]) {
    const uint8_t *p = data;
    uint32_t state[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    size_t whole = len - len % 64;
    for (size_t at = 0; at < whole; at += 64) compress(state, p + at);
    /* the tail: the last bytes, a 1 bit, zeros up to 8 bytes short of a block boundary, then the
     * message length in bits as 64 bits little-endian (one block, or two if the length won't fit) */
    uint8_t tail[128] = {0};
    size_t left = len - whole;
    memcpy(tail, p + whole, left);
    tail[left] = 0x80;
    size_t tail_len = left < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len << 3;
    for (int i = 0; i < 8; i++) tail[tail_len - 8 + i] = (uint8_t)(bits >> (8 * i));
    for (size_t at = 0; at < tail_len; at += 64) compress(state, tail + at);
    for (int i = 0; i < 16; i++) digest[i] = (uint8_t)(state[i / 4] >> (8 * (i % 4)));
}
