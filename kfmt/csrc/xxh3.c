/* XXH3-128, seed 0, default secret (see xxh3.h), written from the algorithm's description.
 *
 * Inputs fall into seven length classes, each mixed differently: empty, 1-3, 4-8, 9-16 and 17-128
 * bytes are hashed in a few multiplies; 129-240 bytes in rounds of 32; longer inputs feed eight
 * 64-bit accumulators 64 bytes (a stripe) at a time, scrambling them after every block of 16 stripes,
 * and fold them into the two halves of the result. Record canonical forms are mostly short, so the
 * short classes matter as much as the long loop. The long loop comes in portable C and in SSE2, AVX2
 * and AVX-512 versions of the same two operations, picked once by kfmt_xxh3_init from the CPU
 * (kfmt_xxh3_select picks one by name, for tests). */
#include "xxh3.h"

#include <string.h>

/* The 192-byte default secret and the primes are the algorithm's public constants. */
static const uint8_t SECRET[192] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};
#define P32_1 0x9E3779B1u
#define P32_2 0x85EBCA77u
#define P32_3 0xC2B2AE3Du
#define P64_1 0x9E3779B185EBCA87ull
#define P64_2 0xC2B2AE3D27D4EB4Full
#define P64_3 0x165667B19E3779F9ull
#define P64_4 0x85EBCA77C2B2AE63ull
#define P64_5 0x27D4EB2F165667C5ull
#define MIX_1 0x165667919E3779F9ull
#define MIX_2 0x9FB21C651E98DF25ull

/* The long-input layout: a stripe is 64 input bytes against 64 secret bytes; each next stripe of a
 * block moves 8 bytes further into the secret, so a block is as many stripes as fit (16). */
enum {
    STRIPE_LEN = 64,
    SECRET_STEP = 8,
    STRIPES_PER_BLOCK = (sizeof SECRET - STRIPE_LEN) / SECRET_STEP,
    BLOCK_LEN = STRIPE_LEN * STRIPES_PER_BLOCK,
};

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* the rarer, longer classes stay out of line so the short ones' entry stays small */
#define NOINLINE __attribute__((noinline))

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t secret64(size_t at) { return load64(SECRET + at); }

static inline uint32_t byteswap32(uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xFF00u) | ((x << 8) & 0xFF0000u) | (x << 24);
}

static inline uint64_t byteswap64(uint64_t x) {
    return (uint64_t)byteswap32((uint32_t)x) << 32 | byteswap32((uint32_t)(x >> 32));
}

/* the full 128-bit product of two 64-bit numbers */
static inline kfmt_hash128 multiply_wide(uint64_t a, uint64_t b) {
    kfmt_hash128 r;
#ifdef __SIZEOF_INT128__
    unsigned __int128 p = (unsigned __int128)a * b;
    r.lo = (uint64_t)p;
    r.hi = (uint64_t)(p >> 64);
#else /* schoolbook on 32-bit halves */
    uint64_t ll = (a & 0xFFFFFFFFu) * (b & 0xFFFFFFFFu), hl = (a >> 32) * (b & 0xFFFFFFFFu);
    uint64_t lh = (a & 0xFFFFFFFFu) * (b >> 32), hh = (a >> 32) * (b >> 32);
    uint64_t middle = (ll >> 32) + (hl & 0xFFFFFFFFu) + lh;
    r.lo = (middle << 32) | (ll & 0xFFFFFFFFu);
    r.hi = hh + (hl >> 32) + (middle >> 32);
#endif
    return r;
}

/* the two halves of the 128-bit product, xored: the algorithm's basic mixing step */
static inline uint64_t multiply_fold(uint64_t a, uint64_t b) {
    kfmt_hash128 p = multiply_wide(a, b);
    return p.lo ^ p.hi;
}

/* XXH64's final avalanche, used by the tiniest inputs */
static inline uint64_t avalanche64(uint64_t h) {
    h = (h ^ (h >> 33)) * P64_2;
    h = (h ^ (h >> 29)) * P64_3;
    return h ^ (h >> 32);
}

/* XXH3's own, shorter avalanche */
static inline uint64_t avalanche3(uint64_t h) {
    h = (h ^ (h >> 37)) * MIX_1;
    return h ^ (h >> 32);
}

static kfmt_hash128 hash_empty(void) {
    kfmt_hash128 r = {avalanche64(secret64(64) ^ secret64(72)), avalanche64(secret64(80) ^ secret64(88))};
    return r;
}

/* 1 to 3 bytes: first, middle and last byte and the length packed into 32 bits (and a rotated
 * byte-reversal of them for the high half), each keyed with secret words */
static kfmt_hash128 hash_1_to_3(const uint8_t *p, size_t n) {
    uint32_t packed = (uint32_t)p[0] << 16 | (uint32_t)p[n >> 1] << 24 | p[n - 1] | (uint32_t)n << 8;
    uint32_t reversed = byteswap32(packed);
    uint32_t high = (reversed << 13) | (reversed >> 19);
    uint64_t key_lo = load32(SECRET) ^ load32(SECRET + 4), key_hi = load32(SECRET + 8) ^ load32(SECRET + 12);
    kfmt_hash128 r = {avalanche64(packed ^ key_lo), avalanche64(high ^ key_hi)};
    return r;
}

/* 4 to 8 bytes: the first and last four bytes as one 64-bit word, multiplied wide */
static kfmt_hash128 hash_4_to_8(const uint8_t *p, size_t n) {
    uint64_t word = load32(p) | (uint64_t)load32(p + n - 4) << 32;
    uint64_t keyed = word ^ (secret64(16) ^ secret64(24));
    kfmt_hash128 m = multiply_wide(keyed, P64_1 + ((uint64_t)n << 2));
    m.hi += m.lo << 1;
    m.lo ^= m.hi >> 3;
    m.lo ^= m.lo >> 35;
    m.lo *= MIX_2;
    m.lo ^= m.lo >> 28;
    m.hi = avalanche3(m.hi);
    return m;
}

/* 9 to 16 bytes: the first and last eight bytes (overlapping when shorter than 16) */
static kfmt_hash128 hash_9_to_16(const uint8_t *p, size_t n) {
    uint64_t first = load64(p), last = load64(p + n - 8);
    kfmt_hash128 m = multiply_wide(first ^ last ^ (secret64(32) ^ secret64(40)), P64_1);
    m.lo += (uint64_t)(n - 1) << 54;
    last ^= secret64(48) ^ secret64(56);
    m.hi += last + (uint64_t)(uint32_t)last * (P32_2 - 1);
    m.lo ^= byteswap64(m.hi);
    kfmt_hash128 r = multiply_wide(m.lo, P64_2);
    r.hi += m.hi * P64_2;
    r.lo = avalanche3(r.lo);
    r.hi = avalanche3(r.hi);
    return r;
}

/* 16 input bytes against 16 secret bytes */
static inline uint64_t mix16(const uint8_t *in, const uint8_t *key) {
    return multiply_fold(load64(in) ^ load64(key), load64(in + 8) ^ load64(key + 8));
}

/* The mid-size step: two 16-byte pieces into the pair (lo, hi), each piece also added raw to the
 * other half, against 32 secret bytes. */
static inline void mix32(kfmt_hash128 *acc, const uint8_t *a, const uint8_t *b, const uint8_t *key) {
    acc->lo += mix16(a, key);
    acc->lo ^= load64(b) + load64(b + 8);
    acc->hi += mix16(b, key + 16);
    acc->hi ^= load64(a) + load64(a + 8);
}

/* how 17 to 240 bytes end: the pair into the two halves of the hash */
static inline kfmt_hash128 finish_mid(kfmt_hash128 acc, size_t n) {
    kfmt_hash128 r;
    r.lo = avalanche3(acc.lo + acc.hi);
    r.hi = 0 - avalanche3(acc.lo * P64_1 + acc.hi * P64_4 + (uint64_t)n * P64_2);
    return r;
}

/* 17 to 128 bytes: 16-byte pieces paired from both ends, innermost pair first (pair i: the i-th piece
 * from the start with the i-th from the end, against secret bytes 32i..32i+31); written out, as the
 * fixed secret offsets let the compiler fold the secret words into constants */
static kfmt_hash128 hash_17_to_128(const uint8_t *p, size_t n) {
    kfmt_hash128 acc = {(uint64_t)n * P64_1, 0};
    if (n > 32) {
        if (n > 64) {
            if (n > 96) mix32(&acc, p + 48, p + n - 64, SECRET + 96);
            mix32(&acc, p + 32, p + n - 48, SECRET + 64);
        }
        mix32(&acc, p + 16, p + n - 32, SECRET + 32);
    }
    mix32(&acc, p, p + n - 16, SECRET);
    return finish_mid(acc, n);
}

/* 129 to 240 bytes: 32-byte rounds from the start (the first four keyed by the secret's start, then
 * an avalanche, the rest keyed from offset 3), then the last 32 bytes of the input */
NOINLINE static kfmt_hash128 hash_129_to_240(const uint8_t *p, size_t n) {
    kfmt_hash128 acc = {(uint64_t)n * P64_1, 0};
    for (size_t i = 0; i < 4; i++) mix32(&acc, p + 32 * i, p + 32 * i + 16, SECRET + 32 * i);
    acc.lo = avalanche3(acc.lo);
    acc.hi = avalanche3(acc.hi);
    for (size_t i = 4; i < n / 32; i++) mix32(&acc, p + 32 * i, p + 32 * i + 16, SECRET + 3 + 32 * (i - 4));
    /* keyed 17 bytes short of the end of the smallest secret the algorithm allows (136 bytes), so the
     * offsets are the same whatever the secret's length */
    mix32(&acc, p + n - 16, p + n - 32, SECRET + 136 - 17 - 16);
    return finish_mid(acc, n);
}

/* ------------------------------------------------------------------ inputs over 240 bytes */

/* The long loop walks p[0..n) the same way at every vector width: whole blocks of stripes, each block
 * followed by a scramble; then the stripes left before the last byte; then the last 64 bytes of the
 * input (which may overlap the stripes before) against the secret's end, 7 bytes short of it.
 * STATE holds the eight lanes; STRIPE(state, input, key) and SCRAMBLE(state, key) are one width's
 * two operations, always inlined into the walk so each width compiles to its own tight loop. */
#define DEFINE_LONG_LOOP(NAME, ATTRIBUTES, STATE, OPEN, STRIPE, SCRAMBLE, CLOSE)                          \
    ATTRIBUTES static void NAME(uint64_t lanes[8], const uint8_t *p, size_t n) {                        \
        STATE state;                                                                                     \
        OPEN(&state, lanes);                                                                             \
        size_t blocks = (n - 1) / BLOCK_LEN;                                                             \
        for (size_t b = 0; b < blocks; b++, p += BLOCK_LEN) {                                            \
            for (size_t s = 0; s < STRIPES_PER_BLOCK; s++)                                               \
                STRIPE(&state, p + s * STRIPE_LEN, SECRET + s * SECRET_STEP);                            \
            SCRAMBLE(&state, SECRET + sizeof SECRET - STRIPE_LEN);                                       \
        }                                                                                                \
        size_t rest = n - blocks * BLOCK_LEN; /* 1 to BLOCK_LEN bytes */                                 \
        size_t stripes = (rest - 1) / STRIPE_LEN;                                                        \
        for (size_t s = 0; s < stripes; s++) STRIPE(&state, p + s * STRIPE_LEN, SECRET + s * SECRET_STEP); \
        STRIPE(&state, p + rest - STRIPE_LEN, SECRET + sizeof SECRET - STRIPE_LEN - 7);                  \
        CLOSE(&state, lanes);                                                                            \
    }

/* Portable: one stripe gives each lane its neighbour's raw input word (lanes 0-1, 2-3, ... swap) plus
 * the product of the two 32-bit halves of its own keyed word. */
typedef struct { uint64_t v[8]; } lanes_scalar;

ALWAYS_INLINE void scalar_open(lanes_scalar *s, const uint64_t lanes[8]) { memcpy(s->v, lanes, 64); }
ALWAYS_INLINE void scalar_close(const lanes_scalar *s, uint64_t lanes[8]) { memcpy(lanes, s->v, 64); }

ALWAYS_INLINE void scalar_stripe(lanes_scalar *s, const uint8_t *in, const uint8_t *key) {
    for (int i = 0; i < 8; i++) {
        uint64_t raw = load64(in + 8 * i), keyed = raw ^ load64(key + 8 * i);
        s->v[i ^ 1] += raw;
        s->v[i] += (keyed & 0xFFFFFFFFu) * (keyed >> 32);
    }
}

/* after each full block: shift-xor, key and multiply every lane so no lane's bits stay put */
ALWAYS_INLINE void scalar_scramble(lanes_scalar *s, const uint8_t *key) {
    for (int i = 0; i < 8; i++) {
        uint64_t a = s->v[i];
        a ^= a >> 47;
        a ^= load64(key + 8 * i);
        s->v[i] = a * P32_1;
    }
}

DEFINE_LONG_LOOP(long_loop_scalar, , lanes_scalar, scalar_open, scalar_stripe, scalar_scramble, scalar_close)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KFMT_XXH3_X86 1
#include <immintrin.h>

/* The same two operations on 2, 4 or 8 lanes per register. A lane's product of its halves is one
 * unsigned 32x32 multiply (mul_epu32 reads the low half of each 64-bit lane); the neighbour swap is a
 * 32-bit shuffle within each 128-bit lane; multiplying by the 32-bit P32_1 is two such multiplies. */
#define X86_WIDTH(W, TARGET, VEC, LOADU, STOREU, XOR, ADD, SRLI, SLLI, MUL32, SWAP_PAIRS, SET1)           \
    typedef struct { VEC v[8 / (W)]; } lanes_##TARGET;                                                   \
    __attribute__((target(#TARGET), always_inline)) static inline void TARGET##_open(                   \
        lanes_##TARGET *s, const uint64_t lanes[8]) {                                                    \
        for (int i = 0; i < 8 / (W); i++) s->v[i] = LOADU((const void *)(lanes + (W) * i));              \
    }                                                                                                    \
    __attribute__((target(#TARGET), always_inline)) static inline void TARGET##_close(                  \
        const lanes_##TARGET *s, uint64_t lanes[8]) {                                                    \
        for (int i = 0; i < 8 / (W); i++) STOREU((void *)(lanes + (W) * i), s->v[i]);                    \
    }                                                                                                    \
    __attribute__((target(#TARGET), always_inline)) static inline void TARGET##_stripe(                 \
        lanes_##TARGET *s, const uint8_t *in, const uint8_t *key) {                                      \
        for (int i = 0; i < 8 / (W); i++) {                                                              \
            VEC raw = LOADU((const void *)(in + 8 * (W) * i));                                           \
            VEC keyed = XOR(raw, LOADU((const void *)(key + 8 * (W) * i)));                              \
            s->v[i] = ADD(s->v[i], ADD(SWAP_PAIRS(raw), MUL32(keyed, SRLI(keyed, 32))));                \
        }                                                                                                \
    }                                                                                                    \
    __attribute__((target(#TARGET), always_inline)) static inline void TARGET##_scramble(               \
        lanes_##TARGET *s, const uint8_t *key) {                                                         \
        const VEC prime = SET1((int)P32_1);                                                              \
        for (int i = 0; i < 8 / (W); i++) {                                                              \
            VEC a = XOR(XOR(s->v[i], SRLI(s->v[i], 47)), LOADU((const void *)(key + 8 * (W) * i)));      \
            s->v[i] = ADD(MUL32(a, prime), SLLI(MUL32(SRLI(a, 32), prime), 32));                         \
        }                                                                                                \
    }                                                                                                    \
    DEFINE_LONG_LOOP(long_loop_##TARGET, __attribute__((target(#TARGET))), lanes_##TARGET, TARGET##_open, \
                     TARGET##_stripe, TARGET##_scramble, TARGET##_close)

#define SSE2_SWAP(x) _mm_shuffle_epi32((x), _MM_SHUFFLE(1, 0, 3, 2))
#define AVX2_SWAP(x) _mm256_shuffle_epi32((x), _MM_SHUFFLE(1, 0, 3, 2))
#define AVX512_SWAP(x) _mm512_shuffle_epi32((x), _MM_PERM_BADC)
X86_WIDTH(2, sse2, __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_xor_si128, _mm_add_epi64, _mm_srli_epi64,
          _mm_slli_epi64, _mm_mul_epu32, SSE2_SWAP, _mm_set1_epi32)
X86_WIDTH(4, avx2, __m256i, _mm256_loadu_si256, _mm256_storeu_si256, _mm256_xor_si256, _mm256_add_epi64,
          _mm256_srli_epi64, _mm256_slli_epi64, _mm256_mul_epu32, AVX2_SWAP, _mm256_set1_epi32)
X86_WIDTH(8, avx512f, __m512i, _mm512_loadu_si512, _mm512_storeu_si512, _mm512_xor_si512, _mm512_add_epi64,
          _mm512_srli_epi64, _mm512_slli_epi64, _mm512_mul_epu32, AVX512_SWAP, _mm512_set1_epi32)
#endif

typedef void (*long_loop_fn)(uint64_t lanes[8], const uint8_t *p, size_t n);
static long_loop_fn long_loop = long_loop_scalar;
static const char *long_loop_name = "scalar";

/* the widths this CPU runs, widest last */
static int width_supported(const char *name) {
    if (strcmp(name, "scalar") == 0) return 1;
#ifdef KFMT_XXH3_X86
    __builtin_cpu_init();
    if (strcmp(name, "sse2") == 0) return 1; /* every x86-64 has SSE2 */
    if (strcmp(name, "avx2") == 0) return __builtin_cpu_supports("avx2");
    if (strcmp(name, "avx512f") == 0) return __builtin_cpu_supports("avx512f");
#endif
    return 0;
}

int kfmt_xxh3_select(const char *name) {
    if (!width_supported(name)) return 0;
    long_loop = long_loop_scalar, long_loop_name = "scalar";
#ifdef KFMT_XXH3_X86
    if (strcmp(name, "sse2") == 0) long_loop = long_loop_sse2, long_loop_name = "sse2";
    if (strcmp(name, "avx2") == 0) long_loop = long_loop_avx2, long_loop_name = "avx2";
    if (strcmp(name, "avx512f") == 0) long_loop = long_loop_avx512f, long_loop_name = "avx512f";
#endif
    return 1;
}

void kfmt_xxh3_init(void) {
    static const char *widest_first[] = {"avx512f", "avx2", "sse2", "scalar"};
    for (size_t i = 0; !kfmt_xxh3_select(widest_first[i]); i++) continue;
}

const char *kfmt_xxh3_implementation(void) { return long_loop_name; }

/* the eight lanes pairwise against 64 secret bytes from `key`, onto `start` */
static uint64_t merge_lanes(const uint64_t acc[8], const uint8_t *key, uint64_t start) {
    uint64_t h = start;
    for (int i = 0; i < 4; i++)
        h += multiply_fold(acc[2 * i] ^ load64(key + 16 * i), acc[2 * i + 1] ^ load64(key + 16 * i + 8));
    return avalanche3(h);
}

NOINLINE static kfmt_hash128 hash_long(const uint8_t *p, size_t n) {
    uint64_t acc[8] = {P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1};
    long_loop(acc, p, n);
    kfmt_hash128 r;
    /* the low half keyed from 11 bytes into the secret, the high half from 11 bytes before its last
     * 64 (offsets the algorithm fixes so the two halves see different secret bytes) */
    r.lo = merge_lanes(acc, SECRET + 11, (uint64_t)n * P64_1);
    r.hi = merge_lanes(acc, SECRET + sizeof SECRET - STRIPE_LEN - 11, ~((uint64_t)n * P64_2));
    return r;
}

kfmt_hash128 kfmt_xxh3_128(const void *data, size_t len) {
    const uint8_t *p = data;
    if (len <= 16) {
        if (len > 8) return hash_9_to_16(p, len);
        if (len >= 4) return hash_4_to_8(p, len);
        if (len > 0) return hash_1_to_3(p, len);
        return hash_empty();
    }
    if (len <= 128) return hash_17_to_128(p, len);
    if (len <= 240) return hash_129_to_240(p, len);
    return hash_long(p, len);
}
