/* ref_loss.c — the reference losses: cross_entropy over class indices (label smoothing,
 * ignore_index) or class probabilities, with per-class weights, and mse_loss, forward and
 * backward. Math in double, one rounding on store. */
#include <math.h>

#include "ref/ref.h"

// ---- cross_entropy ----------------------------------------------------------------------------

// Checks target t_i of row i: ignored, or a class in [0, C). The targets live on the device, so
// the backend is where they can be checked.
static tdm_status ce_target(const tdm_tensor *target, int64_t i, int64_t C, int64_t ignore_index,
                            int64_t *t) {
    *t = ref_index(target, i);
    if (*t == ignore_index || (*t >= 0 && *t < C)) return TDM_OK;
    return tdm_error_set(TDM_ERR_ARG, "cross_entropy: target %lld out of bounds for %lld classes",
                         (long long)*t, (long long)C);
}

// logp[c] = x[c] - m - log(sum_c exp(x[c] - m)), m = max_c x[c]: one row of log_softmax.
static void log_softmax_row(const double *x, int64_t C, double *logp) {
    double m = -INFINITY;
    for (int64_t c = 0; c < C; c++)
        if (x[c] > m || isnan(x[c])) m = x[c];
    double s = 0.0;
    for (int64_t c = 0; c < C; c++) s += exp(x[c] - m);
    for (int64_t c = 0; c < C; c++) logp[c] = (x[c] - m) - log(s);
}

// What a cross_entropy call reads: logits X (R,C), and per row either a class index or a row of
// probabilities Q; weights W (C) or NULL (all 1).
typedef struct {
    int64_t R, C;
    const double *X, *Q, *W;
    const tdm_tensor *target;   // class indices (when Q is NULL)
    double eps;
    int64_t ignore_index;
} ce_in;

static double ce_w(const ce_in *in, int64_t c) { return in->W ? in->W[c] : 1.0; }

// Row r's target distribution tau (C), its share of the mean's divisor (w_t, or 1 for a row of
// probabilities; 0 for an ignored row, whose tau is 0) and whether it is ignored:
//   class t:        tau_c = (1-eps) w_t [c == t] + eps/C w_c
//   probabilities:  tau_c = w_c ((1-eps) q_c + eps/C)
static tdm_status ce_tau(const ce_in *in, int64_t r, double *tau, double *divisor,
                         bool *ignored) {
    const int64_t C = in->C;
    if (in->Q) {
        for (int64_t c = 0; c < C; c++)
            tau[c] = ce_w(in, c) * ((1.0 - in->eps) * in->Q[r * C + c] + in->eps / (double)C);
        *divisor = 1.0;
        *ignored = false;
        return TDM_OK;
    }
    int64_t t;
    TDM_TRY(ce_target(in->target, r, C, in->ignore_index, &t));
    *ignored = t == in->ignore_index;
    for (int64_t c = 0; c < C; c++)
        tau[c] = *ignored ? 0.0
                          : (c == t ? (1.0 - in->eps) * ce_w(in, t) : 0.0) +
                                in->eps / (double)C * ce_w(in, c);
    *divisor = *ignored ? 0.0 : ce_w(in, t);
    return TDM_OK;
}

// sum_c tau_c (-logp_c). With class indices a zero tau_c adds nothing even where logp_c is -inf
// (PyTorch's nll_loss reads only the target's term); with probabilities every term counts
// (PyTorch multiplies: 0 * inf is NaN there too).
static double ce_row_loss(const ce_in *in, const double *tau, const double *logp) {
    double l = 0.0;
    for (int64_t c = 0; c < in->C; c++)
        if (tau[c] != 0.0 || in->Q) l += tau[c] * -logp[c];
    return l;
}

// logits (R,C), target (R) class indices or (R,C) probabilities, weight (C) or NULL; loss (R) for
// none, else a scalar. loss_r = sum_c tau_c (-log p[r,c]) (ce_tau); sum: sum_r loss_r; mean: that
// sum / sum_r divisor_r (NaN when it is 0, e.g. every row ignored).
tdm_status ref_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                             const tdm_tensor *weight, tdm_reduction red, double smoothing,
                             int64_t ignore_index, tdm_tensor *loss) {
    ref_arena A = {0};
    const bool probs = tdm_dtype_is_float(target->dtype);
    ce_in in = {logits->shape[0], logits->shape[1], ref_in(&A, logits),
                probs ? ref_in(&A, target) : NULL, ref_in(&A, weight), target, smoothing,
                ignore_index};
    const int64_t R = in.R, C = in.C;
    double *logp = ref_new(&A, C), *tau = ref_new(&A, C);
    double *L = ref_new(&A, R > 0 ? R : 1);   // per row; L[0] holds the reduced loss at the end
    if (A.failed) return ref_finish(&A);
    double total = 0.0, divisor = 0.0;
    for (int64_t r = 0; r < R; r++) {
        double d;
        bool ignored;
        tdm_status s = ce_tau(&in, r, tau, &d, &ignored);
        if (s != TDM_OK) {
            ref_finish(&A);
            return s;
        }
        if (ignored) continue;   // L[r] stays 0
        log_softmax_row(in.X + r * C, C, logp);
        L[r] = ce_row_loss(&in, tau, logp);
        total += L[r];
        divisor += d;
    }
    if (red == TDM_REDUCTION_SUM) L[0] = total;
    if (red == TDM_REDUCTION_MEAN) L[0] = divisor != 0.0 ? total / divisor : NAN;
    ref_store(&A, loss, L);
    return ref_finish(&A);
}

// glogits[r,c] = g_r (p[r,c] S_r - tau_c), S_r = sum_c tau_c (the derivative of sum_c tau_c
// (-log p_c)); 0 on ignored rows; g_r = gloss[r] (none), gloss (sum), gloss / sum_r divisor_r
// (mean).   gloss (R) or scalar, glogits (R,C)
tdm_status ref_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                      const tdm_tensor *target, const tdm_tensor *weight,
                                      tdm_reduction red, double smoothing, int64_t ignore_index,
                                      tdm_tensor *glogits) {
    ref_arena A = {0};
    const bool probs = tdm_dtype_is_float(target->dtype);
    ce_in in = {logits->shape[0], logits->shape[1], ref_in(&A, logits),
                probs ? ref_in(&A, target) : NULL, ref_in(&A, weight), target, smoothing,
                ignore_index};
    const double *G = ref_in(&A, gloss);
    const int64_t R = in.R, C = in.C;
    double *GX = ref_new(&A, glogits->numel);
    double *logp = ref_new(&A, C), *tau = ref_new(&A, C);
    if (A.failed) return ref_finish(&A);
    double divisor = 0.0;
    for (int64_t r = 0; r < R; r++) {
        double d;
        bool ignored;
        tdm_status s = ce_tau(&in, r, tau, &d, &ignored);
        if (s != TDM_OK) {
            ref_finish(&A);
            return s;
        }
        divisor += d;
    }
    for (int64_t r = 0; r < R; r++) {
        double d;
        bool ignored;
        (void)ce_tau(&in, r, tau, &d, &ignored);   // checked above
        if (ignored) continue;   // GX row stays 0
        double g = red == TDM_REDUCTION_NONE ? G[r]
                   : red == TDM_REDUCTION_SUM ? G[0]
                   : divisor != 0.0           ? G[0] / divisor
                                              : NAN;   // as the forward's mean
        log_softmax_row(in.X + r * C, C, logp);
        double S = 0.0;
        for (int64_t c = 0; c < C; c++) S += tau[c];
        for (int64_t c = 0; c < C; c++) GX[r * C + c] = g * (exp(logp[c]) * S - tau[c]);
    }
    ref_store(&A, glogits, GX);
    return ref_finish(&A);
}

// ---- mse_loss --------------------------------------------------------------------------------

// d = a - b; none: loss = d^2 (a's shape); sum: sum d^2; mean: sum d^2 / numel (NaN when empty).
tdm_status ref_mse_loss(const tdm_tensor *a, const tdm_tensor *b, tdm_reduction red,
                        tdm_tensor *loss) {
    ref_arena A = {0};
    const double *PA = ref_in(&A, a), *PB = ref_in(&A, b);
    double *L = ref_new(&A, a->numel);   // d^2 per element; L[0] holds the reduced loss at the end
    if (A.failed) return ref_finish(&A);
    double total = 0.0;
    for (int64_t i = 0; i < a->numel; i++) {
        double d = PA[i] - PB[i];
        L[i] = d * d;
        total += L[i];
    }
    if (red == TDM_REDUCTION_SUM) L[0] = total;
    if (red == TDM_REDUCTION_MEAN) L[0] = a->numel > 0 ? total / (double)a->numel : NAN;
    ref_store(&A, loss, L);
    return ref_finish(&A);
}

// ga = 2 d g_i with g_i = gloss[i] (none), gloss (sum), gloss / numel (mean); gb = -ga.
// Either of ga, gb may be NULL.
tdm_status ref_mse_loss_backward(const tdm_tensor *gloss, const tdm_tensor *a, const tdm_tensor *b,
                                 tdm_reduction red, tdm_tensor *ga, tdm_tensor *gb) {
    ref_arena A = {0};
    const double *PA = ref_in(&A, a), *PB = ref_in(&A, b), *G = ref_in(&A, gloss);
    double *GA = ref_new(&A, a->numel), *GB = ref_new(&A, a->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < a->numel; i++) {
        double g = red == TDM_REDUCTION_NONE ? G[i]
                   : red == TDM_REDUCTION_SUM ? G[0]
                                              : G[0] / (double)a->numel;
        GA[i] = 2.0 * (PA[i] - PB[i]) * g;
        GB[i] = -GA[i];
    }
    ref_store(&A, ga, GA);
    ref_store(&A, gb, GB);
    return ref_finish(&A);
}
