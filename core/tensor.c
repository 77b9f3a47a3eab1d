/* tensor.c — tensor creation, reference counting, copies across devices and dtypes, and the
 * argument checks every op shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd_impl.h"
#include "core/tensor_impl.h"
#include "core/profile_impl.h"

int64_t tdm_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

const char *tdm_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "(");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

const struct tdm_backend_ops *tdm_backend_of(const tdm_tensor *t) { return t->storage->backend; }

// ---- creation ----------------------------------------------------------------------------

// A shape's dims must be non-negative, and their product with each 0 counted as 1, times the
// element size, must fit the allocation cap: a zero-size tensor holds no bytes, but its strides
// and the loops and scratch an op sizes from its other dims do not see the zero, so (0, 2^40,
// 2^40) would overflow them. Within the cap, every product of dims fits an int64.
static tdm_status shape_check(const char *op, int ndim, const int64_t *shape, size_t elem) {
    int64_t extent = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tdm_error_set(TDM_ERR_SHAPE, "%s: negative size %lld in dim %d", op,
                                 (long long)shape[i], i);
        int64_t d = shape[i] ? shape[i] : 1;
        if (extent > (int64_t)(TDM_MAX_ALLOC_BYTES / elem) / d) {
            char b[160];
            bool empty = false;
            for (int k = 0; k < ndim; k++) empty |= shape[k] == 0;
            return tdm_error_set(TDM_ERR_OOM, "%s: shape %s too large (over %zu bytes%s)", op,
                                 tdm_shape_str(ndim, shape, b, sizeof b), TDM_MAX_ALLOC_BYTES,
                                 empty ? " with its 0 dims counted as 1" : "");
        }
        extent *= d;
    }
    return TDM_OK;
}

// A new tensor; host_be non-NULL: a cpu tensor whose memory comes from host_be->host_alloc
// (kind, host_device), as tdm_tensor_empty_host_of promises.
static tdm_tensor *tensor_new(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                              const struct tdm_backend_ops *host_be, tdm_host_kind kind,
                              int host_device) {
    if (ndim < 0 || ndim > TDM_MAX_DIMS) {
        tdm_error_set(TDM_ERR_SHAPE, "tensor: %d dims (at most %d)", ndim, TDM_MAX_DIMS);
        return NULL;
    }
    if ((unsigned)dt >= TDM_DTYPE_COUNT) {
        tdm_error_set(TDM_ERR_DTYPE, "tensor: invalid dtype %d", (int)dt);
        return NULL;
    }
    size_t elem = tdm_dtype_size(dt);
    if (shape_check("tensor", ndim, shape, elem) != TDM_OK) return NULL;
    int64_t numel = tdm_shape_numel(ndim, shape);
    // Host memory is also checked against what the machine has; a device's allocator reports
    // its own out-of-memory.
    if (tdm_alloc_check("tensor", numel, elem, dev.type == TDM_DEVICE_CPU) != TDM_OK) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be) return NULL;
    if (dev.type != TDM_DEVICE_CPU && !tdm_device_available(dev)) return NULL;

    tdm_tensor *t = calloc(1, sizeof *t);
    tdm_storage *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t);
        free(s);
        tdm_error_set(TDM_ERR_OOM, "tensor: out of host memory for the tensor header");
        return NULL;
    }
    s->nbytes = (size_t)numel * elem;
    s->device = dev;
    s->backend = be;
    s->refcount = 1;
    // Allocate at least one byte so that empty tensors still have a valid pointer.
    if (host_be) {
        s->host_backend = host_be;
        s->host_kind = kind;
        s->host_device = host_device;
        s->data = host_be->host_alloc(s->nbytes ? s->nbytes : 1, kind, host_device);
    } else {
        s->guarded = tdm_debug_guards();
        s->data = s->guarded ? tdm_debug_guarded_alloc(be, s->nbytes ? s->nbytes : 1, dev.index)
                             : be->alloc(s->nbytes ? s->nbytes : 1, dev.index);
    }
    if (!s->data) {
        free(t);
        free(s);
        return NULL;   // the backend said why
    }
    t->dtype = dt;
    t->device = dev;
    t->ndim = ndim;
    t->numel = numel;
    t->storage = s;
    t->refcount = 1;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = stride;
        stride *= shape[i];
    }
    if (tdm_debug_poison() && tdm_debug_poison_tensor(t) != TDM_OK) {
        tdm_tensor_free(t);
        return NULL;
    }
    return t;
}

tdm_tensor *tdm_tensor_empty(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev) {
    return tensor_new(ndim, shape, dt, dev, NULL, TDM_HOST_PAGEABLE, 0);
}

tdm_tensor *tdm_tensor_empty_host_of(int ndim, const int64_t *shape, tdm_dtype dt,
                                     const struct tdm_backend_ops *host_be, tdm_host_kind kind,
                                     int host_device) {
    return tensor_new(ndim, shape, dt, TDM_CPU, host_be, kind, host_device);
}

tdm_tensor *tdm_tensor_zeros(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev) {
    tdm_tensor *t = tdm_tensor_empty(ndim, shape, dt, dev);
    if (t && tdm_backend_of(t)->memset_zero(t->storage->data, t->storage->nbytes,
                                             dev.index) != TDM_OK) {
        tdm_tensor_free(t);
        return NULL;
    }
    return t;
}

tdm_tensor *tdm_tensor_from_host(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                                 const void *data) {
    tdm_tensor *t = tdm_tensor_empty(ndim, shape, dt, dev);
    if (!t) return NULL;
    if (t->storage->nbytes &&
        tdm_backend_of(t)->copy_from_host(t->storage->data, data, t->storage->nbytes,
                                          dev.index) != TDM_OK) {
        tdm_tensor_free(t);
        return NULL;
    }
    return t;
}

static tdm_tensor *tensor_random(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                                 uint64_t seed, uint64_t offset, bool normal) {
    if (!tdm_dtype_is_float(dt)) {
        tdm_error_set(TDM_ERR_DTYPE, "%s: dtype %s is not floating point",
                      normal ? "randn" : "rand", tdm_dtype_name(dt));
        return NULL;
    }
    tdm_tensor *t = tdm_tensor_empty(ndim, shape, dt, dev);
    if (!t) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_of(t);
    tdm_status (*fill)(tdm_tensor *, uint64_t, uint64_t) = normal ? be->rand_normal : be->rand_uniform;
    tdm_status s = fill ? fill(t, seed, offset)
                        : tdm_error_unsupported(normal ? "randn" : "rand", be);
    if (s != TDM_OK) {
        tdm_tensor_free(t);
        return NULL;
    }
    return t;
}

tdm_tensor *tdm_tensor_rand(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                            uint64_t seed, uint64_t offset) {
    return tensor_random(ndim, shape, dt, dev, seed, offset, false);
}

tdm_tensor *tdm_tensor_randn(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                             uint64_t seed, uint64_t offset) {
    return tensor_random(ndim, shape, dt, dev, seed, offset, true);
}

// ---- references --------------------------------------------------------------------------

tdm_tensor *tdm_tensor_retain(tdm_tensor *t) {
    if (t) t->refcount++;
    return t;
}

void tdm_tensor_free(tdm_tensor *t) {
    if (!t || --t->refcount > 0) return;
    tdm_tensor_free(t->grad);
    tdm_grad_node_release(t->grad_fn);
    tdm_storage *s = t->storage;
    if (--s->refcount == 0) {
        if (s->guarded) tdm_debug_guarded_free(t, s);
        else if (s->host_backend)
            s->host_backend->host_free(s->data, s->nbytes ? s->nbytes : 1, s->host_kind,
                                       s->host_device);
        else s->backend->free(s->data, s->nbytes ? s->nbytes : 1, s->device.index);
        free(s);
    }
    free(t);
}

tdm_tensor *tdm_tensor_reshape(const tdm_tensor *t, int ndim, const int64_t *shape) {
    if (tdm_check_tensor("reshape", "input", t) != TDM_OK) return NULL;
    if (ndim < 0 || ndim > TDM_MAX_DIMS) {
        tdm_error_set(TDM_ERR_SHAPE, "reshape: %d dims (at most %d)", ndim, TDM_MAX_DIMS);
        return NULL;
    }
    if (shape_check("reshape", ndim, shape, tdm_dtype_size(t->dtype)) != TDM_OK) return NULL;
    if (tdm_shape_numel(ndim, shape) != t->numel) {
        char a[96], b[96];
        tdm_error_set(TDM_ERR_SHAPE, "reshape: shape %s is invalid for input of shape %s",
                      tdm_shape_str(ndim, shape, a, sizeof a),
                      tdm_shape_str(t->ndim, t->shape, b, sizeof b));
        return NULL;
    }
    tdm_tensor *v = calloc(1, sizeof *v);
    if (!v) {
        tdm_error_set(TDM_ERR_OOM, "reshape: out of host memory");
        return NULL;
    }
    *v = *t;
    v->ndim = ndim;
    v->refcount = 1;
    v->requires_grad = false;   // a view starts without history; recorded below
    v->grad_fn = NULL;
    v->grad = NULL;
    v->grad_hook = NULL;
    v->grad_hook_ctx = NULL;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        v->shape[i] = shape[i];
        v->stride[i] = stride;
        stride *= shape[i];
    }
    v->storage->refcount++;
    return tdm_record_reshape(v, t);
}

// ---- copies -------------------------------------------------------------------------------

tdm_status tdm_tensor_to_host(const tdm_tensor *t, void *dst, size_t nbytes) {
    TDM_TRY(tdm_check_tensor("to_host", "input", t));
    size_t want = tdm_tensor_nbytes(t);
    if (nbytes != want)
        return tdm_error_set(TDM_ERR_ARG, "to_host: buffer of %zu bytes for a %zu-byte tensor",
                             nbytes, want);
    if (!want) return TDM_OK;
    return tdm_backend_of(t)->copy_to_host(dst, t->storage->data, want, t->device.index);
}

static double load_elem(tdm_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case TDM_DTYPE_F32: return ((const float *)p)[i];
    case TDM_DTYPE_F16: return tdm_f16_to_f32(((const uint16_t *)p)[i]);
    case TDM_DTYPE_BF16: return tdm_bf16_to_f32(((const uint16_t *)p)[i]);
    case TDM_DTYPE_F64: return ((const double *)p)[i];
    case TDM_DTYPE_I32: return ((const int32_t *)p)[i];
    case TDM_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case TDM_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0.0;
    }
}

tdm_status tdm_tensor_to_host_f64(const tdm_tensor *t, double *dst) {
    TDM_TRY(tdm_check_tensor("to_host_f64", "input", t));
    size_t nbytes = tdm_tensor_nbytes(t);
    void *raw = malloc(nbytes ? nbytes : 1);
    if (!raw) return tdm_error_set(TDM_ERR_OOM, "to_host_f64: out of host memory");
    tdm_status s = tdm_tensor_to_host(t, raw, nbytes);
    for (int64_t i = 0; s == TDM_OK && i < t->numel; i++) dst[i] = load_elem(t->dtype, raw, i);
    free(raw);
    return s;
}

// dst = src (checked by the caller); not profiled itself (to and clone are).
static tdm_status copy_into(tdm_tensor *dst, const tdm_tensor *src);

tdm_status tdm_tensor_copy_(tdm_tensor *dst, const tdm_tensor *src) {
    TDM_PROFILE_OP("copy_", dst, src);
    return copy_into(dst, src);
}

static tdm_status copy_into(tdm_tensor *dst, const tdm_tensor *src) {
    TDM_TRY(tdm_check_tensor("copy_", "dst", dst));
    TDM_TRY(tdm_check_tensor("copy_", "src", src));
    if (dst->numel != src->numel)
        return tdm_error_set(TDM_ERR_SHAPE, "copy_: %lld elements into %lld",
                             (long long)src->numel, (long long)dst->numel);
    if (!dst->numel) return TDM_OK;
    // Convert on src's device when the dtype changes, then move bytes (through the host when
    // the devices differ).
    tdm_tensor *conv = NULL;
    const tdm_tensor *from = src;
    if (src->dtype != dst->dtype) {
        conv = tdm_tensor_empty(src->ndim, src->shape, dst->dtype, src->device);
        if (!conv) return tdm_last_status();
        const struct tdm_backend_ops *be = tdm_backend_of(src);
        tdm_status s = be->cast ? be->cast(conv, src) : tdm_error_unsupported("cast", be);
        if (s != TDM_OK) {
            tdm_tensor_free(conv);
            return s;
        }
        from = conv;
    }
    size_t n = tdm_tensor_nbytes(dst);
    tdm_status s;
    if (from->device.type == TDM_DEVICE_CPU) {
        s = tdm_backend_of(dst)->copy_from_host(dst->storage->data, from->storage->data, n,
                                                dst->device.index);
    } else if (dst->device.type == TDM_DEVICE_CPU) {
        s = tdm_backend_of(from)->copy_to_host(dst->storage->data, from->storage->data, n,
                                               from->device.index);
    } else if ((s = tdm_copy_device_to_device(dst, from)) != TDM_ERR_UNSUPPORTED) {
        // copied on the device (a copy engine), or failed with the backend's message
    } else {
        void *stage = malloc(n);
        s = stage ? tdm_backend_of(from)->copy_to_host(stage, from->storage->data, n,
                                                       from->device.index)
                  : tdm_error_set(TDM_ERR_OOM, "copy_: out of host memory for staging");
        if (s == TDM_OK)
            s = tdm_backend_of(dst)->copy_from_host(dst->storage->data, stage, n,
                                                    dst->device.index);
        free(stage);
    }
    tdm_tensor_free(conv);
    return s;
}

static tdm_tensor *tensor_copy(const tdm_tensor *t, tdm_device dev, tdm_dtype dt) {
    tdm_tensor *out = tdm_tensor_empty(t->ndim, t->shape, dt, dev);
    if (out && copy_into(out, t) != TDM_OK) {
        tdm_tensor_free(out);
        return NULL;
    }
    return out;
}

// Both record themselves for autograd (the gradient goes back to t's dtype and device).
tdm_tensor *tdm_tensor_to(const tdm_tensor *t, tdm_device dev, tdm_dtype dt) {
    TDM_PROFILE_OP("to", t);
    if (tdm_check_tensor("to", "input", t) != TDM_OK) return NULL;
    return tdm_record_copy(tensor_copy(t, dev, dt), t, "to");
}

tdm_tensor *tdm_tensor_clone(const tdm_tensor *t) {
    TDM_PROFILE_OP("clone", t);
    if (tdm_check_tensor("clone", "input", t) != TDM_OK) return NULL;
    return tdm_record_copy(tensor_copy(t, t->device, t->dtype), t, "clone");
}

// ---- permute -------------------------------------------------------------------------------

// y[i0..ik] = t[at the permuted coordinates]: the backend's expand (a strided gather with
// scale 1) reads a view of t whose shape and strides are t's taken in dims' order, so one
// slot serves both; y is written contiguous. Recorded for autograd (the gradient is gy
// permuted back).
tdm_tensor *tdm_tensor_permute(const tdm_tensor *t, const int *dims) {
    const char *op = "permute";
    TDM_PROFILE_OP(op, t);
    if (tdm_check_tensor(op, "input", t) != TDM_OK || tdm_check_float(op, "input", t) != TDM_OK)
        return NULL;
    if (!dims) {
        tdm_error_set(TDM_ERR_ARG, "permute: dims is NULL");
        return NULL;
    }
    tdm_tensor src = *t;   // the strided view: read by the backend only
    bool seen[TDM_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = 0;   // set by tdm_wrap_dim (GCC -O3 cannot see it: maybe-uninitialized)
        if (tdm_wrap_dim(op, dims[i], t->ndim, &d) != TDM_OK) return NULL;
        if (seen[d]) {
            tdm_error_set(TDM_ERR_ARG, "permute: dim %d repeats in dims (a permutation of "
                          "0..%d is needed)", dims[i], t->ndim - 1);
            return NULL;
        }
        seen[d] = true;
        src.shape[i] = t->shape[d];
        src.stride[i] = t->stride[d];
    }
    const struct tdm_backend_ops *be = tdm_backend_of(t);
    if (!be->expand) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *y = tdm_tensor_empty(t->ndim, src.shape, t->dtype, t->device);
    if (y && y->numel > 0 && be->expand(&src, 1.0, y) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return tdm_record_permute(y, t, dims);
}

// ---- queries --------------------------------------------------------------------------------

int tdm_tensor_ndim(const tdm_tensor *t) { return t->ndim; }
const int64_t *tdm_tensor_shape(const tdm_tensor *t) { return t->shape; }
const int64_t *tdm_tensor_strides(const tdm_tensor *t) { return t->stride; }
int64_t tdm_tensor_numel(const tdm_tensor *t) { return t->numel; }
size_t tdm_tensor_nbytes(const tdm_tensor *t) { return (size_t)t->numel * tdm_dtype_size(t->dtype); }
tdm_dtype tdm_tensor_dtype(const tdm_tensor *t) { return t->dtype; }
tdm_device tdm_tensor_device(const tdm_tensor *t) { return t->device; }
void *tdm_tensor_data(tdm_tensor *t) { return t->storage->data; }
const void *tdm_tensor_data_const(const tdm_tensor *t) { return t->storage->data; }

// ---- checks shared by the ops -------------------------------------------------------------

tdm_status tdm_check_tensor(const char *op, const char *arg, const tdm_tensor *t) {
    if (!t) return tdm_error_set(TDM_ERR_ARG, "%s: %s is NULL", op, arg);
    return TDM_OK;
}

tdm_status tdm_check_same_device(const char *op, const tdm_tensor *a, const tdm_tensor *b) {
    if (!a || !b || tdm_device_equal(a->device, b->device)) return TDM_OK;
    char da[32], db[32];
    return tdm_error_set(TDM_ERR_DEVICE,
                         "%s: expected all tensors on the same device, got %s and %s", op,
                         tdm_device_str(a->device, da, sizeof da),
                         tdm_device_str(b->device, db, sizeof db));
}

tdm_status tdm_check_float(const char *op, const char *arg, const tdm_tensor *t) {
    if (tdm_dtype_is_float(t->dtype)) return TDM_OK;
    return tdm_error_set(TDM_ERR_DTYPE, "%s: %s has dtype %s, expected a floating dtype", op, arg,
                         tdm_dtype_name(t->dtype));
}

tdm_status tdm_check_same_dtype(const char *op, const tdm_tensor *a, const tdm_tensor *b) {
    if (!a || !b || a->dtype == b->dtype) return TDM_OK;
    return tdm_error_set(TDM_ERR_DTYPE, "%s: expected the same dtype, got %s and %s", op,
                         tdm_dtype_name(a->dtype), tdm_dtype_name(b->dtype));
}

tdm_status tdm_check_ndim(const char *op, const char *arg, const tdm_tensor *t, int lo, int hi) {
    if (t->ndim >= lo && t->ndim <= hi) return TDM_OK;
    char s[96];
    if (lo == hi)
        return tdm_error_set(TDM_ERR_SHAPE, "%s: %s must be %d-D, got shape %s", op, arg, lo,
                             tdm_shape_str(t->ndim, t->shape, s, sizeof s));
    return tdm_error_set(TDM_ERR_SHAPE, "%s: %s must be %d-D to %d-D, got shape %s", op, arg, lo,
                         hi, tdm_shape_str(t->ndim, t->shape, s, sizeof s));
}

tdm_status tdm_broadcast_shapes(const char *op, const tdm_tensor *a, const tdm_tensor *b,
                                int *out_ndim, int64_t *out_shape) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char x[96], y[96];
            return tdm_error_set(TDM_ERR_SHAPE,
                                 "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)",
                                 op, tdm_shape_str(a->ndim, a->shape, x, sizeof x),
                                 tdm_shape_str(b->ndim, b->shape, y, sizeof y), i, (long long)sa,
                                 (long long)sb);
        }
        out_shape[i] = sa == 1 ? sb : sa;
    }
    *out_ndim = nd;
    return TDM_OK;
}

tdm_status tdm_wrap_dim(const char *op, int dim, int ndim, int *out) {
    int n = ndim ? ndim : 1;   // a scalar accepts dim 0 and -1, as in PyTorch
    if (dim < -n || dim >= n)
        return tdm_error_set(TDM_ERR_ARG,
                             "%s: dim %d out of range for a %d-D tensor (expected [%d, %d])", op,
                             dim, ndim, -n, n - 1);
    *out = dim < 0 ? dim + n : dim;
    return TDM_OK;
}
