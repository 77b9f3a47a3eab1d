/* autograd_impl.h — autograd's internals, shared by core: the graph node (core/autograd.c), the
 * call every public forward op makes at its end to record itself (core/autograd_ops.c), and the
 * autocast policy every op applies at its start (core/autocast.c). Never part of the public
 * headers.
 *
 * The pattern of a forward op (ops_*.c):
 *
 *     tdm_autocast_args ac;                          // inputs under the autocast policy
 *     if (tdm_autocast_apply("op", TDM_AUTOCAST_F32, 1, (const tdm_tensor *[]){x}, &ac)) ...
 *     bool grad = tdm_grad_set_enabled(false);       // the op's internal views record nothing
 *     tdm_tensor *y = op_forward(ac.in[0], ...);
 *     tdm_grad_set_enabled(grad);
 *     y = tdm_record_op(y, ac.in[0], ...);           // attaches a node when some input needs grad
 *     tdm_autocast_args_free(&ac);                   // the node keeps what it needs
 */
#ifndef TANDEM_CORE_AUTOGRAD_IMPL_H
#define TANDEM_CORE_AUTOGRAD_IMPL_H

#include "core/tensor_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- the graph node ----------------------------------------------------------------------

typedef struct tdm_grad_node tdm_grad_node;

// A node's backward: fills grad_inputs[i] (a new reference, or NULL for no gradient) for
// node->inputs[i], from the gradient of the node's output. The engine runs it with grad mode
// off, and checks that each gradient has its input's shape and dtype.
typedef tdm_status (*tdm_node_backward_fn)(tdm_grad_node *node, const tdm_tensor *grad_output,
                                           tdm_tensor **grad_inputs);

// The op's parameters, copied into its node (one member per op family).
typedef union {
    tdm_conv2d_params conv;                                                 // conv2d
    tdm_pool2d_params pool;                                                 // max/avg_pool2d
    tdm_unary_op unary;                                                     // relu, gelu, ...
    double alpha;                                                           // add
    struct { double p; bool training; uint64_t seed, offset; const uint64_t *delta; } dropout;
    struct { int ndims, dims[TDM_MAX_DIMS]; bool keepdim; } reduce;         // sum, mean
    int dim;                                                                // (log_)softmax
    struct { tdm_reduction reduction; double label_smoothing; int64_t ignore_index; } ce;
    tdm_reduction reduction;                                                // mse_loss
    int normalized_ndim;                                                    // layer_norm
    bool training;                                                          // batch_norm
    int64_t padding_idx;                                                    // embedding
    int dims[TDM_MAX_DIMS];                                                 // permute
    struct { int dim; int64_t start; } narrow;                              // narrow, cat
    struct { tdm_scalar_op op; double s; } scalar;                          // add_scalar, ...
    struct { double dropout_p, scale; bool is_causal; uint64_t seed, offset;
             const uint64_t *delta; } sdpa;                                 // attention
} tdm_node_params;

#define TDM_NODE_MAX_SAVED 2

struct tdm_grad_node {
    const char *name;               // "linear", ...; a copy for custom nodes
    tdm_node_backward_fn backward;
    int n_inputs;
    tdm_tensor **inputs;            // owned references; NULL for an absent optional input
    tdm_tensor *saved[TDM_NODE_MAX_SAVED];   // owned: softmax's output (a detached alias),
                                             // norm statistics; never the node's own output
    tdm_node_params params;
    // custom nodes (tdm_autograd_custom)
    char *custom_name;
    tdm_status (*custom_backward)(void *ctx, const tdm_tensor *grad_output,
                                  tdm_tensor **grad_inputs);
    void *ctx;
    void (*ctx_free)(void *ctx);
    int refcount;                   // one per tensor whose grad_fn it is
    tdm_grad_node *next_free;       // the release worklist (no recursion on deep graphs)
};

// Drops a reference (tdm_tensor_free calls it for t->grad_fn); NULL is fine.
void tdm_grad_node_release(tdm_grad_node *node);

// Grad mode is on and some (non-NULL) input requires grad: the op must record itself.
bool tdm_autograd_needed(int n, const tdm_tensor *const *inputs);

// Attaches a node named `name` to y when tdm_autograd_needed(n, inputs): the node retains the n
// inputs (NULL allowed) and the n_saved extras, and copies *params (may be NULL). y must have no
// grad_fn yet. Returns y, or NULL (y freed, error set) when the node cannot be made; y NULL
// passes through.
tdm_tensor *tdm_autograd_record(tdm_tensor *y, const char *name, tdm_node_backward_fn backward,
                                int n, const tdm_tensor *const *inputs,
                                const tdm_node_params *params, int n_saved,
                                const tdm_tensor *const *saved);

// Does input i of the node want a gradient?
static inline bool tdm_node_wants(const tdm_grad_node *n, int i) {
    return i < n->n_inputs && n->inputs[i] && n->inputs[i]->requires_grad;
}

// ---- one recording call per op (core/autograd_ops.c) ----------------------------------------
// Each takes the op's output y (NULL passes through) and the inputs the forward actually ran on
// (after autocast), and returns y with its node attached, or NULL (y freed) on failure.

tdm_tensor *tdm_record_linear(tdm_tensor *y, const tdm_tensor *x, const tdm_tensor *weight,
                              const tdm_tensor *bias);
tdm_tensor *tdm_record_matmul(tdm_tensor *y, const tdm_tensor *a, const tdm_tensor *b);
tdm_tensor *tdm_record_conv2d(tdm_tensor *y, const tdm_tensor *x, const tdm_tensor *weight,
                              const tdm_tensor *bias, const tdm_conv2d_params *p);
tdm_tensor *tdm_record_pool2d(tdm_tensor *y, const tdm_tensor *x, const tdm_pool2d_params *p,
                              bool avg);
tdm_tensor *tdm_record_unary(tdm_tensor *y, const char *name, tdm_unary_op op,
                             const tdm_tensor *x);
tdm_tensor *tdm_record_add(tdm_tensor *y, const tdm_tensor *a, const tdm_tensor *b, double alpha);
tdm_tensor *tdm_record_mul(tdm_tensor *y, const tdm_tensor *a, const tdm_tensor *b);
// delta: NULL, or the device offset counter of a captured draw (core/random_impl.h)
tdm_tensor *tdm_record_dropout(tdm_tensor *y, const tdm_tensor *x, double p, bool training,
                               uint64_t seed, uint64_t offset, const uint64_t *delta);
tdm_tensor *tdm_record_reduce(tdm_tensor *y, const tdm_tensor *x, int ndims, const int *dims,
                              bool keepdim, bool mean);
tdm_tensor *tdm_record_softmax(tdm_tensor *y, const tdm_tensor *x, int dim, bool log);
// stats: NULL, or the fused classifier's (R, 2) row statistics (the node keeps them; its
// backward reads them through tdm_cross_entropy_backward_at).
tdm_tensor *tdm_record_cross_entropy(tdm_tensor *y, const tdm_tensor *logits,
                                     const tdm_tensor *target, const tdm_tensor *weight,
                                     tdm_reduction reduction, double label_smoothing,
                                     int64_t ignore_index, const tdm_tensor *stats);
// cross_entropy's backward (core/ops_reduce.c) with the forward's row statistics (NULL: none).
tdm_status tdm_cross_entropy_backward_at(const tdm_tensor *gloss, const tdm_tensor *logits,
                                         const tdm_tensor *target, const tdm_tensor *weight,
                                         tdm_reduction reduction, double label_smoothing,
                                         int64_t ignore_index, const tdm_tensor *stats,
                                         tdm_tensor **glogits);
tdm_tensor *tdm_record_permute(tdm_tensor *y, const tdm_tensor *x, const int *dims);
// scaled_dot_product_attention: scale as the caller gave it (NAN: the default); the dropout
// draw's seed, offset and delta (NULL eagerly) for the backward to redraw the same weights;
// lse NULL, or the fused forward's log-sum-exp (the node then saves it and y).
tdm_tensor *tdm_record_sdpa(tdm_tensor *y, const tdm_tensor *q, const tdm_tensor *k,
                            const tdm_tensor *v, const tdm_tensor *attn_mask, double dropout_p,
                            bool is_causal, double scale, uint64_t seed, uint64_t offset,
                            const uint64_t *delta, const tdm_tensor *lse);
tdm_tensor *tdm_record_mse_loss(tdm_tensor *y, const tdm_tensor *input, const tdm_tensor *target,
                                tdm_reduction reduction);
// mean/rstd, save_mean/save_invstd: the statistics the forward produced (retained by the node).
tdm_tensor *tdm_record_layer_norm(tdm_tensor *y, const tdm_tensor *x, int normalized_ndim,
                                  const tdm_tensor *weight, const tdm_tensor *bias,
                                  const tdm_tensor *mean, const tdm_tensor *rstd);
tdm_tensor *tdm_record_batch_norm(tdm_tensor *y, const tdm_tensor *x, const tdm_tensor *weight,
                                  const tdm_tensor *bias, bool training,
                                  const tdm_tensor *save_mean, const tdm_tensor *save_invstd);
tdm_tensor *tdm_record_embedding(tdm_tensor *y, const tdm_tensor *indices,
                                 const tdm_tensor *weight, int64_t padding_idx);
tdm_tensor *tdm_record_reshape(tdm_tensor *y, const tdm_tensor *x);
// The views of core/ops_view.c. transpose: y = x with dims d0, d1 swapped (wrapped); narrow: y =
// x's elements start.. along dim (wrapped, start >= 0); cat (`name` "cat" or "stack"): y = the n
// inputs joined along dim (wrapped against y), all of y's dtype, skipped (0,) inputs included.
tdm_tensor *tdm_record_transpose(tdm_tensor *y, const tdm_tensor *x, int d0, int d1);
tdm_tensor *tdm_record_narrow(tdm_tensor *y, const tdm_tensor *x, int dim, int64_t start);
tdm_tensor *tdm_record_cat(tdm_tensor *y, const char *name, int n, const tdm_tensor *const *xs,
                           int dim);
// x (shape `ndim`, `shape`) is zeros but for gy placed at start.. along dim: narrow's backward
// (core/ops_view.c). NULL with the error set.
tdm_tensor *tdm_narrow_backward(const tdm_tensor *gy, int ndim, const int64_t *shape, int dim,
                                int64_t start);
// a (op) s with a Python number s (core/ops_scalar.c); the backward takes s as a double.
tdm_tensor *tdm_record_binary_scalar(tdm_tensor *y, const tdm_tensor *a, tdm_scalar_op op,
                                     double s);
// A copy across dtypes or devices (name "to" or "clone"): the gradient goes back to x's.
tdm_tensor *tdm_record_copy(tdm_tensor *y, const tdm_tensor *x, const char *name);

// ---- autocast (core/autocast.c) ------------------------------------------------------------

typedef enum {
    TDM_AUTOCAST_LOWER,     // linear, matmul, conv2d: floating inputs to the autocast dtype
    TDM_AUTOCAST_F32,       // softmax, losses, norms, sum, mean: floating inputs up to f32
    TDM_AUTOCAST_PROMOTE,   // add, mul: both to the widest floating dtype of the two
} tdm_autocast_policy;

#define TDM_AUTOCAST_MAX_ARGS 4

// The inputs an op runs on: in[i] is the caller's tensor or its cast (owned[i], freed by
// tdm_autocast_args_free). Outside autocast nothing is cast.
typedef struct {
    const tdm_tensor *in[TDM_AUTOCAST_MAX_ARGS];
    tdm_tensor *owned[TDM_AUTOCAST_MAX_ARGS];
} tdm_autocast_args;

// Casts go through tdm_tensor_to (recorded by autograd). f64 and integer tensors, and NULL, pass
// through unchanged, as in PyTorch. On failure nothing is left to free.
tdm_status tdm_autocast_apply(const char *op, tdm_autocast_policy policy, int n,
                              const tdm_tensor *const *inputs, tdm_autocast_args *out);
void tdm_autocast_args_free(tdm_autocast_args *a);

#ifdef __cplusplus
}
#endif

#endif
