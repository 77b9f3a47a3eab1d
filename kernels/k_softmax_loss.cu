/* k_softmax_loss.cu — softmax / log_softmax along a dim (forward, backward), cross_entropy over
 * class indices (label smoothing, ignore_index) or class probabilities, with per-class weights
 * (none/sum/mean), and mse_loss, forward and backward.
 *
 * A row (softmax along the last dim, a cross_entropy sample) goes to a warp when it is short
 * (<= 1024) and to a block otherwise; along an inner dim, a thread per (outer, inner) column
 * strides the dim (adjacent threads read adjacent addresses). The statistics are two-pass as in
 * the reference (max, then sum exp(x - max)) rather than an online max/sum: an online rescaling
 * multiplies each term by up to one exp(m_old - m_new) per new maximum, an error that
 * docs/CONFORMANCE.md's softmax bound (one exp per term, one sum) does not cover. The row is read
 * again from L1/L2, not from DRAM. Losses reduce over rows deterministically (per-row values,
 * then one block sums them in a fixed order).
 *
 * The fused classifier (the _stats launchers): the forward keeps each row's (max, sum) and the
 * backward reads them, so a training step reads each row of logits three times (two for the
 * statistics, one for the gradient it writes) instead of five, with the same roundings. */
#include "kernels/k_common.cuh"

// ---- groups: a warp or a block working on one row (grp<WARP>, k_common.cuh) ------------------


static const int ROW_THREADS = 256;

// Blocks for `rows` rows of length n, warp or block per row.
static unsigned row_blocks(int64_t rows, bool warp) { return group_blocks(rows, warp, ROW_THREADS); }

// m = max_j x[j*st], s = sum_j exp(x[j*st] - m) over j < n, by the group (all threads get them).
template <bool WARP, typename T, typename A>
__device__ __forceinline__ void row_stats(const T *x, int64_t n, int64_t st_, A *sh, A *m, A *s) {
    typedef grp<WARP> G;
    A mx = -k_inf<A>();
    for (int64_t j = G::rank(); j < n; j += G::size()) mx = k_max(mx, ld(x[j * st_]));
    mx = G::max(mx, sh);
    A sum = 0;
    for (int64_t j = G::rank(); j < n; j += G::size()) sum += k_exp(ld(x[j * st_]) - mx);
    *m = mx;
    *s = G::sum(sum, sh);
}

// ---- softmax / log_softmax -------------------------------------------------------------------
// x, y (outer, n, inner). softmax y = exp(x - m) / s; log_softmax y = (x - m) - log s.

template <bool WARP, typename T>
__global__ void k_softmax_rows(int64_t rows, int64_t n, const T *x, T *y, bool log_) {
    typedef acc_t<T> A;
    __shared__ A sh[32];
    for (int64_t r = grp<WARP>::first(); r < rows; r += grp<WARP>::step()) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        A m, s;
        row_stats<WARP>(xr, n, 1, sh, &m, &s);
        const A ls = k_log(s);
        for (int64_t j = grp<WARP>::rank(); j < n; j += grp<WARP>::size()) {
            const A v = ld(xr[j]) - m;
            yr[j] = st<T>(log_ ? v - ls : k_exp(v) / s);
        }
    }
}

template <typename T>
__global__ void k_softmax_cols(int64_t outer, int64_t n, int64_t inner, const T *x, T *y,
                               bool log_) {
    typedef acc_t<T> A;
    GRID_STRIDE(c, outer * inner) {
        const int64_t base = (c / inner) * n * inner + c % inner;
        A m = -k_inf<A>(), s = 0;
        for (int64_t j = 0; j < n; j++) m = k_max(m, ld(x[base + j * inner]));
        for (int64_t j = 0; j < n; j++) s += k_exp(ld(x[base + j * inner]) - m);
        const A ls = k_log(s);
        for (int64_t j = 0; j < n; j++) {
            const A v = ld(x[base + j * inner]) - m;
            y[base + j * inner] = st<T>(log_ ? v - ls : k_exp(v) / s);
        }
    }
}

// gy, y, gx (outer, n, inner): softmax gx = y (gy - sum gy y); log_softmax gx = gy - exp(y) sum gy.
template <bool WARP, typename T>
__global__ void k_softmax_bwd_rows(int64_t rows, int64_t n, const T *gy, const T *y, T *gx,
                                   bool log_) {
    typedef acc_t<T> A;
    typedef grp<WARP> G;
    __shared__ A sh[32];
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const int64_t o = r * n;
        A s = 0;
        for (int64_t j = G::rank(); j < n; j += G::size())
            s += log_ ? ld(gy[o + j]) : ld(gy[o + j]) * ld(y[o + j]);
        s = G::sum(s, sh);
        for (int64_t j = G::rank(); j < n; j += G::size()) {
            const A g = ld(gy[o + j]), v = ld(y[o + j]);
            gx[o + j] = st<T>(log_ ? g - k_exp(v) * s : v * (g - s));
        }
    }
}

template <typename T>
__global__ void k_softmax_bwd_cols(int64_t outer, int64_t n, int64_t inner, const T *gy,
                                   const T *y, T *gx, bool log_) {
    typedef acc_t<T> A;
    GRID_STRIDE(c, outer * inner) {
        const int64_t base = (c / inner) * n * inner + c % inner;
        A s = 0;
        for (int64_t j = 0; j < n; j++) {
            const int64_t i = base + j * inner;
            s += log_ ? ld(gy[i]) : ld(gy[i]) * ld(y[i]);
        }
        for (int64_t j = 0; j < n; j++) {
            const int64_t i = base + j * inner;
            const A g = ld(gy[i]), v = ld(y[i]);
            gx[i] = st<T>(log_ ? g - k_exp(v) * s : v * (g - s));
        }
    }
}

static void split_at(const tdm_tensor *x, int dim, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    *n = x->ndim ? x->shape[dim] : 1;
    for (int d = 0; d < dim && d < x->ndim; d++) *outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) *inner *= x->shape[d];
}

template <typename T>
static tdm_status softmax_t(const tdm_tensor *gy, const tdm_tensor *x, int dim, bool log_,
                            tdm_tensor *out) {
    int64_t outer, n, inner;
    split_at(x, dim, &outer, &n, &inner);
    const cudaStream_t s = cuda_stream_current();
    const T *px = cptr<T>(x), *pg = cptr<T>(gy);
    T *po = mptr<T>(out);
    if (inner > 1) {
        const unsigned b = cuda_grid_blocks(outer * inner, 256);
        if (gy)
            TDM_LAUNCH(b, 256, 0, s, k_softmax_bwd_cols<T>)(outer, n, inner, pg, px, po, log_);
        else
            TDM_LAUNCH(b, 256, 0, s, k_softmax_cols<T>)(outer, n, inner, px, po, log_);
    } else if (n <= 1024) {
        const unsigned b = row_blocks(outer, true);
        if (gy)
            TDM_LAUNCH(b, ROW_THREADS, 0, s, k_softmax_bwd_rows<true, T>)
            (outer, n, pg, px, po, log_);
        else
            TDM_LAUNCH(b, ROW_THREADS, 0, s, k_softmax_rows<true, T>)(outer, n, px, po, log_);
    } else {
        const unsigned b = row_blocks(outer, false);
        if (gy)
            TDM_LAUNCH(b, ROW_THREADS, 0, s, k_softmax_bwd_rows<false, T>)
            (outer, n, pg, px, po, log_);
        else
            TDM_LAUNCH(b, ROW_THREADS, 0, s, k_softmax_rows<false, T>)(outer, n, px, po, log_);
    }
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_softmax(const tdm_tensor *x, int dim, bool log_, tdm_tensor *y) {
    if (x->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    TDM_DISPATCH_FLOAT(x->dtype, log_ ? "log_softmax" : "softmax", T,
                       return softmax_t<T>(NULL, x, dim, log_, y));
    return TDM_OK;
}

tdm_status cuda_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim, bool log_,
                                 tdm_tensor *gx) {
    if (y->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(y));
    TDM_DISPATCH_FLOAT(y->dtype, log_ ? "log_softmax_backward" : "softmax_backward", T,
                       return softmax_t<T>(gy, y, dim, log_, gx));
    return TDM_OK;
}

// ---- deterministic sums over rows: per-block partials, then one block in a fixed order ------

static const int SUM_THREADS = 256;

// part[b] = sum of f(i) over the i of block b's grid-stride range.
template <typename A, typename F> __global__ void k_sum_blocks(int64_t n, F f, A *part) {
    __shared__ A sh[32];
    A acc = 0;
    GRID_STRIDE(i, n) acc += f(i);
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

// out[0] = fin(sum of part[0..nparts)): one block.
template <typename T, typename A, typename Fin>
__global__ void k_sum_final(int nparts, const A *part, T *out, Fin fin) {
    __shared__ A sh[32];
    A acc = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += part[i];
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) out[0] = st<T>(fin(acc));
}

template <typename T, typename F, typename Fin>
static tdm_status sum_all(const tdm_tensor *like, int64_t n, F f, T *out, Fin fin) {
    typedef acc_t<T> A;
    const unsigned blocks = cuda_grid_blocks(n, SUM_THREADS);
    tdm_tensor *part = cuda_scratch(like, blocks, sizeof(A) == 8 ? TDM_DTYPE_F64 : TDM_DTYPE_F32);
    if (!part) return tdm_last_status();
    const cudaStream_t s = cuda_stream_current();
    TDM_LAUNCH(blocks, SUM_THREADS, 0, s, k_sum_blocks<A, F>)(n, f, (A *)tdm_data(part));
    tdm_status st_ = CUDA_LAUNCH_CHECK();
    if (st_ == TDM_OK) {
        TDM_LAUNCH(1, 1024, 0, s, k_sum_final<T, A, Fin>)
        ((int)blocks, (const A *)tdm_data_c(part), out, fin);
        st_ = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(part);
    return st_;
}

// ---- cross_entropy ---------------------------------------------------------------------------
// logits (R,C); target (R) i32/i64 class indices, or q (R,C) class probabilities (logits' dtype);
// weight w (C) or NULL (1s). Per row, the target distribution (ref/ref_loss.c)
//   class t:        tau_c = (1-eps) w_t [c == t] + eps/C w_c,   divisor w_t
//   probabilities:  tau_c = w_c ((1-eps) q_c + eps/C),          divisor 1
// loss_r = sum_c tau_c (-logp_c); a row with t == ignore_index gives 0 with divisor 0. With class
// indices a zero tau_c adds nothing (a -inf logit elsewhere than the target is fine, as in
// PyTorch's nll_loss); mean = the sum / the sum of the divisors (NaN when that is 0), the divisors
// summed in f64 (exact for counts; for weights as the reference's sum but for the order). A
// target outside [0,C) that is not ignore_index goes to the device's error record (cuda_raise),
// which the host reports at its next wait: no synchronization here.

struct ce_args {
    int64_t R, C;
    const void *target;   // class indices, or NULL with q
    bool i64;
    int64_t ignore;
    double eps;
};

__device__ __forceinline__ bool ce_target(const void *target, bool i64, int64_t i, int64_t C,
                                          int64_t ignore, const cuda_err_ref &err, int64_t *t) {
    *t = idx_ld(target, i64, i);
    if (*t == ignore) return false;
    if (*t < 0 || *t >= C) {
        cuda_raise(err, *t, i);   // the first bad target any thread meets is reported
        return false;
    }
    return true;
}

// Row r's class (-1 with probabilities) and whether it counts (false: ignored, or a bad target).
__device__ __forceinline__ bool ce_row(const ce_args &a, int64_t r, const cuda_err_ref &err,
                                       int64_t *t) {
    *t = -1;
    return a.target ? ce_target(a.target, a.i64, r, a.C, a.ignore, err, t) : true;
}

template <typename T> __device__ __forceinline__ double ce_w(const T *w, int64_t c) {
    return w ? (double)ld(w[c]) : 1.0;
}

// tau_c of a row (class t, or probabilities qr), in double.
template <typename T>
__device__ __forceinline__ double ce_tau(const ce_args &a, int64_t t, const T *qr, const T *w,
                                         int64_t c) {
    if (!qr) return (c == t ? (1.0 - a.eps) * ce_w(w, t) : 0.0) + a.eps / (double)a.C * ce_w(w, c);
    return ce_w(w, c) * ((1.0 - a.eps) * (double)ld(qr[c]) + a.eps / (double)a.C);
}

// Per row: none -> loss[r] in T; else rowloss[r] in A and rowdiv[r] (the mean's divisor) in f64.
// stats (R, 2) or NULL: the row's (m, s) for the backward (the fused classifier).
template <bool WARP, typename T>
__global__ void k_ce_rows(ce_args a, const T *x, const T *q, const T *w, T *loss,
                          acc_t<T> *rowloss, double *rowdiv, acc_t<T> *stats, cuda_err_ref err) {
    typedef acc_t<T> A;
    typedef grp<WARP> G;
    __shared__ A sh[32];
    const int64_t C = a.C;
    for (int64_t r = G::first(); r < a.R; r += G::step()) {
        int64_t t;
        A L = 0;
        double div = 0;
        if (ce_row(a, r, err, &t)) {   // uniform over the group: one row each
            const T *xr = x + r * C, *qr = q ? q + r * C : NULL;
            A m, s;
            row_stats<WARP>(xr, C, 1, sh, &m, &s);
            if (stats && G::rank() == 0) stats[2 * r] = m, stats[2 * r + 1] = s;
            const A ls = k_log(s);
            A acc = 0;   // sum_c tau_c (-logp_c), the terms with tau_c = 0 skipped (class indices)
            for (int64_t c = G::rank(); c < C; c += G::size()) {
                const double tau = ce_tau(a, t, qr, w, c);
                if (tau != 0.0 || qr) acc += (A)tau * -((ld(xr[c]) - m) - ls);
            }
            L = G::sum(acc, sh);
            div = qr ? 1.0 : ce_w(w, t);
        }
        if (G::rank() == 0) {
            if (loss) loss[r] = st<T>(L);
            else rowloss[r] = L, rowdiv[r] = div;
        }
    }
}

template <typename A> struct read_fn {
    const A *p;
    __device__ A operator()(int64_t i) const { return p[i]; }
};
template <typename A> struct ident_fn {
    __device__ A operator()(A v) const { return v; }
};
template <typename A> struct ce_final_fn {   // sum, or the mean: over the divisors' sum (NaN at 0)
    const double *divisor;
    bool mean;
    __device__ A operator()(A total) const {
        if (!mean) return total;
        const double d = divisor[0];
        return d != 0.0 ? (A)((double)total / d) : k_nan<A>();
    }
};

static ce_args ce_args_of(const tdm_tensor *logits, const tdm_tensor *target, double eps,
                          int64_t ignore) {
    const bool probs = tdm_dtype_is_float(target->dtype);
    ce_args a = {logits->shape[0], logits->shape[1], probs ? NULL : tdm_data_c(target),
                 target->dtype == TDM_DTYPE_I64, ignore, eps};
    return a;
}

// The mean's divisor: the sum of the rows' divisors, in f64, into *out (scratch).
static tdm_status ce_divisor_sum(const tdm_tensor *like, int64_t R, const double *rowdiv,
                                 double *out) {
    read_fn<double> f = {rowdiv};
    ident_fn<double> id;
    return sum_all<double>(like, R, f, out, id);
}

template <typename T>
static tdm_status ce_t(const tdm_tensor *logits, const tdm_tensor *target, const tdm_tensor *weight,
                       tdm_reduction red, double smoothing, int64_t ignore, tdm_tensor *loss,
                       tdm_tensor *stats, cuda_err_ref err) {
    typedef acc_t<T> A;
    const ce_args a = ce_args_of(logits, target, smoothing, ignore);
    const bool warp = a.C <= 1024;
    const tdm_dtype adt = sizeof(A) == 8 ? TDM_DTYPE_F64 : TDM_DTYPE_F32;
    // none: the loss itself; else per-row losses (A), per-row divisors and their sum (f64)
    tdm_tensor *rows = NULL, *divs = NULL;
    if (red != TDM_REDUCTION_NONE && (!(rows = cuda_scratch(logits, a.R, adt)) ||
                                      !(divs = cuda_scratch(logits, a.R + 1, TDM_DTYPE_F64)))) {
        tdm_tensor_free(rows);
        return tdm_last_status();
    }
    T *lo = red == TDM_REDUCTION_NONE ? mptr<T>(loss) : NULL;
    A *rl = rows ? (A *)tdm_data(rows) : NULL;
    double *rd = divs ? (double *)tdm_data(divs) : NULL, *dsum = rd ? rd + a.R : NULL;
    const T *q = a.target ? NULL : cptr<T>(target), *w = weight ? cptr<T>(weight) : NULL;
    A *sp = stats ? (A *)tdm_data(stats) : NULL;
    const cudaStream_t s = cuda_stream_current();
    tdm_status st_ = TDM_OK;
    if (a.R > 0) {
        if (warp)
            TDM_LAUNCH(row_blocks(a.R, true), ROW_THREADS, 0, s, k_ce_rows<true, T>)
            (a, cptr<T>(logits), q, w, lo, rl, rd, sp, err);
        else
            TDM_LAUNCH(row_blocks(a.R, false), ROW_THREADS, 0, s, k_ce_rows<false, T>)
            (a, cptr<T>(logits), q, w, lo, rl, rd, sp, err);
        st_ = CUDA_LAUNCH_CHECK();
    }
    if (st_ == TDM_OK && rows && red == TDM_REDUCTION_MEAN)
        st_ = ce_divisor_sum(logits, a.R, rd, dsum);
    if (st_ == TDM_OK && rows) {
        read_fn<A> f = {rl};
        ce_final_fn<A> fin = {dsum, red == TDM_REDUCTION_MEAN};
        st_ = sum_all<T>(logits, a.R, f, mptr<T>(loss), fin);
    }
    tdm_tensor_free(rows);
    tdm_tensor_free(divs);
    return st_;
}

tdm_status cuda_cross_entropy_stats(const tdm_tensor *logits, const tdm_tensor *target,
                                    const tdm_tensor *weight, tdm_reduction red, double smoothing,
                                    int64_t ignore_index, tdm_tensor *loss, tdm_tensor *stats) {
    if (loss->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(logits));
    cuda_err_ref err;
    TDM_TRY(cuda_err_ref_get(logits, CUDA_ERR_CROSS_ENTROPY, logits->shape[1], &err));
    tdm_status s = TDM_OK;
    switch (logits->dtype) {
    case TDM_DTYPE_F32: s = ce_t<float>(logits, target, weight, red, smoothing, ignore_index, loss, stats, err); break;
    case TDM_DTYPE_F16: s = ce_t<__half>(logits, target, weight, red, smoothing, ignore_index, loss, stats, err); break;
    case TDM_DTYPE_BF16: s = ce_t<bf16_t>(logits, target, weight, red, smoothing, ignore_index, loss, stats, err); break;
    case TDM_DTYPE_F64: s = ce_t<double>(logits, target, weight, red, smoothing, ignore_index, loss, stats, err); break;
    default:
        s = tdm_error_set(TDM_ERR_DTYPE, "cross_entropy: dtype %s not supported by the cuda backend",
                          tdm_dtype_name(logits->dtype));
    }
    return s;
}

tdm_status cuda_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                              const tdm_tensor *weight, tdm_reduction red, double smoothing,
                              int64_t ignore_index, tdm_tensor *loss) {
    return cuda_cross_entropy_stats(logits, target, weight, red, smoothing, ignore_index, loss,
                                    NULL);
}

// Per row: the mean's divisor (0 for an ignored row), validating every target.
template <typename T>
__global__ void k_ce_divisors(ce_args a, const T *w, double *rowdiv, cuda_err_ref err) {
    GRID_STRIDE(r, a.R) {
        int64_t t;
        const bool kept = ce_row(a, r, err, &t);
        rowdiv[r] = !kept ? 0.0 : a.target ? ce_w(w, t) : 1.0;
    }
}

// glogits[r,c] = g_r (p_c S - tau_c), S = sum_c tau_c, 0 on ignored rows; g_r = gloss[r] (none),
// gloss[0] (sum), gloss[0] / the divisors' sum (mean). p = exp(x - m) / s in A (the softmax
// error docs/CONFORMANCE.md budgets); S: exactly 1 for class indices without weights ((1-eps) +
// C eps/C), else summed over the row in A; the epilogue g (p S - tau) in f64, with tau in f64:
// docs/CONFORMANCE.md allows 3 roundings there, and in f32 tau's own roundings would make 4 or 5.
// stats (R, 2) or NULL: the forward's (m, s) per row, read instead of recomputed (one pass).
template <bool WARP, typename T>
__global__ void k_ce_bwd_rows(ce_args a, const T *gloss, const T *x, const T *q, const T *w,
                              int red, const double *dsum, const acc_t<T> *stats, T *gx) {
    typedef acc_t<T> A;
    typedef grp<WARP> G;
    __shared__ A sh[32];
    const int64_t C = a.C;
    for (int64_t r = G::first(); r < a.R; r += G::step()) {
        T *gr = gx + r * C;
        int64_t t = -1;
        bool kept = true;
        if (a.target) {
            t = idx_ld(a.target, a.i64, r);
            kept = t != a.ignore && t >= 0 && t < C;   // bad targets were reported already
        }
        if (!kept) {
            for (int64_t c = G::rank(); c < C; c += G::size()) gr[c] = st<T>((A)0);
            continue;
        }
        const double g = red == TDM_REDUCTION_NONE ? (double)ld(gloss[r])
                         : red == TDM_REDUCTION_SUM ? (double)ld(gloss[0])
                         : dsum[0] != 0.0           ? (double)ld(gloss[0]) / dsum[0]
                                                    : (double)k_nan<A>();
        const T *xr = x + r * C, *qr = q ? q + r * C : NULL;
        double S = 1.0;
        if (w || qr) {
            A acc = 0;
            for (int64_t c = G::rank(); c < C; c += G::size()) acc += (A)ce_tau(a, t, qr, w, c);
            S = (double)G::sum(acc, sh);
        }
        A m, s;
        if (stats) m = stats[2 * r], s = stats[2 * r + 1];
        else row_stats<WARP>(xr, C, 1, sh, &m, &s);
        for (int64_t c = G::rank(); c < C; c += G::size()) {
            const A p = k_exp(ld(xr[c]) - m) / s;
            gr[c] = st<T>(g * ((double)p * S - ce_tau(a, t, qr, w, c)));
        }
    }
}

template <typename T>
static tdm_status ce_bwd_t(const tdm_tensor *gloss, const tdm_tensor *logits,
                           const tdm_tensor *target, const tdm_tensor *weight, tdm_reduction red,
                           double smoothing, int64_t ignore, const tdm_tensor *stats,
                           tdm_tensor *glogits, cuda_err_ref err) {
    const ce_args a = ce_args_of(logits, target, smoothing, ignore);
    const bool warp = a.C <= 1024;
    const T *q = a.target ? NULL : cptr<T>(target), *w = weight ? cptr<T>(weight) : NULL;
    const cudaStream_t s = cuda_stream_current();
    // per-row divisors and their sum, in f64 (the mean's; the kernel also validates the targets)
    tdm_tensor *div = cuda_scratch(logits, a.R + 1, TDM_DTYPE_F64);
    if (!div) return tdm_last_status();
    double *rd = (double *)tdm_data(div), *dsum = rd + a.R;
    const acc_t<T> *sp = stats ? (const acc_t<T> *)tdm_data_c(stats) : NULL;
    TDM_LAUNCH(cuda_grid_blocks(a.R, 256), 256, 0, s, k_ce_divisors<T>)(a, w, rd, err);
    tdm_status st_ = CUDA_LAUNCH_CHECK();
    if (st_ == TDM_OK && red == TDM_REDUCTION_MEAN) st_ = ce_divisor_sum(logits, a.R, rd, dsum);
    if (st_ == TDM_OK) {
        if (warp)
            TDM_LAUNCH(row_blocks(a.R, true), ROW_THREADS, 0, s, k_ce_bwd_rows<true, T>)
            (a, cptr<T>(gloss), cptr<T>(logits), q, w, (int)red, dsum, sp, mptr<T>(glogits));
        else
            TDM_LAUNCH(row_blocks(a.R, false), ROW_THREADS, 0, s, k_ce_bwd_rows<false, T>)
            (a, cptr<T>(gloss), cptr<T>(logits), q, w, (int)red, dsum, sp, mptr<T>(glogits));
        st_ = CUDA_LAUNCH_CHECK();
    }
    tdm_tensor_free(div);   // stream-ordered: reused only by later work on this stream
    return st_;
}

tdm_status cuda_cross_entropy_backward_stats(const tdm_tensor *gloss, const tdm_tensor *logits,
                                             const tdm_tensor *target, const tdm_tensor *weight,
                                             tdm_reduction red, double smoothing,
                                             int64_t ignore_index, const tdm_tensor *stats,
                                             tdm_tensor *glogits) {
    if (glogits->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(logits));
    cuda_err_ref err;
    TDM_TRY(cuda_err_ref_get(logits, CUDA_ERR_CROSS_ENTROPY_BACKWARD, logits->shape[1], &err));
    tdm_status s = TDM_OK;
    switch (logits->dtype) {
    case TDM_DTYPE_F32: s = ce_bwd_t<float>(gloss, logits, target, weight, red, smoothing, ignore_index, stats, glogits, err); break;
    case TDM_DTYPE_F16: s = ce_bwd_t<__half>(gloss, logits, target, weight, red, smoothing, ignore_index, stats, glogits, err); break;
    case TDM_DTYPE_BF16: s = ce_bwd_t<bf16_t>(gloss, logits, target, weight, red, smoothing, ignore_index, stats, glogits, err); break;
    case TDM_DTYPE_F64: s = ce_bwd_t<double>(gloss, logits, target, weight, red, smoothing, ignore_index, stats, glogits, err); break;
    default:
        s = tdm_error_set(TDM_ERR_DTYPE, "cross_entropy_backward: dtype %s not supported by the "
                          "cuda backend", tdm_dtype_name(logits->dtype));
    }
    return s;
}

tdm_status cuda_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                       const tdm_tensor *target, const tdm_tensor *weight,
                                       tdm_reduction red, double smoothing, int64_t ignore_index,
                                       tdm_tensor *glogits) {
    return cuda_cross_entropy_backward_stats(gloss, logits, target, weight, red, smoothing,
                                             ignore_index, NULL, glogits);
}

// ---- mse_loss ---------------------------------------------------------------------------------
// d = a - b; none: loss = d^2; sum: sum d^2; mean: sum d^2 / n (NaN when n = 0).

struct mse_none_fn {
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        const A d = in[0] - in[1];
        out[0] = d * d;
    }
};
template <typename T> struct mse_sq_fn {
    const T *a, *b;
    __device__ acc_t<T> operator()(int64_t i) const {
        const acc_t<T> d = ld(a[i]) - ld(b[i]);
        return d * d;
    }
};
template <typename A> struct mse_final_fn {
    int64_t n;
    bool mean;
    __device__ A operator()(A total) const { return mean ? total / (A)n : total; }
};

template <typename T>
static tdm_status mse_t(const tdm_tensor *a, const tdm_tensor *b, tdm_reduction red,
                        tdm_tensor *loss) {
    if (red == TDM_REDUCTION_NONE) {
        map_ptrs<T, 2, 1> p = {{cptr<T>(a), cptr<T>(b)}, {mptr<T>(loss)}};
        return launch_map(a->numel, p, mse_none_fn());
    }
    mse_sq_fn<T> f = {cptr<T>(a), cptr<T>(b)};
    mse_final_fn<acc_t<T>> fin = {a->numel, red == TDM_REDUCTION_MEAN};
    return sum_all<T>(a, a->numel, f, mptr<T>(loss), fin);
}

tdm_status cuda_mse_loss(const tdm_tensor *a, const tdm_tensor *b, tdm_reduction red,
                         tdm_tensor *loss) {
    if (loss->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(a));
    TDM_DISPATCH_FLOAT(a->dtype, "mse_loss", T, return mse_t<T>(a, b, red, loss));
    return TDM_OK;
}

// ga = 2 d g_i (g_i = gloss[i], gloss[0], gloss[0] / n); gb = -ga. in: a, b; out: ga, gb.
template <typename T> struct mse_bwd_fn {
    const T *gloss;
    int red;
    int64_t n;
    template <typename A> __device__ void operator()(int64_t i, const A *in, A *out) const {
        const A g = red == TDM_REDUCTION_NONE ? ld(gloss[i])
                    : red == TDM_REDUCTION_SUM ? ld(gloss[0])
                                               : ld(gloss[0]) / (A)n;
        out[0] = (A)2 * (in[0] - in[1]) * g;
        out[1] = -out[0];
    }
};

tdm_status cuda_mse_loss_backward(const tdm_tensor *gloss, const tdm_tensor *a,
                                  const tdm_tensor *b, tdm_reduction red, tdm_tensor *ga,
                                  tdm_tensor *gb) {
    if (a->numel == 0 || (!ga && !gb)) return TDM_OK;
    TDM_TRY(cuda_use_device(a));
    TDM_DISPATCH_FLOAT(a->dtype, "mse_loss_backward", T, {
        map_ptrs<T, 2, 2> p = {{cptr<T>(a), cptr<T>(b)}, {mptr<T>(ga), mptr<T>(gb)}};
        mse_bwd_fn<T> f = {cptr<T>(gloss), (int)red, a->numel};
        return launch_map(a->numel, p, f);
    });
    return TDM_OK;
}
