/* test_training.c — the training API's state handling: the gradient scaler (a planted inf skips
 * the step and halves the scale; growth after growth_interval clean steps; gradients unscaled
 * exactly), optimizer steps against hand-computed values, and checkpoints: a run saved mid-way
 * (model + optimizer, atomically) and resumed in fresh objects continues bit-identically; the
 * scaler's state saved with the optimizer's and restored (malformed scaler states refused, the
 * scaler unchanged).
 * usage: test_training TMPDIR */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

static tdm_tensor *vec(const float *v, int64_t n) {
    return tdm_tensor_from_host(1, &n, TDM_DTYPE_F32, TDM_CPU, v);
}

static void test_scaler(void) {
    float p0[3] = {1, 2, 3}, g_inf[3] = {1, INFINITY, 1}, g_ok[3] = {65536, -131072, 32768};
    tdm_tensor *p = vec(p0, 3);
    tdm_tensor_set_requires_grad(p, true);
    tdm_sgd_params sp = {.lr = 0.5};
    tdm_optimizer *o = tdm_optim_sgd(&p, 1, &sp);
    tdm_grad_scaler_params pp = tdm_grad_scaler_defaults();
    CHECK(pp.init_scale == 65536 && pp.growth_factor == 2 && pp.backoff_factor == 0.5 && pp.growth_interval == 2000);
    pp.growth_interval = 2;
    tdm_grad_scaler *s = tdm_grad_scaler_new(&pp);
    bool skipped = false;
    // A planted inf: the step is skipped, the parameter untouched, the scale halved.
    tdm_tensor *g = vec(g_inf, 3);
    tdm_tensor_set_grad(p, g);
    tdm_tensor_free(g);
    CHECK(tdm_grad_scaler_step(s, o, &skipped) == TDM_OK && skipped);
    tdm_grad_scaler_update(s);
    const float *pv = tdm_tensor_data(p);
    CHECK(pv[0] == 1 && pv[1] == 2 && pv[2] == 3);
    CHECK_MSG(tdm_grad_scaler_get_scale(s) == 32768, "scale %g", tdm_grad_scaler_get_scale(s));
    // Two clean steps: gradients unscaled by 1/32768 exactly, applied; then the scale doubles.
    for (int k = 0; k < 2; k++) {
        g = vec(g_ok, 3);
        tdm_tensor_set_grad(p, g);
        tdm_tensor_free(g);
        CHECK(tdm_grad_scaler_step(s, o, &skipped) == TDM_OK && !skipped);
        tdm_grad_scaler_update(s);
    }
    // p -= 0.5 * (2, -4, 1) twice
    CHECK_MSG(pv[0] == -1 && pv[1] == 6 && pv[2] == 2, "p = %g %g %g", pv[0], pv[1], pv[2]);
    CHECK_MSG(tdm_grad_scaler_get_scale(s) == 65536, "scale %g", tdm_grad_scaler_get_scale(s));
    // A scaled loss carries the factor and backpropagates it.
    float one = 3.0f;
    tdm_tensor *w = vec(&one, 1);
    tdm_tensor_set_requires_grad(w, true);
    tdm_tensor *loss = tdm_sum(w, 0, NULL, false), *scaled = tdm_grad_scaler_scale(s, loss);
    CHECK(scaled && tdm_backward(scaled, NULL) == TDM_OK);
    CHECK(tdm_tensor_grad(w) && ((const float *)tdm_tensor_data(tdm_tensor_grad(w)))[0] == 65536);
    tdm_tensor_free(scaled);
    tdm_tensor_free(loss);
    tdm_tensor_free(w);
    tdm_grad_scaler_free(s);
    tdm_optimizer_free(o);
    tdm_tensor_free(p);
}

// One Adam step on a model from a fixed batch; returns the loss.
static double train_step(tdm_module *m, tdm_optimizer *o, tdm_tensor *x, tdm_tensor *y) {
    tdm_optimizer_zero_grad(o);
    tdm_tensor *out = tdm_module_forward(m, x);
    tdm_tensor *loss = tdm_cross_entropy(out, y, TDM_REDUCTION_MEAN, 0.0, -100);
    double l = NAN;
    if (loss && tdm_backward(loss, NULL) == TDM_OK && tdm_optimizer_step(o) == TDM_OK)
        tdm_tensor_to_host_f64(loss, &l);
    tdm_tensor_free(loss);
    tdm_tensor_free(out);
    return l;
}

static tdm_optimizer *adam_for(tdm_module *m) {
    tdm_tensor *ps[16];
    int n = tdm_module_parameters(m, ps, 16);
    tdm_adam_params ap = tdm_adam_defaults(true);
    ap.lr = 0.01;
    return tdm_optim_adam(ps, n, &ap);
}

static void test_resume(const char *dir) {
    const char *spec = "cnn:2x6x6/c4k3p1-bn-relu-mp2-flat-fc3";
    int64_t xs[4] = {5, 2, 6, 6}, n = 5;
    int64_t yv[5] = {0, 2, 1, 1, 0};
    tdm_tensor *x = tdm_tensor_randn(4, xs, TDM_DTYPE_F32, TDM_CPU, 11, 0);
    tdm_tensor *y = tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, yv);
    // Uninterrupted: 8 steps.
    tdm_module *a = tdm_nn_from_spec(spec);
    CHECK_MSG(a, "%s", tdm_last_error());
    if (!a) return;
    tdm_module_init(a, 5);
    tdm_optimizer *oa = adam_for(a);
    double la[8];
    for (int k = 0; k < 8; k++) la[k] = train_step(a, oa, x, y);
    CHECK_MSG(la[7] < la[0], "loss %g -> %g", la[0], la[7]);
    // Interrupted: 4 steps, save, fresh objects, load, 4 more.
    char mp[512], op[512];
    snprintf(mp, sizeof mp, "%s/resume_model.safetensors", dir);
    snprintf(op, sizeof op, "%s/resume_optim.safetensors", dir);
    tdm_module *b = tdm_nn_from_spec(spec);
    tdm_module_init(b, 5);
    tdm_optimizer *ob = adam_for(b);
    for (int k = 0; k < 4; k++) train_step(b, ob, x, y);
    CHECK(tdm_module_save(b, mp) == TDM_OK && tdm_optimizer_save(ob, op) == TDM_OK);
    tdm_optimizer_free(ob);
    tdm_module_free(b);
    tdm_module *c = tdm_nn_from_spec(spec);
    tdm_module_init(c, 99);   // different weights: the load must replace them all
    tdm_optimizer *oc = adam_for(c);
    CHECK(tdm_module_load(c, mp, "", true) == TDM_OK);
    CHECK(tdm_optimizer_load(oc, op) == TDM_OK);
    double lc[4];
    for (int k = 0; k < 4; k++) lc[k] = train_step(c, oc, x, y);
    for (int k = 0; k < 4; k++) CHECK_MSG(lc[k] == la[4 + k], "step %d: %.17g vs %.17g", 4 + k, lc[k], la[4 + k]);
    const char *na[32], *nc[32];
    tdm_tensor *ta[32], *tc[32];
    int sa = tdm_module_state(a, na, ta, 32), sc = tdm_module_state(c, nc, tc, 32);
    CHECK(sa == sc);
    for (int i = 0; i < sa && i < sc; i++) {
        CHECK(!strcmp(na[i], nc[i]) && tdm_tensor_nbytes(ta[i]) == tdm_tensor_nbytes(tc[i]));
        CHECK_MSG(!memcmp(tdm_tensor_data(ta[i]), tdm_tensor_data(tc[i]), tdm_tensor_nbytes(ta[i])),
                  "%s differs after resuming", na[i]);
    }
    // An SGD optimizer refuses Adam's state.
    tdm_tensor *ps[16];
    int np = tdm_module_parameters(c, ps, 16);
    tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9};
    tdm_optimizer *os = tdm_optim_sgd(ps, np, &sp);
    CHECK(tdm_optimizer_load(os, op) == TDM_ERR_FORMAT);
    tdm_optimizer_free(os);
    tdm_optimizer_free(oa);
    tdm_optimizer_free(oc);
    tdm_module_free(a);
    tdm_module_free(c);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
}

// `test_training --write-data DIR`: the same small task twice, as f32 x with int64 y and as f64 x
// with int32 y (values exact in both), for the bench train test that the two train identically.
static int write_data(const char *dir) {
    int64_t xs[2] = {48, 6}, n = 48;
    tdm_tensor *x32 = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, TDM_CPU, 7, 0);
    tdm_tensor *x64 = x32 ? tdm_tensor_to(x32, TDM_CPU, TDM_DTYPE_F64) : NULL;
    int64_t y64v[48];
    int32_t y32v[48];
    for (int i = 0; i < 48; i++) y64v[i] = y32v[i] = (i * 7) % 3;
    tdm_tensor *y64 = tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, y64v);
    tdm_tensor *y32 = tdm_tensor_from_host(1, &n, TDM_DTYPE_I32, TDM_CPU, y32v);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/data_f32_i64.safetensors", dir);
    snprintf(b, sizeof b, "%s/data_f64_i32.safetensors", dir);
    const char *names[2] = {"x", "y"};
    const tdm_tensor *t1[2] = {x32, y64}, *t2[2] = {x64, y32};
    int rc = x64 && y64 && y32 && tdm_safetensors_save(a, 2, names, t1, 0, NULL) == TDM_OK &&
                     tdm_safetensors_save(b, 2, names, t2, 0, NULL) == TDM_OK ? 0 : 1;
    tdm_tensor_free(x32);
    tdm_tensor_free(x64);
    tdm_tensor_free(y64);
    tdm_tensor_free(y32);
    return rc;
}

// The scaler's state travels with the optimizer's: a scaler one clean step into growth_interval 3
// at scale 32768 is restored into a fresh one (scale, tracker: growth after 2 more clean steps);
// malformed states are refused with the scaler unchanged; a file without one is refused.
static void test_scaler_state(const char *dir) {
    float p0[2] = {1, 2}, g_inf[2] = {INFINITY, 1}, g_ok[2] = {1, 1};
    tdm_tensor *p = vec(p0, 2);
    tdm_tensor_set_requires_grad(p, true);
    tdm_sgd_params sp = {.lr = 0.5};
    tdm_optimizer *o = tdm_optim_sgd(&p, 1, &sp);
    tdm_grad_scaler_params pp = tdm_grad_scaler_defaults();
    pp.growth_interval = 3;
    tdm_grad_scaler *s = tdm_grad_scaler_new(&pp), *r = tdm_grad_scaler_new(&pp);
    const float *gs[2] = {g_inf, g_ok};
    for (int k = 0; k < 2; k++) {   // a skip (65536 -> 32768), then one clean step
        tdm_tensor *g = vec(gs[k], 2);
        tdm_tensor_set_grad(p, g);
        tdm_tensor_free(g);
        CHECK(tdm_grad_scaler_step(s, o, NULL) == TDM_OK);
        tdm_grad_scaler_update(s);
    }
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/scaler.opt", dir);
    snprintf(bad, sizeof bad, "%s/scaler-bad.opt", dir);
    CHECK(tdm_optimizer_save_with_scaler(o, s, path) == TDM_OK);
    CHECK(tdm_optimizer_load_with_scaler(o, r, path) == TDM_OK);
    CHECK_MSG(tdm_grad_scaler_get_scale(r) == 32768, "scale %g", tdm_grad_scaler_get_scale(r));
    for (int k = 0; k < 2; k++) {   // two more clean steps complete the interval: 65536
        tdm_tensor *g = vec(g_ok, 2);
        tdm_tensor_set_grad(p, g);
        tdm_tensor_free(g);
        CHECK(tdm_grad_scaler_step(r, o, NULL) == TDM_OK);
        tdm_grad_scaler_update(r);
        CHECK_MSG(tdm_grad_scaler_get_scale(r) == (k ? 65536 : 32768), "after %d: scale %g", k + 1,
                  tdm_grad_scaler_get_scale(r));
    }
    // malformed states: refused, r keeps its scale (65536)
    const char *states[] = {
        "{\"scale\":-1,\"growth_factor\":2,\"backoff_factor\":0.5,\"growth_interval\":3,\"_growth_tracker\":0}",
        "{\"scale\":8,\"growth_factor\":2,\"backoff_factor\":0.5,\"growth_interval\":3,\"_growth_tracker\":3}",
        "{\"scale\":8,\"growth_factor\":2,\"backoff_factor\":0.5,\"growth_interval\":2.5,\"_growth_tracker\":0}",
        "{\"scale\":8,\"growth_factor\":2,\"backoff_factor\":0.5,\"growth_interval\":3}",
        "[8]", "not json"};
    for (int k = 0; k < 6; k++) {
        const char *meta[] = {"format", "tandem-optimizer/1", "optimizer", "sgd", "params", "1",
                              "grad_scaler", states[k]};
        CHECK(tdm_safetensors_save(bad, 0, NULL, NULL, 4, meta) == TDM_OK);
        CHECK_MSG(tdm_optimizer_load_with_scaler(o, r, bad) == TDM_ERR_FORMAT, "state %d", k);
        CHECK_MSG(strstr(tdm_last_error(), "grad_scaler"), "state %d: %s", k, tdm_last_error());
        CHECK(tdm_grad_scaler_get_scale(r) == 65536);
    }
    CHECK(tdm_optimizer_save(o, bad) == TDM_OK);   // no scaler state: refused for a scaler
    CHECK(tdm_optimizer_load_with_scaler(o, r, bad) == TDM_ERR_FORMAT);
    CHECK(strstr(tdm_last_error(), "holds no gradient scaler state"));
    CHECK(tdm_optimizer_load(o, path) == TDM_OK);   // the optimizer alone reads either file
    tdm_grad_scaler_free(s);
    tdm_grad_scaler_free(r);
    tdm_optimizer_free(o);
    tdm_tensor_free(p);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-data")) return write_data(argv[2]);
    test_scaler();
    test_resume(argc > 1 ? argv[1] : ".");
    test_scaler_state(argc > 1 ? argv[1] : ".");
    CHECK_DONE("test_training");
}
