/* test_conv_engines.c — which convolution engine runs, on cuda:0 (exit 77 with one line without
 * one), and that tandem's direct kernels compute what the reference does (issue 14, point 1):
 *   covered    heuristic and deterministic modes never pick a Winograd or FFT engine (their error
 *              is not the direct summation's the conformance bound covers); f32, 3x3, stride 1,
 *              TF32 off, where such engines apply
 *   direct     the direct mode runs tandem's kernels (tdm_conv_algo_last says so) on f64 NHWC
 *              with groups, dilation, stride and padding, and f32/f16 NCHW: forward, backward
 *              data and backward filter against the cpu within the direct-summation bound
 *   fallback   run where cuDNN has no engine at all (on the emulated device,
 *              TANDEM_EMU_CUDNN_ENGINES=none): every pass runs on the direct kernels in the
 *              default mode, named "cuDNN has no engine", never "unsupported"
 * Operands are non-negative, so sum |x||w| is the exact result itself and the bound per element
 * is (2 n u_acc + 2 u_out) |y| with n the terms of the sum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

static const tdm_device cpu = {TDM_DEVICE_CPU, 0}, cuda0 = {TDM_DEVICE_CUDA, 0};

typedef struct {
    int64_t N, C, H, W, O, k;
    tdm_conv2d_params p;
    tdm_dtype dt;
} conv_case;

static tdm_tensor *nonneg(int nd, const int64_t *shape, tdm_dtype dt, uint64_t seed) {
    return tdm_tensor_rand(nd, shape, dt, cpu, seed, 0);   // U[0,1)
}

// max over elements of |a - b| / ((2 n u_acc + 2 u_out) |b| + tiny): <= 1 passes.
static double worst(const tdm_tensor *gpu, const tdm_tensor *ref, int64_t n, tdm_dtype dt) {
    const int64_t m = tdm_tensor_numel(ref);
    double *a = malloc((size_t)(m + 1) * sizeof *a), *b = malloc((size_t)(m + 1) * sizeof *b);
    double w = INFINITY;
    if (tdm_tensor_to_host_f64(gpu, a) == TDM_OK && tdm_tensor_to_host_f64(ref, b) == TDM_OK) {
        const double u_acc = dt == TDM_DTYPE_F64 ? 0x1p-53 : 0x1p-24;
        const double u_out = dt == TDM_DTYPE_F64 ? 0x1p-53 : dt == TDM_DTYPE_F32 ? 0x1p-24
                             : dt == TDM_DTYPE_F16 ? 0x1p-11 : 0x1p-8;
        w = 0;
        for (int64_t i = 0; i < m; i++) {
            const double r = fabs(a[i] - b[i]) / ((2.0 * (double)n * u_acc + 2 * u_out) * fabs(b[i]) + 1e-300);
            if (!(r <= w)) w = r;   // NaN sticks
        }
    }
    free(a);
    free(b);
    return w;
}

static bool engine_has(tdm_conv_pass pass, const char *needle, char *name, size_t n) {
    tdm_conv_algo_info info;
    if (tdm_conv_algo_last(cuda0, pass, &info) != TDM_OK) {
        snprintf(name, n, "(none: %s)", tdm_last_error());
        return false;
    }
    snprintf(name, n, "%s", info.engine);
    for (char *c = name; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    return strstr(name, needle) != NULL;
}

// Runs the three passes on cpu and cuda:0; checks them within the bound, and that each pass's
// engine name contains `want` (NULL: not checked) and none of `banned` (NULL-terminated).
static int run_case(const char *what, const conv_case *cc, const char *want,
                    const char *const *banned) {
    const bool nhwc = cc->p.layout == TDM_CONV_LAYOUT_NHWC;
    const int64_t Cg = cc->C / cc->p.groups;
    int64_t xs[4] = {cc->N, cc->C, cc->H, cc->W}, ws[4] = {cc->O, Cg, cc->k, cc->k};
    if (nhwc) {
        xs[1] = cc->H, xs[2] = cc->W, xs[3] = cc->C;
        ws[1] = cc->k, ws[2] = cc->k, ws[3] = Cg;
    }
    tdm_tensor *x = nonneg(4, xs, cc->dt, 11), *w = nonneg(4, ws, cc->dt, 12);
    tdm_tensor *y = tdm_conv2d(x, w, NULL, &cc->p);
    CHECK_MSG(x && w && y, "%s: %s", what, tdm_last_error());
    if (!y) return 1;
    tdm_tensor *gy = nonneg(4, tdm_tensor_shape(y), cc->dt, 13);
    tdm_tensor *xg = tdm_tensor_to(x, cuda0, cc->dt), *wg = tdm_tensor_to(w, cuda0, cc->dt);
    tdm_tensor *gyg = tdm_tensor_to(gy, cuda0, cc->dt);
    tdm_tensor *yg = xg && wg ? tdm_conv2d(xg, wg, NULL, &cc->p) : NULL;
    tdm_tensor *gx = NULL, *gw = NULL, *gxg = NULL, *gwg = NULL;
    CHECK(tdm_conv2d_backward(gy, x, w, &cc->p, &gx, &gw, NULL) == TDM_OK);
    tdm_status s = yg ? tdm_conv2d_backward(gyg, xg, wg, &cc->p, &gxg, &gwg, NULL) : TDM_ERR_ARG;
    CHECK_MSG(yg && s == TDM_OK, "%s on cuda:0: %s", what, tdm_last_error());
    if (yg && s == TDM_OK) {
        const int64_t *ys = tdm_tensor_shape(y);
        const int64_t OHW = nhwc ? ys[1] * ys[2] : ys[2] * ys[3];
        const double r[3] = {worst(yg, y, Cg * cc->k * cc->k, cc->dt),
                             worst(gxg, gx, cc->O / cc->p.groups * cc->k * cc->k, cc->dt),
                             worst(gwg, gw, cc->N * OHW, cc->dt)};
        const tdm_conv_pass passes[3] = {TDM_CONV_PASS_FORWARD, TDM_CONV_PASS_BACKWARD_DATA,
                                         TDM_CONV_PASS_BACKWARD_FILTER};
        for (int i = 0; i < 3; i++) {
            char name[128];
            const bool has_want = engine_has(passes[i], want ? want : "", name, sizeof name);
            printf("%s %s: engine '%s', error %.3g of the bound\n", what,
                   tdm_conv_pass_name(passes[i]), name, r[i]);
            CHECK_MSG(r[i] <= 1.0, "%s %s: error %.3g x the bound", what,
                      tdm_conv_pass_name(passes[i]), r[i]);
            CHECK_MSG(has_want, "%s %s: engine '%s', want '%s'", what,
                      tdm_conv_pass_name(passes[i]), name, want);
            for (int b = 0; banned && banned[b]; b++) {
                char n2[128];
                CHECK_MSG(!engine_has(passes[i], banned[b], n2, sizeof n2),
                          "%s %s: engine '%s' in %s mode", what, tdm_conv_pass_name(passes[i]),
                          n2, tdm_conv_algo_mode_name(tdm_conv_algo_mode_get()));
            }
        }
    }
    tdm_tensor *all[] = {x, w, y, gy, xg, wg, gyg, yg, gx, gw, gxg, gwg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    return 0;
}

static const conv_case f32_3x3 = {2, 8, 10, 10, 8, 3, {{1, 1}, {1, 1}, {1, 1}, 1, TDM_CONV_LAYOUT_NCHW, {0, 0}},
                                  TDM_DTYPE_F32};
static const conv_case f64_nhwc = {2, 4, 9, 8, 6, 3, {{2, 1}, {2, 1}, {2, 1}, 2, TDM_CONV_LAYOUT_NHWC, {0, 0}},
                                   TDM_DTYPE_F64};
static const conv_case f16_nchw = {2, 6, 7, 7, 4, 2, {{1, 2}, {0, 1}, {1, 1}, 2, TDM_CONV_LAYOUT_NCHW, {0, 0}},
                                   TDM_DTYPE_F16};

int main(int argc, char **argv) {
    const char *mode = argc == 2 ? argv[1] : "";
    if (strcmp(mode, "covered") && strcmp(mode, "direct") && strcmp(mode, "fallback")) {
        fprintf(stderr, "usage: test_conv_engines covered | direct | fallback\n");
        return 2;
    }
    if (!tdm_device_available(cuda0)) {
        printf("SKIP conv_engines.%s: %s\n", mode, tdm_last_error());
        return 77;
    }
    tdm_tf32_set_allowed(TDM_TF32_CONV, false);
    if (!strcmp(mode, "covered")) {
        static const char *const banned[] = {"winograd", "fft", NULL};
        tdm_conv_algo_mode_set(TDM_CONV_ALGO_HEURISTIC);
        run_case("f32 3x3 heuristic", &f32_3x3, NULL, banned);
        tdm_conv_algo_mode_set(TDM_CONV_ALGO_DETERMINISTIC);
        run_case("f32 3x3 deterministic", &f32_3x3, NULL, banned);
    } else if (!strcmp(mode, "direct")) {
        tdm_conv_algo_mode_set(TDM_CONV_ALGO_DIRECT);
        run_case("f64 nhwc groups dilation direct", &f64_nhwc, "tandem direct (direct mode)", NULL);
        run_case("f32 3x3 direct", &f32_3x3, "tandem direct (direct mode)", NULL);
        run_case("f16 nchw groups stride direct", &f16_nchw, "tandem direct (direct mode)", NULL);
    } else {
        tdm_conv_algo_mode_set(TDM_CONV_ALGO_HEURISTIC);
        run_case("f64 nhwc groups dilation, no engine", &f64_nhwc, "cudnn has no engine", NULL);
        run_case("f32 3x3, no engine", &f32_3x3, "cudnn has no engine", NULL);
    }
    CHECK_DONE("conv_engines");
}
