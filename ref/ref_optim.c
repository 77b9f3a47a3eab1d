/* ref_optim.c — reference optimizer updates, in place, in double: torch.optim's single-tensor
 * SGD and Adam/AdamW (foreach=False), with maximize and amsgrad, and Adam over a list of tensors
 * (fused=True: the same update per tensor; f32 master weights); the grad scaler's unscale; and
 * gradient-norm clipping (torch.nn.utils.clip_grad_norm_'s norm and scale). */
#include <math.h>

#include "ref/ref.h"

// param, grad, buf (all the same shape; buf NULL when momentum == 0):
// d = (maximize ? -grad : grad) + wd * param;  with momentum: buf = initialized ? momentum * buf
// + (1 - dampening) * d : d;  d = nesterov ? d + momentum * buf : buf;  param -= lr * d.
tdm_status ref_sgd_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                        bool buf_initialized, const tdm_sgd_params *p) {
    int64_t n = param->numel;
    ref_arena A = {0};
    const double *P = ref_in(&A, param), *G = ref_in(&A, grad), *B = ref_in(&A, buf);
    double *NP = ref_new(&A, n), *NB = ref_new(&A, n);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < n; i++) {
        double d = p->maximize ? -G[i] : G[i];
        if (p->weight_decay != 0) d += p->weight_decay * P[i];
        if (p->momentum != 0) {
            NB[i] = buf_initialized ? p->momentum * B[i] + (1 - p->dampening) * d : d;
            d = p->nesterov ? d + p->momentum * NB[i] : NB[i];
        }
        NP[i] = P[i] - p->lr * d;
    }
    ref_store(&A, param, NP);
    if (p->momentum != 0) ref_store(&A, buf, NB);
    return ref_finish(&A);
}

// param, grad, m (exp_avg), v (exp_avg_sq), vmax (max_exp_avg_sq; NULL unless amsgrad), all the
// same shape; step >= 1.  x = param, or with a master (f32 master weights of an f16/bf16 param;
// m, v, vmax f32 then) x = master.  g = maximize ? -grad : grad.
// AdamW: x *= 1 - lr * wd.  Adam: g += wd * x.  Then
// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  amsgrad: vmax = max(vmax, v) (torch.maximum: NaN
// wins), used for v below;
// x -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps).
// The new x goes to the master (rounded to f32) and param = that f32 value rounded to param's
// dtype (nearest even: one rounding from f32, as the kernel's); without a master, to param.
static tdm_status adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m,
                            tdm_tensor *v, tdm_tensor *vmax, tdm_tensor *master, int64_t step,
                            const tdm_adam_params *p) {
    int64_t n = param->numel;
    ref_arena A = {0};
    const double *P = ref_in(&A, master ? master : param), *G = ref_in(&A, grad);
    const double *M = ref_in(&A, m), *V = ref_in(&A, v), *VM = ref_in(&A, vmax);
    double *NP = ref_new(&A, n), *NM = ref_new(&A, n), *NV = ref_new(&A, n);
    double *NVM = vmax ? ref_new(&A, n) : NULL;
    if (A.failed) return ref_finish(&A);
    double bc1 = 1 - pow(p->beta1, (double)step), bc2 = 1 - pow(p->beta2, (double)step);
    double step_size = p->lr / bc1, bc2_sqrt = sqrt(bc2);
    for (int64_t i = 0; i < n; i++) {
        double x = P[i], g = p->maximize ? -G[i] : G[i];
        if (p->decoupled_weight_decay)
            x *= 1 - p->lr * p->weight_decay;
        else if (p->weight_decay != 0)
            g += p->weight_decay * x;
        NM[i] = p->beta1 * M[i] + (1 - p->beta1) * g;
        NV[i] = p->beta2 * V[i] + (1 - p->beta2) * g * g;
        double den = NV[i];
        if (vmax) den = NVM[i] = NV[i] > VM[i] || isnan(NV[i]) ? NV[i] : VM[i];   // NaN wins
        NP[i] = x - step_size * NM[i] / (sqrt(den) / bc2_sqrt + p->eps);
        if (master) NP[i] = (float)NP[i];   // the master's f32 value, which param rounds
    }
    ref_store(&A, param, NP);
    if (master) ref_store(&A, master, NP);
    ref_store(&A, m, NM);
    ref_store(&A, v, NV);
    if (vmax) ref_store(&A, vmax, NVM);
    return ref_finish(&A);
}

tdm_status ref_adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m, tdm_tensor *v,
                         tdm_tensor *vmax, int64_t step, const tdm_adam_params *p) {
    return adam_step(param, grad, m, v, vmax, NULL, step, p);
}

// backend.h's adam_step_multi: the items one after another, each as ref_adam_step with its own
// step, lr and weight decay (the cpu has no graphs: coef is never given).
tdm_status ref_adam_step_multi(const tdm_adam_item *items, int n, const tdm_adam_params *p,
                               const double *coef) {
    if (coef) return tdm_error_set(TDM_ERR_UNSUPPORTED, "adam_step_multi: the cpu reads no coef");
    for (int i = 0; i < n; i++) {
        const tdm_adam_item *it = &items[i];
        tdm_adam_params q = *p;
        q.lr = it->lr;
        q.weight_decay = it->weight_decay;
        TDM_TRY(adam_step(it->param, it->grad, it->m, it->v, it->vmax, it->master, it->step, &q));
    }
    return TDM_OK;
}

// v rounded to dtype dt (as a stored element of that dtype reads back).
static double round_to(tdm_dtype dt, double v) {
    switch (dt) {
    case TDM_DTYPE_F32: return (float)v;
    case TDM_DTYPE_F16: return tdm_f16_to_f32(tdm_f64_to_f16(v));
    case TDM_DTYPE_BF16: return tdm_bf16_to_f32(tdm_f64_to_bf16(v));
    default: return v;
    }
}

// The grad scaler's unscale (backend.h's amp_unscale_check): g = g * k with k = inv_scale
// rounded to g's dtype, the product rounded once; found_inf (f32, 1 element) = 1 when a stored
// result is not finite.
tdm_status ref_amp_unscale_check(tdm_tensor *const *grads, int n, double inv_scale,
                                 tdm_tensor *found_inf) {
    bool bad = false;
    for (int j = 0; j < n; j++) {
        tdm_tensor *g = grads[j];
        if (!g) continue;
        ref_arena A = {0};
        const double *G = ref_in(&A, g);
        double *V = ref_new(&A, g->numel);
        if (A.failed) return ref_finish(&A);
        const double k = round_to(g->dtype, inv_scale);
        for (int64_t i = 0; i < g->numel; i++) {
            V[i] = G[i] * k;
            bad = bad || !isfinite(round_to(g->dtype, V[i]));
        }
        ref_store(&A, g, V);
        ref_finish(&A);
    }
    if (bad) ((float *)tdm_data(found_inf))[0] = 1.0f;
    return TDM_OK;
}

// ---- gradient clipping ----------------------------------------------------------------------
// total (0-d f32) = (sum over every element x of every ts[j] of |x|^p)^(1/p), or max |x| for
// p = INFINITY (NaN wins, as torch.max), in double, rounded once.
tdm_status ref_grad_norm(const tdm_tensor *const *ts, int n, double norm_type, tdm_tensor *total) {
    const bool inf = isinf(norm_type);
    double acc = 0;
    for (int j = 0; j < n; j++) {
        ref_arena A = {0};
        const double *X = ref_in(&A, ts[j]);
        if (A.failed) return ref_finish(&A);
        for (int64_t i = 0; i < ts[j]->numel; i++) {
            const double a = fabs(X[i]);
            if (inf) acc = a > acc || isnan(a) ? a : acc;
            else acc += norm_type == 2 ? a * a : norm_type == 1 ? a : pow(a, norm_type);
        }
        ref_finish(&A);
    }
    double t = inf || norm_type == 1 ? acc : norm_type == 2 ? sqrt(acc) : pow(acc, 1 / norm_type);
    ((float *)tdm_data(total))[0] = (float)t;
    return TDM_OK;
}

// Each ts[j] *= c, c = min(max_norm / (total + 1e-6), 1) from the f32 total (a NaN total gives a
// NaN c: `c > 1 ? 1 : c` keeps it), the product rounded once to ts[j]'s dtype.
tdm_status ref_grad_clip_scale(tdm_tensor *const *ts, int n, double max_norm,
                               const tdm_tensor *total) {
    double c = max_norm / ((double)((const float *)tdm_data_c(total))[0] + 1e-6);
    c = c > 1 ? 1 : c;
    for (int j = 0; j < n; j++) {
        ref_arena A = {0};
        const double *X = ref_in(&A, ts[j]);
        double *Y = ref_new(&A, ts[j]->numel);
        if (A.failed) return ref_finish(&A);
        for (int64_t i = 0; i < ts[j]->numel; i++) Y[i] = X[i] * c;
        ref_store(&A, ts[j], Y);
        ref_finish(&A);
    }
    return TDM_OK;
}
