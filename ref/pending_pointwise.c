/* pending_pointwise.c — TEMPORARY: placeholders until the pointwise ops land; deleted then. */
#include "ref/ref.h"

tdm_status ref_unary(tdm_unary_op op, const tdm_tensor *x, tdm_tensor *y) {
    (void)op;
    (void)x;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "unary: pending");
}

tdm_status ref_unary_backward(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                              tdm_tensor *gx) {
    (void)op;
    (void)gy;
    (void)x;
    (void)gx;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "unary_backward: pending");
}

tdm_status ref_binary(tdm_binary_op op, const tdm_tensor *a, const tdm_tensor *b, double alpha,
                      tdm_tensor *y) {
    (void)op;
    (void)a;
    (void)b;
    (void)alpha;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "binary: pending");
}

tdm_status ref_dropout(const tdm_tensor *x, double p, uint64_t seed, uint64_t offset,
                       tdm_tensor *y) {
    (void)x;
    (void)p;
    (void)seed;
    (void)offset;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "dropout: pending");
}

tdm_status ref_reduce(tdm_reduce_op op, const tdm_tensor *x, unsigned reduce_mask, tdm_tensor *y) {
    (void)op;
    (void)x;
    (void)reduce_mask;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "reduce: pending");
}

tdm_status ref_sum_to(const tdm_tensor *gy, double scale, tdm_tensor *gx) {
    (void)gy;
    (void)scale;
    (void)gx;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "sum_to: pending");
}

tdm_status ref_softmax(const tdm_tensor *x, int dim, bool log, tdm_tensor *y) {
    (void)x;
    (void)dim;
    (void)log;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "softmax: pending");
}

tdm_status ref_softmax_backward(const tdm_tensor *gy, const tdm_tensor *y, int dim, bool log,
                                tdm_tensor *gx) {
    (void)gy;
    (void)y;
    (void)dim;
    (void)log;
    (void)gx;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "softmax_backward: pending");
}

tdm_status ref_cross_entropy(const tdm_tensor *logits, const tdm_tensor *target,
                             tdm_reduction red, double smoothing, int64_t ignore_index,
                             tdm_tensor *loss) {
    (void)logits;
    (void)target;
    (void)red;
    (void)smoothing;
    (void)ignore_index;
    (void)loss;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "cross_entropy: pending");
}

tdm_status ref_cross_entropy_backward(const tdm_tensor *gloss, const tdm_tensor *logits,
                                      const tdm_tensor *target, tdm_reduction red,
                                      double smoothing, int64_t ignore_index, tdm_tensor *glogits) {
    (void)gloss;
    (void)logits;
    (void)target;
    (void)red;
    (void)smoothing;
    (void)ignore_index;
    (void)glogits;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "cross_entropy_backward: pending");
}

tdm_status ref_mse_loss(const tdm_tensor *a, const tdm_tensor *b, tdm_reduction red,
                        tdm_tensor *loss) {
    (void)a;
    (void)b;
    (void)red;
    (void)loss;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "mse_loss: pending");
}

tdm_status ref_mse_loss_backward(const tdm_tensor *gloss, const tdm_tensor *a, const tdm_tensor *b,
                                 tdm_reduction red, tdm_tensor *ga, tdm_tensor *gb) {
    (void)gloss;
    (void)a;
    (void)b;
    (void)red;
    (void)ga;
    (void)gb;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "mse_loss_backward: pending");
}

tdm_status ref_expand(const tdm_tensor *x, double scale, tdm_tensor *y) {
    (void)x;
    (void)scale;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "expand: pending");
}
