/* ref_loss.c — the reference losses: cross_entropy over class indices (with label smoothing and
 * ignore_index) and mse_loss, forward and backward. Math in double, one rounding on store. */
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

// logits (N,C), target (N) class indices; loss (N) for none, else a scalar.
// loss_i = (1-eps) (-logp[i,t_i]) + eps/C sum_c (-logp[i,c]); 0 where t_i == ignore_index.
// sum: sum_i loss_i; mean: that sum / (number of rows not ignored), NaN when all are ignored.
tdm_status ref_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                             tdm_reduction red, double smoothing, int64_t ignore_index,
                             tdm_tensor *loss) {
    ref_arena A = {0};
    const double *X = ref_in(&A, logits);
    int64_t N = logits->shape[0], C = logits->shape[1];
    double *logp = ref_new(&A, C);
    double *L = ref_new(&A, N > 0 ? N : 1);   // per row; L[0] holds the reduced loss at the end
    if (A.failed) return ref_finish(&A);
    double total = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t t;
        tdm_status s = ce_target(target, i, C, ignore_index, &t);
        if (s != TDM_OK) {
            ref_finish(&A);
            return s;
        }
        if (t == ignore_index) continue;   // L[i] stays 0
        log_softmax_row(X + i * C, C, logp);
        double smooth = 0.0;
        for (int64_t c = 0; c < C; c++) smooth -= logp[c];
        L[i] = (1.0 - smoothing) * -logp[t] + smoothing / (double)C * smooth;
        total += L[i];
        count++;
    }
    if (red == TDM_REDUCTION_SUM) L[0] = total;
    if (red == TDM_REDUCTION_MEAN) L[0] = count > 0 ? total / (double)count : NAN;
    ref_store(&A, loss, L);
    return ref_finish(&A);
}

// glogits[i,c] = g_i (p[i,c] - (1-eps)[c == t_i] - eps/C) for rows not ignored, 0 for ignored;
// g_i = gloss[i] (none), gloss (sum), gloss / count (mean).   gloss (N) or scalar, glogits (N,C)
tdm_status ref_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                      const tdm_tensor *target, tdm_reduction red,
                                      double smoothing, int64_t ignore_index, tdm_tensor *glogits) {
    ref_arena A = {0};
    const double *X = ref_in(&A, logits), *G = ref_in(&A, gloss);
    int64_t N = logits->shape[0], C = logits->shape[1];
    double *GX = ref_new(&A, glogits->numel);
    double *logp = ref_new(&A, C);
    if (A.failed) return ref_finish(&A);
    int64_t count = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t t;
        tdm_status s = ce_target(target, i, C, ignore_index, &t);
        if (s != TDM_OK) {
            ref_finish(&A);
            return s;
        }
        if (t != ignore_index) count++;
    }
    for (int64_t i = 0; i < N; i++) {
        int64_t t = ref_index(target, i);
        if (t == ignore_index) continue;   // GX row stays 0
        double g = red == TDM_REDUCTION_NONE ? G[i]
                   : red == TDM_REDUCTION_SUM ? G[0]
                                              : G[0] / (double)count;
        log_softmax_row(X + i * C, C, logp);
        for (int64_t c = 0; c < C; c++) {
            double onehot = c == t ? 1.0 - smoothing : 0.0;
            GX[i * C + c] = g * (exp(logp[c]) - onehot - smoothing / (double)C);
        }
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
