/* tensor.h — tensors: creation, copies between devices and dtypes, shape queries.
 *
 * Ownership rule: a tensor is reference counted. Every function that returns a tdm_tensor *
 * returns a new reference that the caller owns and releases with tdm_tensor_free().
 * tdm_tensor_retain() adds a reference. Arguments are borrowed: no function keeps or frees a
 * tensor it was passed unless it says so. Views (tdm_tensor_reshape) share the storage, which
 * lives until its last tensor is freed.
 *
 * Layout: contiguous, row-major; the strides (in elements) are kept in the tensor for the day
 * views need them. A 0-dimensional tensor is a scalar with one element. */
#ifndef TANDEM_TENSOR_H
#define TANDEM_TENSOR_H

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TDM_MAX_DIMS 6

typedef struct tdm_tensor tdm_tensor;

// ---- creation ---------------------------------------------------------------------------
tdm_tensor *tdm_tensor_empty(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev);
tdm_tensor *tdm_tensor_zeros(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev);
// `data` holds numel elements of `dt`, row-major, in host memory.
tdm_tensor *tdm_tensor_from_host(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                                 const void *data);
// Counter-based random fills (Philox4x32-10, docs/CASE_FORMAT.md): the same (seed, offset)
// gives the same numbers on every backend. rand: U[0,1); randn: N(0,1).
tdm_tensor *tdm_tensor_rand(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                            uint64_t seed, uint64_t offset);
tdm_tensor *tdm_tensor_randn(int ndim, const int64_t *shape, tdm_dtype dt, tdm_device dev,
                             uint64_t seed, uint64_t offset);
// Under CUDA graph capture these explicit (seed, offset) draws are refused (every replay would
// draw the same numbers); draw from a generator instead.

// A random stream with state (torch.Generator's role): a seed and the offset of its next draw.
// Each tdm_generator_rand/randn draws what tdm_tensor_rand/randn(seed, offset) draws and moves
// offset on by one (so does a training-mode tdm_generator_dropout). Under CUDA graph capture
// (tandem/graph.h) a draw's offset is read on the device and each replay advances it: replay k
// draws what the k-th eager run of the captured step would, and the offset moves on with it.
typedef struct tdm_generator tdm_generator;
tdm_generator *tdm_generator_new(uint64_t seed, uint64_t offset);
// Graphs that advance g refuse to replay once it is freed. NULL is fine.
void tdm_generator_free(tdm_generator *g);
uint64_t tdm_generator_seed(const tdm_generator *g);
uint64_t tdm_generator_offset(const tdm_generator *g);
void tdm_generator_set_offset(tdm_generator *g, uint64_t offset);
tdm_tensor *tdm_generator_rand(tdm_generator *g, int ndim, const int64_t *shape, tdm_dtype dt,
                               tdm_device dev);
tdm_tensor *tdm_generator_randn(tdm_generator *g, int ndim, const int64_t *shape, tdm_dtype dt,
                                tdm_device dev);

// ---- copies -----------------------------------------------------------------------------
// A new tensor on `dev` with dtype `dt` (a copy even when both match). Float->int truncates
// toward zero, as PyTorch's .to() does.
tdm_tensor *tdm_tensor_to(const tdm_tensor *t, tdm_device dev, tdm_dtype dt);
tdm_tensor *tdm_tensor_clone(const tdm_tensor *t);
// Raw bytes to host memory; `nbytes` must equal tdm_tensor_nbytes(t).
tdm_status tdm_tensor_to_host(const tdm_tensor *t, void *dst, size_t nbytes);
// Elements converted to double (any dtype), numel of them.
tdm_status tdm_tensor_to_host_f64(const tdm_tensor *t, double *dst);
// Overwrite `dst` with `src` (same shape; any devices and dtypes).
tdm_status tdm_tensor_copy_(tdm_tensor *dst, const tdm_tensor *src);

// ---- views and references --------------------------------------------------------------
tdm_tensor *tdm_tensor_reshape(const tdm_tensor *t, int ndim, const int64_t *shape);
// A contiguous copy with the dims reordered: y.shape[i] = t.shape[dims[i]], as PyTorch's
// t.permute(dims).contiguous() (dims: a permutation of 0..ndim-1, negatives count from the
// end). Floating dtypes; recorded for autograd. permute(x, {0,2,3,1}) turns NCHW into NHWC.
tdm_tensor *tdm_tensor_permute(const tdm_tensor *t, const int *dims);
tdm_tensor *tdm_tensor_retain(tdm_tensor *t);
void tdm_tensor_free(tdm_tensor *t);   // NULL is fine

// ---- queries -----------------------------------------------------------------------------
int tdm_tensor_ndim(const tdm_tensor *t);
const int64_t *tdm_tensor_shape(const tdm_tensor *t);
const int64_t *tdm_tensor_strides(const tdm_tensor *t);
int64_t tdm_tensor_numel(const tdm_tensor *t);
size_t tdm_tensor_nbytes(const tdm_tensor *t);
tdm_dtype tdm_tensor_dtype(const tdm_tensor *t);
tdm_device tdm_tensor_device(const tdm_tensor *t);
void *tdm_tensor_data(tdm_tensor *t);               // device memory for cuda tensors
const void *tdm_tensor_data_const(const tdm_tensor *t);
// "(2, 3, 4)" into buf.
const char *tdm_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
