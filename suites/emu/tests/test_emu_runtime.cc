/* test_emu_runtime.cc — tests of the emulated CUDA runtime (suites/emu/runtime*.cc) against what a
 * GPU does: device memory (allocation, double free, the cap, host code that touches it), copies
 * of every kind and their host synchronization (stale pinned reads before a sync), host reads of
 * write-combined pinned memory (counted: slow on a GPU), the legacy
 * stream's implicit ordering, events between streams, sticky faults (per device), graph capture
 * (replays, cross-stream forks and joins, and the calls that invalidate a capture) and two
 * devices.
 *
 * Standalone: exits 0 when every check passes, 1 otherwise (each failure printed). The tests that
 * must die (host code reading device memory), make an error sticky or need other switches
 * (TANDEM_EMU_SYNC=1, TANDEM_EMU_ABORT=1) run in a child: this program again, with the child's name as
 * its argument. The parent runs with TANDEM_EMU_DEVICES=2 and TANDEM_EMU_MEM=256M (set before the first
 * runtime call). */
#include <cuda_runtime.h>
#include <signal.h>
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

static int g_failures;
static bool g_sync;   // TANDEM_EMU_SYNC=1: work runs at once, nothing is ever stale

#define EXPECT(cond)                                                                 \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
            g_failures++;                                                            \
        }                                                                            \
    } while (0)

#define EXPECT_ERR(call, want)                                                       \
    do {                                                                             \
        cudaError_t e_ = (call), w_ = (want);                                        \
        if (e_ != w_) {                                                              \
            fprintf(stderr, "FAIL %s:%d: %s returned %s, want %s\n", __FILE__,       \
                    __LINE__, #call, cudaGetErrorName(e_), cudaGetErrorName(w_));    \
            g_failures++;                                                            \
        }                                                                            \
    } while (0)

#define EXPECT_OK(call) EXPECT_ERR(call, cudaSuccess)

static const size_t MIB = 1 << 20;

// The calling thread's last error is `want`, and reading it cleared it (it was not sticky).
#define EXPECT_LAST(want)                          \
    do {                                           \
        EXPECT_ERR(cudaGetLastError(), want);      \
        EXPECT_OK(cudaGetLastError());             \
    } while (0)

// A work item that sleeps: what runs after it on the stream is late by kSlowMs, long enough that
// the host's next few calls (a busy machine included) come first.
static const int kSlowMs = 100;
static void slow(cudaStream_t s, int ms = kSlowMs) {
    EXPECT_OK(tdm_emu::enqueue(s, "sleep", [ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }));
}

// Every byte of [p, p+n) (host memory) equals v.
static bool all_bytes(const void *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != v) return false;
    return true;
}

// ---- children: this program again, with a test's name and extra environment ----

struct Child {
    int status;
    std::string err;   // its stderr
    bool signaled(int sig) const { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }
    bool exited(int code) const { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
    bool says(const char *s) const { return err.find(s) != std::string::npos; }
};

// The child runs with this process's environment (TANDEM_EMU_DEVICES=2 ...) but the switches that
// change behaviour (TANDEM_EMU_SYNC, TANDEM_EMU_ABORT), which are its own: `env`.
static Child run_child(const char *name, std::vector<std::string> env = {}) {
    std::vector<char *> envp;
    for (std::string &e : env) envp.push_back(&e[0]);
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "TANDEM_EMU_SYNC=", 13) != 0 && strncmp(*e, "TANDEM_EMU_ABORT=", 14) != 0)
            envp.push_back(*e);
    envp.push_back(nullptr);
    char self[] = "/proc/self/exe", arg0[] = "test_emu_runtime";
    char *argv[] = {arg0, (char *)name, nullptr};
    int fd[2];
    Child c{0, ""};
    if (pipe(fd) != 0) return c;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        execve(self, argv, envp.data());
        _exit(127);
    }
    close(fd[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(fd[0], buf, sizeof buf)) > 0) c.err.append(buf, (size_t)n);
    close(fd[0]);
    waitpid(pid, &c.status, 0);
    return c;
}

#define EXPECT_CHILD(cond, child)                                                       \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "FAIL %s:%d: %s\n  the child's stderr:\n%s\n", __FILE__,    \
                    __LINE__, #cond, (child).err.c_str());                              \
            g_failures++;                                                               \
        }                                                                               \
    } while (0)

// ---- devices, versions, errors ----

static void test_devices() {
    int n = 0, v = 0;
    EXPECT_OK(cudaGetDeviceCount(&n));
    EXPECT(n == 2);
    cudaDeviceProp p;
    EXPECT_OK(cudaGetDeviceProperties(&p, 1));
    EXPECT(strcmp(p.name, "tandem emulated CUDA device (A100-like, on the CPU)") == 0);
    EXPECT(p.major == 8 && p.minor == 0 && p.multiProcessorCount == 108 && p.warpSize == 32);
    EXPECT(p.maxThreadsPerBlock == 1024 && p.maxThreadsDim[2] == 64);
    EXPECT(p.maxGridSize[0] == 2147483647 && p.maxGridSize[1] == 65535);
    EXPECT(p.sharedMemPerBlock == 48 * 1024 && p.sharedMemPerBlockOptin == 163 * 1024);
    EXPECT(p.l2CacheSize == 40 << 20 && p.memoryBusWidth == 5120);
    EXPECT(p.totalGlobalMem == 256 * MIB);
    EXPECT_ERR(cudaGetDeviceProperties(&p, 2), cudaErrorInvalidDevice);
    EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    EXPECT(v == 108);
    EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0));
    EXPECT(v == 1410000);
    EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, 1));
    EXPECT(v > 0);
    EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
    EXPECT(v == 8);
    EXPECT_OK(cudaRuntimeGetVersion(&v));
    EXPECT(v == 13000);
    EXPECT_OK(cudaDriverGetVersion(&v));
    EXPECT(v == 13000);
    EXPECT_ERR(cudaSetDevice(2), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_OK(cudaSetDevice(1));
    EXPECT_OK(cudaGetDevice(&v));
    EXPECT(v == 1 && tdm_emu::current_device() == 1);
    EXPECT_OK(cudaSetDevice(0));
    EXPECT_OK(cudaDeviceCanAccessPeer(&v, 0, 1));
    EXPECT(v == 1);
    // the dynamic shared memory limit: up to the opt-in maximum
    static char kernel_stand_in;
    EXPECT_OK(cudaFuncSetAttribute(&kernel_stand_in, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   100000));
    EXPECT_ERR(cudaFuncSetAttribute(&kernel_stand_in, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    200000),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
}

static void test_errors() {
    EXPECT(strcmp(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress") == 0);
    EXPECT(strcmp(cudaGetErrorString(cudaErrorIllegalAddress),
                  "an illegal memory access was encountered") == 0);
    EXPECT(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
    EXPECT(strcmp(cudaGetErrorName(cudaErrorStreamCaptureInvalidated),
                  "cudaErrorStreamCaptureInvalidated") == 0);
    EXPECT(strcmp(cudaGetErrorString((cudaError_t)12345), "unrecognized error code") == 0);
    // the last error is per thread, cleared by cudaGetLastError, kept by cudaPeekAtLastError
    EXPECT_OK(cudaGetLastError());
    EXPECT_ERR(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidValue);
    std::thread([] { EXPECT_OK(cudaGetLastError()); }).join();
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_OK(cudaGetLastError());
    tdm_emu::set_last_error(cudaErrorInvalidConfiguration);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
    EXPECT_OK(cudaGetLastError());
}

// ---- device memory ----

static void test_malloc() {
    size_t free0, total;
    EXPECT_OK(cudaMemGetInfo(&free0, &total));
    EXPECT(total == 256 * MIB && free0 <= total);
    void *p = nullptr, *q = nullptr;
    EXPECT_OK(cudaMalloc(&p, 1000));
    EXPECT(p != nullptr && (uintptr_t)p % 256 == 0);
    int dev = -1;
    EXPECT(tdm_emu::device_range(p, 1000, &dev) && dev == 0);
    EXPECT(tdm_emu::device_range((char *)p + 999, 1, nullptr));
    EXPECT(!tdm_emu::device_range(p, 1001, nullptr));
    EXPECT(!tdm_emu::device_range((char *)p + 1000, 1, nullptr));
    EXPECT(!tdm_emu::pinned_range(p, 1));
    EXPECT(tdm_emu::check_device_range(p, 1000, 0, "test"));
    // a new block holds 0xFF bytes (NaN as floats), not zeros
    unsigned char h[1000];
    EXPECT_OK(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(h, sizeof h, 0xFF));
    size_t free1;
    EXPECT_OK(cudaMemGetInfo(&free1, &total));
    EXPECT(free1 == free0 - 1024);
    EXPECT_OK(cudaMalloc(&q, 1000));
    EXPECT(q != p);
    // freed: not live any more, and a second free is an error (not a fault)
    EXPECT_OK(cudaFree(p));
    EXPECT(!tdm_emu::device_range(p, 1, nullptr));
    EXPECT_ERR(cudaFree(p), cudaErrorInvalidValue);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree((char *)q + 8), cudaErrorInvalidValue);   // not a block's start
    int on_stack;
    EXPECT_ERR(cudaFree(&on_stack), cudaErrorInvalidValue);
    EXPECT_LAST(cudaErrorInvalidValue);
    // the quarantine: the next block does not reuse the freed one's addresses
    void *r = nullptr;
    EXPECT_OK(cudaMalloc(&r, 1000));
    EXPECT(r != p);
    EXPECT_OK(cudaFree(r));
    EXPECT_OK(cudaFree(q));
    EXPECT_OK(cudaFree(nullptr));
    EXPECT_OK(cudaMalloc(&p, 0));
    EXPECT(p == nullptr);
    // the cap: out of memory is an error, not a fault
    void *big = nullptr, *more = nullptr;
    EXPECT_OK(cudaMalloc(&big, 200 * MIB));
    EXPECT_ERR(cudaMalloc(&more, 100 * MIB), cudaErrorMemoryAllocation);
    EXPECT(more == nullptr);
    EXPECT_ERR(cudaGetLastError(), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaMalloc(&more, (size_t)1 << 42), cudaErrorMemoryAllocation);
    EXPECT_LAST(cudaErrorMemoryAllocation);
    EXPECT_OK(cudaFree(big));
    EXPECT_OK(cudaMalloc(&more, 100 * MIB));
    EXPECT_OK(cudaFree(more));
    EXPECT_OK(cudaMemGetInfo(&free1, &total));
    EXPECT(free1 == free0);
}

// ---- copies ----

static void test_copies() {
    const size_t n = 4096;
    char *d1, *d2, *pinned;
    std::vector<char> host(n), back(n);
    EXPECT_OK(cudaMalloc((void **)&d1, n));
    EXPECT_OK(cudaMalloc((void **)&d2, n));
    EXPECT_OK(cudaMallocHost((void **)&pinned, n));
    for (size_t i = 0; i < n; i++) host[i] = (char)(i * 7);
    // every kind, synchronous
    EXPECT_OK(cudaMemcpy(d1, host.data(), n, cudaMemcpyHostToDevice));
    EXPECT_OK(cudaMemcpy(d2, d1, n, cudaMemcpyDeviceToDevice));
    EXPECT_OK(cudaMemcpy(pinned, d2, n, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(pinned, host.data(), n) == 0);
    EXPECT_OK(cudaMemcpy(back.data(), pinned, n, cudaMemcpyHostToHost));
    EXPECT(back == host);
    // inferred kinds
    EXPECT_OK(cudaMemset(d1, 0, n));
    EXPECT_OK(cudaMemcpy(d1, pinned, n, cudaMemcpyDefault));
    std::fill(back.begin(), back.end(), 0);
    EXPECT_OK(cudaMemcpy(back.data(), d1, n, cudaMemcpyDefault));
    EXPECT(back == host);
    // asynchronous on a stream, then the memsets
    cudaStream_t s;
    EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    EXPECT_OK(cudaMemsetAsync(d2, 0x5A, n / 2, s));
    EXPECT_OK(cudaMemcpyAsync(pinned, d2, n, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT(all_bytes(pinned, n / 2, 0x5A) && memcmp(pinned + n / 2, &host[n / 2], n / 2) == 0);
    EXPECT_OK(cudaMemset(pinned, 3, n));   // pinned host memory: device-accessible
    EXPECT(all_bytes(pinned, n, 3));
    EXPECT_OK(cudaMemcpyAsync(d1, d2, n, cudaMemcpyDeviceToDevice, cudaStreamPerThread));
    EXPECT_OK(cudaStreamSynchronize(cudaStreamPerThread));
    EXPECT_OK(cudaMemcpy(back.data(), d1, n, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(back.data(), n / 2, 0x5A));
    // the kind does not match the pointers: an error (not sticky), nothing copied
    EXPECT_ERR(cudaMemcpy(d1, d2, n, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpyAsync(back.data(), host.data(), n, cudaMemcpyDeviceToHost, s),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(host.data(), d1, n, cudaMemcpyHostToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemset(host.data(), 0, n), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(d1, d2, n, (cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
    EXPECT_LAST(cudaErrorInvalidMemcpyDirection);
    EXPECT_OK(cudaMemcpy(d1, d2, 0, cudaMemcpyDeviceToDevice));   // nothing to do
    EXPECT_OK(cudaStreamDestroy(s));
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_OK(cudaFree(d1));
    EXPECT_OK(cudaFree(d2));
}

// Pinned memory is truly asynchronous: a D2H copy behind slow work has not happened when the
// call returns; pageable memory is staged (H2D) or waited for (D2H).
static void test_async_host_memory() {
    const size_t n = 4096;
    char *d, *pinned;
    std::vector<char> pageable(n);
    cudaStream_t s;
    EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    EXPECT_OK(cudaMalloc((void **)&d, n));
    EXPECT_OK(cudaHostAlloc((void **)&pinned, n, cudaHostAllocPortable));
    EXPECT_OK(cudaMemset(d, 0x11, n));
    EXPECT_OK(cudaDeviceSynchronize());

    // D2H into pinned memory: stale before the synchronization, right after it
    memset(pinned, 0, n);
    slow(s);
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, s));
    if (!g_sync) EXPECT(all_bytes(pinned, n, 0));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT(all_bytes(pinned, n, 0x11));

    // D2H into pageable memory: the call waits for the copy
    slow(s);
    EXPECT_OK(cudaMemcpyAsync(pageable.data(), d, n, cudaMemcpyDeviceToHost, s));
    EXPECT(all_bytes(pageable.data(), n, 0x11));

    // H2D from pageable memory: staged at the call, the buffer may be reused at once
    memset(pageable.data(), 0x22, n);
    slow(s);
    EXPECT_OK(cudaMemcpyAsync(d, pageable.data(), n, cudaMemcpyHostToDevice, s));
    memset(pageable.data(), 0x33, n);
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT(all_bytes(pinned, n, 0x22));

    // H2D from pinned memory: read when the copy runs
    memset(pinned, 0x44, n);
    slow(s);
    EXPECT_OK(cudaMemcpyAsync(d, pinned, n, cudaMemcpyHostToDevice, s));
    if (!g_sync) memset(pinned, 0x55, n);   // before the copy ran
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_OK(cudaMemcpy(pageable.data(), d, n, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(pageable.data(), n, g_sync ? 0x44 : 0x55));

    EXPECT_OK(cudaStreamDestroy(s));
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_OK(cudaFree(d));
}

// ---- streams ----

// The legacy stream waits for blocking streams' earlier work and they wait for its; streams made
// with cudaStreamNonBlocking do neither.
extern "C" unsigned long long tdm_emu_wc_host_reads(void);   // runtime.cc, test-only

// Write-combined pinned memory: host writes and device copies are its use; a host read works on a
// GPU but is uncached (slow), so the emulator counts it (and says so once on stderr).
static void test_write_combined() {
    const size_t n = 3 * 4096 + 100;   // the last page partly used
    unsigned char *wc = nullptr, *pinned = nullptr, *d = nullptr;
    EXPECT_OK(cudaHostAlloc((void **)&wc, n, cudaHostAllocWriteCombined));
    EXPECT_OK(cudaHostAlloc((void **)&pinned, n, cudaHostAllocDefault));
    EXPECT_OK(cudaMalloc((void **)&d, n));
    if (!wc || !pinned || !d) return;
    const unsigned long long before = tdm_emu_wc_host_reads();
    memset(wc, 7, n);                                              // host writes
    EXPECT_OK(cudaMemcpy(d, wc, n, cudaMemcpyHostToDevice));       // the device reads
    EXPECT_OK(cudaMemset(d, 9, n));
    EXPECT_OK(cudaMemcpy(wc, d, n, cudaMemcpyDeviceToHost));       // the device writes
    EXPECT_OK(cudaMemcpy(pinned, d, n, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(pinned, n, 9));                               // cached memory: not counted
    EXPECT(tdm_emu_wc_host_reads() == before);
    EXPECT(wc[n - 1] == 9);                                        // a host read
    EXPECT(tdm_emu_wc_host_reads() == before + 1);
    memset(wc, 1, n);                                              // writes again: not counted
    EXPECT(tdm_emu_wc_host_reads() == before + 1);
    EXPECT_OK(cudaFreeHost(wc));
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_OK(cudaFree(d));
}

static void test_legacy_stream() {
    const size_t n = 1024;
    char *d, *pinned;
    std::vector<char> h(n);
    cudaStream_t blocking, nonblocking;
    EXPECT_OK(cudaStreamCreate(&blocking));
    EXPECT_OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    unsigned flags = 9;
    EXPECT_OK(cudaStreamGetFlags(nonblocking, &flags));
    EXPECT(flags == cudaStreamNonBlocking);
    EXPECT_OK(cudaMalloc((void **)&d, n));
    EXPECT_OK(cudaMallocHost((void **)&pinned, n));
    EXPECT_OK(cudaMemset(d, 0x11, n));

    // cudaMemcpy (legacy) after slow work on a blocking stream: sees it
    slow(blocking);
    EXPECT_OK(cudaMemsetAsync(d, 0x22, n, blocking));
    EXPECT_OK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(h.data(), n, 0x22));

    // ...on a non-blocking stream: does not wait for it
    slow(nonblocking);
    EXPECT_OK(cudaMemsetAsync(d, 0x33, n, nonblocking));
    EXPECT_OK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(h.data(), n, g_sync ? 0x33 : 0x22));
    EXPECT_OK(cudaStreamSynchronize(nonblocking));

    // a blocking stream waits for the legacy stream's earlier work
    slow(0);
    EXPECT_OK(cudaMemsetAsync(d, 0x44, n, 0));
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, blocking));
    EXPECT_OK(cudaStreamSynchronize(blocking));
    EXPECT(all_bytes(pinned, n, 0x44));

    // cudaStreamQuery: not ready while work is queued (not an error), then done
    slow(blocking);
    if (!g_sync) EXPECT_ERR(cudaStreamQuery(blocking), cudaErrorNotReady);
    EXPECT_OK(cudaGetLastError());
    EXPECT_OK(cudaDeviceSynchronize());
    EXPECT_OK(cudaStreamQuery(blocking));

    // a destroyed stream's queued work still runs
    slow(nonblocking);
    EXPECT_OK(cudaMemsetAsync(d, 0x66, n, nonblocking));
    EXPECT_OK(cudaStreamDestroy(nonblocking));
    EXPECT_ERR(cudaStreamSynchronize(nonblocking), cudaErrorInvalidResourceHandle);
    EXPECT_OK(cudaDeviceSynchronize());
    EXPECT_OK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(h.data(), n, 0x66));
    EXPECT_LAST(cudaErrorInvalidResourceHandle);

    // a host function runs in stream order
    std::atomic<int> calls{0};
    slow(blocking, 10);
    EXPECT_OK(cudaLaunchHostFunc(
        blocking, [](void *c) { ((std::atomic<int> *)c)->fetch_add(1); }, &calls));
    EXPECT_OK(cudaStreamSynchronize(blocking));
    EXPECT(calls.load() == 1);

    EXPECT_OK(cudaStreamDestroy(blocking));
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_OK(cudaFree(d));
}

// ---- events ----

static void test_events() {
    const size_t n = 1024;
    char *d, *pinned;
    cudaStream_t producer, consumer;
    cudaEvent_t ready;
    EXPECT_OK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
    EXPECT_OK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
    EXPECT_OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    EXPECT_OK(cudaMalloc((void **)&d, n));
    EXPECT_OK(cudaMallocHost((void **)&pinned, n));
    EXPECT_OK(cudaMemset(d, 1, n));
    EXPECT_OK(cudaDeviceSynchronize());

    // with the wait, the consumer sees the slow producer's write
    slow(producer);
    EXPECT_OK(cudaMemsetAsync(d, 7, n, producer));
    EXPECT_OK(cudaEventRecord(ready, producer));
    EXPECT_OK(cudaStreamWaitEvent(consumer, ready, 0));
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, consumer));
    EXPECT_OK(cudaStreamSynchronize(consumer));
    EXPECT(all_bytes(pinned, n, 7));

    // without it, the consumer runs ahead of the producer
    slow(producer);
    EXPECT_OK(cudaMemsetAsync(d, 9, n, producer));
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, consumer));
    EXPECT_OK(cudaStreamSynchronize(consumer));
    EXPECT(all_bytes(pinned, n, g_sync ? 9 : 7));
    EXPECT_OK(cudaStreamSynchronize(producer));

    // the wait is for the record made before it, not a later one
    EXPECT_OK(cudaEventRecord(ready, producer));   // done at once: the producer is idle
    EXPECT_OK(cudaEventSynchronize(ready));
    EXPECT_OK(cudaStreamWaitEvent(consumer, ready, 0));
    slow(producer);
    EXPECT_OK(cudaEventRecord(ready, producer));
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, consumer));
    EXPECT_OK(cudaStreamSynchronize(consumer));
    if (!g_sync) EXPECT_ERR(cudaEventQuery(ready), cudaErrorNotReady);
    EXPECT_OK(cudaGetLastError());   // cudaErrorNotReady is not recorded as an error
    EXPECT_OK(cudaEventSynchronize(ready));
    EXPECT_OK(cudaEventQuery(ready));

    // timing: the elapsed time between two records spans the work between them
    cudaEvent_t t0, t1, never;
    EXPECT_OK(cudaEventCreate(&t0));
    EXPECT_OK(cudaEventCreate(&t1));
    EXPECT_OK(cudaEventCreate(&never));
    EXPECT_OK(cudaEventRecord(t0, producer));
    slow(producer);
    EXPECT_OK(cudaEventRecord(t1, producer));
    float ms = -1;
    if (!g_sync) EXPECT_ERR(cudaEventElapsedTime(&ms, t0, t1), cudaErrorNotReady);
    EXPECT_OK(cudaEventSynchronize(t1));
    EXPECT_OK(cudaEventElapsedTime(&ms, t0, t1));
    EXPECT(ms >= kSlowMs - 5 && ms < 10000);
    EXPECT_ERR(cudaEventElapsedTime(&ms, t0, ready), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventElapsedTime(&ms, t0, never), cudaErrorInvalidResourceHandle);
    EXPECT_OK(cudaEventQuery(never));   // never recorded: complete
    EXPECT_OK(cudaStreamWaitEvent(consumer, never, 0));
    // an event is recorded on its own device's streams only
    cudaStream_t other;
    EXPECT_OK(cudaSetDevice(1));
    EXPECT_OK(cudaStreamCreate(&other));
    EXPECT_OK(cudaSetDevice(0));
    EXPECT_ERR(cudaEventRecord(t0, other), cudaErrorInvalidResourceHandle);
    EXPECT_OK(cudaStreamWaitEvent(other, t1, 0));   // waiting across devices is fine
    EXPECT_OK(cudaStreamDestroy(other));
    EXPECT_LAST(cudaErrorInvalidResourceHandle);
    // destroyed while a wait on it is queued: the wait still sees the record
    slow(producer);
    EXPECT_OK(cudaMemsetAsync(d, 0x21, n, producer));
    EXPECT_OK(cudaEventRecord(t0, producer));
    EXPECT_OK(cudaStreamWaitEvent(consumer, t0, 0));
    EXPECT_OK(cudaEventDestroy(t0));
    EXPECT_ERR(cudaEventQuery(t0), cudaErrorInvalidResourceHandle);
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, consumer));
    EXPECT_OK(cudaStreamSynchronize(consumer));
    EXPECT(all_bytes(pinned, n, 0x21));
    EXPECT_LAST(cudaErrorInvalidResourceHandle);

    EXPECT_OK(cudaEventDestroy(t1));
    EXPECT_OK(cudaEventDestroy(never));
    EXPECT_OK(cudaEventDestroy(ready));
    EXPECT_OK(cudaStreamDestroy(producer));
    EXPECT_OK(cudaStreamDestroy(consumer));
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_OK(cudaFree(d));
}

// ---- graph capture ----

// The work captured below, run eagerly or recorded: a memset, a custom item, a fork onto `side`
// (a copy and an item there), the join, a copy back to pinned memory.
static void capture_body(cudaStream_t s, cudaStream_t side, char *a, char *b, char *pinned,
                         size_t n, std::atomic<int> *counter, cudaEvent_t fork, cudaEvent_t join) {
    EXPECT_OK(cudaMemsetAsync(a, 0x5C, n, s));
    EXPECT_OK(tdm_emu::enqueue(s, "count", [counter] { counter->fetch_add(1); }));
    EXPECT_OK(cudaEventRecord(fork, s));
    EXPECT_OK(cudaStreamWaitEvent(side, fork, 0));
    EXPECT_OK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, side));
    EXPECT_OK(tdm_emu::enqueue(side, "count", [counter] { counter->fetch_add(10); }));
    EXPECT_OK(cudaEventRecord(join, side));
    EXPECT_OK(cudaStreamWaitEvent(s, join, 0));
    EXPECT_OK(cudaMemcpyAsync(pinned, b, n, cudaMemcpyDeviceToHost, s));
}

static void test_capture() {
    const size_t n = 2048;
    char *a, *b, *pinned;
    cudaStream_t s, side;
    cudaEvent_t fork, join;
    std::atomic<int> counter{0};
    EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    EXPECT_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    EXPECT_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    EXPECT_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    EXPECT_OK(cudaMalloc((void **)&a, n));
    EXPECT_OK(cudaMalloc((void **)&b, n));
    EXPECT_OK(cudaMallocHost((void **)&pinned, n));

    // eagerly: the reference
    capture_body(s, side, a, b, pinned, n, &counter, fork, join);
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT(counter.load() == 11 && all_bytes(pinned, n, 0x5C));
    std::vector<char> eager(pinned, pinned + n);

    // captured: nothing runs until the graph is launched
    counter = 0;
    memset(pinned, 0, n);
    EXPECT_OK(cudaMemset(a, 0, n));
    EXPECT_OK(cudaMemset(b, 0, n));
    EXPECT_OK(cudaDeviceSynchronize());
    cudaStreamCaptureStatus st;
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_OK(cudaStreamIsCapturing(s, &st));
    EXPECT(st == cudaStreamCaptureStatusActive);
    capture_body(s, side, a, b, pinned, n, &counter, fork, join);
    EXPECT_OK(cudaStreamIsCapturing(side, &st));
    EXPECT(st == cudaStreamCaptureStatusActive);   // forked into the capture
    cudaGraph_t g = nullptr;
    EXPECT_OK(cudaStreamEndCapture(s, &g));
    EXPECT(g != nullptr);
    EXPECT_OK(cudaStreamIsCapturing(side, &st));
    EXPECT(st == cudaStreamCaptureStatusNone);
    EXPECT(counter.load() == 0 && all_bytes(pinned, n, 0));
    cudaGraphExec_t x = nullptr;
    EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
    EXPECT_OK(cudaGraphDestroy(g));   // the executable graph does not need it
    EXPECT_ERR(cudaEventQuery(join), cudaErrorCapturedEvent);   // last recorded in a capture
    EXPECT_LAST(cudaErrorCapturedEvent);

    // launched twice: the same results as eagerly, each time
    for (int launch = 1; launch <= 2; launch++) {
        memset(pinned, 0, n);
        EXPECT_OK(cudaMemset(a, 0, n));
        EXPECT_OK(cudaMemset(b, 0, n));
        // s is non-blocking: nothing orders it after the legacy stream's memsets but this (the
        // graph's own memset of a could run first: a failure once in CI's random-order pass).
        EXPECT_OK(cudaDeviceSynchronize());
        EXPECT_OK(cudaGraphLaunch(x, s));
        EXPECT_OK(cudaStreamSynchronize(s));
        EXPECT(counter.load() == 11 * launch);
        EXPECT(memcmp(pinned, eager.data(), n) == 0);
    }
    EXPECT_OK(cudaGraphExecDestroy(x));
    EXPECT_ERR(cudaGraphLaunch(x, s), cudaErrorInvalidResourceHandle);
    EXPECT_LAST(cudaErrorInvalidResourceHandle);

    EXPECT_OK(cudaEventDestroy(fork));
    EXPECT_OK(cudaEventDestroy(join));
    EXPECT_OK(cudaStreamDestroy(s));
    EXPECT_OK(cudaStreamDestroy(side));
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_OK(cudaFree(a));
    EXPECT_OK(cudaFree(b));
}

// Ends the capture of s expecting `want`; the stream is out of capture mode afterwards.
static void end_expect(cudaStream_t s, cudaError_t want, int line) {
    cudaGraph_t g = (cudaGraph_t)1;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    if (e != want) {
        fprintf(stderr, "FAIL %s:%d: cudaStreamEndCapture returned %s, want %s\n", __FILE__, line,
                cudaGetErrorName(e), cudaGetErrorName(want));
        g_failures++;
    }
    if (want != cudaSuccess) EXPECT(g == nullptr);
    if (g && e == cudaSuccess) cudaGraphDestroy(g);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    EXPECT_OK(cudaStreamIsCapturing(s, &st));
    EXPECT(st == cudaStreamCaptureStatusNone);
    (void)cudaGetLastError();
}

// The calls CUDA forbids during a capture invalidate it.
static void test_capture_invalidation() {
    const size_t n = 256;
    char *d, *pinned;
    std::vector<char> pageable(n);
    cudaStream_t s, side, blocking;
    cudaEvent_t ev;
    cudaStreamCaptureStatus st;
    EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    EXPECT_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    EXPECT_OK(cudaStreamCreate(&blocking));
    EXPECT_OK(cudaEventCreate(&ev));
    EXPECT_OK(cudaMalloc((void **)&d, n));
    EXPECT_OK(cudaMallocHost((void **)&pinned, n));

    // a synchronization of the capturing stream
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_OK(cudaMemsetAsync(d, 1, n, s));
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    EXPECT_OK(cudaStreamIsCapturing(s, &st));
    EXPECT(st == cudaStreamCaptureStatusInvalidated);
    EXPECT_ERR(cudaMemsetAsync(d, 1, n, s), cudaErrorStreamCaptureInvalidated);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);
    EXPECT_OK(cudaGetLastError());   // not sticky
    EXPECT_OK(cudaMemsetAsync(d, 1, n, s));   // the stream works again
    EXPECT_OK(cudaStreamSynchronize(s));

    // cudaMalloc on the capturing thread (thread-local mode)...
    void *p = nullptr;
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_ERR(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);
    // ...is allowed with the thread in relaxed mode, and on another thread
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    EXPECT_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    EXPECT(mode == cudaStreamCaptureModeGlobal);
    EXPECT_OK(cudaMalloc(&p, 64));
    EXPECT_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    std::thread([] {
        void *q = nullptr;
        EXPECT_OK(cudaMalloc(&q, 64));
        EXPECT_OK(cudaFree(q));
    }).join();
    EXPECT_OK(cudaMemsetAsync(d, 1, n, s));
    end_expect(s, cudaSuccess, __LINE__);
    EXPECT_OK(cudaFree(p));
    // a global-mode capture forbids it on every thread in global mode
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    std::thread([] {
        void *q = nullptr;
        EXPECT_ERR(cudaMalloc(&q, 64), cudaErrorStreamCaptureUnsupported);
    }).join();
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);

    // synchronous calls: cudaMemcpy, cudaDeviceSynchronize, cudaEventSynchronize
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_ERR(cudaMemcpy(pinned, d, n, cudaMemcpyDeviceToHost), cudaErrorStreamCaptureUnsupported);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);
    EXPECT_OK(cudaEventRecord(ev, side));
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_ERR(cudaEventSynchronize(ev), cudaErrorStreamCaptureUnsupported);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);

    // a query of an event recorded in the capture
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_OK(cudaEventRecord(ev, s));
    EXPECT_ERR(cudaEventQuery(ev), cudaErrorCapturedEvent);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);
    EXPECT_OK(cudaEventRecord(ev, s));   // recorded outside a capture again: usable
    EXPECT_OK(cudaEventSynchronize(ev));

    // a copy to or from pageable memory cannot be captured; pinned memory can
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_OK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, s));
    EXPECT_ERR(cudaMemcpyAsync(d, pageable.data(), n, cudaMemcpyHostToDevice, s),
               cudaErrorStreamCaptureUnsupported);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);

    // the legacy stream while a blocking stream captures
    EXPECT_OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
    EXPECT_ERR(cudaMemsetAsync(d, 0, n, 0), cudaErrorStreamCaptureImplicit);
    EXPECT_ERR(cudaStreamIsCapturing(0, &st), cudaErrorStreamCaptureImplicit);
    end_expect(blocking, cudaErrorStreamCaptureInvalidated, __LINE__);
    // (a non-blocking stream's capture leaves the legacy stream alone)
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    EXPECT_OK(cudaMemsetAsync(d, 0, n, 0));
    EXPECT_OK(cudaStreamSynchronize(0));
    end_expect(s, cudaSuccess, __LINE__);
    EXPECT_ERR(cudaStreamBeginCapture(0, cudaStreamCaptureModeRelaxed),
               cudaErrorStreamCaptureUnsupported);

    // a wait on an event recorded outside the capture
    EXPECT_OK(cudaEventRecord(ev, side));
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_ERR(cudaStreamWaitEvent(s, ev, 0), cudaErrorStreamCaptureIsolation);
    end_expect(s, cudaErrorStreamCaptureInvalidated, __LINE__);

    // a fork that is not joined back
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_OK(cudaEventRecord(ev, s));
    EXPECT_OK(cudaStreamWaitEvent(side, ev, 0));
    EXPECT_OK(cudaMemsetAsync(d, 2, n, side));
    end_expect(s, cudaErrorStreamCaptureUnjoined, __LINE__);
    EXPECT_OK(cudaStreamIsCapturing(side, &st));
    EXPECT(st == cudaStreamCaptureStatusNone);

    // capture state errors
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_ERR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaErrorIllegalState);
    std::thread([&] {
        cudaGraph_t g;
        EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureWrongThread);
    }).join();
    end_expect(s, cudaSuccess, __LINE__);
    cudaGraph_t g;
    EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
    EXPECT_LAST(cudaErrorIllegalState);

    EXPECT_OK(cudaDeviceSynchronize());
    EXPECT_OK(cudaEventDestroy(ev));
    EXPECT_OK(cudaStreamDestroy(s));
    EXPECT_OK(cudaStreamDestroy(side));
    EXPECT_OK(cudaStreamDestroy(blocking));
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_OK(cudaFree(d));
}

// ---- host memory the runtime knows, and what pointers are ----

static void test_pointers() {
    void *d, *pinned;
    EXPECT_OK(cudaSetDevice(1));
    EXPECT_OK(cudaMalloc(&d, 100));
    EXPECT_OK(cudaHostAlloc(&pinned, 100, cudaHostAllocMapped | cudaHostAllocWriteCombined));
    EXPECT_OK(cudaSetDevice(0));
    cudaPointerAttributes a;
    EXPECT_OK(cudaPointerGetAttributes(&a, (char *)d + 10));
    EXPECT(a.type == cudaMemoryTypeDevice && a.device == 1 && a.devicePointer == (char *)d + 10 &&
           a.hostPointer == nullptr);
    EXPECT_OK(cudaPointerGetAttributes(&a, pinned));
    EXPECT(a.type == cudaMemoryTypeHost && a.device == 1 && a.devicePointer == pinned &&
           a.hostPointer == pinned);
    void *dp = nullptr;
    EXPECT_OK(cudaHostGetDevicePointer(&dp, pinned, 0));
    EXPECT(dp == pinned);
    EXPECT(tdm_emu::pinned_range(pinned, 100) && !tdm_emu::pinned_range(pinned, 101));
    std::vector<char> plain(8192);
    EXPECT_OK(cudaPointerGetAttributes(&a, plain.data()));
    EXPECT(a.type == cudaMemoryTypeUnregistered && a.devicePointer == nullptr);
    EXPECT_ERR(cudaHostGetDevicePointer(&dp, plain.data(), 0), cudaErrorInvalidValue);
    // registered ranges
    EXPECT_OK(cudaHostRegister(plain.data() + 4096, 4096, cudaHostRegisterPortable));
    EXPECT_OK(cudaPointerGetAttributes(&a, plain.data() + 5000));
    EXPECT(a.type == cudaMemoryTypeHost);
    EXPECT(tdm_emu::pinned_range(plain.data() + 4096, 4096));
    EXPECT_ERR(cudaHostRegister(plain.data() + 4000, 200, 0),
               cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_ERR(cudaHostUnregister(plain.data()), cudaErrorHostMemoryNotRegistered);
    EXPECT_ERR(cudaFreeHost(plain.data() + 4096), cudaErrorInvalidValue);
    EXPECT_OK(cudaHostUnregister(plain.data() + 4096));
    EXPECT(!tdm_emu::pinned_range(plain.data() + 4096, 1));
    EXPECT_ERR(cudaFree(pinned), cudaErrorInvalidValue);
    EXPECT_LAST(cudaErrorInvalidValue);
    EXPECT_OK(cudaFreeHost(pinned));
    EXPECT_ERR(cudaFreeHost(pinned), cudaErrorInvalidValue);
    EXPECT_OK(cudaFree(d));
    EXPECT_LAST(cudaErrorInvalidValue);
}

// ---- two devices ----

static void test_two_devices() {
    const size_t n = 8192;
    char *d0, *d1, *pinned;
    cudaStream_t s1;
    EXPECT_OK(cudaMalloc((void **)&d0, n));
    EXPECT_OK(cudaMemset(d0, 0x5A, n));
    EXPECT_OK(cudaSetDevice(1));
    size_t free_before, total;
    EXPECT_OK(cudaMemGetInfo(&free_before, &total));
    EXPECT_OK(cudaMalloc((void **)&d1, n));
    EXPECT_OK(cudaMallocHost((void **)&pinned, n));
    EXPECT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    EXPECT(tdm_emu::stream_device(s1) == 1 && tdm_emu::stream_device(0) == 1);
    int dev = -1;
    EXPECT(tdm_emu::device_range(d1, n, &dev) && dev == 1);
    size_t free_after;
    EXPECT_OK(cudaMemGetInfo(&free_after, &total));
    EXPECT(free_after == free_before - n);
    // the copy between devices, in s1's order (cudaMemset on device 0 is done first: synchronize)
    EXPECT_OK(cudaSetDevice(0));
    EXPECT_OK(cudaDeviceSynchronize());
    EXPECT_OK(cudaSetDevice(1));
    EXPECT_OK(cudaMemcpyPeerAsync(d1, 1, d0, 0, n, s1));
    EXPECT_OK(cudaMemcpyAsync(pinned, d1, n, cudaMemcpyDeviceToHost, s1));
    EXPECT_OK(cudaStreamSynchronize(s1));
    EXPECT(all_bytes(pinned, n, 0x5A));
    // the devices as named must be those of the pointers
    EXPECT_ERR(cudaMemcpyPeerAsync(d1, 0, d0, 0, n, s1), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpyPeerAsync(d1, 1, d0, 5, n, s1), cudaErrorInvalidDevice);
    EXPECT_LAST(cudaErrorInvalidDevice);
    // a device-to-device cudaMemcpyAsync between devices works too (unified addressing)
    EXPECT_OK(cudaMemsetAsync(d1, 0x6B, n, s1));
    EXPECT_OK(cudaMemcpyAsync(d0, d1, n, cudaMemcpyDefault, s1));
    EXPECT_OK(cudaStreamSynchronize(s1));
    EXPECT_OK(cudaSetDevice(0));
    EXPECT_OK(cudaMemcpy(pinned, d0, n, cudaMemcpyDeviceToHost));
    EXPECT(all_bytes(pinned, n, 0x6B));
    EXPECT(tdm_emu::stream_device(0) == 0);
    EXPECT_OK(cudaStreamDestroy(s1));
    EXPECT_OK(cudaFree(d1));
    EXPECT_OK(cudaFree(d0));
    EXPECT_OK(cudaFreeHost(pinned));
}

// Ranks as host threads, one device each, all at once: nothing is lost or mixed up.
static void test_threads() {
    std::vector<std::thread> ranks;
    std::atomic<int> bad{0};
    for (int r = 0; r < 4; r++)
        ranks.emplace_back([r, &bad] {
            if (cudaSetDevice(r % 2) != cudaSuccess) bad++;
            cudaStream_t s;
            cudaEvent_t e;
            if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
                cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
                bad++;
                return;
            }
            std::vector<int> h(1000), back(1000);
            for (int it = 0; it < 40; it++) {
                for (int i = 0; i < 1000; i++) h[(size_t)i] = r * 100000 + it * 1000 + i;
                int *a = nullptr, *b = nullptr;
                if (cudaMalloc((void **)&a, 4000) || cudaMalloc((void **)&b, 4000)) bad++;
                cudaMemcpyAsync(a, h.data(), 4000, cudaMemcpyHostToDevice, s);
                cudaMemcpyAsync(b, a, 4000, cudaMemcpyDeviceToDevice, s);
                cudaEventRecord(e, s);
                cudaStreamWaitEvent(cudaStreamPerThread, e, 0);
                cudaMemcpyAsync(back.data(), b, 4000, cudaMemcpyDeviceToHost, cudaStreamPerThread);
                if (back != h) bad++;
                if (cudaFree(a) || cudaFree(b)) bad++;
            }
            if (cudaStreamDestroy(s) || cudaEventDestroy(e)) bad++;
        });
    for (auto &t : ranks) t.join();
    EXPECT(bad.load() == 0);
}

// ---- the children ----

// Host code reads device memory: the process dies, naming the allocation.
static int child_host_read() {
    void *p = nullptr;
    if (cudaMalloc(&p, 4096) != cudaSuccess) return 3;
    volatile int *q = (volatile int *)p + 4;
    int x = *q;
    printf("read %d: survived\n", x);
    return 0;
}

// ...freed device memory: the message says so.
static int child_host_write_freed() {
    void *p = nullptr;
    if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess) return 3;
    *(volatile char *)p = 1;
    return 0;
}

// A fault: reported once, then sticky: every call returns it, cudaGetLastError does not clear it.
static int child_sticky() {
    void *p = nullptr;
    cudaStream_t s;
    if (cudaMalloc(&p, 64) || cudaStreamCreate(&s)) return 3;
    tdm_emu::fault(cudaErrorIllegalAddress, "a test fault at %p", p);
    int bad = 0;
    bad += cudaGetLastError() != cudaErrorIllegalAddress;
    bad += cudaGetLastError() != cudaErrorIllegalAddress;
    bad += cudaPeekAtLastError() != cudaErrorIllegalAddress;
    void *q = nullptr;
    bad += cudaMalloc(&q, 64) != cudaErrorIllegalAddress;
    bad += cudaMemset(p, 0, 64) != cudaErrorIllegalAddress;
    bad += cudaStreamSynchronize(s) != cudaErrorIllegalAddress;
    bad += cudaDeviceSynchronize() != cudaErrorIllegalAddress;
    bad += tdm_emu::enqueue(s, "x", [] {}) != cudaErrorIllegalAddress;
    int n = 0;
    bad += cudaGetDeviceCount(&n) != cudaSuccess || n != 2;   // device queries still answer
    fprintf(stderr, "sticky checks failed: %d\n", bad);
    return bad ? 1 : 0;
}

// A fault on cuda:1 is cuda:1's alone, as a GPU's context error: its calls return it, cuda:0's
// keep working, also while cuda:1 is no longer current. The fault comes from a work item on
// cuda:1's stream while cuda:0 is current (kernel: from a block of a grid, which the pool's
// threads may run), so only the stream says whose it is.
static int child_sticky_per_device(bool kernel) {
    void *p0 = nullptr, *p1 = nullptr, *q = nullptr;
    cudaStream_t s0, s1;
    if (cudaSetDevice(1) || cudaMalloc(&p1, 64) || cudaStreamCreate(&s1) || cudaSetDevice(0) ||
        cudaMalloc(&p0, 64) || cudaStreamCreate(&s0))
        return 3;
    cudaError_t e;
    if (kernel)
        e = tdm_emu::enqueue(s1, "kernel k_trap", [] {
            tdm_emu::run_grid("k_trap", dim3(8), dim3(32), 0, [] {
                if (blockIdx.x == 5 && threadIdx.x == 7)
                    tdm_emu::kernel_trap("__trap()", __FILE__, __LINE__);
            });
        });
    else
        e = tdm_emu::enqueue(s1, "bad work", [] {
            tdm_emu::fault(cudaErrorIllegalAddress, "a test fault on cuda:1's stream");
        });
    if (e) return 3;
    const cudaError_t want = kernel ? cudaErrorLaunchFailure : cudaErrorIllegalAddress;
    int bad = 0;
    bad += cudaStreamSynchronize(s1) != want;   // the stream of the fault reports it
    // cuda:0, current all along, is untouched
    bad += cudaGetLastError() != cudaSuccess;
    bad += cudaPeekAtLastError() != cudaSuccess;
    bad += cudaMalloc(&q, 64) != cudaSuccess;
    bad += cudaMemset(p0, 1, 64) != cudaSuccess;
    bad += tdm_emu::enqueue(s0, "x", [] {}) != cudaSuccess;
    bad += cudaStreamSynchronize(s0) != cudaSuccess;
    bad += cudaDeviceSynchronize() != cudaSuccess;
    bad += cudaFree(q) != cudaSuccess;
    // cuda:1's calls fail, from cuda:0 too
    bad += tdm_emu::enqueue(s1, "x", [] {}) != want;
    bad += cudaStreamSynchronize(s1) != want;
    bad += cudaSetDevice(1) != want;   // made current all the same
    int d = -1;
    bad += cudaGetDevice(&d) != cudaSuccess || d != 1;
    bad += cudaMalloc(&q, 64) != want;
    bad += cudaGetLastError() != want;
    bad += cudaDeviceSynchronize() != want;
    bad += cudaSetDevice(0) != cudaSuccess;   // and back: cuda:0 still works
    bad += cudaMemset(p0, 2, 64) != cudaSuccess;
    bad += cudaDeviceSynchronize() != cudaSuccess;
    fprintf(stderr, "per-device sticky checks failed: %d\n", bad);
    return bad ? 1 : 0;
}
static int child_sticky_per_device_item() { return child_sticky_per_device(false); }
static int child_sticky_per_device_kernel() { return child_sticky_per_device(true); }

// TANDEM_EMU_ABORT=1: the first fault aborts.
static int child_abort() {
    tdm_emu::fault(cudaErrorIllegalAddress, "a test fault");
    return 0;
}

// A copy that runs past its allocation: a fault, and sticky.
static int child_copy_past_end() {
    void *d = nullptr;
    std::vector<char> h(1001);
    if (cudaMalloc(&d, 1000)) return 3;
    if (cudaMemcpy(d, h.data(), 1001, cudaMemcpyHostToDevice) != cudaErrorIllegalAddress) return 1;
    return cudaGetLastError() == cudaErrorIllegalAddress ? 0 : 1;
}

// A library's operand that is not device memory of its device (check_device_range).
static int child_check_range() {
    std::vector<char> h(64);
    if (tdm_emu::check_device_range(h.data(), 64, 0, "cublasLtMatmul")) return 1;
    return cudaGetLastError() == cudaErrorIllegalAddress ? 0 : 1;
}

// Device work writes one byte past a block: ASan reports it at once, else cudaFree finds the red
// zone changed.
static int child_red_zone() {
    char *d = nullptr;
    if (cudaMalloc((void **)&d, 1000)) return 3;
    if (tdm_emu::enqueue(0, "bad kernel", [d] { d[1000] = 1; })) return 3;
    if (cudaDeviceSynchronize()) return 3;
    return cudaFree(d) == cudaErrorIllegalAddress ? 0 : 1;
}

// Device work writes into a freed block: ASan reports it at once, else the block is found changed
// when it leaves the quarantine (pushed out here by many later frees).
static int child_write_after_free() {
    char *d = nullptr;
    if (cudaMalloc((void **)&d, 1000) || cudaFree(d)) return 3;
    if (tdm_emu::enqueue(0, "bad kernel", [d] { d[10] = 1; })) return 3;
    if (cudaDeviceSynchronize()) return 3;
    for (int i = 0; i < (1 << 14) + 1; i++) {
        void *p = nullptr;
        if (cudaMalloc(&p, 16) || cudaFree(p)) break;
    }
    return cudaGetLastError() == cudaErrorIllegalAddress ? 0 : 1;
}

// TANDEM_EMU_SYNC=1: the work has run when the call returns.
static int child_sync_mode() {
    const size_t n = 256;
    char *d = nullptr, *pinned = nullptr;
    cudaStream_t s;
    cudaEvent_t e;
    if (cudaMalloc((void **)&d, n) || cudaMallocHost((void **)&pinned, n) ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) || cudaEventCreate(&e))
        return 3;
    int bad = 0;
    memset(pinned, 0, n);
    std::atomic<bool> ran{false};
    bad += tdm_emu::enqueue(s, "sleep", [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ran = true;
    }) != cudaSuccess;
    bad += !ran.load();
    bad += cudaMemsetAsync(d, 9, n, s) != cudaSuccess;
    bad += cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, s) != cudaSuccess;
    bad += !all_bytes(pinned, n, 9);
    bad += cudaEventRecord(e, s) != cudaSuccess;
    bad += cudaEventQuery(e) != cudaSuccess;
    bad += cudaStreamQuery(s) != cudaSuccess;
    fprintf(stderr, "sync-mode checks failed: %d\n", bad);
    return bad ? 1 : 0;
}

static void test_children() {
#if defined(__SANITIZE_ADDRESS__)
    const bool asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    const bool asan = true;
#else
    const bool asan = false;
#endif
#else
    const bool asan = false;
#endif
    Child c = run_child("child_host_read");
    EXPECT_CHILD(c.signaled(SIGABRT), c);
    EXPECT_CHILD(c.says("tandem emu: host code read or wrote device memory at 0x"), c);
    EXPECT_CHILD(c.says("(inside a 4096-byte allocation on emulated cuda:0, offset 16) outside a "
                        "kernel or copy: a GPU would fault here"),
                 c);

    c = run_child("child_host_write_freed");
    EXPECT_CHILD(!c.exited(0), c);
    EXPECT_CHILD(c.says("inside a freed 4096-byte allocation on emulated cuda:0, offset 0: use "
                        "after free") ||
                     (asan && c.says("use-after-poison")),
                 c);

    c = run_child("child_sticky");
    EXPECT_CHILD(c.exited(0), c);
    EXPECT_CHILD(c.says("tandem emu: a test fault at 0x"), c);

    for (const char *sync : {"TANDEM_EMU_SYNC=0", "TANDEM_EMU_SYNC=1"}) {
        c = run_child("child_sticky_per_device_item", {sync});
        EXPECT_CHILD(c.exited(0), c);
        EXPECT_CHILD(c.says("tandem emu: a test fault on cuda:1's stream"), c);
        c = run_child("child_sticky_per_device_kernel", {sync});
        EXPECT_CHILD(c.exited(0), c);
        EXPECT_CHILD(c.says("kernel k_trap: block (5,0,0), thread (7,0,0)"), c);
    }

    c = run_child("child_abort", {"TANDEM_EMU_ABORT=1"});
    EXPECT_CHILD(c.signaled(SIGABRT), c);
    EXPECT_CHILD(c.says("tandem emu: a test fault"), c);

    c = run_child("child_copy_past_end");
    EXPECT_CHILD(c.exited(0), c);
    EXPECT_CHILD(c.says("runs 1 bytes past the end of its 1000-byte allocation on emulated cuda:0"),
                 c);

    c = run_child("child_check_range");
    EXPECT_CHILD(c.exited(0), c);
    EXPECT_CHILD(c.says("cublasLtMatmul: the operand") && c.says("not device memory"), c);

    c = run_child("child_red_zone");
    if (asan)
        EXPECT_CHILD(!c.exited(0) || c.says("written past its end"), c);
    else
        EXPECT_CHILD(c.exited(0) && c.says("was written past its end"), c);

    c = run_child("child_write_after_free");
    if (asan)
        EXPECT_CHILD(!c.exited(0) || c.says("was written after cudaFree"), c);
    else
        EXPECT_CHILD(c.exited(0) && c.says("was written after cudaFree (the byte at offset 10 "
                                           "changed)"),
                     c);

    c = run_child("child_sync_mode", {"TANDEM_EMU_SYNC=1"});
    EXPECT_CHILD(c.exited(0), c);
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*fn)();
    } children[] = {
        {"child_host_read", child_host_read},
        {"child_host_write_freed", child_host_write_freed},
        {"child_sticky", child_sticky},
        {"child_sticky_per_device_item", child_sticky_per_device_item},
        {"child_sticky_per_device_kernel", child_sticky_per_device_kernel},
        {"child_abort", child_abort},
        {"child_copy_past_end", child_copy_past_end},
        {"child_check_range", child_check_range},
        {"child_red_zone", child_red_zone},
        {"child_write_after_free", child_write_after_free},
        {"child_sync_mode", child_sync_mode},
    };
    // before the first runtime call: the switches are read once
    setenv("TANDEM_EMU_DEVICES", "2", 1);
    setenv("TANDEM_EMU_MEM", "256M", 1);
    const char *sync = getenv("TANDEM_EMU_SYNC");
    g_sync = sync && strcmp(sync, "1") == 0;
    if (argc > 1) {
        for (const auto &c : children)
            if (strcmp(argv[1], c.name) == 0) return c.fn();
        fprintf(stderr, "test_emu_runtime: no child test named %s\n", argv[1]);
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)();
    } tests[] = {
        {"devices", test_devices},
        {"errors", test_errors},
        {"malloc", test_malloc},
        {"copies", test_copies},
        {"async_host_memory", test_async_host_memory},
        {"write_combined", test_write_combined},
        {"legacy_stream", test_legacy_stream},
        {"events", test_events},
        {"capture", test_capture},
        {"capture_invalidation", test_capture_invalidation},
        {"pointers", test_pointers},
        {"two_devices", test_two_devices},
        {"threads", test_threads},
        {"children", test_children},
    };
    for (const auto &t : tests) {
        int before = g_failures;
        t.fn();
        printf("%s %s\n", g_failures == before ? "ok  " : "FAIL", t.name);
    }
    if (g_failures) {
        printf("test_emu_runtime: %d checks failed\n", g_failures);
        return 1;
    }
    printf("test_emu_runtime: all passed\n");
    return 0;
}
