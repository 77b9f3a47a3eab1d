/* optim.c — optimizers over parameter groups (torch.optim's SGD, Adam, AdamW with param_groups
 * of their own lr and weight decay) stepping with the fused update ops of ops.h (Adam also over
 * every parameter in one call: fused=True; and with f32 master weights for f16/bf16 parameters),
 * their state as safetensors, nanoGPT's learning-rate schedule, and the gradient scaler of mixed
 * precision (torch.cuda.amp.GradScaler's algorithm). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/env_impl.h"
#include "core/graph_impl.h"
#include "core/optim_impl.h"
#include "core/tensor_impl.h"
#include "tandem/autograd.h"
#include "tandem/io.h"
#include "tandem/optim.h"

typedef enum { OPT_SGD, OPT_ADAM } opt_kind;

typedef struct {
    tdm_tensor *param;       // a reference
    tdm_tensor *buf;         // SGD momentum buffer, or Adam's exp_avg (NULL until first step)
    tdm_tensor *buf2;        // Adam's exp_avg_sq
    tdm_tensor *buf3;        // Adam's max_exp_avg_sq (amsgrad only)
    tdm_tensor *master;      // Adam's f32 master weights of an f16/bf16 param (master_weights
                             // only; made with buf, and buf, buf2, buf3 are f32 then)
    int64_t step;            // Adam: steps taken; SGD: whether buf holds a value (0/1)
    bool fresh;              // buf/buf2 (master) made during a graph capture, never written yet
    int group;               // its parameter group
} opt_slot;

typedef struct {
    double lr, weight_decay;
    int first, n;   // slots [first, first + n)
} opt_group;

struct tdm_optimizer {
    opt_kind kind;
    tdm_sgd_params sgd;     // the hyperparameters; lr and weight_decay per group below
    tdm_adam_params adam;
    int n;
    opt_slot *slots;
    int n_groups;
    opt_group *groups;
};

tdm_adam_params tdm_adam_defaults(bool adamw) {
    return (tdm_adam_params){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                             .weight_decay = adamw ? 1e-2 : 0.0, .decoupled_weight_decay = adamw};
}

static int ptr_cmp(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)*(const tdm_tensor *const *)a;
    const uintptr_t y = (uintptr_t)*(const tdm_tensor *const *)b;
    return x < y ? -1 : x > y;
}

// The groups' parameters, numbered in order, each group's NAN lr / weight_decay replaced by the
// optimizer's (lr, wd). `who` names the optimizer in messages.
static tdm_optimizer *optim_new(const char *who, opt_kind kind, const tdm_param_group *g,
                                int n_groups, double lr, double wd) {
    if (n_groups < 1 || !g) {
        tdm_error_set(TDM_ERR_ARG, "%s: needs at least one parameter group (got %d)", who,
                      n_groups);
        return NULL;
    }
    int64_t total = 0;
    for (int k = 0; k < n_groups; k++) {
        const double glr = isnan(g[k].lr) ? lr : g[k].lr;
        const double gwd = isnan(g[k].weight_decay) ? wd : g[k].weight_decay;
        if (g[k].n < 0 || (g[k].n > 0 && !g[k].params)) {
            tdm_error_set(TDM_ERR_ARG, "%s: group %d: invalid parameter list", who, k);
            return NULL;
        }
        if (!(glr >= 0) || !(gwd >= 0)) {
            tdm_error_set(TDM_ERR_ARG, "%s: group %d: invalid %s %g (must be >= 0)", who, k,
                          !(glr >= 0) ? "lr" : "weight_decay", !(glr >= 0) ? glr : gwd);
            return NULL;
        }
        for (int i = 0; i < g[k].n; i++) {
            const tdm_tensor *t = g[k].params[i];
            if (!t || !tdm_dtype_is_float(t->dtype)) {
                tdm_error_set(TDM_ERR_ARG, "%s: parameter %lld%s is %s", who,
                              (long long)(total + i), n_groups > 1 ? " (of its group's list)" : "",
                              t ? "not floating point" : "NULL");
                return NULL;
            }
        }
        total += g[k].n;
    }
    if (total > INT_MAX) {
        tdm_error_set(TDM_ERR_ARG, "%s: %lld parameters, more than %d", who, (long long)total,
                      INT_MAX);
        return NULL;
    }
    const int n = (int)total;
    tdm_optimizer *o = calloc(1, sizeof *o);
    opt_slot *slots = calloc((size_t)(n ? n : 1), sizeof *slots);
    opt_group *groups = calloc((size_t)n_groups, sizeof *groups);
    tdm_tensor **sorted = malloc((size_t)(n ? n : 1) * sizeof *sorted);
    if (!o || !slots || !groups || !sorted) {
        free(o);
        free(slots);
        free(groups);
        free(sorted);
        tdm_error_set(TDM_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    for (int k = 0, at = 0; k < n_groups; at += g[k].n, k++)
        for (int i = 0; i < g[k].n; i++) sorted[at + i] = g[k].params[i];
    qsort(sorted, (size_t)n, sizeof *sorted, ptr_cmp);
    // One parameter in two groups is refused (PyTorch: "some parameters appear in more than one
    // parameter group"); a repeat inside a single list is left as tdm_optim_sgd always took it.
    for (int i = 1; i < n; i++) {
        if (sorted[i] != sorted[i - 1]) continue;
        int first = -1, second = -1;
        for (int k = 0; k < n_groups; k++)
            for (int j = 0; j < g[k].n; j++)
                if (g[k].params[j] == sorted[i]) {
                    if (first < 0) first = k;
                    else if (k != first && second < 0) second = k;
                }
        if (second >= 0) {
            tdm_error_set(TDM_ERR_ARG, "%s: a parameter appears in groups %d and %d (each "
                          "parameter belongs to one group)", who, first, second);
            free(o);
            free(slots);
            free(groups);
            free(sorted);
            return NULL;
        }
    }
    free(sorted);
    o->kind = kind;
    o->n = n;
    o->slots = slots;
    o->n_groups = n_groups;
    o->groups = groups;
    for (int k = 0, at = 0; k < n_groups; at += g[k].n, k++) {
        groups[k] = (opt_group){.lr = isnan(g[k].lr) ? lr : g[k].lr,
                                .weight_decay = isnan(g[k].weight_decay) ? wd : g[k].weight_decay,
                                .first = at, .n = g[k].n};
        for (int i = 0; i < g[k].n; i++) {
            slots[at + i].param = tdm_tensor_retain(g[k].params[i]);
            slots[at + i].group = k;
        }
    }
    return o;
}

static bool sgd_params_ok(const tdm_sgd_params *p) {
    if (!p || p->lr < 0 || p->momentum < 0 || p->weight_decay < 0) {
        tdm_error_set(TDM_ERR_ARG, "sgd: invalid hyperparameters (lr, momentum and weight_decay "
                                   "must be >= 0)");
        return false;
    }
    if (p->nesterov && (p->momentum <= 0 || p->dampening != 0)) {
        tdm_error_set(TDM_ERR_ARG, "sgd: nesterov momentum requires a momentum and zero dampening");
        return false;
    }
    return true;
}

static bool adam_params_ok(const tdm_adam_params *p) {
    if (!p || p->lr < 0 || p->eps < 0 || p->weight_decay < 0 || p->beta1 < 0 || p->beta1 >= 1 ||
        p->beta2 < 0 || p->beta2 >= 1) {
        tdm_error_set(TDM_ERR_ARG, "adam: invalid hyperparameters (lr, eps, weight_decay >= 0; "
                                   "betas in [0, 1))");
        return false;
    }
    return true;
}

tdm_optimizer *tdm_optim_sgd_groups(const tdm_param_group *g, int n_groups,
                                    const tdm_sgd_params *p) {
    if (!sgd_params_ok(p)) return NULL;
    tdm_optimizer *o = optim_new("sgd", OPT_SGD, g, n_groups, p->lr, p->weight_decay);
    if (o) o->sgd = *p;
    return o;
}

tdm_optimizer *tdm_optim_adam_groups(const tdm_param_group *g, int n_groups,
                                     const tdm_adam_params *p) {
    if (!adam_params_ok(p)) return NULL;
    tdm_optimizer *o = optim_new(p->decoupled_weight_decay ? "adamw" : "adam", OPT_ADAM, g,
                                 n_groups, p->lr, p->weight_decay);
    if (o) o->adam = *p;
    return o;
}

tdm_optimizer *tdm_optim_sgd(tdm_tensor *const *params, int n, const tdm_sgd_params *p) {
    const tdm_param_group g = {.params = params, .n = n, .lr = NAN, .weight_decay = NAN};
    return tdm_optim_sgd_groups(&g, 1, p);
}

tdm_optimizer *tdm_optim_adam(tdm_tensor *const *params, int n, const tdm_adam_params *p) {
    const tdm_param_group g = {.params = params, .n = n, .lr = NAN, .weight_decay = NAN};
    return tdm_optim_adam_groups(&g, 1, p);
}

void tdm_optimizer_free(tdm_optimizer *o) {
    if (!o) return;
    tdm_graph_forget(o);   // graphs that step it refuse to replay from now on
    for (int i = 0; i < o->n; i++) {
        tdm_tensor_free(o->slots[i].param);
        tdm_tensor_free(o->slots[i].buf);
        tdm_tensor_free(o->slots[i].buf2);
        tdm_tensor_free(o->slots[i].buf3);
        tdm_tensor_free(o->slots[i].master);
    }
    free(o->slots);
    free(o->groups);
    free(o);
}

int tdm_optimizer_group_count(const tdm_optimizer *o) { return o ? o->n_groups : 0; }

double tdm_optimizer_lr(const tdm_optimizer *o) { return o->groups[0].lr; }

double tdm_optimizer_group_lr(const tdm_optimizer *o, int group) {
    return o && group >= 0 && group < o->n_groups ? o->groups[group].lr : NAN;
}

double tdm_optimizer_group_weight_decay(const tdm_optimizer *o, int group) {
    return o && group >= 0 && group < o->n_groups ? o->groups[group].weight_decay : NAN;
}

static bool lr_ok(const char *op, double lr) {
    if (lr >= 0) return true;
    tdm_error_set(TDM_ERR_ARG, "%s: invalid learning rate %g (must be >= 0); left as it was", op,
                  lr);
    return false;
}

void tdm_optimizer_set_lr(tdm_optimizer *o, double lr) {
    if (!o || !lr_ok("optimizer_set_lr", lr)) return;
    for (int k = 0; k < o->n_groups; k++) o->groups[k].lr = lr;
}

void tdm_optimizer_set_group_lr(tdm_optimizer *o, int group, double lr) {
    if (!o || group < 0 || group >= o->n_groups) {
        tdm_error_set(TDM_ERR_ARG, "optimizer_set_group_lr: no group %d (the optimizer has %d)",
                      group, o ? o->n_groups : 0);
        return;
    }
    if (lr_ok("optimizer_set_group_lr", lr)) o->groups[group].lr = lr;
}

// The step's hyperparameters for a slot: the optimizer's, with its group's lr and weight decay.
static tdm_sgd_params slot_sgd(const tdm_optimizer *o, const opt_slot *sl) {
    tdm_sgd_params p = o->sgd;
    p.lr = o->groups[sl->group].lr;
    p.weight_decay = o->groups[sl->group].weight_decay;
    return p;
}

static tdm_adam_params slot_adam(const tdm_optimizer *o, const opt_slot *sl) {
    tdm_adam_params p = o->adam;
    p.lr = o->groups[sl->group].lr;
    p.weight_decay = o->groups[sl->group].weight_decay;
    return p;
}

// A zeroed state tensor shaped like the parameter, of dtype dt (lazily, as PyTorch creates state
// on step 1). During a graph capture it comes from memory no captured kernel uses (the capture's
// persistent pool) and is left unwritten and marked fresh: a captured memset would zero it again
// at every replay. The captured step reads fresh state as zeros (its coef says so); an eager step
// zeroes it first.
static tdm_status state_like(tdm_tensor **slot, const tdm_tensor *param, tdm_dtype dt,
                             bool *fresh) {
    if (*slot) return TDM_OK;
    if (tdm_graph_is_capturing(param->device)) {
        *slot = tdm_graph_empty_persistent(param->ndim, param->shape, dt, param->device);
        if (*slot) *fresh = true;
    } else {
        *slot = tdm_tensor_zeros(param->ndim, param->shape, dt, param->device);
    }
    return *slot ? TDM_OK : tdm_last_status();
}

// Does the slot's parameter get f32 master weights (Adam with master_weights, an f16/bf16 param)?
static bool has_master(const tdm_optimizer *o, const tdm_tensor *param) {
    return o->kind == OPT_ADAM && o->adam.master_weights &&
           (param->dtype == TDM_DTYPE_F16 || param->dtype == TDM_DTYPE_BF16);
}

// Adam's state: exp_avg, exp_avg_sq and, with amsgrad, max_exp_avg_sq (PyTorch's state keys), of
// the param's dtype; with master weights f32, and the master made with them: the param's value
// (exact in f32), or during a capture left unwritten and fresh (the captured step then reads the
// param for it, as it reads zeros for the rest). A master always comes with exp_avg (load makes
// one beside loaded state), so that the one fresh flag holds for all of them.
static tdm_status adam_state(const tdm_optimizer *o, opt_slot *sl) {
    const bool mw = has_master(o, sl->param);
    const tdm_dtype dt = mw ? TDM_DTYPE_F32 : sl->param->dtype;
    if (mw && !sl->master) {
        const tdm_tensor *p = sl->param;
        if (sl->buf && !sl->fresh)
            return tdm_error_set(TDM_ERR_ARG, "optimizer_step: a parameter has Adam state "
                                 "without its master weights");
        if (tdm_graph_is_capturing(p->device)) {
            sl->master = tdm_graph_empty_persistent(p->ndim, p->shape, TDM_DTYPE_F32, p->device);
            if (sl->master) sl->fresh = true;
        } else {
            sl->master = tdm_tensor_to(p, p->device, TDM_DTYPE_F32);
        }
        if (!sl->master) return tdm_last_status();
    }
    TDM_TRY(state_like(&sl->buf, sl->param, dt, &sl->fresh));
    TDM_TRY(state_like(&sl->buf2, sl->param, dt, &sl->fresh));
    return o->adam.amsgrad ? state_like(&sl->buf3, sl->param, dt, &sl->fresh) : TDM_OK;
}

// State made during a capture whose step never replayed, before an eager step: zeros, and the
// master the param's value.
static tdm_status zero_fresh(opt_slot *sl) {
    if (!sl->fresh) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(sl->buf);
    TDM_TRY(be->memset_zero(tdm_data(sl->buf), tdm_tensor_nbytes(sl->buf), sl->buf->device.index));
    tdm_tensor *more[2] = {sl->buf2, sl->buf3};
    for (int k = 0; k < 2; k++)
        if (more[k])
            TDM_TRY(be->memset_zero(tdm_data(more[k]), tdm_tensor_nbytes(more[k]),
                                    more[k]->device.index));
    if (sl->master) TDM_TRY(be->cast(sl->master, sl->param));
    sl->fresh = false;
    return TDM_OK;
}

// The slot's step as an item of tdm_adam_step_multi: its state, step count + 1, group's lr / wd.
static tdm_adam_item slot_item(const tdm_optimizer *o, const opt_slot *sl, const tdm_tensor *g) {
    return (tdm_adam_item){.param = sl->param, .grad = g, .m = sl->buf, .v = sl->buf2,
                           .vmax = o->adam.amsgrad ? sl->buf3 : NULL, .master = sl->master,
                           .step = sl->step + 1, .lr = o->groups[sl->group].lr,
                           .weight_decay = o->groups[sl->group].weight_decay};
}

// A fused eager step: tdm_adam_step_multi once per device the items are on (once, for a model on
// one device), in the items' order within each.
static tdm_status adam_multi_by_device(const tdm_optimizer *o, tdm_adam_item *items, int n) {
    int done = 0;
    while (done < n) {
        const tdm_device d = items[done].param->device;
        int k = done;   // move this device's items to [done, k), keeping their order
        for (int i = done; i < n; i++) {
            const tdm_device e = items[i].param->device;
            if (e.type != d.type || e.index != d.index) continue;
            const tdm_adam_item t = items[i];
            memmove(&items[k + 1], &items[k], (size_t)(i - k) * sizeof *items);
            items[k++] = t;
        }
        TDM_TRY(tdm_adam_step_multi(items + done, k - done, &o->adam, NULL, 0));
        done = k;
    }
    return TDM_OK;
}

// ---- a step captured in a CUDA graph (PyTorch's capturable optimizers) ------------------------
// The kernels read the per-step values from `coef` (device f64, K per stepped slot: sgd
// {buf initialized, lr}, adam {lr/(1-b1^t), sqrt(1-b2^t), 1 - lr wd, fresh (m, v and, with
// amsgrad, max_exp_avg_sq read as zeros)}); before each replay
// the hook advances the host state exactly as the eager step does and writes those values,
// computed by the eager step's own expressions (kernels/k_optim.cu's cuda_adam_step), so that a
// replay equals the eager step bit for bit. The capture itself advances nothing: it runs nothing.

typedef struct {
    tdm_optimizer *o;
    int n;              // slots stepped by the captured call
    int *slot;          // their indices
    double *wd;         // their group's weight decay at the capture (a kernel argument)
    tdm_tensor *coef;   // (n * K) f64, written before each replay
} opt_capture;

enum { SGD_COEFS = 2, ADAM_COEFS = 4 };

static void opt_capture_release(void *ctx) {
    opt_capture *c = ctx;
    tdm_tensor_free(c->coef);
    free(c->slot);
    free(c->wd);
    free(c);
}

static tdm_status opt_capture_replay(void *ctx) {
    opt_capture *c = ctx;
    tdm_optimizer *o = c->o;
    const int k = o->kind == OPT_SGD ? SGD_COEFS : ADAM_COEFS;
    // The weight decay is a kernel argument of the captured step (the lr is not): a group whose
    // weight decay changed since (a load) would replay the old one.
    for (int i = 0; i < c->n; i++) {
        const int g = o->slots[c->slot[i]].group;
        if (o->groups[g].weight_decay != c->wd[i])
            return tdm_error_set(TDM_ERR_ARG, "graph_replay: the optimizer's group %d has weight "
                                 "decay %g, %g when its step was captured: capture it again", g,
                                 o->groups[g].weight_decay, c->wd[i]);
    }
    const size_t rows = c->n > 0 ? (size_t)c->n : 1;   // (n, k) coefficients, one row at least
    double *v = malloc(rows * (size_t)k * sizeof *v);
    if (!v) return tdm_error_set(TDM_ERR_OOM, "graph_replay: out of host memory");
    for (int i = 0; i < c->n; i++) {
        opt_slot *sl = &o->slots[c->slot[i]];
        double *cf = v + (size_t)i * (size_t)k;
        if (o->kind == OPT_SGD) {
            cf[0] = sl->step > 0;
            cf[1] = o->groups[sl->group].lr;
            if (o->sgd.momentum != 0) sl->step = 1;
        } else {
            const tdm_adam_params p = slot_adam(o, sl);
            const int64_t step = sl->step + 1;
            const double bc1 = 1 - pow(p.beta1, (double)step), bc2 = 1 - pow(p.beta2, (double)step);
            cf[0] = p.lr / bc1;
            cf[1] = sqrt(bc2);
            cf[2] = 1 - p.lr * p.weight_decay;
            cf[3] = sl->fresh;
            sl->step = step;
        }
        sl->fresh = false;
    }
    tdm_status s = tdm_graph_write_async(c->coef, 0, v, (size_t)c->n * (size_t)k * sizeof *v);
    free(v);
    return s;
}

static tdm_status optimizer_step_captured(tdm_optimizer *o, tdm_device dev) {
    opt_capture *c = calloc(1, sizeof *c);
    int *slot = malloc((size_t)(o->n ? o->n : 1) * sizeof *slot);
    double *wd = malloc((size_t)(o->n ? o->n : 1) * sizeof *wd);
    if (!c || !slot || !wd) {
        free(c);
        free(slot);
        free(wd);
        return tdm_error_set(TDM_ERR_OOM, "optimizer_step: out of host memory");
    }
    c->o = o;
    c->slot = slot;
    c->wd = wd;
    for (int i = 0; i < o->n; i++)
        if (tdm_tensor_grad(o->slots[i].param)) {
            wd[c->n] = o->groups[o->slots[i].group].weight_decay;
            slot[c->n++] = i;
        }
    const int k = o->kind == OPT_SGD ? SGD_COEFS : ADAM_COEFS;
    int64_t len = (int64_t)(c->n ? c->n : 1) * k;
    c->coef = tdm_graph_empty_persistent(1, &len, TDM_DTYPE_F64, dev);
    tdm_status s = c->coef ? TDM_OK : tdm_last_status();
    // Adam fused (or with master weights): the items through tdm_adam_step_multi, all in one call
    // when fused, reading their per-step values from coef (one row of ADAM_COEFS per item).
    const bool multi = o->kind == OPT_ADAM && (o->adam.fused || o->adam.master_weights);
    tdm_adam_item *items = multi ? malloc((size_t)(c->n ? c->n : 1) * sizeof *items) : NULL;
    if (s == TDM_OK && multi && !items)
        s = tdm_error_set(TDM_ERR_OOM, "optimizer_step: out of host memory");
    for (int i = 0; i < c->n && s == TDM_OK; i++) {
        opt_slot *sl = &o->slots[slot[i]];
        tdm_tensor *g = tdm_tensor_grad(sl->param);
        if (!tdm_graph_is_capturing(sl->param->device) || sl->param->device.index != dev.index) {
            s = tdm_error_set(TDM_ERR_ARG, "optimizer_step: parameter %d is not on the capturing "
                              "device", slot[i]);
        } else if (o->kind == OPT_SGD) {
            const tdm_sgd_params p = slot_sgd(o, sl);   // lr from coef; weight decay as given
            if (o->sgd.momentum != 0)
                s = state_like(&sl->buf, sl->param, sl->param->dtype, &sl->fresh);
            if (s == TDM_OK)
                s = tdm_sgd_step_captured(sl->param, g, sl->buf, c->coef, (int64_t)i * k, &p);
        } else {
            const tdm_adam_params p = slot_adam(o, sl);
            s = adam_state(o, sl);
            if (s == TDM_OK && multi) items[i] = slot_item(o, sl, g);
            if (s != TDM_OK || (multi && o->adam.fused)) continue;   // fused: one call below
            s = sl->master ? tdm_adam_step_multi(&items[i], 1, &o->adam, c->coef, (int64_t)i * k)
                           : tdm_adam_step_captured(sl->param, g, sl->buf, sl->buf2, sl->buf3,
                                                    c->coef, (int64_t)i * k, &p);
        }
    }
    if (s == TDM_OK && multi && o->adam.fused && c->n > 0)
        s = tdm_adam_step_multi(items, c->n, &o->adam, c->coef, 0);
    free(items);
    if (s != TDM_OK) {
        opt_capture_release(c);
        return s;
    }
    tdm_graph_hook h = {.owner = o, .ctx = c, .replay = opt_capture_replay,
                        .release = opt_capture_release};
    return tdm_graph_hook_add(dev, &h);
}

// One parameter's eager step, unfused: a master's through tdm_adam_step_multi, any other through
// tdm_adam_step_amsgrad, as without master weights.
static tdm_status adam_step_one(const tdm_optimizer *o, const tdm_adam_item *it) {
    if (it->master) return tdm_adam_step_multi(it, 1, &o->adam, NULL, 0);
    tdm_adam_params p = o->adam;
    p.lr = it->lr;
    p.weight_decay = it->weight_decay;
    return tdm_adam_step_amsgrad(it->param, it->grad, it->m, it->v, it->vmax, it->step, &p);
}

// An eager Adam step through tdm_adam_step_multi: fused, every parameter with a gradient in one
// call (per device); otherwise (master weights) one call per parameter, as the per-tensor path.
// The step counts advance once the calls succeeded.
static tdm_status adam_step_items(tdm_optimizer *o) {
    tdm_adam_item *items = malloc((size_t)(o->n ? o->n : 1) * sizeof *items);
    int *stepped = malloc((size_t)(o->n ? o->n : 1) * sizeof *stepped);
    tdm_status s = items && stepped ? TDM_OK
                   : tdm_error_set(TDM_ERR_OOM, "optimizer_step: out of host memory");
    int n = 0;
    for (int i = 0; i < o->n && s == TDM_OK; i++) {
        opt_slot *sl = &o->slots[i];
        const tdm_tensor *g = tdm_tensor_grad(sl->param);
        if (!g) continue;   // no gradient: skipped, as in PyTorch
        s = zero_fresh(sl);
        if (s == TDM_OK) s = adam_state(o, sl);
        if (s != TDM_OK) break;
        items[n] = slot_item(o, sl, g);
        if (!o->adam.fused) s = adam_step_one(o, &items[n]);
        if (s == TDM_OK) stepped[n++] = i;
    }
    if (s == TDM_OK && o->adam.fused && n > 0) s = adam_multi_by_device(o, items, n);
    if (s == TDM_OK || !o->adam.fused)   // unfused: the parameters stepped before an error
        for (int j = 0; j < n; j++) o->slots[stepped[j]].step++;
    free(items);
    free(stepped);
    return s;
}

tdm_status tdm_optimizer_step(tdm_optimizer *o) {
    bool prev = tdm_grad_set_enabled(false);
    tdm_status s = TDM_OK;
    for (int i = 0; i < o->n; i++) {   // a captured step: its state advances at each replay
        tdm_tensor *g = tdm_tensor_grad(o->slots[i].param);
        if (g && tdm_graph_is_capturing(g->device)) {
            s = optimizer_step_captured(o, g->device);
            tdm_grad_set_enabled(prev);
            return s;
        }
    }
    if (o->kind == OPT_ADAM && (o->adam.fused || o->adam.master_weights)) {
        s = adam_step_items(o);
        tdm_grad_set_enabled(prev);
        return s;
    }
    for (int i = 0; i < o->n && s == TDM_OK; i++) {
        opt_slot *sl = &o->slots[i];
        tdm_tensor *g = tdm_tensor_grad(sl->param);
        if (!g) continue;   // no gradient: skipped, as in PyTorch
        s = zero_fresh(sl);
        if (s != TDM_OK) break;
        if (o->kind == OPT_SGD) {
            const tdm_sgd_params p = slot_sgd(o, sl);
            if (o->sgd.momentum != 0)
                s = state_like(&sl->buf, sl->param, sl->param->dtype, &sl->fresh);
            if (s == TDM_OK) s = tdm_sgd_step(sl->param, g, sl->buf, sl->step > 0, &p);
            if (s == TDM_OK && o->sgd.momentum != 0) sl->step = 1;
        } else {
            const tdm_adam_params p = slot_adam(o, sl);
            s = adam_state(o, sl);
            if (s == TDM_OK)
                s = tdm_adam_step_amsgrad(sl->param, g, sl->buf, sl->buf2, sl->buf3, sl->step + 1,
                                          &p);
            if (s == TDM_OK) sl->step++;
        }
    }
    tdm_grad_set_enabled(prev);
    return s;
}

void tdm_optimizer_zero_grad(tdm_optimizer *o) {
    for (int i = 0; i < o->n; i++) tdm_tensor_set_grad(o->slots[i].param, NULL);
}

// ---- state files --------------------------------------------------------------------------------
// "state.<i>.momentum_buffer" (SGD), "state.<i>.exp_avg", "state.<i>.exp_avg_sq",
// "state.<i>.max_exp_avg_sq" (amsgrad only), "state.<i>.master_param" (master weights only: the
// f32 copy of an f16/bf16 param) and "state.<i>.step" (Adam; f32 scalar, as PyTorch keeps it),
// for the parameters that have state. An amsgrad optimizer refuses a file without
// max_exp_avg_sq beside exp_avg; one without amsgrad ignores it (PyTorch's step never reads it).
// With master weights, a file without master_param beside exp_avg (saved without them) loads
// with the master made from the parameter's current value, as a first step makes it: load the
// parameters first. Without master weights master_param is ignored (exp_avg & co. are then
// rounded to the parameter's dtype, as PyTorch's load_state_dict casts state).
// Metadata: format, optimizer, lr (group 0's), params (the count) and param_groups, PyTorch's
// state_dict["param_groups"] with the settings a group holds here:
// [{"params":[0,1,2],"lr":0.1,"weight_decay":0.01},{"params":[3],...}] (%.17g: exact doubles).

// The param_groups JSON (malloc'd), or NULL with the error set.
static char *groups_json(const tdm_optimizer *o) {
    size_t cap = 64 + (size_t)o->n * 12 + (size_t)o->n_groups * 96, len = 0;
    char *j = malloc(cap);
    if (!j) {
        tdm_error_set(TDM_ERR_OOM, "optimizer_save: out of memory");
        return NULL;
    }
    len += (size_t)snprintf(j + len, cap - len, "[");
    for (int k = 0; k < o->n_groups; k++) {
        const opt_group *g = &o->groups[k];
        len += (size_t)snprintf(j + len, cap - len, "%s{\"params\":[", k ? "," : "");
        for (int i = 0; i < g->n; i++)
            len += (size_t)snprintf(j + len, cap - len, "%s%d", i ? "," : "", g->first + i);
        len += (size_t)snprintf(j + len, cap - len, "],\"lr\":%.17g,\"weight_decay\":%.17g}",
                                g->lr, g->weight_decay);
    }
    snprintf(j + len, cap - len, "]");
    return j;
}

// A file's param_groups checked against o's groups (the same parameters in each, in order; lr
// and weight_decay numbers >= 0): their lr and weight_decay into lr[] / wd[] (n_groups each).
static tdm_status groups_parse(const tdm_optimizer *o, const char *path, const char *text,
                               double *lr, double *wd) {
    cJSON *root = cJSON_Parse(text);
    tdm_status s = TDM_OK;
    if (!cJSON_IsArray(root) || cJSON_GetArraySize(root) != o->n_groups)
        s = tdm_error_set(TDM_ERR_FORMAT, "%s: param_groups %s %d parameter groups, this optimizer "
                          "has %d", path, cJSON_IsArray(root) ? "has" : "is not a list of",
                          cJSON_IsArray(root) ? cJSON_GetArraySize(root) : 0, o->n_groups);
    int k = 0;
    for (const cJSON *e = root ? root->child : NULL; s == TDM_OK && e; e = e->next, k++) {
        const opt_group *g = &o->groups[k];
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(e, "params");
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "lr");
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(e, "weight_decay");
        bool same = cJSON_IsArray(ps) && cJSON_GetArraySize(ps) == g->n;
        int i = 0;
        for (const cJSON *q = same ? ps->child : NULL; q; q = q->next, i++)
            same = same && cJSON_IsNumber(q) && q->valuedouble == (double)(g->first + i);
        if (!same)
            s = tdm_error_set(TDM_ERR_FORMAT, "%s: param_groups[%d] does not hold this optimizer's "
                              "group %d (parameters %d to %d)", path, k, k, g->first,
                              g->first + g->n - 1);
        else if (!cJSON_IsNumber(l) || !cJSON_IsNumber(w) || !(l->valuedouble >= 0) ||
                 !(w->valuedouble >= 0) || !isfinite(l->valuedouble) || !isfinite(w->valuedouble))
            s = tdm_error_set(TDM_ERR_FORMAT, "%s: param_groups[%d]: lr and weight_decay must be "
                              "finite numbers >= 0", path, k);
        else {
            lr[k] = l->valuedouble;
            wd[k] = w->valuedouble;
        }
    }
    cJSON_Delete(root);
    return s;
}

static char *scaler_json(const tdm_grad_scaler *sc);

// The optimizer's state and, when sc is not NULL, the gradient scaler's (metadata grad_scaler).
static tdm_status optimizer_save(const tdm_optimizer *o, const tdm_grad_scaler *sc,
                                 const char *path) {
    int cap = 5 * o->n, n = 0;
    char (*names)[48] = calloc((size_t)(cap ? cap : 1), sizeof *names);
    const char **np = calloc((size_t)(cap ? cap : 1), sizeof *np);
    const tdm_tensor **tp = calloc((size_t)(cap ? cap : 1), sizeof *tp);
    tdm_tensor **steps = calloc((size_t)(o->n ? o->n : 1), sizeof *steps);
    tdm_status s = names && np && tp && steps ? TDM_OK
                                              : tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
    for (int i = 0; s == TDM_OK && i < o->n; i++) {
        const opt_slot *sl = &o->slots[i];
        if (!sl->buf || sl->fresh || (o->kind == OPT_SGD && sl->step == 0)) continue;   // no state yet
        if (o->kind == OPT_SGD) {
            snprintf(names[n], sizeof names[n], "state.%d.momentum_buffer", i);
            np[n] = names[n];
            tp[n++] = sl->buf;
            continue;
        }
        float stepf = (float)sl->step;
        steps[i] = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, TDM_CPU, &stepf);
        if (!steps[i]) {
            s = tdm_last_status();
            break;
        }
        const char *keys[5] = {"exp_avg", "exp_avg_sq", "step", "max_exp_avg_sq", "master_param"};
        const tdm_tensor *vals[5] = {sl->buf, sl->buf2, steps[i], sl->buf3, sl->master};
        for (int k = 0; k < 5; k++) {
            if (!vals[k]) continue;
            snprintf(names[n], sizeof names[n], "state.%d.%s", i, keys[k]);
            np[n] = names[n];
            tp[n++] = vals[k];
        }
    }
    char lr[32], count[16];
    snprintf(lr, sizeof lr, "%.17g", tdm_optimizer_lr(o));
    snprintf(count, sizeof count, "%d", o->n);
    char *groups = s == TDM_OK ? groups_json(o) : NULL;
    if (s == TDM_OK && !groups) s = tdm_last_status();
    char *scaler = s == TDM_OK && sc ? scaler_json(sc) : NULL;
    if (s == TDM_OK && sc && !scaler) s = tdm_last_status();
    const char *meta[] = {"format", "tandem-optimizer/1", "optimizer",
                          o->kind == OPT_SGD ? "sgd" : o->adam.decoupled_weight_decay ? "adamw" : "adam",
                          "lr", lr, "params", count, "param_groups", groups, "grad_scaler", scaler};
    if (s == TDM_OK) s = tdm_safetensors_save(path, n, np, tp, sc ? 6 : 5, meta);
    free(groups);
    free(scaler);
    for (int i = 0; steps && i < o->n; i++) tdm_tensor_free(steps[i]);
    free(names);
    free(np);
    free(tp);
    free(steps);
    return s;
}

tdm_status tdm_optimizer_save(const tdm_optimizer *o, const char *path) {
    return optimizer_save(o, NULL, path);
}

// The optimizer's state from the open file st (path names it in errors).
static tdm_status optimizer_load(tdm_optimizer *o, const tdm_safetensors *st, const char *path) {
    const char *fmt = tdm_safetensors_metadata(st, "format");
    const char *kind = tdm_safetensors_metadata(st, "optimizer");
    const char *want = o->kind == OPT_SGD ? "sgd" : o->adam.decoupled_weight_decay ? "adamw" : "adam";
    const char *count = tdm_safetensors_metadata(st, "params");
    tdm_status s = TDM_OK;
    int64_t params = -1;
    if (count && !tdm_parse_i64(count, 0, INT_MAX, &params)) params = -1;   // "2abc" is not 2
    if (!fmt || strcmp(fmt, "tandem-optimizer/1") || !kind || strcmp(kind, want) || params != o->n)
        s = tdm_error_set(TDM_ERR_FORMAT, "%s: not the state of a %s optimizer over %d parameters",
                          path, want, o->n);
    // Read everything first; replace the state only when all of it checked out.
    tdm_tensor **nb = calloc((size_t)(4 * o->n + 1), sizeof *nb);   // buf, buf2, buf3, master
    int64_t *nstep = calloc((size_t)(o->n + 1), sizeof *nstep);
    double *glr = calloc((size_t)o->n_groups, sizeof *glr);
    double *gwd = calloc((size_t)o->n_groups, sizeof *gwd);
    if (s == TDM_OK && (!nb || !nstep || !glr || !gwd))
        s = tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
    const char *groups = tdm_safetensors_metadata(st, "param_groups");   // absent: an older file
    if (s == TDM_OK && groups) s = groups_parse(o, path, groups, glr, gwd);
    for (int i = 0; s == TDM_OK && i < o->n; i++) {
        const tdm_tensor *p = o->slots[i].param;
        const char *keys[4] = {o->kind == OPT_SGD ? "momentum_buffer" : "exp_avg", "exp_avg_sq",
                               "max_exp_avg_sq", "master_param"};
        const int nk = o->kind == OPT_SGD ? 1 : o->adam.amsgrad ? 3 : 2;
        const bool mw = has_master(o, p);
        const tdm_dtype sdt = mw ? TDM_DTYPE_F32 : p->dtype;   // the state's dtype here
        for (int k = 0; k < 4 && s == TDM_OK; k++) {
            if (k >= nk && !(k == 3 && mw)) continue;
            char name[48];
            snprintf(name, sizeof name, "state.%d.%s", i, keys[k]);
            if (!tdm_safetensors_has(st, name)) continue;
            tdm_tensor *t = tdm_safetensors_get(st, name, TDM_CPU);
            if (!t) {
                s = tdm_last_status();
                break;
            }
            bool same = t->ndim == p->ndim;   // every dim, as module loading checks them
            for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == p->shape[d];
            if (!same) {
                char a[96], b[96];
                s = tdm_error_set(TDM_ERR_SHAPE, "%s: %s has shape %s, parameter %d has %s", path,
                                  name, tdm_shape_str(t->ndim, t->shape, a, sizeof a), i,
                                  tdm_shape_str(p->ndim, p->shape, b, sizeof b));
                tdm_tensor_free(t);
                break;
            }
            nb[4 * i + k] = tdm_tensor_to(t, p->device, sdt);
            tdm_tensor_free(t);
            if (!nb[4 * i + k]) s = tdm_last_status();
        }
        if (s == TDM_OK && o->kind == OPT_ADAM && (!nb[4 * i] != !nb[4 * i + 1] ||
                                                  (nk == 3 && !nb[4 * i] != !nb[4 * i + 2])))
            s = tdm_error_set(TDM_ERR_FORMAT, "%s: parameter %d's state is incomplete (Adam%s "
                              "needs exp_avg, exp_avg_sq%s together)", path, i,
                              nk == 3 ? " with amsgrad" : "", nk == 3 ? " and max_exp_avg_sq" : "");
        if (s == TDM_OK && mw && !nb[4 * i] && nb[4 * i + 3])
            s = tdm_error_set(TDM_ERR_FORMAT, "%s: parameter %d has master_param without exp_avg",
                              path, i);
        if (s == TDM_OK && mw && nb[4 * i] && !nb[4 * i + 3]) {   // saved without master weights
            nb[4 * i + 3] = tdm_tensor_to(p, p->device, TDM_DTYPE_F32);
            if (!nb[4 * i + 3]) s = tdm_last_status();
        }
        char name[48];
        snprintf(name, sizeof name, "state.%d.step", i);
        if (s == TDM_OK && o->kind == OPT_ADAM && tdm_safetensors_has(st, name)) {
            // PyTorch keeps step as a float tensor: a count is a whole number from 0 to 2^53
            // (every integer up to there is exact in a double); NaN, infinities, fractions and
            // larger values are refused before the conversion to int64 (undefined for them).
            tdm_tensor *t = tdm_safetensors_get(st, name, TDM_CPU);
            double v = 0;
            if (!t) {
                s = tdm_last_status();
            } else if (t->numel != 1 || tdm_tensor_to_host_f64(t, &v) != TDM_OK) {
                s = tdm_error_set(TDM_ERR_FORMAT, "%s: %s is not one number", path, name);
            } else if (!(v >= 0 && v <= 0x1p53) || v != floor(v)) {
                s = tdm_error_set(TDM_ERR_FORMAT, "%s: %s is %.17g, not a step count (a whole "
                                  "number from 0 to 2^53)", path, name, v);
            } else {
                nstep[i] = (int64_t)v;
            }
            tdm_tensor_free(t);
        }
    }
    for (int k = 0; s == TDM_OK && groups && k < o->n_groups; k++) {
        o->groups[k].lr = glr[k];
        o->groups[k].weight_decay = gwd[k];
    }
    for (int i = 0; nb && i < o->n; i++) {
        opt_slot *sl = &o->slots[i];
        if (s == TDM_OK) {
            tdm_tensor_free(sl->buf);
            tdm_tensor_free(sl->buf2);
            tdm_tensor_free(sl->buf3);
            tdm_tensor_free(sl->master);
            sl->buf = nb[4 * i];
            sl->buf2 = nb[4 * i + 1];
            sl->buf3 = nb[4 * i + 2];
            sl->master = nb[4 * i + 3];
            sl->step = o->kind == OPT_SGD ? (sl->buf != NULL) : nstep[i];
            sl->fresh = false;
        } else {
            for (int k = 0; k < 4; k++) tdm_tensor_free(nb[4 * i + k]);
        }
    }
    free(nb);
    free(nstep);
    free(glr);
    free(gwd);
    return s;
}

tdm_status tdm_optimizer_load(tdm_optimizer *o, const char *path) {
    tdm_safetensors *st = tdm_safetensors_open(path);
    if (!st) return tdm_last_status();
    tdm_status s = optimizer_load(o, st, path);
    tdm_safetensors_close(st);
    return s;
}

// ---- gradient scaler ---------------------------------------------------------------------------

struct tdm_grad_scaler {
    tdm_grad_scaler_params p;
    double scale;
    int growth_tracker;   // clean steps in a row
    bool found_inf;       // in the step being taken
    const tdm_optimizer *unscaled;   // unscale_ ran for it since the last update (its step won't)
};

tdm_grad_scaler_params tdm_grad_scaler_defaults(void) {
    return (tdm_grad_scaler_params){.init_scale = 65536.0, .growth_factor = 2.0,
                                    .backoff_factor = 0.5, .growth_interval = 2000, .enabled = true};
}

tdm_grad_scaler *tdm_grad_scaler_new(const tdm_grad_scaler_params *p) {
    if (!p || p->init_scale <= 0 || p->growth_factor <= 1 || p->backoff_factor <= 0 ||
        p->backoff_factor >= 1 || p->growth_interval < 1) {
        tdm_error_set(TDM_ERR_ARG, "grad_scaler: invalid parameters (init_scale > 0, "
                                   "growth_factor > 1, backoff_factor in (0,1), interval >= 1)");
        return NULL;
    }
    tdm_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) {
        tdm_error_set(TDM_ERR_OOM, "grad_scaler: out of memory");
        return NULL;
    }
    s->p = *p;
    s->scale = p->init_scale;
    return s;
}

void tdm_grad_scaler_free(tdm_grad_scaler *s) { free(s); }

double tdm_grad_scaler_get_scale(const tdm_grad_scaler *s) { return s->p.enabled ? s->scale : 1.0; }

// PyTorch's GradScaler.state_dict() as JSON: the scale, the factors, the interval and the clean
// steps in a row (_growth_tracker).
static char *scaler_json(const tdm_grad_scaler *sc) {
    char *j = malloc(256);
    if (!j) {
        tdm_error_set(TDM_ERR_OOM, "optimizer_save: out of memory");
        return NULL;
    }
    snprintf(j, 256, "{\"scale\":%.17g,\"growth_factor\":%.17g,\"backoff_factor\":%.17g,"
             "\"growth_interval\":%d,\"_growth_tracker\":%d}", sc->scale, sc->p.growth_factor,
             sc->p.backoff_factor, sc->p.growth_interval, sc->growth_tracker);
    return j;
}

// A file's grad_scaler state checked as tdm_grad_scaler_new checks its parameters, the tracker a
// whole number in [0, growth_interval): into *out (params and scale, growth_tracker).
static tdm_status scaler_parse(const char *path, const char *text, tdm_grad_scaler *out) {
    cJSON *root = cJSON_Parse(text);
    const char *keys[5] = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                           "_growth_tracker"};
    double v[5];
    tdm_status s = cJSON_IsObject(root) ? TDM_OK
                   : tdm_error_set(TDM_ERR_FORMAT, "%s: grad_scaler is not a JSON object", path);
    for (int k = 0; s == TDM_OK && k < 5; k++) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, keys[k]);
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
            s = tdm_error_set(TDM_ERR_FORMAT, "%s: grad_scaler.%s is not a finite number", path,
                              keys[k]);
        else
            v[k] = e->valuedouble;
    }
    if (s == TDM_OK && (!(v[0] > 0) || !(v[1] > 1) || !(v[2] > 0 && v[2] < 1) ||
                        v[3] != floor(v[3]) || !(v[3] >= 1 && v[3] <= INT_MAX) ||
                        v[4] != floor(v[4]) || !(v[4] >= 0 && v[4] < v[3])))
        s = tdm_error_set(TDM_ERR_FORMAT, "%s: grad_scaler holds no valid state (scale > 0, "
                          "growth_factor > 1, backoff_factor in (0,1), growth_interval a whole "
                          "number >= 1, _growth_tracker a whole number in [0, growth_interval))",
                          path);
    if (s == TDM_OK) {
        out->scale = v[0];
        out->p.growth_factor = v[1];
        out->p.backoff_factor = v[2];
        out->p.growth_interval = (int)v[3];
        out->growth_tracker = (int)v[4];
    }
    cJSON_Delete(root);
    return s;
}

tdm_status tdm_optimizer_save_with_scaler(const tdm_optimizer *o, const tdm_grad_scaler *sc,
                                          const char *path) {
    if (!sc) return tdm_error_set(TDM_ERR_ARG, "optimizer_save_with_scaler: no scaler");
    return optimizer_save(o, sc, path);
}

tdm_status tdm_optimizer_load_with_scaler(tdm_optimizer *o, tdm_grad_scaler *sc, const char *path) {
    if (!sc) return tdm_error_set(TDM_ERR_ARG, "optimizer_load_with_scaler: no scaler");
    tdm_safetensors *st = tdm_safetensors_open(path);
    if (!st) return tdm_last_status();
    const char *text = tdm_safetensors_metadata(st, "grad_scaler");
    tdm_grad_scaler next = *sc;
    tdm_status s = text ? scaler_parse(path, text, &next)
                        : tdm_error_set(TDM_ERR_FORMAT, "%s: holds no gradient scaler state "
                                        "(grad_scaler; written by tdm_optimizer_save, not "
                                        "tdm_optimizer_save_with_scaler)", path);
    if (s == TDM_OK) s = optimizer_load(o, st, path);   // the scaler changes only when all loaded
    tdm_safetensors_close(st);
    if (s == TDM_OK) {
        next.found_inf = false;
        next.unscaled = NULL;
        *sc = next;
    }
    return s;
}

tdm_tensor *tdm_grad_scaler_scale(tdm_grad_scaler *s, const tdm_tensor *loss) {
    if (tdm_check_tensor("grad_scaler.scale", "loss", loss) != TDM_OK) return NULL;
    double v = s->p.enabled ? s->scale : 1.0;
    tdm_tensor *f = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F64, TDM_CPU, &v);
    tdm_tensor *k = f ? tdm_tensor_to(f, loss->device, loss->dtype) : NULL;
    tdm_tensor *out = k ? tdm_mul(loss, k) : NULL;
    tdm_tensor_free(f);
    tdm_tensor_free(k);
    return out;
}

// Through the backend's amp_unscale_check when every gradient is on one device whose backend has
// it: in place, the verdict in a device flag read once. *done = false: not applicable.
static tdm_status unscale_fused(tdm_grad_scaler *s, tdm_optimizer *o, float inv, bool *done) {
    *done = false;
    tdm_tensor **gs = malloc((size_t)(o->n ? o->n : 1) * sizeof *gs);
    if (!gs) return tdm_error_set(TDM_ERR_OOM, "grad_scaler: out of memory");
    int n = 0;
    bool one_device = true;
    for (int i = 0; i < o->n; i++) {
        tdm_tensor *g = tdm_tensor_grad(o->slots[i].param);
        if (!g) continue;
        if (n && (g->device.type != gs[0]->device.type || g->device.index != gs[0]->device.index))
            one_device = false;
        gs[n++] = g;
    }
    const struct tdm_backend_ops *be = n ? tdm_backend_of(gs[0]) : NULL;
    tdm_status st = TDM_OK;
    if (n && one_device && be->amp_unscale_check) {
        int64_t one = 1;
        tdm_tensor *flag = tdm_tensor_zeros(1, &one, TDM_DTYPE_F32, gs[0]->device);
        double v = 0;
        st = flag ? be->amp_unscale_check(gs, n, (double)inv, flag) : tdm_last_status();
        if (st == TDM_OK) st = tdm_tensor_to_host_f64(flag, &v);   // the step's one host read
        if (st == TDM_OK) s->found_inf = v != 0;
        tdm_tensor_free(flag);
        *done = true;
    } else if (!n) {
        *done = true;
    }
    free(gs);
    return st;
}

// grad *= 1/scale (the reciprocal rounded to f32, as PyTorch does); any non-finite -> found_inf.
// With the backend's amp_unscale_check (cpu and cuda) in place and one host read per step;
// otherwise by tdm_mul and reading every gradient back.
static tdm_status unscale(tdm_grad_scaler *s, tdm_optimizer *o) {
    float inv = (float)(1.0 / s->scale);
    s->found_inf = false;
    bool done;
    TDM_TRY(unscale_fused(s, o, inv, &done));
    if (done) return TDM_OK;
    bool prev = tdm_grad_set_enabled(false);
    tdm_status st = TDM_OK;
    for (int i = 0; i < o->n && st == TDM_OK; i++) {
        tdm_tensor *g = tdm_tensor_grad(o->slots[i].param);
        if (!g) continue;
        tdm_tensor *f = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, TDM_CPU, &inv);
        tdm_tensor *k = f ? tdm_tensor_to(f, g->device, g->dtype) : NULL;
        tdm_tensor *u = k ? tdm_mul(g, k) : NULL;
        double *v = u ? malloc((size_t)(u->numel ? u->numel : 1) * sizeof *v) : NULL;
        if (!u || !v || tdm_tensor_to_host_f64(u, v) != TDM_OK) {
            st = v || !u ? tdm_last_status() : tdm_error_set(TDM_ERR_OOM, "grad_scaler: out of memory");
        } else {
            for (int64_t j = 0; j < u->numel && !s->found_inf; j++) s->found_inf = !isfinite(v[j]);
            st = tdm_tensor_set_grad(o->slots[i].param, u);
        }
        free(v);
        tdm_tensor_free(u);
        tdm_tensor_free(k);
        tdm_tensor_free(f);
    }
    tdm_grad_set_enabled(prev);
    return st;
}

static tdm_status refuse_capture(const tdm_optimizer *o, const char *op) {
    for (int i = 0; i < o->n; i++)   // found_inf is read on the host to decide: not capturable
        if (tdm_graph_is_capturing(o->slots[i].param->device))
            return tdm_error_set(TDM_ERR_UNSUPPORTED,
                                 "%s: cannot be captured in a CUDA graph: it reads found_inf on "
                                 "the host to decide whether to step", op);
    return TDM_OK;
}

tdm_status tdm_grad_scaler_unscale_(tdm_grad_scaler *s, tdm_optimizer *o) {
    if (!s->p.enabled) return TDM_OK;
    if (s->unscaled == o)
        return tdm_error_set(TDM_ERR_ARG, "grad_scaler_unscale_: already called on this optimizer "
                             "since the last update");
    TDM_TRY(refuse_capture(o, "grad_scaler_unscale_"));
    TDM_TRY(unscale(s, o));
    s->unscaled = o;
    return TDM_OK;
}

tdm_status tdm_grad_scaler_step(tdm_grad_scaler *s, tdm_optimizer *o, bool *skipped) {
    if (skipped) *skipped = false;
    if (!s->p.enabled) return tdm_optimizer_step(o);
    TDM_TRY(refuse_capture(o, "grad_scaler_step"));
    if (s->unscaled != o) TDM_TRY(unscale(s, o));   // else unscale_ did, and found_inf is its
    if (skipped) *skipped = s->found_inf;
    return s->found_inf ? TDM_OK : tdm_optimizer_step(o);
}

void tdm_grad_scaler_update(tdm_grad_scaler *s) {
    s->unscaled = NULL;
    if (!s->p.enabled) return;
    if (s->found_inf) {
        s->scale *= s->p.backoff_factor;
        s->growth_tracker = 0;
    } else if (++s->growth_tracker == s->p.growth_interval) {
        s->scale *= s->p.growth_factor;
        s->growth_tracker = 0;
    }
    s->found_inf = false;
}

// ---- learning-rate schedule (nanoGPT's get_lr; optim.h gives the formula) ---------------------

double tdm_lr_cosine_at(const tdm_lr_cosine *s, int64_t step) {
    if (!s || !(s->max_lr >= 0) || !(s->min_lr >= 0) || isinf(s->max_lr) || isinf(s->min_lr) ||
        s->warmup_steps < 0 || s->decay_steps < s->warmup_steps || step < 0) {
        tdm_error_set(TDM_ERR_ARG, "lr_cosine: invalid schedule or step (lrs finite and >= 0, "
                      "0 <= warmup_steps <= decay_steps, step >= 0)");
        return NAN;
    }
    // as Python evaluates max_lr * (it + 1) / (warmup + 1), its integers unbounded: + 1 in
    // double (warmup_steps + 1 overflowed int64 at INT64_MAX: a negative lr)
    if (step < s->warmup_steps)
        return s->max_lr * ((double)step + 1.0) / ((double)s->warmup_steps + 1.0);
    if (step >= s->decay_steps) return s->min_lr;   // nanoGPT: exactly this at it == decay too
    const double ratio =
        (double)(step - s->warmup_steps) / (double)(s->decay_steps - s->warmup_steps);
    const double pi = 3.141592653589793;   // math.pi
    const double coeff = 0.5 * (1.0 + cos(pi * ratio));
    return s->min_lr + coeff * (s->max_lr - s->min_lr);
}
