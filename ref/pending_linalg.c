/* pending_linalg.c — TEMPORARY: placeholders until the linalg ops land; deleted then. */
#include "ref/ref.h"

tdm_status ref_linear(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                      tdm_tensor *y) {
    (void)x;
    (void)w;
    (void)b;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "linear: pending");
}

tdm_status ref_linear_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                               tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb) {
    (void)gy;
    (void)x;
    (void)w;
    (void)gx;
    (void)gw;
    (void)gb;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "linear_backward: pending");
}

tdm_status ref_matmul(const tdm_tensor *a, const tdm_tensor *b, tdm_tensor *y) {
    (void)a;
    (void)b;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "matmul: pending");
}

tdm_status ref_matmul_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                               tdm_tensor *ga, tdm_tensor *gb) {
    (void)gy;
    (void)a;
    (void)b;
    (void)ga;
    (void)gb;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "matmul_backward: pending");
}

tdm_status ref_conv2d(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                      const tdm_conv2d_params *p, tdm_tensor *y) {
    (void)x;
    (void)w;
    (void)b;
    (void)p;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "conv2d: pending");
}

tdm_status ref_conv2d_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *w,
                               const tdm_conv2d_params *p, tdm_tensor *gx, tdm_tensor *gw,
                               tdm_tensor *gb) {
    (void)gy;
    (void)x;
    (void)w;
    (void)p;
    (void)gx;
    (void)gw;
    (void)gb;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "conv2d_backward: pending");
}

tdm_status ref_max_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y) {
    (void)x;
    (void)p;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "max_pool2d: pending");
}

tdm_status ref_max_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_pool2d_params *p, tdm_tensor *gx) {
    (void)gy;
    (void)x;
    (void)p;
    (void)gx;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "max_pool2d_backward: pending");
}

tdm_status ref_avg_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y) {
    (void)x;
    (void)p;
    (void)y;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "avg_pool2d: pending");
}

tdm_status ref_avg_pool2d_backward(const tdm_tensor *gy, const tdm_pool2d_params *p,
                                   tdm_tensor *gx) {
    (void)gy;
    (void)p;
    (void)gx;
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "avg_pool2d_backward: pending");
}

