/* amp.c — suite `amp`: what mixed precision buys. Training steps of the seed models in f32, TF32,
 * fp16 (autocast + gradient scaler) and bf16 (autocast) at several batch sizes: samples/s, step
 * time, peak memory, and the loss after a fixed number of steps against the f32 run (speed and
 * accuracy side by side); matmul and conv throughput per precision in GFLOP/s, with the share of
 * the device's peak where tandem knows the device's per-SM rate.
 *
 * On the cpu (the reference backend) only f32 and bf16 are registered: TF32 is a tensor-core
 * input format (the reference computes in double whatever the switch says, so a "tf32" figure
 * would be the f32 one under another name), and fp16's reason to exist, the gradient scaler,
 * guards against f16's range on hardware that computes in f16; bf16 is what CPU autocast uses.
 *
 * The GPT benchmarks train_gpt_<tag>_<prec>/batch:8 (issue 23) time nanoGPT's GPT the same way:
 * GPT-2 124M's shape on a GPU (rows of 1024 tokens; 256 with --quick), the tiny
 * gpt:L2-H2-D32-T16-V67 on the cpu and on the emulated device, on a synthetic token batch
 * (bench_gpt_tokens) with nanoGPT's loss over (B*T, V) logits. They report tokens/s and, on a GPU
 * whose model suites/check/expectations.json knows, MFU: model FLOPs per token (nanoGPT's
 * estimate_mfu: 6N + 12*L*D*T) x tokens/s over the model's dense peak for the precision.
 *
 * Checks: every step's loss is finite; the fixed protocol's loss falls and stays within 5% of the
 * initial loss of the f32 run's; matmul and conv outputs are compared with double at sampled
 * elements, the bound stated with each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "suites/bench/bench_train.h"
#include "tandem/tandem.h"

static bench_suite_config amp_cfg;

enum { AMP_SEED = 1, AMP_MAX_MODELS = 8 };

static bool on_cuda(void) { return amp_cfg.device.type == TDM_DEVICE_CUDA; }

static bool prec_here(bench_prec p) {
    return on_cuda() || p == BENCH_PREC_F32 || p == BENCH_PREC_BF16;
}

static tdm_dtype prec_dtype(bench_prec p) {
    return p == BENCH_PREC_FP16 ? TDM_DTYPE_F16 : p == BENCH_PREC_BF16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
}

// Steps of the accuracy protocol (a fresh model, the same batch, SGD lr 0.01).
static int protocol_steps(void) { return on_cuda() ? 20 : 2; }

// ---- the accuracy protocol, once per (model, precision, batch) ----------------------------------

typedef struct {
    const char *spec;
    int prec;
    int64_t batch;
    double before, after;
} protocol_result;

static protocol_result amp_protocols[64];
static int amp_n_protocols;

// The protocol's losses for (model, prec, batch), run on first use. False with the benchmark
// failed when it cannot run.
static bool amp_protocol(tdm_gb_state *st, const char *spec, bench_prec prec, int64_t batch,
                         protocol_result *out) {
    for (int i = 0; i < amp_n_protocols; i++)
        if (!strcmp(amp_protocols[i].spec, spec) && amp_protocols[i].prec == (int)prec &&
            amp_protocols[i].batch == batch) {
            *out = amp_protocols[i];
            return true;
        }
    protocol_result r = {.spec = spec, .prec = prec, .batch = batch};
    if (bench_train_protocol(spec, amp_cfg.device, prec, batch, AMP_SEED, protocol_steps(),
                             &r.before, &r.after) != TDM_OK) {
        bench_fail(st, "the accuracy protocol");
        return false;
    }
    if (amp_n_protocols < (int)(sizeof amp_protocols / sizeof *amp_protocols))
        amp_protocols[amp_n_protocols++] = r;
    *out = r;
    return true;
}

// ---- train_<model>_<prec>/batch:B ------------------------------------------------------------

typedef struct {
    const char *spec;
    bench_prec prec;
} train_ctx;

// The seed models' [0, AMP_MAX_MODELS) and the GPT's [AMP_MAX_MODELS].
static train_ctx amp_train_ctx[AMP_MAX_MODELS + 1][BENCH_PREC_COUNT];

static void bm_train(tdm_gb_state *st, void *arg) {
    const train_ctx *c = arg;
    int64_t batch = tdm_gb_arg(st, 0);
    bench_trainer *t = NULL;   // the row's, kept across its calls (bench_trainer_row)
    bool fresh = false;
    bool ok = bench_trainer_row(&t, &fresh, c->spec, amp_cfg.device, c->prec, batch, AMP_SEED) ==
              TDM_OK;
    if (!ok) bench_fail(st, "setup");
    if (ok && tdm_memory_reset_peak(amp_cfg.device) != TDM_OK) {
        bench_fail(st, "tdm_memory_reset_peak");
        ok = false;
    }
    const int skipped0 = ok ? t->skipped : 0;
    ok = bench_trainer_timed_steps(st, t, ok, NULL, NULL);
    tdm_memory_stats ms = {0};
    if (ok && tdm_memory_stats_get(amp_cfg.device, &ms) != TDM_OK) {
        bench_fail(st, "tdm_memory_stats_get");
        ok = false;
    }
    int skipped = ok ? t->skipped - skipped0 : 0;   // this call's steps the scaler skipped
    int64_t n_params = 0;
    for (int i = 0; ok && i < t->n_params; i++) n_params += tdm_tensor_numel(t->params[i]);
    bool lm = !strncmp(c->spec, "gpt:", 4);
    if (!ok) bench_trainer_row_drop();
    // Accuracy: this precision's loss after the protocol's steps against the f32 run's.
    protocol_result mine, f32;
    if (ok && amp_protocol(st, c->spec, c->prec, batch, &mine) &&
        amp_protocol(st, c->spec, BENCH_PREC_F32, batch, &f32)) {
        char msg[300];
        double tol = 0.05 * f32.before;
        if (!isfinite(mine.after) || !(mine.after < mine.before)) {
            snprintf(msg, sizeof msg, "the loss did not fall over %d steps (%.6g -> %.6g)",
                     protocol_steps(), mine.before, mine.after);
            tdm_gb_skip_with_error(st, msg);
        } else if (!(fabs(mine.after - f32.after) <= tol)) {
            snprintf(msg, sizeof msg,
                     "loss after %d steps %.6g, f32's %.6g: differs by more than 5%% of the "
                     "initial loss (%.4g)",
                     protocol_steps(), mine.after, f32.after, tol);
            tdm_gb_skip_with_error(st, msg);
        } else {
            tdm_gb_counter(st, "loss", mine.after, TDM_GB_PLAIN);
            tdm_gb_counter(st, "loss_f32", f32.after, TDM_GB_PLAIN);
            tdm_gb_counter(st, "loss_vs_f32", mine.after - f32.after, TDM_GB_PLAIN);
        }
    }
    // a GPT's rate is tokens/s (its main metric)
    bench_rate_counters(st, (double)batch, bench_tokens_per_sample(c->spec), true);
    tdm_gb_counter(st, "peak_bytes", (double)ms.peak_allocated, TDM_GB_PLAIN);
    tdm_gb_counter(st, "skipped_steps", (double)skipped, TDM_GB_PLAIN);
    char note[200] = "";
    if (lm) bench_gpt_counters(st, c->spec, amp_cfg.device, batch, c->prec, n_params, note,
                               sizeof note);
    char label[400];
    snprintf(label, sizeof label, "%s, %s, SGD lr 0.01; loss after %d steps vs f32%s", c->spec,
             bench_prec_name(c->prec), protocol_steps(), note);
    tdm_gb_set_label(st, label);
}

// ---- matmul_<prec>/n:N and conv_<prec>/batch:B ---------------------------------------------------

// Dense FLOP per SM per clock where tandem knows the architecture (0: unknown); the peak is this
// x SMs x the maximum SM clock (an upper bound: NVIDIA quotes tensor peaks at a lower clock).
static double flop_per_sm_clock(int cc_major, int cc_minor, bench_prec p) {
    static const struct {
        int major, minor;
        double f32, tf32, half;
    } archs[] = {{8, 0, 128, 1024, 2048},    // A100: 19.5 / 156 / 312 TFLOP/s at 1410 MHz
                 {9, 0, 256, 2048, 4096}};   // H100 SXM: 67 / 495 / 989 TFLOP/s
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (archs[i].major == cc_major && archs[i].minor == cc_minor)
            return p == BENCH_PREC_F32 ? archs[i].f32
                   : p == BENCH_PREC_TF32 ? archs[i].tf32 : archs[i].half;
    return 0;
}

// The device's peak GFLOP/s for p, or 0 when unknown (always on the cpu).
static double device_peak_gflops(bench_prec p) {
    tdm_device_props d;
    if (!on_cuda() || tdm_device_props_get(amp_cfg.device, &d) != TDM_OK) return 0;
    double per = flop_per_sm_clock(d.cc_major, d.cc_minor, p);
    return per > 0 && d.sm_count > 0 && d.clock_sm_max_mhz > 0
               ? per * d.sm_count * d.clock_sm_max_mhz * 1e6 / 1e9 : 0;
}

// Products per timed iteration: on cuda enough work (about 2^38 FLOP) that the device
// synchronize ending the iteration is a small part of it; 1 on the cpu.
static int reps_for(double flop) {
    if (!on_cuda()) return 1;
    int r = 1;
    while (r < 1024 && (double)r * flop < 0x1p38) r *= 2;
    return r;
}

static double unit_roundoff(tdm_dtype dt) {
    return dt == TDM_DTYPE_F16 ? 0x1p-11 : dt == TDM_DTYPE_BF16 ? 0x1p-8 : 0x1p-24;
}

static double *amp_host(tdm_gb_state *st, const tdm_tensor *t) {
    double *h = malloc((size_t)tdm_tensor_numel(t) * sizeof *h);
    if (!h || tdm_tensor_to_host_f64(t, h) != TDM_OK) {
        free(h);
        bench_fail(st, "reading back the output");
        return NULL;
    }
    return h;
}

static int64_t pick(uint64_t *s, int64_t n) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (int64_t)((*s >> 33) % (uint64_t)n);
}

// The timed loop shared by matmul and conv: reps products per iteration, then a device
// synchronize. Returns the last product (or NULL, the benchmark failed).
typedef tdm_tensor *(*product_fn)(const tdm_tensor *a, const tdm_tensor *b);
static tdm_tensor *timed_products(tdm_gb_state *st, product_fn f, const tdm_tensor *a,
                                  const tdm_tensor *b, int reps, bench_prec p) {
    tdm_tensor *c = NULL;
    unsigned tf32 = bench_prec_apply(p);
    bool ok = true;
    while (tdm_gb_keep_running(st)) {
        for (int r = 0; ok && r < reps; r++) {
            tdm_tensor_free(c);
            if (!(c = f(a, b))) {
                bench_fail(st, "product");
                ok = false;
            }
        }
        if (ok && tdm_device_synchronize(amp_cfg.device) != TDM_OK) {   // waits for the queue
            bench_fail(st, "synchronizing");
            ok = false;
        }
    }
    bench_prec_restore(tf32);
    if (!ok) {
        tdm_tensor_free(c);
        return NULL;
    }
    return c;
}

static void product_counters(tdm_gb_state *st, double flop, int reps, bench_prec p,
                             const char *formula) {
    tdm_gb_counter(st, "GFLOP/s", reps * flop / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "FLOP/iteration", reps * flop, TDM_GB_PLAIN);
    double peak = device_peak_gflops(p);
    if (peak > 0) tdm_gb_counter(st, "peak_GFLOP_per_s", peak, TDM_GB_PLAIN);
    char label[200];
    snprintf(label, sizeof label, "%s, %d per iteration%s", formula, reps,
             peak > 0 ? "; peak_share = GFLOP/s / peak_GFLOP_per_s" : "");
    tdm_gb_set_label(st, label);
}

// peak_share is a rate over a constant: set after the rate is known, from the iteration time.
static void peak_share(tdm_gb_state *st, double flop_per_iter, double seconds, bench_prec p) {
    double peak = device_peak_gflops(p);
    if (peak > 0 && seconds > 0)
        tdm_gb_counter(st, "peak_share", flop_per_iter / seconds / 1e9 / peak, TDM_GB_PLAIN);
}

static tdm_tensor *matmul2(const tdm_tensor *a, const tdm_tensor *b) { return tdm_matmul(a, b); }

static void bm_matmul(tdm_gb_state *st, void *arg) {
    bench_prec p = (bench_prec)(intptr_t)arg;
    int64_t n = tdm_gb_arg(st, 0), shape[2] = {n, n};
    tdm_dtype dt = prec_dtype(p);
    tdm_tensor *a = tdm_tensor_randn(2, shape, dt, amp_cfg.device, AMP_SEED, 11);
    tdm_tensor *b = tdm_tensor_randn(2, shape, dt, amp_cfg.device, AMP_SEED, 12), *c = NULL;
    double flop = 2.0 * (double)n * (double)n * (double)n;
    int reps = reps_for(flop);
    double t0 = bench_now();
    if (!a || !b) {
        bench_fail(st, "inputs");
        while (tdm_gb_keep_running(st)) {}
    } else {
        c = timed_products(st, matmul2, a, b, reps, p);
    }
    double per_iter = (bench_now() - t0) / (double)(tdm_gb_iterations(st) ? tdm_gb_iterations(st) : 1);
    if (c) {
        // 16 elements against double: |c - ab| <= u_out |ab| + (n u_f32 + tf32 2^-10) sum|a b|
        double *ha = amp_host(st, a), *hb = ha ? amp_host(st, b) : NULL;
        double *hc = hb ? amp_host(st, c) : NULL;
        uint64_t s = 1;
        for (int k = 0; hc && k < 16; k++) {
            int64_t i = pick(&s, n), j = pick(&s, n);
            double dot = 0, mag = 0;
            for (int64_t q = 0; q < n; q++) {
                dot += ha[i * n + q] * hb[q * n + j];
                mag += fabs(ha[i * n + q] * hb[q * n + j]);
            }
            double bound = unit_roundoff(dt) * fabs(dot) +
                           ((double)n * 0x1p-24 + (p == BENCH_PREC_TF32 ? 0x1p-10 : 0)) * mag + 1e-30;
            if (!(fabs(hc[i * n + j] - dot) <= bound)) {
                char msg[300];
                snprintf(msg, sizeof msg, "C[%lld,%lld] = %.9g, expected %.9g, |error| > bound %.3g",
                         (long long)i, (long long)j, hc[i * n + j], dot, bound);
                tdm_gb_skip_with_error(st, msg);
                break;
            }
        }
        free(ha);
        free(hb);
        free(hc);
    }
    product_counters(st, flop, reps, p, "FLOP = 2*n^3");
    peak_share(st, reps * flop, per_iter, p);
    tdm_tensor_free(a);
    tdm_tensor_free(b);
    tdm_tensor_free(c);
}

// 3x3 conv 64 -> 64 on 56x56, stride 1, padding 1, no bias (ResNet's conv2_x layer).
enum { CONV_C = 64, CONV_HW = 56, CONV_K = 3 };

static tdm_tensor *conv3x3(const tdm_tensor *x, const tdm_tensor *w) {
    tdm_conv2d_params p = TDM_CONV2D_DEFAULT;
    p.padding[0] = p.padding[1] = 1;
    return tdm_conv2d(x, w, NULL, &p);
}

static void bm_conv(tdm_gb_state *st, void *arg) {
    bench_prec p = (bench_prec)(intptr_t)arg;
    int64_t B = tdm_gb_arg(st, 0), C = CONV_C, H = CONV_HW, K = CONV_K;
    int64_t xs[4] = {B, C, H, H}, ws[4] = {C, C, K, K};
    tdm_dtype dt = prec_dtype(p);
    tdm_tensor *x = tdm_tensor_randn(4, xs, dt, amp_cfg.device, AMP_SEED, 13);
    tdm_tensor *w = tdm_tensor_randn(4, ws, dt, amp_cfg.device, AMP_SEED, 14), *y = NULL;
    double flop = 2.0 * (double)B * C * C * K * K * H * H;
    int reps = reps_for(flop);
    double t0 = bench_now();
    if (!x || !w) {
        bench_fail(st, "inputs");
        while (tdm_gb_keep_running(st)) {}
    } else {
        y = timed_products(st, conv3x3, x, w, reps, p);
    }
    double per_iter = (bench_now() - t0) / (double)(tdm_gb_iterations(st) ? tdm_gb_iterations(st) : 1);
    if (y) {
        // 8 outputs against double: bound u_out |y| + (C K K u_f32 + tf32 2^-10) sum |x w|
        double *hx = amp_host(st, x), *hw = hx ? amp_host(st, w) : NULL;
        double *hy = hw ? amp_host(st, y) : NULL;
        uint64_t s = 3;
        for (int t = 0; hy && t < 8; t++) {
            int64_t n = pick(&s, B), o = pick(&s, C), i = pick(&s, H), j = pick(&s, H);
            double sum = 0, mag = 0;
            for (int64_t c = 0; c < C; c++)
                for (int64_t u = 0; u < K; u++)
                    for (int64_t v = 0; v < K; v++) {
                        int64_t hi = i + u - 1, wj = j + v - 1;
                        if (hi < 0 || hi >= H || wj < 0 || wj >= H) continue;
                        double a = hx[((n * C + c) * H + hi) * H + wj] * hw[((o * C + c) * K + u) * K + v];
                        sum += a;
                        mag += fabs(a);
                    }
            double got = hy[((n * C + o) * H + i) * H + j];
            double bound = unit_roundoff(dt) * fabs(sum) +
                           ((double)(C * K * K) * 0x1p-24 + (p == BENCH_PREC_TF32 ? 0x1p-10 : 0)) * mag +
                           1e-30;
            if (!(fabs(got - sum) <= bound)) {
                char msg[300];
                snprintf(msg, sizeof msg,
                         "y[%lld,%lld,%lld,%lld] = %.9g, expected %.9g, |error| > bound %.3g",
                         (long long)n, (long long)o, (long long)i, (long long)j, got, sum, bound);
                tdm_gb_skip_with_error(st, msg);
                break;
            }
        }
        free(hx);
        free(hw);
        free(hy);
    }
    product_counters(st, flop, reps, p, "FLOP = 2*B*64*64*9*56*56");
    peak_share(st, reps * flop, per_iter, p);
    tdm_tensor_free(x);
    tdm_tensor_free(w);
    tdm_tensor_free(y);
}

// ---- work descriptions (bench list --json; the peer's rows must match: test peer.work_match) ----

static void amp_train_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const train_ctx *c = ctx;
    bench_work_train(buf, len, c->spec, bench_prec_name(c->prec), n ? args[0] : 0, 0.01, 0, 1);
}

// matmul_<prec>/n:N: reps_for products of (n,n) @ (n,n) per timed iteration
static void amp_matmul_work(const int64_t *args, int n_args, void *ctx, char *buf, int len) {
    bench_prec p = (bench_prec)(intptr_t)ctx;
    long long n = n_args ? (long long)args[0] : 0;
    double flop = 2.0 * (double)n * (double)n * (double)n;
    int reps = reps_for(flop);
    snprintf(buf, (size_t)len,
             "{\"op\": \"matmul\", \"dtype\": \"%s\", \"shapes\": [[%lld, %lld], [%lld, %lld]], "
             "\"per_iteration\": %d, \"FLOP\": %.17g}",
             bench_prec_name(p), n, n, n, n, reps, reps * flop);
}

// conv_<prec>/batch:B: reps_for 3x3 convolutions (B,64,56,56) * (64,64,3,3), padding 1
static void amp_conv_work(const int64_t *args, int n_args, void *ctx, char *buf, int len) {
    bench_prec p = (bench_prec)(intptr_t)ctx;
    long long B = n_args ? (long long)args[0] : 0;
    double flop = 2.0 * (double)B * CONV_C * CONV_C * CONV_K * CONV_K * CONV_HW * CONV_HW;
    int reps = reps_for(flop);
    snprintf(buf, (size_t)len,
             "{\"op\": \"conv2d\", \"dtype\": \"%s\", \"shapes\": [[%lld, %d, %d, %d], "
             "[%d, %d, %d, %d]], \"padding\": 1, \"per_iteration\": %d, \"FLOP\": %.17g}",
             bench_prec_name(p), B, CONV_C, CONV_HW, CONV_HW, CONV_C, CONV_C, CONV_K, CONV_K, reps,
             reps * flop);
}

// ---- registration -------------------------------------------------------------------------

// Under a time budget (bench run --budget), a model whose initial weights take more than a quarter
// of the suite's share to draw (bench_spec_init_seconds: the 60 M-parameter MLP about 6 s, GPT-2
// 124M about 12 s, once per process) is left out, each of its rows recorded as skipped for time
// with the figures: it fits a full run's share but not --quick's on a GPU.
static bool amp_model_fits(const char *name, const char *spec, const int64_t *batches,
                           int n_batches) {
    double init_s = bench_spec_init_seconds(spec);
    if (amp_cfg.budget_s <= 0 || init_s <= 0.25 * amp_cfg.budget_s) return true;
    char id[160], why[300];
    snprintf(why, sizeof why,
             "skipped for time: drawing %s's initial weights takes about %.0f s on the host, over "
             "a quarter of the suite's share of --budget (%.0f s)",
             spec, init_s, amp_cfg.budget_s);
    for (int p = 0; p < BENCH_PREC_COUNT; p++)
        for (int i = 0; prec_here((bench_prec)p) && i < n_batches; i++) {
            snprintf(id, sizeof id, "train_%s_%s/batch:%lld", name, bench_prec_name(p),
                     (long long)batches[i]);
            bench_suite_skip(id, why);
        }
    return false;
}

static int amp_register(const bench_suite_config *cfg) {
    amp_cfg = *cfg;
    amp_n_protocols = 0;
    static const int64_t cuda_batches[] = {64, 256, 1024}, cpu_batches[] = {64, 256};
    const int64_t *batches = on_cuda() ? cuda_batches : cpu_batches;
    int n_batches = cfg->quick ? 1 : on_cuda() ? 3 : 2;
    char name[96], info[400];
    for (int m = 0; bench_models[m].name && m < AMP_MAX_MODELS; m++) {
        if (bench_models[m].cuda_only && !on_cuda()) continue;
        if (!amp_model_fits(bench_models[m].name, bench_models[m].spec, batches, n_batches))
            continue;
        for (int p = 0; p < BENCH_PREC_COUNT; p++) {
            if (!prec_here((bench_prec)p)) continue;
            amp_train_ctx[m][p] = (train_ctx){bench_models[m].spec, (bench_prec)p};
            snprintf(name, sizeof name, "train_%s_%s", bench_models[m].name, bench_prec_name(p));
            tdm_gb_bench *b = tdm_gb_register(name, bm_train, &amp_train_ctx[m][p]);
            if (!b) return -1;
            tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
            for (int i = 0; i < n_batches; i++) tdm_gb_args(b, 1, &batches[i]);
            snprintf(info, sizeof info,
                     "a training step of %s in %s (forward, cross-entropy, backward, SGD, "
                     "loss.item()); samples/s = batch / step time; counters peak_bytes, loss "
                     "after a fixed run vs f32's",
                     bench_models[m].spec, bench_prec_name(p));
            tdm_gb_set_info(b, info, "samples/s");
            tdm_gb_set_work(b, amp_train_work, &amp_train_ctx[m][p]);
        }
    }
    // GPT: GPT-2 124M's shape on a GPU, the tiny one on the cpu and the emulated device
    const bench_gpt_model *g = bench_gpt_for(cfg->device, cfg->quick);
    const int64_t gpt_batch = BENCH_GPT_BATCH;
    const bool gpt_fits = amp_model_fits(g->name, g->spec, &gpt_batch, 1);
    for (int p = 0; gpt_fits && p < BENCH_PREC_COUNT; p++) {
        if (!prec_here((bench_prec)p)) continue;
        amp_train_ctx[AMP_MAX_MODELS][p] = (train_ctx){g->spec, (bench_prec)p};
        snprintf(name, sizeof name, "train_%s_%s", g->name, bench_prec_name(p));
        tdm_gb_bench *b = tdm_gb_register(name, bm_train, &amp_train_ctx[AMP_MAX_MODELS][p]);
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
        tdm_gb_args(b, 1, (const int64_t[]){BENCH_GPT_BATCH});
        snprintf(info, sizeof info,
                 "a training step of nanoGPT's GPT %s in %s on a synthetic token batch (forward, "
                 "cross-entropy over (B*T,V), backward, SGD, loss.item()); tokens/s = B*T / step "
                 "time; MFU = tokens/s * (6N + 12*L*D*T) / the GPU model's dense %s peak "
                 "(suites/check/expectations.json; not for f32, the cpu or the emulated device)",
                 g->spec, bench_prec_name(p), bench_prec_name(p));
        tdm_gb_set_info(b, info, "tokens/s");
        tdm_gb_set_work(b, amp_train_work, &amp_train_ctx[AMP_MAX_MODELS][p]);
    }
    static const int64_t cuda_n[] = {1024, 2048, 4096, 8192}, cpu_n[] = {128, 256};
    static const int64_t cuda_b[] = {8, 32, 128}, cpu_b[] = {1, 4};
    for (int p = 0; p < BENCH_PREC_COUNT; p++) {
        if (!prec_here((bench_prec)p)) continue;
        snprintf(name, sizeof name, "matmul_%s", bench_prec_name(p));
        tdm_gb_bench *b = tdm_gb_register(name, bm_matmul, (void *)(intptr_t)p);
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"n"});
        for (int i = 0; i < (cfg->quick ? 1 : on_cuda() ? 4 : 2); i++)
            tdm_gb_args(b, 1, on_cuda() ? &cuda_n[i] : &cpu_n[i]);
        snprintf(info, sizeof info,
                 "C = A @ B, (n,n) %s inputs from N(0,1)%s; FLOP = 2*n^3; 16 elements checked "
                 "against double",
                 p == BENCH_PREC_TF32 ? "f32" : bench_prec_name(p),
                 p == BENCH_PREC_TF32 ? " with TF32 allowed" : "");
        tdm_gb_set_info(b, info, "GFLOP/s");
        tdm_gb_set_work(b, amp_matmul_work, (void *)(intptr_t)p);

        snprintf(name, sizeof name, "conv_%s", bench_prec_name(p));
        if (!(b = tdm_gb_register(name, bm_conv, (void *)(intptr_t)p))) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
        for (int i = 0; i < (cfg->quick ? 1 : on_cuda() ? 3 : 2); i++)
            tdm_gb_args(b, 1, on_cuda() ? &cuda_b[i] : &cpu_b[i]);
        snprintf(info, sizeof info,
                 "3x3 conv 64->64 on (batch,64,56,56) %s, padding 1; FLOP = 2*B*64*64*9*56*56; "
                 "8 outputs checked against double",
                 bench_prec_name(p));
        tdm_gb_set_info(b, info, "GFLOP/s");
        tdm_gb_set_work(b, amp_conv_work, (void *)(intptr_t)p);
    }
    return 0;
}

#define AMP_RATIO(model, a, b) \
    {#a " / " #b " (" #model ")", "train_" #model "_" #a, "train_" #model "_" #b, "samples/s"}
#define AMP_GPT_RATIO(model, a, b) \
    {#a " / " #b " (" #model ")", "train_" #model "_" #a, "train_" #model "_" #b, "tokens/s"}
#define AMP_GPT_RATIOS(model)                                                               \
    AMP_GPT_RATIO(model, fp16, f32), AMP_GPT_RATIO(model, bf16, f32),                       \
        AMP_GPT_RATIO(model, tf32, f32), AMP_GPT_RATIO(model, fp16, tf32),                  \
        AMP_GPT_RATIO(model, bf16, tf32)
#define AMP_RATIOS(model)                                                               \
    AMP_RATIO(model, fp16, f32), AMP_RATIO(model, bf16, f32), AMP_RATIO(model, tf32, f32), \
        AMP_RATIO(model, fp16, tf32), AMP_RATIO(model, bf16, tf32)

static const bench_ratio amp_ratios[] = {
    AMP_RATIOS(mlp_1000_512_10),
    AMP_RATIOS(mlp_1000_512_128_10),
    AMP_RATIOS(mlp_10000_5000_2000_10),
    AMP_RATIOS(cnn_bn),
    AMP_GPT_RATIOS(gpt_124m),
    AMP_GPT_RATIOS(gpt_124m_t256),
    AMP_GPT_RATIOS(gpt_tiny),
    {"fp16 / f32 (matmul)", "matmul_fp16", "matmul_f32", "GFLOP/s"},
    {"bf16 / f32 (matmul)", "matmul_bf16", "matmul_f32", "GFLOP/s"},
    {"tf32 / f32 (matmul)", "matmul_tf32", "matmul_f32", "GFLOP/s"},
    {"fp16 / f32 (conv)", "conv_fp16", "conv_f32", "GFLOP/s"},
    {"bf16 / f32 (conv)", "conv_bf16", "conv_f32", "GFLOP/s"},
    {"tf32 / f32 (conv)", "conv_tf32", "conv_f32", "GFLOP/s"},
    {"peak memory fp16 / f32 (mlp_10000_5000_2000_10)", "train_mlp_10000_5000_2000_10_fp16",
     "train_mlp_10000_5000_2000_10_f32", "peak_bytes"},
    {"peak memory bf16 / f32 (mlp_1000_512_10)", "train_mlp_1000_512_10_bf16",
     "train_mlp_1000_512_10_f32", "peak_bytes"},
    {0},
};

static const bench_metric amp_metrics[] = {
    {"peak_bytes", "bytes"}, {"loss", "nats"}, {"loss_vs_f32", "nats"}, {"peak_share", "ratio"},
    {"MFU", "ratio"}, {"FLOP/token", "FLOP"}, {"peak_TFLOP_per_s", "TFLOP/s"},
    {0},
};

const bench_suite bench_suite_amp = {
    .name = "amp",
    .description = "mixed precision: training steps of the seed models in f32, tf32, fp16 "
                   "(+ grad scaler) and bf16 (samples/s, peak memory, loss vs f32), matmul and "
                   "conv GFLOP/s per precision; nanoGPT's GPT (GPT-2 124M on a GPU, a tiny one "
                   "on the cpu): tokens/s and MFU; on the cpu f32 and bf16 only (TF32 and fp16 are "
                   "GPU formats: the reference computes in double whatever TF32 says)",
    .doc = "docs/suites/amp.md",
    .devices = BENCH_SUITE_CPU | BENCH_SUITE_CUDA,
    .ratios = amp_ratios,
    .metrics = amp_metrics,
    .register_benchmarks = amp_register,
    .finish = bench_train_cache_clear,
};
