/* stream.h — streams, events, pinned host memory and asynchronous copies, as torch.cuda.Stream,
 * torch.cuda.Event, Tensor.pin_memory() and Tensor.to(non_blocking=True).
 *
 * Streams. A stream is an ordered queue of work on one device. Each thread has a current stream
 * per device (NULL = the device's default stream); the CUDA backend's launches and copies go to
 * the calling thread's current stream. Streams made by tdm_stream_new do not synchronize with the
 * default stream (cudaStreamNonBlocking, as PyTorch's pool streams): order work across streams
 * with events (tdm_stream_wait_event). A tensor used on a stream other than the one current when
 * it was allocated must outlive that use (PyTorch's record_stream problem): synchronize before
 * freeing it.
 *
 * Events mark a point in a stream: record, query, synchronize, and the milliseconds between two
 * recorded events of one device. On the cpu work is synchronous: a cpu event records the host
 * clock (CLOCK_MONOTONIC) when it is recorded, so timing code is the same on every device.
 *
 * Host memory. Page-locked ("pinned") host memory lets the GPU's copy engines read and write it
 * directly, so a copy from it is truly asynchronous; a copy from pageable (malloc'd) memory is
 * staged by the driver through its own pinned buffer and returns only when the source has been
 * consumed (host-to-device) or the data has arrived (device-to-host). Pinned tensors are cpu
 * tensors; the CUDA backend serves them from a caching allocator (PyTorch's
 * CachingHostAllocator): cudaHostAlloc blocks cached by power-of-two size, a freed block reused
 * only once every asynchronous copy that used it has completed. Without a CUDA device the
 * reference backend stands in: its "pinned" memory is malloc'd memory flagged as pinned, and its
 * copies are synchronous. */
#ifndef TANDEM_STREAM_H
#define TANDEM_STREAM_H

#include "tandem/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- streams ------------------------------------------------------------------------------
typedef struct tdm_stream tdm_stream;
typedef struct tdm_event tdm_event;

tdm_stream *tdm_stream_new(tdm_device dev);  // NULL + error when the device is not there
void tdm_stream_free(tdm_stream *s);         // waits for its work; NULL is fine
tdm_device tdm_stream_device(const tdm_stream *s);
// Blocks until the stream's work is done (the default stream: tdm_device_synchronize).
tdm_status tdm_stream_synchronize(tdm_stream *s);
// Makes later work on s wait until e's recorded work is done (without blocking the host).
tdm_status tdm_stream_wait_event(tdm_stream *s, tdm_event *e);
// The calling thread's current stream on dev: NULL = the default stream. s must be on dev.
tdm_status tdm_stream_set_current(tdm_device dev, tdm_stream *s);
tdm_stream *tdm_stream_current(tdm_device dev);
// Blocks until all work on dev, on every stream, is done (torch.cuda.synchronize).
tdm_status tdm_device_synchronize(tdm_device dev);

// ---- events -------------------------------------------------------------------------------
tdm_event *tdm_event_new(tdm_device dev);  // with timing
void tdm_event_free(tdm_event *e);         // NULL is fine
// Records e at the current end of s (NULL: the current stream of e's device, this thread).
tdm_status tdm_event_record(tdm_event *e, tdm_stream *s);
// Blocks until the recorded work is done (at once when never recorded, as PyTorch).
tdm_status tdm_event_synchronize(tdm_event *e);
// *done = the recorded work is done (true when never recorded, as PyTorch).
tdm_status tdm_event_query(tdm_event *e, bool *done);
// Milliseconds from start to end, both recorded on the same device; waits for end to complete.
tdm_status tdm_event_elapsed_ms(const tdm_event *start, const tdm_event *end, double *ms);

// ---- host memory ----------------------------------------------------------------------------
typedef enum {
    TDM_HOST_PAGEABLE = 0,  // malloc: the driver stages copies through its own pinned buffer
    TDM_HOST_PINNED,        // page-locked (cudaHostAlloc, portable): DMA straight from it
    TDM_HOST_PINNED_WC,     // page-locked write-combined: fast for the GPU to read, slow for
                            // the CPU to read (uncached)
    TDM_HOST_REGISTERED,    // a malloc'd buffer page-locked afterwards (cudaHostRegister)
    TDM_HOST_MAPPED,        // page-locked and mapped into the device's address space:
                            // kernels read and write it over the bus (zero-copy)
    TDM_HOST_KIND_COUNT
} tdm_host_kind;

const char *tdm_host_kind_name(tdm_host_kind k);  // "pageable", "pinned", "pinned_wc", ...

// A cpu tensor in host memory of `kind`, page-locked for the CUDA device `dev` (every CUDA
// device: the memory is portable). dev = cpu, or no CUDA device: the reference backend's
// stand-in (malloc'd, flagged with its kind). TDM_HOST_PAGEABLE gives a plain cpu tensor.
tdm_tensor *tdm_tensor_empty_host(int ndim, const int64_t *shape, tdm_dtype dt, tdm_host_kind kind,
                                  tdm_device dev);
// A copy of cpu tensor t in pinned memory (Tensor.pin_memory()): for cuda:0 when a CUDA device is
// there, else the reference stand-in. A cuda tensor is an error.
tdm_tensor *tdm_tensor_pin_memory(const tdm_tensor *t);
bool tdm_tensor_is_pinned(const tdm_tensor *t);           // pinned, pinned_wc, registered or mapped
tdm_host_kind tdm_tensor_host_kind(const tdm_tensor *t);  // TDM_HOST_PAGEABLE for cuda tensors

// The pinned host allocator of a device's backend (the fields of tdm_memory_stats, then more):
// allocated = bytes in blocks handed out,
// reserved = bytes held (cached too), their peaks; n_allocs / n_frees = calls. Beside them:
// allocations served from the cache, raw page-locking calls (cudaHostAlloc, cudaHostRegister)
// and their frees, and freed blocks still waiting for their copies to complete.
typedef struct {
    int64_t allocated, reserved;            // bytes now
    int64_t peak_allocated, peak_reserved;  // since the start
    int64_t n_allocs, n_frees;
    int64_t n_cache_hits;
    int64_t n_raw_allocs, n_raw_frees;
    int64_t n_blocks_pending;
} tdm_host_memory_stats;

tdm_status tdm_host_memory_stats_get(tdm_device dev, tdm_host_memory_stats *out);
// Gives the cached, unused page-locked blocks back (cudaFreeHost).
tdm_status tdm_host_memory_empty_cache(tdm_device dev);

// ---- asynchronous copies --------------------------------------------------------------------
// dst = src (same shape and dtype; any devices) on stream s (NULL: the current stream of the
// CUDA device involved, this thread). Host<->device from pinned memory returns at once; from
// pageable memory it behaves as cudaMemcpyAsync does (host-to-device returns once the source is
// staged, device-to-host once the data has arrived). Device<->device (peer across devices) is
// asynchronous. s must be on the CUDA device involved (on the cpu for cpu-only copies, which are
// done at once). The host buffer must stay unchanged (src) or unread (dst) until the copy is done:
// synchronize s or an event recorded after the copy.
tdm_status tdm_tensor_copy_async(tdm_tensor *dst, const tdm_tensor *src, tdm_stream *s);
// The same copy done by the device's SMs (a copy kernel) instead of a copy engine; either side may
// be mapped host memory (TDM_HOST_MAPPED: zero-copy) or memory of s's device. On the cpu: memcpy.
tdm_status tdm_tensor_copy_sm_async(tdm_tensor *dst, const tdm_tensor *src, tdm_stream *s);
// Tensor.to(dev, dt, non_blocking=True): the new tensor's copy runs on the current stream of the
// CUDA device involved (a dtype change is made first, on t's device). Recorded for autograd.
tdm_tensor *tdm_tensor_to_non_blocking(const tdm_tensor *t, tdm_device dev, tdm_dtype dt);

#ifdef __cplusplus
}
#endif

#endif
