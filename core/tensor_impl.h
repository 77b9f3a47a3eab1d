/* tensor_impl.h — the tensor struct and core's internal helpers: error recording, shape checks,
 * output allocation. Shared by core/ and the backends; never part of the public headers. */
#ifndef TANDEM_CORE_TENSOR_IMPL_H
#define TANDEM_CORE_TENSOR_IMPL_H

#include "tandem/tandem.h"
#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// Storage: one device allocation, shared by the tensors that view it.
typedef struct {
    void *data;
    size_t nbytes;
    tdm_device device;
    const struct tdm_backend_ops *backend;
    int refcount;
    bool guarded;   // allocated with debug guard regions (core/debug.c)
    // cpu tensors in host memory other than pageable (tandem/stream.h): allocated by
    // host_backend->host_alloc for device index host_device and freed by its host_free;
    // host_backend is NULL for every other storage.
    tdm_host_kind host_kind;
    const struct tdm_backend_ops *host_backend;
    int host_device;
} tdm_storage;

struct tdm_tensor {
    tdm_dtype dtype;
    tdm_device device;
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    int64_t stride[TDM_MAX_DIMS];   // in elements; contiguous row-major
    int64_t numel;
    tdm_storage *storage;
    int refcount;
    // autograd (core/autograd.c). Views and copies start without any of it.
    bool requires_grad;               // a leaf set so, or the output of a recorded op
    struct tdm_grad_node *grad_fn;    // owned reference: the node that produced it; NULL = leaf
    struct tdm_tensor *grad;          // owned: the accumulated gradient (leaves), or NULL
    tdm_grad_hook grad_hook;          // leaves: called when a backward completed its gradient
    void *grad_hook_ctx;
};

// ---- errors ----------------------------------------------------------------------------
// Records status + message (printf-style) for tdm_last_error(); returns the status.
tdm_status tdm_error_set(tdm_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define TDM_TRY(expr)                          \
    do {                                       \
        tdm_status tdm_try_s_ = (expr);        \
        if (tdm_try_s_ != TDM_OK) return tdm_try_s_; \
    } while (0)

// The error for an optional backend slot that is NULL: "<op>: not supported by the cuda backend".
tdm_status tdm_error_unsupported(const char *op, const struct tdm_backend_ops *be);

// ---- debug mode (core/debug.c): called by tensor.c only while a mode is on ----
tdm_status tdm_debug_poison_tensor(tdm_tensor *t);
void *tdm_debug_guarded_alloc(const struct tdm_backend_ops *be, size_t nbytes, int device_index);
void tdm_debug_guarded_free(const tdm_tensor *t, tdm_storage *s);

// ---- tensor helpers ----------------------------------------------------------------------
static inline const void *tdm_data_c(const tdm_tensor *t) { return t->storage->data; }
static inline void *tdm_data(tdm_tensor *t) { return t->storage->data; }
const struct tdm_backend_ops *tdm_backend_of(const tdm_tensor *t);
// dst = src's bytes between two devices of one backend, synchronously, without staging through
// the host (stream.c); TDM_ERR_UNSUPPORTED, no error set, when the backend cannot.
tdm_status tdm_copy_device_to_device(tdm_tensor *dst, const tdm_tensor *src);
// Where pin_memory() pins (stream.c): cuda:0 when a CUDA device is there, else the cpu.
tdm_device tdm_pin_device(void);
// A cpu tensor in host memory of `kind` from host_be->host_alloc(…, host_device) (stream.c).
tdm_tensor *tdm_tensor_empty_host_of(int ndim, const int64_t *shape, tdm_dtype dt,
                                     const struct tdm_backend_ops *host_be, tdm_host_kind kind,
                                     int host_device);
int64_t tdm_shape_numel(int ndim, const int64_t *shape);

// ---- the allocation cap (memory.c) ----
// No allocation whose size a file or a command line decides is made before this check: a
// hostile case file or argument can claim any size, and an allocator asked for it may
// overcommit (and the process die touching it) or, under ASan, abort.
#define TDM_MAX_ALLOC_BYTES ((size_t)1 << 40)
// TDM_OK when `count` elements of `elem_size` bytes fit the cap (TDM_MAX_ALLOC_BYTES, or less
// from the environment: TANDEM_MAX_ALLOC_BYTES) and, for host memory (`host`), the machine's
// physical memory; else TDM_ERR_OOM with a message naming `what` and the sizes.
tdm_status tdm_alloc_check(const char *what, int64_t count, size_t elem_size, bool host);
// Where the channels, rows and columns sit in a 4-D tensor of a conv layout — x, the weight (its
// C/g), y (its O) alike — as {c, h, w}: NCHW {1, 2, 3}, NHWC {3, 1, 2}. Core and the backends
// read conv shapes through it.
static inline const int *tdm_conv_axes(tdm_conv_layout layout) {
    static const int axes[2][3] = {{1, 2, 3}, {3, 1, 2}};
    return axes[layout == TDM_CONV_LAYOUT_NHWC];
}

// ---- argument checks shared by the ops: each records a message naming `op` ----
tdm_status tdm_check_tensor(const char *op, const char *arg, const tdm_tensor *t);
tdm_status tdm_check_same_device(const char *op, const tdm_tensor *a, const tdm_tensor *b);
tdm_status tdm_check_float(const char *op, const char *arg, const tdm_tensor *t);
tdm_status tdm_check_same_dtype(const char *op, const tdm_tensor *a, const tdm_tensor *b);
tdm_status tdm_check_ndim(const char *op, const char *arg, const tdm_tensor *t, int lo, int hi);
// PyTorch's broadcasting of two shapes into out (ndim returned in *out_ndim).
tdm_status tdm_broadcast_shapes(const char *op, const tdm_tensor *a, const tdm_tensor *b,
                                int *out_ndim, int64_t *out_shape);
// Wraps a possibly negative dim into [0, ndim).
tdm_status tdm_wrap_dim(const char *op, int dim, int ndim, int *out);

#ifdef __cplusplus
}
#endif

#endif
