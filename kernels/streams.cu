/* streams.cu — the CUDA backend's streams, events, pinned host memory and asynchronous copies
 * (tandem/stream.h, the slots of core/backend.h): non-blocking streams, a per-thread current
 * stream per device, timing events, the caching pinned-host allocator of
 * kernels/host_allocator.h over cudaHostAlloc / cudaHostRegister with cudaEvent_t completion, and
 * cudaMemcpyAsync / cudaMemcpyPeerAsync / the copy kernel, each recording an event on the pinned
 * block it used so that the block is not reused before the copy is done. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_impl.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_graph.h"
#include "kernels/cuda_kernels.h"
#include "kernels/cuda_stream.h"
#include "kernels/host_allocator.h"

// ---- the current stream: per thread, per device ----

static thread_local cudaStream_t tls_current[TDM_CUDA_MAX_DEVICES];

cudaStream_t tdm_cuda_current_stream(int device) {
    return device >= 0 && device < TDM_CUDA_MAX_DEVICES ? tls_current[device] : (cudaStream_t)0;
}

tdm_status tdm_cuda_set_current_stream(void *stream, int device_index) {
    if (device_index < 0 || device_index >= TDM_CUDA_MAX_DEVICES)
        return tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: streams are kept for cuda:0..%d only",
                             device_index, TDM_CUDA_MAX_DEVICES - 1);
    tls_current[device_index] = (cudaStream_t)stream;
    return TDM_OK;
}

// ---- streams ----

// Non-blocking, as PyTorch's streams: no implicit ordering with the legacy default stream.
tdm_status tdm_cuda_stream_new(int device_index, void **out) {
    cudaStream_t s = 0;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
    *out = (void *)s;
    return TDM_OK;
}

void tdm_cuda_stream_free(void *stream, int device_index) {
    if (!stream || CUDA_CHECK(cudaSetDevice(device_index)) != TDM_OK) return;
    (void)CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    (void)CUDA_CHECK(cudaStreamDestroy((cudaStream_t)stream));
}

tdm_status tdm_cuda_stream_synchronize(void *stream, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream)));
    return cuda_err_check(device_index);   // an index check of the work waited for
}

tdm_status tdm_cuda_stream_wait_event(void *stream, void *event, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    return CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
}

tdm_status tdm_cuda_device_synchronize(int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(CUDA_CHECK(cudaDeviceSynchronize()));
    return cuda_err_check(device_index);
}

// ---- events (with timing) ----

tdm_status tdm_cuda_event_new(int device_index, void **out) {
    cudaEvent_t e = 0;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault)));
    *out = (void *)e;
    return TDM_OK;
}

void tdm_cuda_event_free(void *event, int device_index) {
    if (!event || CUDA_CHECK(cudaSetDevice(device_index)) != TDM_OK) return;
    (void)CUDA_CHECK(cudaEventDestroy((cudaEvent_t)event));
}

tdm_status tdm_cuda_event_record(void *event, void *stream, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    return CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

tdm_status tdm_cuda_event_synchronize(void *event, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event)));
    return cuda_err_check(device_index);
}

// cudaErrorNotReady is an answer, not an error: cleared, as PyTorch does.
tdm_status tdm_cuda_event_query(void *event, int device_index, bool *done) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    cudaError_t err = cudaEventQuery((cudaEvent_t)event);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        *done = false;
        return TDM_OK;
    }
    *done = err == cudaSuccess;
    return CUDA_CHECK(err);
}

// Waits for end (cudaEventElapsedTime refuses an event whose work is not done yet).
tdm_status tdm_cuda_event_elapsed_ms(void *start, void *end, int device_index, double *ms) {
    float f = 0;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)end)));
    TDM_TRY(CUDA_CHECK(cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)end)));
    *ms = f;
    return TDM_OK;
}

// ---- the caching pinned-host allocator: one for the process (the memory is portable: every
//      device may use it), created on first use ----

// A completion event of the host allocator, made on the device of the stream it was last
// recorded on (an event must be recorded on a stream of its own device).
typedef struct {
    cudaEvent_t event;
    int device;  // -1: not yet created
} host_event;

// What copy_async hands tdm_ha_record_event as "stream".
typedef struct {
    cudaStream_t stream;
    int device;
} host_stream;

static void *host_raw_alloc(size_t bytes, tdm_host_kind kind, void *ctx) {
    (void)ctx;
    void *p = NULL;
    if (kind == TDM_HOST_REGISTERED) {  // bytes is a power of two >= 4096: page-aligned
        p = aligned_alloc(TDM_HA_MIN_BLOCK, bytes);
        if (!p) {
            tdm_error_set(TDM_ERR_OOM, "registered host memory: out of host memory (%zu bytes)",
                          bytes);
            return NULL;
        }
        if (CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterPortable)) != TDM_OK) {
            free(p);
            return NULL;
        }
        return p;
    }
    unsigned flags = cudaHostAllocPortable;
    if (kind == TDM_HOST_PINNED_WC) flags |= cudaHostAllocWriteCombined;
    if (kind == TDM_HOST_MAPPED) flags |= cudaHostAllocMapped;
    if (CUDA_CHECK(cudaHostAlloc(&p, bytes, flags)) != TDM_OK) return NULL;
    return p;
}

static void host_raw_free(void *p, size_t bytes, tdm_host_kind kind, void *ctx) {
    (void)bytes, (void)ctx;
    if (kind == TDM_HOST_REGISTERED) {
        (void)CUDA_CHECK(cudaHostUnregister(p));
        free(p);
    } else {
        (void)CUDA_CHECK(cudaFreeHost(p));
    }
}

static void *host_event_new(void *ctx) {
    (void)ctx;
    host_event *e = (host_event *)calloc(1, sizeof *e);
    if (!e)
        tdm_error_set(TDM_ERR_OOM, "pinned host allocator: out of host memory for an event");
    else
        e->device = -1;
    return e;
}

static void host_event_free(void *event, void *ctx) {
    (void)ctx;
    host_event *e = (host_event *)event;
    if (e->device >= 0 && cudaSetDevice(e->device) == cudaSuccess) (void)cudaEventDestroy(e->event);
    (void)cudaGetLastError();
    free(e);
}

static tdm_status host_event_record(void *event, void *stream, void *ctx) {
    (void)ctx;
    host_event *e = (host_event *)event;
    const host_stream *s = (const host_stream *)stream;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(s->device)));
    if (e->device != s->device) {
        if (e->device >= 0) (void)cudaEventDestroy(e->event);
        e->device = -1;
        TDM_TRY(CUDA_CHECK(cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming)));
        e->device = s->device;
    }
    return CUDA_CHECK(cudaEventRecord(e->event, s->stream));
}

static int host_event_query(void *event, void *ctx) {
    (void)ctx;
    host_event *e = (host_event *)event;
    if (e->device < 0) return 1;
    if (CUDA_CHECK(cudaSetDevice(e->device)) != TDM_OK) return -1;
    cudaError_t err = cudaEventQuery(e->event);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    return CUDA_CHECK(err) == TDM_OK ? 1 : -1;
}

static tdm_host_allocator *host_allocator;
static pthread_mutex_t host_allocator_lock = PTHREAD_MUTEX_INITIALIZER;

// The process's pinned allocator; with `create`, made on first use (NULL + error on failure).
static tdm_host_allocator *host_allocator_get(bool create) {
    pthread_mutex_lock(&host_allocator_lock);
    if (!host_allocator && create) {
        tdm_host_raw_allocator raw = {
            host_raw_alloc,  host_raw_free, host_event_new, host_event_record, host_event_query,
            host_event_free, NULL};
        host_allocator = tdm_ha_new(&raw, tdm_env_flag("TANDEM_CACHING_HOST_ALLOCATOR", true));
    }
    tdm_host_allocator *ha = host_allocator;
    pthread_mutex_unlock(&host_allocator_lock);
    return ha;
}

void *tdm_cuda_host_alloc(size_t nbytes, tdm_host_kind kind, int device_index) {
    // page-locking needs a context: the device's, made current here
    if (CUDA_CHECK(cudaSetDevice(device_index)) != TDM_OK) return NULL;
    tdm_host_allocator *ha = host_allocator_get(true);
    return ha ? tdm_ha_alloc(ha, nbytes, kind) : NULL;
}

void tdm_cuda_host_free(void *ptr, size_t nbytes, tdm_host_kind kind, int device_index) {
    (void)nbytes, (void)kind, (void)device_index;
    tdm_host_allocator *ha = host_allocator_get(false);
    if (ha && ptr) (void)tdm_ha_free(ha, ptr);
}

tdm_status tdm_cuda_host_stats(int device_index, tdm_host_memory_stats *out) {
    (void)device_index;
    tdm_host_allocator *ha = host_allocator_get(false);
    if (ha)
        tdm_ha_stats_get(ha, out);
    else
        memset(out, 0, sizeof *out);
    return TDM_OK;
}

tdm_status tdm_cuda_host_empty_cache(int device_index) {
    (void)device_index;
    tdm_host_allocator *ha = host_allocator_get(false);
    if (ha) tdm_ha_empty_cache(ha);
    return TDM_OK;
}

// A copy on `stream` of `device` used host memory at p: if it is a pinned block of ours, keep the
// block from reuse until the copy is done. Not on a capturing stream: the copy was recorded into a
// graph, not run (the graph's replays use the block; keeping it alive is the caller's part, as
// for every captured input), and an event recorded there could never be queried again
// (cudaErrorCapturedEvent): the block would wait for it forever.
static tdm_status host_record(const void *p, cudaStream_t stream, int device) {
    tdm_host_allocator *ha = host_allocator_get(false);
    if (!ha || tdm_cuda_stream_capturing(stream)) return TDM_OK;
    host_stream hs = {stream, device};
    return tdm_ha_record_event(ha, p, &hs, NULL);
}

// ---- asynchronous copies ----

// Peer access from `device` to `peer`'s memory (the runtime docs: one-way, from the current
// device), enabled once per ordered pair where cudaDeviceCanAccessPeer allows it, before the
// first copy that needs it — as PyTorch does. Without it the driver stages every copy between the
// two through host memory: right, but a fraction of the link's speed (bench check's multi.peer
// would fail a healthy node). Already enabled by other code of the process
// (cudaErrorPeerAccessAlreadyEnabled, not sticky: cleared with cudaGetLastError) counts as
// enabled; a pair that cannot (or whose enabling fails: also cleared) is remembered, and its
// copies stay staged. Leaves `device` current.
static signed char peer_state[TDM_CUDA_MAX_DEVICES][TDM_CUDA_MAX_DEVICES];   // 0 untried, 1, -1
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

static void peer_access_enable(int device, int peer) {
    if (device == peer || device < 0 || peer < 0 || device >= TDM_CUDA_MAX_DEVICES ||
        peer >= TDM_CUDA_MAX_DEVICES)
        return;
    pthread_mutex_lock(&peer_lock);
    if (peer_state[device][peer] == 0) {
        int can = 0;
        cudaError_t e = cudaDeviceCanAccessPeer(&can, device, peer);
        if (e == cudaSuccess && can) e = cudaSetDevice(device);
        if (e == cudaSuccess && can) e = cudaDeviceEnablePeerAccess(peer, 0);
        if (e != cudaSuccess) (void)cudaGetLastError();   // already enabled, or cannot: cleared
        peer_state[device][peer] = (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) &&
                                           can ? 1 : -1;
    }
    pthread_mutex_unlock(&peer_lock);
}

// dst (on `device`) = src (on `peer`) on `stream` of dst's device. cudaMemcpyPeerAsync is ordered
// with nothing on the source device, whose work runs in the stream order of this thread's current
// stream there (the legacy default streams of two devices do not order either): the copy first
// waits for that stream (src written), and that stream then waits for the copy, so that src may be
// freed into its pool (kernels/caching_allocator.h) or overwritten by the source device's next
// work — as PyTorch's copy_ between devices does. Not under a capture of `stream` (a wait on an
// event recorded outside the capture): the copy is recorded as it is.
static tdm_status peer_copy(void *dst, int device, const void *src, int peer, size_t nbytes,
                            cudaStream_t s) {
    if (tdm_cuda_stream_capturing(s))
        return CUDA_CHECK(cudaMemcpyPeerAsync(dst, device, src, peer, nbytes, s));
    cudaStream_t ps = tdm_cuda_current_stream(peer);
    // the source device's stream captures (this thread captures there): its event would pull
    // `stream` into that capture
    if (ps && tdm_cuda_stream_capturing(ps))
        return tdm_cuda_capture_refuse(ps, peer, "copy between devices",
                                       "the source device's current stream is being captured");
    peer_access_enable(device, peer);   // the copy runs on dst's device and reads src's memory
    cudaEvent_t src_ready = NULL, copied = NULL;
    // events on their stream's device; the legacy stream (0) is the current device's
    tdm_status st = CUDA_CHECK(cudaSetDevice(peer));
    if (st == TDM_OK)
        st = CUDA_CHECK(cudaEventCreateWithFlags(&src_ready, cudaEventDisableTiming));
    if (st == TDM_OK) st = CUDA_CHECK(cudaEventRecord(src_ready, ps));
    if (st == TDM_OK) st = CUDA_CHECK(cudaSetDevice(device));
    if (st == TDM_OK) st = CUDA_CHECK(cudaStreamWaitEvent(s, src_ready, 0));
    if (st == TDM_OK) st = CUDA_CHECK(cudaMemcpyPeerAsync(dst, device, src, peer, nbytes, s));
    if (st == TDM_OK) st = CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
    if (st == TDM_OK) st = CUDA_CHECK(cudaEventRecord(copied, s));
    if (st == TDM_OK) st = CUDA_CHECK(cudaSetDevice(peer));
    if (st == TDM_OK) st = CUDA_CHECK(cudaStreamWaitEvent(ps, copied, 0));
    // destroyed at once: an enqueued wait keeps what it needs (cudaEventDestroy's contract)
    if (src_ready) (void)cudaEventDestroy(src_ready);
    if (copied) (void)cudaEventDestroy(copied);
    if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
    return st;
}

tdm_status tdm_cuda_copy_async(void *dst, const void *src, size_t nbytes, tdm_copy_dir dir,
                               int device_index, int peer_index, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    switch (dir) {
        case TDM_COPY_H2D:
            TDM_TRY(CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s)));
            return host_record(src, s, device_index);
        case TDM_COPY_D2H:
            TDM_TRY(CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s)));
            return host_record(dst, s, device_index);
        case TDM_COPY_D2D:
            if (peer_index == device_index)
                return CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, s));
            return peer_copy(dst, device_index, src, peer_index, nbytes, s);
        case TDM_COPY_H2H:
            break;
    }
    return tdm_error_set(TDM_ERR_ARG, "cuda copy_async: host-to-host copies are the cpu's");
}

// The pointer a kernel on the device uses for p: device memory as is, mapped host memory through
// cudaPointerGetAttributes' devicePointer; anything else is an error.
static tdm_status device_view(const void *p, const char *what, void **out) {
    cudaPointerAttributes a;
    TDM_TRY(CUDA_CHECK(cudaPointerGetAttributes(&a, p)));
    if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) {
        *out = (void *)p;
        return TDM_OK;
    }
    if (a.type == cudaMemoryTypeHost && a.devicePointer) {
        *out = a.devicePointer;
        return TDM_OK;
    }
    return tdm_error_set(TDM_ERR_ARG,
                         "cuda copy kernel: %s (%p) is neither device memory nor mapped host "
                         "memory",
                         what, p);
}

tdm_status tdm_cuda_copy_sm_async(void *dst, const void *src, size_t nbytes, int device_index,
                                  void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    void *d = NULL, *sv = NULL;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(device_view(dst, "dst", &d));
    TDM_TRY(device_view(src, "src", &sv));
    TDM_TRY(tdm_cuda_copy_kernel(d, sv, nbytes, device_index, s));
    TDM_TRY(host_record(src, s, device_index));
    return host_record(dst, s, device_index);
}
