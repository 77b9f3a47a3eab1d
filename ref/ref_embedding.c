/* ref_embedding.c — reference embedding, forward and backward: a gather of weight rows and its
 * scatter-add. */
#include "ref/ref.h"

// Checks every index against V (the reference reads them on the host anyway).
static tdm_status check_indices(const char *op, const tdm_tensor *idx, int64_t V) {
    for (int64_t i = 0; i < idx->numel; i++) {
        int64_t k = ref_index(idx, i);
        if (k < 0 || k >= V)
            return tdm_error_set(TDM_ERR_ARG, "%s: index %lld out of range for %lld rows", op,
                                 (long long)k, (long long)V);
    }
    return TDM_OK;
}

// idx (...) of n indices, w (V,D), y (..., D): y[i] = w[idx[i]].
// (PyTorch's forward does not zero the padding_idx row; neither does this.)
tdm_status ref_embedding(const tdm_tensor *idx, const tdm_tensor *w, tdm_tensor *y) {
    int64_t n = idx->numel, V = w->shape[0], D = w->shape[1];
    TDM_TRY(check_indices("embedding", idx, V));
    ref_arena A = {0};
    const double *W = ref_in(&A, w);
    double *Y = ref_new(&A, n * D);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < D; d++) Y[i * D + d] = W[ref_index(idx, i) * D + d];
    ref_store(&A, y, Y);
    return ref_finish(&A);
}

// gy (..., D) with n rows, idx (...), gw (V,D): gw = 0, then gw[idx[i]] += gy[i] for every i
// whose index is not padding_idx (that row's gradient stays zero).
tdm_status ref_embedding_backward(const tdm_tensor *gy, const tdm_tensor *idx,
                                  int64_t padding_idx, tdm_tensor *gw) {
    int64_t n = idx->numel, V = gw->shape[0], D = gw->shape[1];
    TDM_TRY(check_indices("embedding_backward", idx, V));
    ref_arena A = {0};
    const double *GY = ref_in(&A, gy);
    double *GW = ref_new(&A, V * D);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = ref_index(idx, i);
        if (k == padding_idx) continue;
        for (int64_t d = 0; d < D; d++) GW[k * D + d] += GY[i * D + d];
    }
    ref_store(&A, gw, GW);
    return ref_finish(&A);
}
