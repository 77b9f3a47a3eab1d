/* k_embedding.cu — embedding forward (a gather of weight rows) and backward (a scatter-add into
 * the weight's gradient). Indices are checked on the device against V: a bad one goes to the
 * device's error record, reported by the host at its next wait (cuda_kernels.h), so neither pass
 * synchronizes; they are checked even when there is nothing to gather (D = 0), as the reference
 * does. The backward is deterministic (bit for bit from run to run, as PyTorch's sort-based one;
 * a GPT's tied wte needs it for bitwise resumes and graph replays): a stable counting sort of the
 * indices by row (counts in parallel, their prefix sums in one block, the fill in one thread:
 * O(n) serial), then each gradient element sums its row's gradients in index order in f32 (f64
 * for f64) and is rounded once, so the error is docs/CONFORMANCE.md's gamma_(number of indices)
 * in f32. */
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

// A stable counting sort of the n indices by row, leaving out padding_idx and bad indices
// (raised), in three launches: the rows' counts (integer atomics: the counts, not their order,
// are what is kept), their exclusive prefix sums (one block), and the fill in index order (one
// thread). Afterwards row k's indices, in increasing i, are order[k ? end[k-1] : 0 .. end[k]).

// end (V) zeroed: end[k] = the number of indices equal to k.
__global__ void k_embedding_count(int64_t n, int64_t V, const void *idx, bool i64,
                                  int64_t padding_idx, unsigned long long *end, cuda_err_ref err) {
    GRID_STRIDE(i, n) {
        const int64_t k = idx_ld(idx, i64, i);
        if (k < 0 || k >= V) cuda_raise(err, k, i);
        else if (k != padding_idx) atomicAdd(&end[k], 1ULL);
    }
}

#define EMB_SCAN_THREADS 1024

// One block: end[k] = the sum of the counts before row k (each thread a contiguous chunk).
__global__ void k_embedding_scan(int64_t V, int64_t *end) {
    __shared__ int64_t part[EMB_SCAN_THREADS];
    const int64_t chunk = (V + EMB_SCAN_THREADS - 1) / EMB_SCAN_THREADS;
    const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < V ? lo + chunk : V;
    int64_t sum = 0;
    for (int64_t k = lo; k < hi; k++) sum += end[k];
    part[threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {   // the chunks' exclusive prefix, in order
        int64_t acc = 0;
        for (int t = 0; t < EMB_SCAN_THREADS; t++) {
            const int64_t c = part[t];
            part[t] = acc;
            acc += c;
        }
    }
    __syncthreads();
    for (int64_t k = lo, acc = part[threadIdx.x]; k < hi; k++) {
        const int64_t c = end[k];
        end[k] = acc;
        acc += c;
    }
}

// One thread, in index order: order[end[k]++] = i, so end[k] moves to where row k ends.
__global__ void k_embedding_fill(int64_t n, int64_t V, const void *idx, bool i64,
                                 int64_t padding_idx, int64_t *end, int64_t *order) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (int64_t i = 0; i < n; i++) {
        const int64_t k = idx_ld(idx, i64, i);
        if (k >= 0 && k < V && k != padding_idx) order[end[k]++] = i;
    }
}

// gw[k, d] = sum of gy[i, d] over row k's indices in increasing i, in A, rounded once.
template <typename T, typename A>
__global__ void k_embedding_bwd(int64_t V, int64_t D, const int64_t *end, const int64_t *order,
                                const T *gy, T *gw) {
    GRID_STRIDE(e, V * D) {
        const int64_t k = e / D, d = e % D;
        A acc = 0;
        for (int64_t j = k ? end[k - 1] : 0; j < end[k]; j++) acc += (A)ld(gy[order[j] * D + d]);
        gw[e] = st<T>(acc);
    }
}

template <typename T>
static tdm_status embedding_bwd_t(const tdm_tensor *gy, const tdm_tensor *idx, int64_t padding_idx,
                                  tdm_tensor *gw, cuda_err_ref err) {
    const int64_t n = idx->numel, V = gw->shape[0], D = gw->shape[1];
    tdm_tensor *end = cuda_scratch(gw, V > 0 ? V : 1, TDM_DTYPE_I64);   // (V)
    tdm_tensor *order = end ? cuda_scratch(gw, n > 0 ? n : 1, TDM_DTYPE_I64) : NULL;   // (n)
    tdm_status st_ = order ? TDM_OK : tdm_last_status();
    const cudaStream_t s = cuda_stream_current();
    if (st_ == TDM_OK && V > 0)
        st_ = CUDA_CHECK(cudaMemsetAsync(tdm_data(end), 0, (size_t)V * sizeof(int64_t), s));
    const bool i64 = idx->dtype == TDM_DTYPE_I64;
    int64_t *pe = (int64_t *)tdm_data(end), *po = (int64_t *)tdm_data(order);
    if (st_ == TDM_OK && n > 0) {
        TDM_LAUNCH(cuda_grid_blocks(n, 256), 256, 0, s, k_embedding_count)
        (n, V, tdm_data_c(idx), i64, padding_idx, (unsigned long long *)pe, err);
        st_ = CUDA_LAUNCH_CHECK();
    }
    if (st_ == TDM_OK && n > 0 && V > 0) {
        TDM_LAUNCH(1, EMB_SCAN_THREADS, 0, s, k_embedding_scan)(V, pe);
        st_ = CUDA_LAUNCH_CHECK();
    }
    if (st_ == TDM_OK && n > 0 && V > 0) {
        TDM_LAUNCH(1, 1, 0, s, k_embedding_fill)(n, V, tdm_data_c(idx), i64, padding_idx, pe, po);
        st_ = CUDA_LAUNCH_CHECK();
    }
    if (st_ == TDM_OK && gw->numel) {   // with no index every row sums nothing: zeros
        TDM_LAUNCH(cuda_grid_blocks(gw->numel, 256), 256, 0, s, k_embedding_bwd<T, acc_t<T>>)
        (V, D, pe, po, cptr<T>(gy), mptr<T>(gw));
        st_ = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(order);
    tdm_tensor_free(end);
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
