/* k_elementwise.cu — elementwise kernels: cast between any two dtypes, the unary activations
 * (relu, gelu, gelu-tanh, tanh, sigmoid) and their derivatives, add/mul with PyTorch's
 * broadcasting, and expand (the backward of sum/mean). Math in the accumulation type
 * (k_common.cuh); one rounding on store. */
#include "kernels/k_common.cuh"

// ---- cast -----------------------------------------------------------------------------------
// Through double, as the reference: every dtype's value is exact in double except i64 beyond
// 2^53, which the reference rounds the same way; double -> f16/bf16 rounds once (no double
// rounding through f32); float -> int truncates toward zero (the device saturates where C's
// conversion is undefined: NaN and out of range); bool (bytes, any nonzero true) <-> 0/1, and
// x -> bool is x != 0 (NaN true), as PyTorch's .to(torch.bool).

template <typename S> __device__ __forceinline__ double to_f64(S v) { return (double)ld(v); }
template <> __device__ __forceinline__ double to_f64<int32_t>(int32_t v) { return (double)v; }
template <> __device__ __forceinline__ double to_f64<int64_t>(int64_t v) { return (double)v; }
template <> __device__ __forceinline__ double to_f64<uint8_t>(uint8_t v) { return v != 0; }
template <typename D> __device__ __forceinline__ D from_f64(double v) { return st<D>(v); }
template <> __device__ __forceinline__ int32_t from_f64<int32_t>(double v) { return (int32_t)v; }
template <> __device__ __forceinline__ int64_t from_f64<int64_t>(double v) { return (int64_t)v; }
template <> __device__ __forceinline__ uint8_t from_f64<uint8_t>(double v) { return v != 0.0; }

// src, dst: n elements
template <typename S, typename D> __global__ void k_cast(int64_t n, const S *src, D *dst) {
    GRID_STRIDE(i, n) dst[i] = from_f64<D>(to_f64<S>(src[i]));
}

#define TDM_DISPATCH_ALL(dt, op, T, ...)                                                     \
    switch (dt) {                                                                            \
        TDM_CASE_TYPE(TDM_DTYPE_F32, float, T, __VA_ARGS__)                                  \
        TDM_CASE_TYPE(TDM_DTYPE_F16, __half, T, __VA_ARGS__)                                 \
        TDM_CASE_TYPE(TDM_DTYPE_BF16, bf16_t, T, __VA_ARGS__)                                \
        TDM_CASE_TYPE(TDM_DTYPE_F64, double, T, __VA_ARGS__)                                 \
        TDM_CASE_TYPE(TDM_DTYPE_I32, int32_t, T, __VA_ARGS__)                                \
        TDM_CASE_TYPE(TDM_DTYPE_I64, int64_t, T, __VA_ARGS__)                                \
        TDM_CASE_TYPE(TDM_DTYPE_BOOL, uint8_t, T, __VA_ARGS__)                               \
    default:                                                                                 \
        return tdm_error_set(TDM_ERR_DTYPE, "%s: dtype %s not supported by the cuda backend", \
                             op, tdm_dtype_name(dt));                                        \
    }

template <typename S> static tdm_status cast_from(tdm_tensor *dst, const tdm_tensor *src) {
    const int64_t n = src->numel;
    const int threads = 256;
    TDM_DISPATCH_ALL(dst->dtype, "cast", D,
                     TDM_LAUNCH(cuda_grid_blocks(n, threads), threads, 0, cuda_stream_current(),
                                k_cast<S, D>)(n, cptr<S>(src), mptr<D>(dst)));
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_cast(tdm_tensor *dst, const tdm_tensor *src) {
    if (src->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(src));
    if (dst->dtype == src->dtype)
        return CUDA_CHECK(cudaMemcpyAsync(tdm_data(dst), tdm_data_c(src),
                                          (size_t)src->numel * tdm_dtype_size(src->dtype),
                                          cudaMemcpyDeviceToDevice, cuda_stream_current()));
    TDM_DISPATCH_ALL(src->dtype, "cast", S, return cast_from<S>(dst, src));
    return TDM_OK;
}

// t (i64) += n: BatchNorm2d's num_batches_tracked, on the device (no host round trip).
__global__ void k_counter_add(int64_t count, long long *t, long long n) {
    GRID_STRIDE(i, count) t[i] += n;
}

tdm_status cuda_counter_add(tdm_tensor *t, int64_t n) {
    if (t->numel == 0) return TDM_OK;
    if (t->dtype != TDM_DTYPE_I64)
        return tdm_error_set(TDM_ERR_DTYPE, "counter_add: dtype %s, expected i64",
                             tdm_dtype_name(t->dtype));
    TDM_TRY(cuda_use_device(t));
    TDM_LAUNCH(cuda_grid_blocks(t->numel, 256), 256, 0, cuda_stream_current(), k_counter_add)
    (t->numel, (long long *)tdm_data(t), (long long)n);
    return CUDA_LAUNCH_CHECK();
}

// ---- unary ------------------------------------------------------------------------------------

// y = f(x), in A (f32 or f64). relu(NaN) is NaN, as in PyTorch.
template <int OP, typename A> __device__ __forceinline__ A unary_f(A x) {
    const A inv_sqrt2 = (A)0.70710678118654752440, k = (A)0.79788456080286535588;
    const A c = (A)0.044715;
    switch (OP) {
    case TDM_UNARY_RELU: return x > (A)0 || x != x ? x : (A)0;
    case TDM_UNARY_GELU: return (A)0.5 * x * ((A)1 + k_erf(x * inv_sqrt2));
    case TDM_UNARY_GELU_TANH: return (A)0.5 * x * ((A)1 + k_tanh(k * (x + c * x * x * x)));
    case TDM_UNARY_TANH: return k_tanh(x);
    default: return (A)1 / ((A)1 + k_exp(-x));   // sigmoid
    }
}

// gx = gy f'(x); relu selects (a zero derivative gives 0 even where gy is inf or NaN).
template <int OP, typename A> __device__ __forceinline__ A unary_grad(A gy, A x) {
    const A inv_sqrt2 = (A)0.70710678118654752440, k = (A)0.79788456080286535588;
    const A c = (A)0.044715, inv_sqrt_2pi = (A)0.39894228040143267794;
    switch (OP) {
    case TDM_UNARY_RELU: return x <= (A)0 ? (A)0 : gy;
    case TDM_UNARY_GELU: {   // Phi(x) + x phi(x)
        A cdf = (A)0.5 * ((A)1 + k_erf(x * inv_sqrt2));
        A pdf = inv_sqrt_2pi * k_exp((A)-0.5 * x * x);
        return gy * (cdf + x * pdf);
    }
    case TDM_UNARY_GELU_TANH: {
        A t = k_tanh(k * (x + c * x * x * x));
        A du = k * ((A)1 + (A)3 * c * x * x);
        return gy * ((A)0.5 * ((A)1 + t) + (A)0.5 * x * ((A)1 - t * t) * du);
    }
    case TDM_UNARY_TANH: {
        A t = k_tanh(x);
        return gy * ((A)1 - t * t);
    }
    default: {
        A s = (A)1 / ((A)1 + k_exp(-x));
        return gy * (s * ((A)1 - s));
    }
    }
}

template <int OP> struct unary_fwd_fn {
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        out[0] = unary_f<OP>(in[0]);
    }
};
template <int OP> struct unary_bwd_fn {   // in: gy, x
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        out[0] = unary_grad<OP>(in[0], in[1]);
    }
};

#define TDM_DISPATCH_UNARY(op, OP, ...)                                 \
    switch (op) {                                                       \
    case TDM_UNARY_RELU: {                                              \
        const int OP = TDM_UNARY_RELU;                                  \
        __VA_ARGS__;                                                    \
    }                                                                   \
    case TDM_UNARY_GELU: {                                              \
        const int OP = TDM_UNARY_GELU;                                  \
        __VA_ARGS__;                                                    \
    }                                                                   \
    case TDM_UNARY_GELU_TANH: {                                         \
        const int OP = TDM_UNARY_GELU_TANH;                             \
        __VA_ARGS__;                                                    \
    }                                                                   \
    case TDM_UNARY_TANH: {                                              \
        const int OP = TDM_UNARY_TANH;                                  \
        __VA_ARGS__;                                                    \
    }                                                                   \
    case TDM_UNARY_SIGMOID: {                                           \
        const int OP = TDM_UNARY_SIGMOID;                               \
        __VA_ARGS__;                                                    \
    }                                                                   \
    }                                                                   \
    return tdm_error_set(TDM_ERR_ARG, "unary: unknown op %d", (int)op);

template <typename T> static tdm_status unary_t(tdm_unary_op op, const tdm_tensor *x, tdm_tensor *y) {
    map_ptrs<T, 1, 1> p = {{cptr<T>(x)}, {mptr<T>(y)}};
    TDM_DISPATCH_UNARY(op, OP, return launch_map(x->numel, p, unary_fwd_fn<OP>()));
}

template <typename T>
static tdm_status unary_bwd_t(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                              tdm_tensor *gx) {
    map_ptrs<T, 2, 1> p = {{cptr<T>(gy), cptr<T>(x)}, {mptr<T>(gx)}};
    TDM_DISPATCH_UNARY(op, OP, return launch_map(x->numel, p, unary_bwd_fn<OP>()));
}

tdm_status cuda_unary(tdm_unary_op op, const tdm_tensor *x, tdm_tensor *y) {
    if (x->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    TDM_DISPATCH_FLOAT(x->dtype, "unary", T, return unary_t<T>(op, x, y));
    return TDM_OK;
}

tdm_status cuda_unary_backward(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                               tdm_tensor *gx) {
    if (x->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    TDM_DISPATCH_FLOAT(x->dtype, "unary_backward", T, return unary_bwd_t<T>(op, gy, x, gx));
    return TDM_OK;
}

// ---- binary (add, mul) and expand, with broadcasting ------------------------------------------

// y = a + alpha b (ADD) | a b (MUL) | alpha a (EXPAND: b unused), in A.
enum { BC_ADD = 0, BC_MUL = 1, BC_EXPAND = 2 };

template <int MODE, typename A> __device__ __forceinline__ A bc_f(A a, A b, A alpha) {
    return MODE == BC_ADD ? a + alpha * b : MODE == BC_MUL ? a * b : alpha * a;
}

// Same shapes: the vectorized map.
template <int MODE> struct binary_fn {
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        out[0] = bc_f<MODE>(in[0], in[1], (A)alpha);
    }
    double alpha;
};

// y (size[0..nd)) row-major; a, b read at sum coord[d] * sa[d] / sb[d] (0 along broadcast dims).
struct bcast_layout {
    int nd;
    int64_t size[TDM_MAX_DIMS], sa[TDM_MAX_DIMS], sb[TDM_MAX_DIMS];
};

template <typename T, int MODE>
__global__ void k_bcast(int64_t n, bcast_layout L, const T *a, const T *b, T *y, double alpha) {
    typedef acc_t<T> A;
    GRID_STRIDE(i, n) {
        int64_t rest = i, ia = 0, ib = 0;
        for (int d = L.nd - 1; d >= 0; d--) {
            const int64_t c = rest % L.size[d];
            rest /= L.size[d];
            ia += c * L.sa[d];
            ib += c * L.sb[d];
        }
        y[i] = st<T>(bc_f<MODE>(ld(a[ia]), MODE == BC_EXPAND ? (A)0 : ld(b[ib]), (A)alpha));
    }
}

// t right-aligned against y: its strides per dim of y, 0 where t is missing or of size 1.
static void bcast_strides(const tdm_tensor *t, const tdm_tensor *y, int64_t *s) {
    for (int d = 0; d < y->ndim; d++) {
        const int td = d - (y->ndim - t->ndim);
        s[d] = td >= 0 && t->shape[td] != 1 ? t->stride[td] : 0;
    }
}

template <typename T, int MODE>
static tdm_status bcast_t(const tdm_tensor *a, const tdm_tensor *b, double alpha, tdm_tensor *y) {
    if (MODE != BC_EXPAND && a->numel == y->numel && b->numel == y->numel) {
        map_ptrs<T, 2, 1> p = {{cptr<T>(a), cptr<T>(b)}, {mptr<T>(y)}};
        binary_fn<MODE> f = {alpha};
        return launch_map(y->numel, p, f);
    }
    bcast_layout L;
    L.nd = y->ndim;
    for (int d = 0; d < y->ndim; d++) L.size[d] = y->shape[d];
    bcast_strides(a, y, L.sa);
    if (MODE != BC_EXPAND) bcast_strides(b, y, L.sb);
    else for (int d = 0; d < y->ndim; d++) L.sb[d] = 0;
    const int threads = 256;
    TDM_LAUNCH(cuda_grid_blocks(y->numel, threads), threads, 0, cuda_stream_current(),
               k_bcast<T, MODE>)
    (y->numel, L, cptr<T>(a), MODE == BC_EXPAND ? cptr<T>(a) : cptr<T>(b), mptr<T>(y), alpha);
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_binary(tdm_binary_op op, const tdm_tensor *a, const tdm_tensor *b, double alpha,
                       tdm_tensor *y) {
    if (y->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(y));
    if (op == TDM_BINARY_ADD)
        TDM_DISPATCH_FLOAT(y->dtype, "add", T, return bcast_t<T, BC_ADD>(a, b, alpha, y))
    else
        TDM_DISPATCH_FLOAT(y->dtype, "mul", T, return bcast_t<T, BC_MUL>(a, b, alpha, y))
    return TDM_OK;
}

tdm_status cuda_expand(const tdm_tensor *x, double scale, tdm_tensor *y) {
    if (y->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(y));
    TDM_DISPATCH_FLOAT(y->dtype, "expand", T, return bcast_t<T, BC_EXPAND>(x, x, scale, y));
    return TDM_OK;
}

// ---- pad or crop: dst = src placed at dst's origin, zeros where src has no element ---------

// Both row-major with the same number of dims (<= 4, leading dims of size 1 added): dst[i] at
// coordinates c = src[c] when c lies inside src, else 0. E (the element's bytes) is all that
// matters: a zero is all-zero bits in every dtype.
struct pad_layout {
    int64_t dst[4], src[4];
};

template <typename E>
__global__ void k_pad_crop(int64_t n, pad_layout L, const E *src, E *dst) {
    GRID_STRIDE(i, n) {
        int64_t rest = i, at = 0, stride = 1;
        bool inside = true;
        for (int d = 3; d >= 0; d--) {
            const int64_t c = rest % L.dst[d];
            rest /= L.dst[d];
            inside = inside && c < L.src[d];
            at += c * stride;
            stride *= L.src[d];
        }
        dst[i] = inside ? src[at] : (E)0;
    }
}

tdm_status cuda_pad_crop(const tdm_tensor *src, tdm_tensor *dst) {
    if (dst->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(dst));
    pad_layout L;
    for (int d = 0; d < 4; d++) {
        const int k = d - (4 - dst->ndim);
        L.dst[d] = k >= 0 ? dst->shape[k] : 1;
        L.src[d] = k >= 0 ? src->shape[k] : 1;
    }
    const int threads = 256;
    const unsigned blocks = cuda_grid_blocks(dst->numel, threads);
    const cudaStream_t s = cuda_stream_current();
    switch (tdm_dtype_size(dst->dtype)) {
    case 2: TDM_LAUNCH(blocks, threads, 0, s, k_pad_crop<uint16_t>)
            (dst->numel, L, (const uint16_t *)tdm_data_c(src), (uint16_t *)tdm_data(dst)); break;
    case 4: TDM_LAUNCH(blocks, threads, 0, s, k_pad_crop<uint32_t>)
            (dst->numel, L, (const uint32_t *)tdm_data_c(src), (uint32_t *)tdm_data(dst)); break;
    case 8: TDM_LAUNCH(blocks, threads, 0, s, k_pad_crop<uint64_t>)
            (dst->numel, L, (const uint64_t *)tdm_data_c(src), (uint64_t *)tdm_data(dst)); break;
    default:
        return tdm_error_set(TDM_ERR_DTYPE, "pad: %s not supported", tdm_dtype_name(dst->dtype));
    }
    return CUDA_LAUNCH_CHECK();
}

// ---- a tensor and a Python number: add, sub, rsub, mul, div, rdiv ----------------------------
// A floating y: a and s (PyTorch's wrapped number, as a double) taken in the compute type A (f32
// for f32/f16/bf16, f64 for f64, as PyTorch's opmath), one rounding on store; an integer a with
// an f32 y: a converted to f32 first (PyTorch's common dtype); an integer y: in a's width,
// unsigned (wrapping as PyTorch's integers do).

template <int OP, typename A> __device__ __forceinline__ A scalar_f(A a, A s) {
    switch (OP) {
    case TDM_SCALAR_ADD: return a + s;
    case TDM_SCALAR_SUB: return a - s;
    case TDM_SCALAR_RSUB: return s - a;
    case TDM_SCALAR_MUL: return a * s;
    case TDM_SCALAR_DIV: return a / s;
    default: return s / a;   // rdiv
    }
}

// d(a op s)/da * gy: gy, gy, -gy, gy s, gy / s, -(gy s / a) / a
template <int OP, typename A> __device__ __forceinline__ A scalar_grad(A gy, A a, A s) {
    switch (OP) {
    case TDM_SCALAR_ADD:
    case TDM_SCALAR_SUB: return gy;
    case TDM_SCALAR_RSUB: return -gy;
    case TDM_SCALAR_MUL: return gy * s;
    case TDM_SCALAR_DIV: return gy / s;
    default: return -(gy * s / a) / a;
    }
}

template <int OP> struct scalar_fwd_fn {
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        out[0] = scalar_f<OP>(in[0], (A)s);
    }
    double s;
};
template <int OP> struct scalar_bwd_fn {   // in: gy, a
    template <typename A> __device__ void operator()(int64_t, const A *in, A *out) const {
        out[0] = scalar_grad<OP>(in[0], in[1], (A)s);
    }
    double s;
};

// an integer a, y f32: (float)a op (float)s
template <int OP, typename S>
__global__ void k_scalar_to_f32(int64_t n, const S *a, float *y, double s) {
    GRID_STRIDE(i, n) y[i] = scalar_f<OP>((float)a[i], (float)s);
}

// an integer a and y of one width: U is its unsigned twin
template <int OP, typename S, typename U>
__global__ void k_scalar_int(int64_t n, const S *a, S *y, U s) {
    GRID_STRIDE(i, n) {
        const U v = (U)a[i];
        const U r = OP == TDM_SCALAR_ADD ? v + s : OP == TDM_SCALAR_SUB ? v - s
                  : OP == TDM_SCALAR_RSUB ? s - v : v * s;
        y[i] = (S)r;
    }
}

#define TDM_DISPATCH_SCALAR(op, OP, ...)                       \
    switch (op) {                                              \
    case TDM_SCALAR_ADD: {                                     \
        const int OP = TDM_SCALAR_ADD;                         \
        __VA_ARGS__;                                           \
    }                                                          \
    case TDM_SCALAR_SUB: {                                     \
        const int OP = TDM_SCALAR_SUB;                         \
        __VA_ARGS__;                                           \
    }                                                          \
    case TDM_SCALAR_RSUB: {                                    \
        const int OP = TDM_SCALAR_RSUB;                        \
        __VA_ARGS__;                                           \
    }                                                          \
    case TDM_SCALAR_MUL: {                                     \
        const int OP = TDM_SCALAR_MUL;                         \
        __VA_ARGS__;                                           \
    }                                                          \
    case TDM_SCALAR_DIV: {                                     \
        const int OP = TDM_SCALAR_DIV;                         \
        __VA_ARGS__;                                           \
    }                                                          \
    case TDM_SCALAR_RDIV: {                                    \
        const int OP = TDM_SCALAR_RDIV;                        \
        __VA_ARGS__;                                           \
    }                                                          \
    }                                                          \
    return tdm_error_set(TDM_ERR_ARG, "binary_scalar: unknown op %d", (int)op);

template <typename T>
static tdm_status scalar_float_t(tdm_scalar_op op, const tdm_tensor *a, double s, tdm_tensor *y) {
    map_ptrs<T, 1, 1> p = {{cptr<T>(a)}, {mptr<T>(y)}};
    TDM_DISPATCH_SCALAR(op, OP, scalar_fwd_fn<OP> f = {s}; return launch_map(a->numel, p, f));
}

template <typename S, typename U>
static tdm_status scalar_int_t(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s,
                               tdm_tensor *y) {
    const int64_t n = a->numel;
    const unsigned blocks = cuda_grid_blocks(n, 256);
    const cudaStream_t st = cuda_stream_current();
    if (y->dtype == TDM_DTYPE_F32) {
        TDM_DISPATCH_SCALAR(op, OP,
                            TDM_LAUNCH(blocks, 256, 0, st, k_scalar_to_f32<OP, S>)(
                                n, cptr<S>(a), mptr<float>(y), s->f);
                            return CUDA_LAUNCH_CHECK());
    }
    TDM_DISPATCH_SCALAR(op, OP,
                        if (OP == TDM_SCALAR_DIV || OP == TDM_SCALAR_RDIV) break;
                        TDM_LAUNCH(blocks, 256, 0, st, k_scalar_int<OP, S, U>)(
                            n, cptr<S>(a), mptr<S>(y), (U)(uint64_t)s->i);
                        return CUDA_LAUNCH_CHECK());
}

tdm_status cuda_binary_scalar(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s,
                              tdm_tensor *y) {
    if (a->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(a));
    if (a->dtype == TDM_DTYPE_I64) return scalar_int_t<int64_t, uint64_t>(op, a, s, y);
    if (a->dtype == TDM_DTYPE_I32) return scalar_int_t<int32_t, uint32_t>(op, a, s, y);
    TDM_DISPATCH_FLOAT(a->dtype, "binary_scalar", T, return scalar_float_t<T>(op, a, s->f, y));
    return TDM_OK;
}

template <typename T>
static tdm_status scalar_bwd_t(tdm_scalar_op op, const tdm_tensor *gy, const tdm_tensor *a,
                               double s, tdm_tensor *ga) {
    map_ptrs<T, 2, 1> p = {{cptr<T>(gy), cptr<T>(a)}, {mptr<T>(ga)}};
    TDM_DISPATCH_SCALAR(op, OP, scalar_bwd_fn<OP> f = {s}; return launch_map(a->numel, p, f));
}

tdm_status cuda_binary_scalar_backward(tdm_scalar_op op, const tdm_tensor *gy,
                                       const tdm_tensor *a, const tdm_scalar *s, tdm_tensor *ga) {
    if (a->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(a));
    TDM_DISPATCH_FLOAT(a->dtype, "binary_scalar_backward", T,
                       return scalar_bwd_t<T>(op, gy, a, s->f, ga));
    return TDM_OK;
}
