/* k_embedding.cu — embedding forward (a gather of weight rows) and backward (a scatter-add into
 * the weight's gradient). Indices are checked on the device against V; a bad one is reported by
 * the launcher (one synchronizing read of the flag, cuda_kernels.h). The scatter-add uses
 * atomics in f32 (f64 for f64): f16/bf16 gradients accumulate in an f32 scratch and are rounded
 * once at the end, so the error is docs/CONFORMANCE.md's gamma_(number of indices) in f32, in
 * whatever order the atomics land (not bitwise deterministic across runs). */
#include "kernels/k_common.cuh"

// idx (n) of i32/i64, w (V,D), y (n,D): y[i] = w[idx[i]]; a bad index sets flag = {1, index}.
template <typename T>
__global__ void k_embedding(int64_t n, int64_t V, int64_t D, const void *idx, bool i64, const T *w,
                            T *y, long long *flag) {
    GRID_STRIDE(e, n * D) {
        const int64_t i = e / D, d = e % D, k = idx_ld(idx, i64, i);
        if (k < 0 || k >= V) {
            flag[1] = k;
            flag[0] = 1;
            y[e] = st<T>((acc_t<T>)0);
        } else {
            y[e] = w[k * D + d];
        }
    }
}

static tdm_status check_flag(const char *op, tdm_tensor *flag, int64_t V) {
    int64_t f[2];
    TDM_TRY(cuda_flag_read(flag, f));
    if (f[0])
        return tdm_error_set(TDM_ERR_ARG, "%s: index %lld out of range for %lld rows", op,
                             (long long)f[1], (long long)V);
    return TDM_OK;
}

tdm_status cuda_embedding(const tdm_tensor *idx, const tdm_tensor *w, tdm_tensor *y) {
    const int64_t n = idx->numel, V = w->shape[0], D = w->shape[1];
    if (y->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(w));
    tdm_tensor *flag = cuda_flag_new(w, 2);
    if (!flag) return tdm_last_status();
    const bool i64 = idx->dtype == TDM_DTYPE_I64;
    const unsigned blocks = cuda_grid_blocks(n * D, 256);
    tdm_status s = TDM_OK;
    switch (w->dtype) {
#define EMB(DT, T)                                                                            \
    case DT:                                                                                  \
        TDM_LAUNCH(blocks, 256, 0, cuda_stream_current(), k_embedding<T>)                     \
        (n, V, D, tdm_data_c(idx), i64, cptr<T>(w), mptr<T>(y), (long long *)tdm_data(flag)); \
        s = CUDA_LAUNCH_CHECK();                                                              \
        break;
        EMB(TDM_DTYPE_F32, float)
        EMB(TDM_DTYPE_F16, __half)
        EMB(TDM_DTYPE_BF16, bf16_t)
        EMB(TDM_DTYPE_F64, double)
#undef EMB
    default:
        s = tdm_error_set(TDM_ERR_DTYPE, "embedding: dtype %s not supported by the cuda backend",
                          tdm_dtype_name(w->dtype));
    }
    if (s != TDM_OK) {
        tdm_tensor_free(flag);
        return s;
    }
    return check_flag("embedding", flag, V);
}

// acc (V,D) zeroed: acc[idx[i]] += gy[i] for every i whose index is not padding_idx.
template <typename T, typename A>
__global__ void k_embedding_bwd(int64_t n, int64_t V, int64_t D, const void *idx, bool i64,
                                int64_t padding_idx, const T *gy, A *acc, long long *flag) {
    GRID_STRIDE(e, n * D) {
        const int64_t i = e / D, d = e % D, k = idx_ld(idx, i64, i);
        if (k < 0 || k >= V) {
            flag[1] = k;
            flag[0] = 1;
        } else if (k != padding_idx) {
            atomicAdd(&acc[k * D + d], (A)ld(gy[e]));
        }
    }
}

// acc (n) -> out (n), rounding once.
template <typename T, typename A> __global__ void k_round(int64_t n, const A *acc, T *out) {
    GRID_STRIDE(i, n) out[i] = st<T>(acc[i]);
}

template <typename T>
static tdm_status embedding_bwd_t(const tdm_tensor *gy, const tdm_tensor *idx, int64_t padding_idx,
                                  tdm_tensor *gw, tdm_tensor *flag) {
    typedef acc_t<T> A;
    const int64_t n = idx->numel, V = gw->shape[0], D = gw->shape[1];
    const bool direct = sizeof(T) == sizeof(A);   // f32 / f64: accumulate in gw itself
    tdm_tensor *acc = direct ? NULL : cuda_scratch(gw, gw->numel, TDM_DTYPE_F32);
    if (!direct && !acc) return tdm_last_status();
    A *pa = direct ? (A *)tdm_data(gw) : (A *)tdm_data(acc);
    const cudaStream_t s = cuda_stream_current();
    tdm_status st_ = CUDA_CHECK(cudaMemsetAsync(pa, 0, (size_t)gw->numel * sizeof(A), s));
    if (st_ == TDM_OK && n * D > 0) {
        TDM_LAUNCH(cuda_grid_blocks(n * D, 256), 256, 0, s, k_embedding_bwd<T, A>)
        (n, V, D, tdm_data_c(idx), idx->dtype == TDM_DTYPE_I64, padding_idx, cptr<T>(gy), pa,
         (long long *)tdm_data(flag));
        st_ = CUDA_LAUNCH_CHECK();
    }
    if (st_ == TDM_OK && !direct) {
        TDM_LAUNCH(cuda_grid_blocks(gw->numel, 256), 256, 0, s, k_round<T, A>)
        (gw->numel, pa, mptr<T>(gw));
        st_ = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(acc);
    return st_;
}

tdm_status cuda_embedding_backward(const tdm_tensor *gy, const tdm_tensor *idx,
                                   int64_t padding_idx, tdm_tensor *gw) {
    if (gw->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(gw));
    tdm_tensor *flag = cuda_flag_new(gw, 2);
    if (!flag) return tdm_last_status();
    tdm_status s = TDM_OK;
    switch (gw->dtype) {
    case TDM_DTYPE_F32: s = embedding_bwd_t<float>(gy, idx, padding_idx, gw, flag); break;
    case TDM_DTYPE_F16: s = embedding_bwd_t<__half>(gy, idx, padding_idx, gw, flag); break;
    case TDM_DTYPE_BF16: s = embedding_bwd_t<bf16_t>(gy, idx, padding_idx, gw, flag); break;
    case TDM_DTYPE_F64: s = embedding_bwd_t<double>(gy, idx, padding_idx, gw, flag); break;
    default:
        s = tdm_error_set(TDM_ERR_DTYPE,
                          "embedding_backward: dtype %s not supported by the cuda backend",
                          tdm_dtype_name(gw->dtype));
    }
    if (s != TDM_OK) {
        tdm_tensor_free(flag);
        return s;
    }
    return check_flag("embedding_backward", flag, gw->shape[0]);
}
