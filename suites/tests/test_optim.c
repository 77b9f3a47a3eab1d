/* test_optim.c — the optimizers' maximize and amsgrad options (torch.optim's single-tensor
 * formulas): SGD and Adam/AdamW objects stepped over a few steps against trajectories computed
 * here by hand in double, the AMSGrad state saved and loaded (state.<i>.max_exp_avg_sq), and the
 * op-level errors for a missing or mis-shaped max_exp_avg_sq, and state files that load but
 * could not be used (other dims, step counts that are not whole numbers up to 2^53).
 * Issue 23: parameter groups (two groups of their own lr / weight decay, lrs changed between
 * steps), clip_grad_norm_ (norm types 2, inf, 3, 1; a NaN and an inf gradient; error_if_nonfinite;
 * bf16 gradients) and nanoGPT's schedule against PyTorch's values (gen_optim_expect.py), the
 * groups through save/load (and files that do not match them), the scaler's unscale_ before
 * clipping, and the errors of each.
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

// ---- parameter groups, against PyTorch (gen_optim_expect.py) -----------------------------------
#define NQ 3
static const double Q0[NQ] = {0.25, -0.5, 1.5};

// After 4 steps: P (5) then Q (3), torch.optim with param_groups, foreach=False.
static const double PT_GROUPS_SGD[NP + NQ] = {
    -0.120775063864325, -0.6311329353278374, 1.3525129474454, 0.7181090755779688,
    -1.3917630549781126, -0.5781276291666666, 0.2838810083333333, 0.6592304791666669};
static const double PT_GROUPS_ADAM[NP + NQ] = {
    0.2584866112850344, -1.00037428185508, 1.7388768778185053, 0.35351226690049575,
    -0.9796333966757412, 0.15965133333740922, -0.4145793236562063, 1.4083364512400058};
static const double PT_GROUPS_ADAMW[NP + NQ] = {
    0.25668579547291887, -0.9952650362056248, 1.7282939341003292, 0.3533543222212942,
    -0.9773467234735832, 0.15965133333740922, -0.4145793236562063, 1.4083364512400058};

static const tdm_lr_cosine GROUP_SCHED = {.max_lr = 0.1, .min_lr = 0.01, .warmup_steps = 2,
                                          .decay_steps = 5};

// Steps k0..k1-1 of the group test: from step 1 on, group 0's lr from GROUP_SCHED and group 1's
// half of it (PyTorch: param_groups[g]["lr"] = ...); gradients grad_at(k) and grad_at(k) + 0.03.
static void group_steps(tdm_optimizer *o, tdm_tensor *p, tdm_tensor *q, int k0, int k1) {
    for (int k = k0; k < k1; k++) {
        if (k >= 1) {
            const double lr = tdm_lr_cosine_at(&GROUP_SCHED, k);
            tdm_optimizer_set_lr(o, 1.0);   // every group, then each its own
            tdm_optimizer_set_group_lr(o, 0, lr);
            tdm_optimizer_set_group_lr(o, 1, lr * 0.5);
        }
        double g[NP], h[NQ];
        grad_at(k, g);
        for (int j = 0; j < NQ; j++) h[j] = g[j] + 0.03;
        tdm_tensor *gt = vec(g, NP), *ht = vec(h, NQ);
        CHECK(gt && ht && tdm_tensor_set_grad(p, gt) == TDM_OK &&
              tdm_tensor_set_grad(q, ht) == TDM_OK);
        tdm_tensor_free(gt);
        tdm_tensor_free(ht);
        CHECK_MSG(tdm_optimizer_step(o) == TDM_OK, "%s", tdm_last_error());
    }
}

// kind 0 sgd, 1 adam, 2 adamw: the optimizers of gen_optim_expect.py
static tdm_optimizer *group_optimizer(int kind, tdm_tensor *p, tdm_tensor *q) {
    if (kind == 0) {
        tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
        tdm_param_group g[2] = {{&p, 1, NAN, NAN}, {&q, 1, 0.3, 0.0}};
        return tdm_optim_sgd_groups(g, 2, &sp);
    }
    tdm_adam_params ap = tdm_adam_defaults(kind == 2);
    ap.lr = 0.1;
    if (kind == 2) ap.weight_decay = 0.05;
    tdm_param_group g[2] = {{&p, 1, NAN, kind == 1 ? 0.1 : NAN},
                            {&q, 1, 0.02, kind == 1 ? NAN : 0.0}};
    return tdm_optim_adam_groups(g, 2, &ap);
}

static void test_groups_vs_pytorch(void) {
    const double *want[3] = {PT_GROUPS_SGD, PT_GROUPS_ADAM, PT_GROUPS_ADAMW};
    for (int kind = 0; kind < 3; kind++) {
        tdm_tensor *p = vec(P0, NP), *q = vec(Q0, NQ);
        tdm_optimizer *o = group_optimizer(kind, p, q);
        CHECK_MSG(p && q && o, "%s", tdm_last_error());
        if (!o) return;
        CHECK(tdm_optimizer_group_count(o) == 2);
        CHECK(tdm_optimizer_group_weight_decay(o, 1) == (kind == 0 ? 0.0 : kind == 1 ? 0.0 : 0.0));
        group_steps(o, p, q, 0, 4);
        double got[NP + NQ];
        host(p, got);
        host(q, got + NP);
        for (int j = 0; j < NP + NQ; j++)
            CHECK_MSG(close_all(&got[j], &want[kind][j], 1), "groups %d: [%d] %.17g, PyTorch %.17g",
                      kind, j, got[j], want[kind][j]);
        // not vacuous: one group (the second's lr and weight decay ignored) goes elsewhere
        tdm_tensor *p1 = vec(P0, NP), *q1 = vec(Q0, NQ);
        tdm_tensor *pq[2] = {p1, q1};
        tdm_adam_params ap = tdm_adam_defaults(kind == 2);
        ap.lr = 0.1;
        tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
        tdm_optimizer *o1 = kind ? tdm_optim_adam(pq, 2, &ap) : tdm_optim_sgd(pq, 2, &sp);
        CHECK(o1 && tdm_optimizer_group_count(o1) == 1);
        group_steps(o1, p1, q1, 0, 1);
        double one[NQ];
        host(q1, one);
        tdm_tensor *p2 = vec(P0, NP), *q2 = vec(Q0, NQ);
        tdm_optimizer *o2 = group_optimizer(kind, p2, q2);
        group_steps(o2, p2, q2, 0, 1);
        double two[NQ];
        host(q2, two);
        CHECK_MSG(fabs(one[0] - two[0]) > 1e-3, "group %d: the second group's lr changes q by %g",
                  kind, one[0] - two[0]);
        tdm_optimizer_free(o2);
        tdm_optimizer_free(o1);
        tdm_optimizer_free(o);
        tdm_tensor *fr[] = {p, q, p1, q1, p2, q2};
        for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) tdm_tensor_free(fr[i]);
    }
}

static void test_group_errors(void) {
    tdm_tensor *p = vec(P0, NP), *q = vec(Q0, NQ);
    tdm_sgd_params sp = {.lr = 0.1};
    tdm_param_group twice[2] = {{&p, 1, NAN, NAN}, {(tdm_tensor *[]){q, p}, 2, NAN, NAN}};
    CHECK(!tdm_optim_sgd_groups(twice, 2, &sp) &&
          strstr(tdm_last_error(), "a parameter appears in groups 0 and 1"));
    tdm_param_group neg[2] = {{&p, 1, NAN, NAN}, {&q, 1, -0.5, NAN}};
    CHECK(!tdm_optim_sgd_groups(neg, 2, &sp) &&
          strstr(tdm_last_error(), "group 1: invalid lr -0.5"));
    tdm_param_group wd[1] = {{&q, 1, NAN, -1}};
    tdm_adam_params ap = tdm_adam_defaults(true);
    CHECK(!tdm_optim_adam_groups(wd, 1, &ap) && strstr(tdm_last_error(), "invalid weight_decay"));
    CHECK(!tdm_optim_sgd_groups(neg, 0, &sp) &&
          strstr(tdm_last_error(), "at least one parameter group"));
    tdm_param_group ok[2] = {{&p, 1, NAN, NAN}, {&q, 1, 0.5, NAN}};
    tdm_optimizer *o = tdm_optim_sgd_groups(ok, 2, &sp);
    CHECK_MSG(o, "%s", tdm_last_error());
    if (!o) return;
    CHECK(tdm_optimizer_lr(o) == 0.1 && tdm_optimizer_group_lr(o, 1) == 0.5);
    tdm_optimizer_set_group_lr(o, 2, 0.1);
    CHECK(strstr(tdm_last_error(), "no group 2 (the optimizer has 2)"));
    tdm_optimizer_set_group_lr(o, 1, NAN);
    CHECK(strstr(tdm_last_error(), "invalid learning rate") && tdm_optimizer_group_lr(o, 1) == 0.5);
    tdm_optimizer_set_lr(o, -1);
    CHECK(tdm_optimizer_lr(o) == 0.1 && tdm_optimizer_group_lr(o, 1) == 0.5);
    tdm_optimizer_set_lr(o, 0.25);
    CHECK(tdm_optimizer_group_lr(o, 0) == 0.25 && tdm_optimizer_group_lr(o, 1) == 0.25);
    CHECK(isnan(tdm_optimizer_group_lr(o, -1)) && isnan(tdm_optimizer_group_weight_decay(o, 5)));
    tdm_optimizer_free(o);
    tdm_tensor_free(p);
    tdm_tensor_free(q);
}

// ---- groups through save and load -------------------------------------------------------------
static void test_groups_save_load(const char *dir) {
    char path[512], other[512];
    snprintf(path, sizeof path, "%s/optim_groups_%s.safetensors", dir, dev_tag);
    snprintf(other, sizeof other, "%s/optim_groups_old_%s.safetensors", dir, dev_tag);
    tdm_tensor *p = vec(P0, NP), *q = vec(Q0, NQ), *pb = vec(P0, NP), *qb = vec(Q0, NQ);
    tdm_optimizer *o = group_optimizer(2, p, q);
    CHECK_MSG(o, "%s", tdm_last_error());
    if (!o) return;
    group_steps(o, p, q, 0, 2);
    CHECK_MSG(tdm_optimizer_save(o, path) == TDM_OK, "%s", tdm_last_error());
    tdm_safetensors *st = tdm_safetensors_open(path);
    const char *pg = st ? tdm_safetensors_metadata(st, "param_groups") : NULL;
    char want[256];   // PyTorch's param_groups: parameter indices across the groups
    snprintf(want, sizeof want,
             "[{\"params\":[0],\"lr\":%.17g,\"weight_decay\":0.050000000000000003},"
             "{\"params\":[1],\"lr\":%.17g,\"weight_decay\":0}]",
             tdm_optimizer_group_lr(o, 0), tdm_optimizer_group_lr(o, 1));
    CHECK_MSG(pg && !strcmp(pg, want), "param_groups %s, want %s", pg ? pg : "(none)", want);
    tdm_safetensors_close(st);
    // A fresh optimizer of other lrs and weight decays loads the groups' and continues bit for bit.
    CHECK(tdm_tensor_copy_(pb, p) == TDM_OK && tdm_tensor_copy_(qb, q) == TDM_OK);
    tdm_adam_params ap = tdm_adam_defaults(true);
    tdm_param_group g[2] = {{&pb, 1, 0.7, 0.2}, {&qb, 1, 0.9, 0.3}};
    tdm_optimizer *ob = tdm_optim_adam_groups(g, 2, &ap);
    CHECK_MSG(ob && tdm_optimizer_load(ob, path) == TDM_OK, "%s", tdm_last_error());
    CHECK(ob && tdm_optimizer_group_lr(ob, 1) == tdm_optimizer_group_lr(o, 1) &&
          tdm_optimizer_group_weight_decay(ob, 0) == 0.05 &&
          tdm_optimizer_group_weight_decay(ob, 1) == 0.0);
    group_steps(o, p, q, 2, 4);
    if (ob) group_steps(ob, pb, qb, 2, 4);
    double a[NP + NQ], b[NP + NQ];
    host(p, a);
    host(q, a + NP);
    host(pb, b);
    host(qb, b + NP);
    CHECK_MSG(!memcmp(a, b, sizeof a), "resumed %.17g vs %.17g", b[0], a[0]);
    CHECK_MSG(close_all(a, PT_GROUPS_ADAMW, NP + NQ), "resumed run %.17g, PyTorch %.17g", a[0],
              PT_GROUPS_ADAMW[0]);
    // Other groups: one group over both, or the parameters split otherwise: refused, unchanged.
    tdm_tensor *pq[2] = {pb, qb};
    tdm_optimizer *one = tdm_optim_adam(pq, 2, &ap);
    CHECK(one && tdm_optimizer_load(one, path) == TDM_ERR_FORMAT &&
          strstr(tdm_last_error(), "param_groups has 2 parameter groups, this optimizer has 1"));
    tdm_param_group swapped[2] = {{pq, 2, NAN, NAN}, {NULL, 0, NAN, NAN}};
    tdm_optimizer *sw = tdm_optim_adam_groups(swapped, 2, &ap);
    CHECK(sw && tdm_optimizer_load(sw, path) == TDM_ERR_FORMAT &&
          strstr(tdm_last_error(), "param_groups[0] does not hold this optimizer's group 0"));
    CHECK(sw && tdm_optimizer_group_lr(sw, 0) == ap.lr);
    // A file without param_groups (written before groups existed) loads; the lrs stay.
    const char *an[] = {"state.1.exp_avg", "state.1.exp_avg_sq", "state.1.step"};
    float stepf = 2;
    tdm_tensor *z = tdm_tensor_zeros(1, (int64_t[]){NQ}, TDM_DTYPE_F64, TDM_CPU);
    tdm_tensor *sf = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, TDM_CPU, &stepf);
    const tdm_tensor *ts[3] = {z, z, sf};
    const char *meta[] = {"format", "tandem-optimizer/1", "optimizer", "adamw", "lr", "0.5",
                          "params", "2"};
    CHECK(tdm_safetensors_save(other, 3, an, ts, 4, meta) == TDM_OK);
    CHECK_MSG(ob && tdm_optimizer_load(ob, other) == TDM_OK, "%s", tdm_last_error());
    CHECK(ob && tdm_optimizer_group_lr(ob, 0) == tdm_optimizer_group_lr(o, 0));
    tdm_tensor_free(z);
    tdm_tensor_free(sf);
    tdm_optimizer_free(sw);
    tdm_optimizer_free(one);
    tdm_optimizer_free(ob);
    tdm_optimizer_free(o);
    tdm_tensor *fr[] = {p, q, pb, qb};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) tdm_tensor_free(fr[i]);
}

// ---- clip_grad_norm_, against PyTorch (gen_optim_expect.py)
// ---------------------------------------
static const double G1[NP] = {0.5, -1.5, 2.25, 0.75, -0.125}, G2[NQ] = {1.0, -3.0, 0.25};

// total, then the clipped G1 (5) and G2 (3), of clip_grad_norm_([p1, p3, p2], max_norm, type)
// with p3 without a gradient.
static const struct {
    double max_norm, norm_type, want[1 + NP + NQ];
} PT_CLIP[] = {
    {1.0, 2.0, {4.266512041469003, 0.1171917195940048, -0.3515751587820144, 0.5273627381730216,
                0.1757875793910072, -0.0292979298985012, 0.2343834391880096, -0.7031503175640288,
                0.0585958597970024}},
    {0.5, INFINITY, {3.0, 0.08333330555556481, -0.24999991666669444, 0.37499987500004167,
                     0.12499995833334722, -0.020833326388891203, 0.16666661111112963,
                     -0.4999998333333889, 0.041666652777782406}},
    {2.0, 3.0, {3.512339523153862, 0.2847104355081331, -0.8541313065243992, 1.2811969597865989,
                0.4270656532621996, -0.07117760887703327, 0.5694208710162662,
                -1.7082626130487983, 0.14235521775406654}},
    {100.0, 2.0, {4.266512041469003, 0.5, -1.5, 2.25, 0.75, -0.125, 1.0, -3.0, 0.25}},
    {1.0, 1.0, {9.375, 0.05333332764444505, -0.15999998293333517, 0.23999997440000273,
                0.07999999146666759, -0.013333331911111263, 0.1066666552888901,
                -0.31999996586667034, 0.026666663822222526}},
};

// |a - b| <= rel |b|, NaN matching NaN and infinities (and zeros) matching in sign.
static bool close_rel(double a, double b, double rel) {
    if (isnan(b) || isinf(b) || b == 0)
        return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
    return fabs(a - b) <= rel * fabs(b);
}

// Parameters p1 (5), p3 (2, no gradient), p2 (3) with gradients g1, g2 of dtype dt; clip; the
// total and the gradients after, as doubles. Returns the status.
static tdm_status clip_run(const double *g1, const double *g2, tdm_dtype dt, double max_norm,
                           double norm_type, bool nonfinite, double *out) {
    int64_t n1 = NP, n2 = NQ, n3 = 2;
    tdm_tensor *p[3] = {tdm_tensor_zeros(1, &n1, dt, dev), tdm_tensor_zeros(1, &n3, dt, dev),
                        tdm_tensor_zeros(1, &n2, dt, dev)};
    tdm_tensor *a = tdm_tensor_from_host(1, &n1, TDM_DTYPE_F64, dev, g1);
    tdm_tensor *b = tdm_tensor_from_host(1, &n2, TDM_DTYPE_F64, dev, g2);
    tdm_tensor *ga = a ? tdm_tensor_to(a, dev, dt) : NULL,
               *gb = b ? tdm_tensor_to(b, dev, dt) : NULL;
    CHECK_MSG(p[0] && p[1] && p[2] && ga && gb && tdm_tensor_set_grad(p[0], ga) == TDM_OK &&
                  tdm_tensor_set_grad(p[2], gb) == TDM_OK, "%s", tdm_last_error());
    tdm_tensor *t = tdm_clip_grad_norm_(p, 3, max_norm, norm_type, nonfinite);
    tdm_status s = t ? TDM_OK : tdm_last_status();   // (successful calls leave the message)
    if (t) {
        CHECK(tdm_tensor_ndim(t) == 0 && tdm_tensor_dtype(t) == TDM_DTYPE_F32);
        CHECK(tdm_tensor_device(t).type == dev.type && !tdm_tensor_grad(p[1]));
        host(t, out);
    }
    host(ga, out + 1);
    host(gb, out + 1 + NP);
    tdm_tensor *fr[] = {p[0], p[1], p[2], a, b, ga, gb, t};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) tdm_tensor_free(fr[i]);
    return s;
}

static void test_clip_vs_pytorch(void) {
    // f64 gradients: exact in f64 but for the total, returned in f32 (2^-24), whose rounding
    // reaches the clipped gradients through the coefficient
    for (size_t c = 0; c < sizeof PT_CLIP / sizeof *PT_CLIP; c++) {
        double got[1 + NP + NQ];
        CHECK_MSG(clip_run(G1, G2, TDM_DTYPE_F64, PT_CLIP[c].max_norm, PT_CLIP[c].norm_type, false,
                           got) == TDM_OK, "%s", tdm_last_error());
        for (int j = 0; j < 1 + NP + NQ; j++)
            CHECK_MSG(close_rel(got[j], PT_CLIP[c].want[j], 0x1p-22), "clip %zu: [%d] %.17g, "
                      "PyTorch %.17g", c, j, got[j], PT_CLIP[c].want[j]);
    }
    // bf16 gradients: the f32 norm of the bf16 values, each clipped gradient rounded once
    // (2^-8) — against PyTorch's f64 result on the same (bf16-exact) values
    for (size_t c = 0; c < sizeof PT_CLIP / sizeof *PT_CLIP; c++) {
        double got[1 + NP + NQ];
        CHECK(clip_run(G1, G2, TDM_DTYPE_BF16, PT_CLIP[c].max_norm, PT_CLIP[c].norm_type, false,
                       got) == TDM_OK);
        for (int j = 0; j < 1 + NP + NQ; j++)
            CHECK_MSG(close_rel(got[j], PT_CLIP[c].want[j], j ? 0x1p-8 : 0x1p-22),
                      "clip bf16 %zu: [%d] %.17g, PyTorch %.17g", c, j, got[j], PT_CLIP[c].want[j]);
    }
    // A NaN gradient: the total is NaN and so is every clipped gradient (no error by default).
    double g1n[NP], g2i[NQ], got[1 + NP + NQ];
    memcpy(g1n, G1, sizeof G1);
    memcpy(g2i, G2, sizeof G2);
    g1n[2] = NAN;
    g2i[1] = INFINITY;
    CHECK(clip_run(g1n, G2, TDM_DTYPE_F32, 1.0, 2.0, false, got) == TDM_OK);
    for (int j = 0; j < 1 + NP + NQ; j++) CHECK_MSG(isnan(got[j]), "nan: [%d] %g", j, got[j]);
    // An inf gradient: total inf, coefficient 0: zeros (signed as the gradients), NaN for the inf
    static const double want_inf[1 + NP + NQ] = {INFINITY, 0.0, -0.0, 0.0, 0.0,
                                                 -0.0,     0.0, NAN,  0.0};
    for (int t = 0; t < 2; t++) {
        CHECK(clip_run(G1, g2i, TDM_DTYPE_F32, 1.0, t ? INFINITY : 2.0, false, got) == TDM_OK);
        for (int j = 0; j < 1 + NP + NQ; j++)
            CHECK_MSG(close_rel(got[j], want_inf[j], 0), "inf (norm %d): [%d] %g, PyTorch %g", t,
                      j, got[j], want_inf[j]);
    }
    // error_if_nonfinite: an error naming the total, the gradients untouched; finite: clips.
    CHECK(clip_run(g1n, G2, TDM_DTYPE_F32, 1.0, 2.0, true, got) == TDM_ERR_ARG);
    CHECK_MSG(strstr(tdm_last_error(), "the total norm of order 2 of the gradients is nan"), "%s",
              tdm_last_error());
    CHECK(got[1] == 0.5 && isnan(got[3]) && got[1 + NP + 1] == -3.0);
    CHECK(clip_run(G1, g2i, TDM_DTYPE_F32, 1.0, 2.0, true, got) == TDM_ERR_ARG &&
          strstr(tdm_last_error(), "is inf"));
    CHECK(clip_run(G1, G2, TDM_DTYPE_F32, 1.0, 2.0, true, got) == TDM_OK &&
          close_rel(got[1], PT_CLIP[0].want[1], 0x1p-20));
}

static void test_clip_errors(void) {
    double got[1 + NP + NQ];
    const double bad_types[] = {0.0, -1.0, -INFINITY, NAN};
    for (size_t k = 0; k < sizeof bad_types / sizeof *bad_types; k++) {
        CHECK(clip_run(G1, G2, TDM_DTYPE_F32, 1.0, bad_types[k], false, got) ==
              TDM_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(tdm_last_error(), "is not supported (a finite p > 0, or INFINITY)"), "%s",
                  tdm_last_error());
        CHECK(got[1] == 0.5);   // untouched
    }
    CHECK(clip_run(G1, G2, TDM_DTYPE_F32, -1.0, 2.0, false, got) == TDM_ERR_ARG &&
          strstr(tdm_last_error(), "max_norm must be >= 0"));
    CHECK(clip_run(G1, G2, TDM_DTYPE_F32, NAN, 2.0, false, got) == TDM_ERR_ARG);
    // max_norm 0: every gradient zeroed; inf: unchanged
    CHECK(clip_run(G1, G2, TDM_DTYPE_F32, 0.0, 2.0, false, got) == TDM_OK && got[2] == 0 &&
          signbit(got[2]));
    CHECK(clip_run(G1, G2, TDM_DTYPE_F32, INFINITY, 2.0, false, got) == TDM_OK && got[2] == -1.5);
    // Nothing to clip: a zero total, on the cpu for an empty list (as PyTorch's torch.tensor(0.)),
    // on the parameters' device when none has a gradient
    tdm_tensor *z = tdm_clip_grad_norm_(NULL, 0, 1.0, 2.0, false);
    double v = -1;
    CHECK(z && tdm_tensor_device(z).type == TDM_DEVICE_CPU && tdm_tensor_ndim(z) == 0);
    host(z, &v);
    CHECK(v == 0);
    tdm_tensor_free(z);
    tdm_tensor *p = vec(P0, NP);
    z = tdm_clip_grad_norm_(&p, 1, 1.0, 2.0, true);
    CHECK(z && tdm_tensor_device(z).type == dev.type);
    tdm_tensor_free(z);
    CHECK(!tdm_clip_grad_norm_(NULL, 2, 1.0, 2.0, false) &&
          strstr(tdm_last_error(), "invalid parameter list"));
    tdm_tensor *bad[2] = {p, NULL};
    CHECK(!tdm_clip_grad_norm_(bad, 2, 1.0, 2.0, false));
    // gradients on two devices: refused (one call per device)
    if (dev.type == TDM_DEVICE_CUDA) {
        tdm_tensor *c = tdm_tensor_from_host(1, (int64_t[]){NP}, TDM_DTYPE_F64, TDM_CPU, P0);
        tdm_tensor *g = vec(G1, NP),
                   *gc = tdm_tensor_from_host(1, (int64_t[]){NP}, TDM_DTYPE_F64, TDM_CPU, G1);
        CHECK(tdm_tensor_set_grad(p, g) == TDM_OK && tdm_tensor_set_grad(c, gc) == TDM_OK);
        tdm_tensor *two[2] = {p, c};
        CHECK(!tdm_clip_grad_norm_(two, 2, 1.0, 2.0, false) &&
              tdm_last_status() == TDM_ERR_DEVICE &&
              strstr(tdm_last_error(), "more than one device (cuda:0, cpu)"));
        tdm_tensor_free(c);
        tdm_tensor_free(g);
        tdm_tensor_free(gc);
    }
    tdm_tensor_free(p);
}

// ---- the scaler's unscale_ before clipping (nanoGPT's fp16 step)
// ----------------------------------
static void test_unscale_then_clip(void) {
    tdm_grad_scaler_params sp = tdm_grad_scaler_defaults();
    sp.init_scale = 1024;
    tdm_grad_scaler *s = tdm_grad_scaler_new(&sp);
    tdm_tensor *p = vec(P0, NP), *q = vec(P0, NP);
    tdm_sgd_params op = {.lr = 0.5};
    tdm_optimizer *o = tdm_optim_sgd(&p, 1, &op), *oq = tdm_optim_sgd(&q, 1, &op);
    double g[NP], gs[NP];
    for (int j = 0; j < NP; j++) gs[j] = (g[j] = G1[j]) * 1024;
    tdm_tensor *gt = vec(gs, NP), *gq = vec(g, NP);
    CHECK(s && o && oq && gt && gq && tdm_tensor_set_grad(p, gt) == TDM_OK &&
          tdm_tensor_set_grad(q, gq) == TDM_OK);
    // scaled: unscale_, clip, step == plain: clip, step
    CHECK_MSG(tdm_grad_scaler_unscale_(s, o) == TDM_OK, "%s", tdm_last_error());
    CHECK(tdm_grad_scaler_unscale_(s, o) == TDM_ERR_ARG &&
          strstr(tdm_last_error(), "already called"));
    tdm_tensor *t1 = tdm_clip_grad_norm_(&p, 1, 1.0, 2.0, false);
    tdm_tensor *t2 = tdm_clip_grad_norm_(&q, 1, 1.0, 2.0, false);
    bool skipped = true;
    CHECK(t1 && t2 && tdm_grad_scaler_step(s, o, &skipped) == TDM_OK && !skipped);
    CHECK(tdm_optimizer_step(oq) == TDM_OK);
    double a[NP], b[NP], ta, tb;
    host(p, a);
    host(q, b);
    host(t1, &ta);
    host(t2, &tb);
    CHECK_MSG(!memcmp(a, b, sizeof a) && ta == tb, "unscale_+clip %.17g vs clip %.17g", a[0], b[0]);
    tdm_grad_scaler_update(s);   // a new step may unscale again
    CHECK(tdm_grad_scaler_unscale_(s, o) == TDM_OK);
    tdm_tensor *fr[] = {p, q, gt, gq, t1, t2};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) tdm_tensor_free(fr[i]);
    tdm_optimizer_free(o);
    tdm_optimizer_free(oq);
    tdm_grad_scaler_free(s);
}

// ---- nanoGPT's schedule (gen_optim_expect.py: its get_lr, bit for bit)
// ----------------------------
static void test_lr_cosine(void) {
    static const int64_t steps[14] = {0, 1, 2, 3, 4, 5, 9, 10, 11, 55, 99, 100, 101, 1000};
    static const double gpt[14] = {
        5.454545454545454e-05, 0.00010909090909090908, 0.00016363636363636363,
        0.00021818181818181816, 0.0002727272727272727, 0.00032727272727272726,
        0.0005454545454545454, 0.0006, 0.0005998355232951559, 0.00032999999999999994,
        6.0164476704844146e-05, 6e-05, 6e-05, 6e-05};
    static const double nowarm[14] = {1.0, 0.8681980515339464, 0.55, 0.23180194846605365, 0.1,
                                      0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
    const tdm_lr_cosine a = {6e-4, 6e-5, 10, 100}, b = {1.0, 0.1, 0, 4};
    for (int i = 0; i < 14; i++) {
        CHECK_MSG(tdm_lr_cosine_at(&a, steps[i]) == gpt[i], "step %lld: %.17g, nanoGPT %.17g",
                  (long long)steps[i], tdm_lr_cosine_at(&a, steps[i]), gpt[i]);
        CHECK_MSG(tdm_lr_cosine_at(&b, steps[i]) == nowarm[i], "no warm-up, step %lld: %.17g, "
                  "nanoGPT %.17g", (long long)steps[i], tdm_lr_cosine_at(&b, steps[i]), nowarm[i]);
    }
    // decay_steps == warmup_steps (nanoGPT divides by zero there): min_lr from the warm-up's end
    const tdm_lr_cosine c = {1.0, 0.25, 3, 3};
    CHECK(tdm_lr_cosine_at(&c, 2) == 0.75 && tdm_lr_cosine_at(&c, 3) == 0.25 &&
          tdm_lr_cosine_at(&c, 4) == 0.25);
    const tdm_lr_cosine bad[] = {{-1, 0, 1, 2}, {1, NAN, 1, 2}, {1, 0, -1, 2}, {1, 0, 3, 2},
                                 {INFINITY, 0, 1, 2}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
        CHECK_MSG(
            isnan(tdm_lr_cosine_at(&bad[k], 1)) && strstr(tdm_last_error(), "lr_cosine: invalid"),
            "bad schedule %zu", k);
    CHECK(isnan(tdm_lr_cosine_at(&a, -1)) && isnan(tdm_lr_cosine_at(NULL, 0)));
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
    test_groups_vs_pytorch();
    test_group_errors();
    test_groups_save_load(argv[1]);
    test_clip_vs_pytorch();
    test_clip_errors();
    test_unscale_then_clip();
    test_lr_cosine();
    CHECK_DONE(dev.type == TDM_DEVICE_CUDA ? "optim.cuda0" : "optim.cpu");
}
