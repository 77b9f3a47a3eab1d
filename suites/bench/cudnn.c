/* cudnn.c — suite `cudnn` (cuda only): the `cudnn.benchmark` effect. The convolution layers of
 * ResNet-18/50 (ImageNet, 224x224, batch 32) and of the small CNN (cnn:3x32x32/c32p1-bn-relu-mp2-
 * c64p1-bn-relu-mp2-flat-fc10, batch 64), each pass (fwd, bwd_data, bwd_filter), each precision
 * (f32 = TF32 off, tf32, fp16, bf16), each layout (nchw; nhwc = PyTorch's channels_last, the
 * tensors stored (N,H,W,C) and the weight (O,kh,kw,C): tdm_conv2d_params.layout), timed in each
 * algorithm mode (arg `mode`: 0 heuristic, 1 benchmark, 2 deterministic; tandem/backends.h).
 *
 * Each benchmark clears the device's plan cache, makes one untimed call (the search, whose cost
 * tdm_conv_algo_last reports), then times calls with CUDA events (manual time). Counters:
 * GFLOP/s (FLOP = 2 N O OH OW (C/g) kh kw, the same for all three passes), search_ms,
 * candidates, workspace_bytes, and in benchmark mode heuristic_ms (the heuristic's plan timed the
 * same way, right after) and payback_iters = search_ms / (heuristic_ms - benchmark_ms): the
 * calls after which the search has paid for itself (-1: never, the heuristic was as fast). The
 * label names the engine each mode picked. The last output is checked at 4 points against a
 * double computation (bound: (n u + 2 u_t) M + u_out |e|, docs/CONFORMANCE.md).
 *
 * Whole networks: step_<net>_<prec>_<mode>/batch:B times training steps (forward, cross-entropy,
 * backward, SGD; fp16 = autocast + grad scaler, bf16 = autocast) of two CNNs in each mode, after a
 * first step that made the choices (first_step_ms); the ratios "benchmark / heuristic" and
 * "deterministic / heuristic" compare them. new_shape_<net>/mode:M times the first step at an
 * input shape new to the plan cache against repeated steps at that shape (search_overhead_ms).
 * The whole networks run NCHW (tandem's modules are NCHW); the layers run in both layouts, with
 * the ratios "NCHW time / NHWC time" for some. docs/suites/cudnn.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "tandem/tandem.h"

#ifdef TDM_HAVE_CUDA

static bench_suite_config cudnn_cfg;
enum { CUDNN_SEED = 20261123 };
// SGD's learning rate in the training steps. At 0.01 these BatchNorm CNNs overshoot on their fixed
// random batch: smallcnn's loss goes 2.478, 2.845, 4.420, 4.101 over its first steps, the same on
// the CPU reference and on an H100 (results/vm-cuda0-20261126T165948Z), so check_loss_falls failed
// a correct GPU; at 0.001 both nets' losses fall at every one of their first 6 steps.
#define CUDNN_LR 0.001

typedef struct {
    const char *net, *layer;
    int64_t n, c, h, w, o, k;
    int stride, pad;
} conv_layer;

// ResNet-18/50 (torchvision) at 224x224, batch 32; shapes shared by both nets listed once.
static const conv_layer layers[] = {
    {"resnet18", "conv1", 32, 3, 224, 224, 64, 7, 2, 3},
    {"resnet18", "layer1_3x3", 32, 64, 56, 56, 64, 3, 1, 1},
    {"resnet18", "layer2_3x3s2", 32, 64, 56, 56, 128, 3, 2, 1},
    {"resnet18", "layer2_down1x1", 32, 64, 56, 56, 128, 1, 2, 0},
    {"resnet18", "layer2_3x3", 32, 128, 28, 28, 128, 3, 1, 1},
    {"resnet18", "layer3_3x3", 32, 256, 14, 14, 256, 3, 1, 1},
    {"resnet18", "layer4_3x3", 32, 512, 7, 7, 512, 3, 1, 1},
    {"resnet50", "layer1_reduce1x1", 32, 256, 56, 56, 64, 1, 1, 0},
    {"resnet50", "layer1_expand1x1", 32, 64, 56, 56, 256, 1, 1, 0},
    {"resnet50", "layer3_expand1x1", 32, 256, 14, 14, 1024, 1, 1, 0},
    {"resnet50", "layer4_expand1x1", 32, 512, 7, 7, 2048, 1, 1, 0},
    {"smallcnn", "conv1", 64, 3, 32, 32, 32, 3, 1, 1},
    {"smallcnn", "conv2", 64, 32, 16, 16, 64, 3, 1, 1},
};
enum { N_LAYERS = sizeof layers / sizeof *layers };

static const char *const pass_names[3] = {"fwd", "bwd_data", "bwd_filter"};
static const char *const prec_names[4] = {"f32", "tf32", "fp16", "bf16"};
static const tdm_dtype prec_dtypes[4] = {TDM_DTYPE_F32, TDM_DTYPE_F32, TDM_DTYPE_F16,
                                         TDM_DTYPE_BF16};

static const char *const layout_names[2] = {"nchw", "nhwc"};   // by tdm_conv_layout

typedef struct {
    int layer, pass, prec;
    tdm_conv_layout layout;
} cudnn_ctx;
static cudnn_ctx ctxs[N_LAYERS * 3 * 4 * 2];

static void cudnn_fail(tdm_gb_state *st, const char *what) {
    char msg[700];
    snprintf(msg, sizeof msg, "%s: %s", what, tdm_last_error());
    tdm_gb_skip_with_error(st, msg);
}

static int64_t out_size(int64_t in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

// One call of the pass; the output (y, gx or gw) replaces *out.
static tdm_status run_pass(int pass, const tdm_tensor *x, const tdm_tensor *w,
                           const tdm_tensor *gy, const tdm_conv2d_params *p, tdm_tensor **out) {
    tdm_tensor_free(*out);
    *out = NULL;
    if (pass == 0) {
        *out = tdm_conv2d(x, w, NULL, p);
        return *out ? TDM_OK : tdm_last_status();
    }
    return tdm_conv2d_backward(gy, x, w, p, pass == 1 ? out : NULL, pass == 2 ? out : NULL, NULL);
}

// Mean ms of `iters` calls timed with events (outside the benchmark loop); -1 on failure.
static double time_calls(int pass, const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *gy,
                         const tdm_conv2d_params *p, tdm_tensor **out, int iters) {
    tdm_event *e0 = tdm_event_new(cudnn_cfg.device), *e1 = tdm_event_new(cudnn_cfg.device);
    double ms = -1;
    bool ok = e0 && e1 && tdm_event_record(e0, NULL) == TDM_OK;
    for (int i = 0; ok && i < iters; i++) ok = run_pass(pass, x, w, gy, p, out) == TDM_OK;
    ok = ok && tdm_event_record(e1, NULL) == TDM_OK && tdm_event_elapsed_ms(e0, e1, &ms) == TDM_OK;
    tdm_event_free(e0);
    tdm_event_free(e1);
    return ok ? ms / iters : -1;
}

// The 4-D shape of an (a,b,c,d) NCHW tensor in the layout: (a,c,d,b) for NHWC.
static void layout_shape(tdm_conv_layout layout, int64_t a, int64_t b, int64_t c, int64_t d,
                         int64_t out[4]) {
    const bool nhwc = layout == TDM_CONV_LAYOUT_NHWC;
    out[0] = a, out[1] = nhwc ? c : b, out[2] = nhwc ? d : c, out[3] = nhwc ? b : d;
}

// A host copy of t (in the layout) as doubles in NCHW order, malloc'd; NULL on failure.
static double *host_nchw(const tdm_tensor *t, tdm_conv_layout layout) {
    tdm_tensor *v = NULL;
    if (layout == TDM_CONV_LAYOUT_NHWC && !(v = tdm_tensor_permute(t, (const int[4]){0, 3, 1, 2})))
        return NULL;
    double *h = malloc((size_t)tdm_tensor_numel(t) * sizeof(double));
    if (h && tdm_tensor_to_host_f64(v ? v : t, h) != TDM_OK) {
        free(h);
        h = NULL;
    }
    tdm_tensor_free(v);
    return h;
}

// 4 points of the output against double sums over the host copies (in NCHW order whatever the
// layout); fails st on a mismatch.
// An engine whose error the direct-summation bound does not cover (Winograd, FFT: only the
// benchmark mode takes them, as PyTorch's cudnn.benchmark) is held to a gross-error check
// instead, |error| <= 2^-8 sum |x||w| (docs/CONFORMANCE.md, "Convolution engines"): it catches a
// wrong result, it proves no rounding bound.
static void verify(tdm_gb_state *st, const conv_layer *L, int pass, bool tf32, tdm_dtype dt,
                   tdm_conv_layout layout, const tdm_tensor *x, const tdm_tensor *w,
                   const tdm_tensor *gy, const tdm_tensor *out, const char *engine) {
    const bool transform = strstr(engine, "winograd") || strstr(engine, "fft");
    const int64_t OH = out_size(L->h, (int)L->k, L->stride, L->pad);
    const int64_t OW = out_size(L->w, (int)L->k, L->stride, L->pad);
    const int64_t K = L->k;
    double *hx = host_nchw(x, layout), *hw = host_nchw(w, layout);
    double *hg = pass ? host_nchw(gy, layout) : NULL, *ho = host_nchw(out, layout);
    if (!hx || !hw || (pass && !hg) || !ho) {
        cudnn_fail(st, "verify: copy to host");
        goto done;
    }
    uint64_t s = 7;
    const double u_out = dt == TDM_DTYPE_F32 ? 0x1p-24 : dt == TDM_DTYPE_F16 ? 0x1p-11 : 0x1p-8;
    for (int t = 0; t < 4; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t idx = (int64_t)((s >> 33) % (uint64_t)tdm_tensor_numel(out));
        double e = 0, m = 0, terms = 0;
        // x[n,c,ih,iw] (N,C,H,W), w[o,c,i,j] (O,C,K,K), y/gy[n,o,oh,ow] (N,O,OH,OW)
        if (pass == 0) {   // y[n,o,oh,ow] = sum over c,i,j of x[n,c,ih,iw] w[o,c,i,j]
            int64_t r = idx;
            const int64_t ow = r % OW, oh = (r /= OW) % OH, o = (r /= OH) % L->o, n = r / L->o;
            for (int64_t c = 0; c < L->c; c++)
            for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++) {
                const int64_t ih = oh * L->stride - L->pad + i, iw = ow * L->stride - L->pad + j;
                if (ih < 0 || ih >= L->h || iw < 0 || iw >= L->w) continue;
                const double v = hx[((n * L->c + c) * L->h + ih) * L->w + iw] *
                                 hw[((o * L->c + c) * K + i) * K + j];
                e += v;
                m += fabs(v);
                terms++;
            }
        } else if (pass == 2) {   // gw[o,c,i,j] = sum over n,oh,ow of x[n,c,ih,iw] gy[n,o,oh,ow]
            int64_t r = idx;
            const int64_t j = r % K, i = (r /= K) % K, c = (r /= K) % L->c, o = r / L->c;
            for (int64_t n = 0; n < L->n; n++)
            for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                const int64_t ih = oh * L->stride - L->pad + i, iw = ow * L->stride - L->pad + j;
                if (ih < 0 || ih >= L->h || iw < 0 || iw >= L->w) continue;
                const double v = hx[((n * L->c + c) * L->h + ih) * L->w + iw] *
                                 hg[((n * L->o + o) * OH + oh) * OW + ow];
                e += v;
                m += fabs(v);
                terms++;
            }
        } else {   // gx[n,c,ih,iw] = sum over o,i,j of gy[n,o,oh,ow] w[o,c,i,j]
            int64_t r = idx;
            const int64_t iw = r % L->w, ih = (r /= L->w) % L->h, c = (r /= L->h) % L->c,
                          n = r / L->c;
            for (int64_t o = 0; o < L->o; o++)
            for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++) {
                const int64_t th = ih + L->pad - i, tw = iw + L->pad - j;
                if (th < 0 || tw < 0 || th % L->stride || tw % L->stride) continue;
                const int64_t oh = th / L->stride, ow = tw / L->stride;
                if (oh >= OH || ow >= OW) continue;
                const double v = hg[((n * L->o + o) * OH + oh) * OW + ow] *
                                 hw[((o * L->c + c) * K + i) * K + j];
                e += v;
                m += fabs(v);
                terms++;
            }
        }
        const double g = terms * 0x1p-24 / (1 - terms * 0x1p-24);
        const double bound = transform ? 0x1p-8 * m + u_out * fabs(e) + 1e-30
                                       : ((tf32 ? 2.0 * 0x1p-10 + 0x1p-20 : 0) + g) * m +
                                             u_out * fabs(e) + 1e-30;
        if (!(fabs(ho[idx] - e) <= bound)) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s element %lld = %.9g, expected %.9g (double), |error| "
                     "%.3g > %s %.3g", pass_names[pass], (long long)idx, ho[idx], e,
                     fabs(ho[idx] - e), transform ? "gross-error check" : "bound", bound);
            tdm_gb_skip_with_error(st, msg);
            break;
        }
    }
done:
    free(hx);
    free(hw);
    free(hg);
    free(ho);
}

static void bm_conv(tdm_gb_state *st, void *vctx) {
    const cudnn_ctx *ctx = vctx;
    const conv_layer *L = &layers[ctx->layer];
    const int pass = ctx->pass;
    const tdm_conv_algo_mode mode = (tdm_conv_algo_mode)tdm_gb_arg(st, 0);
    const tdm_dtype dt = prec_dtypes[ctx->prec];
    const bool tf32 = ctx->prec == 1;
    const tdm_device dev = cudnn_cfg.device;
    const bool tf32_before = tdm_tf32_allowed(TDM_TF32_CONV);
    const tdm_conv_algo_mode mode_before = tdm_conv_algo_mode_get();
    tdm_tf32_set_allowed(TDM_TF32_CONV, tf32);
    tdm_conv_algo_mode_set(mode);

    const tdm_conv2d_params p = {{L->stride, L->stride}, {L->pad, L->pad}, {1, 1}, 1, ctx->layout,
                                   {0, 0}};
    const int64_t OH = out_size(L->h, (int)L->k, L->stride, L->pad);
    const int64_t OW = out_size(L->w, (int)L->k, L->stride, L->pad);
    int64_t xs[4], ws[4], ys[4];   // (N,C,H,W), (O,C,K,K), (N,O,OH,OW) in the layout
    layout_shape(ctx->layout, L->n, L->c, L->h, L->w, xs);
    layout_shape(ctx->layout, L->o, L->c, L->k, L->k, ws);
    layout_shape(ctx->layout, L->n, L->o, OH, OW, ys);
    tdm_tensor *x = tdm_tensor_randn(4, xs, dt, dev, CUDNN_SEED, 0);
    tdm_tensor *w = tdm_tensor_randn(4, ws, dt, dev, CUDNN_SEED, 1);
    tdm_tensor *gy = pass ? tdm_tensor_randn(4, ys, dt, dev, CUDNN_SEED, 2) : NULL;
    tdm_tensor *out = NULL;
    tdm_conv_algo_info info, heur_info;
    memset(&heur_info, 0, sizeof heur_info);
    double bench_ms_sum = 0, heur_ms = -1;
    int64_t timed = 0;
    if (!x || !w || (pass && !gy)) {
        cudnn_fail(st, "inputs");
        goto out;
    }
    // the search, untimed: a fresh cache so that this mode's choice is made (and costed) here
    if (tdm_conv_algo_cache_clear(dev) != TDM_OK || run_pass(pass, x, w, gy, &p, &out) != TDM_OK ||
        tdm_conv_algo_last(dev, (tdm_conv_pass)pass, &info) != TDM_OK) {
        cudnn_fail(st, "first call");
        goto out;
    }
    tdm_event *e0 = tdm_event_new(cudnn_cfg.device), *e1 = tdm_event_new(cudnn_cfg.device);
    if (!e0 || !e1) {
        tdm_event_free(e0);
        tdm_event_free(e1);
        cudnn_fail(st, "events");
        goto out;
    }
    while (tdm_gb_keep_running(st)) {
        double ms = 0;
        (void)tdm_event_record(e0, NULL);
        tdm_status s = run_pass(pass, x, w, gy, &p, &out);
        if (s != TDM_OK || tdm_event_record(e1, NULL) != TDM_OK ||
            tdm_event_elapsed_ms(e0, e1, &ms) != TDM_OK) {
            cudnn_fail(st, "timed call");
            break;
        }
        tdm_gb_set_iteration_time(st, ms / 1e3);
        bench_ms_sum += ms;
        timed++;
    }
    tdm_event_free(e0);
    tdm_event_free(e1);
    if (tdm_gb_error_occurred(st)) goto out;
    verify(st, L, pass, tf32, dt, ctx->layout, x, w, gy, out, info.engine);
    if (tdm_gb_error_occurred(st)) goto out;
    // benchmark mode: the heuristic's plan, for the payback
    if (mode == TDM_CONV_ALGO_BENCHMARK) {
        tdm_conv_algo_mode_set(TDM_CONV_ALGO_HEURISTIC);
        if (run_pass(pass, x, w, gy, &p, &out) == TDM_OK &&
            tdm_conv_algo_last(dev, (tdm_conv_pass)pass, &heur_info) == TDM_OK)
            heur_ms = time_calls(pass, x, w, gy, &p, &out, 10);
        if (heur_ms < 0) {
            cudnn_fail(st, "heuristic comparison");
            goto out;
        }
    }
    {
        const double flop = 2.0 * L->n * L->o * OH * OW * L->c * L->k * L->k;
        tdm_gb_counter(st, "GFLOP/s", flop / 1e9, TDM_GB_PER_ITERATION_RATE);
        tdm_gb_counter(st, "search_ms", info.search_ms, TDM_GB_PLAIN);
        tdm_gb_counter(st, "candidates", info.candidates, TDM_GB_PLAIN);
        tdm_gb_counter(st, "workspace_bytes", (double)info.workspace_bytes, TDM_GB_PLAIN);
        char label[300];
        if (mode == TDM_CONV_ALGO_BENCHMARK) {
            const double bench_ms = timed ? bench_ms_sum / timed : 0;
            const double gain = heur_ms - bench_ms;
            tdm_gb_counter(st, "heuristic_ms", heur_ms, TDM_GB_PLAIN);
            tdm_gb_counter(st, "payback_iters", gain > 0 ? info.search_ms / gain : -1,
                           TDM_GB_PLAIN);
            snprintf(label, sizeof label, "%s; heuristic: %s", info.engine, heur_info.engine);
        } else {
            snprintf(label, sizeof label, "%s", info.engine);
        }
        tdm_gb_set_label(st, label);
    }
out:
    tdm_tensor_free(out);
    tdm_tensor_free(gy);
    tdm_tensor_free(w);
    tdm_tensor_free(x);
    tdm_tf32_set_allowed(TDM_TF32_CONV, tf32_before);
    tdm_conv_algo_mode_set(mode_before);
}

// ---- whole-network training steps -------------------------------------------------------------
// One training step (zero_grad, forward, cross-entropy, backward, SGD lr CUDNN_LR) of a CNN through
// the nn/optim API, as a user's loop runs it; fp16 under autocast with the grad scaler, bf16 under
// autocast alone (PyTorch's recipes). Master weights stay f32.

typedef struct {
    const char *name, *spec;
} step_net;
static const step_net step_nets[] = {
    {"smallcnn", "cnn:3x32x32/c32k3p1-bn-relu-mp2-c64k3p1-bn-relu-mp2-flat-fc10"},
    // ResNet widths (64/128/256) on 32x32: 5 convs, 3 of them 64 or 128 wide at full resolution
    {"widecnn", "cnn:3x32x32/c64k3p1-bn-relu-c64k3p1-bn-relu-mp2-c128k3p1-bn-relu-c128k3p1-bn-"
                "relu-mp2-c256k3p1-bn-relu-mp2-flat-fc10"},
};
enum { N_STEP_NETS = sizeof step_nets / sizeof *step_nets, MAX_PARAMS = 64 };
static const char *const mode_names[3] = {"heuristic", "benchmark", "deterministic"};

typedef struct {
    tdm_module *m;
    tdm_optimizer *opt;
    tdm_grad_scaler *scaler;   // fp16 only
    tdm_tensor *x, *y;         // x (B,3,32,32) f32 N(0,1), y (B) int64 in [0,10)
    int prec;                  // index into prec_names
    int64_t batch;
    int skipped;               // steps the scaler skipped (inf/NaN gradients)
} trainer;

static void trainer_free(trainer *t) {
    tdm_grad_scaler_free(t->scaler);
    tdm_optimizer_free(t->opt);
    tdm_module_free(t->m);
    tdm_tensor_free(t->x);
    tdm_tensor_free(t->y);
    memset(t, 0, sizeof *t);
}

// A fresh random batch of `batch` samples (replaces the previous one).
static tdm_status trainer_batch(trainer *t, int64_t batch) {
    tdm_tensor_free(t->x);
    tdm_tensor_free(t->y);
    t->y = NULL;
    t->batch = batch;
    const int64_t xs[4] = {batch, 3, 32, 32};
    t->x = tdm_tensor_randn(4, xs, TDM_DTYPE_F32, cudnn_cfg.device, CUDNN_SEED, 8);
    int64_t *labels = malloc((size_t)batch * sizeof *labels);
    if (!t->x || !labels) {
        free(labels);
        return t->x ? TDM_ERR_OOM : tdm_last_status();
    }
    uint64_t s = 4;
    for (int64_t i = 0; i < batch; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        labels[i] = (int64_t)((s >> 33) % 10);
    }
    t->y = tdm_tensor_from_host(1, &batch, TDM_DTYPE_I64, cudnn_cfg.device, labels);
    free(labels);
    return t->y ? TDM_OK : tdm_last_status();
}

static tdm_status trainer_setup(trainer *t, const step_net *net, int prec, int64_t batch) {
    memset(t, 0, sizeof *t);
    t->prec = prec;
    if (!(t->m = tdm_nn_from_spec(net->spec))) return tdm_last_status();
    tdm_status s = tdm_module_init(t->m, CUDNN_SEED);
    if (s == TDM_OK) s = tdm_module_to(t->m, cudnn_cfg.device);
    if (s != TDM_OK) return s;
    tdm_tensor *params[MAX_PARAMS];
    const int np = tdm_module_parameters(t->m, params, MAX_PARAMS);
    if (np <= 0 || np > MAX_PARAMS) return TDM_ERR_ARG;
    const tdm_sgd_params sp = {.lr = CUDNN_LR};
    if (!(t->opt = tdm_optim_sgd(params, np, &sp))) return tdm_last_status();
    if (prec == 2) {
        const tdm_grad_scaler_params gp = tdm_grad_scaler_defaults();
        if (!(t->scaler = tdm_grad_scaler_new(&gp))) return tdm_last_status();
    }
    return trainer_batch(t, batch);
}

// One training step; *loss (optional: a synchronizing read) gets the step's loss before the update.
static tdm_status trainer_step(trainer *t, double *loss) {
    tdm_optimizer_zero_grad(t->opt);
    const bool cast = t->prec == 2 || t->prec == 3;
    tdm_autocast_state before = tdm_autocast_get();
    if (cast) before = tdm_autocast_enter(t->prec == 2 ? TDM_DTYPE_F16 : TDM_DTYPE_BF16);
    tdm_tensor *out = tdm_module_forward(t->m, t->x);   // (B,10)
    tdm_tensor *l = out ? tdm_cross_entropy(out, t->y, TDM_REDUCTION_MEAN, 0.0, -100) : NULL;
    if (cast) tdm_autocast_exit(before);
    tdm_status s = l ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && t->scaler) {
        tdm_tensor *scaled = tdm_grad_scaler_scale(t->scaler, l);
        bool skipped = false;
        s = scaled ? tdm_backward(scaled, NULL) : tdm_last_status();
        if (s == TDM_OK) s = tdm_grad_scaler_step(t->scaler, t->opt, &skipped);
        if (s == TDM_OK) tdm_grad_scaler_update(t->scaler);
        t->skipped += skipped;
        tdm_tensor_free(scaled);
    } else if (s == TDM_OK) {
        s = tdm_backward(l, NULL);
        if (s == TDM_OK) s = tdm_optimizer_step(t->opt);
    }
    if (s == TDM_OK && loss) s = tdm_tensor_to_host_f64(l, loss);
    tdm_tensor_free(l);
    tdm_tensor_free(out);
    return s;
}

// Milliseconds of one training step, host wall clock between device synchronizations (what a
// user's loop sees: host-side search and plan builds included); -1 on failure.
static double timed_step(trainer *t) {
    if (tdm_device_synchronize(cudnn_cfg.device) != TDM_OK) return -1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (trainer_step(t, NULL) != TDM_OK || tdm_device_synchronize(cudnn_cfg.device) != TDM_OK)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

// Sets the precision's TF32 flags and the mode; restore_flags puts the previous ones back.
typedef struct {
    bool tf32_conv, tf32_matmul;
    tdm_conv_algo_mode mode;
} saved_flags;
static saved_flags set_flags(int prec, tdm_conv_algo_mode mode) {
    const saved_flags f = {tdm_tf32_allowed(TDM_TF32_CONV), tdm_tf32_allowed(TDM_TF32_MATMUL),
                           tdm_conv_algo_mode_get()};
    tdm_tf32_set_allowed(TDM_TF32_CONV, prec == 1);
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, prec == 1);
    tdm_conv_algo_mode_set(mode);
    return f;
}
static void restore_flags(saved_flags f) {
    tdm_tf32_set_allowed(TDM_TF32_CONV, f.tf32_conv);
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, f.tf32_matmul);
    tdm_conv_algo_mode_set(f.mode);
}

// Fails st unless both losses are finite and the later one is lower.
static void check_loss_falls(tdm_gb_state *st, const trainer *t, double before, double after) {
    if (isfinite(before) && isfinite(after) && after < before) return;
    char msg[300];
    snprintf(msg, sizeof msg, "the loss did not fall over %lld timed steps (%.6g -> %.6g; %d "
             "steps skipped by the grad scaler)", (long long)tdm_gb_iterations(st), before, after,
             t->skipped);
    tdm_gb_skip_with_error(st, msg);
}

typedef struct {
    int net, prec, mode;
} step_ctx;
static step_ctx step_ctxs[N_STEP_NETS * 4 * 3];
static int new_shape_ctxs[N_STEP_NETS];

// step_<net>_<prec>_<mode>/batch:B — steady training steps after the first one (which made this
// mode's choices for every convolution of the net: its time is first_step_ms).
static void bm_step(tdm_gb_state *st, void *vctx) {
    const step_ctx *c = vctx;
    const int64_t batch = tdm_gb_arg(st, 0);
    const saved_flags flags = set_flags(c->prec, (tdm_conv_algo_mode)c->mode);
    trainer t;
    double before = NAN, after = NAN, first_ms = -1, sum_ms = 0;
    tdm_status s = trainer_setup(&t, &step_nets[c->net], c->prec, batch);
    if (s == TDM_OK) s = tdm_conv_algo_cache_clear(cudnn_cfg.device);
    if (s != TDM_OK || (first_ms = timed_step(&t)) < 0 || trainer_step(&t, &before) != TDM_OK) {
        cudnn_fail(st, "setup and first steps");
        goto out;
    }
    tdm_event *e0 = tdm_event_new(cudnn_cfg.device), *e1 = tdm_event_new(cudnn_cfg.device);
    if (!e0 || !e1) {
        tdm_event_free(e0);
        tdm_event_free(e1);
        cudnn_fail(st, "events");
        goto out;
    }
    while (tdm_gb_keep_running(st)) {
        double ms = 0;
        (void)tdm_event_record(e0, NULL);
        s = trainer_step(&t, NULL);
        if (s != TDM_OK || tdm_event_record(e1, NULL) != TDM_OK ||
            tdm_event_elapsed_ms(e0, e1, &ms) != TDM_OK) {
            cudnn_fail(st, "timed step");
            break;
        }
        tdm_gb_set_iteration_time(st, ms / 1e3);
        sum_ms += ms;
    }
    tdm_event_free(e0);
    tdm_event_free(e1);
    if (tdm_gb_error_occurred(st)) goto out;
    if (trainer_step(&t, &after) != TDM_OK) {   // the loss after the timed steps' updates
        cudnn_fail(st, "last step");
        goto out;
    }
    check_loss_falls(st, &t, before, after);
    if (tdm_gb_error_occurred(st)) goto out;
    {
        const double steady_ms = sum_ms / (double)tdm_gb_iterations(st);
        tdm_gb_counter(st, "samples/s", (double)batch, TDM_GB_PER_ITERATION_RATE);
        tdm_gb_counter(st, "first_step_ms", first_ms, TDM_GB_PLAIN);
        tdm_gb_counter(st, "search_overhead_ms", first_ms - steady_ms, TDM_GB_PLAIN);
        tdm_gb_counter(st, "loss", after, TDM_GB_PLAIN);
        tdm_gb_counter(st, "skipped_steps", t.skipped, TDM_GB_PLAIN);
        tdm_conv_algo_info fi;
        if (tdm_conv_algo_last(cudnn_cfg.device, TDM_CONV_PASS_FORWARD, &fi) == TDM_OK) {
            char label[200];
            snprintf(label, sizeof label, "%s %s, %s; last conv fwd: %s",
                     step_nets[c->net].name, prec_names[c->prec], mode_names[c->mode], fi.engine);
            tdm_gb_set_label(st, label);
        }
    }
out:
    trainer_free(&t);
    restore_flags(flags);
}

// new_shape_<net>/mode:M — a step at an input shape the plan cache has not seen (after warm-up at
// batch 64): its time (manual time, first_step_ms) against the mean of 3 steps at that shape right
// after (steady_step_ms). Each iteration takes the next batch size of 65..96 (never the previous
// one) and clears the plan cache first, so that every convolution of forward and backward is a
// new shape to cuDNN, as a never-seen batch size is: heuristics query, plan builds and, in
// benchmark mode, timing every candidate. Cycling keeps the step's own cost in a narrow band
// however many iterations Google Benchmark runs; the sizes repeat, so the caching allocator has
// blocks for them (a truly new size may add a cudaMalloc, the allocator's one-off cost, not
// cuDNN's).
static void bm_new_shape(tdm_gb_state *st, void *vctx) {
    const int net = *(const int *)vctx;
    const tdm_conv_algo_mode mode = (tdm_conv_algo_mode)tdm_gb_arg(st, 0);
    const saved_flags flags = set_flags(0, mode);
    trainer t;
    double before = NAN, after = NAN, first_sum = 0, steady_sum = 0;
    int64_t k = 0;
    tdm_status s = trainer_setup(&t, &step_nets[net], 0, 64);
    for (int i = 0; s == TDM_OK && i < 3; i++) s = trainer_step(&t, i ? NULL : &before);
    if (s != TDM_OK) {
        cudnn_fail(st, "setup and warm-up at batch 64");
        goto out;
    }
    while (tdm_gb_keep_running(st)) {
        s = trainer_batch(&t, 65 + k++ % 32);   // manual time: only the first step counts
        if (s == TDM_OK) s = tdm_conv_algo_cache_clear(cudnn_cfg.device);
        const double first = s == TDM_OK ? timed_step(&t) : -1;
        double steady = 0;
        for (int i = 0; first >= 0 && steady >= 0 && i < 3; i++) {
            const double ms = timed_step(&t);
            steady = ms < 0 ? -1 : steady + ms / 3;
        }
        if (first < 0 || steady < 0) {
            cudnn_fail(st, "step at a new batch size");
            break;
        }
        tdm_gb_set_iteration_time(st, first / 1e3);
        first_sum += first;
        steady_sum += steady;
    }
    if (tdm_gb_error_occurred(st)) goto out;
    if (trainer_batch(&t, 64) != TDM_OK || trainer_step(&t, &after) != TDM_OK) {
        cudnn_fail(st, "last step at batch 64");
        goto out;
    }
    check_loss_falls(st, &t, before, after);
    if (tdm_gb_error_occurred(st) || k == 0) goto out;
    tdm_gb_counter(st, "first_step_ms", first_sum / (double)k, TDM_GB_PLAIN);
    tdm_gb_counter(st, "steady_step_ms", steady_sum / (double)k, TDM_GB_PLAIN);
    tdm_gb_counter(st, "search_overhead_ms", (first_sum - steady_sum) / (double)k, TDM_GB_PLAIN);
    tdm_gb_set_label(st, mode_names[mode]);
out:
    trainer_free(&t);
    restore_flags(flags);
}

// ---- work descriptions (bench list --json; the PyTorch peer's rows match: test peer.work_match)

static const char *algo_mode_name(const int64_t *args, int n) {
    return n && args[0] >= 0 && args[0] < 3 ? mode_names[args[0]] : "";
}

// A conv row's: one pass of the layer in prec and layout, the algorithm mode its argument.
static void conv_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const cudnn_ctx *c = ctx;
    const conv_layer *L = &layers[c->layer];
    const int64_t oh = (L->h + 2 * L->pad - L->k) / L->stride + 1,
                  ow = (L->w + 2 * L->pad - L->k) / L->stride + 1;
    const double flop = 2.0 * (double)(L->n * L->o * oh * ow) * (double)(L->c * L->k * L->k);
    snprintf(buf, (size_t)len,
             "{\"op\": \"conv2d_%s\", \"dtype\": \"%s\", \"shapes\": [[%lld, %lld, %lld, %lld], "
             "[%lld, %lld, %lld, %lld]], \"stride\": %d, \"padding\": %d, \"layout\": \"%s\", "
             "\"algo_mode\": \"%s\", \"per_iteration\": 1, \"FLOP\": %.17g}",
             pass_names[c->pass], prec_names[c->prec], (long long)L->n, (long long)L->c,
             (long long)L->h, (long long)L->w, (long long)L->o, (long long)L->c, (long long)L->k,
             (long long)L->k, L->stride, L->pad, layout_names[c->layout], algo_mode_name(args, n),
             flop);
}

// A step row's: one training step of the net (SGD lr CUDNN_LR) in prec, convolutions in its mode.
static void step_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const step_ctx *c = ctx;
    const long long batch = n ? (long long)args[0] : 0;
    snprintf(buf, (size_t)len,
             "{\"op\": \"train_step\", \"model\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, "
             "\"optimizer\": \"SGD lr %g\", \"algo_mode\": \"%s\", \"per_iteration\": 1, "
             "\"samples\": %lld}",
             step_nets[c->net].spec, prec_names[c->prec], batch, CUDNN_LR,
             mode_names[c->mode], batch);
}

// A new_shape row's: one f32 training step at a batch size new to the algorithm cache, after
// warm-up at batch 64, convolutions in the mode of its argument.
static void new_shape_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const int net = *(const int *)ctx;
    snprintf(buf, (size_t)len,
             "{\"op\": \"train_step_new_shape\", \"model\": \"%s\", \"dtype\": \"f32\", "
             "\"warmup_batch\": 64, \"optimizer\": \"SGD lr %g\", \"algo_mode\": \"%s\", "
             "\"per_iteration\": 1}",
             step_nets[net].spec, CUDNN_LR, algo_mode_name(args, n));
}

static int register_steps(const bench_suite_config *cfg) {
    int n = 0;
    for (int net = 0; net < N_STEP_NETS; net++) {
        for (int prec = 0; prec < 4; prec++) {
            if (cfg->quick && (prec == 1 || prec == 3)) continue;
            for (int mode = 0; mode < 3; mode++) {
                step_ctx *c = &step_ctxs[n++];
                *c = (step_ctx){net, prec, mode};
                char name[160], desc[600];
                snprintf(name, sizeof name, "step_%s_%s_%s", step_nets[net].name,
                         prec_names[prec], mode_names[mode]);
                tdm_gb_bench *b = tdm_gb_register(name, bm_step, c);
                if (!b) return -1;
                snprintf(desc, sizeof desc,
                         "one training step of %s (forward, cross-entropy, backward, SGD lr 0.001; "
                         "%s) with convolutions in %s mode, after a first step that made the "
                         "choices (first_step_ms); samples/s = batch / step time; checks the loss "
                         "is finite and falls",
                         step_nets[net].spec,
                         prec == 0   ? "f32, TF32 off"
                         : prec == 1 ? "f32 with TF32"
                         : prec == 2 ? "autocast f16 + grad scaler"
                                     : "autocast bf16",
                         mode_names[mode]);
                tdm_gb_set_info(b, desc, "samples/s");
                tdm_gb_arg_names(b, 1, (const char *[]){"batch"});
                static const int64_t batches[] = {64, 256};
                for (int i = 0; i < (cfg->quick ? 1 : 2); i++) tdm_gb_args(b, 1, &batches[i]);
                tdm_gb_use_manual_time(b);
                tdm_gb_set_work(b, step_work, c);
            }
        }
    }
    for (int net = 0; net < N_STEP_NETS; net++) {
        new_shape_ctxs[net] = net;
        char name[160], desc[600];
        snprintf(name, sizeof name, "new_shape_%s", step_nets[net].name);
        tdm_gb_bench *b = tdm_gb_register(name, bm_new_shape, &new_shape_ctxs[net]);
        if (!b) return -1;
        snprintf(desc, sizeof desc,
                 "%s, f32: the first training step at an input shape new to the plan cache "
                 "(batch 65..96, cache cleared) after warm-up at batch 64 (time = "
                 "first_step_ms) against steps repeated at that shape (steady_step_ms); "
                 "mode 0 heuristic, 1 benchmark, 2 deterministic",
                 step_nets[net].spec);
        tdm_gb_set_info(b, desc, "time");
        tdm_gb_arg_names(b, 1, (const char *[]){"mode"});
        for (int64_t m = 0; m < 3; m++) tdm_gb_args(b, 1, &m);
        tdm_gb_use_manual_time(b);
        tdm_gb_set_work(b, new_shape_work, &new_shape_ctxs[net]);
    }
    return 0;
}

static int cudnn_register(const bench_suite_config *cfg) {
    cudnn_cfg = *cfg;
    int n = 0;
    for (int l = 0; l < N_LAYERS; l++) {
        // quick: the small CNN and one ResNet layer, f32 and fp16
        if (cfg->quick && strcmp(layers[l].net, "smallcnn") && strcmp(layers[l].layer, "layer1_3x3"))
            continue;
        for (int pass = 0; pass < 3; pass++) {
            for (int prec = 0; prec < 4; prec++) {
                if (cfg->quick && (prec == 1 || prec == 3)) continue;
                for (int lay = 0; lay < 2; lay++) {
                    cudnn_ctx *c = &ctxs[n++];
                    *c = (cudnn_ctx){l, pass, prec, (tdm_conv_layout)lay};
                    char name[160], desc[500];
                    snprintf(name, sizeof name, "conv_%s_%s_%s_%s_%s", layers[l].net,
                             layers[l].layer, pass_names[pass], prec_names[prec],
                             layout_names[lay]);
                    tdm_gb_bench *b = tdm_gb_register(name, bm_conv, c);
                    if (!b) return -1;
                    snprintf(desc, sizeof desc,
                             "%s %s: x (N,C,H,W) (%lld,%lld,%lld,%lld), w (%lld,%lld,%lld,%lld) "
                             "stride %d pad %d, %s %s, stored %s; FLOP = 2 N O OH OW C kh kw; "
                             "mode 0 heuristic, 1 benchmark, 2 deterministic",
                             layers[l].net, layers[l].layer, (long long)layers[l].n,
                             (long long)layers[l].c, (long long)layers[l].h,
                             (long long)layers[l].w, (long long)layers[l].o,
                             (long long)layers[l].c, (long long)layers[l].k,
                             (long long)layers[l].k, layers[l].stride, layers[l].pad,
                             pass_names[pass], prec_names[prec],
                             lay ? "NHWC (channels_last)" : "NCHW");
                    tdm_gb_set_info(b, desc, "time");
                    tdm_gb_arg_names(b, 1, (const char *[]){"mode"});
                    for (int64_t m = 0; m < 3; m++) tdm_gb_args(b, 1, &m);
                    tdm_gb_use_manual_time(b);
                    tdm_gb_set_work(b, conv_work, c);
                }
            }
        }
    }
    return register_steps(cfg);
}

#else   // a build without CUDA: the suite has no form (devices = cuda only, never registered)

static int cudnn_register(const bench_suite_config *cfg) {
    (void)cfg;
    return 0;
}

#endif

// "benchmark / heuristic" and "deterministic / heuristic" in samples/s, per net and precision:
// above 1 the mode's steady step is faster than the heuristic's.
#define CUDNN_RATIOS(net, prec)                                                                    \
    {"benchmark / heuristic (" net " " prec ")", "step_" net "_" prec "_benchmark",               \
     "step_" net "_" prec "_heuristic", "samples/s"},                                             \
    {"deterministic / heuristic (" net " " prec ")", "step_" net "_" prec "_deterministic",       \
     "step_" net "_" prec "_heuristic", "samples/s"}
// "NCHW time / NHWC time" per mode for a 3x3 and a 1x1 ResNet layer: above 1 NHWC is faster.
#define CUDNN_LAYOUT_RATIO(layer, pass, prec)                                                     \
    {"NCHW / NHWC time (" layer " " pass " " prec ")", "conv_" layer "_" pass "_" prec "_nchw",  \
     "conv_" layer "_" pass "_" prec "_nhwc", "time"}
static const bench_ratio cudnn_ratios[] = {
    CUDNN_LAYOUT_RATIO("resnet18_layer1_3x3", "fwd", "f32"),
    CUDNN_LAYOUT_RATIO("resnet18_layer1_3x3", "fwd", "fp16"),
    CUDNN_LAYOUT_RATIO("resnet18_layer1_3x3", "bwd_data", "fp16"),
    CUDNN_LAYOUT_RATIO("resnet18_layer1_3x3", "bwd_filter", "fp16"),
    CUDNN_LAYOUT_RATIO("resnet18_layer1_3x3", "fwd", "bf16"),
    CUDNN_LAYOUT_RATIO("resnet50_layer1_expand1x1", "fwd", "fp16"),
    CUDNN_RATIOS("smallcnn", "f32"), CUDNN_RATIOS("smallcnn", "tf32"),
    CUDNN_RATIOS("smallcnn", "fp16"), CUDNN_RATIOS("smallcnn", "bf16"),
    CUDNN_RATIOS("widecnn", "f32"), CUDNN_RATIOS("widecnn", "tf32"),
    CUDNN_RATIOS("widecnn", "fp16"), CUDNN_RATIOS("widecnn", "bf16"),
    {0},
};

const bench_suite bench_suite_cudnn = {
    .name = "cudnn",
    .description = "cuDNN convolution algorithm modes (heuristic, benchmark = cudnn.benchmark, "
                   "deterministic) on ResNet-18/50 and small-CNN conv layers (time, search cost, "
                   "payback), whole training steps of two CNNs per mode, and the cost of a new "
                   "input shape; layers in NCHW and NHWC (channels_last); cuda only (no CPU "
                   "form: the reference has no algorithms to choose)",
    .doc = "docs/suites/cudnn.md",
    .devices = BENCH_SUITE_CUDA,
    .ratios = cudnn_ratios,
    .register_benchmarks = cudnn_register,
};
