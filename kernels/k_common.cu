/* k_common.cu — the launchers' host helpers (kernels/cuda_kernels.h): the device of a call, grid
 * sizes from the device's SM count, scratch tensors, and the device error record that index
 * checks write and host waits read. */
#include "kernels/k_common.cuh"
#include "kernels/cuda_graph.h"

#include <pthread.h>
#include <string.h>

uint64_t tdm_cuda_launches = 0;

uint64_t tdm_cuda_launch_count(void) { return __atomic_load_n(&tdm_cuda_launches, __ATOMIC_RELAXED); }

tdm_status cuda_use_device(const tdm_tensor *t) {
    return CUDA_CHECK(cudaSetDevice(t->device.index));
}

#define CUDA_SM_CACHE 64
static int cuda_sm_counts[CUDA_SM_CACHE];   // 0: not asked yet (races write the same value)

int cuda_sm_count(void) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    if (dev >= 0 && dev < CUDA_SM_CACHE && cuda_sm_counts[dev] > 0) return cuda_sm_counts[dev];
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        n = 1;
    }
    if (dev >= 0 && dev < CUDA_SM_CACHE) cuda_sm_counts[dev] = n;
    return n;
}

// 2048 resident threads per SM on sm_80/sm_90; a grid-stride loop needs no more than that.
unsigned cuda_grid_blocks(int64_t items, int threads) {
    int64_t need = (items + threads - 1) / threads;
    int64_t full = (int64_t)cuda_sm_count() * (2048 / threads);
    int64_t b = need < full ? need : full;
    return (unsigned)(b > 0 ? b : 1);
}

tdm_tensor *cuda_scratch(const tdm_tensor *like, int64_t n, tdm_dtype dt) {
    int64_t shape[1] = {n > 0 ? n : 1};
    return tdm_tensor_empty(1, shape, dt, like->device);
}

// ---- the device error record (cuda_kernels.h) ----
// CUDA_ERR_REC_WORDS words per device, in mapped pinned host memory: the kernels write it
// through its device view, the host reads it directly after a wait (no copy, no sync). A kernel
// publishes `raised` only after the fields (cuda_raise); the host clears the fields, then
// `raised`, then releases the claim, so the next kernel to raise starts from an empty record.
static volatile unsigned long long *err_host[TDM_CUDA_MAX_DEVICES];
static unsigned long long *err_dev[TDM_CUDA_MAX_DEVICES];
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

static tdm_status err_record_make(int dev) {
    // cudaHostAlloc is not a stream operation, but a capture in thread-local mode refuses it on
    // this thread: made in relaxed mode for its duration (made once, it outlives every graph)
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    void *h = NULL, *d = NULL;
    tdm_status s = CUDA_CHECK(cudaHostAlloc(&h, CUDA_ERR_REC_WORDS * sizeof(unsigned long long),
                                            cudaHostAllocMapped | cudaHostAllocPortable));
    if (s == TDM_OK) s = CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (s != TDM_OK) {
        if (h) (void)cudaFreeHost(h);
        return s;
    }
    memset(h, 0, CUDA_ERR_REC_WORDS * sizeof(unsigned long long));
    err_dev[dev] = (unsigned long long *)d;
    __atomic_store_n(&err_host[dev], (volatile unsigned long long *)h, __ATOMIC_RELEASE);
    return TDM_OK;
}

tdm_status cuda_err_ref_get(const tdm_tensor *t, cuda_err_op op, int64_t bound,
                            cuda_err_ref *out) {
    const int dev = t->device.index;
    if (dev < 0 || dev >= TDM_CUDA_MAX_DEVICES)
        return tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: error records are kept for cuda:0..%d only",
                             dev, TDM_CUDA_MAX_DEVICES - 1);
    tdm_status s = TDM_OK;
    if (!__atomic_load_n(&err_host[dev], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&err_lock);
        if (!err_host[dev]) s = err_record_make(dev);
        pthread_mutex_unlock(&err_lock);
    }
    out->rec = err_dev[dev];
    out->op = (int)op;
    out->bound = (long long)bound;
    return s;
}

tdm_status cuda_err_check(int dev) {
    if (dev < 0 || dev >= TDM_CUDA_MAX_DEVICES) return TDM_OK;
    volatile unsigned long long *r = __atomic_load_n(&err_host[dev], __ATOMIC_ACQUIRE);
    if (!r || !__atomic_load_n(&r[CUDA_ERR_REC_RAISED], __ATOMIC_ACQUIRE)) return TDM_OK;
    const int op = (int)r[CUDA_ERR_REC_OP];
    const long long value = (long long)r[CUDA_ERR_REC_VALUE];
    const long long bound = (long long)r[CUDA_ERR_REC_BOUND], at = (long long)r[CUDA_ERR_REC_AT];
    for (int i = CUDA_ERR_REC_OP; i <= CUDA_ERR_REC_AT; i++) r[i] = 0;
    __atomic_store_n(&r[CUDA_ERR_REC_RAISED], 0ull, __ATOMIC_RELEASE);   // reported once
    __atomic_store_n(&r[CUDA_ERR_REC_CLAIMED], 0ull, __ATOMIC_RELEASE);  // then free to claim
    static const char *const names[] = {"?", "embedding", "embedding_backward", "cross_entropy",
                                        "cross_entropy_backward"};
    const char *name = op > 0 && op <= CUDA_ERR_CROSS_ENTROPY_BACKWARD ? names[op] : names[0];
    const bool ce = op == CUDA_ERR_CROSS_ENTROPY || op == CUDA_ERR_CROSS_ENTROPY_BACKWARD;
    return tdm_error_set(TDM_ERR_ARG,
                         ce ? "%s: target %lld out of bounds for %lld classes (row %lld; checked "
                              "on cuda:%d, reported at the next host wait)"
                            : "%s: index %lld out of range for %lld rows (indices[%lld]; checked "
                              "on cuda:%d, reported at the next host wait)",
                         name, value, bound, at, dev);
}
