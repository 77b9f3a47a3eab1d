/* ref_linalg.c — the reference matrix products and convolution: linear, matmul, conv2d, each
 * forward and backward, in double with plain loops (ref.h's pattern). Core has checked the
 * shapes; these read them from the tensors they are given. */
#include "ref/ref.h"

// ----------------------------------------------------------------------------
// linear: y = x W^T + b
// x (rows,in), w (out,in), b (out) or NULL, y (rows,out): core passes x and y as 2-D views.

tdm_status ref_linear(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                      tdm_tensor *y) {
    const int64_t rows = x->shape[0], in = x->shape[1], out = w->shape[0];
    ref_arena A = {0};
    const double *X = ref_in(&A, x), *W = ref_in(&A, w), *B = ref_in(&A, b);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t r = 0; r < rows; r++) {
        for (int64_t o = 0; o < out; o++) {
            double acc = B ? B[o] : 0.0;
            for (int64_t i = 0; i < in; i++) acc += X[r * in + i] * W[o * in + i];
            Y[r * out + o] = acc;
        }
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// gx = gy W (rows,in); gw = gy^T x (out,in), summed over rows; gb = sum of gy over rows (out).
// Any of gx, gw, gb may be NULL (not wanted).
tdm_status ref_linear_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                               tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb) {
    const int64_t rows = x->shape[0], in = x->shape[1], out = w->shape[0];
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *X = ref_in(&A, x), *W = ref_in(&A, w);
    double *GX = ref_new(&A, x->numel), *GW = ref_new(&A, w->numel), *GB = ref_new(&A, out);
    if (A.failed) return ref_finish(&A);

    for (int64_t r = 0; r < rows; r++) {
        for (int64_t o = 0; o < out; o++) {
            const double g = GY[r * out + o];
            GB[o] += g;
            for (int64_t i = 0; i < in; i++) {
                GX[r * in + i] += g * W[o * in + i];
                GW[o * in + i] += g * X[r * in + i];
            }
        }
    }
    ref_store(&A, gx, GX);
    ref_store(&A, gw, GW);
    ref_store(&A, gb, GB);
    return ref_finish(&A);
}

// ----------------------------------------------------------------------------
// matmul: y[t] = a[t] b[t], where a 2-D operand is the same matrix for every batch t.
// a (n,k) or (B,n,k), b (k,m) or (B,k,m), y (n,m) or (B,n,m).

typedef struct {
    int64_t batch, n, k, m;
    int64_t a_step, b_step;   // elements between batches: 0 for a 2-D operand
} matmul_dims;

static matmul_dims matmul_dims_of(const tdm_tensor *a, const tdm_tensor *b) {
    matmul_dims d;
    const bool a3 = a->ndim == 3, b3 = b->ndim == 3;
    d.batch = a3 ? a->shape[0] : b3 ? b->shape[0] : 1;
    d.n = a->shape[a->ndim - 2];
    d.k = a->shape[a->ndim - 1];
    d.m = b->shape[b->ndim - 1];
    d.a_step = a3 ? d.n * d.k : 0;
    d.b_step = b3 ? d.k * d.m : 0;
    return d;
}

tdm_status ref_matmul(const tdm_tensor *a, const tdm_tensor *b, tdm_tensor *y) {
    const matmul_dims d = matmul_dims_of(a, b);
    ref_arena A = {0};
    const double *Am = ref_in(&A, a), *Bm = ref_in(&A, b);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t t = 0; t < d.batch; t++) {
        const double *at = Am + t * d.a_step, *bt = Bm + t * d.b_step;
        double *yt = Y + t * d.n * d.m;
        for (int64_t i = 0; i < d.n; i++) {
            for (int64_t j = 0; j < d.m; j++) {
                double acc = 0.0;
                for (int64_t p = 0; p < d.k; p++) acc += at[i * d.k + p] * bt[p * d.m + j];
                yt[i * d.m + j] = acc;
            }
        }
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// ga[t] = gy[t] b[t]^T, gb[t] = a[t]^T gy[t]; the gradient of a 2-D operand paired with a 3-D
// one is summed over the batch. ga or gb may be NULL.
tdm_status ref_matmul_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                               tdm_tensor *ga, tdm_tensor *gb) {
    const matmul_dims d = matmul_dims_of(a, b);
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *Am = ref_in(&A, a), *Bm = ref_in(&A, b);
    double *GA = ref_new(&A, a->numel), *GB = ref_new(&A, b->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t t = 0; t < d.batch; t++) {
        const double *at = Am + t * d.a_step, *bt = Bm + t * d.b_step;
        const double *gyt = GY + t * d.n * d.m;
        double *gat = GA + t * d.a_step, *gbt = GB + t * d.b_step;
        for (int64_t i = 0; i < d.n; i++) {
            for (int64_t j = 0; j < d.m; j++) {
                const double g = gyt[i * d.m + j];
                for (int64_t p = 0; p < d.k; p++) {
                    gat[i * d.k + p] += g * bt[p * d.m + j];
                    gbt[p * d.m + j] += g * at[i * d.k + p];
                }
            }
        }
    }
    ref_store(&A, ga, GA);
    ref_store(&A, gb, GB);
    return ref_finish(&A);
}

// ----------------------------------------------------------------------------
// conv2d (cross-correlation, zero padding), groups g:
//   y[n,o,oh,ow] = b[o] + sum_{c,i,j} x[n, g(o)*Cg + c, oh*s - p + i*d, ow*s - p + j*d] w[o,c,i,j]
// where Cg = C/g, g(o) = o / (O/g), and taps that fall in the padding contribute nothing (the
// padding after, padding_extra included, only makes room for the outputs y's shape has).
// NCHW: x (N,C,H,W), w (O,C/g,kh,kw), b (O) or NULL, y (N,O,OH,OW).
// NHWC: x (N,H,W,C), w (O,kh,kw,C/g), y (N,OH,OW,O): the same sums; only the strides differ.

typedef struct {
    int64_t N, C, H, W, O, Cg, Og, kh, kw, OH, OW;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t xs[4], ws[4], ys[4];   // element strides of (n,c,h,w), (o,c,i,j), (n,o,oh,ow)
} conv_dims;

// t's element strides taken in (outer, channel, row, column) order through the layout's axes.
static void conv_strides(const tdm_tensor *t, const int *ax, int64_t out[4]) {
    out[0] = t->stride[0], out[1] = t->stride[ax[0]], out[2] = t->stride[ax[1]],
    out[3] = t->stride[ax[2]];
}

static conv_dims conv_dims_of(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *y,
                              const tdm_conv2d_params *p) {
    conv_dims d;
    const int *ax = tdm_conv_axes(p->layout);
    const int c = ax[0], h = ax[1], wd = ax[2];
    conv_strides(x, ax, d.xs);
    conv_strides(w, ax, d.ws);
    conv_strides(y, ax, d.ys);
    d.N = x->shape[0], d.C = x->shape[c], d.H = x->shape[h], d.W = x->shape[wd];
    d.O = w->shape[0], d.Cg = w->shape[c], d.kh = w->shape[h], d.kw = w->shape[wd];
    d.Og = d.O / p->groups;
    d.OH = y->shape[h], d.OW = y->shape[wd];
    d.sh = p->stride[0], d.sw = p->stride[1];
    d.ph = p->padding[0], d.pw = p->padding[1];
    d.dh = p->dilation[0], d.dw = p->dilation[1];
    return d;
}

// Index into x of tap (i,j) of output (oh,ow) for input channel ci of image n, or -1 in padding.
static int64_t conv_tap(const conv_dims *d, int64_t n, int64_t ci, int64_t oh, int64_t ow,
                        int64_t i, int64_t j) {
    const int64_t ih = oh * d->sh - d->ph + i * d->dh, iw = ow * d->sw - d->pw + j * d->dw;
    if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) return -1;
    return n * d->xs[0] + ci * d->xs[1] + ih * d->xs[2] + iw * d->xs[3];
}

static int64_t conv_w_index(const conv_dims *d, int64_t o, int64_t c, int64_t i, int64_t j) {
    return o * d->ws[0] + c * d->ws[1] + i * d->ws[2] + j * d->ws[3];
}

static int64_t conv_y_index(const conv_dims *d, int64_t n, int64_t o, int64_t oh, int64_t ow) {
    return n * d->ys[0] + o * d->ys[1] + oh * d->ys[2] + ow * d->ys[3];
}

tdm_status ref_conv2d(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                      const tdm_conv2d_params *p, tdm_tensor *y) {
    const conv_dims d = conv_dims_of(x, w, y, p);
    ref_arena A = {0};
    const double *X = ref_in(&A, x), *Wt = ref_in(&A, w), *B = ref_in(&A, b);
    double *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);

    for (int64_t n = 0; n < d.N; n++)
    for (int64_t o = 0; o < d.O; o++)
    for (int64_t oh = 0; oh < d.OH; oh++)
    for (int64_t ow = 0; ow < d.OW; ow++) {
        double acc = B ? B[o] : 0.0;
        for (int64_t c = 0; c < d.Cg; c++)
        for (int64_t i = 0; i < d.kh; i++)
        for (int64_t j = 0; j < d.kw; j++) {
            const int64_t xi = conv_tap(&d, n, (o / d.Og) * d.Cg + c, oh, ow, i, j);
            if (xi >= 0) acc += X[xi] * Wt[conv_w_index(&d, o, c, i, j)];
        }
        Y[conv_y_index(&d, n, o, oh, ow)] = acc;
    }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// Each term x[tap] w[o,c,i,j] of y[n,o,oh,ow] sends gy[n,o,oh,ow] w[o,c,i,j] to gx[tap] and
// gy[n,o,oh,ow] x[tap] to gw[o,c,i,j]; gb[o] = sum of gy over n, oh, ow.
// gy (N,O,OH,OW); any of gx (N,C,H,W), gw (O,C/g,kh,kw), gb (O) may be NULL (or their NHWC
// forms, as in the forward).
tdm_status ref_conv2d_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                               const tdm_conv2d_params *p, tdm_tensor *gx, tdm_tensor *gw,
                               tdm_tensor *gb) {
    const conv_dims d = conv_dims_of(x, w, gy, p);
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *X = ref_in(&A, x), *Wt = ref_in(&A, w);
    double *GX = ref_new(&A, x->numel), *GW = ref_new(&A, w->numel), *GB = ref_new(&A, d.O);
    if (A.failed) return ref_finish(&A);

    for (int64_t n = 0; n < d.N; n++)
    for (int64_t o = 0; o < d.O; o++)
    for (int64_t oh = 0; oh < d.OH; oh++)
    for (int64_t ow = 0; ow < d.OW; ow++) {
        const double g = GY[conv_y_index(&d, n, o, oh, ow)];
        GB[o] += g;
        for (int64_t c = 0; c < d.Cg; c++)
        for (int64_t i = 0; i < d.kh; i++)
        for (int64_t j = 0; j < d.kw; j++) {
            const int64_t xi = conv_tap(&d, n, (o / d.Og) * d.Cg + c, oh, ow, i, j);
            const int64_t wi = conv_w_index(&d, o, c, i, j);
            if (xi < 0) continue;
            GX[xi] += g * Wt[wi];
            GW[wi] += g * X[xi];
        }
    }
    ref_store(&A, gx, GX);
    ref_store(&A, gw, GW);
    ref_store(&A, gb, GB);
    return ref_finish(&A);
}
