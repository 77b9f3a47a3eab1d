/* ops_embedding.c — embedding, forward and backward: argument checks, output allocation, and the
 * call through the backend table. Index range is checked by the backend, which reads them.
 *
 * Each public forward applies the autocast policy to its inputs first and records itself for
 * autograd last (core/autograd_impl.h); its body runs with grad mode off. */
#include "core/autograd_impl.h"
#include "core/profile_impl.h"

// indices: i64 (or i32), any shape; weight: floating (V, D); both on one device.
static tdm_status embedding_check(const char *op, const tdm_tensor *indices,
                                  const tdm_tensor *weight) {
    TDM_TRY(tdm_check_tensor(op, "indices", indices));
    TDM_TRY(tdm_check_tensor(op, "weight", weight));
    TDM_TRY(tdm_check_same_device(op, indices, weight));
    if (indices->dtype != TDM_DTYPE_I64 && indices->dtype != TDM_DTYPE_I32)
        return tdm_error_set(TDM_ERR_DTYPE, "%s: indices have dtype %s, expected i64 or i32", op,
                             tdm_dtype_name(indices->dtype));
    TDM_TRY(tdm_check_float(op, "weight", weight));
    TDM_TRY(tdm_check_ndim(op, "weight", weight, 2, 2));
    if (indices->ndim + 1 > TDM_MAX_DIMS) {
        char a[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: indices of shape %s: output would have %d dims "
                             "(at most %d)", op,
                             tdm_shape_str(indices->ndim, indices->shape, a, sizeof a),
                             indices->ndim + 1, TDM_MAX_DIMS);
    }
    return TDM_OK;
}

// padding_idx in [-V, V) wraps to [0, V); TDM_EMBEDDING_NO_PADDING stays as it is.
static tdm_status wrap_padding(const char *op, int64_t padding_idx, int64_t V, int64_t *out) {
    *out = padding_idx;
    if (padding_idx == TDM_EMBEDDING_NO_PADDING) return TDM_OK;
    if (padding_idx < -V || padding_idx >= V)
        return tdm_error_set(TDM_ERR_ARG,
                             "%s: padding_idx %lld must be within num_embeddings %lld "
                             "(expected [%lld, %lld))",
                             op, (long long)padding_idx, (long long)V, (long long)-V,
                             (long long)V);
    if (padding_idx < 0) *out = padding_idx + V;
    return TDM_OK;
}

// The output shape: indices' shape followed by D.
static int out_shape(const tdm_tensor *indices, int64_t D, int64_t *shape) {
    for (int i = 0; i < indices->ndim; i++) shape[i] = indices->shape[i];
    shape[indices->ndim] = D;
    return indices->ndim + 1;
}

static tdm_tensor *embedding_forward(const tdm_tensor *indices, const tdm_tensor *weight,
                                     int64_t padding_idx) {
    const char *op = "embedding";
    int64_t pad;
    if (embedding_check(op, indices, weight) != TDM_OK ||
        wrap_padding(op, padding_idx, weight->shape[0], &pad) != TDM_OK)
        return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(weight);
    if (!be->embedding) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    int64_t shape[TDM_MAX_DIMS];
    int nd = out_shape(indices, weight->shape[1], shape);
    tdm_tensor *y = tdm_tensor_empty(nd, shape, weight->dtype, weight->device);
    if (y && be->embedding(indices, weight, y) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Runs in the weight's dtype (no autocast); records itself for autograd (the weight's gradient).
tdm_tensor *tdm_embedding(const tdm_tensor *indices, const tdm_tensor *weight,
                          int64_t padding_idx) {
    TDM_PROFILE_OP("embedding", indices, weight);
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = embedding_forward(indices, weight, padding_idx);
    tdm_grad_set_enabled(grad);
    return tdm_record_embedding(y, indices, weight, padding_idx);
}

tdm_status tdm_embedding_backward(const tdm_tensor *gy, const tdm_tensor *indices,
                                  const tdm_tensor *weight, int64_t padding_idx,
                                  tdm_tensor **gweight) {
    const char *op = "embedding_backward";
    TDM_PROFILE_OP(op, gy, indices, weight);
    if (gweight) *gweight = NULL;
    int64_t pad;
    TDM_TRY(embedding_check(op, indices, weight));
    TDM_TRY(wrap_padding(op, padding_idx, weight->shape[0], &pad));
    TDM_TRY(tdm_check_tensor(op, "grad_output", gy));
    TDM_TRY(tdm_check_same_device(op, gy, weight));
    TDM_TRY(tdm_check_same_dtype(op, gy, weight));
    int64_t shape[TDM_MAX_DIMS];
    int nd = out_shape(indices, weight->shape[1], shape);
    bool same = gy->ndim == nd;
    for (int i = 0; same && i < nd; i++) same = gy->shape[i] == shape[i];
    if (!same) {
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output has shape %s, expected %s", op,
                             tdm_shape_str(gy->ndim, gy->shape, a, sizeof a),
                             tdm_shape_str(nd, shape, b, sizeof b));
    }
    if (!gweight) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(weight);
    if (!be->embedding_backward) return tdm_error_unsupported(op, be);
    tdm_tensor *gw = tdm_tensor_empty(2, weight->shape, weight->dtype, weight->device);
    if (!gw) return tdm_last_status();
    tdm_status s = be->embedding_backward(gy, indices, pad, gw);
    if (s != TDM_OK) {
        tdm_tensor_free(gw);
        return s;
    }
    *gweight = gw;
    return TDM_OK;
}
