/* k_common.cuh — what the kernels share: element types and their accumulation type (f32 for
 * f16/bf16/f32, f64 for f64: docs/CONFORMANCE.md's "f32 or better"), loads and rounding stores,
 * the dtype dispatch, runtime-dtype access for small side tensors (norm parameters and
 * statistics, which may be f32 beside an f16 input), 16-byte vectors, and warp/block sums. */
#ifndef TANDEM_K_COMMON_CUH
#define TANDEM_K_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/cuda_kernels.h"
#include "kernels/int_divider.h"

typedef __nv_bfloat16 bf16_t;

// ---- accumulation type ------------------------------------------------------------------

template <typename T> struct tdm_acc_of { typedef float type; };
template <> struct tdm_acc_of<double> { typedef double type; };
template <typename T> using acc_t = typename tdm_acc_of<T>::type;

// Element -> its accumulation type (exact).
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ float ld(__half v) { return __half2float(v); }
__device__ __forceinline__ float ld(bf16_t v) { return __bfloat162float(v); }
__device__ __forceinline__ double ld(double v) { return v; }

// Accumulator -> element, rounding to nearest even once (from f32 or from f64).
template <typename T> __device__ __forceinline__ T st(float v);
template <typename T> __device__ __forceinline__ T st(double v);
template <> __device__ __forceinline__ float st<float>(float v) { return v; }
template <> __device__ __forceinline__ float st<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ __half st<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __half st<__half>(double v) { return __double2half(v); }
template <> __device__ __forceinline__ bf16_t st<bf16_t>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ bf16_t st<bf16_t>(double v) { return __double2bfloat16(v); }
template <> __device__ __forceinline__ double st<double>(float v) { return (double)v; }
template <> __device__ __forceinline__ double st<double>(double v) { return v; }

// ---- math in the accumulation type (the accurate versions: no fast-math) ------------------

__device__ __forceinline__ float k_exp(float x) { return expf(x); }
__device__ __forceinline__ double k_exp(double x) { return exp(x); }
__device__ __forceinline__ float k_log(float x) { return logf(x); }
__device__ __forceinline__ double k_log(double x) { return log(x); }
__device__ __forceinline__ float k_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double k_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float k_erf(float x) { return erff(x); }
__device__ __forceinline__ double k_erf(double x) { return erf(x); }
__device__ __forceinline__ float k_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double k_sqrt(double x) { return sqrt(x); }
template <typename A> __device__ __forceinline__ A k_inf() { return (A)INFINITY; }
template <typename A> __device__ __forceinline__ A k_nan() { return (A)NAN; }

// ---- dtype dispatch: runs the body with T bound to the element type of `dt` ---------------

#define TDM_CASE_TYPE(DT, TYPE, T, ...) \
    case DT: {                          \
        typedef TYPE T;                 \
        __VA_ARGS__;                    \
    } break;

// Floating dtypes; anything else records an error naming `op` and returns it.
#define TDM_DISPATCH_FLOAT(dt, op, T, ...)                                                   \
    switch (dt) {                                                                            \
        TDM_CASE_TYPE(TDM_DTYPE_F32, float, T, __VA_ARGS__)                                  \
        TDM_CASE_TYPE(TDM_DTYPE_F16, __half, T, __VA_ARGS__)                                 \
        TDM_CASE_TYPE(TDM_DTYPE_BF16, bf16_t, T, __VA_ARGS__)                                \
        TDM_CASE_TYPE(TDM_DTYPE_F64, double, T, __VA_ARGS__)                                 \
    default:                                                                                 \
        return tdm_error_set(TDM_ERR_DTYPE, "%s: dtype %s not supported by the cuda backend", \
                             op, tdm_dtype_name(dt));                                        \
    }

// ---- index checks: a bad value into the device's error record (cuda_kernels.h) ----------

// The first bad value any kernel meets wins; the host reads the record after its next wait.
// `value` is the bad index or target, `at` its position in the index/target tensor. The host
// may read the record while this runs (a wait on another stream of the device), so the writer
// claims it with a word the host does not read, writes the fields, makes them visible to the
// host (__threadfence_system: stores to mapped memory may otherwise reach it in any order) and
// publishes last: the host never sees a raised record with fields missing.
__device__ __forceinline__ void cuda_raise(const cuda_err_ref &e, long long value, long long at) {
    if (atomicCAS(&e.rec[CUDA_ERR_REC_CLAIMED], 0ull, 1ull) == 0ull) {
        e.rec[CUDA_ERR_REC_OP] = (unsigned long long)e.op;
        e.rec[CUDA_ERR_REC_VALUE] = (unsigned long long)value;
        e.rec[CUDA_ERR_REC_BOUND] = (unsigned long long)e.bound;
        e.rec[CUDA_ERR_REC_AT] = (unsigned long long)at;
        __threadfence_system();
        *(volatile unsigned long long *)&e.rec[CUDA_ERR_REC_RAISED] = 1ull;
    }
}

// ---- side tensors of a runtime dtype (norm weights, running and saved statistics) --------

typedef struct {
    const void *p;   // NULL: absent
    int dt;          // tdm_dtype
} any_cptr;
typedef struct {
    void *p;   // NULL: absent
    int dt;
} any_ptr;

static inline any_cptr any_c(const tdm_tensor *t) {
    any_cptr a = {t ? tdm_data_c(t) : NULL, t ? (int)t->dtype : 0};
    return a;
}
static inline any_ptr any_m(tdm_tensor *t) {
    any_ptr a = {t ? tdm_data(t) : NULL, t ? (int)t->dtype : 0};
    return a;
}

// Element i as A (f32 or f64); `dflt` when the tensor is absent.
template <typename A> __device__ __forceinline__ A any_ld(any_cptr t, int64_t i, A dflt) {
    if (!t.p) return dflt;
    switch (t.dt) {
    case TDM_DTYPE_F32: return (A)((const float *)t.p)[i];
    case TDM_DTYPE_F16: return (A)__half2float(((const __half *)t.p)[i]);
    case TDM_DTYPE_BF16: return (A)__bfloat162float(((const bf16_t *)t.p)[i]);
    case TDM_DTYPE_F64: return (A)((const double *)t.p)[i];
    default: return dflt;
    }
}
template <typename A> __device__ __forceinline__ void any_st(any_ptr t, int64_t i, A v) {
    if (!t.p) return;
    switch (t.dt) {
    case TDM_DTYPE_F32: ((float *)t.p)[i] = st<float>(v); break;
    case TDM_DTYPE_F16: ((__half *)t.p)[i] = st<__half>(v); break;
    case TDM_DTYPE_BF16: ((bf16_t *)t.p)[i] = st<bf16_t>(v); break;
    case TDM_DTYPE_F64: ((double *)t.p)[i] = st<double>(v); break;
    default: break;
    }
}
__host__ __device__ static inline any_cptr any_cm(any_ptr a) {
    any_cptr c = {a.p, a.dt};
    return c;
}

// Integer indices (i32 or i64).
__device__ __forceinline__ int64_t idx_ld(const void *p, bool i64, int64_t i) {
    return i64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

// ---- 16-byte vectors ------------------------------------------------------------------------

template <typename T> struct vec_width { static constexpr int n = 16 / (int)sizeof(T); };
template <typename T> struct alignas(16) vec16 { T v[vec_width<T>::n]; };

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// ---- sums across a warp and a block (warp shuffles, then one value per warp in shared) -----

template <typename A> __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename A> __device__ __forceinline__ A k_max(A a, A b) {
    return (a > b || a != a) ? a : b;   // NaN wins, as the reference's `x > m || isnan(x)`
}

template <typename A> __device__ __forceinline__ A warp_max(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = k_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Every thread of the block gets the sum (blockDim.x a multiple of 32, at most 1024). `sh` is
// 32 A's of shared memory; the call synchronizes, so consecutive calls may share `sh`.
template <typename A> __device__ A block_sum(A v, A *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();   // sh free from a previous call
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (A)0;
    return warp_sum(v);
}

template <typename A> __device__ A block_max(A v, A *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -k_inf<A>();
    return warp_max(v);
}

// A group working on one row: a warp (WARP: 32 lanes, several rows per block) or a whole block.
template <bool WARP> struct grp {
    static __device__ __forceinline__ int rank() { return WARP ? (int)(threadIdx.x & 31) : (int)threadIdx.x; }
    static __device__ __forceinline__ int size() { return WARP ? 32 : (int)blockDim.x; }
    static __device__ __forceinline__ int64_t first() {
        return WARP ? ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5 : (int64_t)blockIdx.x;
    }
    static __device__ __forceinline__ int64_t step() {
        return WARP ? ((int64_t)gridDim.x * blockDim.x) >> 5 : (int64_t)gridDim.x;
    }
    template <typename A> static __device__ __forceinline__ A sum(A v, A *sh) {
        return WARP ? warp_sum(v) : block_sum(v, sh);
    }
    template <typename A> static __device__ __forceinline__ A max(A v, A *sh) {
        return WARP ? warp_max(v) : block_max(v, sh);
    }
};

// Blocks for `groups` rows of work, a warp or a block (of `threads`) per row.
static inline unsigned group_blocks(int64_t groups, bool warp, int threads) {
    return warp ? cuda_grid_blocks(groups * 32, threads)
                : (unsigned)(groups < 2147483647LL ? groups : 2147483647LL);
}

// Grid-stride loop indices.
#define GRID_STRIDE(i, n)                                                        \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);   \
         i += (int64_t)gridDim.x * blockDim.x)

// ---- index arithmetic in a launch's index type I (kernels/int_divider.h) ------------------
// I = uint32_t when every index of the launch fits (the host decides: tdm_reduce_plan's
// index32): division by multiplication; I = int64_t otherwise: the 64-bit division. Divisors
// fixed at launch travel as idx_div, which holds both forms.

typedef struct {
    int64_t d;
    tdm_divider fast;   // d's divider when d <= TDM_INDEX32_MAX (the 32-bit path's only case)
} idx_div;

static inline idx_div idx_div_make(int64_t d) {
    idx_div v = {d, tdm_divider_make(d)};
    return v;
}

__device__ __forceinline__ int64_t idx_quot(int64_t n, const idx_div &v) { return n / v.d; }
__device__ __forceinline__ uint32_t idx_quot(uint32_t n, const idx_div &v) {
    return tdm_divider_div(v.fast, n);
}

// Offset of flat index idx over n row-major dims (sizes `size`, dividers `div`, strides).
__device__ __forceinline__ int64_t idx_offset(int n, const int64_t *size, const tdm_divider *,
                                              const int64_t *stride, int64_t idx) {
    return tdm_index_offset64(n, size, stride, idx);
}
__device__ __forceinline__ uint32_t idx_offset(int n, const int64_t *, const tdm_divider *div,
                                               const int64_t *stride, uint32_t idx) {
    return tdm_index_offset32(n, div, stride, idx);
}

// The grid-stride loop of GRID_STRIDE in index type I.
#define GRID_STRIDE_I(I, i, n)                                                   \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)(n);            \
         i += (I)gridDim.x * blockDim.x)

// ---- elementwise map: out[k][i] = f(i, in[.][i]) over n elements of one dtype T -------------
// f is a functor: __device__ void operator()(int64_t i, const A *in, A *out) const; A is the
// compute type, acc_t<T> unless given (the optimizer steps compute in f64: k_optim.cu).
// Aligned tensors go 16 bytes at a time with a scalar tail; an out pointer may be NULL (not
// stored); an out pointer may equal an in pointer (in place: each element is read first).

template <typename T, int NI, int NO> struct map_ptrs {
    const T *in[NI > 0 ? NI : 1];
    T *out[NO];
};

template <typename T, int NI, int NO, typename F, typename A>
__global__ void k_map(int64_t n, map_ptrs<T, NI, NO> p, F f, bool vec) {
    constexpr int V = vec_width<T>::n;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t nv = vec ? n / V : 0;
    for (int64_t v = tid; v < nv; v += stride) {
        vec16<T> x[NI > 0 ? NI : 1], y[NO];
#pragma unroll
        for (int k = 0; k < NI; k++) x[k] = reinterpret_cast<const vec16<T> *>(p.in[k])[v];
#pragma unroll
        for (int j = 0; j < V; j++) {
            A a[NI > 0 ? NI : 1], o[NO];
#pragma unroll
            for (int k = 0; k < NI; k++) a[k] = (A)ld(x[k].v[j]);
            f(v * V + j, a, o);
#pragma unroll
            for (int k = 0; k < NO; k++) y[k].v[j] = st<T>(o[k]);
        }
#pragma unroll
        for (int k = 0; k < NO; k++)
            if (p.out[k]) reinterpret_cast<vec16<T> *>(p.out[k])[v] = y[k];
    }
    for (int64_t i = nv * V + tid; i < n; i += stride) {
        A a[NI > 0 ? NI : 1], o[NO];
#pragma unroll
        for (int k = 0; k < NI; k++) a[k] = (A)ld(p.in[k][i]);
        f(i, a, o);
#pragma unroll
        for (int k = 0; k < NO; k++)
            if (p.out[k]) p.out[k][i] = st<T>(o[k]);
    }
}

template <typename T, int NI, int NO, typename F, typename A = acc_t<T>>
tdm_status launch_map(int64_t n, map_ptrs<T, NI, NO> p, F f) {
    if (n <= 0) return TDM_OK;
    bool vec = true;
    for (int k = 0; k < NI; k++) vec = vec && aligned16(p.in[k]);
    for (int k = 0; k < NO; k++) vec = vec && (!p.out[k] || aligned16(p.out[k]));
    const int threads = 256;
    const int64_t items = vec ? n / vec_width<T>::n + n % vec_width<T>::n : n;
    TDM_LAUNCH(cuda_grid_blocks(items, threads), threads, 0, cuda_stream_current(),
               k_map<T, NI, NO, F, A>)
    (n, p, f, vec);
    return CUDA_LAUNCH_CHECK();
}

// Typed data pointers of a tensor (NULL for NULL).
template <typename T> static inline const T *cptr(const tdm_tensor *t) {
    return t ? (const T *)tdm_data_c(t) : (const T *)0;
}
template <typename T> static inline T *mptr(tdm_tensor *t) { return t ? (T *)tdm_data(t) : (T *)0; }

#endif
