/* ops_attention.c — F.scaled_dot_product_attention (ops.h), forward and backward: PyTorch's
 * argument rules with messages naming the op and the shapes, the leading dims broadcast as
 * torch.matmul's, and the backend's sdpa slots (core/backend.h) on 3-D (batch, rows, cols)
 * operands. An operand whose leading dims hold the whole broadcast batch is viewed 3-D; any other
 * is expanded to it (materialized, as matmul does) and its gradient summed back down (sum_to).
 * The mask is handed over as a strided view of itself, stride 0 where it broadcasts, so it is
 * never materialized. In f16/bf16 a gradient summed over broadcast copies is computed in f32 and
 * rounded once, as matmul's.
 *
 * The public forward applies the autocast policy first (the lower precision, as PyTorch's CUDA
 * autocast lists scaled_dot_product_attention), draws its dropout from the caller's generator
 * (core/random_impl.h: capture-safe) and records itself for autograd last; its body runs with
 * grad mode off. The backward recomputes the weights from q, k and the mask.
 *
 * The fused path: where tdm_attn_fused_applies (tandem/backends.h: a backend with the sdpa_fused
 * slots, the attention mode not conformance, f16/bf16/f32, no mask, no dropout) and no operand
 * broadcasts over the batch, the forward runs the backend's fused kernel, which also gives each
 * row's log-sum-exp; the node saves the output and that (B, L) f32 vector, and the backward runs
 * the fused backward from them. Otherwise (and always on the reference backend) the plain path. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/autograd_impl.h"
#include "core/profile_impl.h"
#include "core/random_impl.h"
#include "tandem/backends.h"
#include "tandem/graph.h"

#define OP "scaled_dot_product_attention"
#define OP_BW "scaled_dot_product_attention_backward"
#define SHAPE(t, buf) tdm_shape_str((t)->ndim, (t)->shape, buf, sizeof buf)

typedef struct {
    int64_t L, S, E, Ev;
    int bnd;                           // the broadcast leading dims
    int64_t bs[TDM_MAX_DIMS], batch;   // and their product
    int64_t yshape[TDM_MAX_DIMS];      // the result: (bs..., L, Ev)
    tdm_sdpa_params p;                 // scale resolved; the caller fills the dropout draw
} sdpa_plan;

static int64_t dim_from_end(const tdm_tensor *t, int k) { return t->shape[t->ndim - k]; }

// The mask's dtype: bool, or floating and the query's or f32 (PyTorch: "bool or float or to
// match query dtype").
static tdm_status check_mask(const char *op, const tdm_tensor *m, const tdm_tensor *q,
                             const sdpa_plan *sp) {
    TDM_TRY(tdm_check_same_device(op, q, m));
    if (m->dtype != TDM_DTYPE_BOOL && m->dtype != TDM_DTYPE_F32 && m->dtype != q->dtype)
        return tdm_error_set(TDM_ERR_DTYPE,
                             "%s: attn_mask has dtype %s; expected bool, f32 or the query's %s",
                             op, tdm_dtype_name(m->dtype), tdm_dtype_name(q->dtype));
    // broadcastable to the weights (bs..., L, S) without enlarging them (added in place)
    const int nd = sp->bnd + 2;
    bool ok = m->ndim <= nd;
    for (int d = 0; ok && d < m->ndim; d++) {
        const int td = d + nd - m->ndim;
        const int64_t want = td < sp->bnd ? sp->bs[td] : td == sp->bnd ? sp->L : sp->S;
        ok = m->shape[d] == 1 || m->shape[d] == want;
    }
    if (ok) return TDM_OK;
    int64_t ws[TDM_MAX_DIMS];
    memcpy(ws, sp->bs, (size_t)sp->bnd * sizeof *ws);
    ws[sp->bnd] = sp->L, ws[sp->bnd + 1] = sp->S;
    char a[96], b[96];
    return tdm_error_set(TDM_ERR_SHAPE,
                         "%s: attn_mask %s does not broadcast to the attention weights %s", op,
                         SHAPE(m, a), tdm_shape_str(nd, ws, b, sizeof b));
}

static tdm_status sdpa_check(const char *op, const tdm_tensor *q, const tdm_tensor *k,
                             const tdm_tensor *v, const tdm_tensor *mask, double dropout_p,
                             bool is_causal, double scale, sdpa_plan *sp) {
    const tdm_tensor *t[3] = {q, k, v};
    const char *name[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) TDM_TRY(tdm_check_tensor(op, name[i], t[i]));
    TDM_TRY(tdm_check_float(op, "query", q));
    char s1[96], s2[96], s3[96];
    for (int i = 0; i < 3; i++) {
        TDM_TRY(tdm_check_same_device(op, q, t[i]));
        if (t[i]->dtype != q->dtype)
            return tdm_error_set(TDM_ERR_DTYPE,
                                 "%s: query, key and value must have one dtype, got %s, %s and %s",
                                 op, tdm_dtype_name(q->dtype), tdm_dtype_name(k->dtype),
                                 tdm_dtype_name(v->dtype));
        TDM_TRY(tdm_check_ndim(op, name[i], t[i], 2, TDM_MAX_DIMS));
    }
    memset(sp, 0, sizeof *sp);
    sp->L = dim_from_end(q, 2), sp->E = dim_from_end(q, 1);
    sp->S = dim_from_end(k, 2), sp->Ev = dim_from_end(v, 1);
    if (dim_from_end(k, 1) != sp->E)
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: query %s and key %s must have the same last dim (E %lld vs %lld)",
                             op, SHAPE(q, s1), SHAPE(k, s2), (long long)sp->E,
                             (long long)dim_from_end(k, 1));
    if (dim_from_end(v, 2) != sp->S)
        return tdm_error_set(TDM_ERR_SHAPE,
                             "%s: key %s and value %s must hold the same number of keys (S %lld "
                             "vs %lld)", op, SHAPE(k, s1), SHAPE(v, s2), (long long)sp->S,
                             (long long)dim_from_end(v, 2));
    // the leading dims, right-aligned, broadcast as torch.matmul's
    for (int i = 0; i < 3; i++)
        if (t[i]->ndim - 2 > sp->bnd) sp->bnd = t[i]->ndim - 2;
    sp->batch = 1;
    for (int d = 0; d < sp->bnd; d++) {
        int64_t size[3], b = 1;
        for (int i = 0; i < 3; i++) {
            const int td = d - (sp->bnd - (t[i]->ndim - 2));
            size[i] = td >= 0 ? t[i]->shape[td] : 1;
            if (size[i] != 1) b = size[i];
        }
        for (int i = 0; i < 3; i++)
            if (size[i] != 1 && size[i] != b)
                return tdm_error_set(TDM_ERR_SHAPE,
                                     "%s: the leading dims of query %s, key %s and value %s do "
                                     "not broadcast", op, SHAPE(q, s1), SHAPE(k, s2),
                                     SHAPE(v, s3));
        sp->bs[d] = b;
        sp->batch *= b;
    }
    // The attention weights (bs..., L, S) are the op's own intermediate, bounded by the logical
    // sizes as a tensor of that shape would be: the plain CUDA path holds them whole (twice
    // backward), PyTorch's math path too, and the reference computes every one of them. With
    // E = Ev = 0 no operand holds data, so nothing else bounds L and S.
    {
        int64_t w = sp->batch;
        const size_t acc = q->dtype == TDM_DTYPE_F64 ? 8 : 4;   // the accumulation type
        if (__builtin_mul_overflow(w, sp->L, &w) || __builtin_mul_overflow(w, sp->S, &w))
            w = INT64_MAX;
        char what[200];
        snprintf(what, sizeof what, "%s: the attention weights (batch %lld, L %lld, S %lld)", op,
                 (long long)sp->batch, (long long)sp->L, (long long)sp->S);
        TDM_TRY(tdm_alloc_check(what, w, acc, q->device.type == TDM_DEVICE_CPU));
    }
    memcpy(sp->yshape, sp->bs, (size_t)sp->bnd * sizeof *sp->yshape);
    sp->yshape[sp->bnd] = sp->L, sp->yshape[sp->bnd + 1] = sp->Ev;
    if (mask) {
        if (is_causal)
            return tdm_error_set(TDM_ERR_ARG, "%s: an attn_mask must not be given with is_causal "
                                 "(PyTorch: \"Explicit attn_mask should not be set when "
                                 "is_causal=True\")", op);
        TDM_TRY(check_mask(op, mask, q, sp));
    }
    if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
        return tdm_error_set(TDM_ERR_ARG, "%s: dropout_p has to be between 0 and 1, but got %g",
                             op, dropout_p);
    // E = 0: every score is the empty sum 0 (PyTorch scales q and k by sqrt(scale) first, so
    // even the default 1/sqrt(0) leaves them 0), whatever the scale
    sp->p.scale = sp->E == 0 ? 1.0 : isnan(scale) ? 1.0 / sqrt((double)sp->E) : scale;
    sp->p.is_causal = is_causal;
    sp->p.dropout_p = dropout_p;
    return TDM_OK;
}

// t (its leading dims..., r, c) as the backend takes it, (batch, r, c): a view when its leading
// dims hold the whole broadcast batch, else expanded to it (*expanded set).
static tdm_tensor *operand3(const sdpa_plan *sp, const tdm_tensor *t, bool *expanded) {
    const int64_t r = dim_from_end(t, 2), c = dim_from_end(t, 1);
    *expanded = tdm_shape_numel(t->ndim - 2, t->shape) != sp->batch;
    if (!*expanded) return tdm_tensor_reshape(t, 3, (int64_t[]){sp->batch, r, c});
    const struct tdm_backend_ops *be = tdm_backend_of(t);
    if (!be->expand) {
        tdm_error_unsupported(OP, be);
        return NULL;
    }
    int64_t full[TDM_MAX_DIMS];
    memcpy(full, sp->bs, (size_t)sp->bnd * sizeof *full);
    full[sp->bnd] = r, full[sp->bnd + 1] = c;
    tdm_tensor *e = tdm_tensor_empty(sp->bnd + 2, full, t->dtype, t->device);
    tdm_status s = e ? be->expand(t, 1.0, e) : tdm_last_status();
    tdm_tensor *v = s == TDM_OK ? tdm_tensor_reshape(e, 3, (int64_t[]){sp->batch, r, c}) : NULL;
    tdm_tensor_free(e);
    return v;
}

// The mask as the backend reads it: shape (bs..., L, S) over the mask's own storage, stride 0
// where it broadcasts. A struct on the caller's stack: never freed, never recorded.
static tdm_tensor mask_view(const sdpa_plan *sp, const tdm_tensor *m) {
    tdm_tensor v = *m;
    v.ndim = sp->bnd + 2;
    v.requires_grad = false, v.grad_fn = NULL, v.grad = NULL;
    for (int d = 0; d < v.ndim; d++) {
        const int md = d - (v.ndim - m->ndim);
        v.shape[d] = d < sp->bnd ? sp->bs[d] : d == sp->bnd ? sp->L : sp->S;
        v.stride[d] = md >= 0 && m->shape[md] != 1 ? m->stride[md] : 0;
    }
    v.numel = tdm_shape_numel(v.ndim, v.shape);
    return v;
}

// Does the mask hold fewer elements than the weights (bs..., L, S), i.e. broadcast?
static bool mask_broadcasts(const sdpa_plan *sp, const tdm_tensor *m) {
    return m->numel != sp->batch * sp->L * sp->S;
}

static void free_all(tdm_tensor **ts, int n) {
    for (int i = 0; i < n; i++) tdm_tensor_free(ts[i]);
}

// ---- forward ----------------------------------------------------------------------------------

// sp checked, its dropout draw filled.
static tdm_tensor *sdpa_forward(const sdpa_plan *sp, const tdm_tensor *q, const tdm_tensor *k,
                                const tdm_tensor *v, const tdm_tensor *mask) {
    const struct tdm_backend_ops *be = tdm_backend_of(q);
    if (!be->sdpa) {
        tdm_error_unsupported(OP, be);
        return NULL;
    }
    const int nd = sp->bnd + 2;
    if (sp->S == 0)   // no keys: every output is the empty sum
        return tdm_tensor_zeros(nd, sp->yshape, q->dtype, q->device);
    tdm_tensor *y = tdm_tensor_empty(nd, sp->yshape, q->dtype, q->device);
    if (!y || y->numel == 0) return y;
    bool expanded[3];
    tdm_tensor *ops[4] = {operand3(sp, q, &expanded[0]), operand3(sp, k, &expanded[1]),
                          operand3(sp, v, &expanded[2]),
                          tdm_tensor_reshape(y, 3, (int64_t[]){sp->batch, sp->L, sp->Ev})};
    tdm_tensor mv = mask ? mask_view(sp, mask) : (tdm_tensor){0};
    tdm_status s = ops[0] && ops[1] && ops[2] && ops[3]
                       ? be->sdpa(ops[0], ops[1], ops[2], mask ? &mv : NULL, &sp->p, ops[3])
                       : tdm_last_status();
    free_all(ops, 4);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Does this call take the fused path? No operand may broadcast over the batch (the fused
// kernels read q, k, v, y and the gradients as they are).
static bool sdpa_fused_here(const sdpa_plan *sp, const tdm_tensor *q, const tdm_tensor *k,
                            const tdm_tensor *v, const tdm_tensor *mask, double dropout_p) {
    if (sp->S == 0 || sp->L == 0 || sp->batch == 0 ||
        !tdm_attn_fused_applies(q->device, q->dtype, sp->E, sp->Ev, mask != NULL, dropout_p))
        return false;
    const tdm_tensor *in[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (tdm_shape_numel(in[i]->ndim - 2, in[i]->shape) != sp->batch) return false;
    return true;
}

// The fused forward: y, and *lse (batch, L) f32 for the backward.
static tdm_tensor *sdpa_forward_fused(const sdpa_plan *sp, const tdm_tensor *q,
                                      const tdm_tensor *k, const tdm_tensor *v, tdm_tensor **lse) {
    const struct tdm_backend_ops *be = tdm_backend_of(q);
    tdm_tensor *y = tdm_tensor_empty(sp->bnd + 2, sp->yshape, q->dtype, q->device);
    *lse = tdm_tensor_empty(2, (int64_t[]){sp->batch, sp->L}, TDM_DTYPE_F32, q->device);
    bool expanded[3];
    tdm_tensor *ops[4] = {NULL, NULL, NULL, NULL};
    tdm_status s = y && *lse ? TDM_OK : tdm_last_status();
    if (s == TDM_OK) {
        ops[0] = operand3(sp, q, &expanded[0]), ops[1] = operand3(sp, k, &expanded[1]);
        ops[2] = operand3(sp, v, &expanded[2]);
        ops[3] = tdm_tensor_reshape(y, 3, (int64_t[]){sp->batch, sp->L, sp->Ev});
        s = ops[0] && ops[1] && ops[2] && ops[3]
                ? be->sdpa_fused(ops[0], ops[1], ops[2], &sp->p, ops[3], *lse)
                : tdm_last_status();
    }
    free_all(ops, 4);
    if (s != TDM_OK) {
        tdm_tensor_free(y);
        tdm_tensor_free(*lse);
        *lse = NULL;
        return NULL;
    }
    return y;
}

tdm_tensor *tdm_scaled_dot_product_attention(const tdm_tensor *q, const tdm_tensor *k,
                                             const tdm_tensor *v, const tdm_tensor *attn_mask,
                                             double dropout_p, bool is_causal, double scale,
                                             tdm_generator *g) {
    TDM_PROFILE_OP(OP, q, k, v, attn_mask);
    tdm_autocast_args ac;
    if (tdm_autocast_apply(OP, TDM_AUTOCAST_LOWER, 4, (const tdm_tensor *[]){q, k, v, attn_mask},
                           &ac) != TDM_OK)
        return NULL;
    q = ac.in[0], k = ac.in[1], v = ac.in[2], attn_mask = ac.in[3];
    sdpa_plan sp;
    tdm_tensor *y = NULL;
    tdm_status s = sdpa_check(OP, q, k, v, attn_mask, dropout_p, is_causal, scale, &sp);
    if (s == TDM_OK && dropout_p > 0) {
        s = g ? tdm_generator_draw(g, q->device, &sp.p.seed, &sp.p.offset, &sp.p.delta)
              : tdm_error_set(TDM_ERR_ARG, "%s: dropout_p %g > 0 needs a generator (g is NULL)",
                              OP, dropout_p);
    }
    tdm_tensor *lse = NULL;   // the fused path's log-sum-exp, saved for its backward
    if (s == TDM_OK) {
        bool grad = tdm_grad_set_enabled(false);
        y = sdpa_fused_here(&sp, q, k, v, attn_mask, dropout_p)
                ? sdpa_forward_fused(&sp, q, k, v, &lse)
                : sdpa_forward(&sp, q, k, v, attn_mask);
        tdm_grad_set_enabled(grad);
    }
    if (y && dropout_p > 0) tdm_generator_set_offset(g, sp.p.offset + 1);
    // 2 B L S (E + Ev): the two products
    if (y) TDM_PROFILE_FLOPS(2.0 * (double)(sp.batch * sp.L * sp.S) * (double)(sp.E + sp.Ev));
    y = tdm_record_sdpa(y, q, k, v, attn_mask, dropout_p, is_causal, scale, sp.p.seed,
                        sp.p.offset, sp.p.delta, lse);
    tdm_tensor_free(lse);
    tdm_autocast_args_free(&ac);
    return y;
}

// ---- backward ---------------------------------------------------------------------------------

// The gradients in f32 from exact f32 copies of f16/bf16 operands (and of a floating mask),
// each rounded once to its dtype at the end: a gradient summed over broadcast copies must not
// round the copies first.
static tdm_status sdpa_backward_widened(const tdm_tensor *gy, const tdm_tensor *const in[4],
                                        double dropout_p, bool is_causal, double scale,
                                        uint64_t seed, uint64_t offset, const uint64_t *delta,
                                        tdm_tensor **out[4]) {
    const bool grad = tdm_grad_set_enabled(false);   // internal copies: never recorded
    tdm_tensor *w[5] = {tdm_tensor_to(gy, gy->device, TDM_DTYPE_F32), NULL, NULL, NULL, NULL};
    tdm_status s = w[0] ? TDM_OK : tdm_last_status();
    for (int i = 0; i < 4 && s == TDM_OK; i++) {
        if (!in[i]) continue;
        w[i + 1] = tdm_tensor_to(in[i], in[i]->device,
                                 tdm_dtype_is_float(in[i]->dtype) ? TDM_DTYPE_F32 : in[i]->dtype);
        if (!w[i + 1]) s = tdm_last_status();
    }
    tdm_tensor *g32[4] = {NULL, NULL, NULL, NULL};
    if (s == TDM_OK)
        s = tdm_sdpa_backward_at(w[0], w[1], w[2], w[3], w[4], dropout_p, is_causal, scale, seed,
                                 offset, delta, out[0] ? &g32[0] : NULL,
                                 out[1] ? &g32[1] : NULL, out[2] ? &g32[2] : NULL,
                                 out[3] ? &g32[3] : NULL);
    for (int i = 0; i < 4 && s == TDM_OK; i++) {
        if (!out[i] || !g32[i]) continue;
        *out[i] = tdm_tensor_to(g32[i], in[i]->device, in[i]->dtype);
        if (!*out[i]) s = tdm_last_status();
    }
    for (int i = 0; i < 4 && s != TDM_OK; i++) {
        if (!out[i]) continue;
        tdm_tensor_free(*out[i]);
        *out[i] = NULL;
    }
    free_all(g32, 4);
    free_all(w, 5);
    tdm_grad_set_enabled(grad);
    return s;
}

tdm_status tdm_sdpa_backward_at(const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k,
                                const tdm_tensor *v, const tdm_tensor *attn_mask,
                                double dropout_p, bool is_causal, double scale, uint64_t seed,
                                uint64_t offset, const uint64_t *delta, tdm_tensor **gq,
                                tdm_tensor **gk, tdm_tensor **gv, tdm_tensor **gmask) {
    TDM_PROFILE_OP(OP_BW, gy, q, k, v, attn_mask);
    tdm_tensor **out[4] = {gq, gk, gv, gmask};
    for (int i = 0; i < 4; i++)
        if (out[i]) *out[i] = NULL;
    sdpa_plan sp;
    TDM_TRY(sdpa_check(OP_BW, q, k, v, attn_mask, dropout_p, is_causal, scale, &sp));
    TDM_TRY(tdm_check_tensor(OP_BW, "grad_output", gy));
    TDM_TRY(tdm_check_same_device(OP_BW, q, gy));
    TDM_TRY(tdm_check_same_dtype(OP_BW, q, gy));
    const int nd = sp.bnd + 2;
    bool same = gy->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = gy->shape[d] == sp.yshape[d];
    if (!same) {
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output has shape %s, expected %s", OP_BW,
                             SHAPE(gy, a), tdm_shape_str(nd, sp.yshape, b, sizeof b));
    }
    if (attn_mask && !tdm_dtype_is_float(attn_mask->dtype)) out[3] = NULL;   // bool: none
    if (!attn_mask) out[3] = NULL;
    const tdm_tensor *in[4] = {q, k, v, attn_mask};
    const bool empty = gy->numel == 0 || sp.S == 0;   // nothing flows back: zeros
    if (!empty && sdpa_fused_here(&sp, q, k, v, attn_mask, dropout_p)) {
        // The fused path without its forward's saved output (this explicit backward, or a node
        // recorded on the plain path): the fused forward first, for y and the log-sum-exp.
        tdm_tensor *lse = NULL;
        const bool grad = tdm_grad_set_enabled(false);
        tdm_tensor *y = sdpa_forward_fused(&sp, q, k, v, &lse);
        tdm_grad_set_enabled(grad);
        const tdm_status s = y ? tdm_sdpa_fused_backward_at(gy, q, k, v, y, lse, is_causal, scale,
                                                            out[0], out[1], out[2])
                               : tdm_last_status();
        tdm_tensor_free(y);
        tdm_tensor_free(lse);
        return s;
    }
    bool expands[4];
    for (int i = 0; i < 3; i++)
        expands[i] = tdm_shape_numel(in[i]->ndim - 2, in[i]->shape) != sp.batch;
    expands[3] = attn_mask && mask_broadcasts(&sp, attn_mask);
    if (!empty && (q->dtype == TDM_DTYPE_F16 || q->dtype == TDM_DTYPE_BF16)) {
        bool widen = false;
        for (int i = 0; i < 4; i++) widen |= out[i] && expands[i];
        if (widen)
            return sdpa_backward_widened(gy, in, dropout_p, is_causal, scale, seed, offset, delta,
                                         out);
    }
    if (!out[0] && !out[1] && !out[2] && !out[3]) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(q);
    if (!be->sdpa_backward || !be->sum_to) return tdm_error_unsupported(OP_BW, be);
    sp.p.seed = seed, sp.p.offset = offset, sp.p.delta = dropout_p > 0 ? delta : NULL;

    tdm_tensor *res[4] = {NULL, NULL, NULL, NULL};
    tdm_status s = TDM_OK;
    for (int i = 0; i < 4 && s == TDM_OK; i++) {
        if (!out[i]) continue;
        res[i] = (empty ? tdm_tensor_zeros : tdm_tensor_empty)(in[i]->ndim, in[i]->shape,
                                                               in[i]->dtype, q->device);
        if (!res[i]) s = tdm_last_status();
    }
    if (s == TDM_OK && !empty) {
        // operands (batch, r, c); each gradient a 3-D view of its result, or scratch of the
        // broadcast shape summed down below
        tdm_tensor *ops[4] = {NULL, NULL, NULL, NULL}, *g3[4] = {NULL, NULL, NULL, NULL};
        bool expanded[3];
        for (int i = 0; i < 3 && s == TDM_OK; i++)
            if (!(ops[i] = operand3(&sp, in[i], &expanded[i]))) s = tdm_last_status();
        const int64_t wshape[3] = {sp.batch, sp.L, sp.S};
        for (int i = 0; i < 4 && s == TDM_OK; i++) {
            if (!res[i]) continue;
            const int64_t *sh = i < 3 ? ops[i]->shape : wshape;
            g3[i] = expands[i] ? tdm_tensor_empty(3, sh, in[i]->dtype, q->device)
                               : tdm_tensor_reshape(res[i], 3, sh);
            if (!g3[i]) s = tdm_last_status();
        }
        tdm_tensor *gy3 = s == TDM_OK ? tdm_tensor_reshape(gy, 3, (int64_t[]){sp.batch, sp.L,
                                                                              sp.Ev})
                                      : NULL;
        tdm_tensor mv = attn_mask ? mask_view(&sp, attn_mask) : (tdm_tensor){0};
        if (s == TDM_OK)
            s = gy3 ? be->sdpa_backward(gy3, ops[0], ops[1], ops[2], attn_mask ? &mv : NULL,
                                        &sp.p, g3[0], g3[1], g3[2], g3[3])
                    : tdm_last_status();
        for (int i = 0; i < 4 && s == TDM_OK; i++) {
            if (!res[i] || !expands[i]) continue;
            // (batch, r, c) -> (bs..., r, c), summed down to the input's own shape
            int64_t full[TDM_MAX_DIMS];
            memcpy(full, sp.bs, (size_t)sp.bnd * sizeof *full);
            full[sp.bnd] = g3[i]->shape[1], full[sp.bnd + 1] = g3[i]->shape[2];
            tdm_tensor *gf = tdm_tensor_reshape(g3[i], nd, full);
            s = gf ? be->sum_to(gf, 1.0, res[i]) : tdm_last_status();
            tdm_tensor_free(gf);
        }
        tdm_tensor_free(gy3);
        free_all(g3, 4);
        free_all(ops, 4);
    }
    // 2 B L S (2 E + 2 Ev): dP = gy v^T, gv = P^T gy, gq = dS k, gk = dS^T q
    TDM_PROFILE_FLOPS(4.0 * (double)(sp.batch * sp.L * sp.S) * (double)(sp.E + sp.Ev));
    for (int i = 0; i < 4; i++) {
        if (out[i] && s == TDM_OK) *out[i] = res[i];
        else tdm_tensor_free(res[i]);
    }
    return s;
}

tdm_status tdm_sdpa_fused_backward_at(const tdm_tensor *gy, const tdm_tensor *q,
                                      const tdm_tensor *k, const tdm_tensor *v,
                                      const tdm_tensor *y, const tdm_tensor *lse, bool is_causal,
                                      double scale, tdm_tensor **gq, tdm_tensor **gk,
                                      tdm_tensor **gv) {
    TDM_PROFILE_OP(OP_BW, gy, q, k, v, NULL);
    tdm_tensor **out[3] = {gq, gk, gv};
    for (int i = 0; i < 3; i++)
        if (out[i]) *out[i] = NULL;
    sdpa_plan sp;
    TDM_TRY(sdpa_check(OP_BW, q, k, v, NULL, 0.0, is_causal, scale, &sp));
    TDM_TRY(tdm_check_tensor(OP_BW, "grad_output", gy));
    TDM_TRY(tdm_check_same_device(OP_BW, q, gy));
    TDM_TRY(tdm_check_same_dtype(OP_BW, q, gy));
    const int nd = sp.bnd + 2;
    bool same = gy->ndim == nd && y->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = gy->shape[d] == sp.yshape[d] && y->shape[d] == sp.yshape[d];
    if (!same) {
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output has shape %s, expected %s", OP_BW,
                             SHAPE(gy, a), tdm_shape_str(nd, sp.yshape, b, sizeof b));
    }
    if (!lse || lse->dtype != TDM_DTYPE_F32 || lse->numel != sp.batch * sp.L)
        return tdm_error_set(TDM_ERR_ARG, "%s: the fused backward needs the forward's (%lld, "
                             "%lld) f32 log-sum-exp", OP_BW, (long long)sp.batch, (long long)sp.L);
    if (!out[0] && !out[1] && !out[2]) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_of(q);
    if (!be->sdpa_fused_backward) return tdm_error_unsupported(OP_BW, be);
    const tdm_tensor *in[3] = {q, k, v};
    tdm_tensor *res[3] = {NULL, NULL, NULL}, *ops[3] = {NULL, NULL, NULL};
    tdm_tensor *g3[3] = {NULL, NULL, NULL}, *gy3 = NULL, *y3 = NULL;
    tdm_status s = TDM_OK;
    bool expanded[3];
    for (int i = 0; i < 3 && s == TDM_OK; i++) {   // all three are computed together
        res[i] = tdm_tensor_empty(in[i]->ndim, in[i]->shape, in[i]->dtype, q->device);
        ops[i] = res[i] ? operand3(&sp, in[i], &expanded[i]) : NULL;
        g3[i] = ops[i] ? tdm_tensor_reshape(res[i], 3, ops[i]->shape) : NULL;
        if (!g3[i]) s = tdm_last_status();
    }
    if (s == TDM_OK) {
        gy3 = tdm_tensor_reshape(gy, 3, (int64_t[]){sp.batch, sp.L, sp.Ev});
        y3 = tdm_tensor_reshape(y, 3, (int64_t[]){sp.batch, sp.L, sp.Ev});
        s = gy3 && y3 ? be->sdpa_fused_backward(gy3, ops[0], ops[1], ops[2], y3, lse, &sp.p,
                                                g3[0], g3[1], g3[2])
                      : tdm_last_status();
    }
    // 2 B L S (2 E + 2 Ev) as the plain path, and the recomputed q k^T: 2 B L S E more
    TDM_PROFILE_FLOPS(2.0 * (double)(sp.batch * sp.L * sp.S) * (double)(3 * sp.E + 2 * sp.Ev));
    tdm_tensor_free(gy3);
    tdm_tensor_free(y3);
    free_all(g3, 3);
    free_all(ops, 3);
    for (int i = 0; i < 3; i++) {
        if (out[i] && s == TDM_OK) *out[i] = res[i];
        else tdm_tensor_free(res[i]);
    }
    return s;
}

tdm_status tdm_scaled_dot_product_attention_backward(
    const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k, const tdm_tensor *v,
    const tdm_tensor *attn_mask, double dropout_p, bool is_causal, double scale, uint64_t seed,
    uint64_t offset, tdm_tensor **gq, tdm_tensor **gk, tdm_tensor **gv, tdm_tensor **gmask) {
    return tdm_sdpa_backward_at(gy, q, k, v, attn_mask, dropout_p, is_causal, scale, seed,
                                offset, NULL, gq, gk, gv, gmask);
}
