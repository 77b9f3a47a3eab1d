/* ops_pointwise.c — the elementwise ops: relu, gelu, tanh, sigmoid (one `unary` backend slot),
 * add and mul with PyTorch's broadcasting (the `binary` slot, and `sum_to` for their backward),
 * and dropout from the counter-based generator (the `dropout` slot).
 *
 * Each public function checks its arguments, allocates its outputs on the input's device and
 * dtype, and calls the backend; on failure it frees what it allocated and returns NULL / the
 * status, with the reason in tdm_last_error().
 *
 * Each public forward applies the autocast policy to its inputs first and records itself for
 * autograd last (core/autograd_impl.h); its body runs with grad mode off. */
#include <math.h>

#include "core/autograd_impl.h"
#include "core/profile_impl.h"
#include "core/random_impl.h"
#include "tandem/graph.h"

// ---- helpers ---------------------------------------------------------------------------

static tdm_tensor *empty_like(const tdm_tensor *t) {
    return tdm_tensor_empty(t->ndim, t->shape, t->dtype, t->device);
}

static bool same_shape(const tdm_tensor *a, const tdm_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

// gy must have exactly the shape the forward produced.
static tdm_status check_grad_shape(const char *op, const tdm_tensor *gy, int ndim,
                                   const int64_t *shape) {
    if (gy->ndim == ndim) {
        int i = 0;
        while (i < ndim && gy->shape[i] == shape[i]) i++;
        if (i == ndim) return TDM_OK;
    }
    char g[96], s[96];
    return tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output %s does not match the output shape %s",
                         op, tdm_shape_str(gy->ndim, gy->shape, g, sizeof g),
                         tdm_shape_str(ndim, shape, s, sizeof s));
}

// ---- unary: relu, gelu, tanh, sigmoid --------------------------------------------------

static const char *unary_name(tdm_unary_op op) {
    switch (op) {
    case TDM_UNARY_RELU: return "relu";
    case TDM_UNARY_GELU: return "gelu";
    case TDM_UNARY_GELU_TANH: return "gelu";
    case TDM_UNARY_TANH: return "tanh";
    case TDM_UNARY_SIGMOID: return "sigmoid";
    }
    return NULL;
}

// The profiler's name for the backward ("relu_backward").
static const char *unary_backward_name(tdm_unary_op op) {
    switch (op) {
    case TDM_UNARY_RELU: return "relu_backward";
    case TDM_UNARY_GELU: return "gelu_backward";
    case TDM_UNARY_GELU_TANH: return "gelu_backward";
    case TDM_UNARY_TANH: return "tanh_backward";
    case TDM_UNARY_SIGMOID: return "sigmoid_backward";
    }
    return "unary_backward";
}

static tdm_tensor *unary_forward(tdm_unary_op op, const tdm_tensor *x) {
    const char *name = unary_name(op);
    if (!name) {
        tdm_error_set(TDM_ERR_ARG, "unary: unknown op %d", (int)op);
        return NULL;
    }
    if (tdm_check_tensor(name, "input", x) || tdm_check_float(name, "input", x)) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->unary) {
        tdm_error_unsupported(name, be);
        return NULL;
    }
    tdm_tensor *y = empty_like(x);
    if (y && be->unary(op, x, y) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Runs in its input's dtype (no autocast); records itself for autograd.
tdm_tensor *tdm_unary(tdm_unary_op op, const tdm_tensor *x) {
    TDM_PROFILE_OP(unary_name(op) ? unary_name(op) : "unary", x);
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = unary_forward(op, x);
    tdm_grad_set_enabled(grad);
    return tdm_record_unary(y, unary_name(op), op, x);
}

tdm_tensor *tdm_relu(const tdm_tensor *x) { return tdm_unary(TDM_UNARY_RELU, x); }
tdm_tensor *tdm_gelu(const tdm_tensor *x, bool approximate_tanh) {
    return tdm_unary(approximate_tanh ? TDM_UNARY_GELU_TANH : TDM_UNARY_GELU, x);
}
tdm_tensor *tdm_tanh(const tdm_tensor *x) { return tdm_unary(TDM_UNARY_TANH, x); }
tdm_tensor *tdm_sigmoid(const tdm_tensor *x) { return tdm_unary(TDM_UNARY_SIGMOID, x); }

// gx = gy * f'(x), from the forward's input x.
tdm_status tdm_unary_backward(tdm_unary_op op, const tdm_tensor *gy, const tdm_tensor *x,
                              tdm_tensor **gx) {
    TDM_PROFILE_OP(unary_backward_name(op), gy, x);
    if (gx) *gx = NULL;
    const char *name = unary_name(op);
    if (!name) return tdm_error_set(TDM_ERR_ARG, "unary_backward: unknown op %d", (int)op);
    TDM_TRY(tdm_check_tensor(name, "grad_output", gy));
    TDM_TRY(tdm_check_tensor(name, "input", x));
    TDM_TRY(tdm_check_same_device(name, gy, x));
    TDM_TRY(tdm_check_float(name, "input", x));
    TDM_TRY(tdm_check_same_dtype(name, gy, x));
    TDM_TRY(check_grad_shape(name, gy, x->ndim, x->shape));
    if (!gx) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->unary_backward) return tdm_error_unsupported(name, be);
    tdm_tensor *g = empty_like(x);
    if (!g) return tdm_last_status();
    tdm_status s = be->unary_backward(op, gy, x, g);
    if (s != TDM_OK) {
        tdm_tensor_free(g);
        return s;
    }
    *gx = g;
    return TDM_OK;
}

// ---- binary: add, mul ----------------------------------------------------------------------

// Both floating, one dtype (tandem does no type promotion), one device, broadcastable.
static tdm_status check_binary(const char *op, const tdm_tensor *a, const tdm_tensor *b,
                               int *ndim, int64_t *shape) {
    TDM_TRY(tdm_check_tensor(op, "input", a));
    TDM_TRY(tdm_check_tensor(op, "other", b));
    TDM_TRY(tdm_check_same_device(op, a, b));
    TDM_TRY(tdm_check_float(op, "input", a));
    TDM_TRY(tdm_check_float(op, "other", b));
    if (a->dtype != b->dtype)
        return tdm_error_set(TDM_ERR_DTYPE,
                             "%s: input is %s and other is %s: expected the same dtype "
                             "(tandem does no type promotion)",
                             op, tdm_dtype_name(a->dtype), tdm_dtype_name(b->dtype));
    return tdm_broadcast_shapes(op, a, b, ndim, shape);
}

static tdm_tensor *binary_forward(const char *op, tdm_binary_op bop, const tdm_tensor *a,
                                  const tdm_tensor *b, double alpha) {
    int nd;
    int64_t shape[TDM_MAX_DIMS];
    if (check_binary(op, a, b, &nd, shape) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(a);
    if (!be->binary) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *y = tdm_tensor_empty(nd, shape, a->dtype, a->device);
    if (y && be->binary(bop, a, b, alpha, y) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Under autocast both inputs go to the wider dtype of the two; records itself for autograd.
static tdm_tensor *binary(const char *op, tdm_binary_op bop, const tdm_tensor *a,
                          const tdm_tensor *b, double alpha) {
    TDM_PROFILE_OP(op, a, b);
    tdm_autocast_args ac;
    if (tdm_autocast_apply(op, TDM_AUTOCAST_PROMOTE, 2, (const tdm_tensor *[]){a, b}, &ac) !=
        TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = binary_forward(op, bop, ac.in[0], ac.in[1], alpha);
    tdm_grad_set_enabled(grad);
    y = bop == TDM_BINARY_ADD ? tdm_record_add(y, ac.in[0], ac.in[1], alpha)
                              : tdm_record_mul(y, ac.in[0], ac.in[1]);
    tdm_autocast_args_free(&ac);
    return y;
}

tdm_tensor *tdm_add(const tdm_tensor *a, const tdm_tensor *b, double alpha) {
    return binary("add", TDM_BINARY_ADD, a, b, alpha);
}

tdm_tensor *tdm_mul(const tdm_tensor *a, const tdm_tensor *b) {
    return binary("mul", TDM_BINARY_MUL, a, b, 1.0);
}

// Checks gy against the broadcast shape of a and b, and that the backend has what we need.
static tdm_status check_binary_backward(const char *op, const tdm_tensor *gy,
                                        const tdm_tensor *a, const tdm_tensor *b, bool needs_mul) {
    int nd;
    int64_t shape[TDM_MAX_DIMS];
    TDM_TRY(check_binary(op, a, b, &nd, shape));
    TDM_TRY(tdm_check_tensor(op, "grad_output", gy));
    TDM_TRY(tdm_check_same_device(op, gy, a));
    TDM_TRY(tdm_check_same_dtype(op, gy, a));
    TDM_TRY(check_grad_shape(op, gy, nd, shape));
    const struct tdm_backend_ops *be = tdm_backend_of(a);
    if (!be->sum_to || (needs_mul && !be->binary)) return tdm_error_unsupported(op, be);
    return TDM_OK;
}

// g = scale * gy summed down to t's shape (the backward of broadcasting t).
static tdm_status grad_sum_to(const tdm_tensor *gy, double scale, const tdm_tensor *t,
                              tdm_tensor **out) {
    tdm_tensor *g = empty_like(t);
    if (!g) return tdm_last_status();
    tdm_status s = tdm_backend_of(t)->sum_to(gy, scale, g);
    if (s != TDM_OK) {
        tdm_tensor_free(g);
        return s;
    }
    *out = g;
    return TDM_OK;
}

// ga = sum_to(gy, a.shape), gb = alpha * sum_to(gy, b.shape)
tdm_status tdm_add_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                            double alpha, tdm_tensor **ga, tdm_tensor **gb) {
    TDM_PROFILE_OP("add_backward", gy, a, b);
    if (ga) *ga = NULL;
    if (gb) *gb = NULL;
    TDM_TRY(check_binary_backward("add", gy, a, b, false));
    if (ga) TDM_TRY(grad_sum_to(gy, 1.0, a, ga));
    if (gb) {
        tdm_status s = grad_sum_to(gy, alpha, b, gb);
        if (s != TDM_OK) {
            if (ga) {
                tdm_tensor_free(*ga);
                *ga = NULL;
            }
            return s;
        }
    }
    return TDM_OK;
}

// g = sum_to(gy * other, t.shape): the product at gy's shape, then summed down to t's. With
// broadcasting, f16/bf16 work in f32 (the accumulation dtype, as under autocast) and round once
// at the end: a product rounded to f16 before the sum would add a rounding of its own.
static tdm_status mul_grad(const tdm_tensor *gy, const tdm_tensor *other, const tdm_tensor *t,
                           tdm_tensor **out) {
    const struct tdm_backend_ops *be = tdm_backend_of(t);
    tdm_tensor *g = empty_like(t);
    if (!g) return tdm_last_status();
    tdm_status s;
    if (same_shape(t, gy)) {   // nothing to sum: the product is the gradient
        s = be->binary(TDM_BINARY_MUL, gy, other, 1.0, g);
    } else {
        tdm_dtype acc = t->dtype == TDM_DTYPE_F16 || t->dtype == TDM_DTYPE_BF16 ? TDM_DTYPE_F32
                                                                                : t->dtype;
        bool widen = acc != t->dtype;
        tdm_tensor *gy_w = widen ? tdm_tensor_to(gy, gy->device, acc) : NULL;
        tdm_tensor *other_w = widen ? tdm_tensor_to(other, other->device, acc) : NULL;
        tdm_tensor *sum_w = widen ? tdm_tensor_empty(t->ndim, t->shape, acc, t->device) : NULL;
        tdm_tensor *prod = tdm_tensor_empty(gy->ndim, gy->shape, acc, gy->device);
        if (!prod || (widen && (!gy_w || !other_w || !sum_w))) {
            s = tdm_last_status();
        } else {
            s = be->binary(TDM_BINARY_MUL, widen ? gy_w : gy, widen ? other_w : other, 1.0, prod);
            if (s == TDM_OK) s = be->sum_to(prod, 1.0, widen ? sum_w : g);
            if (s == TDM_OK && widen) s = be->cast(g, sum_w);
        }
        tdm_tensor_free(gy_w);
        tdm_tensor_free(other_w);
        tdm_tensor_free(sum_w);
        tdm_tensor_free(prod);
    }
    if (s != TDM_OK) {
        tdm_tensor_free(g);
        return s;
    }
    *out = g;
    return TDM_OK;
}

// ga = sum_to(gy * b, a.shape), gb = sum_to(gy * a, b.shape)
tdm_status tdm_mul_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                            tdm_tensor **ga, tdm_tensor **gb) {
    TDM_PROFILE_OP("mul_backward", gy, a, b);
    if (ga) *ga = NULL;
    if (gb) *gb = NULL;
    TDM_TRY(check_binary_backward("mul", gy, a, b, true));
    if (ga) TDM_TRY(mul_grad(gy, b, a, ga));
    if (gb) {
        tdm_status s = mul_grad(gy, a, b, gb);
        if (s != TDM_OK) {
            if (ga) {
                tdm_tensor_free(*ga);
                *ga = NULL;
            }
            return s;
        }
    }
    return TDM_OK;
}

// ---- dropout -------------------------------------------------------------------------------

// y = x * mask * 1/(1-p), the mask from (seed, offset) — offset + *delta, read on the device, when
// delta is not NULL (a random stream's draw under graph capture, core/random.c); training false
// or p == 0: a copy of x.
static tdm_tensor *dropout(const char *op, const char *arg, const tdm_tensor *x, double p,
                           bool training, uint64_t seed, uint64_t offset, const uint64_t *delta) {
    if (tdm_check_tensor(op, arg, x) || tdm_check_float(op, arg, x)) return NULL;
    if (!(p >= 0.0 && p <= 1.0)) {   // NaN fails too
        tdm_error_set(TDM_ERR_ARG, "%s: probability has to be between 0 and 1, but got %g", op,
                      p);
        return NULL;
    }
    if (!training || p == 0.0) return tdm_tensor_clone(x);
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (delta && !tdm_graph_is_capturing(x->device)) {
        tdm_error_set(TDM_ERR_ARG, "%s: its forward was captured in a CUDA graph: run the "
                                   "backward in the same capture", op);
        return NULL;
    }
    if (delta ? !be->dropout_dev : !be->dropout) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *y = empty_like(x);
    if (y && (delta ? be->dropout_dev(x, p, seed, offset, delta, y)
                    : be->dropout(x, p, seed, offset, y)) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Records itself for autograd: the node keeps (p, training, seed, offset, delta) to redraw the mask.
tdm_tensor *tdm_dropout_at(const tdm_tensor *x, double p, bool training, uint64_t seed,
                           uint64_t offset, const uint64_t *delta) {
    TDM_PROFILE_OP("dropout", x);
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = dropout("dropout", "input", x, p, training, seed, offset, delta);
    tdm_grad_set_enabled(grad);
    return tdm_record_dropout(y, x, p, training, seed, offset, delta);
}

tdm_tensor *tdm_dropout(const tdm_tensor *x, double p, bool training, uint64_t seed,
                        uint64_t offset) {
    return tdm_dropout_at(x, p, training, seed, offset, NULL);
}

// The same mask and scale applied to gy.
tdm_status tdm_dropout_backward_at(const tdm_tensor *gy, double p, bool training, uint64_t seed,
                                   uint64_t offset, const uint64_t *delta, tdm_tensor **gx) {
    TDM_PROFILE_OP("dropout_backward", gy);
    if (gx) *gx = NULL;
    if (!gx) {   // nothing wanted: only check the arguments
        TDM_TRY(tdm_check_tensor("dropout_backward", "grad_output", gy));
        TDM_TRY(tdm_check_float("dropout_backward", "grad_output", gy));
        if (!(p >= 0.0 && p <= 1.0))
            return tdm_error_set(TDM_ERR_ARG,
                                 "dropout_backward: probability has to be between 0 and 1, "
                                 "but got %g",
                                 p);
        return TDM_OK;
    }
    *gx = dropout("dropout_backward", "grad_output", gy, p, training, seed, offset, delta);
    return *gx ? TDM_OK : tdm_last_status();
}

tdm_status tdm_dropout_backward(const tdm_tensor *gy, double p, bool training, uint64_t seed,
                                uint64_t offset, tdm_tensor **gx) {
    return tdm_dropout_backward_at(gy, p, training, seed, offset, NULL, gx);
}
