/* ref_pool.c — the reference 2-D pooling: max_pool2d and avg_pool2d, forward and backward, with
 * PyTorch's CPU kernels' window rules (first maximum wins, NaN propagates; avg divisor from the
 * window clipped to the padded input). Core passes 4-D tensors (an unbatched input viewed as N=1)
 * and has checked the params. */
#include <math.h>

#include "ref/ref.h"

// ----------------------------------------------------------------------------
// max_pool2d: y[n,c,oh,ow] = max over i < kh, j < kw of
//     x[n,c, oh*sh - ph + i*dh, ow*sw - pw + j*dw],
// taps in the padding left out (padding acts as -inf). The scan is row-major through the window
// and, as PyTorch's `if (val > maxval || isnan(val))`, keeps the first maximum, and takes any NaN
// (so the last NaN). The gradient of y goes entirely to that one element.
// x (N,C,H,W), y (N,C,OH,OW).

// The window's maximum, and in *arg its index within the (H,W) plane; *arg = -1 when the window
// holds no input element at all (then the result is -inf and no gradient flows).
static double max_window(const double *plane, int64_t H, int64_t W, const tdm_pool2d_params *p,
                         int64_t oh, int64_t ow, int64_t *arg) {
    const int64_t h0 = oh * p->stride[0] - p->padding[0], w0 = ow * p->stride[1] - p->padding[1];
    double best = -INFINITY;
    *arg = -1;
    for (int64_t i = 0; i < p->kernel_size[0]; i++) {
        const int64_t ih = h0 + i * p->dilation[0];
        if (ih < 0 || ih >= H) continue;
        for (int64_t j = 0; j < p->kernel_size[1]; j++) {
            const int64_t iw = w0 + j * p->dilation[1];
            if (iw < 0 || iw >= W) continue;
            const double v = plane[ih * W + iw];
            // *arg < 0: PyTorch starts from the first tap inside the input, even if all are -inf
            if (*arg < 0 || v > best || isnan(v)) {
                best = v;
                *arg = ih * W + iw;
            }
        }
    }
    return best;
}

tdm_status ref_max_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y) {
    const int64_t planes = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
    const int64_t OH = y->shape[2], OW = y->shape[3];
    ref_arena A = {0};
    const double *X = ref_in(&A, x);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t nc = 0; nc < planes; nc++) {
        for (int64_t oh = 0; oh < OH; oh++) {
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t arg;
                Y[(nc * OH + oh) * OW + ow] = max_window(X + nc * H * W, H, W, p, oh, ow, &arg);
            }
        }
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// gx[argmax of window (oh,ow)] += gy[oh,ow]. gy (N,C,OH,OW), gx (N,C,H,W).
tdm_status ref_max_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_pool2d_params *p, tdm_tensor *gx) {
    const int64_t planes = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
    const int64_t OH = gy->shape[2], OW = gy->shape[3];
    ref_arena A = {0};
    const double *X = ref_in(&A, x), *GY = ref_in(&A, gy);
    double *GX = ref_new(&A, gx->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t nc = 0; nc < planes; nc++) {
        for (int64_t oh = 0; oh < OH; oh++) {
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t arg;
                max_window(X + nc * H * W, H, W, p, oh, ow, &arg);
                if (arg >= 0) GX[nc * H * W + arg] += GY[(nc * OH + oh) * OW + ow];
            }
        }
    }
    ref_store(&A, gx, GX);
    return ref_finish(&A);
}

// ----------------------------------------------------------------------------
// avg_pool2d (PyTorch's CPU kernel): for output (oh,ow), along each axis
//   start = o*s - p, end = min(start + k, size + p)       -> pool_size = (hend-hstart)(wend-wstart)
//   then start = max(start, 0), end = min(end, size)     -> the window actually summed
//   divisor = divisor_override ? divisor_override
//           : count_include_pad ? pool_size : (hend-hstart)(wend-wstart)   (clipped)
//   y = sum over the clipped window / divisor (0 for an empty window).
// x (N,C,H,W), y (N,C,OH,OW); dilation is 1.

typedef struct {
    int64_t h0, h1, w0, w1;   // the clipped window [h0,h1) x [w0,w1)
    double divisor;
} avg_window;

static avg_window avg_window_of(int64_t H, int64_t W, const tdm_pool2d_params *p, int64_t oh,
                                int64_t ow) {
    avg_window a;
    a.h0 = oh * p->stride[0] - p->padding[0];
    a.w0 = ow * p->stride[1] - p->padding[1];
    a.h1 = a.h0 + p->kernel_size[0] < H + p->padding[0] ? a.h0 + p->kernel_size[0]
                                                         : H + p->padding[0];
    a.w1 = a.w0 + p->kernel_size[1] < W + p->padding[1] ? a.w0 + p->kernel_size[1]
                                                         : W + p->padding[1];
    const int64_t pool_size = (a.h1 - a.h0) * (a.w1 - a.w0);
    if (a.h0 < 0) a.h0 = 0;
    if (a.w0 < 0) a.w0 = 0;
    if (a.h1 > H) a.h1 = H;
    if (a.w1 > W) a.w1 = W;
    if (p->divisor_override) a.divisor = p->divisor_override;
    else if (p->count_include_pad) a.divisor = (double)pool_size;
    else a.divisor = (double)((a.h1 - a.h0) * (a.w1 - a.w0));
    return a;
}

tdm_status ref_avg_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y) {
    const int64_t planes = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
    const int64_t OH = y->shape[2], OW = y->shape[3];
    ref_arena A = {0};
    const double *X = ref_in(&A, x);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t nc = 0; nc < planes; nc++) {
        const double *plane = X + nc * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            for (int64_t ow = 0; ow < OW; ow++) {
                const avg_window a = avg_window_of(H, W, p, oh, ow);
                if (a.h0 >= a.h1 || a.w0 >= a.w1) continue;   // empty: y = 0
                double sum = 0.0;
                for (int64_t ih = a.h0; ih < a.h1; ih++)
                    for (int64_t iw = a.w0; iw < a.w1; iw++) sum += plane[ih * W + iw];
                Y[(nc * OH + oh) * OW + ow] = sum / a.divisor;
            }
        }
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// gx[ih,iw] += gy[oh,ow] / divisor for every (ih,iw) of the clipped window of (oh,ow).
// gy (N,C,OH,OW), gx (N,C,H,W).
tdm_status ref_avg_pool2d_backward(const tdm_tensor *gy, const tdm_pool2d_params *p,
                                   tdm_tensor *gx) {
    const int64_t planes = gx->shape[0] * gx->shape[1], H = gx->shape[2], W = gx->shape[3];
    const int64_t OH = gy->shape[2], OW = gy->shape[3];
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy);
    double *GX = ref_new(&A, gx->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t nc = 0; nc < planes; nc++) {
        double *plane = GX + nc * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            for (int64_t ow = 0; ow < OW; ow++) {
                const avg_window a = avg_window_of(H, W, p, oh, ow);
                if (a.h0 >= a.h1 || a.w0 >= a.w1) continue;   // empty: no gradient
                const double g = GY[(nc * OH + oh) * OW + ow] / a.divisor;
                for (int64_t ih = a.h0; ih < a.h1; ih++)
                    for (int64_t iw = a.w0; iw < a.w1; iw++) plane[ih * W + iw] += g;
            }
        }
    }
    ref_store(&A, gx, GX);
    return ref_finish(&A);
}
