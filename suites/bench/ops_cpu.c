/* ops_cpu.c — suite `ops`: the throughput of tandem's ops on the CPU reference backend, figures that
 * make sense on a CPU: matmul (GFLOP/s), an elementwise add and a softmax (GB/s), a small conv2d
 * layer (GFLOP/s) and an MLP training step through the nn/optim API (samples/s).
 *
 * Every benchmark times random inputs (N(0,1) from Philox, never zeros), is warmed up by the
 * harness (Google Benchmark's MinWarmUpTime), and checks the data its last timed iteration
 * produced against a double-precision computation; a mismatch fails the benchmark with the
 * element, both values and the bound. Units: GB/s = 1e9 bytes/s, GFLOP/s = 1e9 FLOP/s; each
 * benchmark's byte or FLOP count is in its description (`bench list`), its JSON counters
 * ("FLOP/iteration", "bytes/iteration") and its label. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "suites/bench/bench_train.h"   // bench_work_train
#include "tandem/tandem.h"

static bench_suite_config ops_cfg;   // the device and sizes of this registration

enum { OPS_SEED = 20261122 };
#define U_F32 (1.0 / 16777216.0)   // unit roundoff of f32, 2^-24

// ---- helpers ------------------------------------------------------------------------------

static tdm_tensor *ops_randn(int ndim, const int64_t *shape, uint64_t offset) {
    return tdm_tensor_randn(ndim, shape, TDM_DTYPE_F32, ops_cfg.device, OPS_SEED, offset);
}

// Fails the benchmark with "what: <tdm_last_error()>".
static void ops_fail(tdm_gb_state *st, const char *what) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what, tdm_last_error());
    tdm_gb_skip_with_error(st, msg);
}

// A tensor's elements as double, on the host (malloc'd; NULL on failure, benchmark failed).
static double *ops_host(tdm_gb_state *st, const tdm_tensor *t, const char *what) {
    double *h = malloc((size_t)tdm_tensor_numel(t) * sizeof *h);
    if (!h || tdm_tensor_to_host_f64(t, h) != TDM_OK) {
        free(h);
        if (!h) tdm_gb_skip_with_error(st, "out of memory");
        else ops_fail(st, what);
        return NULL;
    }
    return h;
}

// Positions to check: a small LCG over [0, n), the same on every run.
static int64_t ops_pick(uint64_t *s, int64_t n) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (int64_t)((*s >> 33) % (uint64_t)n);
}

static void ops_mismatch(tdm_gb_state *st, const char *where, double got, double want,
                         double bound) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s = %.9g, expected %.9g (double), |error| %.3g > bound %.3g",
             where, got, want, fabs(got - want), bound);
    tdm_gb_skip_with_error(st, msg);
}

// ---- matmul: C = A @ B, (n,n) x (n,n) ------------------------------------------------------

static void verify_matmul(tdm_gb_state *st, const tdm_tensor *a, const tdm_tensor *b,
                          const tdm_tensor *c, int64_t n) {
    double *ha = ops_host(st, a, "matmul"), *hb = ha ? ops_host(st, b, "matmul") : NULL;
    double *hc = hb ? ops_host(st, c, "matmul") : NULL;
    uint64_t s = 1;
    // 16 elements against a double dot product; bound n * u * sum |a_ik b_kj| (f32 accumulation)
    for (int t = 0; hc && t < 16; t++) {
        int64_t i = ops_pick(&s, n), j = ops_pick(&s, n);
        double dot = 0, mag = 0;
        for (int64_t k = 0; k < n; k++) {
            dot += ha[i * n + k] * hb[k * n + j];
            mag += fabs(ha[i * n + k] * hb[k * n + j]);
        }
        double bound = (double)n * U_F32 * mag + 1e-30;
        if (!(fabs(hc[i * n + j] - dot) <= bound)) {
            char where[64];
            snprintf(where, sizeof where, "matmul: C[%lld,%lld]", (long long)i, (long long)j);
            ops_mismatch(st, where, hc[i * n + j], dot, bound);
            break;
        }
    }
    free(ha);
    free(hb);
    free(hc);
}

static void bm_matmul(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    int64_t n = tdm_gb_arg(st, 0), shape[2] = {n, n};
    tdm_tensor *a = ops_randn(2, shape, 1), *b = ops_randn(2, shape, 2), *c = NULL;
    if (!a || !b) ops_fail(st, "matmul: inputs");
    while (tdm_gb_keep_running(st)) {
        tdm_gb_flush_caches(st);   // --flush-l2: cold caches, outside the timed region
        tdm_tensor_free(c);
        if (!(c = tdm_matmul(a, b))) ops_fail(st, "matmul");
    }
    if (c && !tdm_gb_error_occurred(st)) verify_matmul(st, a, b, c, n);
    double flop = 2.0 * (double)n * (double)n * (double)n;
    tdm_gb_counter(st, "GFLOP/s", flop / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "FLOP/iteration", flop, TDM_GB_PLAIN);
    tdm_gb_set_label(st, "FLOP = 2*n^3");
    tdm_tensor_free(a);
    tdm_tensor_free(b);
    tdm_tensor_free(c);
}

// ---- add: c = a + b, n f32 elements --------------------------------------------------------

static void bm_add(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    int64_t n = tdm_gb_arg(st, 0);
    tdm_tensor *a = ops_randn(1, &n, 3), *b = ops_randn(1, &n, 4), *c = NULL;
    if (!a || !b) ops_fail(st, "add: inputs");
    while (tdm_gb_keep_running(st)) {
        tdm_gb_flush_caches(st);   // --flush-l2: cold caches, outside the timed region
        tdm_tensor_free(c);
        if (!(c = tdm_add(a, b, 1.0))) ops_fail(st, "add");
    }
    if (c && !tdm_gb_error_occurred(st)) {
        // Every element; one f32 rounding of the exact sum: |c - (a + b)| <= u |a + b|.
        double *ha = ops_host(st, a, "add"), *hb = ha ? ops_host(st, b, "add") : NULL;
        double *hc = hb ? ops_host(st, c, "add") : NULL;
        for (int64_t i = 0; hc && i < n; i++) {
            double want = ha[i] + hb[i], bound = U_F32 * fabs(want);
            if (!(fabs(hc[i] - want) <= bound)) {
                char where[64];
                snprintf(where, sizeof where, "add: c[%lld]", (long long)i);
                ops_mismatch(st, where, hc[i], want, bound);
                break;
            }
        }
        free(ha);
        free(hb);
        free(hc);
    }
    double bytes = 3.0 * 4.0 * (double)n;
    tdm_gb_counter(st, "GB/s", bytes / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "bytes/iteration", bytes, TDM_GB_PLAIN);
    tdm_gb_set_label(st, "bytes = 3*4*n");
    tdm_tensor_free(a);
    tdm_tensor_free(b);
    tdm_tensor_free(c);
}

// ---- softmax over the last dim of (rows, cols) ---------------------------------------------

static void bm_softmax(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    int64_t rows = tdm_gb_arg(st, 0), cols = tdm_gb_arg(st, 1), shape[2] = {rows, cols};
    tdm_tensor *x = ops_randn(2, shape, 5), *y = NULL;
    if (!x) ops_fail(st, "softmax: input");
    while (tdm_gb_keep_running(st)) {
        tdm_gb_flush_caches(st);   // --flush-l2: cold caches, outside the timed region
        tdm_tensor_free(y);
        if (!(y = tdm_softmax(x, 1))) ops_fail(st, "softmax");
    }
    if (y && !tdm_gb_error_occurred(st)) {
        // 4 rows against exp(x - max) / sum in double; bound 16 u y + 2^-126 (a few roundings).
        double *hx = ops_host(st, x, "softmax"), *hy = hx ? ops_host(st, y, "softmax") : NULL;
        uint64_t s = 2;
        for (int t = 0; hy && t < 4 && !tdm_gb_error_occurred(st); t++) {
            int64_t r = ops_pick(&s, rows);
            const double *xr = hx + r * cols, *yr = hy + r * cols;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < cols; j++) mx = fmax(mx, xr[j]);
            for (int64_t j = 0; j < cols; j++) sum += exp(xr[j] - mx);
            for (int64_t j = 0; j < cols; j++) {
                double want = exp(xr[j] - mx) / sum, bound = 16 * U_F32 * want + 0x1p-126;
                if (!(fabs(yr[j] - want) <= bound)) {
                    char where[64];
                    snprintf(where, sizeof where, "softmax: y[%lld,%lld]", (long long)r,
                             (long long)j);
                    ops_mismatch(st, where, yr[j], want, bound);
                    break;
                }
            }
        }
        free(hx);
        free(hy);
    }
    double bytes = 2.0 * 4.0 * (double)rows * (double)cols;
    tdm_gb_counter(st, "GB/s", bytes / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "bytes/iteration", bytes, TDM_GB_PLAIN);
    tdm_gb_set_label(st, "bytes = 2*4*rows*cols");
    tdm_tensor_free(x);
    tdm_tensor_free(y);
}

// ---- conv2d: x (N,C,H,W), weight (O,C,k,k), stride 1, padding k/2 -> (N,O,H,W) --------------

static void bm_conv2d(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    int64_t N = tdm_gb_arg(st, 0), C = tdm_gb_arg(st, 1), HW = tdm_gb_arg(st, 2);
    int64_t O = tdm_gb_arg(st, 3), K = tdm_gb_arg(st, 4);
    int64_t xs[4] = {N, C, HW, HW}, ws[4] = {O, C, K, K};
    tdm_conv2d_params p = TDM_CONV2D_DEFAULT;
    p.padding[0] = p.padding[1] = (int)(K / 2);
    tdm_tensor *x = ops_randn(4, xs, 6), *w = ops_randn(4, ws, 7), *y = NULL;
    if (!x || !w) ops_fail(st, "conv2d: inputs");
    while (tdm_gb_keep_running(st)) {
        tdm_gb_flush_caches(st);   // --flush-l2: cold caches, outside the timed region
        tdm_tensor_free(y);
        if (!(y = tdm_conv2d(x, w, NULL, &p))) ops_fail(st, "conv2d");
    }
    int64_t Ho = HW + 2 * (K / 2) - K + 1, Wo = Ho;
    if (y && !tdm_gb_error_occurred(st)) {
        // 8 outputs against a direct sum in double; bound C*k*k * u * sum |x w|.
        double *hx = ops_host(st, x, "conv2d"), *hw = hx ? ops_host(st, w, "conv2d") : NULL;
        double *hy = hw ? ops_host(st, y, "conv2d") : NULL;
        uint64_t s = 3;
        for (int t = 0; hy && t < 8; t++) {
            int64_t n = ops_pick(&s, N), o = ops_pick(&s, O), i = ops_pick(&s, Ho),
                    j = ops_pick(&s, Wo);
            double sum = 0, mag = 0;
            for (int64_t c = 0; c < C; c++)
                for (int64_t u = 0; u < K; u++)
                    for (int64_t v = 0; v < K; v++) {
                        int64_t hi = i + u - K / 2, wj = j + v - K / 2;
                        if (hi < 0 || hi >= HW || wj < 0 || wj >= HW) continue;
                        double a = hx[((n * C + c) * HW + hi) * HW + wj] *
                                   hw[((o * C + c) * K + u) * K + v];
                        sum += a;
                        mag += fabs(a);
                    }
            double got = hy[((n * O + o) * Ho + i) * Wo + j];
            double bound = (double)(C * K * K) * U_F32 * mag + 1e-30;
            if (!(fabs(got - sum) <= bound)) {
                char where[96];
                snprintf(where, sizeof where, "conv2d: y[%lld,%lld,%lld,%lld]", (long long)n,
                         (long long)o, (long long)i, (long long)j);
                ops_mismatch(st, where, got, sum, bound);
                break;
            }
        }
        free(hx);
        free(hw);
        free(hy);
    }
    double flop = 2.0 * (double)(N * O * Ho * Wo) * (double)(C * K * K);
    tdm_gb_counter(st, "GFLOP/s", flop / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "FLOP/iteration", flop, TDM_GB_PLAIN);
    tdm_gb_set_label(st, "FLOP = 2*N*O*H'*W'*C*kh*kw");
    tdm_tensor_free(x);
    tdm_tensor_free(w);
    tdm_tensor_free(y);
}

// ---- an MLP training step: forward, cross-entropy, backward, SGD update ---------------------

#define OPS_MLP "mlp:256-128-10"

typedef struct {
    tdm_module *m;
    tdm_optimizer *opt;
    tdm_tensor *x, *y;
} mlp_bench;

static void mlp_free(mlp_bench *b) {
    tdm_optimizer_free(b->opt);
    tdm_module_free(b->m);
    tdm_tensor_free(b->x);
    tdm_tensor_free(b->y);
}

static tdm_status mlp_setup(mlp_bench *b, int64_t batch) {
    int64_t xs[2] = {batch, 256};
    b->x = ops_randn(2, xs, 8);
    int64_t *labels = malloc((size_t)batch * sizeof *labels);
    if (!labels) return TDM_ERR_OOM;
    uint64_t s = 4;
    for (int64_t i = 0; i < batch; i++) labels[i] = ops_pick(&s, 10);
    b->y = tdm_tensor_from_host(1, &batch, TDM_DTYPE_I64, ops_cfg.device, labels);
    free(labels);
    if (!b->x || !b->y || !(b->m = tdm_nn_from_spec(OPS_MLP))) return tdm_last_status();
    tdm_status s2 = tdm_module_init(b->m, OPS_SEED);
    if (s2 == TDM_OK) s2 = tdm_module_to(b->m, ops_cfg.device);
    if (s2 != TDM_OK) return s2;
    tdm_tensor *params[8];
    int np = tdm_module_parameters(b->m, params, 8);
    tdm_sgd_params p = {.lr = 0.01};
    b->opt = np > 0 && np <= 8 ? tdm_optim_sgd(params, np, &p) : NULL;
    return b->opt ? TDM_OK : TDM_ERR_ARG;
}

// The batch's loss, or NAN with the benchmark failed; with step, also one training step.
static double mlp_step(tdm_gb_state *st, mlp_bench *b, bool step) {
    tdm_optimizer_zero_grad(b->opt);
    tdm_tensor *out = tdm_module_forward(b->m, b->x);
    tdm_tensor *loss = out ? tdm_cross_entropy(out, b->y, TDM_REDUCTION_MEAN, 0.0, -100) : NULL;
    tdm_status s = loss ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && step) s = tdm_backward(loss, NULL);
    if (s == TDM_OK && step) s = tdm_optimizer_step(b->opt);
    double v = NAN;
    if (s == TDM_OK && !step) s = tdm_tensor_to_host_f64(loss, &v);
    if (s != TDM_OK) ops_fail(st, "mlp_train");
    tdm_tensor_free(loss);
    tdm_tensor_free(out);
    return v;
}

static void bm_mlp_train(tdm_gb_state *st, void *ctx) {
    (void)ctx;
    int64_t batch = tdm_gb_arg(st, 0);
    mlp_bench b = {0};
    double before = NAN, after = NAN;
    if (mlp_setup(&b, batch) != TDM_OK) ops_fail(st, "mlp_train: setup");
    else before = mlp_step(st, &b, false);
    while (tdm_gb_keep_running(st)) mlp_step(st, &b, true);
    if (!tdm_gb_error_occurred(st)) {
        // Steps of plain SGD (lr 0.01) on one batch must lower its loss.
        after = mlp_step(st, &b, false);
        if (!tdm_gb_error_occurred(st) && !(after < before)) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "mlp_train: the loss did not fall over %lld steps (%.6g -> %.6g)",
                     (long long)tdm_gb_iterations(st), before, after);
            tdm_gb_skip_with_error(st, msg);
        }
    }
    tdm_gb_counter(st, "samples/s", (double)batch, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "samples/iteration", (double)batch, TDM_GB_PLAIN);
    tdm_gb_set_label(st, OPS_MLP ", SGD lr 0.01, samples = batch");
    mlp_free(&b);
}

// ---- work descriptions (bench list --json; the peer's rows match: test peer.work_match) ----

static void ops_matmul_work(const int64_t *a, int n, void *ctx, char *buf, int len) {
    (void)ctx, (void)n;
    snprintf(buf, (size_t)len,
             "{\"op\": \"matmul\", \"dtype\": \"f32\", \"shapes\": [[%lld, %lld], [%lld, %lld]], "
             "\"per_iteration\": 1, \"FLOP\": %.17g}", (long long)a[0], (long long)a[0],
             (long long)a[0], (long long)a[0], 2.0 * (double)a[0] * (double)a[0] * (double)a[0]);
}

static void ops_add_work(const int64_t *a, int n, void *ctx, char *buf, int len) {
    (void)ctx, (void)n;
    snprintf(buf, (size_t)len,
             "{\"op\": \"add\", \"dtype\": \"f32\", \"shapes\": [[%lld], [%lld]], "
             "\"per_iteration\": 1, \"bytes\": %lld}", (long long)a[0], (long long)a[0],
             (long long)(12 * a[0]));
}

static void ops_softmax_work(const int64_t *a, int n, void *ctx, char *buf, int len) {
    (void)ctx, (void)n;
    snprintf(buf, (size_t)len,
             "{\"op\": \"softmax\", \"dtype\": \"f32\", \"shapes\": [[%lld, %lld]], \"dim\": 1, "
             "\"per_iteration\": 1, \"bytes\": %lld}", (long long)a[0], (long long)a[1],
             (long long)(8 * a[0] * a[1]));
}

static void ops_conv2d_work(const int64_t *a, int n, void *ctx, char *buf, int len) {
    (void)ctx, (void)n;   // n c hw o k; stride 1, padding k/2
    long long N = a[0], C = a[1], HW = a[2], O = a[3], K = a[4];
    snprintf(buf, (size_t)len,
             "{\"op\": \"conv2d\", \"dtype\": \"f32\", \"shapes\": [[%lld, %lld, %lld, %lld], "
             "[%lld, %lld, %lld, %lld]], \"padding\": %lld, \"per_iteration\": 1, \"FLOP\": %.17g}",
             N, C, HW, HW, O, C, K, K, K / 2, 2.0 * N * O * HW * HW * C * K * K);
}

static void ops_mlp_work(const int64_t *a, int n, void *ctx, char *buf, int len) {
    (void)ctx, (void)n;
    bench_work_train(buf, len, OPS_MLP, "f32", a[0], 0.01, 0, 1);
}

// ---- registration -------------------------------------------------------------------------

static int ops_register(const bench_suite_config *cfg) {
    ops_cfg = *cfg;
    tdm_gb_bench *b = tdm_gb_register("matmul", bm_matmul, NULL);
    if (!b) return -1;
    tdm_gb_arg_names(b, 1, (const char *const[]){"n"});
    static const int64_t sizes[] = {64, 128, 256};
    for (int i = 0; i < (cfg->quick ? 1 : 3); i++) tdm_gb_args(b, 1, &sizes[i]);
    tdm_gb_set_info(
        b,
        "C = A @ B, A and B (n,n) f32 from N(0,1); FLOP = 2*n^3; checks 16 elements of C "
        "against double dot products",
        "GFLOP/s");
    tdm_gb_set_work(b, ops_matmul_work, NULL);

    if (!(b = tdm_gb_register("add", bm_add, NULL))) return -1;
    tdm_gb_arg_names(b, 1, (const char *const[]){"n"});
    tdm_gb_args(b, 1, (const int64_t[]){1 << 20});
    tdm_gb_set_info(b,
                    "c = a + b over n f32 elements from N(0,1); bytes = 3*4*n (2 reads, 1 write); "
                    "checks every element",
                    "GB/s");
    tdm_gb_set_work(b, ops_add_work, NULL);

    if (!(b = tdm_gb_register("softmax", bm_softmax, NULL))) return -1;
    tdm_gb_arg_names(b, 2, (const char *const[]){"rows", "cols"});
    tdm_gb_args(b, 2, (const int64_t[]){256, 1024});
    tdm_gb_set_info(b,
                    "softmax over the last dim of (rows,cols) f32; bytes = 2*4*rows*cols (1 read, "
                    "1 write); checks 4 rows against double",
                    "GB/s");
    tdm_gb_set_work(b, ops_softmax_work, NULL);

    if (!(b = tdm_gb_register("conv2d", bm_conv2d, NULL))) return -1;
    tdm_gb_arg_names(b, 5, (const char *const[]){"n", "c", "hw", "o", "k"});
    tdm_gb_args(b, 5, (const int64_t[]){4, 16, 32, 32, 3});
    tdm_gb_set_info(b,
                    "conv2d of x (n,c,hw,hw) with weight (o,c,k,k), f32, stride 1, padding k/2, "
                    "no bias; FLOP = 2*N*O*H'*W'*C*kh*kw; checks 8 outputs against double",
                    "GFLOP/s");
    tdm_gb_set_work(b, ops_conv2d_work, NULL);

    if (!(b = tdm_gb_register("mlp_train", bm_mlp_train, NULL))) return -1;
    tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
    tdm_gb_args(b, 1, (const int64_t[]){64});
    tdm_gb_set_info(b,
                    "one training step of " OPS_MLP " (forward, cross-entropy, backward, SGD "
                    "update) through the nn/optim API on a random batch; samples/s = batch / "
                    "step time; checks that the loss falls",
                    "samples/s");
    tdm_gb_set_work(b, ops_mlp_work, NULL);
    return 0;
}

const bench_suite bench_suite_ops = {
    .name = "ops",
    .description = "the reference backend's op throughput on the CPU: matmul, add, softmax, "
                   "conv2d, an MLP training step",
    .doc = "docs/suites/ops.md",
    .devices = BENCH_SUITE_CPU,
    .register_benchmarks = ops_register,
};
