/* k_random.cu — random fills and dropout from core/philox.h, the same functions the reference
 * calls (TDM_HD makes them host+device), so every element depends only on (seed, offset, i) and
 * matches the reference: uniform and the dropout mask bit for bit; normal computes Box-Muller in
 * double as the reference does and rounds once (device log/cos may differ from glibc's in the last
 * bit of the double, which survives rounding to f32/f16/bf16 only at a rounding tie's edge).
 * Captured draws (the *_dev launchers, from core's random streams under graph capture) add
 * *delta, a device counter core rewrites before each replay, to the offset: each replay draws the
 * numbers of the eager step it stands for (PyTorch's graph-safe Philox offsets). */
#include "core/philox.h"
#include "kernels/k_common.cuh"
#include "kernels/cuda_graph.h"

// One Philox block gives 4 consecutive elements of the uniform stream: block q -> 4q..4q+3.
__device__ __forceinline__ tdm_philox4 philox_block(uint64_t seed, uint64_t offset, uint64_t q) {
    tdm_philox4 c = {{(uint32_t)q, (uint32_t)(q >> 32), (uint32_t)offset, (uint32_t)(offset >> 32)}};
    return tdm_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

// y (n): U[0,1) from 24 bits, exact in every float dtype but f16/bf16, which round it once.
// delta: NULL, or a device counter added to offset (captured draws).
__device__ __forceinline__ uint64_t draw_offset(uint64_t offset, const uint64_t *delta) {
    return delta ? offset + *delta : offset;
}

template <typename T>
__global__ void k_rand_uniform(int64_t n, uint64_t seed, uint64_t offset0, const uint64_t *delta,
                               T *y) {
    const uint64_t offset = draw_offset(offset0, delta);
    GRID_STRIDE(q, (n + 3) / 4) {
        const tdm_philox4 r = philox_block(seed, offset, (uint64_t)q);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t i = 4 * q + j;
            if (i < n) y[i] = st<T>((double)(r.v[j] >> 8) * (1.0 / 16777216.0));
        }
    }
}

// y (n): N(0,1), one Philox block per element (tdm_philox_normal).
template <typename T>
__global__ void k_rand_normal(int64_t n, uint64_t seed, uint64_t offset0, const uint64_t *delta,
                              T *y) {
    const uint64_t offset = draw_offset(offset0, delta);
    GRID_STRIDE(i, n) y[i] = st<T>(tdm_philox_normal(seed, offset, (uint64_t)i));
}

static tdm_status rand_fill(tdm_tensor *t, uint64_t seed, uint64_t offset, const uint64_t *delta,
                            bool normal) {
    const int64_t n = t->numel;
    if (n == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(t));
    if (!delta)
        TDM_TRY(tdm_cuda_capture_refuse(cuda_stream_current(), t->device.index,
                                        normal ? "randn" : "rand",
                                        "its seed and offset are kernel arguments: every replay "
                                        "would draw the same numbers (draw from a "
                                        "tdm_generator)"));
    const int threads = 256;
    const unsigned blocks = cuda_grid_blocks(normal ? n : (n + 3) / 4, threads);
    const cudaStream_t s = cuda_stream_current();
    if (normal)
        TDM_DISPATCH_FLOAT(
            t->dtype, "randn", T,
            TDM_LAUNCH(blocks, threads, 0, s, k_rand_normal<T>)(n, seed, offset, delta, mptr<T>(t)))
    else
        TDM_DISPATCH_FLOAT(
            t->dtype, "rand", T,
            TDM_LAUNCH(blocks, threads, 0, s, k_rand_uniform<T>)(n, seed, offset, delta, mptr<T>(t)))
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_rand_uniform(tdm_tensor *t, uint64_t seed, uint64_t offset) {
    return rand_fill(t, seed, offset, NULL, false);
}

tdm_status cuda_rand_normal(tdm_tensor *t, uint64_t seed, uint64_t offset) {
    return rand_fill(t, seed, offset, NULL, true);
}

tdm_status cuda_rand_fill_dev(tdm_tensor *t, bool normal, uint64_t seed, uint64_t offset,
                              const uint64_t *delta) {
    return rand_fill(t, seed, offset, delta, normal);
}

// ---- dropout ------------------------------------------------------------------------------------
// Keep element i iff its 24-bit draw of the uniform stream is below `threshold`
// (tdm_dropout_threshold); y = x * scale where kept, 0 elsewhere. x, y (n).
template <typename T>
__global__ void k_dropout(int64_t n, const T *x, T *y, uint64_t seed, uint64_t offset0,
                          const uint64_t *delta, uint32_t threshold, double scale) {
    typedef acc_t<T> A;
    const uint64_t offset = draw_offset(offset0, delta);
    const A sc = (A)scale;
    GRID_STRIDE(q, (n + 3) / 4) {
        const tdm_philox4 r = philox_block(seed, offset, (uint64_t)q);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t i = 4 * q + j;
            if (i < n) y[i] = st<T>((r.v[j] >> 8) < threshold ? ld(x[i]) * sc : (A)0);
        }
    }
}

static tdm_status dropout_launch(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                                 const uint64_t *delta, tdm_tensor *y) {
    const int64_t n = x->numel;
    const uint32_t threshold = tdm_dropout_threshold(p);
    const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    const int threads = 256;
    const unsigned blocks = cuda_grid_blocks((n + 3) / 4, threads);
    TDM_DISPATCH_FLOAT(x->dtype, "dropout", T,
                       TDM_LAUNCH(blocks, threads, 0, cuda_stream_current(), k_dropout<T>)(
                           n, cptr<T>(x), mptr<T>(y), seed, offset, delta, threshold, scale));
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_dropout(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                        tdm_tensor *y) {
    if (x->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    TDM_TRY(tdm_cuda_capture_refuse(cuda_stream_current(), x->device.index, "dropout",
                                    "its seed and offset are kernel arguments: every replay "
                                    "would draw the same mask (draw through a random stream: "
                                    "nn's Dropout module, tdm_generator_dropout)"));
    return dropout_launch(x, p, seed, offset, NULL, y);
}

tdm_status cuda_dropout_dev(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                            const uint64_t *delta, tdm_tensor *y) {
    if (x->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    return dropout_launch(x, p, seed, offset, delta, y);
}
