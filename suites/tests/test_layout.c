/* test_layout.c — channels-last convolution (tdm_conv2d_params.layout = NHWC) and
 * tdm_tensor_permute, which converts between the layouts.
 *
 *   test_layout cpu     permute's values, negative dims, refusals and gradient; conv2d in NHWC
 *                       equals conv2d in NCHW permuted, bit for bit, forward and backward, over
 *                       strides, padding, dilation, groups, bias or none, unbatched input, f32 /
 *                       bf16 / f64 (the reference sums the same terms in the same order in both
 *                       layouts, so any indexing slip shows as a difference); NHWC shape errors
 *                       name the layout; nn.Conv2d refuses NHWC; autograd through an NHWC conv.
 *   test_layout cuda    (label gpu; exit 77 with one line without a device) permute on cuda:0
 *                       equals the cpu's bit for bit; conv2d NHWC on cuda:0 (TF32 off) against
 *                       the reference NHWC within gamma_K * (|x| * |w|) + the output rounding
 *                       (docs/CONFORMANCE.md), forward and both backward passes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensor_eq.h"
#include "tandem/tandem.h"

static const tdm_device CPU = {TDM_DEVICE_CPU, 0};

static bool has(const char *needle) { return strstr(tdm_last_error(), needle) != NULL; }

static double *host(const tdm_tensor *t) {
    double *h = malloc((size_t)(tdm_tensor_numel(t) + 1) * sizeof *h);
    if (h && tdm_tensor_to_host_f64(t, h) != TDM_OK) {
        free(h);
        return NULL;
    }
    return h;
}

static const int TO_NHWC[4] = {0, 2, 3, 1};
static const int TO_HWC[3] = {1, 2, 0};

// ---- permute ------------------------------------------------------------------------------------

static void test_permute(tdm_device dev) {
    // x (2,3,4) = 0..23; y = x.permute(2,0,1) is (4,2,3) with y[a,b,c] = x[b,c,a]
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = i;
    float vf[24];
    for (int i = 0; i < 24; i++) vf[i] = (float)v[i];
    tdm_tensor *x = tdm_tensor_from_host(3, (int64_t[]){2, 3, 4}, TDM_DTYPE_F32, dev, vf);
    tdm_tensor *y = tdm_tensor_permute(x, (const int[]){2, 0, 1});
    CHECK(y && tdm_tensor_shape(y)[0] == 4 && tdm_tensor_shape(y)[1] == 2 &&
          tdm_tensor_shape(y)[2] == 3);
    double *hy = y ? host(y) : NULL;
    for (int a = 0; hy && a < 4; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++)
                CHECK_MSG(hy[(a * 2 + b) * 3 + c] == v[(b * 3 + c) * 4 + a], "y[%d,%d,%d] = %g",
                          a, b, c, hy[(a * 2 + b) * 3 + c]);
    free(hy);
    // negative dims count from the end: (-1, 0, 1) is (2, 0, 1)
    tdm_tensor *yn = tdm_tensor_permute(x, (const int[]){-1, 0, 1});
    CHECK(tensors_identical(y, yn));
    // the identity is a copy; the inverse brings x back
    tdm_tensor *back = y ? tdm_tensor_permute(y, (const int[]){1, 2, 0}) : NULL;
    CHECK(tensors_identical(back, x));
    tdm_tensor_free(back);
    tdm_tensor_free(yn);
    tdm_tensor_free(y);

    // refusals: a repeated dim, a dim out of range, an integer tensor, NULL dims
    CHECK(!tdm_tensor_permute(x, (const int[]){0, 0, 1}) && has("repeats"));
    CHECK(!tdm_tensor_permute(x, (const int[]){0, 1, 3}));
    CHECK(!tdm_tensor_permute(x, NULL) && has("dims is NULL"));
    int64_t idx[2] = {1, 2};
    tdm_tensor *ints = tdm_tensor_from_host(1, (int64_t[]){2}, TDM_DTYPE_I64, dev, idx);
    CHECK(ints && !tdm_tensor_permute(ints, (const int[]){0}));
    tdm_tensor_free(ints);

    // autograd: loss = sum(permute(x) * c) gives grad x = c permuted back
    tdm_tensor_set_requires_grad(x, true);
    tdm_tensor *p = tdm_tensor_permute(x, (const int[]){2, 0, 1});
    tdm_tensor *c = tdm_tensor_randn(3, (int64_t[]){4, 2, 3}, TDM_DTYPE_F32, dev, 5, 0);
    tdm_tensor *pc = p && c ? tdm_mul(p, c) : NULL;
    tdm_tensor *loss = pc ? tdm_sum(pc, 0, NULL, false) : NULL;
    CHECK(loss && tdm_backward(loss, NULL) == TDM_OK);
    const tdm_tensor *g = tdm_tensor_grad(x);   // borrowed
    tdm_tensor *want = c ? tdm_tensor_permute(c, (const int[]){1, 2, 0}) : NULL;
    CHECK(g && tensors_identical(g, want));
    tdm_tensor_free(want);
    tdm_tensor_free(loss);
    tdm_tensor_free(pc);
    tdm_tensor_free(c);
    tdm_tensor_free(p);
    tdm_tensor_free(x);
}

// ---- conv2d: NHWC = NCHW permuted, exactly, on the reference ------------------------------------

typedef struct {
    int64_t n, c, h, w, o, kh, kw;   // n = 0: an unbatched (C,H,W) input
    int stride[2], padding[2], dilation[2], groups;
    bool bias;
} conv_cfg;

static const conv_cfg CONFIGS[] = {
    {2, 3, 7, 6, 4, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {1, 4, 9, 8, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, false},
    {3, 6, 5, 5, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 6, true},    // depthwise
    {2, 5, 4, 7, 3, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true},    // 1x1 strided
    {0, 3, 6, 5, 2, 2, 3, {1, 2}, {1, 1}, {2, 1}, 1, true},    // unbatched
    {1, 1, 1, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
};

// (a,b,c,d) NCHW -> the tensor in NHWC; 3-D (C,H,W) -> (H,W,C).
static tdm_tensor *to_nhwc(const tdm_tensor *t) {
    return tdm_tensor_permute(t, tdm_tensor_ndim(t) == 4 ? TO_NHWC : TO_HWC);
}

static void test_conv_exact(tdm_dtype dt) {
    for (size_t k = 0; k < sizeof CONFIGS / sizeof *CONFIGS; k++) {
        const conv_cfg *f = &CONFIGS[k];
        const tdm_conv2d_params pc = {{f->stride[0], f->stride[1]}, {f->padding[0], f->padding[1]},
                                      {f->dilation[0], f->dilation[1]}, f->groups,
                                      TDM_CONV_LAYOUT_NCHW, {0, 0}};
        tdm_conv2d_params pn = pc;
        pn.layout = TDM_CONV_LAYOUT_NHWC;
        const bool batched = f->n > 0;
        const int64_t xs[4] = {f->n, f->c, f->h, f->w};
        tdm_tensor *x = tdm_tensor_randn(batched ? 4 : 3, batched ? xs : xs + 1, dt, CPU, 11, k);
        tdm_tensor *w = tdm_tensor_randn(4, (int64_t[]){f->o, f->c / f->groups, f->kh, f->kw}, dt,
                                         CPU, 12, k);
        tdm_tensor *b = f->bias ? tdm_tensor_randn(1, &f->o, dt, CPU, 13, k) : NULL;
        tdm_tensor *y = tdm_conv2d(x, w, b, &pc);
        tdm_tensor *xn = to_nhwc(x), *wn = tdm_tensor_permute(w, TO_NHWC);
        tdm_tensor *yn = tdm_conv2d(xn, wn, b, &pn);
        tdm_tensor *y_as_nhwc = y ? to_nhwc(y) : NULL;
        CHECK_MSG(y && yn && tensors_identical(yn, y_as_nhwc), "config %zu %s forward: %s", k,
                  tdm_dtype_name(dt), tdm_last_error());

        tdm_tensor *gy = y ? tdm_tensor_randn(tdm_tensor_ndim(y), tdm_tensor_shape(y), dt, CPU, 14,
                                              k)
                           : NULL;
        tdm_tensor *gyn = gy ? to_nhwc(gy) : NULL;
        tdm_tensor *gx = NULL, *gw = NULL, *gb = NULL, *gxn = NULL, *gwn = NULL, *gbn = NULL;
        CHECK(gy && tdm_conv2d_backward(gy, x, w, &pc, &gx, &gw, &gb) == TDM_OK);
        CHECK_MSG(gyn && tdm_conv2d_backward(gyn, xn, wn, &pn, &gxn, &gwn, &gbn) == TDM_OK,
                  "config %zu backward NHWC: %s", k, tdm_last_error());
        tdm_tensor *gx_as = gx ? to_nhwc(gx) : NULL, *gw_as = gw ? to_nhwc(gw) : NULL;
        CHECK_MSG(tensors_identical(gxn, gx_as), "config %zu %s grad input", k, tdm_dtype_name(dt));
        CHECK_MSG(tensors_identical(gwn, gw_as), "config %zu %s grad weight", k, tdm_dtype_name(dt));
        CHECK_MSG(tensors_identical(gbn, gb), "config %zu %s grad bias", k, tdm_dtype_name(dt));

        tdm_tensor *all[] = {x, w, b, y, xn, wn, yn, y_as_nhwc, gy, gyn, gx, gw, gb,
                             gxn, gwn, gbn, gx_as, gw_as};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    }
}

static void test_conv_errors(void) {
    tdm_conv2d_params p = TDM_CONV2D_DEFAULT;
    p.layout = TDM_CONV_LAYOUT_NHWC;
    // an NCHW-shaped x (1,3,8,8) read as NHWC has 8 channels: the message names the layout
    tdm_tensor *x = tdm_tensor_randn(4, (int64_t[]){1, 3, 8, 8}, TDM_DTYPE_F32, CPU, 1, 0);
    tdm_tensor *w = tdm_tensor_randn(4, (int64_t[]){4, 3, 3, 3}, TDM_DTYPE_F32, CPU, 2, 0);
    CHECK(!tdm_conv2d(x, w, NULL, &p) && has("NHWC") && has("has 8"));
    p.layout = (tdm_conv_layout)7;
    CHECK(!tdm_conv2d(x, w, NULL, &p) && has("unknown layout"));
    // nn.Conv2d is NCHW (its state dict and the layers around it)
    p.layout = TDM_CONV_LAYOUT_NHWC;
    CHECK(!tdm_nn_conv2d(3, 4, 3, &p, true) && has("NCHW"));
    CHECK(!strcmp(tdm_conv_layout_name(TDM_CONV_LAYOUT_NHWC), "nhwc"));
    tdm_tensor_free(w);
    tdm_tensor_free(x);
}

// autograd through an NHWC conv: the recorded params keep the layout.
static void test_conv_autograd(void) {
    tdm_conv2d_params p = TDM_CONV2D_DEFAULT;
    p.layout = TDM_CONV_LAYOUT_NHWC;
    p.padding[0] = p.padding[1] = 1;
    tdm_tensor *x = tdm_tensor_randn(4, (int64_t[]){2, 5, 6, 3}, TDM_DTYPE_F32, CPU, 3, 0);
    tdm_tensor *w = tdm_tensor_randn(4, (int64_t[]){4, 3, 3, 3}, TDM_DTYPE_F32, CPU, 4, 0);
    tdm_tensor_set_requires_grad(x, true);
    tdm_tensor_set_requires_grad(w, true);
    tdm_tensor *y = tdm_conv2d(x, w, NULL, &p);   // (2,5,6,4)
    tdm_tensor *loss = y ? tdm_sum(y, 0, NULL, false) : NULL;
    CHECK(loss && tdm_backward(loss, NULL) == TDM_OK);
    // d sum / dy = 1 everywhere
    float ones[2 * 5 * 6 * 4];
    for (size_t i = 0; i < sizeof ones / sizeof *ones; i++) ones[i] = 1.0f;
    tdm_tensor *gy1 = tdm_tensor_from_host(4, (int64_t[]){2, 5, 6, 4}, TDM_DTYPE_F32, CPU, ones);
    tdm_tensor *gx = NULL, *gw = NULL;
    tdm_tensor_set_requires_grad(x, false);
    tdm_tensor_set_requires_grad(w, false);
    CHECK(gy1 && tdm_conv2d_backward(gy1, x, w, &p, &gx, &gw, NULL) == TDM_OK);
    CHECK(tensors_identical(tdm_tensor_grad(x), gx));   // borrowed
    CHECK(tensors_identical(tdm_tensor_grad(w), gw));
    tdm_tensor *all[] = {x, w, y, loss, gy1, gx, gw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

// ---- cuda:0 -----------------------------------------------------------------------------------

// |a - e| <= gamma_K m + u_out |e| element-wise; m = the reference's |x|*|w| run.
static bool within(const tdm_tensor *a, const tdm_tensor *e, const tdm_tensor *m, double terms,
                   const char *what) {
    double *ha = host(a), *he = host(e), *hm = host(m);
    bool ok = ha && he && hm;
    const double g = terms * 0x1p-24 / (1 - terms * 0x1p-24);
    for (int64_t i = 0; ok && i < tdm_tensor_numel(e); i++) {
        const double bound = g * hm[i] + 0x1p-24 * fabs(he[i]) + 1e-30;
        if (!(fabs(ha[i] - he[i]) <= bound)) {
            fprintf(stderr, "%s[%lld]: cuda %.9g, reference %.9g, bound %.3g\n", what,
                    (long long)i, ha[i], he[i], bound);
            ok = false;
        }
    }
    free(ha);
    free(he);
    free(hm);
    return ok;
}

static tdm_tensor *abs_of(const tdm_tensor *t) {
    double *h = host(t);
    float *f = h ? malloc((size_t)tdm_tensor_numel(t) * sizeof *f) : NULL;
    for (int64_t i = 0; f && i < tdm_tensor_numel(t); i++) f[i] = (float)fabs(h[i]);
    tdm_tensor *r = f ? tdm_tensor_from_host(tdm_tensor_ndim(t), tdm_tensor_shape(t),
                                             TDM_DTYPE_F32, CPU, f)
                      : NULL;
    free(h);
    free(f);
    return r;
}

static void test_cuda(void) {
    const tdm_device cuda = {TDM_DEVICE_CUDA, 0};
    test_permute(cuda);
    // permute on cuda = permute on cpu, bit for bit (a copy)
    tdm_tensor *x = tdm_tensor_randn(4, (int64_t[]){3, 17, 5, 33}, TDM_DTYPE_BF16, CPU, 8, 0);
    tdm_tensor *xd = tdm_tensor_to(x, cuda, TDM_DTYPE_BF16);
    tdm_tensor *pc = tdm_tensor_permute(x, TO_NHWC), *pd = xd ? tdm_tensor_permute(xd, TO_NHWC) : NULL;
    CHECK(tensors_identical(pc, pd));
    tdm_tensor *all0[] = {x, xd, pc, pd};
    for (size_t i = 0; i < 4; i++) tdm_tensor_free(all0[i]);

    const bool tf32 = tdm_tf32_allowed(TDM_TF32_CONV);
    tdm_tf32_set_allowed(TDM_TF32_CONV, false);
    for (size_t k = 0; k < sizeof CONFIGS / sizeof *CONFIGS; k++) {
        const conv_cfg *f = &CONFIGS[k];
        if (f->n == 0) continue;
        const tdm_conv2d_params p = {{f->stride[0], f->stride[1]}, {f->padding[0], f->padding[1]},
                                     {f->dilation[0], f->dilation[1]}, f->groups,
                                     TDM_CONV_LAYOUT_NHWC, {0, 0}};
        const tdm_dtype dt = TDM_DTYPE_F32;
        tdm_tensor *xc = tdm_tensor_randn(4, (int64_t[]){f->n, f->h, f->w, f->c}, dt, CPU, 21, k);
        tdm_tensor *wc = tdm_tensor_randn(4, (int64_t[]){f->o, f->kh, f->kw, f->c / f->groups}, dt,
                                          CPU, 22, k);
        tdm_tensor *yc = tdm_conv2d(xc, wc, NULL, &p);
        tdm_tensor *gyc = yc ? tdm_tensor_randn(4, tdm_tensor_shape(yc), dt, CPU, 23, k) : NULL;
        tdm_tensor *ax = abs_of(xc), *aw = abs_of(wc), *agy = gyc ? abs_of(gyc) : NULL;
        tdm_tensor *my = tdm_conv2d(ax, aw, NULL, &p);   // sum |x||w| per output
        tdm_tensor *mgx = NULL, *mgw = NULL, *gxc = NULL, *gwc = NULL;
        CHECK(agy && tdm_conv2d_backward(agy, ax, aw, &p, &mgx, &mgw, NULL) == TDM_OK);
        CHECK(gyc && tdm_conv2d_backward(gyc, xc, wc, &p, &gxc, &gwc, NULL) == TDM_OK);
        tdm_tensor *xd2 = tdm_tensor_to(xc, cuda, dt), *wd = tdm_tensor_to(wc, cuda, dt);
        tdm_tensor *gyd = gyc ? tdm_tensor_to(gyc, cuda, dt) : NULL;
        tdm_tensor *yd = xd2 && wd ? tdm_conv2d(xd2, wd, NULL, &p) : NULL;
        tdm_tensor *gxd = NULL, *gwd = NULL;
        CHECK_MSG(yd && gyd && tdm_conv2d_backward(gyd, xd2, wd, &p, &gxd, &gwd, NULL) == TDM_OK,
                  "config %zu on cuda: %s", k, tdm_last_error());
        const double k_fwd = (double)(f->c / f->groups) * f->kh * f->kw;
        const double k_gx = (double)(f->o / f->groups) * f->kh * f->kw;
        const double k_gw = yc ? (double)(tdm_tensor_numel(yc) / f->o) : 0;
        CHECK_MSG(yd && within(yd, yc, my, k_fwd, "y"), "config %zu forward", k);
        CHECK_MSG(gxd && within(gxd, gxc, mgx, k_gx, "grad input"), "config %zu bwd data", k);
        CHECK_MSG(gwd && within(gwd, gwc, mgw, k_gw, "grad weight"), "config %zu bwd filter", k);
        tdm_tensor *all[] = {xc, wc, yc, gyc, ax, aw, agy, my, mgx, mgw, gxc, gwc,
                             xd2, wd, gyd, yd, gxd, gwd};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    }
    tdm_tf32_set_allowed(TDM_TF32_CONV, tf32);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "cpu";
    if (!strcmp(mode, "cuda")) {
        if (!tdm_device_available((tdm_device){TDM_DEVICE_CUDA, 0})) {
            printf("SKIP layout.cuda: %s\n", tdm_last_error());
            return 77;
        }
        test_cuda();
        CHECK_DONE("layout.cuda");
    }
    test_permute(CPU);
    test_conv_exact(TDM_DTYPE_F32);
    test_conv_exact(TDM_DTYPE_BF16);
    test_conv_exact(TDM_DTYPE_F64);
    test_conv_errors();
    test_conv_autograd();
    CHECK_DONE("layout.cpu");
}
