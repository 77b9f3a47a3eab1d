/* pending_misc.c — TEMPORARY: placeholders until the misc ops land; deleted then. */
#include "ref/ref.h"

tdm_status ref_layer_norm(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                          double eps, tdm_tensor *y, tdm_tensor *mean, tdm_tensor *rstd) {
    (void)x;
    (void)w;
    (void)b;
    (void)eps;
    (void)y;
    (void)mean;
    (void)rstd;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "layer_norm: pending");
}

tdm_status ref_layer_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                   const tdm_tensor *mean, const tdm_tensor *rstd, tdm_tensor *gx,
                                   tdm_tensor *gw, tdm_tensor *gb) {
    (void)gy;
    (void)x;
    (void)w;
    (void)mean;
    (void)rstd;
    (void)gx;
    (void)gw;
    (void)gb;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "layer_norm_backward: pending");
}

tdm_status ref_batch_norm(const tdm_tensor *x, tdm_tensor *running_mean, tdm_tensor *running_var,
                          const tdm_tensor *w, const tdm_tensor *b, bool training,
                          double momentum, double eps, tdm_tensor *y, tdm_tensor *save_mean,
                          tdm_tensor *save_invstd) {
    (void)x;
    (void)running_mean;
    (void)running_var;
    (void)w;
    (void)b;
    (void)training;
    (void)momentum;
    (void)eps;
    (void)y;
    (void)save_mean;
    (void)save_invstd;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "batch_norm: pending");
}

tdm_status ref_batch_norm_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                                   const tdm_tensor *save_mean, const tdm_tensor *save_invstd,
                                   bool training, tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb) {
    (void)gy;
    (void)x;
    (void)w;
    (void)save_mean;
    (void)save_invstd;
    (void)training;
    (void)gx;
    (void)gw;
    (void)gb;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "batch_norm_backward: pending");
}

tdm_status ref_embedding(const tdm_tensor *idx, const tdm_tensor *w, tdm_tensor *y) {
    (void)idx;
    (void)w;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "embedding: pending");
}

tdm_status ref_embedding_backward(const tdm_tensor *gy, const tdm_tensor *idx,
                                  int64_t padding_idx, tdm_tensor *gw) {
    (void)gy;
    (void)idx;
    (void)padding_idx;
    (void)gw;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "embedding_backward: pending");
}

tdm_status ref_sgd_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *buf,
                        bool buf_initialized, const tdm_sgd_params *p) {
    (void)param;
    (void)grad;
    (void)buf;
    (void)buf_initialized;
    (void)p;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "sgd_step: pending");
}

tdm_status ref_adam_step(tdm_tensor *param, const tdm_tensor *grad, tdm_tensor *m, tdm_tensor *v,
                         int64_t step, const tdm_adam_params *p) {
    (void)param;
    (void)grad;
    (void)m;
    (void)v;
    (void)step;
    (void)p;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "adam_step: pending");
}

