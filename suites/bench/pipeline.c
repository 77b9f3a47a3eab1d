/* pipeline.c — suite `pipeline`: the input pipeline of a training loop (the seeds' "why is my GPU
 * idle?"): an MLP trained through nn/optim on batches from the data loader (tandem/data.h), fed
 * three ways (docs/suites/pipeline.md):
 *   load_sync_pageable/workers:0  the caller's thread gathers each batch in pageable memory and
 *                                 copies it synchronously before the step (the naive loop);
 *   load_pinned/workers:0         (cuda) batches gathered in pinned memory (pin_memory) and copied
 *                                 on a side stream into one of two device buffers while the
 *                                 previous step computes (events order the two streams);
 *   load_prefetch/workers:W       W = 1, 2, 4 worker threads gather batches ahead; on cuda they
 *                                 are pinned and copied as in load_pinned.
 * One iteration is one training step (forward, cross-entropy, backward, SGD); samples/s = batch
 * / step wall time. busy_share = the time spent in training steps over the wall time of the loop:
 * on cuda the steps' GPU time (events around each step on the compute stream), on the cpu their
 * host time. The dataset is learnable (label = argmax of the first 10 features) and read in order
 * (no shuffle), so after the loop the last batch on the device is checked against the dataset's
 * rows, and the loss on the first batch must have fallen.
 *
 * gpt_load_*: the same three ways for nanoGPT's GPT (issue 23), the amp suite's model (GPT-2 124M
 * on a GPU, T256 with --quick; gpt:L2-H2-D32-T16-V67 on the cpu and the emulated device): x and y
 * are (N, T) i64 token rows and their next tokens (bench_gpt_tokens), batches of 8 rows, nanoGPT's
 * loss over (B*T, V) logits, SGD lr 0.01; tokens/s = B*T / step wall time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tensor_impl.h"   // tdm_error_set
#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "suites/bench/bench_train.h"   // the GPT models and their tokens
#include "tandem/tandem.h"

static bench_suite_config pl_cfg;

enum { PL_SEED = 20261123, PL_RING = 64 };

#define PL_TRY(expr)                       \
    do {                                   \
        tdm_status pl_s_ = (expr);         \
        if (pl_s_ != TDM_OK) return pl_s_; \
    } while (0)

typedef enum { PL_SYNC_PAGEABLE, PL_PINNED, PL_PREFETCH } pl_mode;

typedef struct {
    const char *name;
    pl_mode mode;
    bool gpt;   // nanoGPT's GPT on token rows instead of the MLP on feature rows
} pl_case;

static const pl_case pl_cases[] = {
    {"load_sync_pageable", PL_SYNC_PAGEABLE, false},
    {"load_pinned", PL_PINNED, false},
    {"load_prefetch", PL_PREFETCH, false},
    {"gpt_load_sync_pageable", PL_SYNC_PAGEABLE, true},
    {"gpt_load_pinned", PL_PINNED, true},
    {"gpt_load_prefetch", PL_PREFETCH, true},
};

// The problem per device: features (a GPT's T: x's and y's row length), hidden units (0 for a
// GPT), samples, batch, the GPT's vocabulary.
typedef struct {
    int64_t features, hidden, samples, batch, vocab;
    bool gpt;
    char spec[64];
} pl_shape;

static pl_shape pl_shape_for(const bench_suite_config *cfg, bool gpt) {
    pl_shape s;
    tdm_gpt_config gc;
    if (gpt && tdm_nn_gpt_spec(bench_gpt_for(cfg->device, cfg->quick)->spec, &gc) == TDM_OK) {
        s = (pl_shape){gc.block_size, 0, cfg->quick ? 64 : 256, BENCH_GPT_BATCH, gc.vocab_size,
                       true, ""};
        snprintf(s.spec, sizeof s.spec, "%s", bench_gpt_for(cfg->device, cfg->quick)->spec);
        return s;
    }
    if (cfg->device.type == TDM_DEVICE_CUDA)  // 3x64x64 "images": copies that matter
        s = (pl_shape){12288, 512, cfg->quick ? 512 : 4096, 64, 0, false, ""};
    else
        s = (pl_shape){256, 64, cfg->quick ? 512 : 4096, 32, 0, false, ""};
    snprintf(s.spec, sizeof s.spec, "mlp:%lld-%lld-10", (long long)s.features, (long long)s.hidden);
    return s;
}

// Bytes of one row of x and of y.
static size_t pl_x_row_bytes(const pl_shape *s) { return (size_t)s->features * (s->gpt ? 8 : 4); }
static size_t pl_y_row_bytes(const pl_shape *s) { return s->gpt ? (size_t)s->features * 8 : 8; }

static double pl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pl_fail(tdm_gb_state *st, const char *what) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what, tdm_last_error());
    tdm_gb_skip_with_error(st, msg);
}

// ---- the dataset, the model, the step --------------------------------------------------------

typedef struct {
    pl_shape shape;
    tdm_device dev;
    bool gpu;
    tdm_tensor *x, *y;  // the dataset, on the cpu: x (N, F) f32, y (N) i64; a GPT's (N, T) i64
    bool owned;         // x and y are this call's own (else lent by pl_datasets)
    int draws;          // how many times this process has drawn a dataset of this shape
    tdm_module *m;
    tdm_tensor **params;   // borrowed from m
    tdm_optimizer *opt;
    tdm_loader *loader;
    int64_t epoch, batch_in_epoch;  // the batch the loader gives next
    // cuda, pinned/prefetch: two device buffers, a copy stream, the compute stream, events
    tdm_tensor *dx[2], *dy[2];
    int64_t slot_batch[2];  // which batch of its epoch each buffer holds
    tdm_stream *copy, *compute;
    tdm_event *copied[2], *freed[2];
    // step timing: a ring of (start, end) events, summed as they are reused and at the end
    tdm_event *t0[PL_RING], *t1[PL_RING];
    int64_t steps;
    double busy_s;
} pl_bench;

// A GPT's: N rows of T tokens and their next tokens (the amp suite's synthetic stream).
static tdm_status pl_dataset_tokens(pl_bench *b) {
    return bench_gpt_token_tensors(PL_SEED, b->shape.vocab, b->shape.samples, b->shape.features,
                                   TDM_CPU, &b->x, &b->y);
}

// x ~ N(0,1); y = argmax of the first 10 features: a task the MLP learns.
static tdm_status pl_dataset_draw(pl_bench *b) {
    if (b->shape.gpt) return pl_dataset_tokens(b);
    int64_t n = b->shape.samples, f = b->shape.features, xs[2] = {n, f};
    b->x = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, TDM_CPU, PL_SEED, 0);
    if (!b->x) return tdm_last_status();
    const float *xv = tdm_tensor_data_const(b->x);
    int64_t *labels = malloc((size_t)n * sizeof *labels);
    if (!labels) return TDM_ERR_OOM;
    for (int64_t i = 0; i < n; i++) {
        int64_t best = 0;
        for (int64_t k = 1; k < 10; k++)
            if (xv[i * f + k] > xv[i * f + best]) best = k;
        labels[i] = best;
    }
    b->y = tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, labels);
    free(labels);
    return b->y ? TDM_OK : tdm_last_status();
}

// The datasets drawn in this process, by shape: Google Benchmark calls a benchmark function many
// times (warm-up, sizing, repetitions), and drawing the GPU's 6.3 M floats (50 M at full size) on
// the host at every call took seconds a GPU waited for. Each is drawn once and lent to every
// benchmark of its shape (read only: the loader gathers from it); freed when the suite registers
// again or has run. b->draws counts the draws of its shape: 1 in every call when the data is
// drawn once (the counter dataset_draws: never 0, whose spread Google Benchmark cannot divide).
enum { PL_DATASETS = 4 };
static struct {
    pl_shape shape;
    tdm_tensor *x, *y;
} pl_datasets[PL_DATASETS];
static int pl_uncached_draws;   // datasets drawn without room to keep them

static bool pl_same_data(const pl_shape *a, const pl_shape *b) {
    return a->gpt == b->gpt && a->features == b->features && a->samples == b->samples &&
           a->vocab == b->vocab;
}

static tdm_status pl_dataset(pl_bench *b) {
    for (int i = 0; i < PL_DATASETS; i++)
        if (pl_datasets[i].x && pl_same_data(&pl_datasets[i].shape, &b->shape)) {
            b->x = pl_datasets[i].x, b->y = pl_datasets[i].y;
            b->draws = 1;
            return TDM_OK;
        }
    tdm_status s = pl_dataset_draw(b);
    for (int i = 0; s == TDM_OK && i < PL_DATASETS; i++)
        if (!pl_datasets[i].x) {
            pl_datasets[i].shape = b->shape, pl_datasets[i].x = b->x, pl_datasets[i].y = b->y;
            b->draws = 1;
            return TDM_OK;
        }
    b->owned = true;   // no room (or a failure): this call's own, freed with it
    b->draws = ++pl_uncached_draws;
    return s;
}

static void pl_datasets_free(void) {
    for (int i = 0; i < PL_DATASETS; i++) {
        tdm_tensor_free(pl_datasets[i].x);
        tdm_tensor_free(pl_datasets[i].y);
        pl_datasets[i].x = pl_datasets[i].y = NULL;
    }
}

static void pl_free(pl_bench *b) {
    if (b->gpu) (void)tdm_device_synchronize(b->dev);
    (void)tdm_stream_set_current(b->dev, NULL);
    tdm_loader_free(b->loader);
    for (int i = 0; i < 2; i++) {
        tdm_tensor_free(b->dx[i]);
        tdm_tensor_free(b->dy[i]);
        tdm_event_free(b->copied[i]);
        tdm_event_free(b->freed[i]);
    }
    for (int i = 0; i < PL_RING; i++) {
        tdm_event_free(b->t0[i]);
        tdm_event_free(b->t1[i]);
    }
    tdm_stream_free(b->copy);
    tdm_stream_free(b->compute);
    tdm_optimizer_free(b->opt);
    tdm_module_free(b->m);
    free(b->params);
    if (b->owned) {   // else lent by pl_datasets
        tdm_tensor_free(b->x);
        tdm_tensor_free(b->y);
    }
    tdm_host_memory_empty_cache(b->dev);
    tdm_error_clear();
}

static tdm_status pl_setup(pl_bench *b, const pl_case *c, int workers) {
    b->shape = pl_shape_for(&pl_cfg, c->gpt);
    b->dev = pl_cfg.device;
    b->gpu = b->dev.type == TDM_DEVICE_CUDA;
    PL_TRY(pl_dataset(b));
    if (!(b->m = tdm_nn_from_spec(b->shape.spec))) return tdm_last_status();
    PL_TRY(tdm_module_init(b->m, PL_SEED));
    PL_TRY(tdm_module_to(b->m, b->dev));
    int np = tdm_module_parameters(b->m, NULL, 0);
    if (np <= 0 || !(b->params = calloc((size_t)np, sizeof *b->params)))
        return tdm_error_set(TDM_ERR_OOM, "pipeline: out of host memory");
    tdm_module_parameters(b->m, b->params, np);
    tdm_sgd_params sp = {.lr = b->shape.gpt ? 0.01 : 0.05};
    if (!(b->opt = tdm_optim_sgd(b->params, np, &sp))) return tdm_last_status();
    // the loader: batches delivered on the cpu when this suite copies them itself (double
    // buffering on cuda), else where the step runs
    bool staged = b->gpu && c->mode != PL_SYNC_PAGEABLE;
    tdm_loader_params lp = {.batch_size = b->shape.batch,
                            .drop_last = true,
                            .seed = PL_SEED,
                            .workers = workers,
                            .device = staged ? TDM_CPU : b->dev,
                            .pin_memory = staged};
    if (!(b->loader = tdm_loader_new(b->x, b->y, &lp))) return tdm_last_status();
    for (int i = 0; i < PL_RING; i++)
        if (!(b->t0[i] = tdm_event_new(b->dev)) || !(b->t1[i] = tdm_event_new(b->dev)))
            return tdm_last_status();
    if (staged) {
        int64_t xs[2] = {b->shape.batch, b->shape.features};
        for (int i = 0; i < 2; i++) {
            if (!(b->dx[i] = tdm_tensor_empty(2, xs, tdm_tensor_dtype(b->x), b->dev)) ||
                !(b->dy[i] = tdm_tensor_empty(tdm_tensor_ndim(b->y), xs, TDM_DTYPE_I64, b->dev)) ||
                !(b->copied[i] = tdm_event_new(b->dev)) || !(b->freed[i] = tdm_event_new(b->dev)))
                return tdm_last_status();
        }
        if (!(b->copy = tdm_stream_new(b->dev)) || !(b->compute = tdm_stream_new(b->dev)))
            return tdm_last_status();
        PL_TRY(tdm_device_synchronize(b->dev));  // parameters ready before the streams start
        PL_TRY(tdm_stream_set_current(b->dev, b->compute));
    }
    return TDM_OK;
}

// The next batch, wrapping to a new epoch at the end of one; its index in the epoch in *index.
static bool pl_next(pl_bench *b, tdm_tensor **x, tdm_tensor **y, int64_t *index) {
    for (int tries = 0; tries < 2; tries++) {
        *index = b->batch_in_epoch;
        if (tdm_loader_next(b->loader, x, y)) {
            b->batch_in_epoch++;
            return true;
        }
        if (tdm_last_status() != TDM_OK) return false;
        b->batch_in_epoch = 0;
        if (tdm_loader_start_epoch(b->loader, ++b->epoch) != TDM_OK) return false;
    }
    return false;  // an epoch without batches: not with N >= batch
}

// Forward, cross-entropy, backward, SGD; with loss_out, only the loss (no update).
static tdm_status pl_step(pl_bench *b, const tdm_tensor *x, const tdm_tensor *y, double *loss_out) {
    tdm_optimizer_zero_grad(b->opt);
    tdm_tensor *out = tdm_module_forward(b->m, x), *loss = NULL;
    if (out)
        loss = b->shape.gpt ? tdm_gpt_loss(out, y)
                            : tdm_cross_entropy(out, y, TDM_REDUCTION_MEAN, 0.0, -100);
    tdm_status s = loss ? TDM_OK : tdm_last_status();
    if (s == TDM_OK && loss_out) s = tdm_tensor_to_host_f64(loss, loss_out);
    if (s == TDM_OK && !loss_out) s = tdm_backward(loss, NULL);
    if (s == TDM_OK && !loss_out) s = tdm_optimizer_step(b->opt);
    tdm_tensor_free(loss);
    tdm_tensor_free(out);
    return s;
}

// Adds the step time of ring slot r (recorded before) to busy_s.
static tdm_status pl_collect(pl_bench *b, int r) {
    double ms = 0;
    PL_TRY(tdm_event_synchronize(b->t1[r]));
    PL_TRY(tdm_event_elapsed_ms(b->t0[r], b->t1[r], &ms));
    b->busy_s += ms * 1e-3;
    return TDM_OK;
}

// One timed step on the current stream, between the events of its ring slot.
static tdm_status pl_timed_step(pl_bench *b, const tdm_tensor *x, const tdm_tensor *y) {
    int r = (int)(b->steps % PL_RING);
    if (b->steps >= PL_RING) PL_TRY(pl_collect(b, r));  // that slot's previous use
    PL_TRY(tdm_event_record(b->t0[r], NULL));
    PL_TRY(pl_step(b, x, y, NULL));
    PL_TRY(tdm_event_record(b->t1[r], NULL));
    b->steps++;
    return TDM_OK;
}

// The remaining ring slots, once the loop is over.
static tdm_status pl_collect_all(pl_bench *b) {
    int64_t first = b->steps > PL_RING ? b->steps - PL_RING : 0;
    for (int64_t k = first; k < b->steps; k++) PL_TRY(pl_collect(b, (int)(k % PL_RING)));
    return TDM_OK;
}

// Staged (cuda, pinned/prefetch): the next pinned batch copied into buffer `slot` on the copy
// stream once the step that last read that buffer is done.
static tdm_status pl_stage(pl_bench *b, int slot) {
    tdm_tensor *x, *y;
    int64_t index;
    if (!pl_next(b, &x, &y, &index)) return tdm_last_status();
    tdm_status s = tdm_stream_wait_event(b->copy, b->freed[slot]);
    if (s == TDM_OK) s = tdm_tensor_copy_async(b->dx[slot], x, b->copy);
    if (s == TDM_OK) s = tdm_tensor_copy_async(b->dy[slot], y, b->copy);
    if (s == TDM_OK) s = tdm_event_record(b->copied[slot], b->copy);
    b->slot_batch[slot] = index;
    // the pinned blocks stay reserved until the copies are done (the caching host allocator)
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    return s;
}

// ---- the benchmark ---------------------------------------------------------------------------

// Rows [index*B, (index+1)*B) of the dataset against the batch x (any device), and y.
static void pl_verify_batch(tdm_gb_state *st, pl_bench *b, const tdm_tensor *x, const tdm_tensor *y,
                            int64_t index) {
    int64_t B = b->shape.batch;
    size_t xb = (size_t)B * pl_x_row_bytes(&b->shape), yb = (size_t)B * pl_y_row_bytes(&b->shape);
    char *hx = malloc(xb), *hy = malloc(yb);
    if (!hx || !hy || tdm_tensor_to_host(x, hx, xb) != TDM_OK ||
        tdm_tensor_to_host(y, hy, yb) != TDM_OK) {
        if (!hx || !hy)
            tdm_gb_skip_with_error(st, "verify: out of host memory");
        else
            pl_fail(st, "verify: reading the batch back");
    } else {
        const char *wx = (const char *)tdm_tensor_data_const(b->x) + (size_t)index * xb;
        const char *wy = (const char *)tdm_tensor_data_const(b->y) + (size_t)index * yb;
        if (memcmp(hx, wx, xb) != 0 || memcmp(hy, wy, yb) != 0) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "pipeline: the batch on %s is not rows %lld..%lld of the dataset",
                     b->gpu ? "the device" : "the cpu", (long long)(index * B),
                     (long long)((index + 1) * B - 1));
            tdm_gb_skip_with_error(st, msg);
        }
    }
    free(hx);
    free(hy);
}

static void bm_pipeline(tdm_gb_state *st, void *ctx) {
    const pl_case *c = ctx;
    int workers = (int)tdm_gb_arg(st, 0);
    pl_bench b = {0};
    bool ok = pl_setup(&b, c, workers) == TDM_OK;
    if (!ok) pl_fail(st, "pipeline: setup");
    bool staged = b.compute != NULL;
    // the loss on batch 0 before training (the first step trains on it: no shuffle)
    double before = NAN, after = NAN;
    tdm_tensor *x0 = NULL, *y0 = NULL;
    if (ok) {
        int64_t B = b.shape.batch, xs[2] = {B, b.shape.features};
        tdm_dtype xdt = tdm_tensor_dtype(b.x);
        tdm_tensor *hx = tdm_tensor_from_host(2, xs, xdt, TDM_CPU, tdm_tensor_data_const(b.x));
        tdm_tensor *hy = tdm_tensor_from_host(tdm_tensor_ndim(b.y), xs, TDM_DTYPE_I64, TDM_CPU,
                                              tdm_tensor_data_const(b.y));
        x0 = hx ? tdm_tensor_to(hx, b.dev, xdt) : NULL;
        y0 = hy ? tdm_tensor_to(hy, b.dev, TDM_DTYPE_I64) : NULL;
        tdm_tensor_free(hx);
        tdm_tensor_free(hy);
        ok = x0 && y0 && pl_step(&b, x0, y0, &before) == TDM_OK;
        if (ok && staged) ok = pl_stage(&b, 0) == TDM_OK;  // the first batch on its way
        if (!ok) pl_fail(st, "pipeline: first batch");
    }
    tdm_tensor *last_x = NULL, *last_y = NULL;  // unstaged: the last batch, for the check
    int64_t last_index = 0;
    int cur = 0;
    double wall0 = pl_now();
    while (tdm_gb_keep_running(st)) {
        if (!ok) continue;
        tdm_status s = TDM_OK;
        if (staged) {
            // bound how far the host runs ahead: the step two before this one is done
            if (b.steps >= 2) s = tdm_event_synchronize(b.t1[(b.steps - 2) % PL_RING]);
            if (s == TDM_OK) s = tdm_stream_wait_event(b.compute, b.copied[cur]);
            if (s == TDM_OK) s = pl_timed_step(&b, b.dx[cur], b.dy[cur]);
            if (s == TDM_OK) s = tdm_event_record(b.freed[cur], b.compute);
            // while the step computes: gather the next batch and start its copy
            if (s == TDM_OK) s = pl_stage(&b, 1 - cur);
            cur = 1 - cur;
        } else {
            tdm_tensor *x, *y;
            int64_t index;
            s = pl_next(&b, &x, &y, &index) ? TDM_OK : tdm_last_status();
            if (s == TDM_OK) {
                s = pl_timed_step(&b, x, y);
                tdm_tensor_free(last_x);
                tdm_tensor_free(last_y);
                last_x = x, last_y = y, last_index = index;
            }
        }
        if (s != TDM_OK) {
            ok = false;
            pl_fail(st, c->name);
        }
    }
    if (ok && b.gpu) ok = tdm_device_synchronize(b.dev) == TDM_OK;
    double wall = pl_now() - wall0;
    if (ok) ok = pl_collect_all(&b) == TDM_OK;
    if (!ok && !tdm_gb_error_occurred(st)) pl_fail(st, c->name);
    if (ok && !tdm_gb_error_occurred(st)) {
        // the batch last handed to the device is the dataset's rows; training lowered the loss
        int last = 1 - cur;  // staged: the buffer the last step read
        if (staged)
            pl_verify_batch(st, &b, b.dx[last], b.dy[last], b.slot_batch[last]);
        else if (last_x)
            pl_verify_batch(st, &b, last_x, last_y, last_index);
        if (staged) (void)tdm_stream_set_current(b.dev, NULL);
        if (!tdm_gb_error_occurred(st) && pl_step(&b, x0, y0, &after) != TDM_OK)
            pl_fail(st, "pipeline: final loss");
        if (!tdm_gb_error_occurred(st) && !(after < before)) {
            char msg[200];
            snprintf(msg, sizeof msg, "pipeline: the loss on batch 0 did not fall (%.6g -> %.6g)",
                     before, after);
            tdm_gb_skip_with_error(st, msg);
        }
    }
    bench_rate_counters(st, (double)b.shape.batch, c->gpt ? b.shape.features : 0, true);
    tdm_gb_counter(st, "busy_share", wall > 0 ? b.busy_s / wall : 0, TDM_GB_PLAIN);
    tdm_gb_counter(st, "dataset_draws", b.draws, TDM_GB_PLAIN);   // 1: drawn once, kept
    char label[200];
    snprintf(label, sizeof label, "%s, batch %lld, %s%s, SGD lr %g", b.shape.spec,
             (long long)b.shape.batch, staged ? "pinned + side-stream copy" : "pageable",
             b.gpu && !staged ? " + synchronous copy" : "", c->gpt ? 0.01 : 0.05);
    tdm_gb_set_label(st, label);
    tdm_tensor_free(last_x);
    tdm_tensor_free(last_y);
    tdm_tensor_free(x0);
    tdm_tensor_free(y0);
    pl_free(&b);
}

// ---- registration -------------------------------------------------------------------------------

// The work of one timed iteration (bench list --json; the PyTorch peer's rows match: test
// peer.work_match): one training step on the next batch of the loader, which reads the dataset
// in order (no shuffle, drop_last) with `workers` workers, pinned batches where staged.
static void pl_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const pl_case *c = ctx;
    const pl_shape s = pl_shape_for(&pl_cfg, c->gpt);
    const bool gpu = pl_cfg.device.type == TDM_DEVICE_CUDA;
    char train[400];
    bench_work_train(train, sizeof train, s.spec, "f32", s.batch, c->gpt ? 0.01 : 0.05, 0, 1);
    size_t k = strlen(train);
    if (k) train[k - 1] = 0;   // without its closing brace: the loader's keys follow
    snprintf(buf, (size_t)len,
             "%s, \"loader\": {\"samples\": %lld, \"workers\": %lld, \"pin_memory\": %s, "
             "\"shuffle\": false, \"drop_last\": true, \"copy\": \"%s\"}}",
             train, (long long)s.samples, (long long)(n ? args[0] : 0),
             gpu && c->mode != PL_SYNC_PAGEABLE ? "true" : "false",
             !gpu                         ? "none"
             : c->mode == PL_SYNC_PAGEABLE ? "synchronous"
                                           : "side stream, two device buffers");
}

static int pl_register(const bench_suite_config *cfg) {
    pl_cfg = *cfg;
    pl_datasets_free();
    bool gpu = cfg->device.type == TDM_DEVICE_CUDA;
    for (int i = 0; i < (int)(sizeof pl_cases / sizeof *pl_cases); i++) {
        const pl_case *c = &pl_cases[i];
        pl_shape s = pl_shape_for(cfg, c->gpt);
        if (c->mode == PL_PINNED && !gpu) continue;  // pinning buys nothing without copies
        tdm_gb_bench *b = tdm_gb_register(c->name, bm_pipeline, (void *)c);
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"workers"});
        if (c->mode == PL_PREFETCH)
            for (int64_t w = 1; w <= 4; w *= 2) tdm_gb_args(b, 1, &w);
        else
            tdm_gb_args(b, 1, (const int64_t[]){0});
        char desc[500];
        snprintf(desc, sizeof desc,
                 "training steps of %s (batch %lld, %lld %s in order) fed by the data loader: "
                 "%s; %s / step time; busy_share = step time / wall time; checks "
                 "the last batch against the dataset and that the loss falls",
                 s.spec, (long long)s.batch, (long long)s.samples,
                 c->gpt ? "rows of tokens" : "samples",
                 c->mode == PL_SYNC_PAGEABLE ? "batches gathered by the training thread, copied "
                                               "synchronously"
                 : c->mode == PL_PINNED      ? "pinned batches copied on a side stream into two "
                                               "device buffers, overlapping the previous step"
                 : gpu ? "worker threads gather pinned batches ahead, copied on a side stream"
                       : "worker threads gather batches ahead",
                 c->gpt ? "tokens/s = batch x T" : "samples/s = batch");
        tdm_gb_set_info(b, desc, c->gpt ? "tokens/s" : "samples/s");
        tdm_gb_set_work(b, pl_work, (void *)c);
    }
    return 0;
}

static const bench_ratio pl_ratios[] = {
    {"pinned / sync_pageable", "load_pinned", "load_sync_pageable", "samples/s"},
    {"pinned / sync_pageable (gpt)", "gpt_load_pinned", "gpt_load_sync_pageable", "tokens/s"},
    {0},
};

const bench_suite bench_suite_pipeline = {
    .name = "pipeline",
    .description =
        "a training loop fed by the data loader: synchronous pageable loading, pinned "
        "batches with async copies on a side stream (cuda only: no copies on the cpu), "
        "worker threads prefetching; samples/s and the busy share; the same for nanoGPT's "
        "GPT on token rows (tokens/s)",
    .doc = "docs/suites/pipeline.md",
    .devices = BENCH_SUITE_CPU | BENCH_SUITE_CUDA,
    .ratios = pl_ratios,
    .register_benchmarks = pl_register,
    .finish = pl_datasets_free,
};
