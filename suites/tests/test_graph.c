/* test_graph.c — CUDA graph capture and replay (tandem/graph.h): on the cpu every call refuses
 * with "graph capture needs a CUDA device"; on cuda:0 (exit 77 with one line without one) a
 * captured elementwise computation replayed after refilling its static input gives the eager
 * result bit for bit, a host copy during the capture fails and makes the capture fail, and the
 * graph's private pool takes memory of its own and gives it all back once the graph is freed.
 * Capture-safe state (core/graph_impl.h): a captured optimizer step — SGD with momentum, Adam,
 * AdamW, and with maximize (SGD + nesterov) and amsgrad + maximize (Adam, AdamW) — captured
 * before any eager step, and random draws from generators (rand, randn,
 * dropout with its backward), replayed several times with fresh inputs, equal the same eager
 * steps bit for bit, and eager steps mixed in between continue the same sequence. Issue 23:
 * clip_grad_norm_ captured before the step of an optimizer of two parameter groups (AdamW,
 * SGD with momentum) whose lrs are set from nanoGPT's schedule between the replays: the same
 * bits as eager, the captured total norm too (error_if_nonfinite refused under capture).
 * Usage: test_graph cpu_refuses | gpu_replay | gpu_memory | gpu_pinned | gpu_sgd_momentum |
 *        gpu_adam | gpu_adamw | gpu_sgd_maximize | gpu_adam_amsgrad | gpu_adamw_amsgrad |
 *        gpu_random | gpu_groups_clip_adamw | gpu_groups_clip_sgd */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

#define N 4096

static bool has_msg(const char *needle) {
    return strstr(tdm_last_error(), needle) != NULL;
}

static int run_cpu_refuses(void) {
    CHECK(tdm_graph_capture_begin(TDM_CPU) == TDM_ERR_UNSUPPORTED);
    CHECK_MSG(has_msg("graph capture needs a CUDA device"), "%s", tdm_last_error());
    tdm_graph *g = (tdm_graph *)&g;   // must be overwritten with NULL
    CHECK(tdm_graph_capture_end(TDM_CPU, &g) == TDM_ERR_UNSUPPORTED && g == NULL);
    CHECK(!tdm_graph_is_capturing(TDM_CPU));
    CHECK(tdm_graph_replay(NULL) == TDM_ERR_ARG);
    tdm_graph_free(NULL);
    CHECK_DONE("graph.cpu_refuses");
}

static bool gpu_or_skip(const char *name) {
    tdm_device d = {TDM_DEVICE_CUDA, 0};
    if (tdm_device_available(d)) return true;
    printf("SKIP %s: %s\n", name, tdm_last_error());
    return false;
}

// (N) f32 on dev: v[i] = (i % 97) * scale - 3.
static tdm_tensor *ramp(tdm_device dev, float scale) {
    float *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = (float)(i % 97) * scale - 3.0f;
    int64_t n = N;
    tdm_tensor *t = tdm_tensor_from_host(1, &n, TDM_DTYPE_F32, dev, v);
    free(v);
    return t;
}

// y = relu(x * x - 2 x): three kernels, two temporaries.
static tdm_tensor *compute(const tdm_tensor *x) {
    tdm_tensor *sq = tdm_mul(x, x);
    tdm_tensor *d = sq ? tdm_add(sq, x, -2.0) : NULL;
    tdm_tensor *y = d ? tdm_relu(d) : NULL;
    tdm_tensor_free(sq);
    tdm_tensor_free(d);
    return y;
}

static bool same_values(const tdm_tensor *a, const tdm_tensor *b) {
    float *ha = malloc(N * sizeof *ha), *hb = malloc(N * sizeof *hb);
    bool ok = a && b && tdm_tensor_to_host(a, ha, N * sizeof *ha) == TDM_OK &&
              tdm_tensor_to_host(b, hb, N * sizeof *hb) == TDM_OK &&
              memcmp(ha, hb, N * sizeof *ha) == 0;
    free(ha);
    free(hb);
    return ok;
}

static int run_gpu_replay(void) {
    if (!gpu_or_skip("graph.gpu_replay")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    tdm_tensor *x = ramp(cuda0, 0.25f);   // the static input
    CHECK(x != NULL);
    tdm_tensor_free(compute(x));   // eager warm-up first, as PyTorch asks (lazy queries done)
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    CHECK(tdm_graph_is_capturing(cuda0));
    tdm_tensor *y = compute(x);   // recorded, not run
    CHECK_MSG(y != NULL, "%s", tdm_last_error());
    CHECK(tdm_graph_capture_end(cuda0, &g) == TDM_OK && g != NULL);
    CHECK(!tdm_graph_is_capturing(cuda0));
    // first replay on the captured input, then on a new one copied into the static tensor
    CHECK(tdm_graph_replay(g) == TDM_OK);
    tdm_tensor *want = compute(x);
    CHECK_MSG(same_values(y, want), "replay 1 differs from the eager result");
    tdm_tensor *x2 = ramp(cuda0, -0.5f);
    CHECK(x2 && tdm_tensor_copy_(x, x2) == TDM_OK);
    tdm_tensor *want2 = compute(x);
    CHECK(!same_values(want, want2));   // the new input changes the result
    CHECK(tdm_graph_replay(g) == TDM_OK);
    CHECK_MSG(same_values(y, want2), "replay 2 differs from the eager result");
    tdm_graph_free(g);

    // a host copy cannot be captured: the op fails, and so does the end of the capture
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    tdm_tensor *bad = ramp(cuda0, 1.0f);
    CHECK(bad == NULL);
    CHECK_MSG(has_msg("cannot be captured in a CUDA graph"), "%s", tdm_last_error());
    g = (tdm_graph *)&g;
    CHECK(tdm_graph_capture_end(cuda0, &g) != TDM_OK && g == NULL);
    CHECK_MSG(has_msg("an op failed during the capture"), "%s", tdm_last_error());
    CHECK(!tdm_graph_is_capturing(cuda0));
    // nesting is refused; the default stream is current again afterwards
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_ERR_ARG);
    CHECK(tdm_graph_capture_end(cuda0, &g) == TDM_OK);
    tdm_graph_free(g);
    CHECK(tdm_stream_current(cuda0) == NULL);
    tdm_tensor_free(bad);
    tdm_tensor_free(x);
    tdm_tensor_free(x2);
    tdm_tensor_free(y);
    tdm_tensor_free(want);
    tdm_tensor_free(want2);
    CHECK_DONE("graph.gpu_replay");
}

static int64_t reserved(tdm_device dev) {
    tdm_memory_stats s;
    return tdm_memory_stats_get(dev, &s) == TDM_OK ? s.reserved : -1;
}

static int run_gpu_memory(void) {
    if (!gpu_or_skip("graph.gpu_memory")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    tdm_tensor *x = ramp(cuda0, 0.25f);
    CHECK(x != NULL);
    CHECK(tdm_memory_empty_cache(cuda0) == TDM_OK);
    const int64_t r0 = reserved(cuda0);
    // cached free blocks of the sizes the capture asks for, in the default stream's pool (x's
    // own segment has free room too)
    int64_t n = N;
    tdm_tensor_free(tdm_tensor_empty(1, &n, TDM_DTYPE_F32, cuda0));
    tdm_tensor_free(compute(x));   // eager warm-up; its blocks stay cached in the default pool
    const int64_t r1 = reserved(cuda0);
    CHECK(r1 >= r0);   // likely equal: x's 2 MiB segment has room for these blocks
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    tdm_tensor *y = compute(x);
    CHECK(tdm_graph_capture_end(cuda0, &g) == TDM_OK);
    // the private pool did not take the cached block: a segment of its own
    CHECK_MSG(reserved(cuda0) > r1, "reserved %lld, before the capture %lld",
              (long long)reserved(cuda0), (long long)r1);
    // empty_cache keeps the graph's pool (its replays write there)
    CHECK(tdm_memory_empty_cache(cuda0) == TDM_OK);
    CHECK(reserved(cuda0) > r0);
    CHECK(tdm_graph_replay(g) == TDM_OK);
    tdm_tensor *want = compute(x);
    CHECK(same_values(y, want));
    tdm_tensor_free(want);
    tdm_tensor_free(y);
    tdm_graph_free(g);
    CHECK(tdm_memory_empty_cache(cuda0) == TDM_OK);
    CHECK_MSG(reserved(cuda0) == r0, "reserved %lld after the graph, %lld before",
              (long long)reserved(cuda0), (long long)r0);
    tdm_tensor_free(x);
    CHECK_DONE("graph.gpu_memory");
}

// A host-to-device copy from pinned memory is captured (it does not synchronize) and replayed;
// its pinned block, freed after the capture, is not left waiting for an event recorded during the
// capture (such an event can never be queried: cudaErrorCapturedEvent): the next pinned
// allocation of its size reuses it.
static int run_gpu_pinned(void) {
    if (!gpu_or_skip("graph.gpu_pinned")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    int64_t n = N;
    tdm_tensor *h = tdm_tensor_empty_host(1, &n, TDM_DTYPE_F32, TDM_HOST_PINNED, cuda0);
    tdm_tensor *x = tdm_tensor_empty(1, &n, TDM_DTYPE_F32, cuda0);
    tdm_tensor *want = ramp(cuda0, 0.5f);
    CHECK(h && x && want);
    CHECK(tdm_tensor_to_host(want, tdm_tensor_data(h), N * sizeof(float)) == TDM_OK);
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    CHECK_MSG(tdm_tensor_copy_async(x, h, NULL) == TDM_OK, "%s", tdm_last_error());
    CHECK_MSG(tdm_graph_capture_end(cuda0, &g) == TDM_OK, "%s", tdm_last_error());
    CHECK(tdm_graph_replay(g) == TDM_OK);
    CHECK(tdm_device_synchronize(cuda0) == TDM_OK);
    CHECK_MSG(same_values(x, want), "the replayed copy differs");
    tdm_graph_free(g);
    tdm_host_memory_stats a, b;
    tdm_tensor_free(h);
    CHECK(tdm_host_memory_stats_get(cuda0, &a) == TDM_OK);
    CHECK_MSG(a.n_blocks_pending == 0, "%lld freed pinned blocks still waiting",
              (long long)a.n_blocks_pending);
    h = tdm_tensor_empty_host(1, &n, TDM_DTYPE_F32, TDM_HOST_PINNED, cuda0);
    CHECK(h != NULL && tdm_host_memory_stats_get(cuda0, &b) == TDM_OK);
    CHECK_MSG(b.n_cache_hits == a.n_cache_hits + 1 && b.n_raw_allocs == a.n_raw_allocs,
              "the pinned block was not reused");
    tdm_tensor_free(h);
    tdm_tensor_free(x);
    tdm_tensor_free(want);
    CHECK_DONE("graph.gpu_pinned");
}

// ---- capture-safe state -------------------------------------------------------------------------

// Every byte of a and b (same dtype and shape) equal.
static bool same_bytes(const tdm_tensor *a, const tdm_tensor *b) {
    size_t n = a && b ? tdm_tensor_nbytes(a) : 0;
    if (!a || !b || n != tdm_tensor_nbytes(b)) return false;
    char *ha = malloc(n ? n : 1), *hb = malloc(n ? n : 1);
    bool ok = tdm_tensor_to_host(a, ha, n) == TDM_OK && tdm_tensor_to_host(b, hb, n) == TDM_OK &&
              memcmp(ha, hb, n) == 0;
    free(ha);
    free(hb);
    return ok;
}

#define NP 3   // parameters per model, of different sizes (vector path, scalar tail)

// Two copies of the same parameters (one for the captured step, one for the eager one).
static void params_pair(tdm_device dev, tdm_tensor **a, tdm_tensor **b) {
    static const int64_t sizes[NP] = {N, 37, 1};
    for (int i = 0; i < NP; i++) {
        float *v = malloc((size_t)sizes[i] * sizeof *v);
        for (int64_t j = 0; j < sizes[i]; j++) v[j] = (float)((j * 7 + i) % 13) * 0.125f - 0.75f;
        a[i] = tdm_tensor_from_host(1, &sizes[i], TDM_DTYPE_F32, dev, v);
        b[i] = tdm_tensor_from_host(1, &sizes[i], TDM_DTYPE_F32, dev, v);
        free(v);
    }
}

// Step k's gradient for parameter i, into g (host values, copied).
static tdm_status grad_fill(tdm_tensor *g, int i, int k) {
    int64_t n = tdm_tensor_numel(g);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t j = 0; j < n; j++) v[j] = (float)(((j + 3 * i) * (k + 2)) % 11) * 0.1f - 0.45f;
    tdm_tensor *h = tdm_tensor_from_host(1, &n, TDM_DTYPE_F32, tdm_tensor_device(g), v);
    tdm_status s = h ? tdm_tensor_copy_(g, h) : tdm_last_status();
    tdm_tensor_free(h);
    free(v);
    return s;
}

// With `clip` (issue 23): every step clips the gradients first (clip_grad_norm_, max_norm 0.5,
// captured with the step) and sets the groups' lrs from a schedule before it (replays: before
// the replay); the total norms must agree too.
static const tdm_lr_cosine CLIP_SCHED = {.max_lr = 0.02, .min_lr = 0.002, .warmup_steps = 2,
                                         .decay_steps = 5};

static void clip_lrs(tdm_optimizer *o, int k) {
    const double lr = tdm_lr_cosine_at(&CLIP_SCHED, k);
    tdm_optimizer_set_lr(o, lr);
    if (tdm_optimizer_group_count(o) > 1) tdm_optimizer_set_group_lr(o, 1, lr * 0.5);
}

// opt_new(params) makes the optimizer under test. The captured side's gradients are static
// tensors refilled before each replay; the eager side's are set before each eager step. The step
// is captured before any eager step (its state is made during the capture), replayed 4 times,
// then an eager step runs on both sides, then 2 more replays: parameters equal after each.
static int optimizer_capture_test_clip(const char *name, tdm_optimizer *(*opt_new)(tdm_tensor **),
                                       bool clip);

static int optimizer_capture_test(const char *name, tdm_optimizer *(*opt_new)(tdm_tensor **)) {
    return optimizer_capture_test_clip(name, opt_new, false);
}

static int optimizer_capture_test_clip(const char *name, tdm_optimizer *(*opt_new)(tdm_tensor **),
                                       bool clip) {
    if (!gpu_or_skip(name)) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    tdm_tensor *pc[NP], *pe[NP], *gc[NP];
    params_pair(cuda0, pc, pe);
    for (int i = 0; i < NP; i++) {
        gc[i] = tdm_tensor_zeros(1, (int64_t[]){tdm_tensor_numel(pc[i])}, TDM_DTYPE_F32, cuda0);
        CHECK(pc[i] && pe[i] && gc[i] && tdm_tensor_set_grad(pc[i], gc[i]) == TDM_OK);
    }
    tdm_optimizer *oc = opt_new(pc), *oe = opt_new(pe);
    CHECK(oc && oe);
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    // temporaries freed inside the capture, as a forward and backward leave them: the state the
    // replays' hooks write must not share their blocks (captured kernels would overwrite it)
    tdm_tensor_free(compute(pc[0]));
    tdm_tensor *tc = NULL;   // the captured total norm, rewritten by each replay
    if (clip) {
        CHECK(!tdm_clip_grad_norm_(pc, NP, 0.5, 2.0, true) &&
              has_msg("cannot be captured in a CUDA graph with error_if_nonfinite"));
        tc = tdm_clip_grad_norm_(pc, NP, 0.5, 2.0, false);
        CHECK_MSG(tc, "%s", tdm_last_error());
    }
    CHECK_MSG(tdm_optimizer_step(oc) == TDM_OK, "%s", tdm_last_error());
    CHECK_MSG(tdm_graph_capture_end(cuda0, &g) == TDM_OK, "%s", tdm_last_error());
    for (int k = 0; k < 7 && g; k++) {
        const bool eager_both = k == 4;   // an eager step on both sides between the replays
        for (int i = 0; i < NP; i++) {
            tdm_tensor *ge = tdm_tensor_zeros(1, (int64_t[]){tdm_tensor_numel(pe[i])}, TDM_DTYPE_F32,
                                              cuda0);
            CHECK(ge && grad_fill(ge, i, k) == TDM_OK && grad_fill(gc[i], i, k) == TDM_OK);
            CHECK(tdm_tensor_set_grad(pe[i], ge) == TDM_OK);
            tdm_tensor_free(ge);
        }
        tdm_tensor *te = NULL, *tce = NULL;
        if (clip) {
            clip_lrs(oe, k);
            clip_lrs(oc, k);
            te = tdm_clip_grad_norm_(pe, NP, 0.5, 2.0, false);
            if (eager_both) tce = tdm_clip_grad_norm_(pc, NP, 0.5, 2.0, false);
            CHECK(te && (!eager_both || tce));
        }
        CHECK(tdm_optimizer_step(oe) == TDM_OK);
        CHECK_MSG((eager_both ? tdm_optimizer_step(oc) : tdm_graph_replay(g)) == TDM_OK, "%s",
                  tdm_last_error());
        for (int i = 0; i < NP; i++)
            CHECK_MSG(same_bytes(pc[i], pe[i]), "%s: step %d (%s), parameter %d differs", name, k,
                      eager_both ? "eager" : "replay", i);
        if (clip) {
            CHECK_MSG(same_bytes(eager_both ? tce : tc, te), "%s: step %d: total norms differ",
                      name, k);
            float tv = 0;
            CHECK(tdm_tensor_to_host(te, &tv, sizeof tv) == TDM_OK && tv > 0.5f);   // it clipped
        }
        tdm_tensor_free(te);
        tdm_tensor_free(tce);
    }
    tdm_tensor_free(tc);
    tdm_graph_free(g);
    tdm_optimizer_free(oc);
    tdm_optimizer_free(oe);
    for (int i = 0; i < NP; i++) {
        tdm_tensor_free(pc[i]);
        tdm_tensor_free(pe[i]);
        tdm_tensor_free(gc[i]);
    }
    CHECK_DONE(name);
}

static tdm_optimizer *sgd_momentum(tdm_tensor **p) {
    tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9, .dampening = 0.25, .weight_decay = 0.01};
    return tdm_optim_sgd(p, NP, &sp);
}

static tdm_optimizer *adam(tdm_tensor **p) {
    tdm_adam_params ap = tdm_adam_defaults(false);
    ap.lr = 0.01;
    ap.weight_decay = 0.05;
    return tdm_optim_adam(p, NP, &ap);
}

static tdm_optimizer *adamw(tdm_tensor **p) {
    tdm_adam_params ap = tdm_adam_defaults(true);
    ap.lr = 0.01;
    return tdm_optim_adam(p, NP, &ap);
}

// maximize and amsgrad: max_exp_avg_sq made during the capture (fresh: read as zeros by the
// first replay), beta2 0.9 so that exp_avg_sq falls below its maximum within the replays.
static tdm_optimizer *sgd_maximize(tdm_tensor **p) {
    tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true,
                         .maximize = true};
    return tdm_optim_sgd(p, NP, &sp);
}

static tdm_optimizer *adam_amsgrad(tdm_tensor **p) {
    tdm_adam_params ap = tdm_adam_defaults(false);
    ap.lr = 0.01;
    ap.beta2 = 0.9;
    ap.weight_decay = 0.05;
    ap.amsgrad = ap.maximize = true;
    return tdm_optim_adam(p, NP, &ap);
}

static tdm_optimizer *adamw_amsgrad(tdm_tensor **p) {
    tdm_adam_params ap = tdm_adam_defaults(true);
    ap.lr = 0.01;
    ap.beta2 = 0.9;
    ap.amsgrad = ap.maximize = true;
    return tdm_optim_adam(p, NP, &ap);
}

// Two groups (issue 23): weight decay on the first two parameters only, the second group's lr its
// own (set to half the first's between the replays by clip_lrs).
static tdm_optimizer *groups_adamw(tdm_tensor **p) {
    tdm_adam_params ap = tdm_adam_defaults(true);
    ap.weight_decay = 0.1;
    tdm_param_group g[2] = {{p, 2, NAN, NAN}, {p + 2, 1, NAN, 0.0}};
    return tdm_optim_adam_groups(g, 2, &ap);
}

static tdm_optimizer *groups_sgd(tdm_tensor **p) {
    tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
    tdm_param_group g[2] = {{p, 2, NAN, NAN}, {p + 2, 1, NAN, 0.0}};
    return tdm_optim_sgd_groups(g, 2, &sp);
}

// Draws from a generator in a captured step (rand, randn, dropout forward and backward) replay
// the numbers of the eager steps from a twin generator, fresh at each replay; an eager step in
// between continues the sequence; explicit (seed, offset) draws are refused under capture.
static int run_gpu_random(void) {
    if (!gpu_or_skip("graph.gpu_random")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    int64_t n = 1000;
    tdm_generator *gc = tdm_generator_new(7, 5), *ge = tdm_generator_new(7, 5);
    tdm_tensor *x = ramp(cuda0, 0.25f);   // the dropout's input (N)
    tdm_tensor *xc = tdm_tensor_detach(x);
    CHECK(gc && ge && x && xc);
    tdm_tensor_set_requires_grad(xc, true);
    // the step: u = rand(n), z = randn(n), y = dropout(x, 0.5) twice, backward of sum(y1 * u0)
    tdm_tensor *u = NULL, *z = NULL, *y1 = NULL, *y2 = NULL, *y3 = NULL;
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    u = tdm_generator_rand(gc, 1, &n, TDM_DTYPE_F32, cuda0);
    z = tdm_generator_randn(gc, 1, &n, TDM_DTYPE_F32, cuda0);
    y1 = tdm_generator_dropout(gc, xc, 0.5, true);
    y2 = tdm_generator_dropout(gc, xc, 0.25, true);
    y3 = y1 && y2 ? tdm_add(y1, y2, 1.0) : NULL;
    CHECK_MSG(u && z && y3, "%s", tdm_last_error());
    CHECK_MSG(y3 && tdm_backward(y3, x) == TDM_OK, "%s", tdm_last_error());   // grad_output x
    CHECK_MSG(tdm_graph_capture_end(cuda0, &g) == TDM_OK, "%s", tdm_last_error());
    CHECK(tdm_generator_offset(gc) == 5);   // the capture drew nothing
    tdm_tensor *prev = NULL;
    for (int k = 0; k < 6 && g; k++) {
        const bool eager_both = k == 3;
        tdm_tensor *eu = tdm_generator_rand(ge, 1, &n, TDM_DTYPE_F32, cuda0);
        tdm_tensor *ez = tdm_generator_randn(ge, 1, &n, TDM_DTYPE_F32, cuda0);
        tdm_tensor *xe = tdm_tensor_detach(x);
        CHECK(xe != NULL);
        tdm_tensor_set_requires_grad(xe, true);
        tdm_tensor *e1 = tdm_generator_dropout(ge, xe, 0.5, true);
        tdm_tensor *e2 = tdm_generator_dropout(ge, xe, 0.25, true);
        tdm_tensor *e3 = e1 && e2 ? tdm_add(e1, e2, 1.0) : NULL;
        CHECK(eu && ez && e3 && tdm_backward(e3, x) == TDM_OK);
        if (eager_both) {   // the captured side's generator steps eagerly too
            tdm_tensor *t[4] = {tdm_generator_rand(gc, 1, &n, TDM_DTYPE_F32, cuda0),
                                tdm_generator_randn(gc, 1, &n, TDM_DTYPE_F32, cuda0),
                                tdm_generator_dropout(gc, x, 0.5, true),
                                tdm_generator_dropout(gc, x, 0.25, true)};
            CHECK(same_bytes(t[0], eu) && same_bytes(t[1], ez));
            for (int i = 0; i < 4; i++) tdm_tensor_free(t[i]);
        } else {
            CHECK_MSG(tdm_graph_replay(g) == TDM_OK, "%s", tdm_last_error());
            CHECK_MSG(same_bytes(u, eu), "replay %d: rand differs", k);
            CHECK_MSG(same_bytes(z, ez), "replay %d: randn differs", k);
            CHECK_MSG(same_bytes(y3, e3), "replay %d: dropout differs", k);
            CHECK_MSG(same_bytes(tdm_tensor_grad(xc), tdm_tensor_grad(xe)),
                      "replay %d: dropout's gradient differs", k);
            CHECK(!prev || !same_bytes(prev, eu));   // fresh numbers at each replay
            tdm_tensor_free(prev);
            prev = tdm_tensor_clone(eu);
        }
        CHECK(tdm_generator_offset(gc) == tdm_generator_offset(ge));
        tdm_tensor_free(eu);
        tdm_tensor_free(ez);
        tdm_tensor_free(e1);
        tdm_tensor_free(e2);
        tdm_tensor_free(e3);
        tdm_tensor_free(xe);
    }
    tdm_graph_free(g);
    // explicit (seed, offset) draws would repeat at every replay: refused under capture
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    tdm_tensor *bad = tdm_tensor_rand(1, &n, TDM_DTYPE_F32, cuda0, 7, 5);
    CHECK(bad == NULL && has_msg("rand: cannot be captured in a CUDA graph"));
    g = (tdm_graph *)&g;
    CHECK(tdm_graph_capture_end(cuda0, &g) != TDM_OK && g == NULL);
    // a graph whose generator was freed refuses to replay
    tdm_generator *gt = tdm_generator_new(1, 0);
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    tdm_tensor *t = tdm_generator_rand(gt, 1, &n, TDM_DTYPE_F32, cuda0);
    CHECK(tdm_graph_capture_end(cuda0, &g) == TDM_OK);
    tdm_generator_free(gt);
    CHECK(tdm_graph_replay(g) != TDM_OK && has_msg("was freed"));
    tdm_graph_free(g);
    tdm_tensor_free(t);
    tdm_tensor_free(prev);
    tdm_tensor_free(u);
    tdm_tensor_free(z);
    tdm_tensor_free(y1);
    tdm_tensor_free(y2);
    tdm_tensor_free(y3);
    tdm_tensor_free(xc);
    tdm_tensor_free(x);
    tdm_generator_free(gc);
    tdm_generator_free(ge);
    CHECK_DONE("graph.gpu_random");
}

int main(int argc, char **argv) {
    const char *t = argc > 1 ? argv[1] : "";
    if (!strcmp(t, "cpu_refuses")) return run_cpu_refuses();
    if (!strcmp(t, "gpu_replay")) return run_gpu_replay();
    if (!strcmp(t, "gpu_memory")) return run_gpu_memory();
    if (!strcmp(t, "gpu_pinned")) return run_gpu_pinned();
    if (!strcmp(t, "gpu_sgd_momentum"))
        return optimizer_capture_test("graph.gpu_sgd_momentum", sgd_momentum);
    if (!strcmp(t, "gpu_adam")) return optimizer_capture_test("graph.gpu_adam", adam);
    if (!strcmp(t, "gpu_adamw")) return optimizer_capture_test("graph.gpu_adamw", adamw);
    if (!strcmp(t, "gpu_sgd_maximize"))
        return optimizer_capture_test("graph.gpu_sgd_maximize", sgd_maximize);
    if (!strcmp(t, "gpu_adam_amsgrad"))
        return optimizer_capture_test("graph.gpu_adam_amsgrad", adam_amsgrad);
    if (!strcmp(t, "gpu_adamw_amsgrad"))
        return optimizer_capture_test("graph.gpu_adamw_amsgrad", adamw_amsgrad);
    if (!strcmp(t, "gpu_random")) return run_gpu_random();
    if (!strcmp(t, "gpu_groups_clip_adamw"))
        return optimizer_capture_test_clip("graph.gpu_groups_clip_adamw", groups_adamw, true);
    if (!strcmp(t, "gpu_groups_clip_sgd"))
        return optimizer_capture_test_clip("graph.gpu_groups_clip_sgd", groups_sgd, true);
    fprintf(stderr, "usage: test_graph cpu_refuses | gpu_replay | gpu_memory | gpu_pinned | "
                    "gpu_sgd_momentum | gpu_adam | gpu_adamw | gpu_sgd_maximize | "
                    "gpu_adam_amsgrad | gpu_adamw_amsgrad | gpu_random | gpu_groups_clip_adamw | "
                    "gpu_groups_clip_sgd\n");
    return 2;
}
