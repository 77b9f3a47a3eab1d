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
 * graphs need a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/tensor_impl.h"   // tdm_error_set, TDM_TRY
#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "tandem/tandem.h"

static bench_suite_config gr_cfg;

enum { GR_SEED = 20261122, GR_WARMUP = 3, GR_FEATURES = 1000, GR_CLASSES = 10 };
#define GR_SPEC "mlp:1000-512-10"

typedef struct {
    tdm_device dev;
    int64_t batch;
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

// One step; *loss_out (when not NULL) = its loss tensor, else freed. Seeded by `ones`.
static tdm_status gr_step(gr_bench *b, const tdm_tensor *x, const tdm_tensor *y,
                          tdm_tensor **loss_out) {
    tdm_optimizer_zero_grad(b->opt);
    tdm_tensor *out = tdm_module_forward(b->m, x);
    tdm_tensor *loss = out ? tdm_cross_entropy(out, y, TDM_REDUCTION_MEAN, 0.0, -100) : NULL;
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
    tdm_tensor *loss = out ? tdm_cross_entropy(out, b->y, TDM_REDUCTION_MEAN, 0.0, -100) : NULL;
    tdm_grad_set_enabled(prev);
    tdm_status s = loss ? tdm_tensor_to_host_f64(loss, l) : tdm_last_status();
    tdm_tensor_free(out);
    tdm_tensor_free(loss);
    return s;
}

static tdm_status gr_setup(gr_bench *b, int64_t batch, bool graph) {
    b->dev = gr_cfg.device;
    b->batch = batch;
    if (batch < 1 || batch > 1024) return tdm_error_set(TDM_ERR_ARG, "batch %lld: 1..1024", (long long)batch);
    if (!(b->m = tdm_nn_from_spec(GR_SPEC))) return tdm_last_status();
    TDM_TRY(tdm_module_init(b->m, GR_SEED));
    TDM_TRY(tdm_module_to(b->m, b->dev));
    tdm_tensor *params[4];
    int np = tdm_module_parameters(b->m, params, 4);
    tdm_sgd_params sp = {.lr = 0.01, .momentum = 0.9};
    if (np != 4 || !(b->opt = tdm_optim_sgd(params, np, &sp))) return tdm_last_status();
    // x ~ N(0,1); y = argmax of the first 10 features
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
    float one = 1.0f;
    b->ones = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, b->dev, &one);
    if (!b->x || !b->y || !b->ones) return tdm_last_status();
    for (int i = 0; i < GR_WARMUP; i++) TDM_TRY(gr_step(b, b->x, b->y, NULL));
    if (!graph) return tdm_device_synchronize(b->dev);
    b->xs = tdm_tensor_zeros(2, xs, TDM_DTYPE_F32, b->dev);
    b->ys = tdm_tensor_zeros(1, &batch, TDM_DTYPE_I64, b->dev);
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
    (void)tdm_memory_empty_cache(b->dev);
    tdm_error_clear();
}

static void bm_mlp_step(tdm_gb_state *st, void *ctx) {
    const bool graph = ctx != NULL;
    const int64_t batch = tdm_gb_arg(st, 0);
    gr_bench b = {0};
    double before = NAN, after = NAN;
    bool ok = gr_setup(&b, batch, graph) == TDM_OK && gr_loss(&b, &before) == TDM_OK;
    if (!ok) gr_fail(st, graph ? "mlp_step_graph: setup" : "mlp_step_eager: setup");
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
            gr_fail(st, graph ? "mlp_step_graph" : "mlp_step_eager");
        }
    }
    if (ok && gr_loss(&b, &after) != TDM_OK) gr_fail(st, "final loss");
    else if (ok && !(after < before)) {
        char msg[200];
        snprintf(msg, sizeof msg, "graphs: the loss did not fall (%.6g -> %.6g)", before, after);
        tdm_gb_skip_with_error(st, msg);
    }
    tdm_gb_counter(st, "samples/s", (double)batch, TDM_GB_PER_ITERATION_RATE);
    char label[160];
    snprintf(label, sizeof label, "%s, batch %lld, SGD lr 0.01 momentum 0.9, %s", GR_SPEC,
             (long long)batch, graph ? "captured step replayed" : "eager");
    tdm_gb_set_label(st, label);
    gr_free(&b);
}

static int gr_register(const bench_suite_config *cfg) {
    gr_cfg = *cfg;
    static const char *const names[2] = {"mlp_step_eager", "mlp_step_graph"};
    for (int i = 0; i < 2; i++) {
        tdm_gb_bench *b = tdm_gb_register(names[i], bm_mlp_step, i ? (void *)1 : NULL);
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
    }
    return 0;
}

static const bench_ratio gr_ratios[] = {
    {"graph / eager", "mlp_step_graph", "mlp_step_eager", "samples/s"},
    {0},
};

const bench_suite bench_suite_graphs = {
    .name = "graphs",
    .description = "CUDA graphs (PyTorch's reduce-overhead) on a launch-bound step: the seeds' "
                   "MLP 1000-512-10 trained eagerly vs one captured step replayed; samples/s; "
                   "cuda only (graphs need a CUDA device)",
    .doc = "docs/suites/graphs.md",
    .devices = BENCH_SUITE_CUDA,
    .ratios = gr_ratios,
    .register_benchmarks = gr_register,
};
