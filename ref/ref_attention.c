/* ref_attention.c — the reference's F.scaled_dot_product_attention (core/backend.h's sdpa slots),
 * forward and backward, in double with plain loops. Per row (b, i) of the attention weights:
 *
 *     s_j  = scale <q_i, k_j> + mask_ij          (a false bool mask or causal j > i: -inf)
 *     p_j  = softmax_j(s)                          (a row of -inf only: zeros, _safe_softmax)
 *     p'_j = p_j keep_j / (1 - dropout_p)          (keep from the Philox stream, CASE_FORMAT.md)
 *     y_i  = sum_j p'_j v_j
 *
 * and backward, from gy: dp'_j = <gy_i, v_j>, dp_j = dp'_j keep_j / (1 - dropout_p),
 * ds_j = p_j (dp_j - sum_l p_l dp_l) (the mask's gradient), gq_i = scale sum_j ds_j k_j,
 * gk_j += scale ds_j q_i, gv_j += p'_j gy_i. The weights are recomputed, not saved. */
#include <math.h>

#include "core/philox.h"
#include "ref/ref.h"

typedef struct {
    int64_t B, L, S, E, Ev;
    const double *q, *k, *v;   // (B,L,E), (B,S,E), (B,S,Ev)
    const tdm_tensor *mask;    // a strided view (backend.h), or NULL
    const tdm_sdpa_params *p;
    double *kf;                // (S): keep_j / (1 - dropout_p), or 1 without dropout
} sdpa_ctx;

// The mask's additive term for (b, i, j): 0 or -inf for a bool mask, the value for a floating
// one. The view's batch dims take b apart (row-major); broadcast dims have stride 0.
static double mask_at(const tdm_tensor *m, int64_t b, int64_t i, int64_t j) {
    const int nd = m->ndim;
    int64_t off = i * m->stride[nd - 2] + j * m->stride[nd - 1];
    for (int d = nd - 3; d >= 0; d--) {
        off += (b % m->shape[d]) * m->stride[d];
        b /= m->shape[d];
    }
    const void *p = tdm_data_c(m);
    switch (m->dtype) {
    case TDM_DTYPE_BOOL: return ((const uint8_t *)p)[off] ? 0.0 : -INFINITY;
    case TDM_DTYPE_F32: return ((const float *)p)[off];
    case TDM_DTYPE_F16: return tdm_f16_to_f32(((const uint16_t *)p)[off]);
    case TDM_DTYPE_BF16: return tdm_bf16_to_f32(((const uint16_t *)p)[off]);
    default: return ((const double *)p)[off];
    }
}

// Row (b, i): the weights before (pr) and after dropout (pd), S of each; c->kf the factors.
static void row_weights(const sdpa_ctx *c, int64_t b, int64_t i, double *pr, double *pd) {
    const double *qi = c->q + (b * c->L + i) * c->E;
    double m = -INFINITY;
    for (int64_t j = 0; j < c->S; j++) {
        const double *kj = c->k + (b * c->S + j) * c->E;
        double dot = 0;
        for (int64_t e = 0; e < c->E; e++) dot += qi[e] * kj[e];
        double s = c->p->scale * dot;
        if (c->mask) s += mask_at(c->mask, b, i, j);
        if (c->p->is_causal && j > i) s = -INFINITY;
        pr[j] = s;
        if (s > m || isnan(s)) m = s;   // NaN wins, as softmax's
    }
    double sum = 0;
    for (int64_t j = 0; j < c->S; j++) {
        pr[j] = m == -INFINITY ? 0.0 : exp(pr[j] - m);   // all -inf: a row of zeros
        sum += pr[j];
    }
    const uint32_t threshold = tdm_dropout_threshold(c->p->dropout_p);
    const double scale = c->p->dropout_p < 1.0 ? 1.0 / (1.0 - c->p->dropout_p) : 0.0;
    for (int64_t j = 0; j < c->S; j++) {
        if (m != -INFINITY) pr[j] /= sum;
        c->kf[j] = 1.0;
        if (c->p->dropout_p > 0) {
            uint64_t at = (uint64_t)((b * c->L + i) * c->S + j);
            bool keep = (tdm_philox_bits(c->p->seed, c->p->offset, at) >> 8) < threshold;
            c->kf[j] = keep ? scale : 0.0;
        }
        pd[j] = pr[j] * c->kf[j];
    }
}

static sdpa_ctx ctx_of(ref_arena *A, const tdm_tensor *q, const tdm_tensor *k,
                       const tdm_tensor *v, const tdm_tensor *mask, const tdm_sdpa_params *p) {
    sdpa_ctx c = {q->shape[0], q->shape[1], k->shape[1], q->shape[2], v->shape[2],
                  ref_in(A, q), ref_in(A, k), ref_in(A, v), mask, p, NULL};
    c.kf = ref_new(A, c.S);
    return c;
}

// q (B,L,E), k (B,S,E), v (B,S,Ev) -> y (B,L,Ev)
tdm_status ref_sdpa(const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
                    const tdm_tensor *mask, const tdm_sdpa_params *p, tdm_tensor *y) {
    ref_arena A = {0};
    sdpa_ctx c = ctx_of(&A, q, k, v, mask, p);
    double *pr = ref_new(&A, c.S), *pd = ref_new(&A, c.S), *Y = ref_new(&A, y->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t i = 0; i < c.L; i++) {
            row_weights(&c, b, i, pr, pd);
            double *yi = Y + (b * c.L + i) * c.Ev;
            for (int64_t j = 0; j < c.S; j++)
                for (int64_t e = 0; e < c.Ev; e++) yi[e] += pd[j] * c.v[(b * c.S + j) * c.Ev + e];
        }
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// gy (B,L,Ev) -> gq (B,L,E), gk (B,S,E), gv (B,S,Ev), gmask (B,L,S); each may be NULL
tdm_status ref_sdpa_backward(const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k,
                             const tdm_tensor *v, const tdm_tensor *mask,
                             const tdm_sdpa_params *p, tdm_tensor *gq, tdm_tensor *gk,
                             tdm_tensor *gv, tdm_tensor *gmask) {
    ref_arena A = {0};
    sdpa_ctx c = ctx_of(&A, q, k, v, mask, p);
    const double *GY = ref_in(&A, gy);
    double *pr = ref_new(&A, c.S), *pd = ref_new(&A, c.S), *ds = ref_new(&A, c.S);
    double *GQ = ref_new(&A, q->numel), *GK = ref_new(&A, k->numel), *GV = ref_new(&A, v->numel);
    double *GM = ref_new(&A, gmask ? gmask->numel : 1);
    if (A.failed) return ref_finish(&A);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t i = 0; i < c.L; i++) {
            row_weights(&c, b, i, pr, pd);
            const double *gyi = GY + (b * c.L + i) * c.Ev, *qi = c.q + (b * c.L + i) * c.E;
            double D = 0;   // sum_j p_j dp_j
            for (int64_t j = 0; j < c.S; j++) {
                const double *vj = c.v + (b * c.S + j) * c.Ev;
                double dpd = 0;   // dp'_j
                for (int64_t e = 0; e < c.Ev; e++) dpd += gyi[e] * vj[e];
                ds[j] = dpd * c.kf[j];   // dp_j
                D += pr[j] * ds[j];
            }
            for (int64_t j = 0; j < c.S; j++) {
                ds[j] = pr[j] * (ds[j] - D);
                if (gmask) GM[(b * c.L + i) * c.S + j] = ds[j];
                const double *kj = c.k + (b * c.S + j) * c.E;
                double *gqi = GQ + (b * c.L + i) * c.E, *gkj = GK + (b * c.S + j) * c.E;
                for (int64_t e = 0; e < c.E; e++) {
                    gqi[e] += p->scale * ds[j] * kj[e];
                    gkj[e] += p->scale * ds[j] * qi[e];
                }
                double *gvj = GV + (b * c.S + j) * c.Ev;
                for (int64_t e = 0; e < c.Ev; e++) gvj[e] += pd[j] * gyi[e];
            }
        }
    ref_store(&A, gq, GQ);
    ref_store(&A, gk, GK);
    ref_store(&A, gv, GV);
    ref_store(&A, gmask, GM);
    return ref_finish(&A);
}
