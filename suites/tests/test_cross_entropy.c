/* test_cross_entropy.c — F.cross_entropy's forms beyond (N,C) class indices, where a case file
 * cannot hold the input (non-finite logits) or the point is the shape plumbing: a -inf logit off
 * the target is fine without label smoothing (PyTorch's nll_loss reads the target's term only),
 * gives inf with smoothing and NaN with probability targets (PyTorch's values); the spatial form
 * (N,C,d) equals the rows (N*d, C) it is permuted to, bit for bit; autograd through the weighted
 * form equals its backward; refusals name what is wrong. Values against PyTorch: the golden cases
 * cross_entropy-*-{w,wsum,wlsign,wnone,prob,probls,probnone,spatial,spatialw,spatialprob,
 * unbatched,unbatchedprob}.
 * `test_cross_entropy gpu_fused` (label gpu, exit 77 without a device): the fused classifier on
 * cuda:0 (the forward keeps each row's softmax statistics, the backward reads them instead of
 * recomputing): autograd's gradient equals the explicit backward's bit for bit over the forms
 * (weights, smoothing, ignore_index, probabilities, every reduction, a warp and a block per row,
 * f32/f16/bf16), and the backward slot really reads the statistics (perturbed ones change it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/backend.h"
#include "tensor_eq.h"
#include "tandem/tandem.h"

static const tdm_device CPU = {TDM_DEVICE_CPU, 0};

static bool has(const char *needle) { return strstr(tdm_last_error(), needle) != NULL; }

static double scalar(const tdm_tensor *t) {
    double v = NAN;
    if (!t || tdm_tensor_to_host_f64(t, &v) != TDM_OK) return NAN;
    return v;
}

static void test_infinite_logits(void) {
    float x[2] = {0.0f, -INFINITY};
    int64_t t0 = 0;
    tdm_tensor *logits = tdm_tensor_from_host(2, (int64_t[]){1, 2}, TDM_DTYPE_F32, CPU, x);
    tdm_tensor *target = tdm_tensor_from_host(1, (int64_t[]){1}, TDM_DTYPE_I64, CPU, &t0);
    tdm_tensor *l = tdm_cross_entropy(logits, target, TDM_REDUCTION_MEAN, 0.0, -100);
    CHECK_MSG(scalar(l) == 0.0, "no smoothing: %g, PyTorch 0", scalar(l));
    tdm_tensor *gl = NULL;
    tdm_tensor *one = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, CPU, (float[]){1.0f});
    CHECK(tdm_cross_entropy_backward(one, logits, target, TDM_REDUCTION_MEAN, 0.0, -100, &gl) ==
          TDM_OK);
    float g[2] = {NAN, NAN};
    CHECK(gl && tdm_tensor_to_host(gl, g, sizeof g) == TDM_OK && g[0] == 0.0f && g[1] == 0.0f);
    tdm_tensor *ls = tdm_cross_entropy(logits, target, TDM_REDUCTION_MEAN, 0.1, -100);
    CHECK_MSG(isinf(scalar(ls)) && scalar(ls) > 0, "smoothing 0.1: %g, PyTorch inf", scalar(ls));
    float q[2] = {1.0f, 0.0f};
    tdm_tensor *probs = tdm_tensor_from_host(2, (int64_t[]){1, 2}, TDM_DTYPE_F32, CPU, q);
    tdm_tensor *lp = tdm_cross_entropy(logits, probs, TDM_REDUCTION_MEAN, 0.0, -100);
    CHECK_MSG(isnan(scalar(lp)), "probabilities: %g, PyTorch nan (0 * inf)", scalar(lp));
    tdm_tensor *all[] = {logits, target, l, one, gl, ls, probs, lp};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

// (N,C,d) logits with (N,d) targets = the (N*d, C) rows of logits.permute(0,2,1).
static void test_spatial_rows(bool probs) {
    const int64_t N = 3, C = 5, D = 4;
    tdm_tensor *x = tdm_tensor_randn(3, (int64_t[]){N, C, D}, TDM_DTYPE_F32, CPU, 1, 0);
    tdm_tensor *w = tdm_tensor_rand(1, &C, TDM_DTYPE_F32, CPU, 2, 0);
    tdm_tensor *t = NULL, *t2 = NULL;
    if (probs) {
        t = tdm_tensor_rand(3, (int64_t[]){N, C, D}, TDM_DTYPE_F32, CPU, 3, 0);
        tdm_tensor *tp = tdm_tensor_permute(t, (const int[]){0, 2, 1});
        t2 = tp ? tdm_tensor_reshape(tp, 2, (int64_t[]){N * D, C}) : NULL;
        tdm_tensor_free(tp);
    } else {
        int64_t idx[12];
        for (int i = 0; i < 12; i++) idx[i] = (i * 7) % C;
        t = tdm_tensor_from_host(2, (int64_t[]){N, D}, TDM_DTYPE_I64, CPU, idx);
        t2 = tdm_tensor_from_host(1, (int64_t[]){N * D}, TDM_DTYPE_I64, CPU, idx);
    }
    tdm_tensor *xp = tdm_tensor_permute(x, (const int[]){0, 2, 1});
    tdm_tensor *x2 = xp ? tdm_tensor_reshape(xp, 2, (int64_t[]){N * D, C}) : NULL;
    tdm_tensor *l = tdm_cross_entropy_weighted(x, t, w, TDM_REDUCTION_NONE, 0.1, -100);
    tdm_tensor *l2 = tdm_cross_entropy_weighted(x2, t2, w, TDM_REDUCTION_NONE, 0.1, -100);
    CHECK_MSG(l && tdm_tensor_ndim(l) == 2 && tdm_tensor_shape(l)[1] == D, "loss shape (N,d)");
    CHECK_MSG(tensors_same_bytes(l, l2), "spatial %s loss = its rows'", probs ? "probabilities" : "indices");
    // the gradient comes back in (N,C,d)
    tdm_tensor *gy = l ? tdm_tensor_randn(2, tdm_tensor_shape(l), TDM_DTYPE_F32, CPU, 4, 0) : NULL;
    tdm_tensor *gy2 = gy ? tdm_tensor_reshape(gy, 1, (int64_t[]){N * D}) : NULL;
    tdm_tensor *g = NULL, *g2 = NULL;
    CHECK(gy && tdm_cross_entropy_weighted_backward(gy, x, t, w, TDM_REDUCTION_NONE, 0.1, -100,
                                                    &g) == TDM_OK);
    CHECK(gy2 && tdm_cross_entropy_weighted_backward(gy2, x2, t2, w, TDM_REDUCTION_NONE, 0.1,
                                                     -100, &g2) == TDM_OK);
    tdm_tensor *g2v = g2 ? tdm_tensor_reshape(g2, 3, (int64_t[]){N, D, C}) : NULL;
    tdm_tensor *g2p = g2v ? tdm_tensor_permute(g2v, (const int[]){0, 2, 1}) : NULL;
    CHECK_MSG(g && tdm_tensor_shape(g)[1] == C && tensors_same_bytes(g, g2p), "spatial gradient");
    tdm_tensor *all[] = {x, w, t, t2, xp, x2, l, l2, gy, gy2, g, g2, g2v, g2p};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

static void test_autograd_weighted(void) {
    tdm_tensor *x = tdm_tensor_randn(2, (int64_t[]){6, 4}, TDM_DTYPE_F32, CPU, 5, 0);
    tdm_tensor *w = tdm_tensor_rand(1, (int64_t[]){4}, TDM_DTYPE_F32, CPU, 6, 0);
    int64_t idx[6] = {0, 3, 1, -100, 2, 3};
    tdm_tensor *t = tdm_tensor_from_host(1, (int64_t[]){6}, TDM_DTYPE_I64, CPU, idx);
    tdm_tensor_set_requires_grad(x, true);
    tdm_tensor *l = tdm_cross_entropy_weighted(x, t, w, TDM_REDUCTION_MEAN, 0.2, -100);
    CHECK(l && !strcmp(tdm_tensor_grad_fn_name(l), "cross_entropy"));
    CHECK(l && tdm_backward(l, NULL) == TDM_OK);
    tdm_tensor_set_requires_grad(x, false);
    tdm_tensor *one = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, CPU, (float[]){1.0f});
    tdm_tensor *g = NULL;
    CHECK(tdm_cross_entropy_weighted_backward(one, x, t, w, TDM_REDUCTION_MEAN, 0.2, -100, &g) ==
          TDM_OK);
    CHECK(tensors_same_bytes(tdm_tensor_grad(x), g));
    tdm_tensor *all[] = {x, w, t, l, one, g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

static void test_refusals(void) {
    tdm_tensor *x = tdm_tensor_randn(2, (int64_t[]){3, 4}, TDM_DTYPE_F32, CPU, 7, 0);
    tdm_tensor *q = tdm_tensor_rand(2, (int64_t[]){3, 4}, TDM_DTYPE_F32, CPU, 8, 0);
    tdm_tensor *q64 = tdm_tensor_rand(2, (int64_t[]){3, 4}, TDM_DTYPE_F64, CPU, 8, 0);
    tdm_tensor *qbad = tdm_tensor_rand(2, (int64_t[]){3, 5}, TDM_DTYPE_F32, CPU, 8, 0);
    tdm_tensor *w5 = tdm_tensor_rand(1, (int64_t[]){5}, TDM_DTYPE_F32, CPU, 9, 0);
    tdm_tensor *x3 = tdm_tensor_randn(3, (int64_t[]){2, 4, 3}, TDM_DTYPE_F32, CPU, 10, 0);
    int64_t idx[6] = {0};
    tdm_tensor *t23 = tdm_tensor_from_host(2, (int64_t[]){2, 2}, TDM_DTYPE_I64, CPU, idx);
    tdm_tensor *t3 = tdm_tensor_from_host(1, (int64_t[]){3}, TDM_DTYPE_I64, CPU, idx);
    CHECK(!tdm_cross_entropy(x, q, TDM_REDUCTION_MEAN, 0.0, 1) && has("ignore_index is not supported"));
    CHECK(!tdm_cross_entropy(x, q64, TDM_REDUCTION_MEAN, 0.0, -100));
    CHECK(!tdm_cross_entropy(x, qbad, TDM_REDUCTION_MEAN, 0.0, -100) && has("expected equal shapes"));
    CHECK(!tdm_cross_entropy_weighted(x, t3, w5, TDM_REDUCTION_MEAN, 0.0, -100) && has("weight"));
    CHECK(!tdm_cross_entropy(x3, t23, TDM_REDUCTION_MEAN, 0.0, -100) && has("(N, d1, ...)"));
    tdm_tensor *all[] = {x, q, q64, qbad, w5, x3, t23, t3};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

static const tdm_device CUDA0 = {TDM_DEVICE_CUDA, 0};

// One form on cuda:0: autograd (fused: statistics kept) = the explicit backward (recomputed).
static void fused_form(tdm_dtype dt, int64_t C, bool weighted, double smoothing, bool probs,
                       tdm_reduction red) {
    const int64_t R = 7;
    tdm_tensor *x = tdm_tensor_randn(2, (int64_t[]){R, C}, dt, CUDA0, 11, (uint64_t)C);
    tdm_tensor *w = weighted ? tdm_tensor_rand(1, (int64_t[]){C}, dt, CUDA0, 12, 0) : NULL;
    int64_t idx[7] = {0, C - 1, 3, -100, 2, C / 2, 1};
    tdm_tensor *t = probs ? tdm_tensor_rand(2, (int64_t[]){R, C}, dt, CUDA0, 13, 0)
                          : tdm_tensor_from_host(1, (int64_t[]){R}, TDM_DTYPE_I64, CUDA0, idx);
    tdm_tensor_set_requires_grad(x, true);
    tdm_tensor *l = tdm_cross_entropy_weighted(x, t, w, red, smoothing, probs ? -100 : -100);
    tdm_tensor *gy = red == TDM_REDUCTION_NONE
                         ? tdm_tensor_randn(1, (int64_t[]){R}, dt, CUDA0, 14, 0)
                         : tdm_tensor_randn(0, NULL, dt, CUDA0, 14, 0);
    CHECK_MSG(l && tdm_backward(l, gy) == TDM_OK, "%s", tdm_last_error());
    tdm_tensor_set_requires_grad(x, false);
    tdm_tensor *g = NULL;
    CHECK(tdm_cross_entropy_weighted_backward(gy, x, t, w, red, smoothing, -100, &g) == TDM_OK);
    CHECK_MSG(tensors_same_bytes(tdm_tensor_grad(x), g), "%s C=%lld w=%d eps=%g probs=%d red=%d",
              tdm_dtype_name(dt), (long long)C, weighted, smoothing, probs, (int)red);
    tdm_tensor *all[] = {x, w, t, l, gy, g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

// The slots themselves: the backward with the forward's statistics equals the plain backward
// bit for bit, and with perturbed ones it differs (so it reads them).
static void fused_slots(void) {
    const struct tdm_backend_ops *be = tdm_backend_get(TDM_DEVICE_CUDA);
    CHECK(be && be->cross_entropy_stats && be->cross_entropy_backward_stats);
    if (!be || !be->cross_entropy_stats) return;
    tdm_tensor *x = tdm_tensor_randn(2, (int64_t[]){5, 300}, TDM_DTYPE_F32, CUDA0, 21, 0);
    int64_t idx[5] = {0, 299, 7, 150, 3};
    tdm_tensor *t = tdm_tensor_from_host(1, (int64_t[]){5}, TDM_DTYPE_I64, CUDA0, idx);
    tdm_tensor *loss = tdm_tensor_empty(0, NULL, TDM_DTYPE_F32, CUDA0);
    tdm_tensor *stats = tdm_tensor_empty(2, (int64_t[]){5, 2}, TDM_DTYPE_F32, CUDA0);
    tdm_tensor *one = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, CUDA0, (float[]){1.0f});
    tdm_tensor *g0 = tdm_tensor_empty(2, (int64_t[]){5, 300}, TDM_DTYPE_F32, CUDA0);
    tdm_tensor *g1 = tdm_tensor_empty(2, (int64_t[]){5, 300}, TDM_DTYPE_F32, CUDA0);
    CHECK(be->cross_entropy_stats(x, t, NULL, TDM_REDUCTION_MEAN, 0.0, -100, loss, stats) == TDM_OK);
    CHECK(be->cross_entropy_backward(one, x, t, NULL, TDM_REDUCTION_MEAN, 0.0, -100, g0) == TDM_OK);
    CHECK(be->cross_entropy_backward_stats(one, x, t, NULL, TDM_REDUCTION_MEAN, 0.0, -100, stats,
                                           g1) == TDM_OK);
    CHECK(tensors_same_bytes(g0, g1));
    tdm_tensor *bumped = tdm_add_scalar(stats, 0.5);
    CHECK(bumped && be->cross_entropy_backward_stats(one, x, t, NULL, TDM_REDUCTION_MEAN, 0.0,
                                                     -100, bumped, g1) == TDM_OK);
    CHECK_MSG(!tensors_same_bytes(g0, g1), "the backward ignored its statistics");
    tdm_tensor *all[] = {x, t, loss, stats, one, g0, g1, bumped};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

static int run_gpu_fused(void) {
    if (!tdm_device_available(CUDA0)) {
        printf("SKIP cross_entropy.gpu_fused: %s\n", tdm_last_error());
        return 77;
    }
    const tdm_dtype dts[3] = {TDM_DTYPE_F32, TDM_DTYPE_BF16, TDM_DTYPE_F16};
    for (int d = 0; d < 3; d++)
        for (int64_t C = 67; C <= 2000; C += 1933) {   // a warp per row, then a block per row
            fused_form(dts[d], C, false, 0.0, false, TDM_REDUCTION_MEAN);
            fused_form(dts[d], C, true, 0.1, false, TDM_REDUCTION_MEAN);
            fused_form(dts[d], C, false, 0.0, false, TDM_REDUCTION_SUM);
            fused_form(dts[d], C, true, 0.0, false, TDM_REDUCTION_NONE);
            fused_form(dts[d], C, false, 0.2, true, TDM_REDUCTION_MEAN);
        }
    fused_slots();
    CHECK_DONE("cross_entropy.gpu_fused");
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "gpu_fused")) return run_gpu_fused();
    test_infinite_logits();
    test_spatial_rows(false);
    test_spatial_rows(true);
    test_autograd_weighted();
    test_refusals();
    CHECK_DONE("cross_entropy.forms");
}
