/* ops_linalg.c — the public matrix products, convolution and pooling: linear, matmul, conv2d,
 * max_pool2d, avg_pool2d, forward and backward. Each checks its arguments with PyTorch's rules
 * (and a message naming the op and the shapes), allocates the outputs on the input's device, and
 * calls the backend. Backends see 2-D (rows, features) tensors for linear and 4-D tensors for
 * conv (NCHW or NHWC, as its params say) and pooling (NCHW): core makes those views.
 *
 * Each public forward applies the autocast policy to its inputs first and records itself for
 * autograd last (core/autograd_impl.h); its body runs with grad mode off. */
#include <string.h>

#include "core/autograd_impl.h"
#include "core/profile_impl.h"

#define SHAPE(t, buf) tdm_shape_str((t)->ndim, (t)->shape, buf, sizeof buf)

// ----------------------------------------------------------------------------
// shared helpers

// t is present, floating, and (when ref is given) on ref's device with ref's dtype.
static tdm_status check_operand(const char *op, const char *name, const tdm_tensor *t,
                                const tdm_tensor *ref) {
    TDM_TRY(tdm_check_tensor(op, name, t));
    TDM_TRY(tdm_check_float(op, name, t));
    TDM_TRY(tdm_check_same_device(op, ref, t));
    return tdm_check_same_dtype(op, ref, t);
}

static tdm_status check_grad_shape(const char *op, const tdm_tensor *gy, int ndim,
                                   const int64_t *shape) {
    bool same = gy->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = gy->shape[i] == shape[i];
    if (same) return TDM_OK;
    char a[96], b[96];
    return tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output has shape %s, expected %s", op,
                         SHAPE(gy, a), tdm_shape_str(ndim, shape, b, sizeof b));
}

static tdm_tensor *empty_like_shape(const tdm_tensor *like, int ndim, const int64_t *shape) {
    return tdm_tensor_empty(ndim, shape, like->dtype, like->device);
}

// A view of t with the given shape (same numel).
static tdm_tensor *view(const tdm_tensor *t, int ndim, const int64_t *shape) {
    return t ? tdm_tensor_reshape(t, ndim, shape) : NULL;
}

static tdm_tensor *view2(const tdm_tensor *t, int64_t rows, int64_t cols) {
    return view(t, 2, (int64_t[]){rows, cols});
}

// A 4-D (N,C,H,W) view of a 4-D tensor or of a 3-D (C,H,W) one (N = 1); likewise (N,H,W,C).
static tdm_tensor *view4(const tdm_tensor *t) {
    if (!t) return NULL;
    if (t->ndim == 4) return view(t, 4, t->shape);
    return view(t, 4, (int64_t[]){1, t->shape[0], t->shape[1], t->shape[2]});
}

static void free_all(tdm_tensor **ts, int n) {
    for (int i = 0; i < n; i++) tdm_tensor_free(ts[i]);
}

// Hands a gradient to the caller's out-pointer on success, frees it otherwise.
static void give(tdm_tensor **out, tdm_tensor *t, tdm_status s) {
    if (out && s == TDM_OK) *out = t;
    else tdm_tensor_free(t);
}

static void clear_outs(tdm_tensor **a, tdm_tensor **b, tdm_tensor **c) {
    if (a) *a = NULL;
    if (b) *b = NULL;
    if (c) *c = NULL;
}

// ----------------------------------------------------------------------------
// linear: x (..., in), weight (out, in), bias (out) or NULL -> y (..., out)

static tdm_status linear_check(const char *op, const tdm_tensor *x, const tdm_tensor *w,
                               const tdm_tensor *b, int *ndim, int64_t *yshape, int64_t *rows) {
    TDM_TRY(check_operand(op, "input", x, NULL));
    TDM_TRY(check_operand(op, "weight", w, x));
    if (b) TDM_TRY(check_operand(op, "bias", b, x));
    char s1[96], s2[96];
    if (x->ndim < 1)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: input must have at least 1 dim, got shape %s",
                             op, SHAPE(x, s1));
    TDM_TRY(tdm_check_ndim(op, "weight", w, 2, 2));
    const int64_t in = x->shape[x->ndim - 1], out = w->shape[0];
    if (in != w->shape[1])
        return tdm_error_set(TDM_ERR_SHAPE, "%s: input %s and weight %s: in_features %lld != %lld",
                             op, SHAPE(x, s1), SHAPE(w, s2), (long long)in,
                             (long long)w->shape[1]);
    if (b && (b->ndim != 1 || b->shape[0] != out))
        return tdm_error_set(TDM_ERR_SHAPE, "%s: weight %s needs a bias of shape (%lld), got %s",
                             op, SHAPE(w, s1), (long long)out, SHAPE(b, s2));
    *ndim = x->ndim;
    *rows = 1;
    for (int i = 0; i < x->ndim - 1; i++) {
        yshape[i] = x->shape[i];
        *rows *= x->shape[i];
    }
    yshape[x->ndim - 1] = out;
    return TDM_OK;
}

static tdm_tensor *linear_forward(const tdm_tensor *x, const tdm_tensor *weight,
                                  const tdm_tensor *bias) {
    const char *op = "linear";
    int ndim;
    int64_t yshape[TDM_MAX_DIMS], rows;
    if (linear_check(op, x, weight, bias, &ndim, yshape, &rows) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->linear) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    const int64_t in = weight->shape[1], out = weight->shape[0];
    tdm_tensor *y = empty_like_shape(x, ndim, yshape);
    tdm_tensor *v[2] = {view2(x, rows, in), view2(y, rows, out)};   // x2, y2
    tdm_status s = y && v[0] && v[1] ? be->linear(v[0], weight, bias, v[1]) : tdm_last_status();
    free_all(v, 2);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Autocast: runs in the lower precision. Records itself for autograd.
tdm_tensor *tdm_linear(const tdm_tensor *x, const tdm_tensor *weight, const tdm_tensor *bias) {
    TDM_PROFILE_OP("linear", x, weight, bias);
    tdm_autocast_args ac;
    if (tdm_autocast_apply("linear", TDM_AUTOCAST_LOWER, 3, (const tdm_tensor *[]){x, weight, bias},
                           &ac) != TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = linear_forward(ac.in[0], ac.in[1], ac.in[2]);
    tdm_grad_set_enabled(grad);
    if (y) TDM_PROFILE_FLOPS(2.0 * (double)y->numel * (double)weight->shape[1]);   // 2*M*N*K
    y = tdm_record_linear(y, ac.in[0], ac.in[1], ac.in[2]);
    tdm_autocast_args_free(&ac);
    return y;
}

tdm_status tdm_linear_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *weight,
                               tdm_tensor **gx, tdm_tensor **gweight, tdm_tensor **gbias) {
    const char *op = "linear_backward";
    TDM_PROFILE_OP(op, gy, x, weight);
    clear_outs(gx, gweight, gbias);
    int ndim;
    int64_t yshape[TDM_MAX_DIMS], rows;
    TDM_TRY(linear_check(op, x, weight, NULL, &ndim, yshape, &rows));
    TDM_TRY(check_operand(op, "grad_output", gy, x));
    TDM_TRY(check_grad_shape(op, gy, ndim, yshape));
    if (!gx && !gweight && !gbias) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->linear_backward) return tdm_error_unsupported(op, be);

    const int64_t in = weight->shape[1], out = weight->shape[0];
    tdm_tensor *tgx = gx ? empty_like_shape(x, x->ndim, x->shape) : NULL;
    tdm_tensor *tgw = gweight ? empty_like_shape(x, 2, weight->shape) : NULL;
    tdm_tensor *tgb = gbias ? empty_like_shape(x, 1, (int64_t[]){out}) : NULL;
    tdm_tensor *v[3] = {view2(gy, rows, out), view2(x, rows, in), view2(tgx, rows, in)};
    tdm_status s;
    if ((gx && !tgx) || (gweight && !tgw) || (gbias && !tgb) || !v[0] || !v[1] || (tgx && !v[2]))
        s = tdm_last_status();
    else
        s = be->linear_backward(v[0], v[1], weight, v[2], tgw, tgb);
    // 2*M*N*K for each of gx = gy w and gw = gy^T x
    TDM_PROFILE_FLOPS(2.0 * (double)rows * (double)in * (double)out * ((gx != NULL) + (gweight != NULL)));
    free_all(v, 3);
    give(gx, tgx, s);
    give(gweight, tgw, s);
    give(gbias, tgb, s);
    return s;
}

// ----------------------------------------------------------------------------
// linear -> GELU (tanh) -> linear: the transformer MLP, with the backend's fused epilogues
//
// Forward: pre = x w1^T + b1 and h = gelu_tanh(pre) in one product (linear_gelu), then
// y = h w2^T + b2. Recorded as linear (x, w1, b1 -> pre) and gelu_linear (pre, w2, b2 -> y, h
// saved), whose backward gives w2's and b2's gradients from h as linear's does and pre's in one
// product with GELU's backward in its epilogue (linear_dgelu_backward).

// Do the (post-autocast) operands take the fused path? One device with both slots, fusions on,
// one floating dtype other than f64 (cuBLASLt's GELU epilogues compute in f32).
static bool gelu_mlp_fuses(const tdm_tensor *x, const tdm_tensor *const *params) {
    if (!x || !tdm_fusions_enabled() || !tdm_backend_of(x)->linear_gelu ||
        !tdm_backend_of(x)->linear_dgelu_backward)
        return false;
    if (x->dtype != TDM_DTYPE_F32 && x->dtype != TDM_DTYPE_F16 && x->dtype != TDM_DTYPE_BF16)
        return false;
    for (int i = 0; i < 4; i++) {
        const tdm_tensor *t = params[i];
        if (i % 2 == 0 && !t) return false;   // the weights
        if (t && (t->dtype != x->dtype || t->device.type != x->device.type ||
                  t->device.index != x->device.index))
            return false;
    }
    return true;
}

// gpre (..., in) = (gy (..., out) w (out, in)) * gelu_tanh'(pre (..., in)): gelu_linear's input
// gradient, through the backend's fused slot.
static tdm_status linear_dgelu_backward(const tdm_tensor *gy, const tdm_tensor *w,
                                        const tdm_tensor *pre, tdm_tensor **gpre) {
    const char *op = "linear_dgelu_backward";
    TDM_PROFILE_OP(op, gy, w, pre);
    *gpre = NULL;
    int ndim;
    int64_t yshape[TDM_MAX_DIMS], rows;
    TDM_TRY(linear_check(op, pre, w, NULL, &ndim, yshape, &rows));
    TDM_TRY(check_operand(op, "grad_output", gy, pre));
    TDM_TRY(check_grad_shape(op, gy, ndim, yshape));
    const struct tdm_backend_ops *be = tdm_backend_of(pre);
    if (!be->linear_dgelu_backward) return tdm_error_unsupported(op, be);
    const int64_t in = w->shape[1], out = w->shape[0];
    tdm_tensor *g = empty_like_shape(pre, pre->ndim, pre->shape);
    tdm_tensor *v[3] = {view2(gy, rows, out), view2(pre, rows, in), view2(g, rows, in)};
    tdm_status s = g && v[0] && v[1] && v[2] ? be->linear_dgelu_backward(v[0], w, v[1], v[2])
                                             : tdm_last_status();
    TDM_PROFILE_FLOPS(2.0 * (double)rows * (double)in * (double)out);
    free_all(v, 3);
    give(gpre, g, s);
    return s;
}

// inputs: pre, w2, b2 (or NULL); saved: h = gelu_tanh(pre) as the forward computed it
static tdm_status gelu_linear_bw(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **g) {
    const bool gw = tdm_node_wants(n, 1), gb = tdm_node_wants(n, 2);
    if (gw || gb)
        TDM_TRY(tdm_linear_backward(gy, n->saved[0], n->inputs[1], NULL, gw ? &g[1] : NULL,
                                    gb ? &g[2] : NULL));
    return tdm_node_wants(n, 0) ? linear_dgelu_backward(gy, n->inputs[1], n->inputs[0], &g[0])
                                : TDM_OK;
}

// The fused forward: y from x and the (post-autocast) parameters, *pre and *h kept for autograd.
static tdm_tensor *gelu_mlp_forward(const tdm_tensor *x, const tdm_tensor *const *p,
                                    tdm_tensor **pre, tdm_tensor **h) {
    const char *op = "linear";
    int ndim;
    int64_t shape[TDM_MAX_DIMS], rows;
    *pre = *h = NULL;
    if (linear_check(op, x, p[0], p[1], &ndim, shape, &rows) != TDM_OK) return NULL;
    const int64_t in = p[0]->shape[1], hidden = p[0]->shape[0];
    *pre = empty_like_shape(x, ndim, shape);
    *h = empty_like_shape(x, ndim, shape);
    tdm_tensor *v[3] = {view2(x, rows, in), view2(*pre, rows, hidden), view2(*h, rows, hidden)};
    tdm_status s = *pre && *h && v[0] && v[1] && v[2]
                       ? tdm_backend_of(x)->linear_gelu(v[0], p[0], p[1], v[1], v[2])
                       : tdm_last_status();
    free_all(v, 3);
    return s == TDM_OK ? linear_forward(*h, p[2], p[3]) : NULL;
}

tdm_tensor *tdm_linear_gelu_linear(const tdm_tensor *x, const tdm_tensor *fc_weight,
                                   const tdm_tensor *fc_bias, const tdm_tensor *proj_weight,
                                   const tdm_tensor *proj_bias) {
    TDM_PROFILE_OP("linear_gelu_linear", x, fc_weight, proj_weight);
    tdm_autocast_args ac;   // linear's policy for all five (a recorded cast each, as linear's)
    if (tdm_autocast_apply("linear", TDM_AUTOCAST_LOWER, 4,
                           (const tdm_tensor *[]){x, fc_weight, fc_bias, proj_weight}, &ac) !=
        TDM_OK)
        return NULL;
    tdm_autocast_args acb;
    if (tdm_autocast_apply("linear", TDM_AUTOCAST_LOWER, 1, (const tdm_tensor *[]){proj_bias},
                           &acb) != TDM_OK) {
        tdm_autocast_args_free(&ac);
        return NULL;
    }
    const tdm_tensor *p[4] = {ac.in[1], ac.in[2], ac.in[3], acb.in[0]};
    x = ac.in[0];
    tdm_tensor *y = NULL;
    if (!gelu_mlp_fuses(x, p)) {   // the three ops
        tdm_tensor *a = tdm_linear(x, p[0], p[1]);
        tdm_tensor *h = a ? tdm_gelu(a, true) : NULL;
        y = h ? tdm_linear(h, p[2], p[3]) : NULL;
        tdm_tensor_free(a);
        tdm_tensor_free(h);
    } else {
        tdm_tensor *pre, *h;
        bool grad = tdm_grad_set_enabled(false);
        y = gelu_mlp_forward(x, p, &pre, &h);
        tdm_grad_set_enabled(grad);
        if (y)   // 2*M*N*K for each product
            TDM_PROFILE_FLOPS(2.0 * (double)pre->numel * (double)p[0]->shape[1] +
                              2.0 * (double)y->numel * (double)p[0]->shape[0]);
        if (y) pre = tdm_record_linear(pre, x, p[0], p[1]);   // (..., hidden)
        if (y && !pre) {
            tdm_tensor_free(y);
            y = NULL;
        }
        y = tdm_autograd_record(y, "gelu_linear", gelu_linear_bw, 3,
                                (const tdm_tensor *[]){pre, p[2], p[3]}, NULL, 1,
                                (const tdm_tensor *[]){h});   // (..., out)
        tdm_tensor_free(pre);
        tdm_tensor_free(h);
    }
    tdm_autocast_args_free(&ac);
    tdm_autocast_args_free(&acb);
    return y;
}

// ----------------------------------------------------------------------------
// matmul, torch.matmul's rules: a 1-D a is a row (1,k) and a 1-D b a column (k,1), the added dim
// dropped from the result; the dims before the last two are batch dims, broadcast against each
// other: (j,1,n,k)@(l,k,m) -> (j,l,n,m). The backend sees one of (n,k)@(k,m), (B,n,k)@(B,k,m),
// (B,n,k)@(k,m), (n,k)@(B,k,m): an operand whose batch dims hold one matrix is 2-D (the backend
// broadcasts it and sums its gradient over the batch); one whose batch dims are the broadcast
// batch is viewed 3-D; any other is expanded to the broadcast batch first (materialized), and its
// gradient summed back down (sum_to).

typedef struct {
    int64_t n, k, m;                       // rows of a, the contracted dim, columns of b
    int bnd;                               // the broadcast batch dims
    int64_t bs[TDM_MAX_DIMS], batch;       // and their product
    int ndim;                              // the result's shape
    int64_t yshape[TDM_MAX_DIMS];
    // per operand (0 = a, 1 = b): as a matrix (n,k) / (k,m) with its batch dims
    int mnd[2];                            // ndim of the operand as a matrix (a 1-D one gains one)
    int64_t mshape[2][TDM_MAX_DIMS];
    int64_t mbatch[2];                     // the product of its batch dims
} matmul_plan;

static tdm_status matmul_check(const char *op, const tdm_tensor *a, const tdm_tensor *b,
                               matmul_plan *mp) {
    TDM_TRY(check_operand(op, "input", a, NULL));
    TDM_TRY(check_operand(op, "other", b, a));
    char s1[96], s2[96];
    if (a->ndim < 1 || b->ndim < 1)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: input %s and other %s: both arguments need at "
                             "least 1 dimension", op, SHAPE(a, s1), SHAPE(b, s2));
    memset(mp, 0, sizeof *mp);
    // the operands as matrices: a (…,n,k), b (…,k,m)
    const tdm_tensor *t[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        const int nd = t[i]->ndim;
        mp->mnd[i] = nd == 1 ? 2 : nd;
        for (int d = 0; d < nd; d++) mp->mshape[i][d + (nd == 1 && i == 0)] = t[i]->shape[d];
        if (nd == 1) mp->mshape[i][i == 0 ? 0 : 1] = 1;   // a: (1,k); b: (k,1)
        mp->mbatch[i] = tdm_shape_numel(mp->mnd[i] - 2, mp->mshape[i]);
    }
    const int64_t *ma = mp->mshape[0], *mb = mp->mshape[1];
    const int la = mp->mnd[0] - 2, lb = mp->mnd[1] - 2;
    mp->n = ma[la], mp->k = ma[la + 1], mp->m = mb[lb + 1];
    if (mp->k != mb[lb])
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: input %s and other %s cannot be multiplied (k %lld != %lld)", op,
                             SHAPE(a, s1), SHAPE(b, s2), (long long)mp->k, (long long)mb[lb]);
    // broadcast the batch dims, right-aligned
    mp->bnd = la > lb ? la : lb;
    mp->batch = 1;
    for (int d = 0; d < mp->bnd; d++) {
        const int da = d - (mp->bnd - la), db = d - (mp->bnd - lb);
        const int64_t x = da >= 0 ? ma[da] : 1, y = db >= 0 ? mb[db] : 1;
        if (x != y && x != 1 && y != 1)
            return tdm_error_set(TDM_ERR_SHAPE,
                                 "%s: input %s and other %s: batch dims do not broadcast (%lld vs "
                                 "%lld)", op, SHAPE(a, s1), SHAPE(b, s2), (long long)x,
                                 (long long)y);
        mp->bs[d] = x == 1 ? y : x;
        mp->batch *= mp->bs[d];
    }
    if (mp->bnd + 2 > TDM_MAX_DIMS)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: the result would have more than %d dims", op,
                             TDM_MAX_DIMS);
    for (int d = 0; d < mp->bnd; d++) mp->yshape[mp->ndim++] = mp->bs[d];
    if (a->ndim > 1) mp->yshape[mp->ndim++] = mp->n;
    if (b->ndim > 1) mp->yshape[mp->ndim++] = mp->m;
    return TDM_OK;
}

// Must operand i be materialized at the broadcast batch (its batch dims hold more than one
// matrix but fewer than the broadcast batch)?
static bool matmul_expands(const matmul_plan *mp, int i) {
    return !(mp->mbatch[i] == 1 && mp->batch != 0) && mp->mbatch[i] != mp->batch;
}

// Operand i as the backend takes it: 2-D when its batch dims hold one matrix, 3-D (batch, r, c)
// when they are the broadcast batch, else NULL with *expand set (matmul_operand_expanded).
static tdm_tensor *matmul_operand(const matmul_plan *mp, int i, const tdm_tensor *t,
                                  bool *expand) {
    const int64_t *sh = mp->mshape[i];
    const int64_t r = sh[mp->mnd[i] - 2], c = sh[mp->mnd[i] - 1];
    *expand = matmul_expands(mp, i);
    if (*expand) return NULL;
    if (mp->mbatch[i] == 1) return view2(t, r, c);
    return view(t, 3, (int64_t[]){mp->batch, r, c});
}

// Operand i materialized at the broadcast batch, as (batch, r, c).
static tdm_tensor *matmul_operand_expanded(const matmul_plan *mp, int i, const tdm_tensor *t) {
    const int64_t *sh = mp->mshape[i];
    const int64_t r = sh[mp->mnd[i] - 2], c = sh[mp->mnd[i] - 1];
    int64_t full[TDM_MAX_DIMS];
    memcpy(full, mp->bs, (size_t)mp->bnd * sizeof *full);
    full[mp->bnd] = r, full[mp->bnd + 1] = c;
    const struct tdm_backend_ops *be = tdm_backend_of(t);
    if (!be->expand) {
        tdm_error_unsupported("matmul", be);
        return NULL;
    }
    tdm_tensor *src = view(t, mp->mnd[i], sh);
    tdm_tensor *e = tdm_tensor_empty(mp->bnd + 2, full, t->dtype, t->device);
    tdm_status s = src && e ? be->expand(src, 1.0, e) : tdm_last_status();
    tdm_tensor_free(src);
    tdm_tensor *v = s == TDM_OK ? view(e, 3, (int64_t[]){mp->batch, r, c}) : NULL;
    tdm_tensor_free(e);
    return v;
}

// Both operands as the backend takes them (new references in out[2]).
static tdm_status matmul_operands(const matmul_plan *mp, const tdm_tensor *a, const tdm_tensor *b,
                                  tdm_tensor *out[2], bool expanded[2]) {
    const tdm_tensor *t[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        out[i] = matmul_operand(mp, i, t[i], &expanded[i]);
        if (expanded[i]) out[i] = matmul_operand_expanded(mp, i, t[i]);
        if (!out[i]) {
            tdm_tensor_free(out[i ? 0 : 1]);
            out[0] = out[1] = NULL;
            return tdm_last_status();
        }
    }
    return TDM_OK;
}

// The result (or its gradient) as the backend writes it: (batch, n, m), or (n, m) when neither
// operand is batched.
static tdm_tensor *matmul_result_view(const tdm_tensor *const op[2], tdm_tensor *y,
                                      const matmul_plan *mp) {
    if (op[0]->ndim == 3 || op[1]->ndim == 3)
        return view(y, 3, (int64_t[]){mp->batch, mp->n, mp->m});
    return view2(y, mp->n, mp->m);
}

static tdm_tensor *matmul_forward(const tdm_tensor *a, const tdm_tensor *b) {
    const char *op = "matmul";
    matmul_plan mp;
    if (matmul_check(op, a, b, &mp) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(a);
    if (!be->matmul) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *y = empty_like_shape(a, mp.ndim, mp.yshape);
    if (!y || y->numel == 0) return y;
    tdm_tensor *ops[2] = {NULL, NULL};
    bool expanded[2];
    tdm_status s = matmul_operands(&mp, a, b, ops, expanded);
    tdm_tensor *yv = s == TDM_OK ? matmul_result_view((const tdm_tensor *const *)ops, y, &mp) : NULL;
    if (s == TDM_OK) s = yv ? be->matmul(ops[0], ops[1], yv) : tdm_last_status();
    tdm_tensor_free(yv);
    free_all(ops, 2);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Autocast: runs in the lower precision. Records itself for autograd.
tdm_tensor *tdm_matmul(const tdm_tensor *a, const tdm_tensor *b) {
    TDM_PROFILE_OP("matmul", a, b);
    tdm_autocast_args ac;
    if (tdm_autocast_apply("matmul", TDM_AUTOCAST_LOWER, 2, (const tdm_tensor *[]){a, b}, &ac) !=
        TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = matmul_forward(ac.in[0], ac.in[1]);
    tdm_grad_set_enabled(grad);
    if (y) TDM_PROFILE_FLOPS(2.0 * (double)y->numel * (double)a->shape[a->ndim - 1]);   // 2*M*N*K
    y = tdm_record_matmul(y, ac.in[0], ac.in[1]);
    tdm_autocast_args_free(&ac);
    return y;
}

// The gradients in f32 from exact f32 copies of f16/bf16 operands, each rounded once to the
// dtype at the end (see tdm_matmul_backward).
static tdm_status matmul_backward_widened(const tdm_tensor *gy, const tdm_tensor *a,
                                          const tdm_tensor *b, tdm_tensor **ga, tdm_tensor **gb) {
    const bool grad = tdm_grad_set_enabled(false);   // internal copies: never recorded
    tdm_tensor *w[3] = {tdm_tensor_to(gy, gy->device, TDM_DTYPE_F32),
                        tdm_tensor_to(a, a->device, TDM_DTYPE_F32),
                        tdm_tensor_to(b, b->device, TDM_DTYPE_F32)};
    tdm_tensor *g32[2] = {NULL, NULL};
    tdm_status s = w[0] && w[1] && w[2] ? tdm_matmul_backward(w[0], w[1], w[2], ga ? &g32[0] : NULL,
                                                              gb ? &g32[1] : NULL)
                                        : tdm_last_status();
    tdm_tensor **out[2] = {ga, gb};
    for (int i = 0; i < 2 && s == TDM_OK; i++) {
        if (!out[i]) continue;
        *out[i] = tdm_tensor_to(g32[i], a->device, a->dtype);
        if (!*out[i]) s = tdm_last_status();
    }
    for (int i = 0; i < 2 && s != TDM_OK; i++) {
        if (!out[i]) continue;
        tdm_tensor_free(*out[i]);
        *out[i] = NULL;
    }
    free_all(g32, 2);
    free_all(w, 3);
    tdm_grad_set_enabled(grad);
    return s;
}

tdm_status tdm_matmul_backward(const tdm_tensor *gy, const tdm_tensor *a, const tdm_tensor *b,
                               tdm_tensor **ga, tdm_tensor **gb) {
    const char *op = "matmul_backward";
    TDM_PROFILE_OP(op, gy, a, b);
    clear_outs(ga, gb, NULL);
    matmul_plan mp;
    TDM_TRY(matmul_check(op, a, b, &mp));
    TDM_TRY(check_operand(op, "grad_output", gy, a));
    TDM_TRY(check_grad_shape(op, gy, mp.ndim, mp.yshape));
    if (!ga && !gb) return TDM_OK;
    // An operand expanded over broadcast batch dims gets its gradient as a sum of per-copy
    // gradients: in f16/bf16 those must not be rounded before the sum (accumulation in f32,
    // one rounding), so the backward runs in f32 and rounds once.
    if ((a->dtype == TDM_DTYPE_F16 || a->dtype == TDM_DTYPE_BF16) && gy->numel > 0 &&
        ((ga && matmul_expands(&mp, 0)) || (gb && matmul_expands(&mp, 1))))
        return matmul_backward_widened(gy, a, b, ga, gb);
    const struct tdm_backend_ops *be = tdm_backend_of(a);
    if (!be->matmul_backward || !be->sum_to) return tdm_error_unsupported(op, be);

    // an empty product (some batch dim or n or m is 0): nothing flows back, the gradients are 0
    tdm_tensor *(*alloc)(int, const int64_t *, tdm_dtype, tdm_device) =
        gy->numel == 0 ? tdm_tensor_zeros : tdm_tensor_empty;
    tdm_tensor *tga = ga ? alloc(a->ndim, a->shape, a->dtype, a->device) : NULL;
    tdm_tensor *tgb = gb ? alloc(b->ndim, b->shape, a->dtype, a->device) : NULL;
    tdm_status s = (ga && !tga) || (gb && !tgb) ? tdm_last_status() : TDM_OK;
    if (s == TDM_OK && gy->numel > 0) {
        tdm_tensor *ops[2] = {NULL, NULL}, *g[2] = {NULL, NULL}, *out[2] = {tga, tgb};
        bool expanded[2];
        s = matmul_operands(&mp, a, b, ops, expanded);
        // each gradient in the operand's backend form: a view of the result, or scratch of the
        // expanded operand's shape, summed down to the operand below
        for (int i = 0; i < 2 && s == TDM_OK; i++) {
            if (!out[i]) continue;
            g[i] = expanded[i] ? empty_like_shape(a, 3, ops[i]->shape)
                               : view(out[i], ops[i]->ndim, ops[i]->shape);
            if (!g[i]) s = tdm_last_status();
        }
        tdm_tensor *gyv = s == TDM_OK ? matmul_result_view((const tdm_tensor *const *)ops,
                                                           (tdm_tensor *)gy, &mp)
                                      : NULL;
        if (s == TDM_OK) s = gyv ? be->matmul_backward(gyv, ops[0], ops[1], g[0], g[1])
                                 : tdm_last_status();
        for (int i = 0; i < 2 && s == TDM_OK; i++) {
            if (!out[i] || !expanded[i]) continue;
            // (batch, r, c) -> (bs..., r, c), summed down to the operand's own batch dims
            int64_t full[TDM_MAX_DIMS];
            memcpy(full, mp.bs, (size_t)mp.bnd * sizeof *full);
            full[mp.bnd] = ops[i]->shape[1], full[mp.bnd + 1] = ops[i]->shape[2];
            tdm_tensor *gf = view(g[i], mp.bnd + 2, full);
            tdm_tensor *gm = view(out[i], mp.mnd[i], mp.mshape[i]);
            s = gf && gm ? be->sum_to(gf, 1.0, gm) : tdm_last_status();
            tdm_tensor_free(gf);
            tdm_tensor_free(gm);
        }
        tdm_tensor_free(gyv);
        free_all(g, 2);
        free_all(ops, 2);
    }
    // 2*M*N*K for each of ga = gy b^T and gb = a^T gy
    TDM_PROFILE_FLOPS(2.0 * (double)gy->numel * (double)mp.k * ((ga != NULL) + (gb != NULL)));
    give(ga, tga, s);
    give(gb, tgb, s);
    return s;
}

// ----------------------------------------------------------------------------
// conv2d: x (N,C,H,W) or (C,H,W), weight (O,C/groups,kh,kw), bias (O)? -> (N,O,H',W') or
// (O,H',W'), with H' = floor((H + 2p + extra - d(kh-1) - 1) / s) + 1 (and the same for W').
// In the NHWC layout: x (N,H,W,C) or (H,W,C), weight (O,kh,kw,C/groups) -> (N,H',W',O) or
// (H',W',O).

const char *tdm_conv_layout_name(tdm_conv_layout layout) {
    switch (layout) {
    case TDM_CONV_LAYOUT_NCHW: return "nchw";
    case TDM_CONV_LAYOUT_NHWC: return "nhwc";
    }
    return "unknown";
}

static tdm_status conv_check(const char *op, const tdm_tensor *x, const tdm_tensor *w,
                             const tdm_tensor *b, const tdm_conv2d_params *p, int *ndim,
                             int64_t *yshape) {
    TDM_TRY(check_operand(op, "input", x, NULL));
    TDM_TRY(check_operand(op, "weight", w, x));
    if (b) TDM_TRY(check_operand(op, "bias", b, x));
    if (!p) return tdm_error_set(TDM_ERR_ARG, "%s: params is NULL", op);
    if (p->stride[0] < 1 || p->stride[1] < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: non-positive stride (%d, %d) is not supported", op,
                             p->stride[0], p->stride[1]);
    if (p->padding[0] < 0 || p->padding[1] < 0 || p->padding_extra[0] < 0 ||
        p->padding_extra[1] < 0)
        return tdm_error_set(TDM_ERR_ARG, "%s: negative padding (%d, %d) + (%d, %d) after is not "
                             "supported", op, p->padding[0], p->padding[1], p->padding_extra[0],
                             p->padding_extra[1]);
    if (p->dilation[0] < 1 || p->dilation[1] < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: non-positive dilation (%d, %d) is not supported",
                             op, p->dilation[0], p->dilation[1]);
    if (p->groups < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: non-positive groups %d is not supported", op,
                             p->groups);
    if (p->layout != TDM_CONV_LAYOUT_NCHW && p->layout != TDM_CONV_LAYOUT_NHWC)
        return tdm_error_set(TDM_ERR_ARG, "%s: unknown layout %d (NCHW or NHWC)", op,
                             (int)p->layout);
    const int *ax = tdm_conv_axes(p->layout);   // c, h, w in a 4-D tensor
    char s1[96], s2[96];
    if (x->ndim != 3 && x->ndim != 4)
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: expected a 3-D (unbatched) or 4-D (batched) input, got shape %s",
                             op, SHAPE(x, s1));
    TDM_TRY(tdm_check_ndim(op, "weight", w, 4, 4));
    const int64_t kh = w->shape[ax[1]], kw = w->shape[ax[2]], wc = w->shape[ax[0]];
    if (kh < 1 || kw < 1)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: weight %s: kernel size must be greater than zero",
                             op, SHAPE(w, s1));
    const int batched = x->ndim == 4, lead = 1 - batched;   // a 3-D x lacks dim 0
    const int64_t N = batched ? x->shape[0] : 1, C = x->shape[ax[0] - lead],
                  H = x->shape[ax[1] - lead], W = x->shape[ax[2] - lead];
    const int64_t O = w->shape[0], g = p->groups;
    if (O % g != 0)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: weight %s: out_channels %lld not divisible by "
                             "groups=%lld", op, SHAPE(w, s1), (long long)O, (long long)g);
    if (C % g != 0)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: input %s: in_channels %lld not divisible by "
                             "groups=%lld", op, SHAPE(x, s1), (long long)C, (long long)g);
    if (wc != C / g)
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: groups=%lld, weight %s expects input with %lld channels, but "
                             "input %s (%s) has %lld",
                             op, (long long)g, SHAPE(w, s1), (long long)(wc * g), SHAPE(x, s2),
                             p->layout == TDM_CONV_LAYOUT_NHWC ? "NHWC" : "NCHW", (long long)C);
    if (b && (b->ndim != 1 || b->shape[0] != O))
        return tdm_error_set(TDM_ERR_SHAPE, "%s: weight %s needs a bias of shape (%lld), got %s",
                             op, SHAPE(w, s1), (long long)O, SHAPE(b, s2));
    // the padded input must hold the dilated kernel: (H + 2p + extra) - (d(kh-1) + 1) >= 0
    const int64_t padded_h = H + 2 * (int64_t)p->padding[0] + p->padding_extra[0];
    const int64_t padded_w = W + 2 * (int64_t)p->padding[1] + p->padding_extra[1];
    const int64_t kext_h = (int64_t)p->dilation[0] * (kh - 1) + 1;
    const int64_t kext_w = (int64_t)p->dilation[1] * (kw - 1) + 1;
    if (padded_h < kext_h || padded_w < kext_w)
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: input %s padded to %lld x %lld is smaller than weight %s's "
                             "dilated kernel %lld x %lld",
                             op, SHAPE(x, s1), (long long)padded_h, (long long)padded_w,
                             SHAPE(w, s2), (long long)kext_h, (long long)kext_w);
    *ndim = 4;
    yshape[0] = N;
    yshape[ax[0]] = O;
    yshape[ax[1]] = (padded_h - kext_h) / p->stride[0] + 1;
    yshape[ax[2]] = (padded_w - kext_w) / p->stride[1] + 1;
    return TDM_OK;
}

static tdm_tensor *conv2d_forward(const tdm_tensor *x, const tdm_tensor *weight,
                                  const tdm_tensor *bias, const tdm_conv2d_params *p) {
    const char *op = "conv2d";
    int ndim;
    int64_t yshape[4];
    if (conv_check(op, x, weight, bias, p, &ndim, yshape) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->conv2d) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    // unbatched: y is (O,H',W') or (H',W',O): yshape + 1
    tdm_tensor *y = x->ndim == 4 ? empty_like_shape(x, 4, yshape)
                                 : empty_like_shape(x, 3, yshape + 1);
    tdm_tensor *v[2] = {view4(x), view4(y)};
    tdm_status s = y && v[0] && v[1] ? be->conv2d(v[0], weight, bias, p, v[1]) : tdm_last_status();
    free_all(v, 2);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Autocast: runs in the lower precision. Records itself for autograd.
tdm_tensor *tdm_conv2d(const tdm_tensor *x, const tdm_tensor *weight, const tdm_tensor *bias,
                       const tdm_conv2d_params *p) {
    TDM_PROFILE_OP("conv2d", x, weight, bias);
    tdm_autocast_args ac;
    if (tdm_autocast_apply("conv2d", TDM_AUTOCAST_LOWER, 3, (const tdm_tensor *[]){x, weight, bias},
                           &ac) != TDM_OK)
        return NULL;
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = conv2d_forward(ac.in[0], ac.in[1], ac.in[2], p);
    tdm_grad_set_enabled(grad);
    // 2*N*Cout*Hout*Wout * Cin/groups*kh*kw: weight is (Cout, Cin/groups, kh, kw)
    if (y) TDM_PROFILE_FLOPS(2.0 * (double)y->numel * (double)(weight->numel / weight->shape[0]));
    y = tdm_record_conv2d(y, ac.in[0], ac.in[1], ac.in[2], p);
    tdm_autocast_args_free(&ac);
    return y;
}

tdm_status tdm_conv2d_backward(const tdm_tensor *gy, const tdm_tensor *x, const tdm_tensor *weight,
                               const tdm_conv2d_params *p, tdm_tensor **gx, tdm_tensor **gweight,
                               tdm_tensor **gbias) {
    const char *op = "conv2d_backward";
    TDM_PROFILE_OP(op, gy, x, weight);
    clear_outs(gx, gweight, gbias);
    int ndim;
    int64_t yshape[4];
    TDM_TRY(conv_check(op, x, weight, NULL, p, &ndim, yshape));
    TDM_TRY(check_operand(op, "grad_output", gy, x));
    if (x->ndim == 4) TDM_TRY(check_grad_shape(op, gy, 4, yshape));
    else TDM_TRY(check_grad_shape(op, gy, 3, yshape + 1));
    if (!gx && !gweight && !gbias) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (!be->conv2d_backward) return tdm_error_unsupported(op, be);

    tdm_tensor *tgx = gx ? empty_like_shape(x, x->ndim, x->shape) : NULL;
    tdm_tensor *tgw = gweight ? empty_like_shape(x, 4, weight->shape) : NULL;
    tdm_tensor *tgb = gbias ? empty_like_shape(x, 1, weight->shape) : NULL;   // (O)
    tdm_tensor *v[3] = {view4(gy), view4(x), view4(tgx)};
    tdm_status s;
    if ((gx && !tgx) || (gweight && !tgw) || (gbias && !tgb) || !v[0] || !v[1] || (tgx && !v[2]))
        s = tdm_last_status();
    else
        s = be->conv2d_backward(v[0], v[1], weight, p, v[2], tgw, tgb);
    // the forward's count for each of gx and gw
    TDM_PROFILE_FLOPS(2.0 * (double)gy->numel * (double)(weight->numel / weight->shape[0]) *
                      ((gx != NULL) + (gweight != NULL)));
    free_all(v, 3);
    give(gx, tgx, s);
    give(gweight, tgw, s);
    give(gbias, tgb, s);
    return s;
}

// ----------------------------------------------------------------------------
// pooling: x (N,C,H,W) or (C,H,W) -> (N,C,H',W') or (C,H',W'), with PyTorch's output size
//   H' = floor_or_ceil((H + 2p - d(k-1) - 1) / s) + 1, and in ceil mode one less when the last
//   window would start at or past H + p (it must start inside the input or the left padding).

static int64_t div_floor(int64_t a, int64_t b) {
    int64_t q = a / b;
    if (a % b != 0 && (a < 0) != (b < 0)) q--;
    return q;
}

static int64_t pool_out_size(int64_t in, int k, int p, int s, int d, bool ceil_mode) {
    const int64_t span = in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1;
    int64_t out = div_floor(span + (ceil_mode ? s - 1 : 0), s) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}

// Checks x and p (avg: dilation must be 1) and fills y's shape, x's rank.
static tdm_status pool_check(const char *op, const tdm_tensor *x, const tdm_pool2d_params *p,
                             bool avg, int *ndim, int64_t *yshape) {
    TDM_TRY(check_operand(op, "input", x, NULL));
    if (!p) return tdm_error_set(TDM_ERR_ARG, "%s: params is NULL", op);
    char s1[96];
    if (x->ndim != 3 && x->ndim != 4)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: expected a 3-D (C,H,W) or 4-D (N,C,H,W) input, "
                             "got shape %s", op, SHAPE(x, s1));
    const int b = x->ndim == 4;
    if (x->shape[b] == 0 || x->shape[b + 1] == 0 || x->shape[b + 2] == 0)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: input %s: C, H and W must be non-zero", op,
                             SHAPE(x, s1));
    const int *k = p->kernel_size, *st = p->stride, *pad = p->padding, *d = p->dilation;
    if (k[0] < 1 || k[1] < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: kernel_size (%d, %d) must be greater than zero",
                             op, k[0], k[1]);
    if (st[0] < 1 || st[1] < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: stride (%d, %d) must be greater than zero", op,
                             st[0], st[1]);
    if (pad[0] < 0 || pad[1] < 0)
        return tdm_error_set(TDM_ERR_ARG, "%s: padding (%d, %d) must be non-negative", op, pad[0],
                             pad[1]);
    if (avg && (d[0] != 1 || d[1] != 1))
        return tdm_error_set(TDM_ERR_ARG, "%s: dilation must be (1, 1), got (%d, %d)", op, d[0],
                             d[1]);
    if (d[0] < 1 || d[1] < 1)
        return tdm_error_set(TDM_ERR_ARG, "%s: dilation (%d, %d) must be greater than zero", op,
                             d[0], d[1]);
    if (pad[0] > k[0] / 2 || pad[1] > k[1] / 2)
        return tdm_error_set(TDM_ERR_ARG, "%s: pad should be at most half of kernel size, but got "
                             "padding (%d, %d) and kernel_size (%d, %d)", op, pad[0], pad[1], k[0],
                             k[1]);
    const int64_t oh = pool_out_size(x->shape[b + 1], k[0], pad[0], st[0], d[0], p->ceil_mode);
    const int64_t ow = pool_out_size(x->shape[b + 2], k[1], pad[1], st[1], d[1], p->ceil_mode);
    if (oh < 1 || ow < 1)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: input %s gives output size %lld x %lld, which is "
                             "too small (kernel_size (%d, %d), stride (%d, %d), padding (%d, %d), "
                             "dilation (%d, %d))", op, SHAPE(x, s1), (long long)oh, (long long)ow,
                             k[0], k[1], st[0], st[1], pad[0], pad[1], d[0], d[1]);
    *ndim = x->ndim;
    for (int i = 0; i < x->ndim - 2; i++) yshape[i] = x->shape[i];
    yshape[x->ndim - 2] = oh;
    yshape[x->ndim - 1] = ow;
    return TDM_OK;
}

typedef tdm_status (*pool_fwd_fn)(const tdm_tensor *x, const tdm_pool2d_params *p, tdm_tensor *y);

static tdm_tensor *pool_forward(const char *op, const tdm_tensor *x, const tdm_pool2d_params *p,
                                bool avg) {
    int ndim;
    int64_t yshape[4];
    if (pool_check(op, x, p, avg, &ndim, yshape) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    pool_fwd_fn fn = avg ? be->avg_pool2d : be->max_pool2d;
    if (!fn) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *y = empty_like_shape(x, ndim, yshape);
    tdm_tensor *v[2] = {view4(x), view4(y)};
    tdm_status s = y && v[0] && v[1] ? fn(v[0], p, v[1]) : tdm_last_status();
    free_all(v, 2);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

static tdm_status pool_backward(const char *op, const tdm_tensor *gy, const tdm_tensor *x,
                                const tdm_pool2d_params *p, bool avg, tdm_tensor **gx) {
    TDM_PROFILE_OP(op, gy, x);
    clear_outs(gx, NULL, NULL);
    int ndim;
    int64_t yshape[4];
    TDM_TRY(pool_check(op, x, p, avg, &ndim, yshape));
    TDM_TRY(check_operand(op, "grad_output", gy, x));
    TDM_TRY(check_grad_shape(op, gy, ndim, yshape));
    if (!gx) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(x);
    if (avg ? !be->avg_pool2d_backward : !be->max_pool2d_backward)
        return tdm_error_unsupported(op, be);

    tdm_tensor *tgx = empty_like_shape(x, x->ndim, x->shape);
    tdm_tensor *v[3] = {view4(gy), view4(x), view4(tgx)};   // gy4, x4, gx4
    tdm_status s;
    if (!tgx || !v[0] || !v[1] || !v[2]) s = tdm_last_status();
    else if (avg) s = be->avg_pool2d_backward(v[0], p, v[2]);
    else s = be->max_pool2d_backward(v[0], v[1], p, v[2]);
    free_all(v, 3);
    give(gx, tgx, s);
    return s;
}

// Pooling runs in its input's dtype (no autocast) and records itself for autograd.
static tdm_tensor *pool_recorded(const char *op, const tdm_tensor *x, const tdm_pool2d_params *p,
                                 bool avg) {
    TDM_PROFILE_OP(op, x);
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = pool_forward(op, x, p, avg);
    tdm_grad_set_enabled(grad);
    return tdm_record_pool2d(y, x, p, avg);
}

tdm_tensor *tdm_max_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p) {
    return pool_recorded("max_pool2d", x, p, false);
}

tdm_status tdm_max_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_pool2d_params *p, tdm_tensor **gx) {
    return pool_backward("max_pool2d_backward", gy, x, p, false, gx);
}

tdm_tensor *tdm_avg_pool2d(const tdm_tensor *x, const tdm_pool2d_params *p) {
    return pool_recorded("avg_pool2d", x, p, true);
}

tdm_status tdm_avg_pool2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                   const tdm_pool2d_params *p, tdm_tensor **gx) {
    return pool_backward("avg_pool2d_backward", gy, x, p, true, gx);
}
