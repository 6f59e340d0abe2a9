/* XXH3-128 with seed 0 and the default secret: the record hash of the content digest (kfmt/report.py,
 * digest version 2). Our implementation of the published algorithm (xxHash's XXH3 specification);
 * tests/test_xxh3.py checks it against the xxhash package on every length class. */
#ifndef KFMT_XXH3_H
#define KFMT_XXH3_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t lo, hi; /* the hash is hi * 2**64 + lo (xxhash.xxh3_128_intdigest) */
} kfmt_hash128;

kfmt_hash128 kfmt_xxh3_128(const void *data, size_t len);

/* (*hi, *lo) += (add_hi, add_lo) modulo 2**128: how the digests sum their hashes (the carry out of the
 * high word is dropped) */
static inline void kfmt_sum128(uint64_t *lo, uint64_t *hi, uint64_t add_lo, uint64_t add_hi) {
    uint64_t before = *lo;
    *lo += add_lo;
    *hi += add_hi + (*lo < before);
}
void kfmt_xxh3_init(void);                   /* picks the long loop's vector width for this CPU */
const char *kfmt_xxh3_implementation(void); /* which one it picked */
/* use the long loop called `name` (scalar, sse2, avx2, avx512f): 0 (nothing changed) when this build
 * or CPU has no such loop. For tests, which hold every width against the xxhash package. */
int kfmt_xxh3_select(const char *name);

#endif
