/* test_optim.c — the optimizers' maximize and amsgrad options (torch.optim's single-tensor
 * formulas): SGD and Adam/AdamW objects stepped over a few steps against trajectories computed
 * here by hand in double, the AMSGrad state saved and loaded (state.<i>.max_exp_avg_sq), and the
 * op-level errors for a missing or mis-shaped max_exp_avg_sq, and state files that load but
 * could not be used (other dims, step counts that are not whole numbers up to 2^53).
 * usage: test_optim TMPDIR cpu|cuda:0   (cuda:0 without a device: exit 77, one line) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

#define NP 5       // elements of the parameter
#define STEPS 4

static tdm_device dev;
static const char *dev_tag;   // "cpu" or "cuda0": the state files' names, per device

static tdm_tensor *vec(const double *v, int64_t n) {
    return tdm_tensor_from_host(1, &n, TDM_DTYPE_F64, dev, v);
}

static void host(const tdm_tensor *t, double *v) {
    CHECK_MSG(t && tdm_tensor_to_host_f64(t, v) == TDM_OK, "%s", tdm_last_error());
}

// Step k's gradient: large at step 0 and small afterwards, so that under AMSGrad the maximum of
// exp_avg_sq stays above exp_avg_sq (the maximum, not the average, normalizes the later steps).
static void grad_at(int k, double *g) {
    for (int j = 0; j < NP; j++) g[j] = (k == 0 ? 2.0 : 0.05) * ((j % 2) ? -1.0 : 1.0) + 0.01 * j;
}

static const double P0[NP] = {0.5, -1.25, 2.0, 0.125, -0.75};

// |a - b| <= 1e-13 |b| + 1e-15 element by element.
static bool close_all(const double *a, const double *b, int n) {
    for (int i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= 1e-13 * fabs(b[i]) + 1e-15)) return false;
    return true;
}

// STEPS steps of o on p (whose values it changes), gradients from grad_at; p's values after.
static void run(tdm_optimizer *o, tdm_tensor *p, double *out) {
    for (int k = 0; k < STEPS; k++) {
        double g[NP];
        grad_at(k, g);
        tdm_tensor *gt = vec(g, NP);
        CHECK(gt && tdm_tensor_set_grad(p, gt) == TDM_OK);
        tdm_tensor_free(gt);
        CHECK_MSG(tdm_optimizer_step(o) == TDM_OK, "%s", tdm_last_error());
    }
    host(p, out);
}

// ---- SGD with maximize ----------------------------------------------------------------------------
// d = -g + wd p; buf = k ? mom buf + (1 - damp) d : d; d = nesterov ? d + mom buf : buf; p -= lr d.
static void sgd_by_hand(const tdm_sgd_params *sp, double *p) {
    double buf[NP] = {0};
    memcpy(p, P0, sizeof P0);
    for (int k = 0; k < STEPS; k++) {
        double g[NP];
        grad_at(k, g);
        for (int j = 0; j < NP; j++) {
            double d = (sp->maximize ? -g[j] : g[j]) + sp->weight_decay * p[j];
            buf[j] = k ? sp->momentum * buf[j] + (1 - sp->dampening) * d : d;
            d = sp->nesterov ? d + sp->momentum * buf[j] : buf[j];
            p[j] -= sp->lr * d;
        }
    }
}

static void test_sgd_maximize(void) {
    const tdm_sgd_params cases[2] = {
        {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true, .maximize = true},
        {.lr = 0.05, .momentum = 0.5, .dampening = 0.25, .weight_decay = 0.1, .maximize = true},
    };
    for (int c = 0; c < 2; c++) {
        tdm_tensor *p = vec(P0, NP);
        tdm_optimizer *o = tdm_optim_sgd(&p, 1, &cases[c]);
        CHECK_MSG(p && o, "%s", tdm_last_error());
        if (!p || !o) return;
        double got[NP], want[NP], desc[NP];
        run(o, p, got);
        sgd_by_hand(&cases[c], want);
        CHECK_MSG(close_all(got, want, NP), "sgd %d: %.17g vs %.17g by hand", c, got[0], want[0]);
        tdm_sgd_params down = cases[c];   // not vacuous: descending goes elsewhere
        down.maximize = false;
        sgd_by_hand(&down, desc);
        CHECK(fabs(desc[0] - want[0]) > 0.1);
        tdm_optimizer_free(o);
        tdm_tensor_free(p);
    }
}

// ---- Adam / AdamW with amsgrad and maximize -----------------------------------------------------
// torch.optim.adam/_single_tensor_adam (capturable=False), in double.
static void adam_by_hand(const tdm_adam_params *ap, double *p, double *vmax_out) {
    double m[NP] = {0}, v[NP] = {0}, vmax[NP] = {0};
    memcpy(p, P0, sizeof P0);
    for (int k = 0; k < STEPS; k++) {
        double g[NP];
        grad_at(k, g);
        const int step = k + 1;
        const double bc1 = 1 - pow(ap->beta1, step), bc2 = 1 - pow(ap->beta2, step);
        for (int j = 0; j < NP; j++) {
            double gj = ap->maximize ? -g[j] : g[j];
            if (ap->decoupled_weight_decay) p[j] *= 1 - ap->lr * ap->weight_decay;
            else gj += ap->weight_decay * p[j];
            m[j] = ap->beta1 * m[j] + (1 - ap->beta1) * gj;
            v[j] = ap->beta2 * v[j] + (1 - ap->beta2) * gj * gj;
            vmax[j] = fmax(vmax[j], v[j]);
            const double den = sqrt(ap->amsgrad ? vmax[j] : v[j]) / sqrt(bc2) + ap->eps;
            p[j] -= ap->lr / bc1 * m[j] / den;
        }
    }
    if (vmax_out) memcpy(vmax_out, vmax, sizeof vmax);
}

static tdm_adam_params adam_params(bool adamw, bool amsgrad, bool maximize) {
    tdm_adam_params ap = tdm_adam_defaults(adamw);
    ap.lr = 0.1;
    ap.beta2 = 0.9;   // exp_avg_sq decays within the 4 steps: its maximum stays above it
    ap.weight_decay = 0.05;
    ap.amsgrad = amsgrad;
    ap.maximize = maximize;
    return ap;
}

static void test_adam_trajectories(void) {
    for (int c = 0; c < 8; c++) {
        const bool adamw = c & 1, amsgrad = c & 2, maximize = c & 4;
        tdm_adam_params ap = adam_params(adamw, amsgrad, maximize);
        tdm_tensor *p = vec(P0, NP);
        tdm_optimizer *o = tdm_optim_adam(&p, 1, &ap);
        CHECK_MSG(p && o, "%s", tdm_last_error());
        if (!p || !o) return;
        double got[NP], want[NP];
        run(o, p, got);
        adam_by_hand(&ap, want, NULL);
        for (int j = 0; j < NP; j++)
            CHECK_MSG(close_all(&got[j], &want[j], 1),
                      "%s amsgrad %d maximize %d: p[%d] %.17g vs %.17g by hand",
                      adamw ? "adamw" : "adam", amsgrad, maximize, j, got[j], want[j]);
        tdm_optimizer_free(o);
        tdm_tensor_free(p);
    }
    // Not vacuous: amsgrad and maximize each move the trajectory well beyond the tolerance.
    double base[NP], ams[NP], up[NP];
    tdm_adam_params a0 = adam_params(false, false, false), a1 = adam_params(false, true, false),
                    a2 = adam_params(false, false, true);
    adam_by_hand(&a0, base, NULL);
    adam_by_hand(&a1, ams, NULL);
    adam_by_hand(&a2, up, NULL);
    CHECK_MSG(fabs(ams[1] - base[1]) > 1e-3, "amsgrad changes p[1] by %g only", ams[1] - base[1]);
    CHECK_MSG(fabs(up[0] - base[0]) > 1e-2, "maximize changes p[0] by %g only", up[0] - base[0]);
}

// ---- AMSGrad state through save and load --------------------------------------------------------
static void test_save_load(const char *dir) {
    char path[512], plain[512];
    snprintf(path, sizeof path, "%s/optim_amsgrad_%s.safetensors", dir, dev_tag);
    snprintf(plain, sizeof plain, "%s/optim_plain_%s.safetensors", dir, dev_tag);
    tdm_adam_params ap = adam_params(true, true, true);
    tdm_tensor *pa = vec(P0, NP), *pb = vec(P0, NP);
    tdm_optimizer *oa = tdm_optim_adam(&pa, 1, &ap);
    CHECK_MSG(pa && pb && oa, "%s", tdm_last_error());
    if (!pa || !pb || !oa) return;
    // 4 steps, save; max_exp_avg_sq is in the file with PyTorch's state key, equal to the hand's
    double got[NP];
    run(oa, pa, got);
    CHECK_MSG(tdm_optimizer_save(oa, path) == TDM_OK, "%s", tdm_last_error());
    tdm_safetensors *st = tdm_safetensors_open(path);
    CHECK_MSG(st, "%s", tdm_last_error());
    if (st) {
        CHECK(tdm_safetensors_has(st, "state.0.exp_avg") && tdm_safetensors_has(st, "state.0.step"));
        CHECK(tdm_safetensors_has(st, "state.0.max_exp_avg_sq"));
        tdm_tensor *vm = tdm_safetensors_get(st, "state.0.max_exp_avg_sq", TDM_CPU);
        double have[NP], want_p[NP], want[NP];
        adam_by_hand(&ap, want_p, want);
        host(vm, have);
        CHECK_MSG(close_all(have, want, NP), "max_exp_avg_sq %.17g vs %.17g by hand", have[0],
                  want[0]);
        tdm_tensor_free(vm);
        tdm_safetensors_close(st);
    }
    // A fresh optimizer on a copy of the parameter loads it and continues bit for bit.
    CHECK(tdm_tensor_copy_(pb, pa) == TDM_OK);
    tdm_optimizer *ob = tdm_optim_adam(&pb, 1, &ap);
    CHECK_MSG(ob && tdm_optimizer_load(ob, path) == TDM_OK, "%s", tdm_last_error());
    double ra[NP], rb[NP];
    run(oa, pa, ra);
    if (ob) run(ob, pb, rb);
    CHECK_MSG(ob && !memcmp(ra, rb, sizeof ra), "resumed %.17g vs %.17g", rb[0], ra[0]);
    // Without amsgrad the state has no max_exp_avg_sq: an amsgrad optimizer refuses it; one
    // without amsgrad ignores a max_exp_avg_sq it does not use (PyTorch never reads it).
    tdm_adam_params pl = adam_params(true, false, true);
    tdm_tensor *pc = vec(P0, NP);
    tdm_optimizer *oc = tdm_optim_adam(&pc, 1, &pl);
    run(oc, pc, got);
    CHECK(tdm_optimizer_save(oc, plain) == TDM_OK);
    tdm_optimizer *od = tdm_optim_adam(&pc, 1, &ap);
    CHECK(od && tdm_optimizer_load(od, plain) == TDM_ERR_FORMAT &&
          strstr(tdm_last_error(), "max_exp_avg_sq"));
    CHECK_MSG(tdm_optimizer_load(oc, path) == TDM_OK, "%s", tdm_last_error());
    tdm_optimizer_free(od);
    tdm_optimizer_free(oc);
    tdm_optimizer_free(ob);
    tdm_optimizer_free(oa);
    tdm_tensor_free(pa);
    tdm_tensor_free(pb);
    tdm_tensor_free(pc);
}

// ---- state files that load but could not be used (issue 21) -------------------------------------
// A state tensor with the parameter's element count in other dims, and Adam step counts that are
// not whole numbers from 0 to 2^53 (NaN, infinities, negative, fractions, 2^53 + 2, a huge i64),
// and a "params" count with trailing text: each load fails, says why, and leaves the state as it
// was (the optimizer still steps as before the attempt).
static void write_state(const char *path, const char *kind, const char *params, int n,
                        const char *const *names, tdm_tensor *const *ts) {
    const char *meta[] = {"format", "tandem-optimizer/1", "optimizer", kind, "lr", "0.01",
                          "params", params};
    CHECK_MSG(tdm_safetensors_save(path, n, names, (const tdm_tensor *const *)ts, 4, meta) ==
                  TDM_OK, "%s", tdm_last_error());
}

static void test_unusable_state(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/optim_unusable_%s.safetensors", dir, dev_tag);
    int64_t shape[2] = {2, 3}, flipped[2] = {3, 2};
    double v6[6] = {1, 2, 3, 4, 5, 6}, g6[6] = {0.5, -0.25, 0.125, 1, -1, 2};
    tdm_tensor *p = tdm_tensor_from_host(2, shape, TDM_DTYPE_F64, dev, v6);
    tdm_tensor *g = tdm_tensor_from_host(2, shape, TDM_DTYPE_F64, dev, g6);
    tdm_tensor *good = tdm_tensor_from_host(2, shape, TDM_DTYPE_F64, TDM_CPU, g6);
    tdm_tensor *bad = tdm_tensor_from_host(2, flipped, TDM_DTYPE_F64, TDM_CPU, g6);
    tdm_adam_params ap = adam_params(false, false, false);
    tdm_optimizer *o = tdm_optim_adam(&p, 1, &ap);
    tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9};
    tdm_optimizer *os = tdm_optim_sgd(&p, 1, &sp);
    CHECK_MSG(p && g && good && bad && o && os, "%s", tdm_last_error());
    if (!p || !g || !good || !bad || !o || !os) return;
    CHECK(tdm_tensor_set_grad(p, g) == TDM_OK);
    CHECK_MSG(tdm_optimizer_step(o) == TDM_OK, "%s", tdm_last_error());   // step 1: state exists

    // exp_avg (3, 2) for a (2, 3) parameter: same count, other dims
    const char *an[] = {"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step"};
    float one = 1;
    tdm_tensor *step = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, TDM_CPU, &one);
    tdm_tensor *ts[3] = {bad, good, step};
    write_state(path, "adam", "1", 3, an, ts);
    CHECK(tdm_optimizer_load(o, path) == TDM_ERR_SHAPE);
    CHECK_MSG(strstr(tdm_last_error(), "state.0.exp_avg has shape (3, 2), parameter 0 has (2, 3)"),
              "%s", tdm_last_error());
    ts[0] = good;
    ts[1] = bad;
    write_state(path, "adam", "1", 3, an, ts);
    CHECK_MSG(tdm_optimizer_load(o, path) == TDM_ERR_SHAPE &&
                  strstr(tdm_last_error(), "state.0.exp_avg_sq has shape (3, 2)"),
              "%s", tdm_last_error());
    // SGD's momentum buffer likewise
    const char *sn[] = {"state.0.momentum_buffer"};
    write_state(path, "sgd", "1", 1, sn, &bad);
    CHECK_MSG(tdm_optimizer_load(os, path) == TDM_ERR_SHAPE &&
              strstr(tdm_last_error(), "state.0.momentum_buffer has shape (3, 2)"), "%s",
              tdm_last_error());

    // step counts: f32 and f64 scalars that are not whole numbers in [0, 2^53], an i64 past 2^53
    const double steps[] = {NAN, INFINITY, -INFINITY, -1, 1.5, 0x1p53 + 2, 0x1p60, 1e300};
    ts[0] = good;
    ts[1] = good;
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            float sf = (float)steps[k];
            if (!f64 && (double)sf == 0x1p53) continue;   // 2^53 + 2 rounds to 2^53 in f32: valid
            tdm_tensor_free(step);
            step = f64 ? tdm_tensor_from_host(0, NULL, TDM_DTYPE_F64, TDM_CPU, &steps[k])
                       : tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, TDM_CPU, &sf);
            ts[2] = step;
            write_state(path, "adam", "1", 3, an, ts);
            tdm_status s = tdm_optimizer_load(o, path);
            CHECK_MSG(s == TDM_ERR_FORMAT && strstr(tdm_last_error(), "state.0.step is") &&
                          strstr(tdm_last_error(), "not a step count"),
                      "step %g (%s): %s", steps[k], f64 ? "f64" : "f32",
                      s == TDM_OK ? "loaded" : tdm_last_error());
        }
    int64_t big = (int64_t)1 << 62;
    tdm_tensor_free(step);
    step = tdm_tensor_from_host(0, NULL, TDM_DTYPE_I64, TDM_CPU, &big);
    ts[2] = step;
    write_state(path, "adam", "1", 3, an, ts);
    CHECK_MSG(tdm_optimizer_load(o, path) == TDM_ERR_FORMAT, "i64 step 2^62: %s", tdm_last_error());
    // the params count is a whole number, nothing after it
    double two53 = 0x1p53;
    tdm_tensor_free(step);
    step = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F64, TDM_CPU, &two53);
    ts[2] = step;
    for (int k = 0; k < 4; k++) {
        static const char *counts[] = {"1abc", " 1", "", "01x"};
        write_state(path, "adam", counts[k], 3, an, ts);
        CHECK_MSG(tdm_optimizer_load(o, path) == TDM_ERR_FORMAT &&
                  strstr(tdm_last_error(), "not the state of a adam optimizer over 1 parameters"),
                  "params '%s': %s", counts[k], tdm_last_error());
    }

    // Nothing refused changed the state: the next step equals that of an untouched twin.
    tdm_tensor *q = tdm_tensor_from_host(2, shape, TDM_DTYPE_F64, dev, v6);
    tdm_optimizer *twin = tdm_optim_adam(&q, 1, &ap);
    CHECK(q && twin && tdm_tensor_set_grad(q, g) == TDM_OK && tdm_optimizer_step(twin) == TDM_OK);
    CHECK(tdm_optimizer_step(o) == TDM_OK && tdm_optimizer_step(twin) == TDM_OK);
    double a[6], b[6];
    host(p, a);
    host(q, b);
    CHECK_MSG(!memcmp(a, b, sizeof a), "after the refused loads %.17g vs %.17g", a[0], b[0]);
    // 2^53 itself is a valid count; "1" params as written by save
    write_state(path, "adam", "1", 3, an, ts);
    CHECK_MSG(tdm_optimizer_load(o, path) == TDM_OK, "step 2^53: %s", tdm_last_error());
    tdm_optimizer_free(twin);
    tdm_optimizer_free(os);
    tdm_optimizer_free(o);
    tdm_tensor *fr[] = {p, g, good, bad, step, q};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) tdm_tensor_free(fr[i]);
}

// ---- the op's errors ---------------------------------------------------------------------------
static void test_op_errors(void) {
    tdm_tensor *p = vec(P0, NP), *g = vec(P0, NP);
    int64_t n = NP, n2 = NP + 1;
    tdm_tensor *m = tdm_tensor_zeros(1, &n, TDM_DTYPE_F64, dev);
    tdm_tensor *v = tdm_tensor_zeros(1, &n, TDM_DTYPE_F64, dev);
    tdm_tensor *vm = tdm_tensor_zeros(1, &n, TDM_DTYPE_F64, dev);
    tdm_tensor *bad_shape = tdm_tensor_zeros(1, &n2, TDM_DTYPE_F64, dev);
    tdm_tensor *bad_dtype = tdm_tensor_zeros(1, &n, TDM_DTYPE_F32, dev);
    CHECK(p && g && m && v && vm && bad_shape && bad_dtype);
    tdm_adam_params ap = adam_params(false, true, false);
    CHECK(tdm_adam_step(p, g, m, v, 1, &ap) == TDM_ERR_ARG &&
          strstr(tdm_last_error(), "amsgrad needs a max_exp_avg_sq"));
    CHECK(tdm_adam_step_amsgrad(p, g, m, v, NULL, 1, &ap) == TDM_ERR_ARG);
    CHECK(tdm_adam_step_amsgrad(p, g, m, v, bad_shape, 1, &ap) == TDM_ERR_SHAPE &&
          strstr(tdm_last_error(), "max_exp_avg_sq has shape"));
    CHECK(tdm_adam_step_amsgrad(p, g, m, v, bad_dtype, 1, &ap) == TDM_ERR_DTYPE &&
          strstr(tdm_last_error(), "max_exp_avg_sq"));
    double before[NP], after[NP];
    host(p, before);
    CHECK(!memcmp(before, P0, sizeof P0));   // nothing was written by the refused calls
    CHECK_MSG(tdm_adam_step_amsgrad(p, g, m, v, vm, 1, &ap) == TDM_OK, "%s", tdm_last_error());
    // without amsgrad the buffer is not needed (and not touched when given)
    ap.amsgrad = false;
    CHECK_MSG(tdm_adam_step(p, g, m, v, 2, &ap) == TDM_OK, "%s", tdm_last_error());
    host(vm, before);
    CHECK(tdm_adam_step_amsgrad(p, g, m, v, vm, 3, &ap) == TDM_OK);
    host(vm, after);
    CHECK(!memcmp(before, after, sizeof before));
    tdm_tensor *ts[] = {p, g, m, v, vm, bad_shape, bad_dtype};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) tdm_tensor_free(ts[i]);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "cpu") && strcmp(argv[2], "cuda:0"))) {
        fprintf(stderr, "usage: test_optim TMPDIR cpu|cuda:0\n");
        return 2;
    }
    dev = strcmp(argv[2], "cpu") ? (tdm_device){TDM_DEVICE_CUDA, 0} : TDM_CPU;
    dev_tag = dev.type == TDM_DEVICE_CUDA ? "cuda0" : "cpu";
    if (dev.type == TDM_DEVICE_CUDA && !tdm_device_available(dev)) {
        printf("SKIP optim.cuda0: %s\n", tdm_last_error());
        return 77;
    }
    test_sgd_maximize();
    test_adam_trajectories();
    test_save_load(argv[1]);
    test_unusable_state(argv[1]);
    test_op_errors();
    CHECK_DONE(dev.type == TDM_DEVICE_CUDA ? "optim.cuda0" : "optim.cpu");
}
