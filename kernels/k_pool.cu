/* k_pool.cu — max_pool2d and avg_pool2d (NCHW), forward and backward, with the reference's (and
 * PyTorch's CPU kernels') window rules: max keeps the first maximum and takes any NaN; avg divides
 * by the window clipped to the padded input (or count_include_pad / divisor_override).
 * Forward: a thread per output. Backward: a thread per input element gathers from the windows
 * that contain it (no atomics, deterministic); max first records each window's argmax. */
#include "kernels/k_common.cuh"

struct pool_geom {
    int64_t planes, H, W, OH, OW;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    bool count_include_pad;
    int divisor_override;
};

static pool_geom pool_geom_of(const tdm_tensor *x4, const tdm_tensor *y4, const tdm_pool2d_params *p) {
    pool_geom g;
    g.planes = x4->shape[0] * x4->shape[1];
    g.H = x4->shape[2];
    g.W = x4->shape[3];
    g.OH = y4->shape[2];
    g.OW = y4->shape[3];
    g.kh = p->kernel_size[0];
    g.kw = p->kernel_size[1];
    g.sh = p->stride[0];
    g.sw = p->stride[1];
    g.ph = p->padding[0];
    g.pw = p->padding[1];
    g.dh = p->dilation[0];
    g.dw = p->dilation[1];
    g.count_include_pad = p->count_include_pad;
    g.divisor_override = p->divisor_override;
    return g;
}

// ---- max_pool2d ------------------------------------------------------------------------------

// The window's maximum of one (H,W) plane and its index in the plane (-1: no tap inside).
template <typename T>
__device__ __forceinline__ acc_t<T> max_window(const T *plane, const pool_geom &g, int64_t oh,
                                               int64_t ow, int64_t *arg) {
    typedef acc_t<T> A;
    const int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    A best = -k_inf<A>();
    *arg = -1;
    for (int i = 0; i < g.kh; i++) {
        const int64_t ih = h0 + (int64_t)i * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        for (int j = 0; j < g.kw; j++) {
            const int64_t iw = w0 + (int64_t)j * g.dw;
            if (iw < 0 || iw >= g.W) continue;
            const A v = ld(plane[ih * g.W + iw]);
            if (*arg < 0 || v > best || v != v) {
                best = v;
                *arg = ih * g.W + iw;
            }
        }
    }
    return best;
}

// x (planes,H,W), y (planes,OH,OW); arg (planes,OH,OW) when not NULL (backward) instead of y.
template <typename T>
__global__ void k_max_pool(pool_geom g, const T *x, T *y, int32_t *arg) {
    GRID_STRIDE(o, g.planes * g.OH * g.OW) {
        const int64_t ow = o % g.OW, oh = (o / g.OW) % g.OH, nc = o / (g.OW * g.OH);
        int64_t a;
        const acc_t<T> v = max_window(x + nc * g.H * g.W, g, oh, ow, &a);
        if (arg) arg[o] = (int32_t)a;
        else y[o] = st<T>(v);
    }
}

// The output rows whose window holds input row `i` along one axis: o*s - p + t*d == i for a tap t.
// Calls visit(o) for each (o in [0, O)), in increasing t.
#define FOR_WINDOWS(i, s, p, d, k, O, o, ...)                         \
    for (int t_ = 0; t_ < (k); t_++) {                                \
        const int64_t num_ = (i) + (p) - (int64_t)t_ * (d);           \
        if (num_ < 0 || num_ % (s)) continue;                         \
        const int64_t o = num_ / (s);                                 \
        if (o >= (O)) continue;                                       \
        __VA_ARGS__;                                                  \
    }

// gx[i] = sum of gy over the windows whose argmax is i. gy (planes,OH,OW), gx (planes,H,W).
template <typename T>
__global__ void k_max_pool_bwd(pool_geom g, const T *gy, const int32_t *arg, T *gx) {
    typedef acc_t<T> A;
    GRID_STRIDE(e, g.planes * g.H * g.W) {
        const int64_t iw = e % g.W, ih = (e / g.W) % g.H, nc = e / (g.W * g.H);
        const int64_t here = ih * g.W + iw, base = nc * g.OH * g.OW;
        A acc = 0;
        FOR_WINDOWS(ih, g.sh, g.ph, g.dh, g.kh, g.OH, oh,
                    FOR_WINDOWS(iw, g.sw, g.pw, g.dw, g.kw, g.OW, ow, {
                        const int64_t o = base + oh * g.OW + ow;
                        if (arg[o] == here) acc += ld(gy[o]);
                    }))
        gx[e] = st<T>(acc);
    }
}

tdm_status cuda_max_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y) {
    if (y->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    const pool_geom g = pool_geom_of(x, y, p);
    TDM_DISPATCH_FLOAT(x->dtype, "max_pool2d", T,
                       TDM_LAUNCH(cuda_grid_blocks(y->numel, 256), 256, 0, cuda_stream_current(),
                                  k_max_pool<T>)(g, cptr<T>(x), mptr<T>(y), NULL));
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_max_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_pool2d_params *p, tdm_tensor *gx) {
    if (gx->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    if (x->shape[2] * x->shape[3] > 2147483647LL)
        return tdm_error_set(TDM_ERR_ARG, "max_pool2d_backward: planes over 2^31 elements");
    const pool_geom g = pool_geom_of(x, gy, p);
    tdm_tensor *arg = cuda_scratch(x, gy->numel, TDM_DTYPE_I32);
    if (!arg) return tdm_last_status();
    const cudaStream_t s = cuda_stream_current();
    tdm_status st_ = TDM_OK;
    switch (x->dtype) {
#define MP_BWD(DT, T)                                                                  \
    case DT:                                                                           \
        if (gy->numel > 0) {                                                           \
            TDM_LAUNCH(cuda_grid_blocks(gy->numel, 256), 256, 0, s, k_max_pool<T>)     \
            (g, cptr<T>(x), NULL, (int32_t *)tdm_data(arg));                           \
            st_ = CUDA_LAUNCH_CHECK();                                                 \
        }                                                                              \
        if (st_ == TDM_OK) {                                                           \
            TDM_LAUNCH(cuda_grid_blocks(gx->numel, 256), 256, 0, s, k_max_pool_bwd<T>) \
            (g, cptr<T>(gy), (const int32_t *)tdm_data_c(arg), mptr<T>(gx));           \
            st_ = CUDA_LAUNCH_CHECK();                                                 \
        }                                                                              \
        break;
        MP_BWD(TDM_DTYPE_F32, float)
        MP_BWD(TDM_DTYPE_F16, __half)
        MP_BWD(TDM_DTYPE_BF16, bf16_t)
        MP_BWD(TDM_DTYPE_F64, double)
#undef MP_BWD
    default:
        st_ = tdm_error_set(TDM_ERR_DTYPE,
                            "max_pool2d_backward: dtype %s not supported by the cuda backend",
                            tdm_dtype_name(x->dtype));
    }
    tdm_tensor_free(arg);
    return st_;
}

// ---- avg_pool2d ------------------------------------------------------------------------------
// For output (oh,ow), per axis: start = o*s - p, end = min(start + k, size + p) -> pool_size;
// then clipped to [0, size); divisor = override, or pool_size (count_include_pad), or the
// clipped area. y = sum over the clipped window / divisor (0 for an empty window).

struct avg_window {
    int64_t h0, h1, w0, w1;
    double divisor;
};

__device__ __forceinline__ avg_window avg_window_of(const pool_geom &g, int64_t oh, int64_t ow) {
    avg_window a;
    a.h0 = oh * g.sh - g.ph;
    a.w0 = ow * g.sw - g.pw;
    a.h1 = min(a.h0 + g.kh, g.H + g.ph);
    a.w1 = min(a.w0 + g.kw, g.W + g.pw);
    const int64_t pool_size = (a.h1 - a.h0) * (a.w1 - a.w0);
    a.h0 = max(a.h0, (int64_t)0);
    a.w0 = max(a.w0, (int64_t)0);
    a.h1 = min(a.h1, g.H);
    a.w1 = min(a.w1, g.W);
    if (g.divisor_override) a.divisor = g.divisor_override;
    else if (g.count_include_pad) a.divisor = (double)pool_size;
    else a.divisor = (double)((a.h1 - a.h0) * (a.w1 - a.w0));
    return a;
}

template <typename T> __global__ void k_avg_pool(pool_geom g, const T *x, T *y) {
    typedef acc_t<T> A;
    GRID_STRIDE(o, g.planes * g.OH * g.OW) {
        const int64_t ow = o % g.OW, oh = (o / g.OW) % g.OH, nc = o / (g.OW * g.OH);
        const avg_window a = avg_window_of(g, oh, ow);
        const T *plane = x + nc * g.H * g.W;
        A sum = 0;
        for (int64_t ih = a.h0; ih < a.h1; ih++)
            for (int64_t iw = a.w0; iw < a.w1; iw++) sum += ld(plane[ih * g.W + iw]);
        y[o] = st<T>(a.h0 >= a.h1 || a.w0 >= a.w1 ? (A)0 : sum / (A)a.divisor);
    }
}

// gx[ih,iw] = sum of gy[oh,ow] / divisor over the clipped windows holding (ih,iw).
template <typename T> __global__ void k_avg_pool_bwd(pool_geom g, const T *gy, T *gx) {
    typedef acc_t<T> A;
    GRID_STRIDE(e, g.planes * g.H * g.W) {
        const int64_t iw = e % g.W, ih = (e / g.W) % g.H, nc = e / (g.W * g.H);
        const int64_t base = nc * g.OH * g.OW;
        A acc = 0;
        FOR_WINDOWS(ih, g.sh, g.ph, 1, g.kh, g.OH, oh,
                    FOR_WINDOWS(iw, g.sw, g.pw, 1, g.kw, g.OW, ow, {
                        const avg_window a = avg_window_of(g, oh, ow);
                        if (ih >= a.h0 && ih < a.h1 && iw >= a.w0 && iw < a.w1)
                            acc += ld(gy[base + oh * g.OW + ow]) / (A)a.divisor;
                    }))
        gx[e] = st<T>(acc);
    }
}

tdm_status cuda_avg_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y) {
    if (y->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(x));
    const pool_geom g = pool_geom_of(x, y, p);
    TDM_DISPATCH_FLOAT(x->dtype, "avg_pool2d", T,
                       TDM_LAUNCH(cuda_grid_blocks(y->numel, 256), 256, 0, cuda_stream_current(),
                                  k_avg_pool<T>)(g, cptr<T>(x), mptr<T>(y)));
    return CUDA_LAUNCH_CHECK();
}

tdm_status cuda_avg_pool2d_backward(const tdm_tensor *gy, const tdm_pool2d_params *p,
                                    tdm_tensor *gx) {
    if (gx->numel == 0) return TDM_OK;
    TDM_TRY(cuda_use_device(gx));
    const pool_geom g = pool_geom_of(gx, gy, p);
    TDM_DISPATCH_FLOAT(gx->dtype, "avg_pool2d_backward", T,
                       TDM_LAUNCH(cuda_grid_blocks(gx->numel, 256), 256, 0, cuda_stream_current(),
                                  k_avg_pool_bwd<T>)(g, cptr<T>(gy), mptr<T>(gx)));
    return CUDA_LAUNCH_CHECK();
}
