/* transformer.c — suite `transformer`: what users of A100/H100 nodes look at for GPT-2 training
 * (docs/suites/transformer.md).
 *
 *   train_<gpt>_<prec>_<mode>/batch:8   a training step of nanoGPT's GPT, the amp suite's step
 *       (bench_trainer: forward and nanoGPT's loss under the precision's autocast, backward, the
 *       fp16 scaler, SGD lr 0.01, loss.item()) with scaled_dot_product_attention in one attention
 *       mode (tandem/backends.h: heuristic = the fused FlashAttention-2 where it applies,
 *       conformance = never fused; deterministic too for bf16). GPT-2 124M's shape on a GPU
 *       (rows of 1024 tokens; 256 with --quick), gpt:L2-H2-D32-T16-V67 on the cpu and on the
 *       emulated device. tokens/s, MFU (amp's: 6N + 12*L*D*T per token over the GPU model's dense
 *       peak for the precision), FLOP/token, peak_bytes over the timed steps, launches_per_step
 *       (kernel launches and library calls per step, tdm_profile_launches), and in the label
 *       and the JSON counter attn_fused whether the fused path applied.
 *   train_<gpt>_bf16_unfused/batch:8   the bf16 step with every fusion off: attention mode
 *       conformance and tdm_fusions_set(false) (no fused classifier, no add + layer_norm): the
 *       "before" of train_<gpt>_bf16_heuristic's "after".
 *   optim_adamw_<fused|per_tensor>   one AdamW step over the GPT's parameters (their gradients
 *       from one training step): fused=True (one launch) against a call per parameter;
 *       launches_per_step and the time.
 *   attn_<fwd|fwdbwd>_<dtype>_d<d>_<mode>/T:T   causal F.scaled_dot_product_attention on
 *       (B,H,T,d) bf16/f16 operands, forward or forward + backward (autograd, a random gy), timed
 *       per call with events: GFLOP/s (forward 4*B*H*T^2*d / 2 for causal; forward + backward
 *       3.5x that, FlashAttention-2's count), and call_peak_bytes, the peak allocated during one
 *       call above what was allocated before it (the unfused path's (B,H,T,T) scores show here).
 *       On a GPU T = 512 .. 8192 (--quick 512, 2048), d = 64 (B 4, H 12) and 128 (B 4, H 6); on
 *       the cpu and the emulated device T = 16, 32, d = 16, B = H = 2. Where a call would run
 *       unfused and its (B,H,T,T) f32 scores exceed TF_SCORES_BUDGET the benchmark is not
 *       registered and the skip is recorded with its reason (bench_suite_skip).
 *
 * Checks: every step's loss is finite and the loss on the batch falls over the timed steps
 * (unless the fp16 scaler skipped them all); the attention output (and for fwdbwd the gradient of
 * q) at 8 sampled query rows against double, each bound stated where it is computed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "suites/bench/bench_train.h"
#include "tandem/tandem.h"
#include "tandem/backends.h"
#include "tandem/profile.h"

static bench_suite_config tf_cfg;

enum { TF_SEED = 1 };
// The most the unfused attention's (B,H,T,T) f32 scores may take (bytes): 4 GiB, the same on every
// GPU so that runs on an A100 and an H100 hold the same benchmarks. TANDEM_BENCH_SCORES_BUDGET
// (bytes) replaces it: more on a larger GPU, or a few bytes to see the skips on the cpu (a test).
#define TF_SCORES_BUDGET 4294967296.0

static double scores_budget(void) {
    const char *e = getenv("TANDEM_BENCH_SCORES_BUDGET");
    char *end;
    double v = e && *e ? strtod(e, &end) : 0;
    return e && *e && *end == '\0' && v > 0 ? v : TF_SCORES_BUDGET;
}

static const tdm_attn_mode tf_modes[] = {TDM_ATTN_HEURISTIC, TDM_ATTN_CONFORMANCE,
                                         TDM_ATTN_DETERMINISTIC};

static bool on_cuda(void) { return tf_cfg.device.type == TDM_DEVICE_CUDA; }

// GPT-2's sizes: a real GPU (the tiny ones on the cpu and the emulated device).
static bool full_size(void) { return bench_gpt_for(tf_cfg.device, false) != &bench_gpt_tiny; }

// The precisions the amp suite runs here: on the cpu f32 and bf16 only (docs/suites/amp.md).
static bool prec_here(bench_prec p) {
    return on_cuda() || p == BENCH_PREC_F32 || p == BENCH_PREC_BF16;
}

// Deterministic is timed for bf16 only (its backward computes gq in a kernel of its own, without
// the heuristic mode's atomics: backends.h).
static bool mode_here(bench_prec p, tdm_attn_mode m) {
    return m != TDM_ATTN_DETERMINISTIC || p == BENCH_PREC_BF16;
}

static tdm_dtype prec_dtype(bench_prec p) {
    return p == BENCH_PREC_FP16 ? TDM_DTYPE_F16 : p == BENCH_PREC_BF16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
}

// Whether an attention in dtype with head size d runs fused on the device in mode m.
static bool fused_in(tdm_attn_mode m, tdm_dtype dt, int64_t d) {
    tdm_attn_mode prev = tdm_attn_mode_get();
    tdm_attn_mode_set(m);
    bool f = tdm_attn_fused_applies(tf_cfg.device, dt, d, d, false, 0.0);
    tdm_attn_mode_set(prev);
    return f;
}

// ---- train_<gpt>_<prec>_<mode>/batch:B -----------------------------------------------------------

typedef struct {
    const char *spec;
    bench_prec prec;
    tdm_attn_mode mode;
    bool fusions_off;   // tdm_fusions_set(false) too: train_<gpt>_bf16_unfused
} tf_train_ctx;
static tf_train_ctx tf_train[BENCH_PREC_COUNT][3], tf_train_unfused;

static void bm_train(tdm_gb_state *st, void *arg) {
    const tf_train_ctx *c = arg;
    const tdm_device dev = tf_cfg.device;
    int64_t batch = tdm_gb_arg(st, 0);
    tdm_gpt_config gc = {0};
    (void)tdm_nn_gpt_spec(c->spec, &gc);
    const int64_t head = gc.n_head ? gc.n_embd / gc.n_head : 0;
    tdm_attn_mode prev = tdm_attn_mode_get();
    const bool fusions_prev = tdm_fusions_enabled();
    tdm_attn_mode_set(c->mode);
    tdm_fusions_set(!c->fusions_off);
    const bool fused = tdm_attn_fused_applies(dev, prec_dtype(c->prec), head, head, false, 0.0);
    bench_trainer *t = NULL;   // kept across the row's calls (bench_trainer_row)
    bool fresh = false;
    double before = NAN, after = NAN;
    bool ok = bench_trainer_row(&t, &fresh, c->spec, dev, c->prec, batch, TF_SEED) == TDM_OK;
    if (!ok) bench_fail(st, "setup");
    if (ok && bench_trainer_loss(t, &before) != TDM_OK) {
        bench_fail(st, "the loss before the steps");
        ok = false;
    }
    if (ok && tdm_memory_reset_peak(dev) != TDM_OK) {
        bench_fail(st, "tdm_memory_reset_peak");
        ok = false;
    }
    int64_t steps = 0;
    const int skipped0 = ok ? t->skipped : 0;
    const uint64_t launches0 = tdm_profile_launches();
    ok = bench_trainer_timed_steps(st, t, ok, NULL, &steps);
    const uint64_t launches = tdm_profile_launches() - launches0;
    tdm_memory_stats ms = {0};
    if (ok && tdm_memory_stats_get(dev, &ms) != TDM_OK) {
        bench_fail(st, "tdm_memory_stats_get");
        ok = false;
    }
    if (ok && bench_trainer_loss(t, &after) != TDM_OK) {
        bench_fail(st, "the loss after the steps");
        ok = false;
    }
    // The steps trained the model: the batch's loss fell (SGD on one batch), unless the fp16
    // scaler skipped every step (inf/NaN gradients at its first scales change nothing).
    const int skipped = ok ? t->skipped - skipped0 : 0;   // this call's steps the scaler skipped
    if (ok && steps > skipped && !(after < before)) {
        char msg[200];
        snprintf(msg, sizeof msg, "the loss did not fall over %lld steps (%.6g -> %.6g)",
                 (long long)steps, before, after);
        tdm_gb_skip_with_error(st, msg);
    }
    int64_t n_params = 0;
    for (int i = 0; ok && i < t->n_params; i++) n_params += tdm_tensor_numel(t->params[i]);
    if (!ok) bench_trainer_row_drop();
    tdm_attn_mode_set(prev);
    tdm_fusions_set(fusions_prev);

    bench_rate_counters(st, (double)batch, gc.block_size, true);   // tokens/s
    tdm_gb_counter(st, "launches_per_step", steps ? (double)launches / (double)steps : 0,
                   TDM_GB_PLAIN);
    tdm_gb_counter(st, "peak_bytes", (double)ms.peak_allocated, TDM_GB_PLAIN);
    tdm_gb_counter(st, "skipped_steps", (double)skipped, TDM_GB_PLAIN);
    tdm_gb_counter(st, "attn_fused", fused ? 1 : 0, TDM_GB_PLAIN);
    char note[200] = "";
    bench_gpt_counters(st, c->spec, dev, batch, c->prec, n_params, note, sizeof note);
    char label[500];
    snprintf(label, sizeof label,
             "%s, %s, attention %s (fused FlashAttention-2: %s), other fusions %s, SGD lr 0.01; "
             "the loss fell over the timed steps%s",
             c->spec, bench_prec_name(c->prec), tdm_attn_mode_name(c->mode), fused ? "yes" : "no",
             c->fusions_off ? "off" : "on", note);
    tdm_gb_set_label(st, label);
}

// ---- optim_adamw_<fused|per_tensor> ----------------------------------------------------------------

static const bool tf_fused_yes = true, tf_fused_no = false;

static void bm_optim(tdm_gb_state *st, void *arg) {
    const bool fused = *(const bool *)arg;
    const tdm_device dev = tf_cfg.device;
    const bench_gpt_model *g = bench_gpt_for(dev, tf_cfg.quick);
    bench_trainer t;
    tdm_optimizer *opt = NULL;
    // the gradients of one training step (f32, as under autocast), then AdamW over them
    bool ok = bench_trainer_init(&t, g->spec, dev, BENCH_PREC_F32, 1, TF_SEED, 1) == TDM_OK &&
              bench_trainer_step(&t, NULL) == TDM_OK;
    if (ok) {
        tdm_adam_params p = tdm_adam_defaults(true);
        p.lr = 1e-4;
        p.fused = fused;
        ok = (opt = tdm_optim_adam(t.params, t.n_params, &p)) != NULL;
    }
    if (!ok) bench_fail(st, "setup");
    int64_t steps = 0;
    const uint64_t launches0 = tdm_profile_launches();
    while (tdm_gb_keep_running(st)) {
        if (!ok) continue;
        if (tdm_optimizer_step(opt) != TDM_OK) {
            bench_fail(st, "tdm_optimizer_step");
            ok = false;
        }
        steps++;
    }
    const uint64_t launches = tdm_profile_launches() - launches0;
    int64_t n = 0;
    for (int i = 0; i < t.n_params; i++) n += tdm_tensor_numel(t.params[i]);
    const int tensors = t.n_params;
    tdm_optimizer_free(opt);
    bench_trainer_free(&t);
    tdm_gb_counter(st, "launches_per_step", steps ? (double)launches / (double)steps : 0,
                   TDM_GB_PLAIN);
    tdm_gb_counter(st, "params", (double)n, TDM_GB_PLAIN);
    char label[300];
    snprintf(label, sizeof label, "AdamW over %s's %d parameter tensors (%lld values), %s",
             g->spec, tensors, (long long)n,
             fused ? "fused=True: one backend call" : "a call per parameter");
    tdm_gb_set_label(st, label);
}

// ---- attn_<pass>_<dtype>_d<d>_<mode>/T:T --------------------------------------------------------

typedef struct {
    bool bwd;          // forward + backward
    tdm_dtype dt;      // bf16 or f16
    int64_t B, H, d;
    tdm_attn_mode mode;
} tf_attn_ctx;

enum { TF_ATTN_MAX = 16 };
static tf_attn_ctx tf_attn[TF_ATTN_MAX];

// Model FLOPs of one causal call, FlashAttention-2's convention: forward 4*B*H*T^2*d (q k^T and
// p v) halved for causal; forward + backward 3.5x the forward (backward 2.5x: five products, one
// of them the recomputed q k^T).
static double attn_flop(const tf_attn_ctx *c, int64_t T) {
    double fwd = 4.0 * (double)(c->B * c->H) * (double)T * (double)T * (double)c->d / 2;
    return c->bwd ? 3.5 * fwd : fwd;
}

// The (B,H,T,T) f32 scores an unfused call materializes, bytes.
static double scores_bytes(int64_t B, int64_t H, int64_t T) {
    return 4.0 * (double)(B * H) * (double)T * (double)T;
}

// One call: y = sdpa(q, k, v, causal); for bwd the gradients of q, k, v cleared first (as
// PyTorch's x.grad = None) and backward from gy. *y replaces the previous output.
static tdm_status attn_call(const tf_attn_ctx *c, tdm_tensor *q, tdm_tensor *k, tdm_tensor *v,
                            const tdm_tensor *gy, tdm_tensor **y) {
    tdm_tensor_free(*y);
    if (c->bwd) {
        tdm_tensor_set_grad(q, NULL);
        tdm_tensor_set_grad(k, NULL);
        tdm_tensor_set_grad(v, NULL);
    }
    *y = tdm_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, TDM_SDPA_SCALE_DEFAULT, NULL);
    if (!*y) return tdm_last_status();
    return c->bwd ? tdm_backward(*y, gy) : TDM_OK;
}

// The (T, d) slice [b, h] of a (B,H,T,d) tensor as host doubles (malloc'd), or NULL.
static double *slice_host(const tdm_tensor *t, int64_t b, int64_t h) {
    tdm_tensor *nb = tdm_tensor_narrow(t, 0, b, 1);
    tdm_tensor *nh = nb ? tdm_tensor_narrow(nb, 1, h, 1) : NULL;
    tdm_tensor *c = nh ? tdm_tensor_contiguous(nh) : NULL;
    double *out = c ? malloc((size_t)tdm_tensor_numel(c) * sizeof *out) : NULL;
    if (out && tdm_tensor_to_host_f64(c, out) != TDM_OK) {
        free(out);
        out = NULL;
    }
    tdm_tensor_free(c);
    tdm_tensor_free(nh);
    tdm_tensor_free(nb);
    return out;
}

// Fails the benchmark: element (b, h, i, e) of `what` is got, not want within bound.
static void attn_check_fail(tdm_gb_state *st, const char *what, const int64_t bh[2], int64_t i,
                            int64_t e, double got, double want, double bound) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s[%lld,%lld,%lld,%lld] = %.9g, expected %.9g (double), |error| > "
             "bound %.3g", what, (long long)bh[0], (long long)bh[1], (long long)i, (long long)e,
             got, want, bound);
    tdm_gb_skip_with_error(st, msg);
}

// Checks y (and gq) at 8 query rows of two (b, h) slices against double. False with the
// benchmark failed. u: the dtype's unit roundoff.
static bool attn_verify(tdm_gb_state *st, const tf_attn_ctx *c, int64_t T, const tdm_tensor *q,
                        const tdm_tensor *k, const tdm_tensor *v, const tdm_tensor *y,
                        const tdm_tensor *gy, const tdm_tensor *gq) {
    const int64_t d = c->d;
    const double u = c->dt == TDM_DTYPE_F16 ? 0x1p-11 : 0x1p-8, scale = 1 / sqrt((double)d);
    const int64_t slices[2][2] = {{0, 0}, {c->B - 1, c->H - 1}};
    bool ok = true;
    double *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    for (int s = 0; ok && s < 2; s++) {
        double *hq = slice_host(q, slices[s][0], slices[s][1]);
        double *hk = slice_host(k, slices[s][0], slices[s][1]);
        double *hv = slice_host(v, slices[s][0], slices[s][1]);
        double *hy = slice_host(y, slices[s][0], slices[s][1]);
        double *hg = c->bwd ? slice_host(gy, slices[s][0], slices[s][1]) : NULL;
        double *hgq = c->bwd ? slice_host(gq, slices[s][0], slices[s][1]) : NULL;
        if (!p || !dp || !hq || !hk || !hv || !hy || (c->bwd && (!hg || !hgq))) {
            bench_fail(st, "reading back the operands");
            ok = false;
        }
        const int64_t rows[4] = {0, T / 3, (2 * T) / 3 + 1, T - 1};
        for (int r = 0; ok && r < 4; r++) {
            const int64_t i = rows[r] < T ? rows[r] : T - 1, n = i + 1;   // causal: keys 0..i
            // scores in double; delta: the f32 score error relative to p (E 2^-24 sum |q k| in
            // the product, |s| 2^-22 in the exponent), a first-order perturbation of each p
            double m = -INFINITY, delta = 0;
            for (int64_t j = 0; j < n; j++) {
                double sj = 0, mag = 0;
                for (int64_t e = 0; e < d; e++) {
                    sj += hq[i * d + e] * hk[j * d + e];
                    mag += fabs(hq[i * d + e] * hk[j * d + e]);
                }
                p[j] = sj * scale;
                delta = fmax(delta, (double)d * 0x1p-24 * mag * scale + fabs(p[j]) * 0x1p-22);
                m = fmax(m, p[j]);
            }
            double l = 0;
            for (int64_t j = 0; j < n; j++) l += (p[j] = exp(p[j] - m));
            for (int64_t j = 0; j < n; j++) p[j] /= l;
            // y_i = sum_j p_j v_j. Bound, twice the first-order terms: u |y| (the output
            // rounded), u sum p|v| (the fused path rounds p to the dtype for p v), 2 delta sum p|v|
            double Dexact = 0, gymag = 0;
            for (int64_t e = 0; ok && e < d; e++) {
                double want = 0, pv = 0;
                for (int64_t j = 0; j < n; j++) {
                    want += p[j] * hv[j * d + e];
                    pv += p[j] * fabs(hv[j * d + e]);
                }
                double got = hy[i * d + e];
                double bound = 2 * (u * fabs(want) + (u + 2 * delta) * pv) + 1e-30;
                if (!(fabs(got - want) <= bound)) {
                    attn_check_fail(st, "y", slices[s], i, e, got, want, bound);
                    ok = false;
                }
                if (c->bwd) {
                    Dexact += hg[i * d + e] * want;
                    gymag += fabs(hg[i * d + e] * hy[i * d + e]);
                }
            }
            if (!c->bwd || !ok) continue;
            // gq_i = scale sum_j p_j (dp_j - D) k_j, dp_j = gy_i . v_j, D = gy_i . y_i. Bound:
            // u |gq| (rounded to the dtype) + (8u + 4 delta) scale sum_j p_j (|dp_j| + sum|gy y|)
            // |k_j|: ds rounded to the dtype for its product, D from the rounded y, p's score
            // error; each first-order term at most u (or delta) times that sum, with 4x slack
            for (int64_t j = 0; j < n; j++) {
                dp[j] = 0;
                for (int64_t e = 0; e < d; e++) dp[j] += hg[i * d + e] * hv[j * d + e];
            }
            for (int64_t e = 0; ok && e < d; e++) {
                double want = 0, mag = 0;
                for (int64_t j = 0; j < n; j++) {
                    want += p[j] * (dp[j] - Dexact) * hk[j * d + e];
                    mag += p[j] * (fabs(dp[j]) + gymag) * fabs(hk[j * d + e]);
                }
                want *= scale;
                double got = hgq[i * d + e];
                double bound = u * fabs(want) + (8 * u + 4 * delta) * scale * mag + 1e-30;
                if (!(fabs(got - want) <= bound)) {
                    attn_check_fail(st, "gq", slices[s], i, e, got, want, bound);
                    ok = false;
                }
            }
        }
        free(hq);
        free(hk);
        free(hv);
        free(hy);
        free(hg);
        free(hgq);
    }
    free(p);
    free(dp);
    return ok;
}

static void bm_attn(tdm_gb_state *st, void *arg) {
    const tf_attn_ctx *c = arg;
    const tdm_device dev = tf_cfg.device;
    const int64_t T = tdm_gb_arg(st, 0), shape[4] = {c->B, c->H, T, c->d};
    tdm_attn_mode prev = tdm_attn_mode_get();
    tdm_attn_mode_set(c->mode);
    const bool fused = tdm_attn_fused_applies(dev, c->dt, c->d, c->d, false, 0.0);
    tdm_tensor *q = tdm_tensor_randn(4, shape, c->dt, dev, TF_SEED, 21);
    tdm_tensor *k = tdm_tensor_randn(4, shape, c->dt, dev, TF_SEED, 22);
    tdm_tensor *v = tdm_tensor_randn(4, shape, c->dt, dev, TF_SEED, 23);
    tdm_tensor *gy = c->bwd ? tdm_tensor_randn(4, shape, c->dt, dev, TF_SEED, 24) : NULL;
    tdm_tensor *y = NULL;
    tdm_event *e0 = tdm_event_new(dev), *e1 = tdm_event_new(dev);
    bool ok = q && k && v && (!c->bwd || gy) && e0 && e1;
    if (!ok) bench_fail(st, "inputs and events");
    if (ok && c->bwd) {
        tdm_tensor_set_requires_grad(q, true);
        tdm_tensor_set_requires_grad(k, true);
        tdm_tensor_set_requires_grad(v, true);
    }
    // the first call untimed (plans, the allocator's cache)
    if (ok && (attn_call(c, q, k, v, gy, &y) != TDM_OK || tdm_device_synchronize(dev) != TDM_OK)) {
        bench_fail(st, "first call");
        ok = false;
    }
    while (tdm_gb_keep_running(st)) {
        if (!ok) continue;
        double ms = 0;
        tdm_status s = tdm_event_record(e0, NULL);
        if (s == TDM_OK) s = attn_call(c, q, k, v, gy, &y);
        if (s == TDM_OK) s = tdm_event_record(e1, NULL);
        if (s == TDM_OK) s = tdm_event_elapsed_ms(e0, e1, &ms);
        if (s != TDM_OK) {
            bench_fail(st, "timed call");
            ok = false;
            continue;
        }
        tdm_gb_set_iteration_time(st, ms / 1e3);
    }
    if (ok) ok = attn_verify(st, c, T, q, k, v, y, gy, c->bwd ? tdm_tensor_grad(q) : NULL);
    // call_peak_bytes: one more call from a clean state (no output, no gradients held)
    int64_t peak = 0, net = 0;
    tdm_tensor_free(y);
    y = NULL;
    if (c->bwd) {
        tdm_tensor_set_grad(q, NULL);
        tdm_tensor_set_grad(k, NULL);
        tdm_tensor_set_grad(v, NULL);
    }
    tdm_memory_tracker tr;
    if (ok && (tdm_device_synchronize(dev) != TDM_OK || tdm_memory_tracker_begin(&tr, dev) != TDM_OK ||
               attn_call(c, q, k, v, gy, &y) != TDM_OK || tdm_device_synchronize(dev) != TDM_OK ||
               tdm_memory_tracker_end(&tr, &peak, &net) != TDM_OK)) {
        bench_fail(st, "the call measured for memory");
        ok = false;
    }
    tdm_event_free(e0);
    tdm_event_free(e1);
    tdm_tensor_free(y);
    tdm_tensor_free(q);
    tdm_tensor_free(k);
    tdm_tensor_free(v);
    tdm_tensor_free(gy);
    tdm_attn_mode_set(prev);

    const double flop = attn_flop(c, T);
    tdm_gb_counter(st, "GFLOP/s", flop / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "FLOP/iteration", flop, TDM_GB_PLAIN);
    tdm_gb_counter(st, "call_peak_bytes", (double)peak, TDM_GB_PLAIN);
    tdm_gb_counter(st, "scores_bytes", scores_bytes(c->B, c->H, T), TDM_GB_PLAIN);
    tdm_gb_counter(st, "attn_fused", fused ? 1 : 0, TDM_GB_PLAIN);
    char label[400];
    snprintf(label, sizeof label,
             "causal SDPA %s, (B,H,T,d) = (%lld,%lld,%lld,%lld) %s, attention %s (fused "
             "FlashAttention-2: %s); FLOP = 4*B*H*T^2*d/2%s; call_peak_bytes = peak allocated "
             "during one call above what was allocated before it",
             c->bwd ? "forward + backward" : "forward", (long long)c->B, (long long)c->H,
             (long long)T, (long long)c->d, tdm_dtype_name(c->dt), tdm_attn_mode_name(c->mode),
             fused ? "yes" : "no", c->bwd ? " x 3.5 (FlashAttention-2's fwd + bwd count)" : "");
    tdm_gb_set_label(st, label);
}

// The work of a training row's timed iteration (bench list --json; the peer's rows match: test
// peer.work_match): one step of the amp suite's GPT.
static void tf_train_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const tf_train_ctx *c = ctx;
    bench_work_train(buf, len, c->spec, bench_prec_name(c->prec), n ? args[0] : 0, 0.01, 0, 1);
}

// An optimizer row's: one AdamW step over the GPT's f32 parameters (the gradients of one step
// at batch 1), fused or a call per parameter, with bm_optim's hyperparameters.
static void tf_optim_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    (void)args, (void)n;
    const tdm_adam_params p = tdm_adam_defaults(true);
    snprintf(buf, (size_t)len,
             "{\"op\": \"adamw_step\", \"model\": \"%s\", \"dtype\": \"f32\", \"fused\": %s, "
             "\"optimizer\": \"AdamW lr %g betas %g %g eps %g weight_decay %g\", "
             "\"per_iteration\": 1}",
             bench_gpt_for(tf_cfg.device, tf_cfg.quick)->spec, *(const bool *)ctx ? "true" : "false",
             1e-4, p.beta1, p.beta2, p.eps, p.weight_decay);
}

// An attention row's: one causal SDPA call (forward, or forward + backward) on q, k, v of
// (B,H,T,d), and the FLOP its GFLOP/s counts.
static void tf_attn_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const tf_attn_ctx *c = ctx;
    const int64_t T = n ? args[0] : 0;
    snprintf(buf, (size_t)len,
             "{\"op\": \"sdpa_causal\", \"pass\": \"%s\", \"dtype\": \"%s\", \"shapes\": "
             "[[%lld, %lld, %lld, %lld]], \"attention_mode\": \"%s\", \"per_iteration\": 1, "
             "\"FLOP\": %.17g}",
             c->bwd ? "fwd+bwd" : "fwd", tdm_dtype_name(c->dt), (long long)c->B, (long long)c->H,
             (long long)T, (long long)c->d, tdm_attn_mode_name(c->mode), attn_flop(c, T));
}

// ---- registration -------------------------------------------------------------------------

static int tf_register(const bench_suite_config *cfg) {
    tf_cfg = *cfg;
    char name[128], info[600];
    // training steps: the amp suite's GPT, per precision and attention mode
    const bench_gpt_model *g = bench_gpt_for(cfg->device, cfg->quick);
    for (int p = 0; p < BENCH_PREC_COUNT; p++) {
        if (!prec_here((bench_prec)p)) continue;
        for (int mi = 0; mi < 3; mi++) {
            tdm_attn_mode m = tf_modes[mi];
            if (!mode_here((bench_prec)p, m)) continue;
            tf_train[p][mi] = (tf_train_ctx){g->spec, (bench_prec)p, m, false};
            snprintf(name, sizeof name, "train_%s_%s_%s", g->name, bench_prec_name(p),
                     tdm_attn_mode_name(m));
            tdm_gb_bench *b = tdm_gb_register(name, bm_train, &tf_train[p][mi]);
            if (!b) return -1;
            tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
            tdm_gb_args(b, 1, (const int64_t[]){BENCH_GPT_BATCH});
            snprintf(info, sizeof info,
                     "a training step of nanoGPT's GPT %s in %s with attention mode %s (the amp "
                     "suite's step: forward, cross-entropy over (B*T,V), backward, SGD lr 0.01, "
                     "loss.item()); tokens/s = B*T / step time; %s%s%s; peak_bytes over the "
                     "timed steps",
                     g->spec, bench_prec_name(p), tdm_attn_mode_name(m),
                     p == BENCH_PREC_F32 ? "no MFU (f32 has no Tensor Core peak)"
                                         : "MFU = tokens/s * (6N + 12*L*D*T) / the GPU model's "
                                           "dense ",
                     p == BENCH_PREC_F32 ? "" : bench_prec_name(p),
                     p == BENCH_PREC_F32 ? "" : " peak (not on the cpu or the emulated device)");
            tdm_gb_set_info(b, info, "tokens/s");
            tdm_gb_set_work(b, tf_train_work, &tf_train[p][mi]);
        }
    }
    // every fusion off: the bf16 step's "before"
    tf_train_unfused = (tf_train_ctx){g->spec, BENCH_PREC_BF16, TDM_ATTN_CONFORMANCE, true};
    snprintf(name, sizeof name, "train_%s_bf16_unfused", g->name);
    tdm_gb_bench *ub = tdm_gb_register(name, bm_train, &tf_train_unfused);
    if (!ub) return -1;
    tdm_gb_arg_names(ub, 1, (const char *const[]){"batch"});
    tdm_gb_args(ub, 1, (const int64_t[]){BENCH_GPT_BATCH});
    snprintf(info, sizeof info, "train_%s_bf16_heuristic with every fusion off: attention mode "
             "conformance (unfused), no fused classifier, no add + layer_norm (tdm_fusions_set)",
             g->name);
    tdm_gb_set_info(ub, info, "tokens/s");
    tdm_gb_set_work(ub, tf_train_work, &tf_train_unfused);
    // the optimizer step, fused and per tensor
    for (int f = 0; f < 2; f++) {
        tdm_gb_bench *ob = tdm_gb_register(f ? "optim_adamw_fused" : "optim_adamw_per_tensor",
                                           bm_optim, (void *)(f ? &tf_fused_yes : &tf_fused_no));
        if (!ob) return -1;
        tdm_gb_set_info(ob, f ? "one AdamW step over the GPT's parameters, fused=True (one "
                                "launch on cuda)"
                              : "one AdamW step over the GPT's parameters, a call per parameter",
                        "time");
        tdm_gb_set_work(ob, tf_optim_work, (void *)(f ? &tf_fused_yes : &tf_fused_no));
    }
    // attention alone over the context length
    static const int64_t gpu_T[] = {512, 1024, 2048, 4096, 8192}, gpu_T_quick[] = {512, 2048};
    static const int64_t tiny_T[] = {16, 32};
    const bool big = full_size();
    const int64_t *Ts = big ? (cfg->quick ? gpu_T_quick : gpu_T) : tiny_T;
    const int nT = big ? (cfg->quick ? 2 : 5) : 2;
    static const int64_t gpu_d[] = {64, 128}, tiny_d[] = {16};
    const int nd = big ? 2 : 1;
    static const tdm_dtype dts[] = {TDM_DTYPE_BF16, TDM_DTYPE_F16};
    int n = 0;
    for (int bwd = 0; bwd < 2; bwd++)
        for (int di = 0; di < 2; di++)
            for (int hi = 0; hi < nd; hi++)
                for (int mi = 0; mi < 2; mi++) {   // heuristic, conformance
                    const int64_t d = big ? gpu_d[hi] : tiny_d[hi];
                    // B*H*d the same for both head sizes: GPT-2 124M's 12 heads of 64 per row
                    const int64_t B = big ? 4 : 2, H = big ? 768 / d : 2;
                    tf_attn[n] = (tf_attn_ctx){bwd != 0, dts[di], B, H, d, tf_modes[mi]};
                    const tf_attn_ctx *c = &tf_attn[n++];
                    snprintf(name, sizeof name, "attn_%s_%s_d%lld_%s", bwd ? "fwdbwd" : "fwd",
                             tdm_dtype_name(c->dt), (long long)d, tdm_attn_mode_name(c->mode));
                    tdm_gb_bench *b = tdm_gb_register(name, bm_attn, (void *)c);
                    if (!b) return -1;
                    tdm_gb_arg_names(b, 1, (const char *const[]){"T"});
                    tdm_gb_use_manual_time(b);
                    const bool fused = fused_in(c->mode, c->dt, d);
                    const double budget = scores_budget();
                    for (int i = 0; i < nT; i++) {
                        const double sb = scores_bytes(B, H, Ts[i]);
                        if (!fused && sb > budget) {
                            char id[160], why[300];
                            snprintf(id, sizeof id, "%s/T:%lld", name, (long long)Ts[i]);
                            snprintf(why, sizeof why,
                                     "unfused attention (mode %s%s): its (B,H,T,T) f32 scores "
                                     "take %.3g GB, over the suite's budget of %.3g GB",
                                     tdm_attn_mode_name(c->mode),
                                     c->mode == TDM_ATTN_CONFORMANCE
                                         ? "" : "; no fused kernel applies here",
                                     sb / 1e9, budget / 1e9);
                            bench_suite_skip(id, why);
                            continue;
                        }
                        tdm_gb_args(b, 1, &Ts[i]);
                    }
                    snprintf(info, sizeof info,
                             "causal scaled_dot_product_attention %s on (B,H,T,d) = "
                             "(%lld,%lld,T,%lld) %s, attention mode %s, timed per call with "
                             "events; GFLOP/s from FLOP = 4*B*H*T^2*d/2%s; call_peak_bytes = "
                             "peak allocated during one call",
                             bwd ? "forward + backward (autograd, random gy)" : "forward",
                             (long long)B, (long long)H, (long long)d, tdm_dtype_name(c->dt),
                             tdm_attn_mode_name(c->mode), bwd ? " x 3.5" : "");
                    tdm_gb_set_info(b, info, "GFLOP/s");
                    tdm_gb_set_work(b, tf_attn_work, (void *)c);
                }
    return 0;
}

#define TF_MODE_RATIO(tag, prec)                                                     \
    {"heuristic / conformance (" #tag ", " #prec ")", "train_" #tag "_" #prec "_heuristic", \
     "train_" #tag "_" #prec "_conformance", "tokens/s"}
#define TF_PREC_RATIO(tag, prec)                                                            \
    {#prec " / f32 (" #tag ", heuristic)", "train_" #tag "_" #prec "_heuristic", "train_" #tag \
     "_f32_heuristic", "tokens/s"}
#define TF_TAG_RATIOS(tag)                                                                  \
    TF_MODE_RATIO(tag, bf16), TF_MODE_RATIO(tag, fp16), TF_PREC_RATIO(tag, bf16),           \
        TF_PREC_RATIO(tag, fp16), TF_PREC_RATIO(tag, tf32)
#define TF_ATTN_RATIO(pass, dt, d)                                                     \
    {"fused / unfused (" #pass " " #dt " " #d ")", "attn_" #pass "_" #dt "_" #d "_heuristic", \
     "attn_" #pass "_" #dt "_" #d "_conformance", "GFLOP/s"}
#define TF_ATTN_MEM(pass, dt, d)                                                              \
    {"memory unfused / fused (" #pass " " #dt " " #d ")", "attn_" #pass "_" #dt "_" #d           \
     "_conformance", "attn_" #pass "_" #dt "_" #d "_heuristic", "call_peak_bytes"}
#define TF_ATTN_RATIOS(d)                                                                  \
    TF_ATTN_RATIO(fwd, bf16, d), TF_ATTN_RATIO(fwdbwd, bf16, d), TF_ATTN_RATIO(fwd, f16, d), \
        TF_ATTN_RATIO(fwdbwd, f16, d), TF_ATTN_MEM(fwd, bf16, d), TF_ATTN_MEM(fwdbwd, bf16, d)

#define TF_FUSION_RATIOS(tag)                                                               \
    {"every fusion on / off (" #tag ", bf16)", "train_" #tag "_bf16_heuristic",             \
     "train_" #tag "_bf16_unfused", "tokens/s"},                                           \
        {"launches off / on (" #tag ", bf16)", "train_" #tag "_bf16_unfused",              \
         "train_" #tag "_bf16_heuristic", "launches_per_step"}

static const bench_ratio tf_ratios[] = {
    TF_TAG_RATIOS(gpt_124m), TF_TAG_RATIOS(gpt_124m_t256), TF_TAG_RATIOS(gpt_tiny),
    TF_FUSION_RATIOS(gpt_124m), TF_FUSION_RATIOS(gpt_124m_t256), TF_FUSION_RATIOS(gpt_tiny),
    {"AdamW per tensor / fused (time)", "optim_adamw_per_tensor", "optim_adamw_fused", "time"},
    TF_ATTN_RATIOS(d64), TF_ATTN_RATIOS(d128), TF_ATTN_RATIOS(d16),
    {0},
};

static const bench_metric tf_metrics[] = {
    {"peak_bytes", "bytes"}, {"MFU", "ratio"}, {"FLOP/token", "FLOP"},
    {"launches_per_step", "launches"}, {"params", "values"},
    {"peak_TFLOP_per_s", "TFLOP/s"}, {"call_peak_bytes", "bytes"},
    {0},
};

const bench_suite bench_suite_transformer = {
    .name = "transformer",
    .description = "GPT-2 training as A100/H100 users measure it: nanoGPT's GPT (GPT-2 124M at "
                   "T=1024 on a GPU, a tiny one on the cpu) per precision and attention mode "
                   "(fused FlashAttention-2 vs unfused): tokens/s, MFU, peak memory; causal "
                   "attention alone, forward and forward+backward, over the context length: "
                   "GFLOP/s and the call's peak memory",
    .doc = "docs/suites/transformer.md",
    .devices = BENCH_SUITE_CPU | BENCH_SUITE_CUDA,
    .ratios = tf_ratios,
    .metrics = tf_metrics,
    .register_benchmarks = tf_register,
    .finish = bench_train_cache_clear,
};
