/* k_attention.cu — F.scaled_dot_product_attention on the CUDA backend (core/backend.h's sdpa
 * slots, the semantics of ref/ref_attention.c): the plain, unfused path. Batched cuBLASLt
 * products (kernels/blas.cu's tdm_cuda_gemm_rm: f32, f64 for f64, never TF32) around one row
 * kernel each way, a warp per row up to 1024 keys and a block per row past that:
 *
 *   forward:   Sc = q k^T                    (B,L,S)
 *              k_attn_rows: s = scale Sc + mask (or causal -inf), safe softmax, dropout -> P'
 *              y = P' v                      (B,L,Ev)
 *   backward:  Sc = q k^T, dP' = gy v^T      (B,L,S) each
 *              k_attn_rows_bwd: p and P' again from Sc; dS = p (dP' kf - sum p dP' kf) -> the
 *              mask's gradient, and scale dS into dP'; P' into Sc
 *              gv = P'^T gy, gq = (scale dS) k, gk = (scale dS)^T q
 *
 * f16/bf16 operands are widened to f32 copies first (exact), so every product and the softmax
 * accumulate in f32 and each result is rounded once to its dtype (docs/CONFORMANCE.md's bound
 * counts exactly these roundings). The softmax is two-pass (max, then sum of exp) as
 * k_softmax_loss.cu's. A row whose scores are all -inf gives zeros (PyTorch's _safe_softmax).
 * Scratch: B L S accumulators (two backward). This is the plain path: masks, dropout, f32 and f64,
 * and the conformance mode (tandem/backends.h); f16/bf16 without mask or dropout run fused
 * otherwise (k_flash_attention.cu). */
#include <string.h>

#include "core/philox.h"
#include "kernels/cuda_libs.h"
#include "kernels/k_common.cuh"

static const int ROW_THREADS = 256;

// The mask as the kernels read it: core's strided view (batch dims..., L, S), stride 0 where it
// broadcasts; p NULL without a mask.
typedef struct {
    const void *p;
    int dt;   // tdm_dtype: bool (nonzero takes part) or floating (added)
    int nb;   // batch dims
    int64_t size[TDM_MAX_DIMS], stride[TDM_MAX_DIMS];
    int64_t stride_l, stride_s;
} attn_mask;

// The row kernels' settings (tdm_sdpa_params, with the dropout threshold worked out).
typedef struct {
    int64_t L, S;
    double scale;
    bool causal;
    bool dropout;
    uint32_t threshold;   // tdm_dropout_threshold
    double keep_scale;    // 1 / (1 - p), 0 for p = 1
    uint64_t seed, offset;
    const uint64_t *delta;
} attn_rows;

// Offset of row (b, i) in the mask.
__device__ __forceinline__ int64_t mask_row(const attn_mask &m, int64_t b, int64_t i) {
    int64_t off = i * m.stride_l;
    for (int d = m.nb - 1; d >= 0; d--) {
        off += (b % m.size[d]) * m.stride[d];
        b /= m.size[d];
    }
    return off;
}

// The mask's term at offset o: 0 / -inf for a bool mask, the value for a floating one.
template <typename A> __device__ __forceinline__ A mask_term(const attn_mask &m, int64_t o) {
    if (m.dt == TDM_DTYPE_BOOL) return ((const uint8_t *)m.p)[o] ? (A)0 : -k_inf<A>();
    any_cptr c = {m.p, m.dt};
    return any_ld<A>(c, o, (A)0);
}

// Score j of row (b, i) from the product q_i . k_j.
template <typename A>
__device__ __forceinline__ A score(const attn_rows &a, const attn_mask &m, int64_t moff, int64_t i,
                                   int64_t j, A qk) {
    if (a.causal && j > i) return -k_inf<A>();
    A s = (A)a.scale * qk;
    if (m.p) s += mask_term<A>(m, moff + j * m.stride_s);
    return s;
}

// keep_j / (1 - p) for element (r, j) of the weights (1 without dropout).
template <typename A>
__device__ __forceinline__ A keep_factor(const attn_rows &a, uint64_t offset, int64_t r,
                                         int64_t j) {
    if (!a.dropout) return (A)1;
    const uint64_t at = (uint64_t)(r * a.S + j);
    return (tdm_philox_bits(a.seed, offset, at) >> 8) < a.threshold ? (A)a.keep_scale : (A)0;
}

// Row r's max m and sum of exp(s_j - m) over its scores s (stored in row), by the group.
template <bool WARP, typename A>
__device__ __forceinline__ void row_softmax_stats(const A *row, int64_t S, A *sh, A *m, A *sum) {
    typedef grp<WARP> G;
    A mx = -k_inf<A>();
    for (int64_t j = G::rank(); j < S; j += G::size()) mx = k_max(mx, row[j]);
    mx = G::max(mx, sh);
    A s = 0;
    if (mx != -k_inf<A>())
        for (int64_t j = G::rank(); j < S; j += G::size()) s += k_exp(row[j] - mx);
    *m = mx;
    *sum = G::sum(s, sh);
}

// p_j from the stats (0 for a row of -inf scores).
template <typename A> __device__ __forceinline__ A row_p(A s, A m, A sum) {
    return m == -k_inf<A>() ? (A)0 : k_exp(s - m) / sum;
}

// ---- forward rows: sc (B L, S) in: q k^T; out: P' -----------------------------------------------

template <bool WARP, typename A>
__global__ void k_attn_rows(int64_t rows, A *sc, attn_rows a, attn_mask m) {
    typedef grp<WARP> G;
    __shared__ A sh[32];
    const uint64_t offset = a.delta ? a.offset + *a.delta : a.offset;
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const int64_t b = r / a.L, i = r % a.L;
        const int64_t moff = m.p ? mask_row(m, b, i) : 0;
        A *row = sc + r * a.S;
        for (int64_t j = G::rank(); j < a.S; j += G::size())
            row[j] = score<A>(a, m, moff, i, j, row[j]);
        A mx, sum;
        row_softmax_stats<WARP>(row, a.S, sh, &mx, &sum);
        for (int64_t j = G::rank(); j < a.S; j += G::size())
            row[j] = row_p(row[j], mx, sum) * keep_factor<A>(a, offset, r, j);
    }
}

// ---- backward rows ----------------------------------------------------------------------------
// sc (B L, S) in: q k^T, out: P'. dp (B L, S) in: gy v^T (= dL/dP'), out: scale dS.
// gm: the mask's gradient dS (B L, S), or absent.

template <bool WARP, typename A>
__global__ void k_attn_rows_bwd(int64_t rows, A *sc, A *dp, attn_rows a, attn_mask m,
                                any_ptr gm) {
    typedef grp<WARP> G;
    __shared__ A sh[32];
    const uint64_t offset = a.delta ? a.offset + *a.delta : a.offset;
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const int64_t b = r / a.L, i = r % a.L;
        const int64_t moff = m.p ? mask_row(m, b, i) : 0;
        A *row = sc + r * a.S, *drow = dp + r * a.S;
        for (int64_t j = G::rank(); j < a.S; j += G::size())
            row[j] = score<A>(a, m, moff, i, j, row[j]);
        A mx, sum;
        row_softmax_stats<WARP>(row, a.S, sh, &mx, &sum);
        A d = 0;   // sum_j p_j dp_j, dp_j = dP'_j kf_j
        for (int64_t j = G::rank(); j < a.S; j += G::size()) {
            const A g = drow[j] * keep_factor<A>(a, offset, r, j);
            drow[j] = g;
            d += row_p(row[j], mx, sum) * g;
        }
        d = G::sum(d, sh);
        for (int64_t j = G::rank(); j < a.S; j += G::size()) {
            const A p = row_p(row[j], mx, sum);
            const A ds = p * (drow[j] - d);
            any_st<A>(gm, r * a.S + j, ds);
            drow[j] = ds * (A)a.scale;
            row[j] = p * keep_factor<A>(a, offset, r, j);
        }
    }
}

// ---- launchers ----------------------------------------------------------------------------------

static attn_mask mask_of(const tdm_tensor *mask) {
    attn_mask m;
    memset(&m, 0, sizeof m);
    if (!mask) return m;
    m.p = tdm_data_c(mask);
    m.dt = (int)mask->dtype;
    m.nb = mask->ndim - 2;
    for (int d = 0; d < m.nb; d++) m.size[d] = mask->shape[d], m.stride[d] = mask->stride[d];
    m.stride_l = mask->stride[mask->ndim - 2];
    m.stride_s = mask->stride[mask->ndim - 1];
    return m;
}

static attn_rows rows_of(const tdm_tensor *q, const tdm_tensor *k, const tdm_sdpa_params *p) {
    attn_rows a;
    memset(&a, 0, sizeof a);
    a.L = q->shape[1], a.S = k->shape[1];
    a.scale = p->scale;
    a.causal = p->is_causal;
    a.dropout = p->dropout_p > 0;
    a.threshold = tdm_dropout_threshold(p->dropout_p);
    a.keep_scale = p->dropout_p < 1.0 ? 1.0 / (1.0 - p->dropout_p) : 0.0;
    a.seed = p->seed, a.offset = p->offset, a.delta = p->delta;
    return a;
}

template <typename A>
static tdm_status launch_rows(int64_t rows, A *sc, A *dp, const attn_rows &a, const attn_mask &m,
                              any_ptr gm) {
    const bool warp = a.S <= 1024;
    const unsigned blocks = group_blocks(rows, warp, ROW_THREADS);
    const cudaStream_t s = cuda_stream_current();
    if (dp && warp)
        TDM_LAUNCH(blocks, ROW_THREADS, 0, s, k_attn_rows_bwd<true, A>)(rows, sc, dp, a, m, gm);
    else if (dp)
        TDM_LAUNCH(blocks, ROW_THREADS, 0, s, k_attn_rows_bwd<false, A>)(rows, sc, dp, a, m, gm);
    else if (warp)
        TDM_LAUNCH(blocks, ROW_THREADS, 0, s, k_attn_rows<true, A>)(rows, sc, a, m);
    else
        TDM_LAUNCH(blocks, ROW_THREADS, 0, s, k_attn_rows<false, A>)(rows, sc, a, m);
    return CUDA_LAUNCH_CHECK();
}

// t in the accumulation dtype acc: t itself, or a widened scratch copy (*owned, freed by the
// caller). NULL t gives NULL.
static const void *widened(const tdm_tensor *t, tdm_dtype acc, tdm_tensor **owned) {
    *owned = NULL;
    if (!t || t->dtype == acc) return t ? tdm_data_c(t) : NULL;
    if (!(*owned = cuda_scratch(t, t->numel, acc))) return NULL;
    if (cuda_cast(*owned, t) != TDM_OK) {
        tdm_tensor_free(*owned);
        *owned = NULL;
        return NULL;
    }
    return tdm_data_c(*owned);
}

static tdm_tensor *acc_out(tdm_tensor *t, tdm_dtype acc) {
    return t && t->dtype != acc ? cuda_scratch(t, t->numel, acc) : NULL;
}

static void free_all(tdm_tensor **ts, int n) {
    for (int i = 0; i < n; i++) tdm_tensor_free(ts[i]);
}

tdm_status cuda_sdpa(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                     const tdm_tensor *mask, const tdm_sdpa_params *p, tdm_tensor *y) {
    TDM_TRY(cuda_use_device(q));
    const tdm_dtype acc = q->dtype == TDM_DTYPE_F64 ? TDM_DTYPE_F64 : TDM_DTYPE_F32;
    const int64_t B = q->shape[0], L = q->shape[1], E = q->shape[2], S = k->shape[1],
                  Ev = v->shape[2];
    tdm_tensor *own[5] = {NULL, NULL, NULL, NULL, NULL};   // q, k, v widened; sc; y in acc
    const void *pq = widened(q, acc, &own[0]), *pk = widened(k, acc, &own[1]),
               *pv = widened(v, acc, &own[2]);
    own[3] = cuda_scratch(q, B * L * S, acc);
    own[4] = acc_out(y, acc);
    tdm_status s = pq && pk && pv && own[3] && (own[4] || y->dtype == acc) ? TDM_OK
                                                                           : tdm_last_status();
    void *sc = own[3] ? tdm_data(own[3]) : NULL, *py = own[4] ? tdm_data(own[4]) : tdm_data(y);
    if (s == TDM_OK)   // Sc = q k^T
        s = tdm_cuda_gemm_rm(acc, false, true, L, S, E, pq, L * E, pk, S * E, sc, L * S, B);
    const attn_rows a = rows_of(q, k, p);
    const attn_mask m = mask_of(mask);
    const any_ptr none = {NULL, 0};
    if (s == TDM_OK) {
        if (acc == TDM_DTYPE_F64) s = launch_rows<double>(B * L, (double *)sc, NULL, a, m, none);
        else s = launch_rows<float>(B * L, (float *)sc, NULL, a, m, none);
    }
    if (s == TDM_OK)   // y = P' v
        s = tdm_cuda_gemm_rm(acc, false, false, L, Ev, S, sc, L * S, pv, S * Ev, py, L * Ev, B);
    if (s == TDM_OK && own[4]) s = cuda_cast(y, own[4]);
    free_all(own, 5);
    return s;
}

tdm_status cuda_sdpa_backward(const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k,
                              const tdm_tensor *v, const tdm_tensor *mask,
                              const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                              tdm_tensor *gv, tdm_tensor *gmask) {
    TDM_TRY(cuda_use_device(q));
    const tdm_dtype acc = q->dtype == TDM_DTYPE_F64 ? TDM_DTYPE_F64 : TDM_DTYPE_F32;
    const int64_t B = q->shape[0], L = q->shape[1], E = q->shape[2], S = k->shape[1],
                  Ev = v->shape[2];
    // q, k, v, gy widened; sc, dp; gq, gk, gv in acc
    tdm_tensor *own[9] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    const void *pq = widened(q, acc, &own[0]), *pk = widened(k, acc, &own[1]),
               *pv = widened(v, acc, &own[2]), *pg = widened(gy, acc, &own[3]);
    own[4] = cuda_scratch(q, B * L * S, acc);
    own[5] = cuda_scratch(q, B * L * S, acc);
    tdm_tensor *out[3] = {gq, gk, gv};
    bool ok = pq && pk && pv && pg && own[4] && own[5];
    for (int i = 0; i < 3 && ok; i++) {
        own[6 + i] = acc_out(out[i], acc);
        ok = !out[i] || out[i]->dtype == acc || own[6 + i];
    }
    tdm_status s = ok ? TDM_OK : tdm_last_status();
    void *g[3];
    for (int i = 0; i < 3; i++)
        g[i] = own[6 + i] ? tdm_data(own[6 + i]) : out[i] ? tdm_data(out[i]) : NULL;
    void *sc = own[4] ? tdm_data(own[4]) : NULL, *dp = own[5] ? tdm_data(own[5]) : NULL;
    if (s == TDM_OK)   // Sc = q k^T
        s = tdm_cuda_gemm_rm(acc, false, true, L, S, E, pq, L * E, pk, S * E, sc, L * S, B);
    if (s == TDM_OK)   // dP' = gy v^T
        s = tdm_cuda_gemm_rm(acc, false, true, L, S, Ev, pg, L * Ev, pv, S * Ev, dp, L * S, B);
    const attn_rows a = rows_of(q, k, p);
    const attn_mask m = mask_of(mask);
    if (s == TDM_OK) {
        const any_ptr gm = any_m(gmask);
        if (acc == TDM_DTYPE_F64)
            s = launch_rows<double>(B * L, (double *)sc, (double *)dp, a, m, gm);
        else
            s = launch_rows<float>(B * L, (float *)sc, (float *)dp, a, m, gm);
    }
    if (s == TDM_OK && g[2])   // gv = P'^T gy
        s = tdm_cuda_gemm_rm(acc, true, false, S, Ev, L, sc, L * S, pg, L * Ev, g[2], S * Ev, B);
    if (s == TDM_OK && g[0])   // gq = (scale dS) k
        s = tdm_cuda_gemm_rm(acc, false, false, L, E, S, dp, L * S, pk, S * E, g[0], L * E, B);
    if (s == TDM_OK && g[1])   // gk = (scale dS)^T q
        s = tdm_cuda_gemm_rm(acc, true, false, S, E, L, dp, L * S, pq, L * E, g[1], S * E, B);
    for (int i = 0; i < 3 && s == TDM_OK; i++)
        if (own[6 + i]) s = cuda_cast(out[i], own[6 + i]);
    free_all(own, 9);
    return s;
}
