/* k_view.cu — the strided copy of the views (core/ops_view.c: transpose, narrow, split, cat,
 * stack, narrow's backward): the copy_strided slot. Elements are moved as 1-, 2-, 4- or 8-byte
 * words, never converted, so every dtype is copied exactly. A contiguous run (one dim, unit
 * strides: a slice along dim 0, one input of a cat along dim 0) is a cudaMemcpyAsync; anything
 * else one kernel, one thread per element, whose digit arithmetic divides by multiplication
 * (kernels/int_divider.h) when every index fits in 31 bits. Asynchronous on the current stream:
 * no host wait, capturable. */
#include "kernels/k_common.cuh"

// Core merged what it could (core/ops_view.c: copy_region); nd <= TDM_MAX_DIMS.
struct view_layout {
    int nd;
    int64_t size[TDM_MAX_DIMS], ds[TDM_MAX_DIMS], ss[TDM_MAX_DIMS];  // shape, dst/src strides
    tdm_divider div[TDM_MAX_DIMS];                                   // size[d]'s (32-bit path)
};

__device__ __forceinline__ int64_t view_quot(int64_t n, const view_layout &L, int d) {
    return n / L.size[d];
}
__device__ __forceinline__ uint32_t view_quot(uint32_t n, const view_layout &L, int d) {
    return tdm_divider_div(L.div[d], n);
}

// dst[digits(i) . ds] = src[digits(i) . ss] for i < n (dst, src already at their offsets)
template <typename E, typename I>
__global__ void k_copy_strided(I n, view_layout L, const E *__restrict__ src, E *__restrict__ dst) {
    GRID_STRIDE_I(I, i, n) {
        I rest = i, od = 0, os = 0;
        for (int d = L.nd - 1; d > 0; d--) {
            const I q = view_quot(rest, L, d);
            const I c = rest - q * (I)L.size[d];
            od += c * (I)L.ds[d];
            os += c * (I)L.ss[d];
            rest = q;
        }
        dst[od + rest * (I)L.ds[0]] = src[os + rest * (I)L.ss[0]];
    }
}

template <typename E>
static tdm_status copy_strided_t(const view_layout &L, int64_t n, bool index32, const void *src,
                                 void *dst) {
    const int threads = 256;
    const unsigned blocks = cuda_grid_blocks(n, threads);
    if (index32) TDM_LAUNCH(blocks, threads, 0, cuda_stream_current(), k_copy_strided<E, uint32_t>)
    ((uint32_t)n, L, (const E *)src, (E *)dst);
    else TDM_LAUNCH(blocks, threads, 0, cuda_stream_current(), k_copy_strided<E, int64_t>)(
        n, L, (const E *)src, (E *)dst);
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_copy_strided(tdm_tensor *dst, int64_t dst_off, const int64_t *dst_stride,
                             const tdm_tensor *src, int64_t src_off, const int64_t *src_stride,
                             int ndim, const int64_t *shape) {
    const size_t es = tdm_dtype_size(dst->dtype);
    char *d = (char *)tdm_data(dst) + (size_t)dst_off * es;
    const char *s = (const char *)tdm_data_c(src) + (size_t)src_off * es;
    view_layout L;
    L.nd = ndim;
    int64_t n = 1, reach_d = 0, reach_s = 0;  // the largest offsets from d and s
    for (int k = 0; k < ndim; k++) {
        L.size[k] = shape[k];
        L.ds[k] = dst_stride[k];
        L.ss[k] = src_stride[k];
        L.div[k] = tdm_divider_make(shape[k]);
        n *= shape[k];
        reach_d += (shape[k] - 1) * dst_stride[k];
        reach_s += (shape[k] - 1) * src_stride[k];
    }
    if (n == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(dst));
    if (ndim == 1 && L.ds[0] == 1 && L.ss[0] == 1)  // one contiguous run
        return CUDA_CHECK(
            cudaMemcpyAsync(d, s, (size_t)n * es, cudaMemcpyDeviceToDevice, cuda_stream_current()));
    const bool index32 =
        tdm_index32_fits(n) && tdm_index32_fits(reach_d) && tdm_index32_fits(reach_s);
    switch (es) {
        case 1:
            return copy_strided_t<uint8_t>(L, n, index32, s, d);
        case 2:
            return copy_strided_t<uint16_t>(L, n, index32, s, d);
        case 4:
            return copy_strided_t<uint32_t>(L, n, index32, s, d);
        case 8:
            return copy_strided_t<uint64_t>(L, n, index32, s, d);
        default:
            return tdm_error_set(TDM_ERR_DTYPE,
                                 "copy_strided: dtype %s not supported by the cuda "
                                 "backend",
                                 tdm_dtype_name(dst->dtype));
    }
}
