/* graphs.c — suite `graphs`: what CUDA graphs (tandem/graph.h, PyTorch's reduce-overhead) save on a
 * launch-bound training step (docs/suites/graphs.md). The seeds' small MLP 1000-512-10, batch 64,
 * SGD lr 0.01 momentum 0.9, trained on one fixed device batch:
 *   mlp_step_eager/batch:64  each iteration runs the step op by op (zero_grad, forward,
 *                            cross-entropy, backward, SGD): ~20 kernel launches from the host;
 *   mlp_step_graph/batch:64  the same step captured once (after 3 eager warm-up steps) and
 *                            replayed: each iteration copies the batch into the static input and
 *                            target tensors (two device-to-device copies) and launches the graph.
 * Each iteration ends with a device synchronization (a loop that reads its loss every step waits
 * as long), so the time is that of complete steps; samples/s = batch / iteration time. After the
 * loop the loss on the batch must have fallen (the step really trained) and be finite. cuda only:
 * graphs need a CUDA device.
 *   gpt_step_eager/batch:8, gpt_step_graph/batch:8  the same for nanoGPT's GPT (issue 23): GPT-2
 *                            124M's shape (rows of 1024 tokens; 256 with --quick) on a GPU, the
 *                            tiny gpt:L2-H2-D32-T16-V67 on the emulated device, 8 rows of the amp
 *                            suite's synthetic tokens (bench_gpt_tokens), nanoGPT's loss over
 *                            (B*T, V) logits; tokens/s = B*T / iteration time. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"   // tdm_error_set, TDM_TRY
#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "suites/bench/bench_train.h"   // the GPT models and their tokens
#include "tandem/tandem.h"

static bench_suite_config gr_cfg;

enum { GR_SEED = 20261122, GR_WARMUP = 3, GR_FEATURES = 1000, GR_CLASSES = 10 };
#define GR_SPEC "mlp:1000-512-10"

typedef struct {
    tdm_device dev;
    int64_t batch;
    bool lm;                    // a GPT: x, y (batch,T) tokens, the loss over (batch*T, V)
    tdm_tensor **params;        // the model's, borrowed from m
    tdm_module *m;
    tdm_optimizer *opt;
    tdm_tensor *x, *y;          // the batch, on the device
    tdm_tensor *xs, *ys, *ones; // graph: the static input, target, backward seed
    tdm_tensor *loss;           // graph: the captured step's loss
    tdm_graph *g;
} gr_bench;

static void gr_fail(tdm_gb_state *st, const char *what) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what, tdm_last_error());
    tdm_gb_skip_with_error(st, msg);
}

// The loss of out against y: F.cross_entropy, or for a GPT nanoGPT's over (B*T, V) logits.
static tdm_tensor *gr_loss_of(const gr_bench *b, const tdm_tensor *out, const tdm_tensor *y) {
    if (!out) return NULL;
    return b->lm ? tdm_gpt_loss(out, y)
                 : tdm_cross_entropy(out, y, TDM_REDUCTION_MEAN, 0.0, -100);
}

// One step; *loss_out (when not NULL) = its loss tensor, else freed. Seeded by `ones`.
static tdm_status gr_step(gr_bench *b, const tdm_tensor *x, const tdm_tensor *y,
                          tdm_tensor **loss_out) {
    tdm_optimizer_zero_grad(b->opt);
    tdm_tensor *out = tdm_module_forward(b->m, x);
    tdm_tensor *loss = gr_loss_of(b, out, y);
    tdm_status s = loss ? tdm_backward(loss, b->ones) : tdm_last_status();
    if (s == TDM_OK) s = tdm_optimizer_step(b->opt);
    tdm_tensor_free(out);
    if (loss_out && s == TDM_OK)
        *loss_out = loss;
    else
        tdm_tensor_free(loss);
    return s;
}

// The loss on the batch without training (grad mode off).
static tdm_status gr_loss(gr_bench *b, double *l) {
    bool prev = tdm_grad_set_enabled(false);
    tdm_tensor *out = tdm_module_forward(b->m, b->x);
    tdm_tensor *loss = gr_loss_of(b, out, b->y);
    tdm_grad_set_enabled(prev);
    tdm_status s = loss ? tdm_tensor_to_host_f64(loss, l) : tdm_last_status();
    tdm_tensor_free(out);
    tdm_tensor_free(loss);
    return s;
}

// The MLP's batch: x ~ N(0,1), y = argmax of the first 10 features.
static tdm_status gr_data_mlp(gr_bench *b, int64_t batch) {
    if (batch < 1 || batch > 1024) return tdm_error_set(TDM_ERR_ARG, "batch %lld: 1..1024", (long long)batch);
    int64_t xs[2] = {batch, GR_FEATURES};
    tdm_tensor *hx = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, TDM_CPU, GR_SEED, 0);
    if (!hx) return tdm_last_status();
    int64_t labels[1024];
    const float *xv = tdm_tensor_data_const(hx);
    for (int64_t i = 0; i < batch; i++) {
        int64_t best = 0;
        for (int64_t k = 1; k < GR_CLASSES; k++)
            if (xv[i * GR_FEATURES + k] > xv[i * GR_FEATURES + best]) best = k;
        labels[i] = best;
    }
    b->x = tdm_tensor_to(hx, b->dev, TDM_DTYPE_F32);
    tdm_tensor_free(hx);
    b->y = tdm_tensor_from_host(1, &batch, TDM_DTYPE_I64, b->dev, labels);
    return b->x && b->y ? TDM_OK : tdm_last_status();
}

static tdm_status gr_capture(gr_bench *b, bool graph);

// The model (GR_SPEC, or for a GPT the amp suite's: seed GR_SEED), SGD lr 0.01 momentum 0.9, the
// batch (a GPT's: rows of the amp suite's synthetic tokens), then warm-up and capture.
static tdm_status gr_setup(gr_bench *b, int64_t batch, bool graph, bool gpt) {
    b->dev = gr_cfg.device;
    b->batch = batch;
    b->lm = gpt;
    const char *spec = gpt ? bench_gpt_for(b->dev, gr_cfg.quick)->spec : GR_SPEC;
    if (!(b->m = tdm_nn_from_spec(spec))) return tdm_last_status();
    TDM_TRY(tdm_module_init(b->m, GR_SEED));
    TDM_TRY(tdm_module_to(b->m, b->dev));
    int np = tdm_module_parameters(b->m, NULL, 0);
    if (!(b->params = calloc((size_t)np + 1, sizeof *b->params)))
        return tdm_error_set(TDM_ERR_OOM, "graphs: out of memory");
    tdm_module_parameters(b->m, b->params, np);
    tdm_sgd_params sp = {.lr = 0.01, .momentum = 0.9};
    if (!(b->opt = tdm_optim_sgd(b->params, np, &sp))) return tdm_last_status();
    if (gpt) {
        tdm_gpt_config c;
        TDM_TRY(tdm_nn_gpt_spec(spec, &c));
        TDM_TRY(bench_gpt_token_tensors(GR_SEED, c.vocab_size, batch, c.block_size, b->dev, &b->x,
                                        &b->y));
    } else {
        TDM_TRY(gr_data_mlp(b, batch));
    }
    float one = 1.0f;
    b->ones = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, b->dev, &one);
    if (!b->ones) return tdm_last_status();
    return gr_capture(b, graph);
}

// Warm-up steps, then (graph) the static input and target and one step captured.
static tdm_status gr_capture(gr_bench *b, bool graph) {
    for (int i = 0; i < GR_WARMUP; i++) TDM_TRY(gr_step(b, b->x, b->y, NULL));
    if (!graph) return tdm_device_synchronize(b->dev);
    b->xs = tdm_tensor_zeros(tdm_tensor_ndim(b->x), tdm_tensor_shape(b->x), tdm_tensor_dtype(b->x),
                             b->dev);
    b->ys = tdm_tensor_zeros(tdm_tensor_ndim(b->y), tdm_tensor_shape(b->y), TDM_DTYPE_I64, b->dev);
    if (!b->xs || !b->ys) return tdm_last_status();
    TDM_TRY(tdm_graph_capture_begin(b->dev));
    tdm_status s = gr_step(b, b->xs, b->ys, &b->loss);
    char why[512];
    snprintf(why, sizeof why, "%s", tdm_last_error());
    tdm_status e = tdm_graph_capture_end(b->dev, &b->g);
    if (s != TDM_OK) return tdm_error_set(s, "capturing the step: %s", why);
    return e;
}

static void gr_free(gr_bench *b) {
    (void)tdm_device_synchronize(b->dev);
    tdm_graph_free(b->g);
    tdm_tensor_free(b->loss);
    tdm_tensor_free(b->xs);
    tdm_tensor_free(b->ys);
    tdm_tensor_free(b->ones);
    tdm_tensor_free(b->x);
    tdm_tensor_free(b->y);
    tdm_optimizer_free(b->opt);
    tdm_module_free(b->m);
    free(b->params);
    (void)tdm_memory_empty_cache(b->dev);
    tdm_error_clear();
}

// ctx: bit 0 graph, bit 1 the GPT
static void bm_step(tdm_gb_state *st, void *ctx) {
    const bool graph = (intptr_t)ctx & 1, gpt = (intptr_t)ctx & 2;
    const int64_t batch = tdm_gb_arg(st, 0);
    static const char *const names[4] = {"mlp_step_eager", "mlp_step_graph", "gpt_step_eager",
                                         "gpt_step_graph"};
    const char *name = names[(intptr_t)ctx & 3];
    gr_bench b = {0};
    double before = NAN, after = NAN;
    bool ok = gr_setup(&b, batch, graph, gpt) == TDM_OK &&
              gr_loss(&b, &before) == TDM_OK;
    char what[64];
    snprintf(what, sizeof what, "%s: setup", name);
    if (!ok) gr_fail(st, what);
    while (tdm_gb_keep_running(st)) {
        if (!ok) continue;
        tdm_status s;
        if (graph) {   // this iteration's batch into the static tensors, then one launch
            s = tdm_tensor_copy_async(b.xs, b.x, NULL);
            if (s == TDM_OK) s = tdm_tensor_copy_async(b.ys, b.y, NULL);
            if (s == TDM_OK) s = tdm_graph_replay(b.g);
        } else {
            s = gr_step(&b, b.x, b.y, NULL);
        }
        if (s == TDM_OK) s = tdm_device_synchronize(b.dev);
        if (s != TDM_OK) {
            ok = false;
            gr_fail(st, name);
        }
    }
    if (ok && gr_loss(&b, &after) != TDM_OK) gr_fail(st, "final loss");
    else if (ok && !(after < before)) {
        char msg[200];
        snprintf(msg, sizeof msg, "graphs: the loss did not fall (%.6g -> %.6g)", before, after);
        tdm_gb_skip_with_error(st, msg);
    }
    const char *gspec = bench_gpt_for(gr_cfg.device, gr_cfg.quick)->spec;
    bench_rate_counters(st, (double)batch, gpt ? bench_tokens_per_sample(gspec) : 0, false);
    char label[200];
    snprintf(label, sizeof label, "%s, batch %lld, SGD lr 0.01 momentum 0.9, %s",
             gpt ? gspec : GR_SPEC, (long long)batch,
             graph ? "captured step replayed" : "eager");
    tdm_gb_set_label(st, label);
    gr_free(&b);
}

// The work of one timed iteration (bench list --json; the PyTorch peer's rows match: test
// peer.work_match): one training step, SGD lr 0.01 momentum 0.9; ctx: bit 1 the GPT.
static void gr_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const char *spec = (intptr_t)ctx & 2 ? bench_gpt_for(gr_cfg.device, gr_cfg.quick)->spec
                                         : GR_SPEC;
    bench_work_train(buf, len, spec, "f32", n ? args[0] : 0, 0.01, 0.9, 1);
}

static int gr_register(const bench_suite_config *cfg) {
    gr_cfg = *cfg;
    static const char *const names[2] = {"mlp_step_eager", "mlp_step_graph"};
    for (int i = 0; i < 2; i++) {
        tdm_gb_bench *b = tdm_gb_register(names[i], bm_step, (void *)(intptr_t)i);
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
        tdm_gb_args(b, 1, (const int64_t[]){64});
        tdm_gb_set_info(b,
                        i ? "one training step of mlp:1000-512-10 captured in a CUDA graph and "
                            "replayed (batch copied into static tensors first); samples/s = "
                            "batch / step time, synchronized per step"
                          : "one training step of mlp:1000-512-10 run eagerly, op by op; "
                            "samples/s = batch / step time, synchronized per step",
                        "samples/s");
        tdm_gb_set_work(b, gr_work, (void *)(intptr_t)i);
    }
    char info[400];
    for (int i = 0; i < 2; i++) {
        static const char *const gnames[2] = {"gpt_step_eager", "gpt_step_graph"};
        tdm_gb_bench *b = tdm_gb_register(gnames[i], bm_step, (void *)(intptr_t)(2 | i));
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"batch"});
        tdm_gb_args(b, 1, (const int64_t[]){BENCH_GPT_BATCH});
        snprintf(info, sizeof info,
                 "one training step of nanoGPT's GPT (GPT-2 124M's shape on a GPU, rows of 1024 "
                 "tokens, 256 with --quick; gpt:L2-H2-D32-T16-V67 on the emulated device) %s; "
                 "tokens/s = B*T / step time, synchronized per step",
                 i ? "captured in a CUDA graph and replayed (tokens copied into static tensors "
                     "first)"
                   : "run eagerly, op by op");
        tdm_gb_set_info(b, info, "tokens/s");
        tdm_gb_set_work(b, gr_work, (void *)(intptr_t)(2 | i));
    }
    return 0;
}

static const bench_ratio gr_ratios[] = {
    {"graph / eager", "mlp_step_graph", "mlp_step_eager", "samples/s"},
    {"graph / eager (gpt)", "gpt_step_graph", "gpt_step_eager", "tokens/s"},
    {0},
};

const bench_suite bench_suite_graphs = {
    .name = "graphs",
    .description = "CUDA graphs (PyTorch's reduce-overhead) on a launch-bound step: the seeds' "
                   "MLP 1000-512-10 trained eagerly vs one captured step replayed; samples/s; "
                   "the same for nanoGPT's GPT in tokens/s; "
                   "cuda only (graphs need a CUDA device)",
    .doc = "docs/suites/graphs.md",
    .devices = BENCH_SUITE_CUDA,
    .ratios = gr_ratios,
    .register_benchmarks = gr_register,
};
