/* The two checksums of Kafka's logs: CRC-32C over a v2 batch from its attributes on (docs/format.md §4.1)
 * and CRC-32 (IEEE) over a v0/v1 message from its magic byte on (docs/format.md §3.1).
 *
 * Portable slicing-by-8 tables for both; CRC-32C uses the SSE4.2 crc32 instruction and CRC-32 folds
 * with carry-less multiplies (PCLMULQDQ) when the CPU has them (checked at run time, so one build runs
 * on every x86-64). Results equal kfmt.format.wire.crc32c/crc32. */
#include "native.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define KFMT_HAVE_SSE42_PATH 1
#include <nmmintrin.h> /* SSE4.2's crc32 */
#include <wmmintrin.h> /* PCLMULQDQ */
#endif

static uint32_t table_c[8][256];  /* Castagnoli, reflected 0x82F63B78 */
static uint32_t table_z[8][256];  /* IEEE, reflected 0xEDB88320 */
static int use_sse42 = 0;
static int use_pclmul = 0;

static void make_tables(uint32_t table[8][256], uint32_t poly) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ poly : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = table[0][i];
        for (int t = 1; t < 8; t++) {
            c = table[0][c & 0xFF] ^ (c >> 8);
            table[t][i] = c;
        }
    }
}

/* The raw register update (no inversions): reg' = (reg * x^(8n) + data(x) * x^32) mod P. */
static uint32_t sliced(uint32_t table[8][256], uint32_t reg, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) { reg = table[0][(reg ^ *p++) & 0xFF] ^ (reg >> 8); n--; }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= reg;
        reg = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
              table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
              table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) reg = table[0][(reg ^ *p++) & 0xFF] ^ (reg >> 8);
    return reg;
}

#ifdef KFMT_HAVE_SSE42_PATH
/* Three lanes at once. The crc32 instruction takes 3 cycles to give its result but starts one every
 * cycle, so one chain of 8-byte steps runs at a third of the instruction's rate: the CRC-32C of the
 * batches an upgrade writes (and of those it reads back to check) was a tenth of its CPU. A round
 * takes 3 lane bytes A, B, C (64-byte lanes, then 32-byte ones) as three independent chains, from
 * the register r and from 0 twice, giving ra, rb, rc; the register update being linear (sliced()'s
 * comment), the register after A B C is shift(ra, 2 lane) ^ shift(rb, lane) ^ rc, where
 * shift(r, n) is the register after n zero bytes from r, linear in r again: a table per byte of r
 * (built from the bytewise update, below). */
#define CRC32C_LANES 2 /* lane sizes: 64 bytes, then 32 for the rest (a v2 batch is often a few hundred) */
static const size_t lane_bytes[CRC32C_LANES] = {64, 32};
static uint32_t shift_lane[CRC32C_LANES][2][4][256]; /* [lane][0]: by a lane's bytes, [1]: by two */

static uint32_t zeros_from(uint32_t reg, size_t n) {
    while (n--) reg = table_c[0][reg & 0xFF] ^ (reg >> 8);
    return reg;
}

static void make_shift_tables(void) {
    for (int l = 0; l < CRC32C_LANES; l++)
        for (int s = 0; s < 2; s++) {
            uint32_t basis[32]; /* the shift of each single bit of the register */
            for (int bit = 0; bit < 32; bit++) basis[bit] = zeros_from(1u << bit, lane_bytes[l] * (s + 1));
            for (int j = 0; j < 4; j++)
                for (uint32_t b = 0; b < 256; b++) {
                    uint32_t v = 0;
                    for (int k = 0; k < 8; k++)
                        if (b >> k & 1) v ^= basis[8 * j + k];
                    shift_lane[l][s][j][b] = v;
                }
        }
}

static inline uint32_t shifted(const uint32_t t[4][256], uint32_t r) {
    return t[0][r & 0xFF] ^ t[1][(r >> 8) & 0xFF] ^ t[2][(r >> 16) & 0xFF] ^ t[3][r >> 24];
}

#if defined(__x86_64__)
/* Rounds of three lanes of `lane` bytes (a constant where it is inlined) while n holds one. */
__attribute__((target("sse4.2"))) static inline uint64_t
crc32c_rounds(uint64_t c, const uint8_t **pp, size_t *np, size_t lane, int l) {
    const uint8_t *p = *pp;
    size_t n = *np;
    while (n >= 3 * lane) {
        uint64_t a = c, b = 0, d = 0;
        for (size_t i = 0; i < lane; i += 8) {
            uint64_t va, vb, vd;
            memcpy(&va, p + i, 8);
            memcpy(&vb, p + lane + i, 8);
            memcpy(&vd, p + 2 * lane + i, 8);
            a = _mm_crc32_u64(a, va);
            b = _mm_crc32_u64(b, vb);
            d = _mm_crc32_u64(d, vd);
        }
        c = shifted(shift_lane[l][1], (uint32_t)a) ^ shifted(shift_lane[l][0], (uint32_t)b) ^ (uint32_t)d;
        p += 3 * lane;
        n -= 3 * lane;
    }
    *pp = p;
    *np = n;
    return c;
}
#endif

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) { crc = _mm_crc32_u8(crc, *p++); n--; }
#if defined(__x86_64__)
    uint64_t c = crc;
    c = crc32c_rounds(c, &p, &n, 64, 0);
    c = crc32c_rounds(c, &p, &n, 32, 1);
    /* the rest (under three lanes): one 8-byte step per instruction */
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
#endif
    while (n--) crc = _mm_crc32_u8(crc, *p++);
    return ~crc;
}
#endif

#ifdef KFMT_HAVE_SSE42_PATH
/* ---- CRC-32 (IEEE) by carry-less multiplication, from the algebra (after Gopal et al., "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel 2009).
 *
 * Reflected CRCs read each byte from its low bit, the first bit being the highest power of x. So 16
 * bytes loaded into a 128-bit register hold a polynomial whose low 64-bit half H carries x^127..x^64
 * and whose high half L carries x^63..x^0 (each bit-reversed), and the register stands for
 * H x^64 + L. Moving such a chunk D bits further down the message multiplies it by x^D, and modulo P
 *     (H x^64 + L) x^D  ==  H (x^(D+64) mod P) + L (x^D mod P)
 * two 64x32-bit carry-less products whose sum fits in 128 bits again: a chunk "folds" onto the chunk
 * D bits later by xoring this sum into it, and the congruence mod P (all a CRC sees) is kept.
 * In reflected form, clmul(reversed H, k) with k the 33-bit reversal of a constant K gives H K x^32
 * in the register's reading, so the constants used are K = x^(D+32) mod P and x^(D-32) mod P.
 * fold_constant derives them at start-up from the polynomial; nothing is a magic number.
 *
 * Four registers fold 64 bytes per step (D = 512) to hide the multiplier's latency, then fold into
 * one (D = 128), which takes any further 16-byte chunks. What is left, R, is congruent to all the
 * data read so far (with the incoming register xored into its first four bytes, which is what a
 * starting register means). One more fold of its first half by x^64 leaves 96 bits U == R; the CRC
 * register for the data is then U x^32 mod P, which is exactly what the table update gives for U's
 * own 12 bytes from a zero register (no Barrett reduction needed). */

/* reverse32(x^power mod P) << 1: the constant K = x^power mod P as clmul wants it (bit i: x^(32-i)) */
static uint64_t fold_constant(unsigned power) {
    uint32_t r = 0x80000000u; /* reflected: bit i stands for x^(31-i), so this is x^0 */
    for (unsigned i = 0; i < power; i++) r = (r >> 1) ^ (r & 1 ? 0xEDB88320u : 0); /* times x, mod P */
    return (uint64_t)r << 1;
}

static uint64_t fold_512[2], fold_128[2]; /* {for H, for L}: x^(D+32), x^(D-32) mod P */
static uint64_t fold_64;                   /* x^64 mod P, for the last step (128 bits to 96) */

static void make_fold_constants(void) {
    fold_512[0] = fold_constant(512 + 32), fold_512[1] = fold_constant(512 - 32);
    fold_128[0] = fold_constant(128 + 32), fold_128[1] = fold_constant(128 - 32);
    fold_64 = fold_constant(64);
}

/* chunk * x^D + next (mod P), as 128 bits: low half times the H constant, high half times the L one */
__attribute__((target("pclmul,sse2"), always_inline)) static inline __m128i fold(__m128i chunk, __m128i next,
                                                                                  __m128i constants) {
    __m128i high_part = _mm_clmulepi64_si128(chunk, constants, 0x00);
    __m128i low_part = _mm_clmulepi64_si128(chunk, constants, 0x11);
    return _mm_xor_si128(_mm_xor_si128(high_part, low_part), next);
}

/* The raw register after `reg` and p[0..len) (len >= 64, a multiple of 16), as `sliced` defines it. */
__attribute__((target("pclmul,sse2"))) static uint32_t crc32_folded(uint32_t reg, const uint8_t *p, size_t len) {
    const __m128i by_512 = _mm_set_epi64x((long long)fold_512[1], (long long)fold_512[0]);
    const __m128i by_128 = _mm_set_epi64x((long long)fold_128[1], (long long)fold_128[0]);
    __m128i lane[4];
    for (int i = 0; i < 4; i++) lane[i] = _mm_loadu_si128((const __m128i *)(p + 16 * i));
    lane[0] = _mm_xor_si128(lane[0], _mm_cvtsi32_si128((int)reg));
    p += 64;
    len -= 64;
    for (; len >= 64; p += 64, len -= 64)
        for (int i = 0; i < 4; i++) lane[i] = fold(lane[i], _mm_loadu_si128((const __m128i *)(p + 16 * i)), by_512);
    __m128i r = lane[0];
    for (int i = 1; i < 4; i++) r = fold(r, lane[i], by_128);
    for (; len >= 16; p += 16, len -= 16) r = fold(r, _mm_loadu_si128((const __m128i *)p), by_128);
    /* 128 bits to 96: H x^64 + L == H (x^64 mod P) + L. Read with x^0 at bit 95 (where a product
     * with a 33-bit constant puts it), L moves up 32 bits to match. */
    const __m128i by_64 = _mm_set_epi64x(0, (long long)fold_64);
    __m128i low_half_up = _mm_slli_si128(_mm_srli_si128(r, 8), 4);
    uint8_t rest[16];
    _mm_storeu_si128((__m128i *)rest, _mm_xor_si128(_mm_clmulepi64_si128(r, by_64, 0x00), low_half_up));
    return sliced(table_z, 0, rest, 12);
}
#endif

void crc_init(void) {
    make_tables(table_c, 0x82F63B78u);
    make_tables(table_z, 0xEDB88320u);
#ifdef KFMT_HAVE_SSE42_PATH
    make_fold_constants();
    make_shift_tables();
    __builtin_cpu_init();
    use_sse42 = __builtin_cpu_supports("sse4.2");
    use_pclmul = __builtin_cpu_supports("pclmul");
#endif
}

/* The public CRCs: the register starts inverted and ends inverted (CRC-32 and CRC-32C both). */
uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n) {
#ifdef KFMT_HAVE_SSE42_PATH
    if (use_sse42) return crc32c_sse42(crc, p, n);
#endif
    return ~sliced(table_c, ~crc, p, n);
}

uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t reg = ~crc;
#ifdef KFMT_HAVE_SSE42_PATH
    if (use_pclmul && n >= 64) {
        size_t folded = n & ~(size_t)15;
        reg = crc32_folded(reg, p, folded);
        p += folded;
        n -= folded;
    }
#endif
    return ~sliced(table_z, reg, p, n);
}

const char *crc32c_implementation(void) { return use_sse42 ? "sse4.2" : "table"; }
const char *crc32_implementation(void) { return use_pclmul ? "pclmul" : "table"; }
