/* test_train_flags.c — `bench train`'s --clip-grad-norm, --lr-schedule and
 * --weight-decay-matrices-only (issue 23) against the same training written here with the API:
 * the golden MLP's init and data, each step zero_grad, forward, cross_entropy, backward,
 * clip_grad_norm_ over the model's parameters, every group's lr from tdm_lr_cosine_at(step),
 * then the step of an optimizer of two groups (weight decay on dim >= 2 only). The dump's
 * losses and final state must equal this loop's bit for bit (the same ops in the same order), on
 * the cpu and on cuda:0; with --amp fp16 too (the scaler's unscale_ before the clipping, as
 * nanoGPT). Each flag left out changes the result (none is ignored). With `graph`
 * (cuda:0): `bench train --graph` (the step, clipping included, captured; the lr written before
 * each replay) must give the same bits.
 * usage: test_train_flags BENCH GOLDEN_TRAIN_FILE TMPDIR cpu|cuda:0 [graph]
 * (cuda:0 without a device: exit 77, one line) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"
#include "tensor_eq.h"

#define SPEC "mlp:20-64-32-5"
#define BATCH 16
#define STEPS 8

typedef struct {
    const char *name, *opt;
    double lr, momentum, wd, clip;
    tdm_lr_cosine sched;   // max_lr = lr
    bool fp16;             // --amp fp16: the scaler unscales before clipping
} config;

static const config CONFIGS[] = {
    {"adamw", "adamw", 0.01, 0, 0.1, 0.5, {0.01, 0.001, 2, 6}, false},
    {"sgd", "sgd", 0.1, 0.9, 0.01, 0.2, {0.1, 0.01, 3, 5}, false},
    {"adamw_fp16", "adamw", 0.01, 0, 0.1, 0.5, {0.01, 0.001, 2, 6}, true},
};

static tdm_device dev;

// The flags of config c, leaving out `without` ("clip", "sched", "groups" or "").
static void flags(const config *c, const char *without, char *out, size_t n) {
    int k = snprintf(out, n, "--opt %s --lr %.17g --weight-decay %.17g", c->opt, c->lr, c->wd);
    if (c->momentum) k += snprintf(out + k, n - (size_t)k, " --momentum %.17g", c->momentum);
    if (c->fp16) k += snprintf(out + k, n - (size_t)k, " --amp fp16");
    if (strcmp(without, "clip"))
        k += snprintf(out + k, n - (size_t)k, " --clip-grad-norm %.17g", c->clip);
    if (strcmp(without, "sched"))
        k += snprintf(out + k, n - (size_t)k, " --lr-schedule cosine:%lld:%lld:%.17g",
                      (long long)c->sched.warmup_steps, (long long)c->sched.decay_steps,
                      c->sched.min_lr);
    if (strcmp(without, "groups"))
        snprintf(out + k, n - (size_t)k, " --weight-decay-matrices-only");
}

static int bench_run(const char *bench, const char *gold, const char *dev_s, const char *fl,
                     const char *extra, const char *dump) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s train --model " SPEC " --batch %d --steps %d --init %s --data %s "
             "--device %s %s %s --dump %s >/dev/null", bench, BATCH, STEPS, gold, gold, dev_s, fl,
             extra, dump);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, cmd);
    return rc;
}

// The same training through the API; *model and losses[STEPS] out.
static tdm_status api_train(const config *c, const char *gold, tdm_module **model, float *losses) {
    tdm_module *m = tdm_nn_from_spec(SPEC);
    tdm_status s = m ? tdm_module_init(m, 0) : tdm_last_status();
    if (s == TDM_OK) s = tdm_module_load(m, gold, "init.", true);
    if (s == TDM_OK) s = tdm_module_to(m, dev);
    *model = m;
    if (s != TDM_OK) return s;
    tdm_safetensors *st = tdm_safetensors_open(gold);
    tdm_tensor *x = st ? tdm_safetensors_get(st, "x", TDM_CPU) : NULL;
    tdm_tensor *y = x ? tdm_safetensors_get(st, "y", TDM_CPU) : NULL;
    tdm_safetensors_close(st);
    if (!y) {
        tdm_tensor_free(x);
        return tdm_last_status();
    }
    const int64_t samples = tdm_tensor_shape(x)[0], row = tdm_tensor_numel(x) / samples;
    int np = tdm_module_parameters(m, NULL, 0);
    tdm_tensor **params = calloc((size_t)np, sizeof *params),
               **mat = calloc((size_t)np, sizeof *mat);
    tdm_tensor **vecs = calloc((size_t)np, sizeof *vecs);
    tdm_module_parameters(m, params, np);
    int nm = 0, nv = 0;
    for (int i = 0; i < np; i++) {
        if (tdm_tensor_ndim(params[i]) >= 2) mat[nm++] = params[i];
        else vecs[nv++] = params[i];
    }
    tdm_param_group g[2] = {{mat, nm, NAN, NAN}, {vecs, nv, NAN, 0.0}};
    tdm_optimizer *o;
    if (!strcmp(c->opt, "sgd")) {
        tdm_sgd_params sp = {.lr = c->lr, .momentum = c->momentum, .weight_decay = c->wd};
        o = tdm_optim_sgd_groups(g, 2, &sp);
    } else {
        tdm_adam_params ap = tdm_adam_defaults(true);
        ap.lr = c->lr;
        ap.weight_decay = c->wd;
        o = tdm_optim_adam_groups(g, 2, &ap);
    }
    s = o ? TDM_OK : tdm_last_status();
    tdm_grad_scaler_params gp = tdm_grad_scaler_defaults();
    tdm_grad_scaler *scaler = c->fp16 ? tdm_grad_scaler_new(&gp) : NULL;
    float *xb = malloc((size_t)(BATCH * row) * sizeof *xb);
    int64_t yb[BATCH];
    for (int step = 0; s == TDM_OK && step < STEPS; step++) {
        for (int i = 0; i < BATCH; i++) {   // rows [step B, (step + 1) B) modulo samples
            const int64_t r = ((int64_t)step * BATCH + i) % samples;
            memcpy(xb + i * row, (const float *)tdm_tensor_data(x) + r * row,
                   (size_t)row * sizeof *xb);
            yb[i] = ((const int64_t *)tdm_tensor_data(y))[r];
        }
        int64_t xs[2] = {BATCH, row}, ys = BATCH;
        tdm_tensor *xt = tdm_tensor_from_host(2, xs, TDM_DTYPE_F32, dev, xb);
        tdm_tensor *yt = tdm_tensor_from_host(1, &ys, TDM_DTYPE_I64, dev, yb);
        tdm_optimizer_zero_grad(o);
        tdm_autocast_state prev = {0};
        if (scaler) prev = tdm_autocast_enter(TDM_DTYPE_F16);
        tdm_tensor *out = xt && yt ? tdm_module_forward(m, xt) : NULL;
        tdm_tensor *loss = out ? tdm_cross_entropy(out, yt, TDM_REDUCTION_MEAN, 0.0, -100) : NULL;
        if (scaler) tdm_autocast_exit(prev);
        double l = 0;
        s = loss ? tdm_tensor_to_host_f64(loss, &l) : tdm_last_status();
        tdm_tensor *scaled = s == TDM_OK && scaler ? tdm_grad_scaler_scale(scaler, loss) : NULL;
        if (s == TDM_OK) s = tdm_backward(scaler ? scaled : loss, NULL);
        losses[step] = (float)l;
        tdm_optimizer_set_lr(o, tdm_lr_cosine_at(&c->sched, step));
        if (s == TDM_OK && scaler) s = tdm_grad_scaler_unscale_(scaler, o);   // then clip
        tdm_tensor *total =
            s == TDM_OK ? tdm_clip_grad_norm_(params, np, c->clip, 2.0, false) : NULL;
        if (s == TDM_OK && !total) s = tdm_last_status();
        if (s == TDM_OK) s = scaler ? tdm_grad_scaler_step(scaler, o, NULL) : tdm_optimizer_step(o);
        if (scaler) tdm_grad_scaler_update(scaler);
        tdm_tensor *fr[] = {xt, yt, out, loss, total, scaled};
        for (size_t k = 0; k < sizeof fr / sizeof *fr; k++) tdm_tensor_free(fr[k]);
    }
    free(xb);
    tdm_grad_scaler_free(scaler);
    free(params);
    free(mat);
    free(vecs);
    tdm_optimizer_free(o);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    return s;
}

// The dump's `loss` and state dict equal losses and m's state, bit for bit.
static bool dump_equals(const char *dump, tdm_module *m, const float *losses) {
    tdm_safetensors *st = tdm_safetensors_open(dump);
    if (!st) return false;
    int64_t n = STEPS;
    tdm_tensor *want = tdm_tensor_from_host(1, &n, TDM_DTYPE_F32, TDM_CPU, losses);
    tdm_tensor *got = tdm_safetensors_get(st, "loss", TDM_CPU);
    bool same = tensors_identical(got, want);
    tdm_tensor_free(want);
    tdm_tensor_free(got);
    const int ns = tdm_module_state(m, NULL, NULL, 0);
    const char **names = calloc((size_t)ns, sizeof *names);
    tdm_tensor **ts = calloc((size_t)ns, sizeof *ts);
    tdm_module_state(m, names, ts, ns);
    for (int i = 0; same && i < ns; i++) {
        tdm_tensor *d = tdm_safetensors_get(st, names[i], TDM_CPU);
        same = tensors_identical(d, ts[i]);
        tdm_tensor_free(d);
    }
    free(names);
    free(ts);
    tdm_safetensors_close(st);
    return same;
}

int main(int argc, char **argv) {
    if (argc != 5 && !(argc == 6 && !strcmp(argv[5], "graph"))) {
        fprintf(stderr,
                "usage: test_train_flags BENCH GOLDEN_TRAIN_FILE TMPDIR cpu|cuda:0 [graph]\n");
        return 2;
    }
    const char *bench = argv[1], *gold = argv[2], *dir = argv[3], *dev_s = argv[4];
    const bool graph = argc == 6;
    if (tdm_device_parse(dev_s, &dev) != TDM_OK) return 2;
    if (!tdm_device_available(dev)) {
        printf("SKIP train flags on %s: %s\n", dev_s, tdm_last_error());
        return 77;
    }
    const char *tag = dev.type == TDM_DEVICE_CUDA ? "cuda0" : "cpu";
    for (size_t k = 0; k < sizeof CONFIGS / sizeof *CONFIGS; k++) {
        const config *c = &CONFIGS[k];
        if (graph && c->fp16) continue;   // --graph cannot hold the scaler's step
        char fl[1024], dump[1024];
        tdm_module *m = NULL;
        float losses[STEPS];
        CHECK_MSG(api_train(c, gold, &m, losses) == TDM_OK, "%s", tdm_last_error());
        flags(c, "", fl, sizeof fl);
        snprintf(dump, sizeof dump, "%s/flags_%s_%s%s", dir, c->name, tag, graph ? "_graph" : "");
        if (!bench_run(bench, gold, dev_s, fl, graph ? "--graph" : "", dump))
            CHECK_MSG(dump_equals(dump, m, losses), "%s on %s: bench train %s%s differs from the "
                      "API loop", c->name, dev_s, fl, graph ? " --graph" : "");
        // Each flag matters: left out, the run ends elsewhere.
        static const char *const without[3] = {"clip", "sched", "groups"};
        for (int w = 0; w < 3 && !graph; w++) {
            flags(c, without[w], fl, sizeof fl);
            snprintf(dump, sizeof dump, "%s/flags_%s_%s_no%s", dir, c->name, tag, without[w]);
            if (!bench_run(bench, gold, dev_s, fl, "", dump))
                CHECK_MSG(!dump_equals(dump, m, losses), "%s: without %s the same result: the flag "
                          "did nothing", c->name, without[w]);
        }
        tdm_module_free(m);
    }
    CHECK_DONE(graph                         ? "train.flags cuda:0 --graph"
               : dev.type == TDM_DEVICE_CUDA ? "train.flags cuda:0"
                                             : "train.flags cpu");
}
