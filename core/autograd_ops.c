/* autograd_ops.c — one backward node per op of ops.h (and reshape, to, clone): the recording
 * call each public forward makes at its end, and the node's backward, which calls the op's
 * tdm_*_backward from ops.h asking only for the gradients of inputs that require grad.
 *
 * Inputs are retained by the node (tdm_autograd_record); extra tensors it needs are saved beside
 * them: softmax's output as a detached alias (never the output tensor itself: it owns the node),
 * the norms' statistics as the forward produced them. Integer inputs (cross_entropy's target,
 * embedding's indices) are kept but get no gradient. */
#include <string.h>

#include "core/autograd_impl.h"
#include "core/random_impl.h"

#define INPUTS(...) (const tdm_tensor *const[]){__VA_ARGS__}

// The out-pointer for input i's gradient, or NULL when it wants none.
static tdm_tensor **want(tdm_grad_node *n, tdm_tensor **g, int i) {
    return tdm_node_wants(n, i) ? &g[i] : NULL;
}

// ---- matrix products ----------------------------------------------------------------------

// inputs: x, weight, bias (or NULL)
static tdm_status linear_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_linear_backward(gy, n->inputs[0], n->inputs[1], want(n, g, 0), want(n, g, 1),
                               want(n, g, 2));
}

tdm_tensor *tdm_record_linear(tdm_tensor *y, const tdm_tensor *x, const tdm_tensor *weight,
                              const tdm_tensor *bias) {
    return tdm_autograd_record(y, "linear", linear_bw, 3, INPUTS(x, weight, bias), NULL, 0, NULL);
}

// inputs: a, b
static tdm_status matmul_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_matmul_backward(gy, n->inputs[0], n->inputs[1], want(n, g, 0), want(n, g, 1));
}

tdm_tensor *tdm_record_matmul(tdm_tensor *y, const tdm_tensor *a, const tdm_tensor *b) {
    return tdm_autograd_record(y, "matmul", matmul_bw, 2, INPUTS(a, b), NULL, 0, NULL);
}

// ---- convolution and pooling ----------------------------------------------------------------

// inputs: x, weight, bias (or NULL)
static tdm_status conv2d_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_conv2d_backward(gy, n->inputs[0], n->inputs[1], &n->params.conv, want(n, g, 0),
                               want(n, g, 1), want(n, g, 2));
}

tdm_tensor *tdm_record_conv2d(tdm_tensor *y, const tdm_tensor *x, const tdm_tensor *weight,
                              const tdm_tensor *bias, const tdm_conv2d_params *p) {
    if (!y) return NULL;
    tdm_node_params np = {.conv = *p};
    return tdm_autograd_record(y, "conv2d", conv2d_bw, 3, INPUTS(x, weight, bias), &np, 0, NULL);
}

// inputs: x
static tdm_status max_pool2d_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_max_pool2d_backward(gy, n->inputs[0], &n->params.pool, want(n, g, 0));
}

static tdm_status avg_pool2d_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_avg_pool2d_backward(gy, n->inputs[0], &n->params.pool, want(n, g, 0));
}

tdm_tensor *tdm_record_pool2d(tdm_tensor *y, const tdm_tensor *x, const tdm_pool2d_params *p,
                              bool avg) {
    if (!y) return NULL;
    tdm_node_params np = {.pool = *p};
    return tdm_autograd_record(y, avg ? "avg_pool2d" : "max_pool2d",
                               avg ? avg_pool2d_bw : max_pool2d_bw, 1, INPUTS(x), &np, 0, NULL);
}

// ---- elementwise ----------------------------------------------------------------------------

// inputs: x
static tdm_status unary_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_unary_backward(n->params.unary, gy, n->inputs[0], want(n, g, 0));
}

tdm_tensor *tdm_record_unary(tdm_tensor *y, const char *name, tdm_unary_op op,
                             const tdm_tensor *x) {
    tdm_node_params np = {.unary = op};
    return tdm_autograd_record(y, name, unary_bw, 1, INPUTS(x), &np, 0, NULL);
}

// inputs: a, b (the same tensor twice for x + x: the engine sums both gradients)
static tdm_status add_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_add_backward(gy, n->inputs[0], n->inputs[1], n->params.alpha, want(n, g, 0),
                            want(n, g, 1));
}

tdm_tensor *tdm_record_add(tdm_tensor *y, const tdm_tensor *a, const tdm_tensor *b, double alpha) {
    tdm_node_params np = {.alpha = alpha};
    return tdm_autograd_record(y, "add", add_bw, 2, INPUTS(a, b), &np, 0, NULL);
}

static tdm_status mul_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_mul_backward(gy, n->inputs[0], n->inputs[1], want(n, g, 0), want(n, g, 1));
}

tdm_tensor *tdm_record_mul(tdm_tensor *y, const tdm_tensor *a, const tdm_tensor *b) {
    return tdm_autograd_record(y, "mul", mul_bw, 2, INPUTS(a, b), NULL, 0, NULL);
}

// inputs: x (for its requires_grad: the backward needs only (p, seed, offset) to redraw the mask)
static tdm_status dropout_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_dropout_backward_at(gy, n->params.dropout.p, n->params.dropout.training,
                                   n->params.dropout.seed, n->params.dropout.offset,
                                   n->params.dropout.delta, want(n, g, 0));
}

tdm_tensor *tdm_record_dropout(tdm_tensor *y, const tdm_tensor *x, double p, bool training,
                               uint64_t seed, uint64_t offset, const uint64_t *delta) {
    tdm_node_params np = {.dropout = {p, training, seed, offset, delta}};
    return tdm_autograd_record(y, "dropout", dropout_bw, 1, INPUTS(x), &np, 0, NULL);
}

// ---- reductions, softmax, losses --------------------------------------------------------------

// inputs: x
static tdm_status sum_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_sum_backward(gy, n->inputs[0], n->params.reduce.ndims, n->params.reduce.dims,
                            n->params.reduce.keepdim, want(n, g, 0));
}

static tdm_status mean_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_mean_backward(gy, n->inputs[0], n->params.reduce.ndims, n->params.reduce.dims,
                             n->params.reduce.keepdim, want(n, g, 0));
}

tdm_tensor *tdm_record_reduce(tdm_tensor *y, const tdm_tensor *x, int ndims, const int *dims,
                              bool keepdim, bool mean) {
    const char *name = mean ? "mean" : "sum";
    if (!y || !tdm_autograd_needed(1, INPUTS(x))) return y;
    if (ndims > TDM_MAX_DIMS) {   // the forward accepted no more distinct dims than this
        tdm_tensor_free(y);
        tdm_error_set(TDM_ERR_ARG, "%s: %d dims (at most %d)", name, ndims, TDM_MAX_DIMS);
        return NULL;
    }
    tdm_node_params np = {.reduce = {.ndims = ndims, .keepdim = keepdim}};
    for (int i = 0; i < ndims; i++) np.reduce.dims[i] = dims[i];
    return tdm_autograd_record(y, name, mean ? mean_bw : sum_bw, 1, INPUTS(x), &np, 0, NULL);
}

// inputs: x; saved: the output (a detached alias)
static tdm_status softmax_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_softmax_backward(gy, n->saved[0], n->params.dim, want(n, g, 0));
}

static tdm_status log_softmax_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_log_softmax_backward(gy, n->saved[0], n->params.dim, want(n, g, 0));
}

tdm_tensor *tdm_record_softmax(tdm_tensor *y, const tdm_tensor *x, int dim, bool log) {
    if (!y || !tdm_autograd_needed(1, INPUTS(x))) return y;
    tdm_tensor *out = tdm_tensor_detach(y);
    if (!out) {
        tdm_tensor_free(y);
        return NULL;
    }
    tdm_node_params np = {.dim = dim};
    y = tdm_autograd_record(y, log ? "log_softmax" : "softmax", log ? log_softmax_bw : softmax_bw,
                            1, INPUTS(x), &np, 1, INPUTS(out));
    tdm_tensor_free(out);
    return y;
}

// inputs: logits, target, weight (NULL without one); a gradient for the logits only (none for
// integer targets, probability targets or the weight)
// saved: nothing, or the fused classifier's row statistics (the forward's (max, sum) per row)
static tdm_status cross_entropy_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_cross_entropy_backward_at(gy, n->inputs[0], n->inputs[1], n->inputs[2],
                                         n->params.ce.reduction, n->params.ce.label_smoothing,
                                         n->params.ce.ignore_index, n->saved[0], want(n, g, 0));
}

tdm_tensor *tdm_record_cross_entropy(tdm_tensor *y, const tdm_tensor *logits,
                                     const tdm_tensor *target, const tdm_tensor *weight,
                                     tdm_reduction reduction, double label_smoothing,
                                     int64_t ignore_index, const tdm_tensor *stats) {
    tdm_node_params np = {.ce = {reduction, label_smoothing, ignore_index}};
    return tdm_autograd_record(y, "cross_entropy", cross_entropy_bw, 3,
                               INPUTS(logits, target, weight), &np, stats ? 1 : 0,
                               stats ? INPUTS(stats) : NULL);
}

// inputs: q, k, v, attn_mask (NULL, bool, or floating: then it may want a gradient too); the
// weights are recomputed from them, the dropout redrawn from the forward's (seed, offset, delta).
// saved: nothing, or after the fused forward its output (a detached alias) and log-sum-exp.
static tdm_status sdpa_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    if (n->saved[1])
        return tdm_sdpa_fused_backward_at(gy, n->inputs[0], n->inputs[1], n->inputs[2],
                                          n->saved[0], n->saved[1], n->params.sdpa.is_causal,
                                          n->params.sdpa.scale, want(n, g, 0), want(n, g, 1),
                                          want(n, g, 2));
    return tdm_sdpa_backward_at(gy, n->inputs[0], n->inputs[1], n->inputs[2], n->inputs[3],
                                n->params.sdpa.dropout_p, n->params.sdpa.is_causal,
                                n->params.sdpa.scale, n->params.sdpa.seed,
                                n->params.sdpa.offset, n->params.sdpa.delta, want(n, g, 0),
                                want(n, g, 1), want(n, g, 2), want(n, g, 3));
}

tdm_tensor *tdm_record_sdpa(tdm_tensor *y, const tdm_tensor *q, const tdm_tensor *k,
                            const tdm_tensor *v, const tdm_tensor *attn_mask, double dropout_p,
                            bool is_causal, double scale, uint64_t seed, uint64_t offset,
                            const uint64_t *delta, const tdm_tensor *lse) {
    tdm_node_params np = {.sdpa = {dropout_p, scale, is_causal, seed, offset, delta}};
    if (!y || !lse || !tdm_autograd_needed(4, INPUTS(q, k, v, attn_mask)))
        return tdm_autograd_record(y, "scaled_dot_product_attention", sdpa_bw, 4,
                                   INPUTS(q, k, v, attn_mask), &np, 0, NULL);
    tdm_tensor *out = tdm_tensor_detach(y);
    if (!out) {
        tdm_tensor_free(y);
        return NULL;
    }
    y = tdm_autograd_record(y, "scaled_dot_product_attention", sdpa_bw, 4,
                            INPUTS(q, k, v, attn_mask), &np, 2, INPUTS(out, lse));
    tdm_tensor_free(out);
    return y;
}

// inputs: input, target (both may require grad)
static tdm_status mse_loss_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_mse_loss_backward(gy, n->inputs[0], n->inputs[1], n->params.reduction,
                                 want(n, g, 0), want(n, g, 1));
}

tdm_tensor *tdm_record_mse_loss(tdm_tensor *y, const tdm_tensor *input, const tdm_tensor *target,
                                tdm_reduction reduction) {
    tdm_node_params np = {.reduction = reduction};
    return tdm_autograd_record(y, "mse_loss", mse_loss_bw, 2, INPUTS(input, target), &np, 0, NULL);
}

// ---- normalization ----------------------------------------------------------------------------

// inputs: x, weight, bias (each may be NULL but x); saved: mean, rstd
static tdm_status layer_norm_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_layer_norm_backward(gy, n->inputs[0], n->params.normalized_ndim, n->inputs[1],
                                   n->saved[0], n->saved[1], want(n, g, 0), want(n, g, 1),
                                   want(n, g, 2));
}

tdm_tensor *tdm_record_layer_norm(tdm_tensor *y, const tdm_tensor *x, int normalized_ndim,
                                  const tdm_tensor *weight, const tdm_tensor *bias,
                                  const tdm_tensor *mean, const tdm_tensor *rstd) {
    tdm_node_params np = {.normalized_ndim = normalized_ndim};
    return tdm_autograd_record(y, "layer_norm", layer_norm_bw, 3, INPUTS(x, weight, bias), &np, 2,
                               INPUTS(mean, rstd));
}

// inputs: x, weight, bias (the running statistics are state, not inputs); saved: save_mean,
// save_invstd (batch statistics in training, from the running ones in eval)
static tdm_status batch_norm_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_batch_norm_backward(gy, n->inputs[0], n->inputs[1], n->saved[0], n->saved[1],
                                   n->params.training, want(n, g, 0), want(n, g, 1),
                                   want(n, g, 2));
}

tdm_tensor *tdm_record_batch_norm(tdm_tensor *y, const tdm_tensor *x, const tdm_tensor *weight,
                                  const tdm_tensor *bias, bool training,
                                  const tdm_tensor *save_mean, const tdm_tensor *save_invstd) {
    tdm_node_params np = {.training = training};
    return tdm_autograd_record(y, "batch_norm", batch_norm_bw, 3, INPUTS(x, weight, bias), &np, 2,
                               INPUTS(save_mean, save_invstd));
}

// ---- embedding --------------------------------------------------------------------------------

// inputs: indices (integer: no gradient), weight
static tdm_status embedding_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_embedding_backward(gy, n->inputs[0], n->inputs[1], n->params.padding_idx,
                                  want(n, g, 1));
}

tdm_tensor *tdm_record_embedding(tdm_tensor *y, const tdm_tensor *indices,
                                 const tdm_tensor *weight, int64_t padding_idx) {
    tdm_node_params np = {.padding_idx = padding_idx};
    return tdm_autograd_record(y, "embedding", embedding_bw, 2, INPUTS(indices, weight), &np, 0,
                               NULL);
}

// ---- views and copies -------------------------------------------------------------------------

// inputs: x; the gradient is gy viewed with x's shape
static tdm_status reshape_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    const tdm_tensor *x = n->inputs[0];
    if (!tdm_node_wants(n, 0)) return TDM_OK;
    g[0] = tdm_tensor_reshape(gy, x->ndim, x->shape);
    return g[0] ? TDM_OK : tdm_last_status();
}

tdm_tensor *tdm_record_reshape(tdm_tensor *y, const tdm_tensor *x) {
    return tdm_autograd_record(y, "reshape", reshape_bw, 1, INPUTS(x), NULL, 0, NULL);
}

// inputs: x; y = x.permute(dims), so gx = gy.permute(inverse of dims)
static tdm_status permute_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    if (!tdm_node_wants(n, 0)) return TDM_OK;
    int inverse[TDM_MAX_DIMS];
    for (int i = 0; i < gy->ndim; i++) inverse[n->params.dims[i]] = i;
    g[0] = tdm_tensor_permute(gy, inverse);
    return g[0] ? TDM_OK : tdm_last_status();
}

// dims as given to tdm_tensor_permute, already checked; negative ones are wrapped here.
tdm_tensor *tdm_record_permute(tdm_tensor *y, const tdm_tensor *x, const int *dims) {
    tdm_node_params np;
    memset(&np, 0, sizeof np);
    for (int i = 0; i < x->ndim; i++) np.dims[i] = dims[i] < 0 ? dims[i] + x->ndim : dims[i];
    return tdm_autograd_record(y, "permute", permute_bw, 1, INPUTS(x), &np, 0, NULL);
}

// inputs: x; the gradient goes back to x's dtype and device (autocast's casts end here, so the
// f32 master weights get f32 gradients)
static tdm_status copy_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    const tdm_tensor *x = n->inputs[0];
    if (!tdm_node_wants(n, 0)) return TDM_OK;
    if (gy->dtype == x->dtype && tdm_device_equal(gy->device, x->device))
        g[0] = tdm_tensor_retain((tdm_tensor *)gy);   // the engine copies before keeping it
    else
        g[0] = tdm_tensor_to(gy, x->device, x->dtype);
    return g[0] ? TDM_OK : tdm_last_status();
}

tdm_tensor *tdm_record_copy(tdm_tensor *y, const tdm_tensor *x, const char *name) {
    return tdm_autograd_record(y, name, copy_bw, 1, INPUTS(x), NULL, 0, NULL);
}

// ---- the views of core/ops_view.c (views.* tests: test_views.c) ---------------------------------

// inputs: x; y = x.transpose(d0, d1), so gx = gy.transpose(d0, d1)
static tdm_status transpose_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    if (!tdm_node_wants(n, 0)) return TDM_OK;
    g[0] = tdm_tensor_transpose(gy, n->params.dims[0], n->params.dims[1]);
    return g[0] ? TDM_OK : tdm_last_status();
}

tdm_tensor *tdm_record_transpose(tdm_tensor *y, const tdm_tensor *x, int d0, int d1) {
    tdm_node_params np;
    memset(&np, 0, sizeof np);
    np.dims[0] = d0;
    np.dims[1] = d1;
    return tdm_autograd_record(y, "transpose", transpose_bw, 1, INPUTS(x), &np, 0, NULL);
}

// inputs: x; gx = zeros of x's shape with gy at start.. along dim
static tdm_status narrow_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    const tdm_tensor *x = n->inputs[0];
    if (!tdm_node_wants(n, 0)) return TDM_OK;
    g[0] = tdm_narrow_backward(gy, x->ndim, x->shape, n->params.narrow.dim,
                               n->params.narrow.start);
    return g[0] ? TDM_OK : tdm_last_status();
}

tdm_tensor *tdm_record_narrow(tdm_tensor *y, const tdm_tensor *x, int dim, int64_t start) {
    tdm_node_params np = {.narrow = {dim, start}};
    return tdm_autograd_record(y, "narrow", narrow_bw, 1, INPUTS(x), &np, 0, NULL);
}

// inputs: the joined tensors in order; input i's gradient is gy's slice at its place along dim
// (a skipped 1-D input of size 0, with fewer dims than y, gets zeros of its shape)
static tdm_status cat_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    const int dim = n->params.narrow.dim;
    int64_t at = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        const tdm_tensor *x = n->inputs[i];
        const bool skipped = x->ndim != gy->ndim;
        if (tdm_node_wants(n, i)) {
            g[i] = skipped ? tdm_tensor_zeros(x->ndim, x->shape, x->dtype, x->device)
                           : tdm_tensor_narrow(gy, dim, at, x->shape[dim]);
            if (!g[i]) return tdm_last_status();   // the engine frees what is filled
        }
        if (!skipped) at += x->shape[dim];
    }
    return TDM_OK;
}

tdm_tensor *tdm_record_cat(tdm_tensor *y, const char *name, int n, const tdm_tensor *const *xs,
                           int dim) {
    tdm_node_params np = {.narrow = {dim, 0}};
    return tdm_autograd_record(y, name, cat_bw, n, xs, &np, 0, NULL);
}

// ---- a tensor and a Python number (core/ops_scalar.c) ------------------------------------------

static const char *const SCALAR_NAMES[] = {"add", "sub", "rsub", "mul", "div", "rdiv"};

// inputs: a (floating when it wants a gradient)
static tdm_status binary_scalar_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    return tdm_binary_scalar_backward(n->params.scalar.op, gy, n->inputs[0], n->params.scalar.s,
                                      want(n, g, 0));
}

tdm_tensor *tdm_record_binary_scalar(tdm_tensor *y, const tdm_tensor *a, tdm_scalar_op op,
                                     double s) {
    tdm_node_params np = {.scalar = {op, s}};
    const char *name = (unsigned)op < 6 ? SCALAR_NAMES[op] : "binary_scalar";
    return tdm_autograd_record(y, name, binary_scalar_bw, 1, INPUTS(a), &np, 0, NULL);
}
