/* ref_norm.c — reference layer_norm and batch_norm, forward and backward, in double. */
#include <math.h>

#include "ref/ref.h"

// ---- layer_norm ----------------------------------------------------------------------------

// x (R,K), w (K)?, b (K)?, y (R,K), mean (R)?, rstd (R)?
// Per row: mean = sum x / K, var = sum (x - mean)^2 / K (biased), rstd = 1 / sqrt(var + eps),
// y = (x - mean) * rstd * w + b.
tdm_status ref_layer_norm(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                          double eps, tdm_tensor *y, tdm_tensor *mean, tdm_tensor *rstd) {
    int64_t R = x->shape[0], K = x->shape[1];
    ref_arena A = {0};
    const double *X = ref_in(&A, x), *W = ref_in(&A, w), *B = ref_in(&A, b);
    double *Y = ref_new(&A, R * K), *M = ref_new(&A, R), *S = ref_new(&A, R);
    if (A.failed) return ref_finish(&A);
    for (int64_t r = 0; r < R; r++) {
        const double *xr = X + r * K;
        double sum = 0, sq = 0;
        for (int64_t k = 0; k < K; k++) sum += xr[k];
        double mu = sum / (double)K;
        for (int64_t k = 0; k < K; k++) sq += (xr[k] - mu) * (xr[k] - mu);
        double rs = 1.0 / sqrt(sq / (double)K + eps);
        for (int64_t k = 0; k < K; k++)
            Y[r * K + k] = (xr[k] - mu) * rs * (W ? W[k] : 1.0) + (B ? B[k] : 0.0);
        M[r] = mu;
        S[r] = rs;
    }
    ref_store(&A, y, Y);
    ref_store(&A, mean, M);
    ref_store(&A, rstd, S);
    return ref_finish(&A);
}

// gy, x (R,K), w (K)?, mean, rstd (R) from the forward; gx (R,K)?, gw, gb (K)?
// xhat = (x - mean) * rstd, g = gy * w; per row:
// gx = rstd * (g - mean(g) - xhat * mean(g * xhat)); gw = sum over rows gy * xhat; gb = sum gy.
tdm_status ref_layer_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                   const tdm_tensor *mean, const tdm_tensor *rstd, tdm_tensor *gx,
                                   tdm_tensor *gw, tdm_tensor *gb) {
    int64_t R = x->shape[0], K = x->shape[1];
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *X = ref_in(&A, x), *W = ref_in(&A, w);
    const double *M = ref_in(&A, mean), *S = ref_in(&A, rstd);
    double *GX = ref_new(&A, R * K), *GW = ref_new(&A, K), *GB = ref_new(&A, K);
    double *XH = ref_new(&A, K);   // xhat of one row
    if (A.failed) return ref_finish(&A);
    for (int64_t r = 0; r < R; r++) {
        const double *xr = X + r * K, *gr = GY + r * K;
        double mg = 0, mgx = 0;   // mean(g), mean(g * xhat)
        for (int64_t k = 0; k < K; k++) {
            XH[k] = (xr[k] - M[r]) * S[r];
            double g = gr[k] * (W ? W[k] : 1.0);
            mg += g;
            mgx += g * XH[k];
            GW[k] += gr[k] * XH[k];
            GB[k] += gr[k];
        }
        mg /= (double)K;
        mgx /= (double)K;
        for (int64_t k = 0; k < K; k++)
            GX[r * K + k] = S[r] * (gr[k] * (W ? W[k] : 1.0) - mg - XH[k] * mgx);
    }
    ref_store(&A, gx, GX);
    ref_store(&A, gw, GW);
    ref_store(&A, gb, GB);
    return ref_finish(&A);
}

// ---- batch_norm ----------------------------------------------------------------------------

// x (N,C,S), running_mean/var (C)?, w (C)?, b (C)?, y (N,C,S), save_mean/save_invstd (C)?
// Training: per channel, over its n = N*S values, mean and biased var; invstd = 1/sqrt(var+eps);
//   running stats (when given) become (1-m) r + m stat, with the unbiased var * n/(n-1).
// Eval: mean = running_mean, invstd = 1/sqrt(running_var + eps).
// y = (x - mean) * invstd * w + b; save_* = the mean and invstd used.
tdm_status ref_batch_norm(const tdm_tensor *x, tdm_tensor *running_mean, tdm_tensor *running_var,
                          const tdm_tensor *w, const tdm_tensor *b, bool training,
                          double momentum, double eps, tdm_tensor *y, tdm_tensor *save_mean,
                          tdm_tensor *save_invstd) {
    int64_t N = x->shape[0], C = x->shape[1], S = x->shape[2], n = N * S;
    ref_arena A = {0};
    const double *X = ref_in(&A, x), *W = ref_in(&A, w), *B = ref_in(&A, b);
    const double *RM = ref_in(&A, running_mean), *RV = ref_in(&A, running_var);
    double *Y = ref_new(&A, N * C * S), *M = ref_new(&A, C), *IS = ref_new(&A, C);
    double *NRM = ref_new(&A, C), *NRV = ref_new(&A, C);   // updated running stats
    if (A.failed) return ref_finish(&A);
    for (int64_t c = 0; c < C; c++) {
        double mu, var;
        if (training) {
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < N; i++)
                for (int64_t s = 0; s < S; s++) sum += X[(i * C + c) * S + s];
            mu = sum / (double)n;
            for (int64_t i = 0; i < N; i++)
                for (int64_t s = 0; s < S; s++) {
                    double d = X[(i * C + c) * S + s] - mu;
                    sq += d * d;
                }
            var = sq / (double)n;
            if (RM) NRM[c] = (1 - momentum) * RM[c] + momentum * mu;
            if (RV) NRV[c] = (1 - momentum) * RV[c] + momentum * var * (double)n / (double)(n - 1);
        } else {
            mu = RM[c];
            var = RV[c];
        }
        M[c] = mu;
        IS[c] = 1.0 / sqrt(var + eps);
        for (int64_t i = 0; i < N; i++)
            for (int64_t s = 0; s < S; s++) {
                int64_t j = (i * C + c) * S + s;
                Y[j] = (X[j] - mu) * IS[c] * (W ? W[c] : 1.0) + (B ? B[c] : 0.0);
            }
    }
    ref_store(&A, y, Y);
    ref_store(&A, save_mean, M);
    ref_store(&A, save_invstd, IS);
    if (training) {
        ref_store(&A, running_mean, NRM);
        ref_store(&A, running_var, NRV);
    }
    return ref_finish(&A);
}

// gy, x (N,C,S), w (C)?, save_mean/save_invstd (C); gx (N,C,S)?, gw, gb (C)?
// xhat = (x - mean) * invstd; per channel, over its n = N*S values:
// training: gx = w * invstd / n * (n * gy - sum gy - xhat * sum(gy * xhat));
// eval (mean and invstd are constants): gx = gy * w * invstd.
// gw = sum gy * xhat; gb = sum gy.
tdm_status ref_batch_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                   const tdm_tensor *save_mean, const tdm_tensor *save_invstd,
                                   bool training, tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb) {
    int64_t N = x->shape[0], C = x->shape[1], S = x->shape[2], n = N * S;
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy), *X = ref_in(&A, x), *W = ref_in(&A, w);
    const double *M = ref_in(&A, save_mean), *IS = ref_in(&A, save_invstd);
    double *GX = ref_new(&A, N * C * S), *GW = ref_new(&A, C), *GB = ref_new(&A, C);
    if (A.failed) return ref_finish(&A);
    for (int64_t c = 0; c < C; c++) {
        double sg = 0, sgx = 0;   // sum gy, sum gy * xhat
        for (int64_t i = 0; i < N; i++)
            for (int64_t s = 0; s < S; s++) {
                int64_t j = (i * C + c) * S + s;
                sg += GY[j];
                sgx += GY[j] * (X[j] - M[c]) * IS[c];
            }
        GW[c] = sgx;
        GB[c] = sg;
        double wc = W ? W[c] : 1.0;
        for (int64_t i = 0; i < N; i++)
            for (int64_t s = 0; s < S; s++) {
                int64_t j = (i * C + c) * S + s;
                double xhat = (X[j] - M[c]) * IS[c];
                GX[j] = training ? wc * IS[c] / (double)n * ((double)n * GY[j] - sg - xhat * sgx)
                                 : GY[j] * wc * IS[c];
            }
    }
    ref_store(&A, gx, GX);
    ref_store(&A, gw, GW);
    ref_store(&A, gb, GB);
    return ref_finish(&A);
}
