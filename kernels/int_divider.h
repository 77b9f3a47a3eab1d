/* int_divider.h — index arithmetic of the CUDA backend's reductions and batch norm
 * (kernels/k_reduce.cu, kernels/k_norm.cu) without a division per element. A GPU has no integer
 * divider: a 64-bit `/` or `%` is a software routine of dozens of instructions, which made those
 * memory-bound kernels compute-bound (one or two per 4-byte load). When every index of a launch
 * fits in 31 bits (the host decides: tdm_reduce_plan's index32), the kernels divide by divisors
 * fixed at launch with a multiplication and a shift instead (Granlund & Montgomery; PyTorch's
 * IntDivider, the same constants): q = (umulhi(n, magic) + n) >> shift, exact for every n and
 * divisor in [0, 2^31 - 1] (the sum cannot wrap: umulhi(n, magic) < n < 2^31). Otherwise they
 * keep the 64-bit division.
 *
 * Plain C with the CUDA qualifiers under nvcc, so that suites/tests/test_int_divider.c checks the
 * arithmetic on the CPU against plain division. */
#ifndef TANDEM_KERNELS_INT_DIVIDER_H
#define TANDEM_KERNELS_INT_DIVIDER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TDM_IDX_FN __host__ __device__ static inline
#else
#define TDM_IDX_FN static inline
#endif

// The largest index (and divisor) of the 32-bit path.
#define TDM_INDEX32_MAX INT32_MAX

// Division by `divisor` (1 <= divisor <= TDM_INDEX32_MAX) of n in [0, TDM_INDEX32_MAX].
typedef struct {
    uint32_t divisor, magic, shift;
} tdm_divider;

// shift = ceil(log2(d)), magic = floor(2^32 (2^shift - d) / d) + 1 (< 2^32 for d < 2^31). A
// divisor outside [1, TDM_INDEX32_MAX] gives the divider of 1 (the callers' empty ranges only).
TDM_IDX_FN tdm_divider tdm_divider_make(int64_t d) {
    tdm_divider v;
    v.divisor = d >= 1 && d <= TDM_INDEX32_MAX ? (uint32_t)d : 1u;
    v.shift = 0;
    while (((uint64_t)1 << v.shift) < v.divisor) v.shift++;
    v.magic = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << v.shift) - v.divisor)) /
                             v.divisor +
                         1);
    return v;
}

TDM_IDX_FN uint32_t tdm_divider_div(tdm_divider v, uint32_t n) {
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(n, v.magic);
#else
    const uint32_t t = (uint32_t)(((uint64_t)n * v.magic) >> 32);
#endif
    return (t + n) >> v.shift;
}

TDM_IDX_FN uint32_t tdm_divider_mod(tdm_divider v, uint32_t n) {
    return n - tdm_divider_div(v, n) * v.divisor;
}

// The offset of flat index idx of a row-major range of n dims (outermost first; dim d of size
// div[d].divisor / size[d] and stride stride[d]): the sum of idx's digit in each dim times its
// stride. The outermost digit needs no remainder (idx is inside the range). 32-bit: every index
// and offset of the launch is at most TDM_INDEX32_MAX (the host checked).
TDM_IDX_FN uint32_t tdm_index_offset32(int n, const tdm_divider *div, const int64_t *stride,
                                       uint32_t idx) {
    uint32_t off = 0;
    for (int d = n - 1; d > 0; d--) {
        const uint32_t q = tdm_divider_div(div[d], idx);
        off += (idx - q * div[d].divisor) * (uint32_t)stride[d];
        idx = q;
    }
    return n > 0 ? off + idx * (uint32_t)stride[0] : 0;
}

TDM_IDX_FN int64_t tdm_index_offset64(int n, const int64_t *size, const int64_t *stride,
                                      int64_t idx) {
    int64_t off = 0;
    for (int d = n - 1; d > 0; d--) {
        const int64_t q = idx / size[d];
        off += (idx - q * size[d]) * stride[d];
        idx = q;
    }
    return n > 0 ? off + idx * stride[0] : 0;
}

// Whether a launch over `count` elements (every index, offset and divisor at most count) takes
// the 32-bit path. Its loops' bounds ((split + 1) * chunk, index + grid stride) then stay below
// 2^32 as well.
TDM_IDX_FN bool tdm_index32_fits(int64_t count) {
    return count >= 0 && count <= TDM_INDEX32_MAX;
}

#endif
