/* ops_view.c — PyTorch's views and joins for tensors that are always contiguous (tensor.h,
 * ops.h): view (a reshape with one dim inferred) and contiguous share the storage; transpose,
 * narrow, split, chunk, cat and stack make contiguous copies through the backend's `copy_strided`
 * slot
 * (bytes moved, never converted: exact in every dtype; asynchronous, so many per step cost no
 * host wait and can be captured). Each is recorded for autograd (core/autograd_ops.c): narrow's
 * gradient is zeros with grad_output at the slice, cat's is each input's slice of it.
 *
 * Errors are PyTorch's (dims out of range, impossible shapes, mismatched sizes, bad split sizes),
 * with the op named first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd_impl.h"
#include "core/profile_impl.h"

// ---- helpers ----------------------------------------------------------------------------------

// PyTorch's spelling of a shape in its messages: "[4, -1]".
static const char *list_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d] ? shape[d] : 1;
    }
}

// dst[dst_off + c . dst_stride] = src[src_off + c . src_stride] over the coordinates c of shape,
// through the backend's copy_strided. Dims of size 1 are dropped and neighbours that are
// contiguous in both merged first, so a slice along dim 0 is one run and the kernel indexes
// few dims. Nothing to do for an empty shape.
static tdm_status copy_region(const char *op, tdm_tensor *dst, int64_t dst_off,
                              const int64_t *dst_stride, const tdm_tensor *src, int64_t src_off,
                              const int64_t *src_stride, int ndim, const int64_t *shape) {
    int64_t sh[TDM_MAX_DIMS], ds[TDM_MAX_DIMS], ss[TDM_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) return TDM_OK;
        if (shape[d] == 1) continue;
        if (n > 0 && ds[n - 1] == dst_stride[d] * shape[d] &&
            ss[n - 1] == src_stride[d] * shape[d]) {
            sh[n - 1] *= shape[d];  // merge into the outer dim
            ds[n - 1] = dst_stride[d];
            ss[n - 1] = src_stride[d];
            continue;
        }
        sh[n] = shape[d];
        ds[n] = dst_stride[d];
        ss[n] = src_stride[d];
        n++;
    }
    if (n == 0) {  // one element
        sh[0] = 1;
        ds[0] = ss[0] = 1;
        n = 1;
    }
    const struct tdm_backend_ops *be = tdm_backend_of(dst);
    if (!be->copy_strided) return tdm_error_unsupported(op, be);
    return be->copy_strided(dst, dst_off, ds, src, src_off, ss, n, sh);
}

// ---- view, contiguous ---------------------------------------------------------------------------

tdm_tensor *tdm_tensor_view(const tdm_tensor *t, int ndim, const int64_t *shape) {
    const char *op = "view";
    TDM_PROFILE_OP(op, t);
    if (tdm_check_tensor(op, "input", t) != TDM_OK) return NULL;
    if (ndim < 0 || ndim > TDM_MAX_DIMS || (ndim > 0 && !shape)) {
        tdm_error_set(TDM_ERR_SHAPE, "view: %d dims (at most %d)%s", ndim, TDM_MAX_DIMS,
                      ndim > 0 && !shape ? ", shape is NULL" : "");
        return NULL;
    }
    int64_t out[TDM_MAX_DIMS], known = 1;
    int infer = -1;
    bool overflow = false;
    char b[160];
    for (int d = 0; d < ndim; d++) {
        out[d] = shape[d];
        if (shape[d] == -1) {
            if (infer >= 0) {
                tdm_error_set(TDM_ERR_SHAPE, "view: only one dimension can be inferred (shape %s)",
                              list_str(ndim, shape, b, sizeof b));
                return NULL;
            }
            infer = d;
        } else if (shape[d] < 0) {
            tdm_error_set(TDM_ERR_SHAPE, "view: invalid shape dimension %lld (shape %s)",
                          (long long)shape[d], list_str(ndim, shape, b, sizeof b));
            return NULL;
        } else {
            overflow |= __builtin_mul_overflow(known, shape[d], &known);
        }
    }
    if (infer >= 0 && !overflow) {
        if (known == 0) {
            tdm_error_set(TDM_ERR_SHAPE,
                          "view: cannot reshape tensor of %lld elements into shape "
                          "%s because the unspecified dimension size -1 can be any value and is "
                          "ambiguous",
                          (long long)t->numel, list_str(ndim, shape, b, sizeof b));
            return NULL;
        }
        if (t->numel % known == 0) {
            out[infer] = t->numel / known;
            known = t->numel;
        } else {
            overflow = true;
        }
    }
    if (overflow || known != t->numel) {
        tdm_error_set(TDM_ERR_SHAPE, "view: shape '%s' is invalid for input of size %lld",
                      list_str(ndim, shape, b, sizeof b), (long long)t->numel);
        return NULL;
    }
    return tdm_tensor_reshape(t, ndim, out);  // recorded as reshape
}

tdm_tensor *tdm_tensor_contiguous(const tdm_tensor *t) {
    if (tdm_check_tensor("contiguous", "input", t) != TDM_OK) return NULL;
    return tdm_tensor_reshape(t, t->ndim, t->shape);  // contiguous already: a view of it
}

// ---- transpose ----------------------------------------------------------------------------------

tdm_tensor *tdm_tensor_transpose(const tdm_tensor *t, int dim0, int dim1) {
    const char *op = "transpose";
    TDM_PROFILE_OP(op, t);
    if (tdm_check_tensor(op, "input", t) != TDM_OK) return NULL;
    int d0 = 0, d1 = 0;
    if (tdm_wrap_dim(op, dim0, t->ndim, &d0) != TDM_OK ||
        tdm_wrap_dim(op, dim1, t->ndim, &d1) != TDM_OK)
        return NULL;
    if (d0 == d1 || t->ndim < 2) return tdm_tensor_reshape(t, t->ndim, t->shape);  // the same
    int64_t shape[TDM_MAX_DIMS], src_stride[TDM_MAX_DIMS], dst_stride[TDM_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        const int from = d == d0 ? d1 : d == d1 ? d0 : d;
        shape[d] = t->shape[from];
        src_stride[d] = t->stride[from];
    }
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = tdm_tensor_empty(t->ndim, shape, t->dtype, t->device);
    contiguous_strides(t->ndim, shape, dst_stride);
    if (y && copy_region(op, y, 0, dst_stride, t, 0, src_stride, t->ndim, shape) != TDM_OK) {
        tdm_tensor_free(y);
        y = NULL;
    }
    tdm_grad_set_enabled(grad);
    return tdm_record_transpose(y, t, d0, d1);
}

// ---- narrow, split, chunk -----------------------------------------------------------------------

// t's elements start .. start+length-1 along dim (checked, start >= 0), contiguous. Not recorded.
static tdm_tensor *narrow_copy(const char *op, const tdm_tensor *t, int dim, int64_t start,
                               int64_t length) {
    int64_t shape[TDM_MAX_DIMS], dst_stride[TDM_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[dim] = length;
    tdm_tensor *y = tdm_tensor_empty(t->ndim, shape, t->dtype, t->device);
    contiguous_strides(t->ndim, shape, dst_stride);
    if (y && copy_region(op, y, 0, dst_stride, t, start * t->stride[dim], t->stride, t->ndim,
                         shape) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// PyTorch's checks of narrow; *d and *s the wrapped dim and start.
static tdm_status narrow_check(const char *op, const tdm_tensor *t, int dim, int64_t start,
                               int64_t length, int *d, int64_t *s) {
    TDM_TRY(tdm_check_tensor(op, "input", t));
    if (t->ndim == 0)
        return tdm_error_set(TDM_ERR_SHAPE, "%s() cannot be applied to a 0-dim tensor", op);
    TDM_TRY(tdm_wrap_dim(op, dim, t->ndim, d));
    const int64_t size = t->shape[*d];
    if (start < -size || start > size)  // start == size is a valid (empty) end
        return tdm_error_set(TDM_ERR_ARG,
                             "%s: start %lld out of range for dim %d of size %lld "
                             "(expected to be in range of [%lld, %lld])",
                             op, (long long)start, dim, (long long)size, (long long)-size,
                             (long long)size);
    *s = start < 0 ? start + size : start;
    if (length < 0 || *s > size - length)
        return tdm_error_set(TDM_ERR_ARG,
                             "%s: start (%lld) + length (%lld) exceeds dimension "
                             "size (%lld)",
                             op, (long long)*s, (long long)length, (long long)size);
    return TDM_OK;
}

tdm_tensor *tdm_tensor_narrow(const tdm_tensor *t, int dim, int64_t start, int64_t length) {
    const char *op = "narrow";
    TDM_PROFILE_OP(op, t);
    int d = 0;
    int64_t s = 0;
    if (narrow_check(op, t, dim, start, length, &d, &s) != TDM_OK) return NULL;
    if (length == t->shape[d]) return tdm_tensor_reshape(t, t->ndim, t->shape);  // all of it
    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = narrow_copy(op, t, d, s, length);
    tdm_grad_set_enabled(grad);
    return tdm_record_narrow(y, t, d, s);
}

tdm_tensor *tdm_narrow_backward(const tdm_tensor *gy, int ndim, const int64_t *shape, int dim,
                                int64_t start) {
    const char *op = "narrow_backward";
    TDM_PROFILE_OP(op, gy);
    int64_t stride[TDM_MAX_DIMS];
    if (tdm_check_tensor(op, "grad_output", gy) != TDM_OK) return NULL;
    if (gy->ndim != ndim || dim < 0 || dim >= ndim || start < 0 ||
        start > shape[dim] - gy->shape[dim]) {
        tdm_error_set(TDM_ERR_SHAPE,
                      "%s: grad_output does not fit the input at dim %d, start "
                      "%lld",
                      op, dim, (long long)start);
        return NULL;
    }
    for (int d = 0; d < ndim; d++) {
        if (d != dim && gy->shape[d] != shape[d]) {
            char a[96], b[96];
            tdm_error_set(TDM_ERR_SHAPE, "%s: grad_output %s does not fit the input %s", op,
                          tdm_shape_str(gy->ndim, gy->shape, a, sizeof a),
                          tdm_shape_str(ndim, shape, b, sizeof b));
            return NULL;
        }
    }
    tdm_tensor *gx = tdm_tensor_zeros(ndim, shape, gy->dtype, gy->device);
    contiguous_strides(ndim, shape, stride);
    if (gx && copy_region(op, gx, start * stride[dim], stride, gy, 0, gy->stride, ndim,
                          gy->shape) != TDM_OK) {
        tdm_tensor_free(gx);
        return NULL;
    }
    return gx;
}

// The pieces of the given lengths (n of them, summing to t's size along d) into out.
static int split_pieces(const tdm_tensor *t, int d, int n, int64_t first, int64_t last,
                        tdm_tensor **out, int cap, const char *op) {
    if (!out || n > cap) {
        tdm_error_set(TDM_ERR_ARG, "%s: %d pieces, but out holds %d", op, n, out ? cap : 0);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const int64_t len = i < n - 1 ? first : last;
        out[i] = tdm_tensor_narrow(t, d, (int64_t)i * first, len);
        if (!out[i]) {
            for (int k = 0; k < i; k++) {
                tdm_tensor_free(out[k]);
                out[k] = NULL;
            }
            return -1;
        }
    }
    return n;
}

int tdm_tensor_split(const tdm_tensor *t, int64_t split_size, int dim, tdm_tensor **out, int cap) {
    const char *op = "split";
    int d = 0;
    if (tdm_check_tensor(op, "input", t) != TDM_OK) return -1;
    if (t->ndim == 0) {
        tdm_error_set(TDM_ERR_SHAPE, "split expects at least a 1-dimensional tensor");
        return -1;
    }
    if (split_size < 0) {
        tdm_error_set(TDM_ERR_ARG,
                      "split expects split_size be non-negative, but got "
                      "split_size=%lld",
                      (long long)split_size);
        return -1;
    }
    if (tdm_wrap_dim(op, dim, t->ndim, &d) != TDM_OK) return -1;
    const int64_t size = t->shape[d];
    if (split_size == 0 && size != 0) {
        tdm_error_set(TDM_ERR_ARG,
                      "split_size can only be 0 if dimension size is 0, but got "
                      "dimension size of %lld",
                      (long long)size);
        return -1;
    }
    // PyTorch: max(ceil(size / split_size), 1) pieces, the last split_size - (pieces
    // split_size - size) long; split_size 0 (size 0): one empty piece
    int64_t n = split_size ? size / split_size + (size % split_size != 0) : 1;
    if (n < 1) n = 1;
    if (n > cap || n > 1000000000) {
        tdm_error_set(TDM_ERR_ARG, "%s: %lld pieces, but out holds %d", op, (long long)n,
                      out ? cap : 0);
        return -1;
    }
    const int64_t last = size - (n - 1) * split_size;
    return split_pieces(t, d, (int)n, split_size, last, out, cap, op);
}

int tdm_tensor_chunk(const tdm_tensor *t, int chunks, int dim, tdm_tensor **out, int cap) {
    const char *op = "chunk";
    int d = 0;
    if (tdm_check_tensor(op, "input", t) != TDM_OK) return -1;
    if (t->ndim == 0) {
        tdm_error_set(TDM_ERR_SHAPE, "chunk expects at least a 1-dimensional tensor");
        return -1;
    }
    if (chunks <= 0) {
        tdm_error_set(TDM_ERR_ARG, "chunk expects `chunks` to be greater than 0, got: %d", chunks);
        return -1;
    }
    if (tdm_wrap_dim(op, dim, t->ndim, &d) != TDM_OK) return -1;
    const int64_t size = t->shape[d];
    // ceil(size / chunks) per piece; a dim of size 0 gives `chunks` empty pieces (PyTorch)
    if (size == 0) return split_pieces(t, d, chunks, 0, 0, out, cap, op);
    return tdm_tensor_split(t, (size + chunks - 1) / chunks, d, out, cap);
}

// ---- cat, stack ---------------------------------------------------------------------------------

// PyTorch's promote_types over the dtypes tandem has: bool < integers < floats; i32 with i64
// is i64; f16 with bf16 is f32; any float with f64 is f64; otherwise the wider one.
static tdm_dtype promote(tdm_dtype a, tdm_dtype b) {
    if (a == b) return a;
    if (a == TDM_DTYPE_BOOL) return b;
    if (b == TDM_DTYPE_BOOL) return a;
    const bool fa = tdm_dtype_is_float(a), fb = tdm_dtype_is_float(b);
    if (fa != fb) return fa ? a : b;
    if (!fa) return TDM_DTYPE_I64;  // i32 with i64
    if (a == TDM_DTYPE_F64 || b == TDM_DTYPE_F64) return TDM_DTYPE_F64;
    return TDM_DTYPE_F32;  // f32 with f16/bf16, f16 with bf16
}

// PyTorch's legacy rule: a 1-D tensor of size 0 is skipped by cat (but for its dtype).
static bool cat_skipped(const tdm_tensor *t) {
    return t->ndim == 1 && t->shape[0] == 0;
}

// torch.cat's checks and output shape; *ref is the first tensor not skipped (-1: all are).
static tdm_status cat_check(const char *op, tdm_tensor *const *ts, int n, int dim, int *d, int *ref,
                            int64_t *shape, tdm_dtype *dt) {
    if (n < 1 || !ts)
        return tdm_error_set(TDM_ERR_ARG, "%s: expected a non-empty list of tensors", op);
    *ref = -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return tdm_error_set(TDM_ERR_ARG, "%s: tensor %d is NULL", op, i);
        TDM_TRY(tdm_check_same_device(op, ts[0], ts[i]));
        if (ts[i]->ndim == 0)
            return tdm_error_set(TDM_ERR_SHAPE,
                                 "%s: zero-dimensional tensor (at position %d) "
                                 "cannot be concatenated",
                                 op, i);
        *dt = i ? promote(*dt, ts[i]->dtype) : ts[i]->dtype;
        if (*ref < 0 && !cat_skipped(ts[i])) *ref = i;
    }
    const tdm_tensor *r = ts[*ref < 0 ? 0 : *ref];
    TDM_TRY(tdm_wrap_dim(op, dim, r->ndim, d));
    memcpy(shape, r->shape, sizeof r->shape);
    if (*ref < 0) return TDM_OK;  // all skipped: an empty (0,)
    shape[*d] = 0;
    for (int i = 0; i < n; i++) {
        const tdm_tensor *t = ts[i];
        if (cat_skipped(t)) continue;
        if (t->ndim != r->ndim)
            return tdm_error_set(TDM_ERR_SHAPE,
                                 "%s: tensors must have same number of "
                                 "dimensions: got %d and %d (tensor %d)",
                                 op, r->ndim, t->ndim, i);
        for (int k = 0; k < r->ndim; k++)
            if (k != *d && t->shape[k] != r->shape[k])
                return tdm_error_set(TDM_ERR_SHAPE,
                                     "%s: sizes of tensors must match except in "
                                     "dimension %d. Expected size %lld but got size %lld for "
                                     "tensor number %d in the list",
                                     op, *d, (long long)r->shape[k], (long long)t->shape[k], i);
        if (__builtin_add_overflow(shape[*d], t->shape[*d], &shape[*d]))
            return tdm_error_set(TDM_ERR_SHAPE, "%s: the joined size overflows", op);
    }
    return TDM_OK;
}

// cat of ts as `name` ("cat" or "stack"): the inputs promoted to one dtype (tdm_tensor_to,
// recorded: their gradients go back to their dtypes), copied into their slices.
static tdm_tensor *cat_named(const char *name, tdm_tensor *const *ts, int n, int dim) {
    int d = 0, ref = -1;
    int64_t shape[TDM_MAX_DIMS];
    tdm_dtype dt = TDM_DTYPE_F32;
    if (cat_check(name, ts, n, dim, &d, &ref, shape, &dt) != TDM_OK) return NULL;
    const tdm_tensor *r = ts[ref < 0 ? 0 : ref];
    tdm_tensor **in = calloc((size_t)n, sizeof *in);
    if (!in) {
        tdm_error_set(TDM_ERR_OOM, "%s: out of host memory", name);
        return NULL;
    }
    tdm_status s = TDM_OK;
    for (int i = 0; i < n && s == TDM_OK; i++) {  // recorded casts where the dtype differs
        in[i] =
            ts[i]->dtype == dt ? tdm_tensor_retain(ts[i]) : tdm_tensor_to(ts[i], ts[i]->device, dt);
        if (!in[i]) s = tdm_last_status();
    }
    tdm_tensor *y = NULL;
    if (s == TDM_OK) {
        bool grad = tdm_grad_set_enabled(false);
        y = tdm_tensor_empty(r->ndim, shape, dt, r->device);
        int64_t stride[TDM_MAX_DIMS], at = 0;
        contiguous_strides(r->ndim, shape, stride);
        for (int i = 0; y && i < n; i++) {
            if (cat_skipped(in[i]) && ref >= 0) continue;
            if (copy_region(name, y, at * stride[d], stride, in[i], 0, in[i]->stride, in[i]->ndim,
                            in[i]->shape) != TDM_OK) {
                tdm_tensor_free(y);
                y = NULL;
            }
            at += in[i]->shape[d];
        }
        tdm_grad_set_enabled(grad);
        y = tdm_record_cat(y, name, n, (const tdm_tensor *const *)in, d);
    }
    for (int i = 0; i < n; i++) tdm_tensor_free(in[i]);
    free(in);
    return y;
}

tdm_tensor *tdm_cat(tdm_tensor *const *ts, int n, int dim) {
    TDM_PROFILE_OP("cat", ts && n > 0 ? ts[0] : NULL);
    return cat_named("cat", ts, n, dim);
}

tdm_tensor *tdm_stack(tdm_tensor *const *ts, int n, int dim) {
    const char *op = "stack";
    TDM_PROFILE_OP(op, ts && n > 0 ? ts[0] : NULL);
    if (n < 1 || !ts) {
        tdm_error_set(TDM_ERR_ARG, "stack expects a non-empty TensorList");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            tdm_error_set(TDM_ERR_ARG, "stack: tensor %d is NULL", i);
            return NULL;
        }
    const tdm_tensor *t0 = ts[0];
    int d = 0;
    if (tdm_wrap_dim(op, dim, t0->ndim + 1, &d) != TDM_OK) return NULL;
    if (t0->ndim + 1 > TDM_MAX_DIMS) {
        tdm_error_set(TDM_ERR_SHAPE, "stack: %d-D tensors give %d dims (at most %d)", t0->ndim,
                      t0->ndim + 1, TDM_MAX_DIMS);
        return NULL;
    }
    for (int i = 1; i < n; i++) {
        const tdm_tensor *t = ts[i];
        bool same = t->ndim == t0->ndim;
        for (int k = 0; same && k < t0->ndim; k++) same = t->shape[k] == t0->shape[k];
        if (!same) {
            char a[96], b[96];
            tdm_error_set(TDM_ERR_SHAPE,
                          "stack expects each tensor to be equal size, but got "
                          "%s at entry 0 and %s at entry %d",
                          list_str(t0->ndim, t0->shape, a, sizeof a),
                          list_str(t->ndim, t->shape, b, sizeof b), i);
            return NULL;
        }
    }
    // each unsqueezed at d (a recorded reshape), then joined along d
    int64_t shape[TDM_MAX_DIMS];
    for (int k = 0, j = 0; k <= t0->ndim; k++) shape[k] = k == d ? 1 : t0->shape[j++];
    tdm_tensor **u = calloc((size_t)n, sizeof *u), *y = NULL;
    if (!u) {
        tdm_error_set(TDM_ERR_OOM, "stack: out of host memory");
        return NULL;
    }
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = (u[i] = tdm_tensor_reshape(ts[i], t0->ndim + 1, shape)) != NULL;
    if (ok) y = cat_named(op, u, n, d);
    for (int i = 0; i < n; i++) tdm_tensor_free(u[i]);
    free(u);
    return y;
}
