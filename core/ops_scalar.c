/* ops_scalar.c — a tensor and a Python number (ops.h): a + s, a - s, s - a, a * s, a / s, s / a,
 * forward and backward, through the backend's `binary_scalar` slots, with PyTorch's type
 * promotion for a number operand (a "wrapped number" does not widen a tensor of its category):
 *
 *     a floating            -> a's dtype (bf16 stays bf16), s taken in the compute dtype
 *     a integer, s float    -> f32 (the default dtype)
 *     a integer, s integer  -> a's dtype for add, sub, rsub, mul; f32 for div, rdiv (true division)
 *
 * Each forward records itself for autograd (core/autograd_ops.c); no autocast (PyTorch's lists
 * do not hold these ops: a bf16 activation times 0.5 stays bf16 under autocast too). */
#include "core/autograd_impl.h"
#include "core/profile_impl.h"

static const char *const NAMES[] = {"add", "sub", "rsub", "mul", "div", "rdiv"};
static const char *const BACKWARD_NAMES[] = {"add_backward", "sub_backward", "rsub_backward",
                                             "mul_backward", "div_backward", "rdiv_backward"};

static bool op_valid(tdm_scalar_op op) {
    return (unsigned)op <= TDM_SCALAR_RDIV;
}

static bool is_integer(tdm_dtype dt) {
    return dt == TDM_DTYPE_I32 || dt == TDM_DTYPE_I64;
}

// The result's dtype (table above).
static tdm_dtype result_dtype(tdm_scalar_op op, tdm_dtype a, bool s_is_int) {
    if (tdm_dtype_is_float(a)) return a;
    const bool division = op == TDM_SCALAR_DIV || op == TDM_SCALAR_RDIV;
    return s_is_int && !division ? a : TDM_DTYPE_F32;
}

static tdm_tensor *forward(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s) {
    const char *name = NAMES[op];
    if (tdm_check_tensor(name, "input", a) != TDM_OK) return NULL;
    if (!tdm_dtype_is_float(a->dtype) && !is_integer(a->dtype)) {
        tdm_error_set(TDM_ERR_DTYPE,
                      "%s: input has dtype %s; a number goes with a floating or "
                      "integer tensor (convert it with tdm_tensor_to first)",
                      name, tdm_dtype_name(a->dtype));
        return NULL;
    }
    const struct tdm_backend_ops *be = tdm_backend_of(a);
    if (!be->binary_scalar) {
        tdm_error_unsupported(name, be);
        return NULL;
    }
    tdm_tensor *y =
        tdm_tensor_empty(a->ndim, a->shape, result_dtype(op, a->dtype, s->is_int), a->device);
    if (y && y->numel > 0 && be->binary_scalar(op, a, s, y) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

static tdm_tensor *binary_scalar(tdm_scalar_op op, const tdm_tensor *a, const tdm_scalar *s) {
    if (!op_valid(op)) {
        tdm_error_set(TDM_ERR_ARG, "binary_scalar: unknown op %d", (int)op);
        return NULL;
    }
    TDM_PROFILE_OP(NAMES[op], a);
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = forward(op, a, s);
    tdm_grad_set_enabled(grad);
    return tdm_record_binary_scalar(y, a, op, s->f);
}

tdm_tensor *tdm_binary_scalar(tdm_scalar_op op, const tdm_tensor *a, double s) {
    tdm_scalar v = {false, 0, s};
    return binary_scalar(op, a, &v);
}

tdm_tensor *tdm_binary_scalar_int(tdm_scalar_op op, const tdm_tensor *a, int64_t s) {
    tdm_scalar v = {true, s, (double)s};
    return binary_scalar(op, a, &v);
}

tdm_tensor *tdm_add_scalar(const tdm_tensor *a, double s) {
    return tdm_binary_scalar(TDM_SCALAR_ADD, a, s);
}
tdm_tensor *tdm_sub_scalar(const tdm_tensor *a, double s) {
    return tdm_binary_scalar(TDM_SCALAR_SUB, a, s);
}
tdm_tensor *tdm_rsub_scalar(const tdm_tensor *a, double s) {
    return tdm_binary_scalar(TDM_SCALAR_RSUB, a, s);
}
tdm_tensor *tdm_mul_scalar(const tdm_tensor *a, double s) {
    return tdm_binary_scalar(TDM_SCALAR_MUL, a, s);
}
tdm_tensor *tdm_div_scalar(const tdm_tensor *a, double s) {
    return tdm_binary_scalar(TDM_SCALAR_DIV, a, s);
}
tdm_tensor *tdm_rdiv_scalar(const tdm_tensor *a, double s) {
    return tdm_binary_scalar(TDM_SCALAR_RDIV, a, s);
}

tdm_status tdm_binary_scalar_backward(tdm_scalar_op op, const tdm_tensor *gy, const tdm_tensor *a,
                                      double s, tdm_tensor **ga) {
    if (ga) *ga = NULL;
    if (!op_valid(op))
        return tdm_error_set(TDM_ERR_ARG, "binary_scalar_backward: unknown op %d", (int)op);
    const char *name = BACKWARD_NAMES[op];
    TDM_PROFILE_OP(name, gy, a);
    TDM_TRY(tdm_check_tensor(name, "grad_output", gy));
    TDM_TRY(tdm_check_tensor(name, "input", a));
    TDM_TRY(tdm_check_same_device(name, gy, a));
    TDM_TRY(tdm_check_float(name, "input", a));
    TDM_TRY(tdm_check_same_dtype(name, gy, a));
    bool same = gy->ndim == a->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = gy->shape[d] == a->shape[d];
    if (!same) {
        char g[96], x[96];
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: grad_output %s does not match the output shape "
                             "%s",
                             name, tdm_shape_str(gy->ndim, gy->shape, g, sizeof g),
                             tdm_shape_str(a->ndim, a->shape, x, sizeof x));
    }
    if (!ga) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(a);
    if (!be->binary_scalar_backward) return tdm_error_unsupported(name, be);
    tdm_tensor *g = tdm_tensor_empty(a->ndim, a->shape, a->dtype, a->device);
    if (!g) return tdm_last_status();
    tdm_scalar v = {false, 0, s};
    tdm_status st = g->numel ? be->binary_scalar_backward(op, gy, a, &v, g) : TDM_OK;
    if (st != TDM_OK) {
        tdm_tensor_free(g);
        return st;
    }
    *ga = g;
    return TDM_OK;
}
