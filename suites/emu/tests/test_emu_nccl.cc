/* test_emu_nccl.cc — the emulated NCCL (suites/emu/nccl.cc) against exact expectations, with
 * ranks as threads on 2 and 4 emulated devices: all-reduce sum / avg / prod / max / min over
 * f32, f16, bf16, f64, int32, int64, in place and out of place (values chosen so that every
 * result is exactly representable); broadcast, reduce, all-gather, reduce-scatter; one thread
 * driving 2 and 4 ranks through groups (init, all-reduce, destroy) and ncclCommInitAll; a stream
 * of another device refused; stream order (a slow work item and a copy queued before the
 * all-reduce on one rank's stream are seen by it); captured graphs replayed (when the runtime
 * has graphs). Cases that leave a sticky fault or must time out run in a child process of this
 * binary (--case NAME) with a short TANDEM_EMU_NCCL_TIMEOUT_MS: a missing rank is reported rather
 * than hangs, a count mismatch between ranks is reported, destroying ranks' communicators one
 * after another from one thread is reported, and so are a cudaFree and a cudaMalloc on a device
 * whose collective waits for a peer. Three ranks check NCCL's arithmetic: ncclAvg pre-multiplies
 * by float(1/3) and sums in ring order. The whole in-process suite runs again in a child
 * with TANDEM_EMU_SYNC=1 (work items inline on the calling thread). Exit status 0: all passed. */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "emu.h"

extern char **environ;

static std::atomic<int> g_failures{0};

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            char msg_[512];                                                      \
            snprintf(msg_, sizeof msg_, __VA_ARGS__);                            \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, msg_); \
            g_failures++;                                                        \
        }                                                                        \
    } while (0)
#define CUDA_OK(call)                                                                 \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        CHECK(e_ == cudaSuccess, "%s -> %d (%s)", #call, (int)e_, cudaGetErrorString(e_)); \
    } while (0)
#define NCCL_OK(call)                                                                  \
    do {                                                                               \
        ncclResult_t r_ = (call);                                                      \
        CHECK(r_ == ncclSuccess, "%s -> %d (%s)", #call, (int)r_, ncclGetErrorString(r_)); \
    } while (0)

// ---- element conversions (independent of nccl.cc's: exact values only) ---------------------

static uint16_t to_half(double v) {   // v must be 0 or a normal half, exactly
    if (v == 0) return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    int e;
    double m = frexp(fabs(v), &e);   // |v| = m 2^e, m in [0.5, 1)
    double frac = (m * 2 - 1) * 1024;
    int E = e - 1 + 15;
    if (frac != floor(frac) || E < 1 || E > 30) {
        fprintf(stderr, "test bug: %g is not exactly a half\n", v);
        abort();
    }
    return sign | (uint16_t)(E << 10) | (uint16_t)frac;
}
static double from_half(uint16_t h) {
    int E = (h >> 10) & 0x1f, frac = h & 0x3ff;
    double v = E == 0 ? ldexp(frac, -24) : E == 31 ? (frac ? NAN : INFINITY)
                                                   : ldexp(1024 + frac, E - 25);
    return h & 0x8000 ? -v : v;
}
static uint16_t to_bf16(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((double)f != v || (u & 0xffff)) {
        fprintf(stderr, "test bug: %g is not exactly a bfloat16\n", v);
        abort();
    }
    return (uint16_t)(u >> 16);
}
static double from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static size_t esize(ncclDataType_t t) {
    switch (t) {
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclFloat32: case ncclInt32: return 4;
    default: return 8;
    }
}
static bool is_int(ncclDataType_t t) { return t == ncclInt32 || t == ncclInt64; }

static void put(ncclDataType_t t, void *p, size_t i, double v) {
    switch (t) {
    case ncclFloat16: ((uint16_t *)p)[i] = to_half(v); break;
    case ncclBfloat16: ((uint16_t *)p)[i] = to_bf16(v); break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    case ncclFloat64: ((double *)p)[i] = v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: abort();
    }
}
static double get(ncclDataType_t t, const void *p, size_t i) {
    switch (t) {
    case ncclFloat16: return from_half(((const uint16_t *)p)[i]);
    case ncclBfloat16: return from_bf16(((const uint16_t *)p)[i]);
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    default: abort();
    }
}

// Rank r's element i: small integers (halves for floats), so sums, products and averages over
// 2 or 4 ranks are exact in every datatype here.
static double value(ncclDataType_t t, int rank, size_t i) {
    double v = (double)((i * 3 + (size_t)rank * 5) % 9) - 4;
    return is_int(t) ? v : v * 0.5;
}

static double expected(ncclDataType_t t, ncclRedOp_t op, int nranks, size_t i) {
    double acc = value(t, 0, i);
    for (int r = 1; r < nranks; r++) {
        double x = value(t, r, i);
        switch (op) {
        case ncclSum: case ncclAvg: acc += x; break;
        case ncclProd: acc *= x; break;
        case ncclMax: acc = x > acc ? x : acc; break;
        case ncclMin: acc = x < acc ? x : acc; break;
        default: abort();
        }
    }
    if (op == ncclAvg) acc = is_int(t) ? trunc(acc / nranks) : acc / nranks;
    return acc;
}

static const char *tname(ncclDataType_t t) {
    switch (t) {
    case ncclFloat16: return "f16";
    case ncclBfloat16: return "bf16";
    case ncclFloat32: return "f32";
    case ncclFloat64: return "f64";
    case ncclInt32: return "int32";
    case ncclInt64: return "int64";
    default: return "?";
    }
}
static const char *oname(ncclRedOp_t op) {
    static const char *n[] = {"sum", "prod", "max", "min", "avg"};
    return n[op];
}

// Runs fn(rank) on nranks threads, each with its device set to its rank.
static void run_ranks(int nranks, const std::function<void(int)> &fn) {
    std::vector<std::thread> th;
    for (int r = 0; r < nranks; r++)
        th.emplace_back([r, &fn] {
            CUDA_OK(cudaSetDevice(r));
            fn(r);
        });
    for (auto &t : th) t.join();
}

// ncclCommGetAsyncError polled until it reports an error, for up to 5 s, as NCCL's async errors
// are meant to be read: a fault is sticky, so a cudaStreamSynchronize after it returns at once
// (as on a GPU), possibly before the rank's collective has finished and taken the failure as its
// async error. *async stays ncclSuccess when none came.
static ncclResult_t await_async_error(ncclComm_t comm, ncclResult_t *async) {
    for (int i = 0; i < 500; i++) {
        if (ncclResult_t r = ncclCommGetAsyncError(comm, async)) return r;
        if (*async != ncclSuccess) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ncclSuccess;
}

// Device buffer helpers. Copies go on the rank's stream: cudaMemcpy (the legacy stream) is not
// ordered with a non-blocking stream, and from pageable memory it returns once the bytes are
// staged, not written (as on a GPU).
static void *dev_alloc(size_t bytes) {
    void *p = nullptr;
    CUDA_OK(cudaMalloc(&p, bytes));
    return p;
}
static void upload(void *d, const void *h, size_t bytes, cudaStream_t s) {
    CUDA_OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamSynchronize(s));
}
static void upload(void *d, const std::vector<unsigned char> &h, cudaStream_t s) {
    upload(d, h.data(), h.size(), s);
}
static std::vector<unsigned char> download(const void *d, size_t bytes, cudaStream_t s) {
    std::vector<unsigned char> h(bytes);
    CUDA_OK(cudaMemcpyAsync(h.data(), d, bytes, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    return h;
}

// ---- the in-process cases ------------------------------------------------------------------

static void test_basics() {
    int v = 0;
    NCCL_OK(ncclGetVersion(&v));
    CHECK(v == NCCL_VERSION_CODE, "version %d", v);
    CHECK(strcmp(ncclGetErrorString(ncclSuccess), ncclGetErrorString(ncclInvalidArgument)) != 0,
          "error strings");
    ncclUniqueId a, b;
    NCCL_OK(ncclGetUniqueId(&a));
    NCCL_OK(ncclGetUniqueId(&b));
    CHECK(memcmp(a.internal, b.internal, NCCL_UNIQUE_ID_BYTES) != 0, "two ids are equal");
    ncclComm_t c = nullptr;
    ncclUniqueId zero;
    memset(&zero, 0, sizeof zero);
    CHECK(ncclCommInitRank(&c, 1, zero, 0) == ncclInvalidArgument && c == nullptr,
          "an id not from ncclGetUniqueId is refused");
}

// Every datatype x op, in place and out of place, then the other collectives; nranks threads.
static void test_allreduce(int nranks) {
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    const ncclDataType_t types[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64,
                                    ncclInt32, ncclInt64};
    const ncclRedOp_t ops[] = {ncclSum, ncclAvg, ncclProd, ncclMax, ncclMin};
    const size_t n = 37;
    run_ranks(nranks, [&](int rank) {
        ncclComm_t comm;
        NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
        int count = -1, dev = -1, urank = -1;
        NCCL_OK(ncclCommCount(comm, &count));
        NCCL_OK(ncclCommCuDevice(comm, &dev));
        NCCL_OK(ncclCommUserRank(comm, &urank));
        CHECK(count == nranks && dev == rank && urank == rank, "count %d dev %d rank %d", count,
              dev, urank);
        cudaStream_t s;
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        for (ncclDataType_t t : types) {
            size_t es = esize(t);
            std::vector<unsigned char> host(n * es);
            for (size_t i = 0; i < n; i++) put(t, host.data(), i, value(t, rank, i));
            void *send = dev_alloc(n * es), *recv = dev_alloc(n * es);
            for (ncclRedOp_t op : ops)
                for (int inplace = 0; inplace < 2; inplace++) {
                    upload(send, host, s);
                    void *out = inplace ? send : recv;
                    NCCL_OK(ncclAllReduce(send, out, n, t, op, comm, s));
                    CUDA_OK(cudaStreamSynchronize(s));
                    std::vector<unsigned char> got = download(out, n * es, s);
                    int bad = 0;
                    for (size_t i = 0; i < n; i++) {
                        double want = expected(t, op, nranks, i), g = get(t, got.data(), i);
                        if (g != want && bad++ < 3)
                            CHECK(g == want, "%d ranks, rank %d, %s %s %s: [%zu] = %g, want %g",
                                  nranks, rank, tname(t), oname(op),
                                  inplace ? "in place" : "out of place", i, g, want);
                    }
                    if (!inplace) {   // out of place leaves sendbuff alone
                        std::vector<unsigned char> s2 = download(send, n * es, s);
                        CHECK(s2 == host, "rank %d %s %s: sendbuff changed", rank, tname(t),
                              oname(op));
                    }
                }
            CUDA_OK(cudaFree(send));
            CUDA_OK(cudaFree(recv));
        }

        // Broadcast from the last rank, Reduce (sum) to rank 0, AllGather, ReduceScatter (f32).
        const ncclDataType_t t = ncclFloat32;
        std::vector<unsigned char> host(n * nranks * 4);
        for (size_t i = 0; i < n * nranks; i++) put(t, host.data(), i, value(t, rank, i));
        void *send = dev_alloc(n * nranks * 4), *recv = dev_alloc(n * nranks * 4);
        upload(send, host, s);
        int root = nranks - 1;
        NCCL_OK(ncclBroadcast(send, recv, n, t, root, comm, s));
        CUDA_OK(cudaStreamSynchronize(s));
        std::vector<unsigned char> got = download(recv, n * 4, s);
        for (size_t i = 0; i < n; i++)
            CHECK(get(t, got.data(), i) == value(t, root, i), "broadcast [%zu]", i);
        NCCL_OK(ncclReduce(send, recv, n, t, ncclSum, 0, comm, s));
        CUDA_OK(cudaStreamSynchronize(s));
        if (rank == 0) {
            got = download(recv, n * 4, s);
            for (size_t i = 0; i < n; i++)
                CHECK(get(t, got.data(), i) == expected(t, ncclSum, nranks, i), "reduce [%zu]", i);
        }
        NCCL_OK(ncclAllGather(send, recv, n, t, comm, s));
        CUDA_OK(cudaStreamSynchronize(s));
        got = download(recv, n * nranks * 4, s);
        for (int r = 0; r < nranks; r++)
            for (size_t i = 0; i < n; i++)
                CHECK(get(t, got.data(), r * n + i) == value(t, r, i), "allgather [%d][%zu]", r, i);
        NCCL_OK(ncclReduceScatter(send, recv, n, t, ncclSum, comm, s));
        CUDA_OK(cudaStreamSynchronize(s));
        got = download(recv, n * 4, s);
        for (size_t i = 0; i < n; i++)
            CHECK(get(t, got.data(), i) == expected(t, ncclSum, nranks, rank * n + i),
                  "reducescatter rank %d [%zu]", rank, i);
        CUDA_OK(cudaFree(send));
        CUDA_OK(cudaFree(recv));

        ncclResult_t async = ncclInternalError;
        NCCL_OK(ncclCommGetAsyncError(comm, &async));
        CHECK(async == ncclSuccess, "async error %d", (int)async);
        CUDA_OK(cudaStreamDestroy(s));
        NCCL_OK(ncclCommDestroy(comm));   // collective: every rank's thread calls it
    });
}

// One thread drives the ranks: group init, one group all-reduce (in place), group destroy.
static void test_group(int nranks, bool init_all) {
    ncclComm_t comms[4];
    if (init_all) {
        CUDA_OK(cudaSetDevice(2 % nranks));
        NCCL_OK(ncclCommInitAll(comms, nranks, nullptr));
        int dev = -1;
        CUDA_OK(cudaGetDevice(&dev));
        CHECK(dev == 2 % nranks, "ncclCommInitAll changed the current device to %d", dev);
    } else {
        ncclUniqueId id;
        NCCL_OK(ncclGetUniqueId(&id));
        NCCL_OK(ncclGroupStart());
        for (int r = 0; r < nranks; r++) {
            CUDA_OK(cudaSetDevice(r));
            NCCL_OK(ncclCommInitRank(&comms[r], nranks, id, r));
        }
        NCCL_OK(ncclGroupEnd());
    }
    const size_t n = 16;
    cudaStream_t s[4];
    void *buf[4];
    for (int r = 0; r < nranks; r++) {
        int dev = -1;
        NCCL_OK(ncclCommCuDevice(comms[r], &dev));
        CHECK(dev == r, "comm %d on device %d", r, dev);
        CUDA_OK(cudaSetDevice(r));
        CUDA_OK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
        buf[r] = dev_alloc(n * 4);
        std::vector<unsigned char> h(n * 4);
        for (size_t i = 0; i < n; i++) put(ncclFloat32, h.data(), i, value(ncclFloat32, r, i));
        upload(buf[r], h, s[r]);
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nranks; r++)
        NCCL_OK(ncclAllReduce(buf[r], buf[r], n, ncclFloat32, ncclAvg, comms[r], s[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nranks; r++) {
        CUDA_OK(cudaSetDevice(r));
        CUDA_OK(cudaStreamSynchronize(s[r]));
        std::vector<unsigned char> got = download(buf[r], n * 4, s[r]);
        for (size_t i = 0; i < n; i++)
            CHECK(get(ncclFloat32, got.data(), i) == expected(ncclFloat32, ncclAvg, nranks, i),
                  "group all-reduce rank %d [%zu]", r, i);
        CUDA_OK(cudaFree(buf[r]));
        CUDA_OK(cudaStreamDestroy(s[r]));
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nranks; r++) NCCL_OK(ncclCommDestroy(comms[r]));
    NCCL_OK(ncclGroupEnd());
    int count = 0;
    CHECK(ncclCommCount(comms[0], &count) == ncclInvalidArgument, "a destroyed comm is refused");
}

// Refused before anything is queued: another device's stream, bad datatype / op / root,
// init and collectives in one group. The communicator stays usable.
static void test_refusals() {
    CUDA_OK(cudaSetDevice(1));
    cudaStream_t other;
    CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    ncclComm_t comm;
    NCCL_OK(ncclCommInitRank(&comm, 1, id, 0));   // a single rank needs no one else
    float *buf = (float *)dev_alloc(4 * sizeof(float));
    std::vector<unsigned char> h(16);
    for (int i = 0; i < 4; i++) put(ncclFloat32, h.data(), i, 1.5 * i);
    upload(buf, h, s);

    ncclResult_t r = ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, other);
    CHECK(r == ncclInvalidArgument, "a stream of cuda:1 for a cuda:0 communicator -> %d", (int)r);
    CHECK(strstr(ncclGetLastError(comm), "cuda:1") != nullptr, "last error: %s",
          ncclGetLastError(comm));
    CHECK(ncclAllReduce(buf, buf, 4, ncclNumTypes, ncclSum, comm, s) == ncclInvalidArgument,
          "bad datatype");
    CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)99, comm, s) ==
              ncclInvalidArgument, "bad op");
    CHECK(ncclBroadcast(buf, buf, 4, ncclFloat32, 1, comm, s) == ncclInvalidArgument, "bad root");
    ncclUniqueId id2;
    NCCL_OK(ncclGetUniqueId(&id2));
    ncclComm_t c2;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclCommInitRank(&c2, 1, id2, 0));
    CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, s) == ncclInvalidUsage,
          "init and a collective in one group");
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "the group reports its error");
    NCCL_OK(ncclCommDestroy(c2));

    NCCL_OK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclAvg, comm, s));   // still works
    CUDA_OK(cudaStreamSynchronize(s));
    std::vector<unsigned char> got = download(buf, 16, s);
    CHECK(got == h, "a 1-rank all-reduce is the identity");
    ncclResult_t async = ncclInternalError;
    NCCL_OK(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclSuccess, "async %d", (int)async);
    NCCL_OK(ncclCommDestroy(comm));
    CUDA_OK(cudaFree(buf));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaStreamDestroy(other));
    CUDA_OK(cudaSetDevice(0));
}

// Stream order: on rank 0's stream, a slow work item and then a copy come before the all-reduce;
// the all-reduce must see the copied value (rank 1 arrives long before).
static void test_stream_order() {
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    run_ranks(2, [&](int rank) {
        ncclComm_t comm;
        NCCL_OK(ncclCommInitRank(&comm, 2, id, rank));
        cudaStream_t s;
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        float *buf = (float *)dev_alloc(8 * sizeof(float));
        float init[8], late[8];
        for (int i = 0; i < 8; i++) init[i] = rank == 0 ? 1.0f : 2.0f, late[i] = 100.0f + i;
        upload(buf, init, sizeof init, s);
        if (rank == 0) {
            CUDA_OK(tdm_emu::enqueue(s, "test: sleep 20 ms", [] {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }));
            CUDA_OK(cudaMemcpyAsync(buf, late, sizeof late, cudaMemcpyHostToDevice, s));
        }
        NCCL_OK(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, comm, s));
        CUDA_OK(cudaStreamSynchronize(s));
        float got[8];
        std::vector<unsigned char> bytes = download(buf, sizeof got, s);
        memcpy(got, bytes.data(), sizeof got);
        for (int i = 0; i < 8; i++)
            CHECK(got[i] == 102.0f + i, "rank %d [%d] = %g, want %g (the late copy unseen?)", rank,
                  i, got[i], 102.0 + i);
        CUDA_OK(cudaFree(buf));
        CUDA_OK(cudaStreamDestroy(s));
        NCCL_OK(ncclCommDestroy(comm));
    });
}

// A captured all-reduce replays: each launch meets the other ranks again (in place sum twice).
static void test_graph() {
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    std::atomic<int> unsupported{0};
    run_ranks(2, [&](int rank) {
        ncclComm_t comm;
        NCCL_OK(ncclCommInitRank(&comm, 2, id, rank));
        cudaStream_t s;
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        float *buf = (float *)dev_alloc(4 * sizeof(float));
        float x[4] = {1.0f + rank, 2.0f, 3.0f, -0.5f};
        upload(buf, x, sizeof x, s);
        if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            (void)cudaGetLastError();
            unsupported++;
        } else {
            NCCL_OK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, s));
            cudaGraph_t g = nullptr;
            cudaGraphExec_t ge = nullptr;
            CUDA_OK(cudaStreamEndCapture(s, &g));
            CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
            CUDA_OK(cudaGraphLaunch(ge, s));
            CUDA_OK(cudaGraphLaunch(ge, s));
            CUDA_OK(cudaStreamSynchronize(s));
            float got[4];
            std::vector<unsigned char> bytes = download(buf, sizeof got, s);
            memcpy(got, bytes.data(), sizeof got);
            float want[4] = {2 * (1.0f + 2.0f), 2 * 4.0f, 2 * 6.0f, 2 * -1.0f};
            for (int i = 0; i < 4; i++)
                CHECK(got[i] == want[i], "graph rank %d [%d] = %g, want %g", rank, i, got[i],
                      want[i]);
            CUDA_OK(cudaGraphExecDestroy(ge));
            CUDA_OK(cudaGraphDestroy(g));
        }
        CUDA_OK(cudaFree(buf));
        CUDA_OK(cudaStreamDestroy(s));
        NCCL_OK(ncclCommDestroy(comm));
    });
    if (unsupported) printf("  graph capture: not supported by this runtime, skipped\n");
}

// NCCL's arithmetic with 3 ranks (nccl.cc's header comment): ncclAvg over floats multiplies each
// rank's value by float(1/3) and rounds, then sums in ring order (chunk c of ceil(n/3) elements
// from rank c+1); ncclSum the same without the multiply. Computed here in float step by step,
// from that description; the avg is not sum/3 rounded once for some element (which is why
// callers judge it with a bound).
static void test_ring_order() {
    const int nranks = 3;
    const size_t n = 37, chunk = (n + nranks - 1) / nranks;
    auto x = [](int r, size_t i) { return (float)((double)(i + 1) * 0.1 * (r + 1) + r * 1e-3); };
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    std::atomic<int> differs{0};
    run_ranks(nranks, [&](int rank) {
        ncclComm_t comm;
        NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
        cudaStream_t s;
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        std::vector<float> mine(n);
        for (size_t i = 0; i < n; i++) mine[i] = x(rank, i);
        float *buf = (float *)dev_alloc(n * sizeof(float));
        for (ncclRedOp_t op : {ncclAvg, ncclSum}) {
            upload(buf, mine.data(), n * sizeof(float), s);
            NCCL_OK(ncclAllReduce(buf, buf, n, ncclFloat32, op, comm, s));
            CUDA_OK(cudaStreamSynchronize(s));
            std::vector<unsigned char> got = download(buf, n * sizeof(float), s);
            const float scale = op == ncclAvg ? (float)(1.0 / nranks) : 1.0f;
            for (size_t i = 0; i < n; i++) {
                const int first = (int)((i / chunk + 1) % nranks);
                float acc = x(first, i) * scale;
                for (int k = 1; k < nranks; k++) {
                    const float p = x((first + k) % nranks, i) * scale;
                    acc = acc + p;
                }
                const float g = ((const float *)got.data())[i];
                CHECK(g == acc, "3 ranks, rank %d, f32 %s [%zu] = %.9g, want %.9g (ring order)",
                      rank, oname(op), i, g, acc);
                double sum = 0;
                for (int r = 0; r < nranks; r++) sum += x(r, i);
                if (op == ncclAvg && rank == 0 && g != (float)(sum / nranks)) differs++;
            }
        }
        CUDA_OK(cudaFree(buf));
        CUDA_OK(cudaStreamDestroy(s));
        NCCL_OK(ncclCommDestroy(comm));
    });
    CHECK(differs.load() > 0, "3 ranks: every f32 avg equals sum/3 rounded once: not NCCL's");
}

static void in_process_suite() {
    test_basics();
    test_allreduce(2);
    test_allreduce(4);
    test_ring_order();
    test_group(2, false);
    test_group(4, false);
    test_group(4, true);
    test_refusals();
    test_stream_order();
    test_graph();
}

// ---- the child cases -----------------------------------------------------------------------

// Group init of 2 ranks from this thread (devices 0, 1); streams and buffers on each.
struct Pair {
    ncclComm_t comm[2];
    cudaStream_t s[2];
    float *buf[2];
};
static void make_pair(Pair &p) {
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < 2; r++) {
        CUDA_OK(cudaSetDevice(r));
        NCCL_OK(ncclCommInitRank(&p.comm[r], 2, id, r));
    }
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < 2; r++) {
        CUDA_OK(cudaSetDevice(r));
        CUDA_OK(cudaStreamCreateWithFlags(&p.s[r], cudaStreamNonBlocking));
        p.buf[r] = (float *)dev_alloc(64 * sizeof(float));
    }
    CUDA_OK(cudaSetDevice(0));
}
static void free_pair(Pair &p) {   // after a fault too: the errors do not matter here
    for (int r = 0; r < 2; r++) {
        (void)cudaSetDevice(r);
        (void)cudaFree(p.buf[r]);
        (void)cudaStreamDestroy(p.s[r]);
    }
    (void)cudaSetDevice(0);
}

static int child(const char *name) {
    using clock = std::chrono::steady_clock;
    if (!strcmp(name, "suite")) {
        in_process_suite();
    } else if (!strcmp(name, "missing")) {   // rank 1 never calls the all-reduce
        Pair p;
        make_pair(p);
        NCCL_OK(ncclAllReduce(p.buf[0], p.buf[0], 64, ncclFloat32, ncclSum, p.comm[0], p.s[0]));
        cudaError_t e = cudaStreamSynchronize(p.s[0]);
        CHECK(e != cudaSuccess, "the stream of a collective that timed out reports an error");
        ncclResult_t async = ncclSuccess;
        NCCL_OK(await_async_error(p.comm[0], &async));
        CHECK(async != ncclSuccess, "the communicator reports an async error");
        NCCL_OK(ncclCommAbort(p.comm[0]));
        NCCL_OK(ncclCommAbort(p.comm[1]));
        free_pair(p);
    } else if (!strcmp(name, "free_pending") || !strcmp(name, "malloc_pending")) {
        // cudaFree / cudaMalloc on cuda:0 while rank 0's all-reduce waits for rank 1: a fault
        Pair p;
        make_pair(p);
        void *extra = dev_alloc(256);
        NCCL_OK(ncclAllReduce(p.buf[0], p.buf[0], 64, ncclFloat32, ncclSum, p.comm[0], p.s[0]));
        void *more = nullptr;
        cudaError_t e = name[0] == 'f' ? cudaFree(extra) : cudaMalloc(&more, 256);
        CHECK(e == cudaErrorNotPermitted, "%s while a collective is queued: %s", name,
              cudaGetErrorName(e));
        NCCL_OK(ncclCommAbort(p.comm[1]));   // rank 0's collective fails and returns
        NCCL_OK(ncclCommAbort(p.comm[0]));
        free_pair(p);
    } else if (!strcmp(name, "mismatch")) {   // rank 0 reduces 16 elements, rank 1 32
        // The rank that finds the disagreement (the later to arrive) faults on its device; the
        // other's device is untouched, as a GPU's context error is per device: both communicators
        // report an async error, one stream (either) the fault.
        ncclUniqueId id;
        NCCL_OK(ncclGetUniqueId(&id));
        std::atomic<int> faulted{0};
        run_ranks(2, [&](int rank) {
            ncclComm_t comm;
            NCCL_OK(ncclCommInitRank(&comm, 2, id, rank));
            cudaStream_t s;
            CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            float *buf = (float *)dev_alloc(32 * sizeof(float));
            NCCL_OK(ncclAllReduce(buf, buf, rank ? 32 : 16, ncclFloat32, ncclSum, comm, s));
            const cudaError_t e = cudaStreamSynchronize(s);
            CHECK(e == cudaSuccess || e == cudaErrorLaunchFailure, "rank %d: %s", rank,
                  cudaGetErrorName(e));
            if (e != cudaSuccess) faulted++;
            ncclResult_t async = ncclSuccess;
            NCCL_OK(await_async_error(comm, &async));
            CHECK(async != ncclSuccess, "rank %d: async error after a mismatch", rank);
            NCCL_OK(ncclCommDestroy(comm));
            (void)cudaFree(buf);
            (void)cudaStreamDestroy(s);
        });
        CHECK(faulted.load() == 1, "a mismatch is a fault of one rank's device, not %d",
              faulted.load());
    } else if (!strcmp(name, "destroy_in_turn")) {   // one thread destroys rank 0, then rank 1
        Pair p;
        make_pair(p);
        auto t0 = clock::now();
        ncclResult_t r0 = ncclCommDestroy(p.comm[0]);
        ncclResult_t r1 = ncclCommDestroy(p.comm[1]);
        double s = std::chrono::duration<double>(clock::now() - t0).count();
        CHECK(r0 == ncclInvalidUsage, "destroying rank 0 alone is reported (%d)", (int)r0);
        CHECK(r1 == ncclSuccess || r1 == ncclInvalidUsage, "rank 1: %d", (int)r1);
        CHECK(s < 10, "took %.1f s", s);
        free_pair(p);
    } else if (!strcmp(name, "init_missing")) {   // only rank 0 of 2 joins
        ncclUniqueId id;
        NCCL_OK(ncclGetUniqueId(&id));
        ncclComm_t c = nullptr;
        CHECK(ncclCommInitRank(&c, 2, id, 0) == ncclInvalidUsage && c == nullptr,
              "an init whose other rank never comes is reported");
    } else {
        fprintf(stderr, "unknown case %s\n", name);
        return 2;
    }
    return g_failures ? 1 : 0;
}

// Runs this binary with --case NAME and extra environment; returns its exit status (-1: it hung
// and was killed) and its stderr.
static int spawn_case(const char *self, const char *name, std::vector<std::string> env,
                      std::string *err, int limit_s) {
    char path[] = "/tmp/test_emu_nccl_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -2;
    for (char **e = environ; *e; e++) {
        bool overridden = false;
        for (const std::string &x : env)
            if (!strncmp(*e, x.c_str(), x.find('=') + 1)) overridden = true;
        if (!overridden) env.push_back(*e);
    }
    std::vector<char *> envp;
    for (std::string &x : env) envp.push_back(&x[0]);
    envp.push_back(nullptr);
    std::string a0 = self, a1 = "--case", a2 = name;
    char *argv[] = {&a0[0], &a1[0], &a2[0], nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, self, &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        close(fd);
        unlink(path);
        return -2;
    }
    int status = 0, result = -1;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            break;
        }
        if (std::chrono::steady_clock::now() > until) {   // hung: end it (our own child)
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    err->clear();
    char buf[4096];
    ssize_t k;
    lseek(fd, 0, SEEK_SET);
    while ((k = read(fd, buf, sizeof buf)) > 0) err->append(buf, (size_t)k);
    close(fd);
    unlink(path);
    return result;
}

static void expect_case(const char *self, const char *name, std::vector<std::string> env,
                        std::vector<const char *> want, int limit_s = 60) {
    std::string err;
    env.push_back("TANDEM_EMU_ABORT=0");
    int rc = spawn_case(self, name, env, &err, limit_s);
    bool ok = rc == 0;
    for (const char *w : want) ok = ok && err.find(w) != std::string::npos;
    std::string envs;
    for (const std::string &e : env) envs += e + " ";
    printf("  case %-16s %s-> %s\n", name, envs.c_str(),
           rc == -1 ? "HUNG (killed)" : ok ? "ok" : "FAILED");
    if (!ok) {
        fprintf(stderr, "---- stderr of case %s (exit %d) ----\n%s----\n", name, rc, err.c_str());
        for (const char *w : want)
            if (err.find(w) == std::string::npos) fprintf(stderr, "  missing text: %s\n", w);
        g_failures++;
    }
}

int main(int argc, char **argv) {
    setenv("TANDEM_EMU_DEVICES", "4", 1);   // before any CUDA call
    if (argc == 3 && !strcmp(argv[1], "--case")) return child(argv[2]);
    setenv("TANDEM_EMU_NCCL_TIMEOUT_MS", "20000", 0);   // a bug fails in 20 s, not at ctest's limit

    printf("in process (streams on worker threads unless TANDEM_EMU_SYNC=1):\n");
    in_process_suite();
    printf("  %s\n", g_failures ? "FAILED" : "ok");

    printf("child processes:\n");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "cannot find this executable\n");
        return 1;
    }
    self[n] = 0;
    const std::string fast = "TANDEM_EMU_NCCL_TIMEOUT_MS=400";
    expect_case(self, "suite", {"TANDEM_EMU_SYNC=1"}, {});
    for (const char *sync : {"TANDEM_EMU_SYNC=0", "TANDEM_EMU_SYNC=1"}) {
        expect_case(self, "missing", {fast, sync},
                    {"ncclAllReduce", "timed out", "arrived: ranks 0", "missing: ranks 1"});
        expect_case(self, "mismatch", {fast, sync}, {"mismatch", "count 16", "count 32"});
    }
    expect_case(self, "destroy_in_turn", {fast}, {"intra-node collective", "ranks 1"});
    expect_case(self, "free_pending", {fast, "TANDEM_EMU_SYNC=0"},
                {"cudaFree on cuda:0 while 1 NCCL collective", "rank 0 of communicator"});
    expect_case(self, "malloc_pending", {fast, "TANDEM_EMU_SYNC=0"},
                {"cudaMalloc on cuda:0 while 1 NCCL collective", "can deadlock"});
    expect_case(self, "init_missing", {fast}, {"timed out", "missing: ranks 1"});

    printf("%s\n", g_failures ? "test_emu_nccl: FAILED" : "test_emu_nccl: ok");
    return g_failures ? 1 : 0;
}
