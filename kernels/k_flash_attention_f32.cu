/* k_flash_attention_f32.cu — the fused attention for f32 operands (the f32 half of core/backend.h's
 * sdpa_fused slots; k_flash_attention.cu, which has the f16/bf16 half, hands f32 calls here): the
 * same FlashAttention-2 as there, in plain f32 FMA on the CUDA cores (no tensor cores, and never
 * TF32, whatever tdm_tf32_allowed says), no mask but is_causal, no dropout, head sizes up to 256
 * (q, k, v contiguous (B,L,E), (B,S,E), (B,S,Ev)).
 *
 * Nothing of size L x S reaches device memory. A row (a query in the forward and in gq's kernel,
 * a key in gk/gv's) belongs to TPR adjacent lanes of a warp (4, or 8 for head sizes over 128), each
 * holding the columns c = t + TPR x (t = lane % TPR) of the row's vectors in registers; a dot
 * product is TPR partial sums in f32 FMA, added up with xor shuffles (a butterfly: every lane of
 * the row gets the same bits). Tiles of BC keys (or queries) are streamed through shared memory,
 * every row of the block reading the same tile row at once (a broadcast). Per key tile a query row
 *
 *   s_j = q k_j (j < BC),  m' = max(m, max_j s_j),  p_j = exp2(s_j - m'),
 *   l = l e^(m - m') + sum_j p_j,  o = o e^(m - m') + sum_j p_j v_j
 *
 * (the scores in log2 units), so o / l and lse = m + log l are its output and log-sum-exp.
 *
 * Backward (in every attention mode; no atomics, bit-reproducible): D = rowsum(gy * y)
 * (k_flash32_bwd_dot); one kernel per key block for gk and gv (over the query tiles that see the
 * keys: p from lse, dv += p gy, ds = p (gy v - D), dk += ds q); one per query block for gq
 * (recomputing p and ds over the key tiles: dq += ds k). p and ds stay f32: docs/CONFORMANCE.md's
 * fused-path bound for f32 has no rounding of either to a narrower type.
 *
 * Tiles: DP (E and Ev padded with zeros to 32, 64, 128 or 256) by BC = 64, 64, 32, 16 rows
 * (shared memory: two tiles of at most 32 KiB); rows past L or S are zeros and masked out.
 *
 * Registers (ptxas -v, sm_90, 2026-11-27), no spills: head 64 forward 128, gk/gv 123, gq 90; head
 * 128 and 256 forward 128, gk/gv 224, gq 160. Not yet: double-buffered tiles, q/k/v read through
 * their strides. */
#include <math.h>
#include <string.h>

#include "kernels/cuda_kernels.h"
#include "kernels/k_common.cuh"
#include "tandem/backends.h"

static const int FA32_THREADS = 128;   // 4 warps
static const float FA32_LOG2E = 1.4426950408889634f;
static const float FA32_LN2 = 0.6931471805599453f;

template <int DP> struct fa32_tile {
    static const int TPR = DP <= 128 ? 4 : 8;       // lanes per row
    static const int NC = DP / TPR;                 // columns per lane: t + TPR x, x < NC
    static const int ROWS = FA32_THREADS / TPR;     // rows per block: 32 (16 for DP = 256)
    static const int BC = DP <= 64 ? 64 : 4096 / DP;   // rows per shared tile: 64, 64, 32, 16
};

typedef struct {
    const float *q, *k, *v, *gy, *y;
    float *out, *gq, *gk, *gv;   // y (forward); the gradients
    float *lse;                  // (B, L): natural log-sum-exp of the scaled scores
    const float *dvec;           // (B, L): rowsum(gy * y)
    int64_t L, S;
    int E, Ev;
    float scale_log2;            // scale * log2(e)
    float scale;
    bool causal;
    bool vec;                    // 16-byte loads: every base aligned, E and Ev % 4 == 0
} fa32_args;

// Rows row0.. of a (nrows, cols) row-major matrix into `rows` shared rows of DP floats, zeros
// past nrows and past cols. By the whole block.
template <int DP>
__device__ __forceinline__ void fa32_load(float *sm, const float *g, int64_t row0, int64_t nrows,
                                          int cols, int rows, bool vec) {
    const int chunks = DP / 4;
    for (int c = threadIdx.x; c < rows * chunks; c += blockDim.x) {
        const int r = c / chunks, e0 = (c % chunks) * 4;
        float *dst = sm + r * DP + e0;
        const int64_t gr = row0 + r;
        if (vec && gr < nrows && e0 + 4 <= cols) {
            *(float4 *)dst = *(const float4 *)(g + gr * cols + e0);
            continue;
        }
        #pragma unroll
        for (int e = 0; e < 4; e++) dst[e] = gr < nrows && e0 + e < cols ? g[gr * cols + e0 + e] : 0.f;
    }
}

// This lane's columns of row `row` of a (nrows, cols) matrix (zeros past either).
template <int DP>
__device__ __forceinline__ void fa32_row(float r[fa32_tile<DP>::NC], const float *g, int64_t row,
                                         int64_t nrows, int cols) {
    typedef fa32_tile<DP> C;
    const int t = threadIdx.x % C::TPR;
    #pragma unroll
    for (int x = 0; x < C::NC; x++) {
        const int c = t + C::TPR * x;
        r[x] = row < nrows && c < cols ? g[row * cols + c] : 0.f;
    }
}

// Row `row` of a (nrows, cols) matrix from this lane's columns times mul (rows past nrows skipped).
template <int DP>
__device__ __forceinline__ void fa32_store(float *g, const float r[fa32_tile<DP>::NC], int64_t row,
                                           int64_t nrows, int cols, float mul) {
    typedef fa32_tile<DP> C;
    const int t = threadIdx.x % C::TPR;
    if (row >= nrows) return;
    #pragma unroll
    for (int x = 0; x < C::NC; x++) {
        const int c = t + C::TPR * x;
        if (c < cols) g[row * cols + c] = r[x] * mul;
    }
}

// The dot product of this lane's columns with shared row sm (DP floats), summed over the TPR
// lanes of the row (the same bits in each).
template <int DP>
__device__ __forceinline__ float fa32_dot(const float r[fa32_tile<DP>::NC], const float *sm) {
    typedef fa32_tile<DP> C;
    const int t = threadIdx.x % C::TPR;
    float d = 0.f;
    #pragma unroll
    for (int x = 0; x < C::NC; x++) d = fmaf(r[x], sm[t + C::TPR * x], d);
    #pragma unroll
    for (int w = 1; w < C::TPR; w *= 2) d += __shfl_xor_sync(0xffffffffu, d, w);
    return d;
}

// acc (this lane's columns) += w * shared row sm.
template <int DP>
__device__ __forceinline__ void fa32_axpy(float acc[fa32_tile<DP>::NC], float w, const float *sm) {
    typedef fa32_tile<DP> C;
    const int t = threadIdx.x % C::TPR;
    #pragma unroll
    for (int x = 0; x < C::NC; x++) acc[x] = fmaf(w, sm[t + C::TPR * x], acc[x]);
}

// ---- forward: y, lse ------------------------------------------------------------------------------

template <int DP>
__global__ void __launch_bounds__(FA32_THREADS) k_flash32_fwd(fa32_args a, int64_t ntiles) {
    typedef fa32_tile<DP> C;
    __shared__ __align__(16) float Ks[C::BC * DP], Vs[C::BC * DP];   // (BC, DP) each
    const int64_t b = blockIdx.x / ntiles, i0 = (blockIdx.x % ntiles) * C::ROWS;
    const int64_t row = i0 + threadIdx.x / C::TPR;   // this lane's query
    const float *k = a.k + b * a.S * a.E, *v = a.v + b * a.S * a.Ev;

    float qr[C::NC], o[C::NC];   // q's row (, DP), the output's (, DP)
    fa32_row<DP>(qr, a.q + b * a.L * a.E, row, a.L, a.E);
    #pragma unroll
    for (int x = 0; x < C::NC; x++) o[x] = 0.f;
    float m = -INFINITY, l = 0.f;
    const int64_t kend = a.causal && i0 + C::ROWS < a.S ? i0 + C::ROWS : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += C::BC) {
        fa32_load<DP>(Ks, k, j0, a.S, a.E, C::BC, a.vec);
        fa32_load<DP>(Vs, v, j0, a.S, a.Ev, C::BC, a.vec);
        __syncthreads();
        float s[C::BC];   // the tile's scores, then weights (, BC)
        float mt = -INFINITY;
        #pragma unroll
        for (int jj = 0; jj < C::BC; jj++) {
            const int64_t col = j0 + jj;
            float x = fa32_dot<DP>(qr, Ks + jj * DP) * a.scale_log2;
            if (col >= a.S || (a.causal && col > row)) x = -INFINITY;
            s[jj] = x;
            mt = fmaxf(mt, x);
        }
        const float mn = fmaxf(m, mt);
        const float mu = mn == -INFINITY ? 0.f : mn;   // a row with nothing yet: exp2(-inf) = 0
        const float alpha = exp2f(m - mu);
        m = mn;
        float ls = 0.f;
        #pragma unroll
        for (int jj = 0; jj < C::BC; jj++) {
            s[jj] = exp2f(s[jj] - mu);
            ls += s[jj];
        }
        l = l * alpha + ls;
        #pragma unroll
        for (int x = 0; x < C::NC; x++) o[x] *= alpha;
        #pragma unroll
        for (int jj = 0; jj < C::BC; jj++) fa32_axpy<DP>(o, s[jj], Vs + jj * DP);   // o += p v
        __syncthreads();
    }
    fa32_store<DP>(a.out + b * a.L * a.Ev, o, row, a.L, a.Ev, l > 0.f ? 1.f / l : 0.f);
    if (threadIdx.x % C::TPR == 0 && row < a.L)
        a.lse[b * a.L + row] = l > 0.f ? (m + log2f(l)) * FA32_LN2 : -INFINITY;
}

// ---- backward ----------------------------------------------------------------------------------

// D (B L) = rowsum(gy * y): a warp per row.
__global__ void k_flash32_bwd_dot(fa32_args a, int64_t rows, float *dvec) {
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < rows;
         r += warps) {
        float d = 0.f;
        for (int c = threadIdx.x % 32; c < a.Ev; c += 32) d = fmaf(a.gy[r * a.Ev + c], a.y[r * a.Ev + c], d);
        #pragma unroll
        for (int w = 1; w < 32; w *= 2) d += __shfl_xor_sync(0xffffffffu, d, w);
        if (threadIdx.x % 32 == 0) dvec[r] = d;
    }
}

// gk, gv for ROWS keys per block (a key per TPR lanes), over every query tile that sees them.
template <int DP>
__global__ void __launch_bounds__(FA32_THREADS) k_flash32_bwd_kv(fa32_args a, int64_t ntiles) {
    typedef fa32_tile<DP> C;
    __shared__ __align__(16) float Qs[C::BC * DP], Gs[C::BC * DP];   // q, gy (BC queries, DP)
    __shared__ float lse_s[C::BC], d_s[C::BC];                       // lse (log2 units), D
    const int64_t b = blockIdx.x / ntiles, j0 = (blockIdx.x % ntiles) * C::ROWS;
    const int64_t key = j0 + threadIdx.x / C::TPR;   // this lane's key
    const float *q = a.q + b * a.L * a.E, *gy = a.gy + b * a.L * a.Ev;

    float kr[C::NC], vr[C::NC], dk[C::NC], dv[C::NC];   // k's and v's rows, their gradients
    fa32_row<DP>(kr, a.k + b * a.S * a.E, key, a.S, a.E);
    fa32_row<DP>(vr, a.v + b * a.S * a.Ev, key, a.S, a.Ev);
    #pragma unroll
    for (int x = 0; x < C::NC; x++) dk[x] = dv[x] = 0.f;
    const int64_t first = a.causal ? j0 / C::BC * C::BC : 0;   // causal: queries i >= j only
    for (int64_t i0 = first; i0 < a.L; i0 += C::BC) {
        fa32_load<DP>(Qs, q, i0, a.L, a.E, C::BC, a.vec);
        fa32_load<DP>(Gs, gy, i0, a.L, a.Ev, C::BC, a.vec);
        for (int r = threadIdx.x; r < C::BC; r += blockDim.x) {
            const bool in = i0 + r < a.L;
            lse_s[r] = in ? a.lse[b * a.L + i0 + r] * FA32_LOG2E : 0.f;
            d_s[r] = in ? a.dvec[b * a.L + i0 + r] : 0.f;
        }
        __syncthreads();
        for (int ii = 0; ii < C::BC; ii++) {
            const int64_t qi = i0 + ii;
            const float sc = fa32_dot<DP>(kr, Qs + ii * DP);   // k q_i
            const float dp = fa32_dot<DP>(vr, Gs + ii * DP);   // v gy_i
            const bool off = qi >= a.L || key >= a.S || (a.causal && key > qi);
            const float p = off ? 0.f : exp2f(sc * a.scale_log2 - lse_s[ii]);
            const float ds = p * (dp - d_s[ii]);
            fa32_axpy<DP>(dv, p, Gs + ii * DP);    // dv += p gy_i
            fa32_axpy<DP>(dk, ds, Qs + ii * DP);   // dk += ds q_i
        }
        __syncthreads();
    }
    fa32_store<DP>(a.gk + b * a.S * a.E, dk, key, a.S, a.E, a.scale);
    fa32_store<DP>(a.gv + b * a.S * a.Ev, dv, key, a.S, a.Ev, 1.f);
}

// gq for ROWS queries per block (a query per TPR lanes), over the key tiles they see.
template <int DP>
__global__ void __launch_bounds__(FA32_THREADS) k_flash32_bwd_q(fa32_args a, int64_t ntiles) {
    typedef fa32_tile<DP> C;
    __shared__ __align__(16) float Ks[C::BC * DP], Vs[C::BC * DP];   // (BC keys, DP) each
    const int64_t b = blockIdx.x / ntiles, i0 = (blockIdx.x % ntiles) * C::ROWS;
    const int64_t row = i0 + threadIdx.x / C::TPR;   // this lane's query
    const float *k = a.k + b * a.S * a.E, *v = a.v + b * a.S * a.Ev;

    float qr[C::NC], gr[C::NC], dq[C::NC];   // q's and gy's rows, gq's
    fa32_row<DP>(qr, a.q + b * a.L * a.E, row, a.L, a.E);
    fa32_row<DP>(gr, a.gy + b * a.L * a.Ev, row, a.L, a.Ev);
    #pragma unroll
    for (int x = 0; x < C::NC; x++) dq[x] = 0.f;
    const bool live = row < a.L;
    const float lse2 = live ? a.lse[b * a.L + row] * FA32_LOG2E : 0.f;
    const float dd = live ? a.dvec[b * a.L + row] : 0.f;
    const int64_t kend = a.causal && i0 + C::ROWS < a.S ? i0 + C::ROWS : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += C::BC) {
        fa32_load<DP>(Ks, k, j0, a.S, a.E, C::BC, a.vec);
        fa32_load<DP>(Vs, v, j0, a.S, a.Ev, C::BC, a.vec);
        __syncthreads();
        for (int jj = 0; jj < C::BC; jj++) {
            const int64_t col = j0 + jj;
            const float sc = fa32_dot<DP>(qr, Ks + jj * DP);   // q k_j
            const float dp = fa32_dot<DP>(gr, Vs + jj * DP);   // gy v_j
            const bool off = !live || col >= a.S || (a.causal && col > row);
            const float p = off ? 0.f : exp2f(sc * a.scale_log2 - lse2);
            fa32_axpy<DP>(dq, p * (dp - dd), Ks + jj * DP);   // dq += ds k_j
        }
        __syncthreads();
    }
    fa32_store<DP>(a.gq + b * a.L * a.E, dq, row, a.L, a.E, a.scale);
}

// ---- launchers ----------------------------------------------------------------------------------

static fa32_args args_of(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                         const tdm_sdpa_params *p) {
    fa32_args a;
    memset(&a, 0, sizeof a);
    a.q = (const float *)tdm_data_c(q);
    a.k = (const float *)tdm_data_c(k);
    a.v = (const float *)tdm_data_c(v);
    a.L = q->shape[1], a.S = k->shape[1];
    a.E = (int)q->shape[2], a.Ev = (int)v->shape[2];
    a.scale = (float)p->scale;
    a.scale_log2 = (float)(p->scale * 1.4426950408889634);
    a.causal = p->is_causal;
    a.vec = a.E % 4 == 0 && a.Ev % 4 == 0 && aligned16(a.q) && aligned16(a.k) && aligned16(a.v);
    return a;
}

enum { FA32_FWD, FA32_BWD_KV, FA32_BWD_Q };

template <int DP>
static void launch_dp(int which, const fa32_args &a, unsigned blocks, int64_t nt, cudaStream_t s) {
    if (which == FA32_FWD) TDM_LAUNCH(blocks, FA32_THREADS, 0, s, k_flash32_fwd<DP>)(a, nt);
    else if (which == FA32_BWD_KV) TDM_LAUNCH(blocks, FA32_THREADS, 0, s, k_flash32_bwd_kv<DP>)(a, nt);
    else TDM_LAUNCH(blocks, FA32_THREADS, 0, s, k_flash32_bwd_q<DP>)(a, nt);
}

static tdm_status launch(int which, const fa32_args &a, int64_t B) {
    const int e = a.E > a.Ev ? a.E : a.Ev;
    const int dp = e <= 32 ? 32 : e <= 64 ? 64 : e <= 128 ? 128 : 256;   // the padded head size
    const int64_t rows = which == FA32_BWD_KV ? a.S : a.L;
    const int per = FA32_THREADS / (dp <= 128 ? 4 : 8);   // fa32_tile<dp>::ROWS
    const int64_t nt = (rows + per - 1) / per;
    if (B * nt > 0x7fffffff)
        return tdm_error_set(TDM_ERR_SHAPE, "scaled_dot_product_attention (fused, f32): %lld "
                             "batches of %lld rows need more blocks than a grid has",
                             (long long)B, (long long)rows);
    const unsigned blocks = (unsigned)(B * nt);
    const cudaStream_t s = cuda_stream_current();
    switch (dp) {
        case 32: launch_dp<32>(which, a, blocks, nt, s); break;
        case 64: launch_dp<64>(which, a, blocks, nt, s); break;
        case 128: launch_dp<128>(which, a, blocks, nt, s); break;
        default: launch_dp<256>(which, a, blocks, nt, s); break;
    }
    return CUDA_LAUNCH_CHECK();
}

// The callers (k_flash_attention.cu's cuda_sdpa_fused*) checked the device, dtype and head sizes.
tdm_status cuda_sdpa_fused_f32(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                               const tdm_sdpa_params *p, tdm_tensor *y, tdm_tensor *lse) {
    fa32_args a = args_of(q, k, v, p);
    a.out = (float *)tdm_data(y);
    a.lse = (float *)tdm_data(lse);
    return launch(FA32_FWD, a, q->shape[0]);
}

tdm_status cuda_sdpa_fused_backward_f32(const tdm_tensor *gy, const tdm_tensor *q,
                                        const tdm_tensor *k, const tdm_tensor *v,
                                        const tdm_tensor *y, const tdm_tensor *lse,
                                        const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                                        tdm_tensor *gv) {
    const int64_t B = q->shape[0];
    fa32_args a = args_of(q, k, v, p);
    a.gy = (const float *)tdm_data_c(gy);
    a.y = (const float *)tdm_data_c(y);
    a.lse = (float *)tdm_data_c(lse);
    a.gq = (float *)tdm_data(gq);
    a.gk = (float *)tdm_data(gk);
    a.gv = (float *)tdm_data(gv);
    a.vec = a.vec && aligned16(a.gy);
    tdm_tensor *dvec = cuda_scratch(q, B * a.L, TDM_DTYPE_F32);
    if (!dvec) return tdm_last_status();
    a.dvec = (const float *)tdm_data_c(dvec);
    const int64_t rows = B * a.L;
    TDM_LAUNCH(cuda_grid_blocks(rows * 32, 256), 256, 0, cuda_stream_current(), k_flash32_bwd_dot)(
        a, rows, (float *)tdm_data(dvec));
    tdm_status s = CUDA_LAUNCH_CHECK();
    if (s == TDM_OK) s = launch(FA32_BWD_KV, a, B);
    if (s == TDM_OK) s = launch(FA32_BWD_Q, a, B);
    tdm_tensor_free(dvec);
    return s;
}
