/* k_conv_direct.cu — tandem's own convolution kernels: forward, backward data and backward filter
 * by direct summation, for every configuration the reference accepts (f32, f64, f16, bf16; NCHW
 * and NHWC; stride, symmetric padding, dilation, groups). conv_cudnn.cu runs them when cuDNN has
 * no engine for a configuration (f64 with groups or dilation in NHWC has few or none) and in the
 * `direct` algorithm mode; they are correct first and simple, not fast. Semantics are those of
 * ref/ref_linalg.c, and the sums are the bound's direct summation in the accumulation type (f32,
 * f64 for f64), each output rounded once (docs/CONFORMANCE.md):
 *   forward      y[n,o,oh,ow] = b[o] + sum_{c',r,s} x[n, g Cg + c', oh sh - ph + r dh,
 *                ow sw - pw + s dw] w[o,c',r,s]       g = o / (O/G), Cg = C/G   (thread per y)
 *   bwd data     gx[n,c,ih,iw] = sum over the (o, r, s) of c's group whose window covers (ih,iw)
 *                of gy[n,o,oh,ow] w[o,c',r,s]                                   (thread per gx)
 *   bwd filter   gw[o,c',r,s] = sum_{n,oh,ow} gy[n,o,oh,ow] x[n, g Cg + c', ih, iw]
 *                                                     (warp per gw, lanes over (n,oh,ow))
 * Padding is symmetric here: conv_cudnn.cu pads explicitly for padding_extra first. */
#include "kernels/k_common.cuh"

struct conv_geom {
    int64_t N, C, H, W, O, Cg, Og, OH, OW, kh, kw;
    int sh, sw, ph, pw, dh, dw;
    bool nhwc;
    // flat offsets of x (N,C,H,W), w (O,Cg,kh,kw), y (N,O,OH,OW) elements in the layout
    __device__ int64_t xi(int64_t n, int64_t c, int64_t h, int64_t w) const {
        return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
    }
    __device__ int64_t wi(int64_t o, int64_t c, int64_t r, int64_t s) const {
        return nhwc ? ((o * kh + r) * kw + s) * Cg + c : ((o * Cg + c) * kh + r) * kw + s;
    }
    __device__ int64_t yi(int64_t n, int64_t o, int64_t h, int64_t w) const {
        return nhwc ? ((n * OH + h) * OW + w) * O + o : ((n * O + o) * OH + h) * OW + w;
    }
};

// Thread per output element e (decoded in NCHW order whatever the layout).
template <typename T>
__global__ void k_conv_fwd(conv_geom g, const T *x, const T *w, const T *b, T *y) {
    typedef acc_t<T> A;
    GRID_STRIDE(e, g.N * g.O * g.OH * g.OW) {
        const int64_t ow = e % g.OW, oh = e / g.OW % g.OH, o = e / (g.OW * g.OH) % g.O,
                      n = e / (g.OW * g.OH * g.O);
        const int64_t c0 = o / g.Og * g.Cg;
        A acc = b ? ld(b[o]) : (A)0;
        for (int64_t c = 0; c < g.Cg; c++)
            for (int64_t r = 0; r < g.kh; r++) {
                const int64_t ih = oh * g.sh - g.ph + r * g.dh;
                if (ih < 0 || ih >= g.H) continue;
                for (int64_t s = 0; s < g.kw; s++) {
                    const int64_t iw = ow * g.sw - g.pw + s * g.dw;
                    if (iw < 0 || iw >= g.W) continue;
                    acc += ld(x[g.xi(n, c0 + c, ih, iw)]) * ld(w[g.wi(o, c, r, s)]);
                }
            }
        y[g.yi(n, o, oh, ow)] = st<T>(acc);
    }
}

// Thread per input element: the outputs whose windows cover (ih, iw) through tap (r, s).
template <typename T>
__global__ void k_conv_bwd_data(conv_geom g, const T *gy, const T *w, T *gx) {
    typedef acc_t<T> A;
    GRID_STRIDE(e, g.N * g.C * g.H * g.W) {
        const int64_t iw = e % g.W, ih = e / g.W % g.H, c = e / (g.W * g.H) % g.C,
                      n = e / (g.W * g.H * g.C);
        const int64_t grp = c / g.Cg, cl = c % g.Cg;
        A acc = 0;
        for (int64_t o = grp * g.Og; o < (grp + 1) * g.Og; o++)
            for (int64_t r = 0; r < g.kh; r++) {
                const int64_t th = ih + g.ph - r * g.dh;   // = oh * sh
                if (th < 0 || th % g.sh) continue;
                const int64_t oh = th / g.sh;
                if (oh >= g.OH) continue;
                for (int64_t s = 0; s < g.kw; s++) {
                    const int64_t tw = iw + g.pw - s * g.dw;
                    if (tw < 0 || tw % g.sw) continue;
                    const int64_t ow = tw / g.sw;
                    if (ow >= g.OW) continue;
                    acc += ld(gy[g.yi(n, o, oh, ow)]) * ld(w[g.wi(o, cl, r, s)]);
                }
            }
        gx[g.xi(n, c, ih, iw)] = st<T>(acc);
    }
}

// Warp per weight element; lanes stride over the (n, oh, ow) positions, then a warp sum (a fixed
// order: deterministic).
template <typename T>
__global__ void k_conv_bwd_filter(conv_geom g, const T *gy, const T *x, T *gw) {
    typedef acc_t<T> A;
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int64_t P = g.N * g.OH * g.OW;
    for (int64_t e = warp; e < g.O * g.Cg * g.kh * g.kw; e += nwarps) {
        const int64_t s = e % g.kw, r = e / g.kw % g.kh, c = e / (g.kw * g.kh) % g.Cg,
                      o = e / (g.kw * g.kh * g.Cg);
        const int64_t cx = o / g.Og * g.Cg + c;
        A acc = 0;
        for (int64_t p = lane; p < P; p += 32) {
            const int64_t ow = p % g.OW, oh = p / g.OW % g.OH, n = p / (g.OW * g.OH);
            const int64_t ih = oh * g.sh - g.ph + r * g.dh, iw = ow * g.sw - g.pw + s * g.dw;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
            acc += ld(gy[g.yi(n, o, oh, ow)]) * ld(x[g.xi(n, cx, ih, iw)]);
        }
        acc = warp_sum(acc);
        if (lane == 0) gw[g.wi(o, c, r, s)] = st<T>(acc);
    }
}

// The geometry of x, w, y (dims in (N,C,H,W) order, as conv_cudnn.cu keeps them).
static conv_geom geom_of(const int64_t x[4], const int64_t w[4], const int64_t y[4],
                         const tdm_conv2d_params *p) {
    conv_geom g;
    g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
    g.O = w[0], g.Cg = w[1], g.kh = w[2], g.kw = w[3];
    g.OH = y[2], g.OW = y[3];
    const int64_t groups = g.Cg > 0 ? g.C / g.Cg : 1;
    g.Og = groups > 0 ? g.O / groups : g.O;
    g.sh = p->stride[0], g.sw = p->stride[1], g.ph = p->padding[0], g.pw = p->padding[1];
    g.dh = p->dilation[0], g.dw = p->dilation[1];
    g.nhwc = p->layout == TDM_CONV_LAYOUT_NHWC;
    return g;
}

tdm_status cuda_conv_direct(int pass, tdm_dtype dt, const int64_t x[4], const int64_t w[4],
                            const int64_t y[4], const void *px, const void *pw, void *py,
                            const void *bias, const tdm_conv2d_params *p) {
    const conv_geom g = geom_of(x, w, y, p);
    const cudaStream_t s = cuda_stream_current();
    const int64_t items = pass == 0   ? g.N * g.O * g.OH * g.OW
                          : pass == 1 ? g.N * g.C * g.H * g.W
                                      : g.O * g.Cg * g.kh * g.kw * 32;
    if (items == 0) return TDM_OK;
    const unsigned blocks = cuda_grid_blocks(items, 256);
    TDM_DISPATCH_FLOAT(dt, "conv2d (direct)", T, {
        if (pass == 0)
            TDM_LAUNCH(blocks, 256, 0, s, k_conv_fwd<T>)
            ((g), (const T *)px, (const T *)pw, (const T *)bias, (T *)py);
        else if (pass == 1)   // x-shaped output gx = px, y-shaped input gy = py
            TDM_LAUNCH(blocks, 256, 0, s, k_conv_bwd_data<T>)((g), (const T *)py, (const T *)pw, (T *)px);
        else   // w-shaped output gw = pw
            TDM_LAUNCH(blocks, 256, 0, s, k_conv_bwd_filter<T>)((g), (const T *)py, (const T *)px, (T *)pw);
    });
    return CUDA_LAUNCH_CHECK();
}
