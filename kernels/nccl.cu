/* nccl.cu — data parallel's all-reduce on NVIDIA GPUs: one NCCL communicator member per rank
 * (ranks are threads of one process, one GPU each, or MPI processes; core/parallel.c hands out
 * the unique id), and the bucket all-reduce on a side stream so that it overlaps with the rest
 * of backward, as PyTorch's DDP does:
 *
 *   compute stream:  ...backward of layer k...  [event e]  ...backward of layer k-1...  wait(done)
 *   comm stream:                                 wait(e) pack -> ncclAllReduce(avg) -> unpack [done]
 *
 * A bucket's gradients are packed into one contiguous buffer (device-to-device copies on the
 * comm stream), averaged in place with ncclAvg, and copied back. comm_wait makes the compute
 * stream wait for the last all-reduce, so the optimizer step reads averaged gradients.
 *
 * Memory. A cudaMalloc or cudaFree synchronizes the device, so one made while an all-reduce
 * waits for the other ranks would wait behind it (the overlap is lost), and NCCL's docs warn that
 * such calls can deadlock with NCCL kernels. So a device with a communicator member keeps its
 * caching allocator on (comm_check refuses TANDEM_CACHING_ALLOCATOR=0; cuda_backend.cu refuses
 * turning it off later), and the allocator's raw calls there (a new segment, releasing cached
 * ones) first wait for the device's queued all-reduces (tdm_cuda_comm_quiesce): a host wait on a
 * cold cache, never in a warm training step. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "kernels/cuda_check.h"
#include "kernels/cuda_stream.h"
#include "kernels/nccl.h"

static tdm_status nccl_check(ncclResult_t r, const char *call, const char *file, int line) {
    if (r == ncclSuccess) return TDM_OK;
    return tdm_error_set(TDM_ERR_BACKEND, "NCCL error %d (%s) in %s at %s:%d", (int)r,
                         ncclGetErrorString(r), call, file, line);
}
#define NCCL_CHECK(call) nccl_check((call), #call, __FILE__, __LINE__)

static_assert(TDM_COMM_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "unique id size");

typedef struct cuda_comm {
    ncclComm_t comm;
    int device;
    cudaStream_t stream;      // the side stream all-reduces run on
    cudaEvent_t ready;        // recorded on the compute stream before each all-reduce
    cudaEvent_t done;         // recorded on the side stream after the last one
    void *buf;                // the packed bucket (grown as needed)
    size_t buf_bytes;
    tdm_status failed;        // the first failure of an all-reduce since the last wait
    bool queued;              // an all-reduce queued since the last quiesce (under its list's lock)
    bool listed;              // in its device's list
    struct cuda_comm *next;
} cuda_comm;

// ---- the communicators of each device, for tdm_cuda_comm_quiesce ----
// One lock per device: a rank waiting for its own all-reduce never holds up another rank's
// allocations (which that all-reduce may need it to get past).

static pthread_mutex_t comm_locks[TDM_CUDA_MAX_DEVICES];
static cuda_comm *comm_lists[TDM_CUDA_MAX_DEVICES];
static pthread_once_t comm_locks_once = PTHREAD_ONCE_INIT;

static void comm_locks_init(void) {
    for (int d = 0; d < TDM_CUDA_MAX_DEVICES; d++) pthread_mutex_init(&comm_locks[d], NULL);
}

static bool comm_device_ok(int device) { return device >= 0 && device < TDM_CUDA_MAX_DEVICES; }

static void comm_list_add(cuda_comm *c) {
    pthread_once(&comm_locks_once, comm_locks_init);
    pthread_mutex_lock(&comm_locks[c->device]);
    c->next = comm_lists[c->device];
    comm_lists[c->device] = c;
    c->listed = true;
    pthread_mutex_unlock(&comm_locks[c->device]);
    tdm_cuda_comm_members(c->device, 1);
}

static void comm_list_remove(cuda_comm *c) {
    pthread_once(&comm_locks_once, comm_locks_init);
    pthread_mutex_lock(&comm_locks[c->device]);
    for (cuda_comm **p = &comm_lists[c->device]; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    pthread_mutex_unlock(&comm_locks[c->device]);
    tdm_cuda_comm_members(c->device, -1);
}

void tdm_cuda_comm_quiesce(int device) {
    if (!comm_device_ok(device)) return;
    pthread_once(&comm_locks_once, comm_locks_init);
    pthread_mutex_lock(&comm_locks[device]);
    for (cuda_comm *c = comm_lists[device]; c; c = c->next)
        if (c->queued) {   // `done` follows every all-reduce queued so far on the side stream
            if (cudaEventSynchronize(c->done) != cudaSuccess) (void)cudaGetLastError();
            c->queued = false;
        }
    pthread_mutex_unlock(&comm_locks[device]);
}

tdm_status tdm_cuda_comm_unique_id(void *id) {
    ncclUniqueId u;
    TDM_TRY(NCCL_CHECK(ncclGetUniqueId(&u)));
    memcpy(id, u.internal, NCCL_UNIQUE_ID_BYTES);
    return TDM_OK;
}

void tdm_cuda_comm_free(void *p) {
    cuda_comm *c = (cuda_comm *)p;
    if (!c) return;
    if (c->listed) comm_list_remove(c);
    if (cudaSetDevice(c->device) == cudaSuccess) {
        if (c->stream) (void)cudaStreamSynchronize(c->stream);
        if (c->comm) (void)ncclCommDestroy(c->comm);
        if (c->buf) (void)cudaFree(c->buf);
        if (c->ready) (void)cudaEventDestroy(c->ready);
        if (c->done) (void)cudaEventDestroy(c->done);
        if (c->stream) (void)cudaStreamDestroy(c->stream);
    }
    (void)cudaGetLastError();
    free(c);
}

void *tdm_cuda_comm_new(const void *id, int nranks, int rank, int device_index) {
    cuda_comm *c = (cuda_comm *)calloc(1, sizeof *c);
    if (!c) {
        tdm_error_set(TDM_ERR_OOM, "data parallel: out of memory");
        return NULL;
    }
    c->device = device_index;
    ncclUniqueId u;
    memcpy(u.internal, id, NCCL_UNIQUE_ID_BYTES);
    tdm_status s = comm_device_ok(device_index)
                       ? CUDA_CHECK(cudaSetDevice(device_index))
                       : tdm_error_set(TDM_ERR_DEVICE, "data parallel: cuda:%d: NCCL is kept "
                                       "for cuda:0..%d only", device_index,
                                       TDM_CUDA_MAX_DEVICES - 1);
    if (s == TDM_OK) s = CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    if (s == TDM_OK) s = CUDA_CHECK(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    if (s == TDM_OK) s = CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    // Collective: blocks until every rank has called it.
    if (s == TDM_OK) s = NCCL_CHECK(ncclCommInitRank(&c->comm, nranks, u, rank));
    if (s != TDM_OK) {
        tdm_cuda_comm_free(c);
        return NULL;
    }
    comm_list_add(c);
    return c;
}

static bool nccl_dtype(tdm_dtype dt, ncclDataType_t *out) {
    switch (dt) {
    case TDM_DTYPE_F32: *out = ncclFloat32; return true;
    case TDM_DTYPE_F16: *out = ncclFloat16; return true;
    case TDM_DTYPE_BF16: *out = ncclBfloat16; return true;
    case TDM_DTYPE_F64: *out = ncclFloat64; return true;
    default: return false;
    }
}

static tdm_status comm_allreduce(cuda_comm *c, tdm_tensor *const *grads, int n) {
    if (n <= 0) return TDM_OK;
    tdm_dtype dt = grads[0]->dtype;
    ncclDataType_t nt;
    if (!nccl_dtype(dt, &nt))
        return tdm_error_set(TDM_ERR_DTYPE, "data parallel: no all-reduce of %s gradients",
                             tdm_dtype_name(dt));
    size_t es = tdm_dtype_size(dt), total = 0;
    for (int i = 0; i < n; i++) {
        if (grads[i]->dtype != dt || grads[i]->device.index != c->device)
            return tdm_error_set(TDM_ERR_ARG, "data parallel: a bucket's gradients must share "
                                 "one dtype and device (cuda:%d, %s)", c->device,
                                 tdm_dtype_name(dt));
        total += (size_t)grads[i]->numel * es;
    }
    TDM_TRY(CUDA_CHECK(cudaSetDevice(c->device)));
    // The side stream starts after the compute stream has produced the gradients.
    TDM_TRY(CUDA_CHECK(cudaEventRecord(c->ready, tdm_cuda_current_stream(c->device))));
    TDM_TRY(CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0)));
    if (total > c->buf_bytes) {   // grow: the old buffer may still be in use on the side stream
        TDM_TRY(CUDA_CHECK(cudaStreamSynchronize(c->stream)));
        if (c->buf) TDM_TRY(CUDA_CHECK(cudaFree(c->buf)));
        c->buf = NULL;
        c->buf_bytes = 0;
        TDM_TRY(CUDA_CHECK(cudaMalloc(&c->buf, total)));
        c->buf_bytes = total;
    }
    char *p = (char *)c->buf;
    for (int i = 0; i < n; i++) {   // pack
        size_t b = (size_t)grads[i]->numel * es;
        TDM_TRY(CUDA_CHECK(cudaMemcpyAsync(p, tdm_data(grads[i]), b, cudaMemcpyDeviceToDevice,
                                           c->stream)));
        p += b;
    }
    tdm_cuda_count_launch();
    TDM_TRY(NCCL_CHECK(ncclAllReduce(c->buf, c->buf, total / es, nt, ncclAvg, c->comm, c->stream)));
    p = (char *)c->buf;
    for (int i = 0; i < n; i++) {   // unpack
        size_t b = (size_t)grads[i]->numel * es;
        TDM_TRY(CUDA_CHECK(cudaMemcpyAsync(tdm_data(grads[i]), p, b, cudaMemcpyDeviceToDevice,
                                           c->stream)));
        p += b;
    }
    TDM_TRY(CUDA_CHECK(cudaEventRecord(c->done, c->stream)));
    pthread_mutex_lock(&comm_locks[c->device]);   // initialized by comm_list_add
    c->queued = true;
    pthread_mutex_unlock(&comm_locks[c->device]);
    return TDM_OK;
}

tdm_status tdm_cuda_comm_allreduce_mean(void *p, tdm_tensor *const *grads, int n) {
    cuda_comm *c = (cuda_comm *)p;
    tdm_status s = comm_allreduce(c, grads, n);
    if (s != TDM_OK && c->failed == TDM_OK) c->failed = s;
    return s;
}

// The compute stream waits for the side stream even after a failure: the all-reduces started
// before it still write the gradients, which the caller may free or reuse next.
tdm_status tdm_cuda_comm_wait(void *p) {
    cuda_comm *c = (cuda_comm *)p;
    tdm_status s = c->failed;
    c->failed = TDM_OK;
    if (s != TDM_OK) {   // the first failure is reported; the wait's own error would hide it
        if (cudaSetDevice(c->device) != cudaSuccess ||
            cudaStreamWaitEvent(tdm_cuda_current_stream(c->device), c->done, 0) != cudaSuccess)
            (void)cudaGetLastError();
        return s;
    }
    TDM_TRY(CUDA_CHECK(cudaSetDevice(c->device)));
    TDM_TRY(CUDA_CHECK(cudaStreamWaitEvent(tdm_cuda_current_stream(c->device), c->done, 0)));
    ncclResult_t async_err = ncclSuccess;   // a failure inside NCCL after the call returned
    TDM_TRY(NCCL_CHECK(ncclCommGetAsyncError(c->comm, &async_err)));
    return NCCL_CHECK(async_err);
}

// "2.27.7", the NCCL this process loaded (for `bench env` and the results' context).
void tdm_cuda_nccl_version(char *buf, size_t n) {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(buf, n, "unknown");
        return;
    }
    snprintf(buf, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);   // NCCL >= 2.9's encoding
}
