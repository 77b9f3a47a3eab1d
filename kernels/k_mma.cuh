/* k_mma.cuh — the tensor-core instructions the kernels use, as inline PTX under nvcc (sm_80 and
 * later) and as the emulated device's instructions in the TDM_CUDA_EMU build (suites/emu/
 * tensor_core.cc, same fragment layouts, from NVIDIA's PTX ISA):
 *
 *   mma_16816<T>(d, a, b, c)   mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
 *                              d (16x8 f32) = A (16x16) B (16x8) + c; lane l = 4g + t holds
 *                              A: a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..),
 *                                 a[3] = (g+8, 2t+8..);  B: b[0] = (k 2t..2t+1, n g),
 *                                 b[1] = (k 2t+8.., n g);  C, D: c[0..1] = (g, 2t..2t+1),
 *                                 c[2..3] = (g+8, 2t..2t+1)
 *   ldmatrix_x4(r, row)        ldmatrix.sync.aligned.m8n8.x4.shared.b16: lanes 8j..8j+7 give the
 *                              16-byte rows of matrix j; lane l gets (l/4, 2(l%4)..+1) of each
 *   ldmatrix_x2_trans(r, row)  .x2.trans: lanes 0-15 give rows; lane l gets (2(l%4)..+1, l/4)
 *   ldmatrix_x4_trans(r, row)  .x4.trans: the four matrices so (an A fragment of a transpose)
 *   pack2<T>(lo, hi)           two f32 values rounded to T and packed (lo in the low half)
 *
 * Each is warp-collective: all 32 lanes of the warp execute it together. */
#ifndef TANDEM_KERNELS_K_MMA_CUH
#define TANDEM_KERNELS_K_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// d = A B + c (d may alias c).
template <typename T>
__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
                                          const float c[4]);
template <>
__device__ __forceinline__ void mma_16816<__half>(float d[4], const uint32_t a[4],
                                                  const uint32_t b[2], const float c[4]) {
#ifdef TDM_CUDA_EMU
    TDM_EMU_MMA(tdm_emu::tc_mma_m16n8k16_f16, d, a, b, c);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
#endif
}
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float d[4], const uint32_t a[4],
                                                         const uint32_t b[2], const float c[4]) {
#ifdef TDM_CUDA_EMU
    TDM_EMU_MMA(tdm_emu::tc_mma_m16n8k16_bf16, d, a, b, c);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *row) {
#ifdef TDM_CUDA_EMU
    TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x4, r, row);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *row) {
#ifdef TDM_CUDA_EMU
    TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x4_trans, r, row);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
#endif
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const void *row) {
#ifdef TDM_CUDA_EMU
    TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x2_trans, r, row);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(s));
#endif
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void *row) {
#ifdef TDM_CUDA_EMU
    TDM_EMU_LDMATRIX(tdm_emu::tc_ldmatrix_x2, r, row);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(s));
#endif
}

template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    const __half l = __float2half_rn(lo), h = __float2half_rn(hi);
    return (uint32_t)__half_as_ushort(l) | (uint32_t)__half_as_ushort(h) << 16;
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    const __nv_bfloat16 l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
    return (uint32_t)__bfloat16_as_ushort(l) | (uint32_t)__bfloat16_as_ushort(h) << 16;
}

#endif
