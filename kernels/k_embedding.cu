/* k_embedding.cu — embedding forward (a gather of weight rows) and backward (a scatter-add into
 * the weight's gradient). Indices are checked on the device against V: a bad one goes to the
 * device's error record, reported by the host at its next wait (cuda_kernels.h), so neither pass
 * synchronizes; they are checked even when there is nothing to gather (D = 0), as the reference
 * does. The scatter-add uses atomics in f32 (f64 for f64): f16/bf16 gradients accumulate in an
 * f32 scratch and are rounded once at the end, so the error is docs/CONFORMANCE.md's
 * gamma_(number of indices) in f32, in whatever order the atomics land (not bitwise
 * deterministic across runs). */
#include "kernels/k_common.cuh"

// idx (n) of i32/i64, w (V,D), y (n,D): y[i] = w[idx[i]] (0 for a bad index, which is raised).
// One item per element, or per index when D = 0 (only the checks run).
template <typename T>
__global__ void k_embedding(int64_t n, int64_t V, int64_t D, const void *idx, bool i64, const T *w,
                            T *y, cuda_err_ref err) {
    const int64_t Dd = D > 0 ? D : 1;
    GRID_STRIDE(e, n * Dd) {
        const int64_t i = e / Dd, d = e % Dd, k = idx_ld(idx, i64, i);
        const bool bad = k < 0 || k >= V;
        if (bad && d == 0) cuda_raise(err, k, i);
        if (D > 0) y[e] = bad ? st<T>((acc_t<T>)0) : w[k * D + d];
    }
}

tdm_status cuda_embedding(const tdm_tensor *idx, const tdm_tensor *w, tdm_tensor *y) {
    const int64_t n = idx->numel, V = w->shape[0], D = w->shape[1];
    if (n == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(w));
    cuda_err_ref err;
    TDM_TRY(cuda_err_ref_get(w, CUDA_ERR_EMBEDDING, V, &err));
    const bool i64 = idx->dtype == TDM_DTYPE_I64;
    const unsigned blocks = cuda_grid_blocks(n * (D > 0 ? D : 1), 256);
    TDM_DISPATCH_FLOAT(w->dtype, "embedding", T, {
        TDM_LAUNCH(blocks, 256, 0, cuda_stream_current(), k_embedding<T>)
        (n, V, D, tdm_data_c(idx), i64, cptr<T>(w), mptr<T>(y), err);
    });
    return CUDA_LAUNCH_CHECK();
}

// acc (V,D) zeroed: acc[idx[i]] += gy[i] for every i whose index is not padding_idx (as the
// forward, one item per index when D = 0).
template <typename T, typename A>
__global__ void k_embedding_bwd(int64_t n, int64_t V, int64_t D, const void *idx, bool i64,
                                int64_t padding_idx, const T *gy, A *acc, cuda_err_ref err) {
    const int64_t Dd = D > 0 ? D : 1;
    GRID_STRIDE(e, n * Dd) {
        const int64_t i = e / Dd, d = e % Dd, k = idx_ld(idx, i64, i);
        if (k < 0 || k >= V) {
            if (d == 0) cuda_raise(err, k, i);
        } else if (D > 0 && k != padding_idx) {
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
                                  tdm_tensor *gw, cuda_err_ref err) {
    typedef acc_t<T> A;
    const int64_t n = idx->numel, V = gw->shape[0], D = gw->shape[1];
    const bool direct = sizeof(T) == sizeof(A);   // f32 / f64: accumulate in gw itself
    tdm_tensor *acc = direct || gw->numel == 0 ? NULL : cuda_scratch(gw, gw->numel, TDM_DTYPE_F32);
    if (!direct && gw->numel && !acc) return tdm_last_status();
    A *pa = direct ? (A *)tdm_data(gw) : acc ? (A *)tdm_data(acc) : NULL;
    const cudaStream_t s = cuda_stream_current();
    tdm_status st_ = TDM_OK;
    if (gw->numel) st_ = CUDA_CHECK(cudaMemsetAsync(pa, 0, (size_t)gw->numel * sizeof(A), s));
    if (st_ == TDM_OK && n > 0) {
        TDM_LAUNCH(cuda_grid_blocks(n * (D > 0 ? D : 1), 256), 256, 0, s, k_embedding_bwd<T, A>)
        (n, V, D, tdm_data_c(idx), idx->dtype == TDM_DTYPE_I64, padding_idx, cptr<T>(gy), pa, err);
        st_ = CUDA_LAUNCH_CHECK();
    }
    if (st_ == TDM_OK && !direct && gw->numel) {
        TDM_LAUNCH(cuda_grid_blocks(gw->numel, 256), 256, 0, s, k_round<T, A>)
        (gw->numel, pa, mptr<T>(gw));
        st_ = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(acc);
    return st_;
}

tdm_status cuda_embedding_backward(const tdm_tensor *gy, const tdm_tensor *idx,
                                   int64_t padding_idx, tdm_tensor *gw) {
    if (idx->numel == 0 && gw->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(gw));
    cuda_err_ref err;
    TDM_TRY(cuda_err_ref_get(gw, CUDA_ERR_EMBEDDING_BACKWARD, gw->shape[0], &err));
    TDM_DISPATCH_FLOAT(gw->dtype, "embedding_backward", T,
                       { return embedding_bwd_t<T>(gy, idx, padding_idx, gw, err); });
    return TDM_OK;
}
