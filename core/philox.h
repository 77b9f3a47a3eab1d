/* philox.h — the counter-based generator (Philox4x32-10, Random123) behind rand, randn and
 * dropout, and the per-element streams defined in docs/CASE_FORMAT.md. Plain inline C that a
 * CUDA kernel can include too (TDM_HD marks the functions host+device there). */
#ifndef TANDEM_CORE_PHILOX_H
#define TANDEM_CORE_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TDM_HD __host__ __device__ static inline
#else
#define TDM_HD static inline
#endif

typedef struct {
    uint32_t v[4];
} tdm_philox4;

TDM_HD uint32_t tdm_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

// Ten rounds of Philox4x32 on counter `c` with key (k0, k1).
TDM_HD tdm_philox4 tdm_philox4x32_10(tdm_philox4 c, uint32_t k0, uint32_t k1) {
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = tdm_mulhilo32(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = tdm_mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
        tdm_philox4 n = {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
        c = n;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

// 32 random bits for element i of the uniform stream (seed, offset).
TDM_HD uint32_t tdm_philox_bits(uint64_t seed, uint64_t offset, uint64_t i) {
    uint64_t q = i / 4;
    tdm_philox4 c = {{(uint32_t)q, (uint32_t)(q >> 32), (uint32_t)offset,
                      (uint32_t)(offset >> 32)}};
    return tdm_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32)).v[i % 4];
}

// U[0,1) with 24 random bits: exact in f32 and wider.
TDM_HD double tdm_philox_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
    return (double)(tdm_philox_bits(seed, offset, i) >> 8) * (1.0 / 16777216.0);
}

// N(0,1) by Box-Muller from one Philox block per element.
TDM_HD double tdm_philox_normal(uint64_t seed, uint64_t offset, uint64_t i) {
    tdm_philox4 c = {{(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)offset,
                      (uint32_t)(offset >> 32)}};
    tdm_philox4 r = tdm_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    double u1 = (double)((r.v[0] >> 8) + 1) * (1.0 / 16777216.0);   // (0, 1]
    double u2 = (double)(r.v[1] >> 8) * (1.0 / 16777216.0);         // [0, 1)
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// Dropout keeps element i iff its 24-bit draw is below this threshold (u < 1 - p).
TDM_HD uint32_t tdm_dropout_threshold(double p) {
    return (uint32_t)ceil((1.0 - p) * 16777216.0);
}

#endif
