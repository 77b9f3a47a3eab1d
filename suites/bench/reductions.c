/* reductions.c — suite `reductions`: whether the CUDA backend's few-output reductions run at the
 * device's memory bandwidth (issue 14, point 3; docs/suites/reductions.md). Each benchmark
 * moves B bytes of f32 data, timed with CUDA events; `GB/s` = every byte read and written / t /
 * 1e9 (docs/RESULTS_FORMAT.md), and the report's ratios divide each by the device-to-device copy
 * of the same tensor (`copy_d2d`: B read + B written), the goal being >= 0.85:
 *   copy_d2d                 y = x.clone()                                  2 B moved
 *   bias_grad_nchw           gb = gy summed over (N, H, W), (N,64,H,W)       B
 *   bias_grad_nhwc           the same sum in channels-last memory (N,H,W,64) B
 *   batch_norm2d_fwd         training forward of (N,64,H,W): mean, variance,
 *                            normalize                                       3 B read + B written
 *   batch_norm2d_bwd         training backward: sums of gy and gy xhat, gx   3 B read + B written
 *   batch_norm1d_fwd         training forward of (N*H*W, 64): strided by C   3 B read + B written
 * Arguments: n (the batch N; H = W = 56 as ResNet's first stage, 28 with --quick). cuda only.
 * Checks: the outputs are finite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "tandem/tandem.h"

static bench_suite_config rd_cfg;

typedef enum { RD_COPY, RD_BIAS_NCHW, RD_BIAS_NHWC, RD_BN2D_FWD, RD_BN2D_BWD, RD_BN1D_FWD, RD_COUNT } rd_kind;

static const struct {
    const char *name, *info;
    double traffic;   // bytes moved per input byte
} rd_kinds[RD_COUNT] = {
    {"copy_d2d", "y = x.clone() of (N,64,H,W) f32: the device-to-device bandwidth (B read + B "
                 "written)", 2},
    {"bias_grad_nchw", "conv's bias gradient: (N,64,H,W) f32 summed to (64) (B read)", 1},
    {"bias_grad_nhwc", "conv's bias gradient in channels-last memory: (N,H,W,64) summed to (64)", 1},
    {"batch_norm2d_fwd", "BatchNorm2d training forward of (N,64,H,W) f32: mean, variance, "
                         "normalize (3 B read + B written)", 4},
    {"batch_norm2d_bwd", "BatchNorm2d training backward of (N,64,H,W) f32: sums of gy and "
                         "gy*xhat, then gx (3 B read + B written)", 4},
    {"batch_norm1d_fwd", "batch-norm training forward of (N*H*W, 64) f32, channels innermost "
                         "(3 B read + B written)", 4},
};
static int rd_ctx[RD_COUNT];

static void rd_fail(tdm_gb_state *st, const char *what) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what, tdm_last_error());
    tdm_gb_skip_with_error(st, msg);
}

// One run of kind k; the output to check is put in *out (freed by the caller).
static tdm_status rd_run(rd_kind k, tdm_tensor *x, tdm_tensor *gy, tdm_tensor *w, tdm_tensor *b,
                         tdm_tensor *rm, tdm_tensor *rv, tdm_tensor **out) {
    *out = NULL;
    switch (k) {
    case RD_COPY: *out = tdm_tensor_clone(x); break;
    case RD_BIAS_NCHW: *out = tdm_sum(x, 3, (const int[]){0, 2, 3}, false); break;
    case RD_BIAS_NHWC: *out = tdm_sum(x, 3, (const int[]){0, 1, 2}, false); break;
    case RD_BN2D_FWD:
    case RD_BN1D_FWD: *out = tdm_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5, NULL, NULL); break;
    case RD_BN2D_BWD: {
        tdm_tensor *sm = NULL, *si = NULL;
        tdm_tensor *y = tdm_batch_norm(x, NULL, NULL, w, b, true, 0.1, 1e-5, &sm, &si);
        tdm_status s = y ? tdm_batch_norm_backward(gy, x, w, sm, si, true, out, NULL, NULL)
                         : tdm_last_status();
        tdm_tensor_free(y);
        tdm_tensor_free(sm);
        tdm_tensor_free(si);
        return s;
    }
    default: break;
    }
    return *out ? TDM_OK : tdm_last_status();
}

static void bm_reduce(tdm_gb_state *st, void *arg) {
    const rd_kind k = (rd_kind)*(const int *)arg;
    const tdm_device dev = rd_cfg.device;
    const int64_t N = tdm_gb_arg(st, 0), HW = rd_cfg.quick ? 28 : 56, C = 64;
    const int64_t nchw[4] = {N, C, HW, HW}, nhwc[4] = {N, HW, HW, C}, rows[2] = {N * HW * HW, C};
    const int nd = k == RD_BN1D_FWD ? 2 : 4;
    const int64_t *shape = k == RD_BN1D_FWD ? rows : k == RD_BIAS_NHWC ? nhwc : nchw;
    tdm_tensor *x = tdm_tensor_randn(nd, shape, TDM_DTYPE_F32, dev, 1, 0);
    tdm_tensor *gy = k == RD_BN2D_BWD ? tdm_tensor_randn(nd, shape, TDM_DTYPE_F32, dev, 2, 0) : NULL;
    const int64_t cshape[1] = {C};
    tdm_tensor *w = tdm_tensor_rand(1, cshape, TDM_DTYPE_F32, dev, 3, 0);
    tdm_tensor *b = tdm_tensor_rand(1, cshape, TDM_DTYPE_F32, dev, 4, 0);
    tdm_tensor *rm = tdm_tensor_rand(1, cshape, TDM_DTYPE_F32, dev, 5, 0);
    tdm_tensor *rv = tdm_tensor_rand(1, cshape, TDM_DTYPE_F32, dev, 6, 0);
    tdm_event *e0 = tdm_event_new(dev), *e1 = tdm_event_new(dev);
    tdm_tensor *out = NULL;
    bool ok = x && (gy || k != RD_BN2D_BWD) && w && b && rm && rv && e0 && e1;
    if (!ok) rd_fail(st, "setup");
    // one untimed run: plans, scratch in the caching allocator
    if (ok && rd_run(k, x, gy, w, b, rm, rv, &out) != TDM_OK) {
        rd_fail(st, rd_kinds[k].name);
        ok = false;
    }
    while (tdm_gb_keep_running(st)) {
        if (!ok) continue;
        tdm_tensor_free(out);
        double ms = 0;
        tdm_status s = tdm_event_record(e0, NULL);
        if (s == TDM_OK) s = rd_run(k, x, gy, w, b, rm, rv, &out);
        if (s == TDM_OK) s = tdm_event_record(e1, NULL);
        if (s == TDM_OK) s = tdm_event_elapsed_ms(e0, e1, &ms);
        if (s != TDM_OK) {
            rd_fail(st, "timed run");
            ok = false;
            continue;
        }
        tdm_gb_set_iteration_time(st, ms / 1e3);
    }
    if (ok && out) {   // finite outputs (the first element, and the count of non-finite ones)
        const int64_t n = tdm_tensor_numel(out);
        double *h = malloc((size_t)n * sizeof *h);
        int64_t bad = 0;
        if (!h || tdm_tensor_to_host_f64(out, h) != TDM_OK) {
            rd_fail(st, "copy to host");
        } else {
            for (int64_t i = 0; i < n; i++) bad += !isfinite(h[i]);
            if (bad) tdm_gb_skip_with_error(st, "non-finite outputs");
        }
        free(h);
    }
    const double bytes = (double)N * HW * HW * C * 4.0;
    tdm_gb_counter(st, "GB/s", bytes * rd_kinds[k].traffic / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "bytes", bytes, TDM_GB_PLAIN);
    char label[160];
    snprintf(label, sizeof label, "f32 %lldx64x%lldx%lld", (long long)N, (long long)HW,
             (long long)HW);
    tdm_gb_set_label(st, label);
    tdm_tensor *all[] = {x, gy, w, b, rm, rv, out};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    tdm_event_free(e0);
    tdm_event_free(e1);
}

// The work of one timed iteration (bench list --json; the PyTorch peer's rows match: test
// peer.work_match): the op on its input shape, and the bytes GB/s counts (read + written).
static void rd_work(const int64_t *args, int n_args, void *ctx, char *buf, int len) {
    const rd_kind k = (rd_kind)*(const int *)ctx;
    const long long N = n_args ? (long long)args[0] : 0, HW = rd_cfg.quick ? 28 : 56, C = 64;
    static const char *const ops[RD_COUNT] = {
        "copy", "sum", "sum", "batch_norm", "batch_norm+batch_norm_backward", "batch_norm"};
    char shape[96], extra[160] = "";
    if (k == RD_BN1D_FWD)
        snprintf(shape, sizeof shape, "[%lld, %lld]", N * HW * HW, C);
    else if (k == RD_BIAS_NHWC)
        snprintf(shape, sizeof shape, "[%lld, %lld, %lld, %lld]", N, HW, HW, C);
    else
        snprintf(shape, sizeof shape, "[%lld, %lld, %lld, %lld]", N, C, HW, HW);
    if (k == RD_BIAS_NCHW) snprintf(extra, sizeof extra, ", \"dims\": [0, 2, 3]");
    if (k == RD_BIAS_NHWC) snprintf(extra, sizeof extra, ", \"dims\": [0, 1, 2]");
    if (k == RD_BN2D_FWD || k == RD_BN1D_FWD || k == RD_BN2D_BWD)
        snprintf(extra, sizeof extra, ", \"training\": true, \"running_stats\": %s, "
                 "\"eps\": 1e-05%s", k == RD_BN2D_BWD ? "false" : "true",
                 k == RD_BN2D_BWD ? ", \"grads\": [\"x\"]" : "");
    snprintf(buf, (size_t)len,
             "{\"op\": \"%s\", \"dtype\": \"f32\", \"shapes\": [%s]%s, \"per_iteration\": 1, "
             "\"bytes\": %.17g}",
             ops[k], shape, extra, (double)N * HW * HW * C * 4.0 * rd_kinds[k].traffic);
}

static int rd_register(const bench_suite_config *cfg) {
    rd_cfg = *cfg;
    const int64_t n = cfg->quick ? 4 : 32;
    for (int k = 0; k < RD_COUNT; k++) {
        rd_ctx[k] = k;
        tdm_gb_bench *b = tdm_gb_register(rd_kinds[k].name, bm_reduce, &rd_ctx[k]);
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"n"});
        tdm_gb_args(b, 1, &n);
        tdm_gb_use_manual_time(b);
        tdm_gb_set_info(b, rd_kinds[k].info, "GB/s");
        tdm_gb_set_work(b, rd_work, &rd_ctx[k]);
    }
    return 0;
}

static const bench_ratio rd_ratios[] = {
    {"bias_grad_nchw / copy_d2d", "bias_grad_nchw", "copy_d2d", "GB/s"},
    {"bias_grad_nhwc / copy_d2d", "bias_grad_nhwc", "copy_d2d", "GB/s"},
    {"batch_norm2d_fwd / copy_d2d", "batch_norm2d_fwd", "copy_d2d", "GB/s"},
    {"batch_norm2d_bwd / copy_d2d", "batch_norm2d_bwd", "copy_d2d", "GB/s"},
    {"batch_norm1d_fwd / copy_d2d", "batch_norm1d_fwd", "copy_d2d", "GB/s"},
    {0},
};

const bench_suite bench_suite_reductions = {
    .name = "reductions",
    .description = "few-output reductions (bias gradients, batch-norm statistics) against the "
                   "device-to-device copy bandwidth, GB/s of bytes read + written (goal: >= 0.85 "
                   "of the copy's)",
    .doc = "docs/suites/reductions.md",
    .devices = BENCH_SUITE_CUDA,
    .ratios = rd_ratios,
    .register_benchmarks = rd_register,
};
