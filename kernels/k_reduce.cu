/* k_reduce.cu — sum and mean over any set of dims (the reduce slot), and sum_to (the backward of
 * broadcasting: a sum over the broadcast dims, scaled). x's dims are first canonicalized: size-1
 * dims dropped, neighbours of the same kind (kept / reduced) merged, giving nout outputs of nred
 * terms each. Two kernels, by which kind the innermost dim is:
 *   rows    (innermost reduced): a warp per (output, split), lanes striding the reduced elements
 *           (coalesced), warp-shuffle sum;
 *   columns (innermost kept):    a (32 x 8) block: 32 adjacent outputs (coalesced) by 8 rows of
 *           the reduced range, summed through shared memory.
 * When there are too few outputs to fill the device the reduced range is split
 * (kernels/reduce_plan.h); each split writes a partial sum (in the accumulation type) and a last
 * kernel adds the splits in order, so the result is deterministic. Bias gradients come here too
 * (cuda_sum_outer_inner: (outer, c, inner) summed to (c)). Accumulation in f32 (f64 for f64): a tree order, whose error
 * gamma_n sum|x| is within docs/CONFORMANCE.md's "reduced count + 1" bound. The index
 * arithmetic (a flat index to its offset in x, per element) is 32-bit by multiplication when x
 * has fewer than 2^31 elements (kernels/int_divider.h), 64-bit division otherwise. */
#include "kernels/k_common.cuh"
#include "kernels/reduce_plan.h"

struct red_layout {
    int nk, nr;   // kept dims, reduced dims (outermost first)
    int64_t ksize[TDM_MAX_DIMS], kstride[TDM_MAX_DIMS], rsize[TDM_MAX_DIMS], rstride[TDM_MAX_DIMS];
    tdm_divider kdiv[TDM_MAX_DIMS], rdiv[TDM_MAX_DIMS];   // of ksize, rsize (32-bit launches)
    int64_t nout, nred;
    bool inner_reduced;
};

// x (shape[0..nd)) row-major, reduced where mask has the dim's bit.
static red_layout red_layout_of(int nd, const int64_t *shape, unsigned mask) {
    red_layout L;
    L.nk = L.nr = 0;
    L.nout = L.nred = 1;
    L.inner_reduced = false;
    int64_t stride = 1;
    int last_kind = -1;   // of the dim merged last (inner side): 0 kept, 1 reduced
    for (int d = nd - 1; d >= 0; d--) {   // inner to outer; stored outer-first after
        const int64_t n = shape[d];
        const int kind = (mask >> d) & 1u;
        if (n != 1) {
            int64_t *sz = kind ? L.rsize : L.ksize, *st_ = kind ? L.rstride : L.kstride;
            int *cnt = kind ? &L.nr : &L.nk;
            if (last_kind == kind) {
                sz[*cnt - 1] *= n;   // contiguous row-major: merges with its inner neighbour
            } else {
                sz[*cnt] = n;
                st_[*cnt] = stride;
                (*cnt)++;
            }
            if (last_kind < 0) L.inner_reduced = kind == 1;
            last_kind = kind;
            if (kind) L.nred *= n;
            else L.nout *= n;
        }
        stride *= n;
    }
    // reverse to outer-first
    for (int i = 0; i < L.nk / 2; i++) {
        int64_t t = L.ksize[i]; L.ksize[i] = L.ksize[L.nk - 1 - i]; L.ksize[L.nk - 1 - i] = t;
        t = L.kstride[i]; L.kstride[i] = L.kstride[L.nk - 1 - i]; L.kstride[L.nk - 1 - i] = t;
    }
    for (int i = 0; i < L.nr / 2; i++) {
        int64_t t = L.rsize[i]; L.rsize[i] = L.rsize[L.nr - 1 - i]; L.rsize[L.nr - 1 - i] = t;
        t = L.rstride[i]; L.rstride[i] = L.rstride[L.nr - 1 - i]; L.rstride[L.nr - 1 - i] = t;
    }
    for (int i = 0; i < L.nk; i++) L.kdiv[i] = tdm_divider_make(L.ksize[i]);
    for (int i = 0; i < L.nr; i++) L.rdiv[i] = tdm_divider_make(L.rsize[i]);
    return L;
}

// The offset in x of kept index o / reduced index r (row-major over their dims), in the launch's
// index type I (k_common.cuh: idx_offset).
template <typename I>
__device__ __forceinline__ I kept_off(const red_layout &L, I o) {
    return idx_offset(L.nk, L.ksize, L.kdiv, L.kstride, o);
}
template <typename I>
__device__ __forceinline__ I red_off(const red_layout &L, I r) {
    return idx_offset(L.nr, L.rsize, L.rdiv, L.rstride, r);
}

template <typename A> __device__ __forceinline__ A red_final(A acc, A scale, A div) {
    if (scale != (A)1) acc *= scale;
    if (div != (A)1) acc /= div;
    return acc;
}

// Rows: warp w handles task t = o * splits + s: reduced indices [s chunk, (s+1) chunk).
// splits == 1: y[o] = final; else part[t] = the partial sum. Indices of type I.
template <typename I, typename TI, typename TO>
__global__ void k_reduce_rows(red_layout L, const TI *x, TO *y, acc_t<TO> *part, idx_div splits,
                              acc_t<TO> scale, acc_t<TO> div) {
    typedef acc_t<TO> A;
    const int lane = threadIdx.x & 31;
    const I warp = ((I)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const I nwarps = ((I)gridDim.x * blockDim.x) >> 5;
    const I ns = (I)splits.d, nred = (I)L.nred, chunk = (nred + ns - 1) / ns;
    for (I t = warp; t < (I)L.nout * ns; t += nwarps) {
        const I o = idx_quot(t, splits), s = t - o * ns;
        const I base = kept_off(L, o);
        const I r1 = min(nred, (s + 1) * chunk);
        A acc = 0;
        for (I r = s * chunk + lane; r < r1; r += 32) acc += ld(x[base + red_off(L, r)]);
        acc = warp_sum(acc);
        if (lane == 0) {
            if (ns == 1) y[o] = st<TO>(red_final(acc, scale, div));
            else part[t] = acc;
        }
    }
}

// Columns: block (32, 8); output o = blockIdx.x * 32 + tx, split s = blockIdx.y.
template <typename I, typename TI, typename TO>
__global__ void k_reduce_cols(red_layout L, const TI *x, TO *y, acc_t<TO> *part, idx_div splits,
                              acc_t<TO> scale, acc_t<TO> div) {
    typedef acc_t<TO> A;
    __shared__ A sh[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const I o = (I)blockIdx.x * 32 + tx, s = blockIdx.y;
    const I ns = (I)splits.d, nred = (I)L.nred, chunk = (nred + ns - 1) / ns;
    A acc = 0;
    if (o < (I)L.nout) {
        const I base = kept_off(L, o);
        const I r1 = min(nred, (s + 1) * chunk);
        for (I r = s * chunk + ty; r < r1; r += 8)
            acc += ld(x[base + (L.nr ? red_off(L, r) : 0)]);
    }
    sh[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && o < (I)L.nout) {
        for (int k = 1; k < 8; k++) acc += sh[k][tx];
        if (ns == 1) y[o] = st<TO>(red_final(acc, scale, div));
        else part[o * ns + s] = acc;
    }
}

// y[o] = final(sum over s of part[o * splits + s]), in order.
template <typename T>
__global__ void k_reduce_finish(int64_t nout, int64_t splits, const acc_t<T> *part, T *y,
                                acc_t<T> scale, acc_t<T> div) {
    typedef acc_t<T> A;
    GRID_STRIDE(o, nout) {
        A acc = 0;
        for (int64_t s = 0; s < splits; s++) acc += part[o * splits + s];
        y[o] = st<T>(red_final(acc, scale, div));
    }
}

// x (TI) reduced per L into y (TO): TI is TO, or f32 beside an f16/bf16 TO (a product kept in
// f32 before its one rounding). The launch follows kernels/reduce_plan.h.
template <typename TI, typename TO>
static tdm_status reduce_t(const void *xv, const red_layout &L, double scale, double div, void *yv,
                           tdm_device dev) {
    typedef acc_t<TO> A;
    const TI *x = (const TI *)xv;
    TO *y = (TO *)yv;
    const cudaStream_t stream = cuda_stream_current();
    const tdm_reduce_plan plan = tdm_reduce_plan_make(L.nout, L.nred, L.inner_reduced,
                                                      cuda_sm_count());
    const int64_t splits = plan.splits;
    if (!L.inner_reduced && plan.blocks > 2147483647LL)
        return tdm_error_set(TDM_ERR_ARG, "reduce: %lld outputs: too many for one launch",
                             (long long)L.nout);
    tdm_tensor *part = NULL;
    if (splits > 1) {
        const int64_t n = L.nout * splits;
        part = tdm_tensor_empty(1, &n, sizeof(A) == 8 ? TDM_DTYPE_F64 : TDM_DTYPE_F32, dev);
        if (!part) return tdm_last_status();
    }
    A *pp = part ? (A *)tdm_data(part) : NULL;
    const idx_div sd = idx_div_make(splits);
    const dim3 rows_grid((unsigned)plan.blocks), cols_grid((unsigned)plan.blocks, (unsigned)splits);
    if (L.inner_reduced && plan.index32)
        TDM_LAUNCH(rows_grid, 256, 0, stream, k_reduce_rows<uint32_t, TI, TO>)
        (L, x, y, pp, sd, (A)scale, (A)div);
    else if (L.inner_reduced)
        TDM_LAUNCH(rows_grid, 256, 0, stream, k_reduce_rows<int64_t, TI, TO>)
        (L, x, y, pp, sd, (A)scale, (A)div);
    else if (plan.index32)
        TDM_LAUNCH(cols_grid, dim3(32, 8), 0, stream, k_reduce_cols<uint32_t, TI, TO>)
        (L, x, y, pp, sd, (A)scale, (A)div);
    else
        TDM_LAUNCH(cols_grid, dim3(32, 8), 0, stream, k_reduce_cols<int64_t, TI, TO>)
        (L, x, y, pp, sd, (A)scale, (A)div);
    tdm_status s = CUDA_LAUNCH_CHECK();
    if (s == TDM_OK && splits > 1) {
        TDM_LAUNCH(cuda_grid_blocks(L.nout, 256), 256, 0, stream, k_reduce_finish<TO>)
        (L.nout, splits, pp, y, (A)scale, (A)div);
        s = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(part);   // stream-ordered: the caching allocator reuses it after these
    return s;
}

template <typename T>
static tdm_status reduce_t(const tdm_tensor *x, const red_layout &L, double scale, double div,
                           tdm_tensor *y) {
    return reduce_t<T, T>(tdm_data_c(x), L, scale, div, tdm_data(y), y->device);
}

// x (d0..dk); y keepdim-shaped. sum, or mean = sum / count (NaN when count is 0).
tdm_status cuda_reduce(tdm_reduce_op op, const tdm_tensor *x, unsigned reduce_mask,
                       tdm_tensor *y) {
    if (y->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(y));
    const red_layout L = red_layout_of(x->ndim, x->shape, reduce_mask);
    const double div = op == TDM_REDUCE_MEAN ? (double)L.nred : 1.0;
    TDM_DISPATCH_FLOAT(x->dtype, op == TDM_REDUCE_MEAN ? "mean" : "sum", T,
                       return reduce_t<T>(x, L, 1.0, div, y));
    return TDM_OK;
}

// gx = scale * gy summed down to gx's shape (gx right-aligned against gy): gy's leading dims and
// the dims where gx is 1 and gy is not are reduced; gx's flat order is gy's keepdim order.
tdm_status cuda_sum_to(const tdm_tensor *gy, double scale, tdm_tensor *gx) {
    if (gx->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(gx));
    unsigned mask = 0;
    const int lead = gy->ndim - gx->ndim;
    for (int d = 0; d < gy->ndim; d++)
        if (d < lead || (gx->shape[d - lead] == 1 && gy->shape[d] != 1)) mask |= 1u << d;
    const red_layout L = red_layout_of(gy->ndim, gy->shape, mask);
    TDM_DISPATCH_FLOAT(gy->dtype, "sum_to", T, return reduce_t<T>(gy, L, scale, 1.0, gx));
    return TDM_OK;
}

// x (outer, c, inner) summed over outer and inner into out (c): bias gradients (linear's, conv's
// in both layouts) and the batched matmul's broadcast reduction. x_dt is dt, or f32 beside an
// f16/bf16 dt. On the current stream (the caller has set the device).
tdm_status cuda_sum_outer_inner(const void *x, tdm_dtype x_dt, void *out, tdm_dtype dt,
                                int64_t outer, int64_t c, int64_t inner) {
    if (c == 0) return TDM_OK;
    tdm_device like = {TDM_DEVICE_CUDA, 0};
    TDM_TRY(CUDA_CHECK(cudaGetDevice(&like.index)));
    if (outer * inner == 0)   // an empty sum: zeros, ordered with the rest of the work
        return CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)c * tdm_dtype_size(dt),
                                          cuda_stream_current()));
    const int64_t shape[3] = {outer, c, inner};
    const red_layout L = red_layout_of(3, shape, 0x5u);
    const bool f32_in = x_dt == TDM_DTYPE_F32;
    switch (dt) {
    case TDM_DTYPE_F32: return reduce_t<float, float>(x, L, 1.0, 1.0, out, like);
    case TDM_DTYPE_F64: return reduce_t<double, double>(x, L, 1.0, 1.0, out, like);
    case TDM_DTYPE_F16:
        return f32_in ? reduce_t<float, __half>(x, L, 1.0, 1.0, out, like)
                      : reduce_t<__half, __half>(x, L, 1.0, 1.0, out, like);
    case TDM_DTYPE_BF16:
        return f32_in ? reduce_t<float, bf16_t>(x, L, 1.0, 1.0, out, like)
                      : reduce_t<bf16_t, bf16_t>(x, L, 1.0, 1.0, out, like);
    default: return tdm_error_set(TDM_ERR_DTYPE, "sum: dtype %s", tdm_dtype_name(dt));
    }
}
