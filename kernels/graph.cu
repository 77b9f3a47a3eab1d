/* graph.cu — the CUDA backend's graph capture (tandem/graph.h; the graph_* slots of
 * core/backend.h): cudaStreamBeginCapture on the side stream core made current, a private pool of
 * the caching allocator for the capture's allocations (PyTorch's graph pools), cudaStreamEndCapture
 * + cudaGraphInstantiate, cudaGraphLaunch on the current stream for a replay, and the checks that
 * make capture-unsafe calls fail with a message.
 *
 * Mode: cudaStreamCaptureModeThreadLocal. Global mode would also forbid unsafe calls (cudaMalloc,
 * synchronizing copies) on every other thread of the process while a capture runs — the data
 * loader's workers and data-parallel ranks would fail; relaxed mode would forbid nothing, so a
 * synchronizing call on the capturing thread would no longer be caught. Thread-local catches
 * this thread's mistakes only. The one unsafe call that is wanted, cudaMalloc of a new segment
 * for the private pool, is made in relaxed mode for its duration (kernels/cuda_backend.cu's raw
 * allocator, as PyTorch's allocator does): the segment outlives the graph's replays, so the graph
 * does not depend on replaying the allocation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_graph.h"
#include "kernels/cuda_stream.h"

typedef struct {
    int device;
    cudaStream_t stream;   // the stream captured (core's side stream)
    void *pool;            // the private pool's key: an odd number, never a stream's address
    void *persist_pool;    // a second one for state that outlives the step (graph_alloc_persistent)
    bool persistent;       // allocations go to persist_pool now
    cudaGraphExec_t exec;  // after capture_end
    bool failed;           // an op refused during the capture
    char why[256];         // its message
    tdm_tensor **kept;     // scratch the captured kernels write, freed with the graph
    int n_kept, cap_kept;
} cuda_graph;

// The capture this thread runs, per device.
static thread_local cuda_graph *tls_capture[TDM_CUDA_MAX_DEVICES];

static cuda_graph *capture_here(int device_index) {
    return device_index >= 0 && device_index < TDM_CUDA_MAX_DEVICES ? tls_capture[device_index]
                                                                     : NULL;
}

void *tdm_cuda_graph_pool(int device_index) {
    cuda_graph *g = capture_here(device_index);
    return g ? (g->persistent ? g->persist_pool : g->pool) : NULL;
}

tdm_status tdm_cuda_graph_alloc_persistent(void *capture, int device_index, bool on) {
    cuda_graph *g = (cuda_graph *)capture;
    if (!g || capture_here(device_index) != g)
        return tdm_error_set(TDM_ERR_ARG, "graph capture: not this thread's capture on cuda:%d",
                             device_index);
    g->persistent = on;
    return TDM_OK;
}

bool tdm_cuda_stream_capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return st == cudaStreamCaptureStatusActive;
}

tdm_status tdm_cuda_capture_refuse(cudaStream_t stream, int device_index, const char *op,
                                   const char *why) {
    if (!tdm_cuda_stream_capturing(stream)) return TDM_OK;
    tdm_status s = tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: cannot be captured in a CUDA graph: %s",
                                 op, why);
    cuda_graph *g = capture_here(device_index);
    if (g && !g->failed) {
        g->failed = true;
        snprintf(g->why, sizeof g->why, "%s", tdm_last_error());
    }
    return s;
}

tdm_status tdm_cuda_graph_keep(tdm_tensor *t) {
    cuda_graph *g = capture_here(t->device.index);
    if (g && g->n_kept == g->cap_kept) {
        int cap = g->cap_kept ? 2 * g->cap_kept : 16;
        tdm_tensor **k = (tdm_tensor **)realloc(g->kept, (size_t)cap * sizeof *k);
        if (k) {
            g->kept = k;
            g->cap_kept = cap;
        }
    }
    if (!g || g->n_kept == g->cap_kept) {
        tdm_tensor_free(t);
        return g ? tdm_error_set(TDM_ERR_OOM, "graph capture: out of host memory")
                 : tdm_error_set(TDM_ERR_UNSUPPORTED,
                                 "index check: cannot run inside a CUDA graph capture that "
                                 "tandem did not start (tdm_graph_capture_begin)");
    }
    g->kept[g->n_kept++] = t;
    return TDM_OK;
}

// Frees the capture's record: kept scratch, the executable graph, the pool's hold (its free
// segments go back to the device).
static void graph_destroy(cuda_graph *g) {
    for (int i = 0; i < g->n_kept; i++) tdm_tensor_free(g->kept[i]);
    free(g->kept);
    if (g->exec) (void)CUDA_CHECK(cudaGraphExecDestroy(g->exec));
    tdm_caching_allocator *ca = tdm_cuda_device_allocator(g->device);
    if (ca) tdm_ca_pool_release(ca, g->pool);
    if (ca && g->persist_pool) tdm_ca_pool_release(ca, g->persist_pool);
    free(g);
}

tdm_status tdm_cuda_graph_capture_begin(int device_index, void **capture) {
    static unsigned long long next_pool;   // pool keys 1, 3, 5, ...: odd, unlike any pointer
    if (capture_here(device_index))
        return tdm_error_set(TDM_ERR_ARG, "graph_capture_begin: cuda:%d is already capturing on "
                                          "this thread",
                             device_index);
    cudaStream_t stream = tdm_cuda_current_stream(device_index);
    if (!stream)
        return tdm_error_set(TDM_ERR_ARG, "graph_capture_begin: the default stream cannot be "
                                          "captured (make a side stream current)");
    tdm_caching_allocator *ca = tdm_cuda_device_allocator(device_index);
    if (!ca) return tdm_last_status();
    if (!tdm_ca_caching(ca))
        return tdm_error_set(TDM_ERR_UNSUPPORTED,
                             "graph_capture_begin: graph capture needs the caching allocator "
                             "(caching is off: TANDEM_CACHING_ALLOCATOR=0 or "
                             "tdm_memory_set_caching); its private pool keeps the graph's memory");
    cuda_graph *g = (cuda_graph *)calloc(1, sizeof *g);
    if (!g) return tdm_error_set(TDM_ERR_OOM, "graph_capture_begin: out of host memory");
    g->device = device_index;
    g->stream = stream;
    g->pool = (void *)(uintptr_t)(2 * __atomic_fetch_add(&next_pool, 1, __ATOMIC_RELAXED) + 1);
    g->persist_pool = (void *)(uintptr_t)(2 * __atomic_fetch_add(&next_pool, 1, __ATOMIC_RELAXED) + 1);
    tdm_status s = tdm_ca_pool_hold(ca, g->pool);
    if (s == TDM_OK) s = tdm_ca_pool_hold(ca, g->persist_pool);
    if (s == TDM_OK) s = CUDA_CHECK(cudaSetDevice(device_index));
    if (s == TDM_OK)
        s = CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    if (s != TDM_OK) {
        graph_destroy(g);
        return s;
    }
    tls_capture[device_index] = g;
    *capture = g;
    return TDM_OK;
}

tdm_status tdm_cuda_graph_capture_end(void *capture, int device_index) {
    cuda_graph *g = (cuda_graph *)capture;
    tls_capture[device_index] = NULL;   // allocations pool by stream again
    cudaGraph_t graph = NULL;
    tdm_status s = CUDA_CHECK(cudaSetDevice(device_index));
    // Always ended, so that the stream leaves capture mode even when an op failed.
    cudaError_t err = cudaStreamEndCapture(g->stream, &graph);
    if (s == TDM_OK && g->failed)
        s = tdm_error_set(TDM_ERR_UNSUPPORTED, "graph_capture_end: an op failed during the capture "
                                               "(the graph would be partial): %s",
                          g->why);
    else if (s == TDM_OK && err != cudaSuccess)
        s = tdm_error_set(TDM_ERR_BACKEND,
                          "graph_capture_end: the capture was invalidated (%s: %s): a call that "
                          "cannot be captured ran during it (a synchronization, a host copy)",
                          cudaGetErrorName(err), cudaGetErrorString(err));
    if (err != cudaSuccess) (void)cudaGetLastError();
    if (s == TDM_OK) s = CUDA_CHECK(cudaGraphInstantiate(&g->exec, graph, 0));
    if (graph) (void)CUDA_CHECK(cudaGraphDestroy(graph));   // the executable graph is a copy
    if (s != TDM_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tdm_last_error());
        graph_destroy(g);
        return tdm_error_set(s, "%s", why);
    }
    return TDM_OK;
}

tdm_status tdm_cuda_graph_replay(void *capture, int device_index) {
    cuda_graph *g = (cuda_graph *)capture;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    return CUDA_CHECK(cudaGraphLaunch(g->exec, tdm_cuda_current_stream(device_index)));
}

void tdm_cuda_graph_free(void *capture, int device_index) {
    cuda_graph *g = (cuda_graph *)capture;
    if (!g) return;
    // its replays may run on any stream: wait for the device before its memory goes
    if (CUDA_CHECK(cudaSetDevice(device_index)) == TDM_OK)
        (void)CUDA_CHECK(cudaDeviceSynchronize());
    graph_destroy(g);
}

// ---- state writes before a replay -----------------------------------------------------------
// The bytes travel in the kernel's parameter block (4 KiB on sm_80/sm_90), so the host buffer is
// free again when the launch returns and back-to-back replays each see their own values, which a
// cudaMemcpyAsync from one reused pinned buffer would not guarantee.
struct write_bytes {
    unsigned char b[TDM_WRITE_ASYNC_MAX];
};

__global__ void k_write_bytes(unsigned char *dst, write_bytes src, unsigned n) {
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src.b[i];
}

tdm_status cuda_write_async(void *dst, const void *src, size_t nbytes, int device_index) {
    if (nbytes == 0) return TDM_OK;
    if (nbytes > TDM_WRITE_ASYNC_MAX)
        return tdm_error_set(TDM_ERR_ARG, "write_async: %zu bytes, at most %d", nbytes,
                             (int)TDM_WRITE_ASYNC_MAX);
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    write_bytes w;
    memcpy(w.b, src, nbytes);
    TDM_LAUNCH(1, 128, 0, tdm_cuda_current_stream(device_index), k_write_bytes)(
        (unsigned char *)dst, w, (unsigned)nbytes);
    return CUDA_CHECK(cudaGetLastError());
}
