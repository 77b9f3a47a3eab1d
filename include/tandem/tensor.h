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
// PyTorch's views, for tensors that are always contiguous: view/contiguous share t's storage
// (tdm_tensor_reshape), the others return contiguous copies (any dtype; exact). Each is recorded
// for autograd. Dims may be negative (counted from the end); errors are PyTorch's.
// t.view(shape): one entry may be -1, inferred from the others ("only one dimension can be
// inferred", "shape '[4, -1]' is invalid for input of size 6").
tdm_tensor *tdm_tensor_view(const tdm_tensor *t, int ndim, const int64_t *shape);
// t.transpose(dim0, dim1).contiguous()
tdm_tensor *tdm_tensor_transpose(const tdm_tensor *t, int dim0, int dim1);
// t.contiguous(): t is contiguous already, so a view of it (same shape, same storage).
tdm_tensor *tdm_tensor_contiguous(const tdm_tensor *t);
// t.narrow(dim, start, length): elements start .. start+length-1 along dim (start may be
// negative: counted from the end). Its gradient is zeros with grad_output placed at the slice.
tdm_tensor *tdm_tensor_narrow(const tdm_tensor *t, int dim, int64_t start, int64_t length);
// t.split(split_size, dim) and t.chunk(chunks, dim): the pieces (narrows) into out[0..], new
// references; returns their number, or -1 (error set, nothing in out) when it is over `cap`
// or the arguments are bad. split: pieces of split_size, the last smaller (split_size 0 only
// for a dim of size 0: one piece); chunk: pieces of ceil(size / chunks), so possibly fewer than
// `chunks` (a dim of size 0 gives `chunks` empty pieces), as PyTorch.
int tdm_tensor_split(const tdm_tensor *t, int64_t split_size, int dim, tdm_tensor **out, int cap);
int tdm_tensor_chunk(const tdm_tensor *t, int chunks, int dim, tdm_tensor **out, int cap);
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
