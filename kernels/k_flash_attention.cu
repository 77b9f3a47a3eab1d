/* k_flash_attention.cu — the fused attention (core/backend.h's sdpa_fused slots): FlashAttention-2
 * (Dao, 2023) on the tensor cores, f16/bf16 operands, f32 accumulation, no mask but is_causal, no
 * dropout, head sizes up to 256 (q, k, v contiguous (B,L,E), (B,S,E), (B,S,Ev)). f32 operands go
 * to k_flash_attention_f32.cu (the same algorithm in f32 FMA, no tensor cores).
 *
 * Nothing of size L x S reaches device memory. A block of 4 warps owns 64 query rows, each warp
 * 16 of them; tiles of keys and values are streamed through shared memory, and per tile a warp
 *
 *   S  = q k^T            (16, BC)  mma.sync m16n8k16, q's fragments kept in registers
 *   m' = max(m, rowmax S), p = exp(S - m'), l = l e^(m - m') + rowsum p, o = o e^(m - m') + p v
 *
 * (the scores in log2 units, exp2), so o / l and lse = m + log l are the row's output and
 * log-sum-exp at the end. p is rounded to the operands' dtype to be the A operand of the second
 * product: its accumulator fragment is already the A fragment's layout (k_mma.cuh).
 *
 * Backward (all three gradients): D = rowsum(gy * y) first (k_flash_bwd_dot); then one kernel per
 * key tile for gk and gv (each warp 16 keys, looping over the query tiles: p^T from lse,
 * dv += p^T gy, ds^T = p^T (gy v^T - D)^T, dk += ds^T q), and gq either
 *   - deterministic mode (and head sizes over 64): one kernel per query tile (dq += ds k),
 *     recomputing the scores, no atomics: bit-reproducible; or
 *   - heuristic mode, head sizes up to 64: in the key/value kernel itself (ds^T through shared
 *     memory, read back transposed: dq += ds k), added into an f32 buffer with atomics in no fixed
 *     order, then rounded to the dtype (k_flash_dq_cast): FlashAttention-2's own backward.
 * ds, like p, is rounded to the operands' dtype for its products. docs/CONFORMANCE.md's bound for
 * the fused path counts those roundings (the f32 sum over key tiles, in any order, is in it).
 *
 * Tiles: DP (E and Ev padded with zeros to 32, 64, 128 or 256) by BC = 64 keys (32 for DP = 256:
 * static shared memory stays under 48 KiB); shared rows are DP + 8 elements (16-byte aligned,
 * staggered across banks). Rows past L or S are zeros in shared memory and masked out.
 *
 * Registers (ptxas -v, sm_90, 2026-11-27): head 64 (GPT-2) forward 105, gk/gv 212, gq 137, the
 * heuristic mode's gk/gv/gq 248, no spills; head 128 forward 172, gk/gv 255 with 172 bytes spilled, gq 243; head 256 spills (2 KiB
 * in gk/gv): correct, not fast. Not yet: cp.async double buffering of the k/v tiles, the atomic
 * gq for head sizes over 64 (shared memory), q/k/v read through their strides (the model's
 * transposes are copies today). */
#include <math.h>
#include <string.h>

#include "kernels/cuda_kernels.h"
#include "kernels/k_common.cuh"
#include "kernels/k_mma.cuh"
#include "tandem/backends.h"

static const int FA_THREADS = 128;   // 4 warps
static const int FA_BR = 64;         // query rows per block (forward, gq); keys per block (gk, gv)
static const float FA_LOG2E = 1.4426950408889634f;
static const float FA_LN2 = 0.6931471805599453f;

template <int DP> struct fa_tile {
    static const int BC = DP <= 128 ? 64 : 32;   // keys per tile (forward, gq); queries (gk, gv)
    static const int LD = DP + 8;                // shared row stride, elements
    static const int SMEM = 2 * BC * LD;         // two tiles (>= FA_BR rows for staging)
};

typedef struct {
    const uint16_t *q, *k, *v, *gy, *y;   // bits of T
    uint16_t *out, *gq, *gk, *gv;         // y (forward); the gradients
    float *lse;                           // (B, L): natural log-sum-exp of the scaled scores
    const float *dvec;                    // (B, L): rowsum(gy * y)
    float *dq32;                          // (B, L, E) f32, zeroed: gq's atomic accumulator
    int64_t L, S;
    int E, Ev;
    float scale_log2;                     // scale * log2(e)
    float scale;
    bool causal;
    bool vec;                             // 16-byte loads: every base aligned, E and Ev % 8 == 0
} fa_args;

template <typename T> __device__ __forceinline__ float fa_val(uint16_t b);
template <> __device__ __forceinline__ float fa_val<__half>(uint16_t b) {
    return __half2float(__ushort_as_half(b));
}
template <> __device__ __forceinline__ float fa_val<__nv_bfloat16>(uint16_t b) {
    return __bfloat162float(__ushort_as_bfloat16(b));
}
template <typename T> __device__ __forceinline__ uint16_t fa_bits(float x);
template <> __device__ __forceinline__ uint16_t fa_bits<__half>(float x) {
    return __half_as_ushort(__float2half_rn(x));
}
template <> __device__ __forceinline__ uint16_t fa_bits<__nv_bfloat16>(float x) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Rows row0.. of a (nrows, cols) row-major matrix into `rows` shared rows of DP elements (stride
// LD), zeros past nrows and past cols. By the whole block.
template <int DP>
__device__ __forceinline__ void fa_load(uint16_t *sm, const uint16_t *g, int64_t row0,
                                        int64_t nrows, int cols, int rows, bool vec) {
    const int chunks = DP / 8;
    for (int c = threadIdx.x; c < rows * chunks; c += blockDim.x) {
        const int r = c / chunks, e0 = (c % chunks) * 8;
        uint16_t *dst = sm + r * fa_tile<DP>::LD + e0;
        const int64_t gr = row0 + r;
        if (vec && gr < nrows && e0 + 8 <= cols) {
            *(uint4 *)dst = *(const uint4 *)(g + gr * cols + e0);
            continue;
        }
        #pragma unroll
        for (int e = 0; e < 8; e++)
            dst[e] = gr < nrows && e0 + e < cols ? g[gr * cols + e0 + e] : (uint16_t)0;
    }
}

// A fragments (16 rows x DP, row-major in shared memory from row r0) into registers, ldmatrix x4
// per 16 columns.
template <int DP>
__device__ __forceinline__ void fa_frag_a(uint32_t f[DP / 16][4], const uint16_t *sm, int r0) {
    const int lane = threadIdx.x % 32;
    #pragma unroll
    for (int ks = 0; ks < DP / 16; ks++)
        ldmatrix_x4(f[ks], sm + (r0 + lane % 8 + 8 * ((lane / 8) % 2)) * fa_tile<DP>::LD +
                               ks * 16 + 8 * (lane / 16));
}

// acc (16, N) += A (16, DP; fragments) B^T, B (N, DP) row-major in shared memory: N / 8 tiles
// of 8 columns, B's rows read as mma's column-major operand (ldmatrix x2, no transpose).
template <typename T, int DP, int N>
__device__ __forceinline__ void fa_mma_abt(float acc[N / 8][4], const uint32_t a[DP / 16][4],
                                           const uint16_t *sm) {
    const int lane = threadIdx.x % 32;
    #pragma unroll
    for (int nt = 0; nt < N / 8; nt++)
        #pragma unroll
        for (int ks = 0; ks < DP / 16; ks++) {
            uint32_t b[2];
            ldmatrix_x2(b, sm + (nt * 8 + lane % 8) * fa_tile<DP>::LD + ks * 16 +
                               8 * ((lane / 8) % 2));
            mma_16816<T>(acc[nt], a[ks], b, acc[nt]);
        }
}

// acc (16, DP) += P (16, K; f32 accumulator fragments, rounded to T here) B, B (K, DP) row-major
// in shared memory (ldmatrix x2 .trans): the accumulator of one product is the A operand of the
// next, fragment for fragment.
template <typename T, int DP, int K>
__device__ __forceinline__ void fa_mma_pb(float acc[DP / 8][4], const float p[K / 8][4],
                                          const uint16_t *sm) {
    const int lane = threadIdx.x % 32;
    #pragma unroll
    for (int kk = 0; kk < K / 16; kk++) {
        const uint32_t a[4] = {pack2<T>(p[2 * kk][0], p[2 * kk][1]),
                               pack2<T>(p[2 * kk][2], p[2 * kk][3]),
                               pack2<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                               pack2<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
        #pragma unroll
        for (int dt = 0; dt < DP / 8; dt++) {
            uint32_t b[2];
            ldmatrix_x2_trans(b, sm + (kk * 16 + lane % 16) * fa_tile<DP>::LD + dt * 8);
            mma_16816<T>(acc[dt], a, b, acc[dt]);
        }
    }
}

// out (nrows, cols) rows row[0], row[1] (this lane's two fragment rows; those >= nrows skipped),
// columns < cols: a (16, DP) f32 accumulator fragment times mul[h], rounded to T.
template <typename T, int DP>
__device__ __forceinline__ void fa_store(uint16_t *out, const float acc[DP / 8][4],
                                         const int64_t row[2], int64_t nrows, int cols,
                                         const float mul[2]) {
    const int t = threadIdx.x % 4;
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        if (row[h] >= nrows) continue;
        #pragma unroll
        for (int dt = 0; dt < DP / 8; dt++)
            #pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = dt * 8 + 2 * t + e;
                if (col < cols) out[row[h] * cols + col] = fa_bits<T>(acc[dt][2 * h + e] * mul[h]);
            }
    }
}

// max / sum over the 4 lanes of a fragment row (lanes 4g .. 4g+3)
__device__ __forceinline__ float fa_row_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float fa_row_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ---- forward: y, lse ------------------------------------------------------------------------------

template <typename T, int DP>
__global__ void __launch_bounds__(FA_THREADS) k_flash_fwd(fa_args a, int64_t ntiles) {
    typedef fa_tile<DP> C;
    __shared__ __align__(16) uint16_t sm[C::SMEM];
    uint16_t *Ks = sm, *Vs = sm + C::BC * C::LD;
    const int64_t b = blockIdx.x / ntiles, i0 = (blockIdx.x % ntiles) * FA_BR;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const uint16_t *q = a.q + b * a.L * a.E, *k = a.k + b * a.S * a.E, *v = a.v + b * a.S * a.Ev;

    fa_load<DP>(sm, q, i0, a.L, a.E, FA_BR, a.vec);   // (64, DP), this warp's 16 rows to registers
    __syncthreads();
    uint32_t qf[DP / 16][4];
    fa_frag_a<DP>(qf, sm, warp * 16);
    __syncthreads();

    float o[DP / 8][4];
    #pragma unroll
    for (int dt = 0; dt < DP / 8; dt++) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
    const int64_t kend = a.causal && i0 + FA_BR < a.S ? i0 + FA_BR : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += C::BC) {
        fa_load<DP>(Ks, k, j0, a.S, a.E, C::BC, a.vec);
        fa_load<DP>(Vs, v, j0, a.S, a.Ev, C::BC, a.vec);
        __syncthreads();
        float s[C::BC / 8][4];
        #pragma unroll
        for (int nt = 0; nt < C::BC / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
        fa_mma_abt<T, DP, C::BC>(s, qf, Ks);   // S = q k^T  (16, BC)
        float mt[2] = {-INFINITY, -INFINITY};
        #pragma unroll
        for (int nt = 0; nt < C::BC / 8; nt++)
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t col = j0 + nt * 8 + 2 * t + (i & 1);
                float x = s[nt][i] * a.scale_log2;
                if (col >= a.S || (a.causal && col > row[i / 2])) x = -INFINITY;
                s[nt][i] = x;
                mt[i / 2] = fmaxf(mt[i / 2], x);
            }
        float alpha[2], mu[2];
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            const float mn = fmaxf(m[h], fa_row_max(mt[h]));
            mu[h] = mn == -INFINITY ? 0.f : mn;   // a row with nothing yet: exp2(-inf) = 0
            alpha[h] = exp2f(m[h] - mu[h]);
            m[h] = mn;
        }
        float ls[2] = {0.f, 0.f};
        #pragma unroll
        for (int nt = 0; nt < C::BC / 8; nt++)
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const float p = exp2f(s[nt][i] - mu[i / 2]);
                s[nt][i] = p;
                ls[i / 2] += p;
            }
        #pragma unroll
        for (int h = 0; h < 2; h++) l[h] = l[h] * alpha[h] + fa_row_sum(ls[h]);
        #pragma unroll
        for (int dt = 0; dt < DP / 8; dt++)
            #pragma unroll
            for (int i = 0; i < 4; i++) o[dt][i] *= alpha[i / 2];
        fa_mma_pb<T, DP, C::BC>(o, s, Vs);   // o += p v  (16, DP)
        __syncthreads();
    }
    const float inv[2] = {l[0] > 0.f ? 1.f / l[0] : 0.f, l[1] > 0.f ? 1.f / l[1] : 0.f};
    fa_store<T, DP>(a.out + b * a.L * a.Ev, o, row, a.L, a.Ev, inv);
    #pragma unroll
    for (int h = 0; h < 2; h++)
        if (t == 0 && row[h] < a.L)
            a.lse[b * a.L + row[h]] =
                l[h] > 0.f ? (m[h] + log2f(l[h])) * FA_LN2 : -INFINITY;
}

// ---- backward ----------------------------------------------------------------------------------

// D (B L) = rowsum(gy * y): a warp per row.
template <typename T> __global__ void k_flash_bwd_dot(fa_args a, int64_t rows, float *dvec) {
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < rows;
         r += warps) {
        float d = 0.f;
        for (int c = threadIdx.x % 32; c < a.Ev; c += 32)
            d += fa_val<T>(a.gy[r * a.Ev + c]) * fa_val<T>(a.y[r * a.Ev + c]);
        d = fa_row_sum(d);
        d += __shfl_xor_sync(0xffffffffu, d, 4);
        d += __shfl_xor_sync(0xffffffffu, d, 8);
        d += __shfl_xor_sync(0xffffffffu, d, 16);
        if (threadIdx.x % 32 == 0) dvec[r] = d;
    }
}

// gk, gv for 64 keys per block (16 per warp), over every query tile that sees them. DQ (the
// heuristic mode, head sizes up to 64): also gq's share of these keys, dq += ds k per query tile
// (ds^T through shared memory, read back transposed as an A operand), added into a.dq32 with f32
// atomics: one kernel instead of two, the scores not recomputed for gq, in no fixed order.
template <typename T, int DP, bool DQ>
__global__ void __launch_bounds__(FA_THREADS) k_flash_bwd_kv(fa_args a, int64_t ntiles) {
    typedef fa_tile<DP> C;
    const int BQ = C::BC;   // queries per tile
    const int STL = C::BC + 8;   // DQ: ds^T's shared row (queries), 16-byte aligned
    __shared__ __align__(16) uint16_t sm[C::SMEM];
    __shared__ __align__(16) uint16_t dsm[DQ ? FA_BR * C::LD + FA_BR * STL : 8];
    __shared__ float lse_s[C::BC], d_s[C::BC];
    uint16_t *Qs = sm, *Gs = sm + BQ * C::LD;
    const int st_off = DQ ? FA_BR * C::LD : 0;   // (0 without DQ: dsm is a stub then)
    uint16_t *Kd = dsm, *St = dsm + st_off;      // DQ: this block's k; ds^T (keys, queries)
    const int64_t b = blockIdx.x / ntiles, j0 = (blockIdx.x % ntiles) * FA_BR;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const uint16_t *q = a.q + b * a.L * a.E, *k = a.k + b * a.S * a.E, *v = a.v + b * a.S * a.Ev;
    const uint16_t *gy = a.gy + b * a.L * a.Ev;

    uint32_t kf[DP / 16][4], vf[DP / 16][4];   // this warp's 16 keys of k and v
    fa_load<DP>(sm, k, j0, a.S, a.E, FA_BR, a.vec);
    if (DQ) fa_load<DP>(Kd, k, j0, a.S, a.E, FA_BR, a.vec);
    __syncthreads();
    fa_frag_a<DP>(kf, sm, warp * 16);
    __syncthreads();
    fa_load<DP>(sm, v, j0, a.S, a.Ev, FA_BR, a.vec);
    __syncthreads();
    fa_frag_a<DP>(vf, sm, warp * 16);
    __syncthreads();

    float dk[DP / 8][4], dv[DP / 8][4];
    #pragma unroll
    for (int dt = 0; dt < DP / 8; dt++)
        #pragma unroll
        for (int i = 0; i < 4; i++) dk[dt][i] = dv[dt][i] = 0.f;
    const int64_t key[2] = {j0 + warp * 16 + g, j0 + warp * 16 + g + 8};
    const int64_t first = a.causal ? j0 / BQ * BQ : 0;   // causal: queries i >= j only
    for (int64_t i0 = first; i0 < a.L; i0 += BQ) {
        fa_load<DP>(Qs, q, i0, a.L, a.E, BQ, a.vec);
        fa_load<DP>(Gs, gy, i0, a.L, a.Ev, BQ, a.vec);
        for (int r = threadIdx.x; r < BQ; r += blockDim.x) {
            const bool in = i0 + r < a.L;
            lse_s[r] = in ? a.lse[b * a.L + i0 + r] * FA_LOG2E : 0.f;
            d_s[r] = in ? a.dvec[b * a.L + i0 + r] : 0.f;
        }
        __syncthreads();
        float p[C::BC / 8][4], ds[C::BC / 8][4];
        #pragma unroll
        for (int nt = 0; nt < BQ / 8; nt++)
            #pragma unroll
            for (int i = 0; i < 4; i++) p[nt][i] = ds[nt][i] = 0.f;
        fa_mma_abt<T, DP, C::BC>(p, kf, Qs);    // S^T = k q^T   (16 keys, BQ queries)
        fa_mma_abt<T, DP, C::BC>(ds, vf, Gs);   // dP^T = v gy^T
        #pragma unroll
        for (int nt = 0; nt < BQ / 8; nt++)
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const int c = nt * 8 + 2 * t + (i & 1);
                const int64_t qi = i0 + c, kj = key[i / 2];
                const bool off = qi >= a.L || kj >= a.S || (a.causal && kj > qi);
                const float pv = off ? 0.f : exp2f(p[nt][i] * a.scale_log2 - lse_s[c]);
                p[nt][i] = pv;
                ds[nt][i] = pv * (ds[nt][i] - d_s[c]);
            }
        fa_mma_pb<T, DP, C::BC>(dv, p, Gs);    // dv += p^T gy
        fa_mma_pb<T, DP, C::BC>(dk, ds, Qs);   // dk += ds^T q
        if (DQ) {
            // ds^T rounded to T (as the dk product rounds it) into St: row the key, col the query
            #pragma unroll
            for (int nt = 0; nt < BQ / 8; nt++)
                #pragma unroll
                for (int i = 0; i < 4; i++)
                    St[(warp * 16 + g + 8 * (i / 2)) * STL + nt * 8 + 2 * t + (i & 1)] =
                        fa_bits<T>(ds[nt][i]);
            __syncthreads();
            // dq (this warp's 16 queries, DP) = ds (16 queries, 64 keys) k (64 keys, DP): A from
            // St transposed (ldmatrix .x4.trans: matrices keys k0.., k0+8.. by queries q0, q0+8)
            float dq[DP / 8][4];
            #pragma unroll
            for (int dt = 0; dt < DP / 8; dt++) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.f;
            #pragma unroll
            for (int kk = 0; kk < FA_BR / 16; kk++) {
                uint32_t af[4];
                ldmatrix_x4_trans(af, St + (kk * 16 + lane % 8 + 8 * (lane / 16)) * STL +
                                          warp * 16 + 8 * ((lane / 8) % 2));
                #pragma unroll
                for (int dt = 0; dt < DP / 8; dt++) {
                    uint32_t bf[2];
                    ldmatrix_x2_trans(bf, Kd + (kk * 16 + lane % 16) * C::LD + dt * 8);
                    mma_16816<T>(dq[dt], af, bf, dq[dt]);
                }
            }
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t qi = i0 + warp * 16 + g + 8 * h;
                if (qi >= a.L) continue;
                #pragma unroll
                for (int dt = 0; dt < DP / 8; dt++)
                    #pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int col = dt * 8 + 2 * t + e;
                        if (col < a.E)
                            atomicAdd(&a.dq32[(b * a.L + qi) * a.E + col], dq[dt][2 * h + e] * a.scale);
                    }
            }
        }
        __syncthreads();
    }
    const float scale[2] = {a.scale, a.scale}, one[2] = {1.f, 1.f};
    fa_store<T, DP>(a.gk + b * a.S * a.E, dk, key, a.S, a.E, scale);
    fa_store<T, DP>(a.gv + b * a.S * a.Ev, dv, key, a.S, a.Ev, one);
}

// gq for 64 query rows per block (16 per warp), over the key tiles they see.
template <typename T, int DP>
__global__ void __launch_bounds__(FA_THREADS) k_flash_bwd_q(fa_args a, int64_t ntiles) {
    typedef fa_tile<DP> C;
    __shared__ __align__(16) uint16_t sm[C::SMEM];
    uint16_t *Ks = sm, *Vs = sm + C::BC * C::LD;
    const int64_t b = blockIdx.x / ntiles, i0 = (blockIdx.x % ntiles) * FA_BR;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const uint16_t *q = a.q + b * a.L * a.E, *k = a.k + b * a.S * a.E, *v = a.v + b * a.S * a.Ev;
    const uint16_t *gy = a.gy + b * a.L * a.Ev;

    uint32_t qf[DP / 16][4], gf[DP / 16][4];   // this warp's 16 rows of q and gy
    fa_load<DP>(sm, q, i0, a.L, a.E, FA_BR, a.vec);
    __syncthreads();
    fa_frag_a<DP>(qf, sm, warp * 16);
    __syncthreads();
    fa_load<DP>(sm, gy, i0, a.L, a.Ev, FA_BR, a.vec);
    __syncthreads();
    fa_frag_a<DP>(gf, sm, warp * 16);
    __syncthreads();

    const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
    float lse2[2], dd[2];
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        lse2[h] = row[h] < a.L ? a.lse[b * a.L + row[h]] * FA_LOG2E : 0.f;
        dd[h] = row[h] < a.L ? a.dvec[b * a.L + row[h]] : 0.f;
    }
    float dq[DP / 8][4];
    #pragma unroll
    for (int dt = 0; dt < DP / 8; dt++) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.f;
    const int64_t kend = a.causal && i0 + FA_BR < a.S ? i0 + FA_BR : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += C::BC) {
        fa_load<DP>(Ks, k, j0, a.S, a.E, C::BC, a.vec);
        fa_load<DP>(Vs, v, j0, a.S, a.Ev, C::BC, a.vec);
        __syncthreads();
        float p[C::BC / 8][4], ds[C::BC / 8][4];
        #pragma unroll
        for (int nt = 0; nt < C::BC / 8; nt++)
            #pragma unroll
            for (int i = 0; i < 4; i++) p[nt][i] = ds[nt][i] = 0.f;
        fa_mma_abt<T, DP, C::BC>(p, qf, Ks);    // S = q k^T
        fa_mma_abt<T, DP, C::BC>(ds, gf, Vs);   // dP = gy v^T
        #pragma unroll
        for (int nt = 0; nt < C::BC / 8; nt++)
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t col = j0 + nt * 8 + 2 * t + (i & 1), r = row[i / 2];
                const bool off = r >= a.L || col >= a.S || (a.causal && col > r);
                const float pv = off ? 0.f : exp2f(p[nt][i] * a.scale_log2 - lse2[i / 2]);
                ds[nt][i] = pv * (ds[nt][i] - dd[i / 2]);
            }
        fa_mma_pb<T, DP, C::BC>(dq, ds, Ks);    // dq += ds k
        __syncthreads();
    }
    const float scale[2] = {a.scale, a.scale};
    fa_store<T, DP>(a.gq + b * a.L * a.E, dq, row, a.L, a.E, scale);
}

// gq = dq32 rounded to T (the heuristic mode's accumulator).
template <typename T> __global__ void k_flash_dq_cast(int64_t n, const float *dq32, uint16_t *gq) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        gq[i] = fa_bits<T>(dq32[i]);
}

// ---- launchers ----------------------------------------------------------------------------------


static fa_args args_of(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                       const tdm_sdpa_params *p) {
    fa_args a;
    memset(&a, 0, sizeof a);
    a.q = (const uint16_t *)tdm_data_c(q);
    a.k = (const uint16_t *)tdm_data_c(k);
    a.v = (const uint16_t *)tdm_data_c(v);
    a.L = q->shape[1], a.S = k->shape[1];
    a.E = (int)q->shape[2], a.Ev = (int)v->shape[2];
    a.scale = (float)p->scale;
    a.scale_log2 = (float)(p->scale * 1.4426950408889634);
    a.causal = p->is_causal;
    a.vec = a.E % 8 == 0 && a.Ev % 8 == 0 && aligned16(a.q) && aligned16(a.k) && aligned16(a.v);
    return a;
}

// The padded head size: E and Ev up to it.
static int padded_head(const fa_args &a) {
    const int e = a.E > a.Ev ? a.E : a.Ev;
    return e <= 32 ? 32 : e <= 64 ? 64 : e <= 128 ? 128 : 256;
}

enum { FA_FWD, FA_BWD_KV, FA_BWD_Q, FA_BWD_KVQ };

template <typename T, int DP>
static void launch_dp(int which, const fa_args &a, int64_t B, cudaStream_t s) {
    const bool keys = which == FA_BWD_KV || which == FA_BWD_KVQ;
    const int64_t nt = keys ? (a.S + FA_BR - 1) / FA_BR : (a.L + FA_BR - 1) / FA_BR;
    const unsigned blocks = (unsigned)(B * nt);
    if (which == FA_FWD) TDM_LAUNCH(blocks, FA_THREADS, 0, s, k_flash_fwd<T, DP>)(a, nt);
    else if (which == FA_BWD_KV)
        TDM_LAUNCH(blocks, FA_THREADS, 0, s, k_flash_bwd_kv<T, DP, false>)(a, nt);
    else if (which == FA_BWD_KVQ && DP <= 64)
        TDM_LAUNCH(blocks, FA_THREADS, 0, s, k_flash_bwd_kv<T, (DP <= 64 ? DP : 64), true>)(a, nt);
    else TDM_LAUNCH(blocks, FA_THREADS, 0, s, k_flash_bwd_q<T, DP>)(a, nt);
}

template <typename T> static void launch_t(int which, const fa_args &a, int64_t B) {
    const cudaStream_t s = cuda_stream_current();
    switch (padded_head(a)) {
        case 32: launch_dp<T, 32>(which, a, B, s); break;
        case 64: launch_dp<T, 64>(which, a, B, s); break;
        case 128: launch_dp<T, 128>(which, a, B, s); break;
        default: launch_dp<T, 256>(which, a, B, s); break;
    }
}

static tdm_status launch(int which, tdm_dtype dt, const fa_args &a, int64_t B) {
    const int64_t rows = which == FA_BWD_KV || which == FA_BWD_KVQ ? a.S : a.L;
    if (B * ((rows + FA_BR - 1) / FA_BR) > 0x7fffffff)
        return tdm_error_set(TDM_ERR_SHAPE, "scaled_dot_product_attention (fused): %lld batches "
                             "of %lld rows need more blocks than a grid has",
                             (long long)B, (long long)rows);
    if (dt == TDM_DTYPE_F16) launch_t<__half>(which, a, B);
    else launch_t<__nv_bfloat16>(which, a, B);
    return CUDA_LAUNCH_CHECK();
}

static tdm_status fused_check(const tdm_tensor *q, const tdm_tensor *v) {
    if ((q->dtype != TDM_DTYPE_F16 && q->dtype != TDM_DTYPE_BF16 && q->dtype != TDM_DTYPE_F32) ||
        q->shape[2] > TDM_ATTN_FUSED_MAX_HEAD || v->shape[2] > TDM_ATTN_FUSED_MAX_HEAD)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "scaled_dot_product_attention (fused): f16, "
                             "bf16 or f32 with head sizes up to %d only", TDM_ATTN_FUSED_MAX_HEAD);
    return TDM_OK;
}

tdm_status cuda_sdpa_fused(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                           const tdm_sdpa_params *p, tdm_tensor *y, tdm_tensor *lse) {
    TDM_TRY(cuda_use_device(q));
    TDM_TRY(fused_check(q, v));
    if (q->dtype == TDM_DTYPE_F32) return cuda_sdpa_fused_f32(q, k, v, p, y, lse);
    fa_args a = args_of(q, k, v, p);
    a.out = (uint16_t *)tdm_data(y);
    a.lse = (float *)tdm_data(lse);
    a.vec = a.vec && aligned16(a.out);
    return launch(FA_FWD, q->dtype, a, q->shape[0]);
}

tdm_status cuda_sdpa_fused_backward(const tdm_tensor *gy, const tdm_tensor *q,
                                    const tdm_tensor *k, const tdm_tensor *v, const tdm_tensor *y,
                                    const tdm_tensor *lse, const tdm_sdpa_params *p,
                                    tdm_tensor *gq, tdm_tensor *gk, tdm_tensor *gv) {
    TDM_TRY(cuda_use_device(q));
    TDM_TRY(fused_check(q, v));
    if (q->dtype == TDM_DTYPE_F32)
        return cuda_sdpa_fused_backward_f32(gy, q, k, v, y, lse, p, gq, gk, gv);
    const int64_t B = q->shape[0];
    fa_args a = args_of(q, k, v, p);
    a.gy = (const uint16_t *)tdm_data_c(gy);
    a.y = (const uint16_t *)tdm_data_c(y);
    a.lse = (float *)tdm_data_c(lse);
    a.gq = (uint16_t *)tdm_data(gq);
    a.gk = (uint16_t *)tdm_data(gk);
    a.gv = (uint16_t *)tdm_data(gv);
    a.vec = a.vec && aligned16(a.gy);
    tdm_tensor *dvec = cuda_scratch(q, B * a.L, TDM_DTYPE_F32);
    if (!dvec) return tdm_last_status();
    a.dvec = (const float *)tdm_data_c(dvec);
    const int64_t rows = B * a.L;
    const int threads = 256;
    const unsigned blocks = cuda_grid_blocks(rows * 32, threads);
    if (q->dtype == TDM_DTYPE_F16)
        TDM_LAUNCH(blocks, threads, 0, cuda_stream_current(), k_flash_bwd_dot<__half>)(
            a, rows, (float *)tdm_data(dvec));
    else
        TDM_LAUNCH(blocks, threads, 0, cuda_stream_current(), k_flash_bwd_dot<__nv_bfloat16>)(
            a, rows, (float *)tdm_data(dvec));
    tdm_status s = CUDA_LAUNCH_CHECK();
    // heuristic mode, head sizes up to 64: gq from the key/value kernel through f32 atomics;
    // deterministic (and larger heads): its own kernel, no atomics, bit-reproducible
    const bool atomic = tdm_attn_mode_get() == TDM_ATTN_HEURISTIC && padded_head(a) <= 64;
    tdm_tensor *dq32 = s == TDM_OK && atomic ? cuda_scratch(q, B * a.L * a.E, TDM_DTYPE_F32) : NULL;
    if (s == TDM_OK && atomic && !dq32) s = tdm_last_status();
    if (s == TDM_OK && atomic) {
        a.dq32 = (float *)tdm_data(dq32);
        s = CUDA_CHECK(cudaMemsetAsync(a.dq32, 0, (size_t)(B * a.L * a.E) * sizeof(float),
                                       cuda_stream_current()));
    }
    if (s == TDM_OK) s = launch(atomic ? FA_BWD_KVQ : FA_BWD_KV, q->dtype, a, B);
    if (s == TDM_OK && atomic) {
        const int64_t n = B * a.L * a.E;
        if (q->dtype == TDM_DTYPE_F16)
            TDM_LAUNCH(cuda_grid_blocks(n, 256), 256, 0, cuda_stream_current(),
                       k_flash_dq_cast<__half>)(n, a.dq32, a.gq);
        else
            TDM_LAUNCH(cuda_grid_blocks(n, 256), 256, 0, cuda_stream_current(),
                       k_flash_dq_cast<__nv_bfloat16>)(n, a.dq32, a.gq);
        s = CUDA_LAUNCH_CHECK();
    } else if (s == TDM_OK) {
        s = launch(FA_BWD_Q, q->dtype, a, B);
    }
    tdm_tensor_free(dq32);
    tdm_tensor_free(dvec);
    return s;
}
