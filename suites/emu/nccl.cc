/* nccl.cc — the emulated NCCL: communicators whose ranks are host threads of this process, one
 * emulated device each, and collectives that run as work items on the ranks' streams. It
 * implements nccl.h's prototypes (NCCL 2.28's header) for what tandem uses and what goes with it:
 * versions and errors, unique ids, ncclCommInitRank / InitRankConfig / InitAll, Count / CuDevice /
 * UserRank, ncclAllReduce, ncclBroadcast (and ncclBcast), ncclReduce, ncclAllGather,
 * ncclReduceScatter, ncclGroupStart / End, ncclCommGetAsyncError, ncclCommFinalize / Destroy /
 * Abort. Semantics follow NCCL's user guide (docs.nvidia.com/deeplearning/nccl/user-guide:
 * api/comms.html, usage/groups.html, usage/communicators.html, usage/streams.html):
 *
 *   - ncclGetUniqueId makes an id unique in this process; ncclCommInitRank blocks until the
 *     `nranks` ranks given the same id have joined, each with the calling thread's current device
 *     (cudaSetDevice before the call, as NCCL requires). Two ranks on one device are refused
 *     ("duplicate GPU", ncclInvalidUsage), as NCCL does. An id makes one communicator.
 *   - A collective is checked when it is called (communicator, datatype, op, root, the stream
 *     belongs to the communicator's device, every buffer is device memory of that device:
 *     ncclInvalidArgument with a message otherwise), then enqueued on the rank's stream
 *     (tdm_emu::enqueue). When a rank's work item runs, it takes the communicator's next
 *     collective number (counted when the work runs, so each replay of a captured graph meets
 *     again) and waits for the other ranks' work items of that number; the last to arrive checks
 *     that all agree (collective, count, datatype, op, root), reduces in rank order (rank 0, 1,
 *     ...: the result is identical on every rank and from run to run) and writes every rank's
 *     recvbuff, then all return. Waiting longer than TANDEM_EMU_NCCL_TIMEOUT_MS (default 60000)
 *     is a fault (tdm_emu::fault: "cudaErrorLaunchTimeout", naming the collective, the ranks
 *     that arrived and the ones missing) instead of the hang a GPU would show; a mismatch
 *     between ranks is a fault too. Both also set the communicators' async error.
 *   - Reductions: sum, prod, max, min, avg over int8, uint8, int32, uint32, int64, uint64,
 *     float16, bfloat16, float32, float64 (fp8 is refused), computed as NCCL's ring kernels do
 *     (src/device: reduce_kernel.h, all_reduce.h; enqueue.cc's hostToDevRedOp): in the element
 *     type, each step rounded to it (float16 and bfloat16 add and multiply as __hadd / __hmul do,
 *     not in float32 once), in ring order. Ring = rank order; an AllReduce splits the buffer into
 *     nranks contiguous chunks of ceil(count / nranks) elements, and chunk c is reduced by a chain
 *     that starts at rank c+1 and ends at rank c ((x[c+1] + x[c+2]) + ... + x[c], indices mod
 *     nranks); ReduceScatter the same with rank c's segment as chunk c; Reduce one chain from
 *     root+1 to root. avg is ncclDevPreMulSum for floats: each rank's input is first multiplied
 *     by the scalar float(1.0 / nranks) (converted to the element type; 1.0 / nranks for float64)
 *     and rounded, then summed; for integers ncclDevSumPostDiv: the sum divided by nranks,
 *     truncated toward zero. Integer sums and products wrap. So a float avg over 3, 5, 6, 7 ...
 *     ranks is not sum / nranks rounded once: a caller checks it with an error bound
 *     (docs/EMULATION.md), as on a GPU, where NCCL's channels and chunk sizes choose other chains.
 *     In place when sendbuff == recvbuff (for AllGather and ReduceScatter, at the rank's slot, as
 *     NCCL defines it): results go through a scratch copy.
 *   - TANDEM_EMU_NCCL_DELAY_MS=N (default 0) holds every rank's collective N ms before it takes
 *     part, as a slow or late peer would: work a program queues after the collective without
 *     ordering it behind it then runs first, every time (a missing stream dependency shows).
 *   - cudaFree and cudaMalloc on a device while a collective of that device is queued or
 *     waiting for its peers are a fault (runtime.cc asks collectives_pending): cudaFree
 *     synchronizes the device behind a collective that may wait for a rank that is itself
 *     blocked, and NCCL's docs (usage/communicators.html, "Using multiple NCCL communicators
 *     concurrently") warn that such CUDA calls can deadlock with NCCL kernels.
 *   - Groups (ncclGroupStart / End, nestable): calls inside a group are checked when made and
 *     launched at the outermost ncclGroupEnd, in call order; an error inside the group drops the
 *     whole group and ncclGroupEnd returns it. One thread may drive several ranks in a group (the
 *     inits of all ranks, or one collective per rank). ncclCommInitRank cannot share a group
 *     with collectives (ncclInvalidUsage), as the docs say. With TANDEM_EMU_SYNC=1 the runtime runs
 *     work items on the calling thread: a work item of the group that ncclGroupEnd is launching
 *     then only arrives, and ncclGroupEnd waits for its collective after launching the rest, so
 *     a group from one thread completes instead of deadlocking.
 *   - ncclCommFinalize and ncclCommDestroy (which finalizes unless that was done) are intra-node
 *     collectives per the docs: each first waits for its rank's queued collectives, then for
 *     every other rank of the communicator to finalize, destroy or abort. One thread destroying
 *     ranks' communicators one after another hangs on real NCCL; here the first such call
 *     returns ncclInvalidUsage after the timeout with a message saying so (later ones of that
 *     communicator do not wait again). Group the calls (ncclGroupStart / End) or call them from
 *     each rank's thread. ncclCommAbort is local and immediate: queued work of the rank is
 *     skipped, and ranks waiting for it in a collective fail with ncclRemoteError.
 *   - ncclCommGetAsyncError reports a collective's failure after the call returned; once set,
 *     new collectives on that communicator return it. ncclGetLastError returns the last message.
 *
 * Not emulated: ncclSend / Recv, AlltoAll, Gather, Scatter, CommSplit / Shrink / Grow, user
 * reduction ops, buffer registration, non-blocking communicators (a config with blocking = 0
 * is accepted and behaves as blocking), NCCL's own debug output (messages go to stderr as
 * "tandem emu: nccl: ..."). A communicator's collectives are numbered in the order its work
 * items run: one stream per communicator (as tandem uses it) keeps that the call order. */
#include <nccl.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "emu.h"

namespace {

// ---- settings, errors ----------------------------------------------------------------------

// How long a rank waits for the others (collectives, init, finalize) before reporting.
int timeout_ms() {
    static const int ms = [] {
        return (int)tdm_emu::env_number("TANDEM_EMU_NCCL_TIMEOUT_MS", 1, 1u << 30, 60000);
    }();
    return ms;
}

// TANDEM_EMU_NCCL_DELAY_MS: how long each rank's collective waits before it takes part.
int delay_ms() {
    static const int ms =
        (int)tdm_emu::env_number("TANDEM_EMU_NCCL_DELAY_MS", 0, 600000, 0);
    return ms;
}

std::chrono::steady_clock::time_point deadline() {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms());
}

std::mutex g_err_mu;
std::string g_last_error;   // ncclGetLastError

std::string vformat(const char *fmt, va_list ap) {
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

void note(const std::string &msg) {
    fprintf(stderr, "tandem emu: nccl: %s\n", msg.c_str());
    std::lock_guard<std::mutex> g(g_err_mu);
    g_last_error = msg;
}

// A host-side error: printed, kept for ncclGetLastError, returned.
ncclResult_t report(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t report(ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = vformat(fmt, ap);
    va_end(ap);
    note(msg);
    return r;
}

// ---- datatypes and reductions --------------------------------------------------------------

size_t dtype_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *dtype_name(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: return "ncclInt8";
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    case ncclFloat8e4m3: return "ncclFloat8e4m3";
    case ncclFloat8e5m2: return "ncclFloat8e5m2";
    default: return "(invalid datatype)";
    }
}

const char *op_name(ncclRedOp_t op) {
    switch (op) {
    case ncclSum: return "ncclSum";
    case ncclProd: return "ncclProd";
    case ncclMax: return "ncclMax";
    case ncclMin: return "ncclMin";
    case ncclAvg: return "ncclAvg";
    default: return "(invalid op)";
    }
}

float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
    if (exp == 0) {   // zero or subnormal: mant * 2^-24
        float f = (float)mant * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    if (exp == 31) u = sign | 0x7f800000u | (mant << 13);   // inf, nan
    else u = sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t float_to_half(float f) {   // round to nearest even
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) return sign | 0x7e00;   // nan
    if (u >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds to inf
    if (u < 0x38800000u) {                       // below 2^-14: a subnormal (or zero)
        float a;
        memcpy(&a, &u, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f);   // the default mode: nearest even
    }
    return sign | (uint16_t)((u + 0xfffu + ((u >> 13) & 1u) - 0x38000000u) >> 13);
}

float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t float_to_bf16(float f) {   // round to nearest even
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);   // quiet nan
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// An element type as the reduction sees it: the stored type, the arithmetic type A, `round`
// (an A rounded to the stored type, as NCCL's kernels round each operation's result: float16 and
// bfloat16 go through float, where the sum or product of two of them is exact or rounds to the
// same value, then to nearest even once) and `inv` (ncclAvg's pre-multiplier for nranks).
template <class T>
struct Native {
    using A = T;
    static A load(const void *p, size_t i) { return ((const T *)p)[i]; }
    static void store(void *p, size_t i, A v) { ((T *)p)[i] = v; }
    static A round(A v) { return v; }
    static A inv(int nranks) { return (A)(1.0 / nranks); }   // float(1.0/n), 1.0/n (ints: unused)
};
struct Half {
    using A = float;
    static A load(const void *p, size_t i) { return half_to_float(((const uint16_t *)p)[i]); }
    static void store(void *p, size_t i, A v) { ((uint16_t *)p)[i] = float_to_half(v); }
    static A round(A v) { return half_to_float(float_to_half(v)); }
    static A inv(int nranks) { return round((float)(1.0 / nranks)); }   // __float2half(float(..))
};
struct BHalf {
    using A = float;
    static A load(const void *p, size_t i) { return bf16_to_float(((const uint16_t *)p)[i]); }
    static void store(void *p, size_t i, A v) { ((uint16_t *)p)[i] = float_to_bf16(v); }
    static A round(A v) { return bf16_to_float(float_to_bf16(v)); }
    static A inv(int nranks) { return round((float)(1.0 / nranks)); }
};

template <class A> A add(A a, A b) {
    if constexpr (std::is_integral<A>::value) {   // wraps, as on the GPU
        using U = typename std::make_unsigned<A>::type;
        return (A)(U)((U)a + (U)b);
    } else {
        return a + b;
    }
}
template <class A> A mul(A a, A b) {
    if constexpr (std::is_integral<A>::value) {
        using U = typename std::make_unsigned<A>::type;
        using W = typename std::conditional<(sizeof(U) < sizeof(unsigned)), unsigned, U>::type;
        return (A)(U)((W)(U)a * (W)(U)b);
    } else {
        return a * b;
    }
}

// Which chain reduces element i: the ring from rank `first` (when >= 0), else from rank c+1
// for element i of chunk c = i / chunk (nccl.cc's header comment).
struct Ring {
    size_t chunk;
    int first;
    size_t start(size_t i, size_t nranks) const {
        return first >= 0 ? (size_t)first : (i / chunk + 1) % nranks;
    }
};

// out[i] = post(pre(x[s]) op pre(x[s+1]) op ... op pre(x[s-1])), s = ring.start(i), ranks mod
// nranks, folded left and rounded to the element type at each step.
template <class E, class F, class Pre, class Post>
void fold(const std::vector<const void *> &src, void *out, size_t n, const Ring &ring, F f,
          Pre pre, Post post) {
    const size_t nr = src.size();
    for (size_t i = 0; i < n; i++) {
        size_t r = ring.start(i, nr);
        typename E::A acc = pre(E::load(src[r], i));
        for (size_t k = 1; k < nr; k++) acc = E::round(f(acc, pre(E::load(src[(r + k) % nr], i))));
        E::store(out, i, post(acc));
    }
}

template <class E>
void reduce_as(const std::vector<const void *> &src, void *out, size_t n, ncclRedOp_t op,
               const Ring &ring) {
    using A = typename E::A;
    auto same = [](A a) { return a; };
    auto max = [](A a, A b) { return b > a ? b : a; };
    auto min = [](A a, A b) { return b < a ? b : a; };
    switch (op) {
    case ncclSum: fold<E>(src, out, n, ring, add<A>, same, same); break;
    case ncclProd: fold<E>(src, out, n, ring, mul<A>, same, same); break;
    case ncclMax: fold<E>(src, out, n, ring, max, same, same); break;
    case ncclMin: fold<E>(src, out, n, ring, min, same, same); break;
    case ncclAvg: {
        const int nr = (int)src.size();
        if constexpr (std::is_integral<A>::value) {   // ncclDevSumPostDiv
            fold<E>(src, out, n, ring, add<A>, same, [nr](A a) { return (A)(a / (A)nr); });
        } else {   // ncclDevPreMulSum: x * float(1/n), rounded, then the sum
            const A s = E::inv(nr);
            fold<E>(src, out, n, ring, add<A>, [s](A x) { return E::round(x * s); }, same);
        }
        break;
    }
    default: break;
    }
}

void reduce(ncclDataType_t t, const std::vector<const void *> &src, void *out, size_t n,
            ncclRedOp_t op, const Ring &ring) {
    switch (t) {
    case ncclInt8: reduce_as<Native<int8_t>>(src, out, n, op, ring); break;
    case ncclUint8: reduce_as<Native<uint8_t>>(src, out, n, op, ring); break;
    case ncclInt32: reduce_as<Native<int32_t>>(src, out, n, op, ring); break;
    case ncclUint32: reduce_as<Native<uint32_t>>(src, out, n, op, ring); break;
    case ncclInt64: reduce_as<Native<int64_t>>(src, out, n, op, ring); break;
    case ncclUint64: reduce_as<Native<uint64_t>>(src, out, n, op, ring); break;
    case ncclFloat16: reduce_as<Half>(src, out, n, op, ring); break;
    case ncclBfloat16: reduce_as<BHalf>(src, out, n, op, ring); break;
    case ncclFloat32: reduce_as<Native<float>>(src, out, n, op, ring); break;
    case ncclFloat64: reduce_as<Native<double>>(src, out, n, op, ring); break;
    default: break;
    }
}

// ---- collectives, cliques, communicators ---------------------------------------------------

enum Kind { ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER };

const char *kind_name(int k) {
    static const char *names[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
                                  "ncclReduceScatter"};
    return names[k];
}

// One rank's part of a collective, as called. count: the call's count (sendcount for AllGather,
// recvcount for ReduceScatter).
struct Desc {
    int kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dtype;
    ncclRedOp_t op;   // reductions only
    int root;         // Broadcast and Reduce only
};

// Elements of rank `rank`'s send and receive buffers (0: the buffer is not used there).
size_t send_elems(const Desc &d, int rank, int nranks) {
    switch (d.kind) {
    case BROADCAST: return rank == d.root ? d.count : 0;
    case REDUCE_SCATTER: return d.count * (size_t)nranks;
    default: return d.count;
    }
}
size_t recv_elems(const Desc &d, int rank, int nranks) {
    switch (d.kind) {
    case REDUCE: return rank == d.root ? d.count : 0;
    case ALL_GATHER: return d.count * (size_t)nranks;
    default: return d.count;
    }
}

// A collective in flight: the k-th one each rank's work items run on the communicator.
struct Coll {
    std::vector<Desc> d;        // by rank, once arrived
    std::vector<char> arrived;
    int narrived = 0, nleft = 0;   // nleft: ranks done with it (it is dropped when all are)
    bool done = false, failed = false;
    ncclResult_t error = ncclSuccess;
};

// The ranks made from one unique id.
struct Clique {
    std::string key;
    unsigned long long serial;   // the id's number, for messages
    int nranks;
    std::mutex mu;
    std::condition_variable cv;
    // init
    std::vector<char> joined;
    std::vector<int> devices;
    int njoined = 0;
    bool init_failed = false;
    // collectives by number
    std::map<uint64_t, Coll> colls;
    // teardown
    std::vector<char> finalizing, gone;   // gone: destroyed or aborted
    bool finalize_failed = false;
};

}   // namespace

// The communicator (nccl.h declares `struct ncclComm` opaque). Handles are looked up in a
// registry, so a destroyed or made-up handle is an error rather than a crash; work items hold
// a reference, so a communicator aborted with work queued stays valid for that work.
struct ncclComm {
    enum State { INITIALIZING, READY, INIT_FAILED, FINALIZED, ABORTED };
    std::string key;   // the unique id's bytes
    unsigned long long serial;
    std::shared_ptr<Clique> clique;   // set once joined
    int rank, nranks, device;
    std::atomic<int> state{INITIALIZING};
    std::atomic<int> async_error{ncclSuccess};
    uint64_t next_seq = 0;   // the next collective's number (under clique->mu)
    int pending = 0;         // enqueued collectives not yet run, graphs aside (under clique->mu)
};

namespace {

using CommRef = std::shared_ptr<ncclComm>;

std::mutex g_mu;   // the registries below; taken before a clique's mutex, never after
std::unordered_map<ncclComm *, CommRef> g_comms;          // live handles
std::map<std::string, std::shared_ptr<Clique>> g_joining;   // ids whose ranks are joining
std::set<std::string> g_used;   // ids whose clique formed (or failed to): one communicator each
std::atomic<unsigned long long> g_id_serial{0};

const char kIdMagic[16] = "tdm-emu-nccl-id";
struct IdBody {
    char magic[16];
    unsigned long long serial, pid, nonce;
};

CommRef lookup(ncclComm_t comm) {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_comms.find(comm);
    return it == g_comms.end() ? nullptr : it->second;
}

void set_async_error(ncclComm &c, ncclResult_t r) {
    int expected = ncclSuccess;
    c.async_error.compare_exchange_strong(expected, (int)r);
}

std::string rank_list(const std::vector<char> &flags, bool which) {
    std::string s;
    for (size_t r = 0; r < flags.size(); r++)
        if ((flags[r] != 0) == which) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s.empty() ? "none" : s;
}

// Sets the calling thread's device for the scope (NCCL works on the communicator's device and
// gives the caller's back): stream 0 then means the communicator device's default stream.
struct DeviceGuard {
    int prev, dev;
    explicit DeviceGuard(int d) : prev(tdm_emu::current_device()), dev(d) {
        if (prev != dev) (void)cudaSetDevice(dev);
    }
    ~DeviceGuard() {
        if (prev != dev) (void)cudaSetDevice(prev);
    }
};

// ---- running a collective (inside a work item) --------------------------------------------

// The last rank to arrive: checks the buffers still are device memory, computes the result once
// into scratch and writes it to every rank's recvbuff. Runs inside the work item's access scope.
bool compute(const Clique &k, const std::vector<Desc> &d) {
    const std::vector<int> &device_of = k.devices;   // fixed once the clique formed
    int n = k.nranks;
    const Desc &d0 = d[0];
    size_t es = dtype_size(d0.dtype);
    for (int r = 0; r < n; r++) {
        char what[96];
        size_t ns = send_elems(d[r], r, n), nr = recv_elems(d[r], r, n);
        snprintf(what, sizeof what, "%s sendbuff (rank %d)", kind_name(d0.kind), r);
        if (ns && !tdm_emu::check_device_range(d[r].send, ns * es, device_of[r], what))
            return false;
        snprintf(what, sizeof what, "%s recvbuff (rank %d)", kind_name(d0.kind), r);
        if (nr && !tdm_emu::check_device_range(d[r].recv, nr * es, device_of[r], what))
            return false;
    }
    std::vector<const void *> src;
    std::vector<unsigned char> out;
    size_t count = d0.count, bytes = count * es;
    switch (d0.kind) {
    case ALL_REDUCE:
    case REDUCE:
        for (int r = 0; r < n; r++) src.push_back(d[r].send);
        out.resize(bytes);
        if (d0.kind == ALL_REDUCE)   // n chunks, chunk c from rank c+1
            reduce(d0.dtype, src, out.data(), count, d0.op,
                   Ring{count ? (count + (size_t)n - 1) / (size_t)n : 1, -1});
        else   // one chain, root+1 to root
            reduce(d0.dtype, src, out.data(), count, d0.op, Ring{1, (d0.root + 1) % n});
        for (int r = 0; r < n; r++)
            if (d0.kind == ALL_REDUCE || r == d0.root) memcpy(d[r].recv, out.data(), bytes);
        break;
    case BROADCAST:
        out.assign((const unsigned char *)d[d0.root].send,
                   (const unsigned char *)d[d0.root].send + bytes);
        for (int r = 0; r < n; r++) memcpy(d[r].recv, out.data(), bytes);
        break;
    case ALL_GATHER:
        out.resize(bytes * n);
        for (int r = 0; r < n; r++) memcpy(out.data() + r * bytes, d[r].send, bytes);
        for (int r = 0; r < n; r++) memcpy(d[r].recv, out.data(), bytes * n);
        break;
    case REDUCE_SCATTER:
        for (int r = 0; r < n; r++) src.push_back(d[r].send);
        out.resize(bytes * n);
        reduce(d0.dtype, src, out.data(), count * n, d0.op, Ring{count ? count : 1, -1});
        for (int r = 0; r < n; r++) memcpy(d[r].recv, out.data() + r * bytes, bytes);
        break;
    }
    return true;
}

// "ncclReduce(count 16, ncclFloat32, ncclSum, root 0)"
std::string describe(const Desc &d) {
    std::string s = format("%s(count %zu, %s", kind_name(d.kind), d.count, dtype_name(d.dtype));
    if (d.kind == ALL_REDUCE || d.kind == REDUCE || d.kind == REDUCE_SCATTER)
        s += std::string(", ") + op_name(d.op);
    if (d.kind == BROADCAST || d.kind == REDUCE) s += format(", root %d", d.root);
    return s + ")";
}

std::string coll_name(const ncclComm &c, const Desc &d, uint64_t seq) {
    return format("%s (collective #%llu of communicator id #%llu, %d ranks)", kind_name(d.kind),
                  (unsigned long long)seq, c.serial, c.nranks);
}

// Waits (holding lk) until the collective is done or failed; a peer that left without arriving,
// or the timeout, fails it. A fault is reported before the others wake, so that each rank's
// stream reports it from then on.
void wait_coll(std::unique_lock<std::mutex> &lk, Clique &k, Coll &c, uint64_t seq,
               const ncclComm &me) {
    auto until = deadline();
    for (;;) {
        if (c.done || c.failed) return;
        for (int q = 0; q < k.nranks; q++)
            if (!c.arrived[q] && k.gone[q]) {
                note(format("%s: rank %d's communicator was aborted or destroyed before it took "
                            "part; rank %d's result is not written",
                            coll_name(me, c.d[me.rank], seq).c_str(), q, me.rank));
                c.failed = true;
                c.error = ncclRemoteError;
                k.cv.notify_all();
                return;
            }
        if (k.cv.wait_until(lk, until) == std::cv_status::timeout && !c.done && !c.failed) {
            tdm_emu::fault(cudaErrorLaunchTimeout, "nccl: %s timed out: rank %d (cuda:%d) waited "
                           "%d ms (TANDEM_EMU_NCCL_TIMEOUT_MS); arrived: ranks %s; missing: ranks "
                           "%s (never called it, or their stream is stuck before it); on a GPU "
                           "this hangs", coll_name(me, c.d[me.rank], seq).c_str(), me.rank,
                           me.device, timeout_ms(), rank_list(c.arrived, true).c_str(),
                           rank_list(c.arrived, false).c_str());
            c.failed = true;
            c.error = ncclInvalidUsage;
            k.cv.notify_all();
            return;
        }
    }
}

// A rank is done with collective `seq`: it takes the failure as its async error; the last one
// drops the entry.
void leave(Clique &k, uint64_t seq, Coll &c, ncclComm &me) {
    if (c.failed) set_async_error(me, c.error);
    if (++c.nleft == k.nranks) k.colls.erase(seq);
}

struct Deferred {
    CommRef comm;
    uint64_t seq;
};
// Set while ncclGroupEnd enqueues the group's collectives: a work item that runs on that thread
// (inline: TANDEM_EMU_SYNC=1) arrives without waiting, and ncclGroupEnd waits for it afterwards.
thread_local std::vector<Deferred> *tl_deferred = nullptr;

void run_coll(const CommRef &comm, const Desc &d) {
    ncclComm &me = *comm;
    int state = me.state.load();
    if (state == ncclComm::ABORTED) return;   // abort cancels what was queued
    if (state != ncclComm::READY) {           // a graph replayed after ncclCommDestroy
        tdm_emu::fault(cudaErrorLaunchFailure, "nccl: %s on rank %d: its communicator was "
                       "finalized or destroyed (a graph replayed after ncclCommDestroy?)",
                       kind_name(d.kind), me.rank);
        return;
    }
    if (delay_ms() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms()));
    Clique &k = *me.clique;
    std::unique_lock<std::mutex> lk(k.mu);
    uint64_t seq = me.next_seq++;
    Coll &c = k.colls[seq];
    if (c.d.empty()) {
        c.d.resize(k.nranks);
        c.arrived.assign(k.nranks, 0);
    }
    if (!c.failed) {
        int q = 0;   // the first rank that arrived: all must agree with it
        while (q < k.nranks && !c.arrived[q]) q++;
        if (q < k.nranks) {
            const Desc &a = c.d[q];
            if (a.kind != d.kind || a.count != d.count || a.dtype != d.dtype ||
                ((d.kind == ALL_REDUCE || d.kind == REDUCE || d.kind == REDUCE_SCATTER) &&
                 a.op != d.op) ||
                ((d.kind == BROADCAST || d.kind == REDUCE) && a.root != d.root)) {
                tdm_emu::fault(cudaErrorLaunchFailure, "nccl: collective #%llu of communicator "
                               "id #%llu: the ranks disagree (mismatch): rank %d called %s but "
                               "rank %d called %s", (unsigned long long)seq, me.serial, q,
                               describe(a).c_str(), me.rank, describe(d).c_str());
                c.failed = true;
                c.error = ncclInvalidUsage;
                k.cv.notify_all();
            }
        }
    }
    if (!c.failed) {
        c.d[me.rank] = d;
        c.arrived[me.rank] = 1;
        if (++c.narrived == k.nranks) {   // the last to arrive does the work, unlocked
            lk.unlock();
            bool ok = compute(k, c.d);
            lk.lock();
            if (ok) c.done = true;
            else c.failed = true, c.error = ncclInvalidArgument;
            k.cv.notify_all();
        } else if (tl_deferred) {
            tl_deferred->push_back({comm, seq});   // ncclGroupEnd waits, then leaves
            return;
        } else {
            wait_coll(lk, k, c, seq, me);
        }
    }
    leave(k, seq, c, me);
}

// ---- groups --------------------------------------------------------------------------------

struct Op {
    enum Type { INIT, COLL, FINALIZE, DESTROY } type;
    CommRef comm;
    Desc desc;
    cudaStream_t stream;
};

struct Group {
    int depth = 0;
    std::vector<Op> ops;
    ncclResult_t err = ncclSuccess;   // the first error inside the group
};
thread_local Group tl_group;

ncclResult_t group_error(ncclResult_t r) {
    if (tl_group.depth > 0 && tl_group.err == ncclSuccess) tl_group.err = r;
    return r;
}

bool group_has(Op::Type t) {
    for (const Op &op : tl_group.ops)
        if (op.type == t) return true;
    return false;
}

// Init: joins the clique of the comm's id (does not wait).
ncclResult_t join(const CommRef &comm) {
    ncclComm &c = *comm;
    std::lock_guard<std::mutex> g(g_mu);
    if (g_used.count(c.key))
        return report(ncclInvalidUsage, "ncclCommInitRank (rank %d of %d): unique id #%llu "
                      "already made a communicator (or failed to): an id is for one "
                      "communicator", c.rank, c.nranks, c.serial);
    std::shared_ptr<Clique> &k = g_joining[c.key];
    if (!k) {
        k = std::make_shared<Clique>();
        k->key = c.key;
        k->serial = c.serial;
        k->nranks = c.nranks;
        k->joined.assign(c.nranks, 0);
        k->devices.assign(c.nranks, -1);
        k->finalizing.assign(c.nranks, 0);
        k->gone.assign(c.nranks, 0);
    }
    std::lock_guard<std::mutex> gk(k->mu);
    std::string err;
    ncclResult_t r = ncclInvalidUsage;
    if (k->init_failed) {
        err = format("ncclCommInitRank (rank %d): the communicator of unique id #%llu failed to "
                     "form (see above)", c.rank, c.serial);
    } else if (k->nranks != c.nranks) {
        err = format("ncclCommInitRank (rank %d): nranks %d, but another rank of unique id #%llu "
                     "gave %d", c.rank, c.nranks, c.serial, k->nranks);
        r = ncclInvalidArgument;
    } else if (k->joined[c.rank]) {
        err = format("ncclCommInitRank: rank %d of unique id #%llu joined twice", c.rank,
                     c.serial);
    } else {
        for (int q = 0; q < k->nranks; q++)
            if (k->joined[q] && k->devices[q] == c.device)
                err = format("ncclCommInitRank: duplicate GPU detected: rank %d and rank %d both "
                             "on cuda:%d (one device per rank; cudaSetDevice before the call)",
                             c.rank, q, c.device);
    }
    if (!err.empty()) {   // the clique cannot form: the ranks waiting for it fail now
        k->init_failed = true;
        k->cv.notify_all();
        return report(r, "%s", err.c_str());
    }
    k->joined[c.rank] = 1;
    k->devices[c.rank] = c.device;
    c.clique = k;
    if (++k->njoined == k->nranks) {
        g_used.insert(c.key);
        k->cv.notify_all();
        g_joining.erase(c.key);   // releases this map's reference (c.clique holds one)
    }
    return ncclSuccess;
}

ncclResult_t wait_joined(const CommRef &comm) {
    ncclComm &c = *comm;
    Clique &k = *c.clique;
    std::unique_lock<std::mutex> lk(k.mu);
    auto until = deadline();
    while (k.njoined < k.nranks && !k.init_failed)
        if (k.cv.wait_until(lk, until) == std::cv_status::timeout && k.njoined < k.nranks &&
            !k.init_failed) {
            k.init_failed = true;
            k.cv.notify_all();
            std::string joined = rank_list(k.joined, true), missing = rank_list(k.joined, false);
            lk.unlock();
            {
                std::lock_guard<std::mutex> g(g_mu);   // the id is spent
                g_used.insert(c.key);
                auto it = g_joining.find(c.key);
                if (it != g_joining.end() && it->second.get() == &k) g_joining.erase(it);
            }
            return report(ncclInvalidUsage, "ncclCommInitRank (rank %d of %d, unique id #%llu) "
                          "timed out after %d ms (TANDEM_EMU_NCCL_TIMEOUT_MS): joined: ranks %s; "
                          "missing: ranks %s. It is collective: every rank calls it, each from "
                          "its own thread or inside one ncclGroupStart/End",
                          c.rank, c.nranks, c.serial, timeout_ms(), joined.c_str(),
                          missing.c_str());
        }
    if (k.init_failed)
        return report(ncclInvalidUsage, "ncclCommInitRank (rank %d of %d, unique id #%llu): the "
                      "communicator failed to form (see above)", c.rank, c.nranks, c.serial);
    return ncclSuccess;
}

// Enqueues one collective on its rank's stream.
ncclResult_t launch(const Op &op) {
    CommRef comm = op.comm;
    DeviceGuard dg(comm->device);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(op.stream, &st) != cudaSuccess) st = cudaStreamCaptureStatusNone;
    bool captured = st == cudaStreamCaptureStatusActive;   // run once per graph launch instead
    Clique &k = *comm->clique;
    if (!captured) {
        std::lock_guard<std::mutex> g(k.mu);
        comm->pending++;
    }
    Desc d = op.desc;
    auto done = [comm, captured] {
        if (captured) return;
        Clique &kk = *comm->clique;
        std::lock_guard<std::mutex> g(kk.mu);
        if (--comm->pending == 0) kk.cv.notify_all();
    };
    cudaError_t e = tdm_emu::enqueue(op.stream, kind_name(d.kind), [comm, d, done] {
        run_coll(comm, d);
        done();
    });
    if (e != cudaSuccess) {
        done();
        return report(ncclUnhandledCudaError, "%s (rank %d): the stream refused the work: %s",
                      kind_name(d.kind), comm->rank, cudaGetErrorString(e));
    }
    return ncclSuccess;
}

bool all_final(const Clique &k) {
    for (int q = 0; q < k.nranks; q++)
        if (!k.finalizing[q] && !k.gone[q]) return false;
    return true;
}

// ncclCommFinalize of several communicators at once (one, outside a group): flush each rank's
// queued collectives, then meet the other ranks of each communicator.
ncclResult_t finalize_all(const std::vector<CommRef> &comms, const char *what) {
    ncclResult_t res = ncclSuccess;
    auto ready = [](const CommRef &c) { return c->state.load() == ncclComm::READY; };
    for (const CommRef &c : comms) {   // flush
        if (!ready(c)) continue;
        Clique &k = *c->clique;
        std::unique_lock<std::mutex> lk(k.mu);
        auto until = deadline() + std::chrono::milliseconds(timeout_ms());
        while (c->pending > 0)
            if (k.cv.wait_until(lk, until) == std::cv_status::timeout && c->pending > 0) {
                res = report(ncclInvalidUsage, "%s (rank %d of communicator id #%llu): %d "
                             "collective(s) queued on the rank's stream did not run in %d ms",
                             what, c->rank, c->serial, c->pending, 2 * timeout_ms());
                break;
            }
    }
    for (const CommRef &c : comms) {   // arrive
        if (!ready(c)) continue;
        Clique &k = *c->clique;
        std::lock_guard<std::mutex> g(k.mu);
        k.finalizing[c->rank] = 1;
        k.cv.notify_all();
    }
    for (const CommRef &c : comms) {   // wait for the node's other ranks
        if (!ready(c)) continue;
        Clique &k = *c->clique;
        std::unique_lock<std::mutex> lk(k.mu);
        auto until = deadline();
        while (!all_final(k) && !k.finalize_failed)
            if (k.cv.wait_until(lk, until) == std::cv_status::timeout && !all_final(k) &&
                !k.finalize_failed) {
                k.finalize_failed = true;
                k.cv.notify_all();
                std::vector<char> arrived(k.nranks);
                for (int q = 0; q < k.nranks; q++) arrived[q] = k.finalizing[q] || k.gone[q];
                res = report(ncclInvalidUsage, "%s (rank %d of %d, communicator id #%llu) is an "
                             "intra-node collective (NCCL docs: every rank of the node calls "
                             "it): waited %d ms for ranks %s to call ncclCommDestroy, "
                             "ncclCommFinalize or ncclCommAbort; on real NCCL this hangs. Call it "
                             "from each rank's thread, or group the calls (ncclGroupStart/End) "
                             "when one thread drives several ranks",
                             what, c->rank, c->nranks, c->serial, timeout_ms(),
                             rank_list(arrived, false).c_str());
            }
        if (!all_final(k) && k.finalize_failed && res == ncclSuccess)
            res = report(ncclInvalidUsage, "%s (rank %d of communicator id #%llu): an earlier "
                         "ncclCommDestroy/Finalize of this communicator gave up waiting for the "
                         "other ranks (see above); not waiting again", what, c->rank, c->serial);
        c->state = ncclComm::FINALIZED;
    }
    return res;
}

// Frees a communicator locally: the handle goes, the clique learns the rank is gone.
void release(const CommRef &c, int final_state) {
    {
        std::lock_guard<std::mutex> g(g_mu);
        g_comms.erase(c.get());
    }
    if (c->clique) {
        Clique &k = *c->clique;
        std::lock_guard<std::mutex> g(k.mu);
        c->state = final_state;
        k.gone[c->rank] = 1;
        k.cv.notify_all();
    } else {
        c->state = final_state;
    }
}

// Runs a group's operations (a call outside a group is a group of one): inits join, then wait;
// collectives are enqueued in call order; finalizes and destroys meet.
ncclResult_t run_ops(std::vector<Op> &ops) {
    ncclResult_t res = ncclSuccess;
    auto keep = [&res](ncclResult_t r) {
        if (res == ncclSuccess) res = r;
    };
    std::vector<CommRef> joined;
    for (Op &op : ops)
        if (op.type == Op::INIT) {
            ncclResult_t r = join(op.comm);
            if (r == ncclSuccess) joined.push_back(op.comm);
            else op.comm->state = ncclComm::INIT_FAILED, keep(r);
        }
    for (const CommRef &c : joined) {
        ncclResult_t r = wait_joined(c);
        c->state = r == ncclSuccess ? ncclComm::READY : ncclComm::INIT_FAILED;
        keep(r);
    }

    std::vector<Deferred> deferred;
    tl_deferred = &deferred;
    for (Op &op : ops)
        if (op.type == Op::COLL) keep(launch(op));
    tl_deferred = nullptr;
    for (Deferred &df : deferred) {   // work items that ran inline on this thread
        ncclComm &me = *df.comm;
        Clique &k = *me.clique;
        std::unique_lock<std::mutex> lk(k.mu);
        Coll &c = k.colls[df.seq];
        wait_coll(lk, k, c, df.seq, me);
        leave(k, df.seq, c, me);
    }

    std::vector<CommRef> fin, destroy;
    for (Op &op : ops) {
        if (op.type == Op::DESTROY) destroy.push_back(op.comm);
        if ((op.type == Op::FINALIZE || op.type == Op::DESTROY) &&
            op.comm->state.load() == ncclComm::READY)
            fin.push_back(op.comm);
    }
    if (!fin.empty())
        keep(finalize_all(fin, destroy.empty() ? "ncclCommFinalize" : "ncclCommDestroy"));
    for (const CommRef &c : destroy) release(c, ncclComm::FINALIZED);
    return res;
}

// Adds an operation to the calling thread's group, or runs it now outside one.
ncclResult_t submit(Op op) {
    if (tl_group.depth > 0) {
        tl_group.ops.push_back(std::move(op));
        return ncclSuccess;
    }
    std::vector<Op> ops{std::move(op)};
    return run_ops(ops);
}

// The checks a collective call makes before it is queued.
ncclResult_t collective(const Desc &d, ncclComm_t handle, cudaStream_t stream) {
    const char *name = kind_name(d.kind);
    CommRef comm = lookup(handle);
    if (!comm)
        return group_error(report(ncclInvalidArgument, "%s: communicator %p is not a live one "
                                  "(destroyed, aborted, or never made)", name, (void *)handle));
    ncclComm &c = *comm;
    int state = c.state.load();
    if (state == ncclComm::INITIALIZING)
        return group_error(report(ncclInvalidUsage, "%s (rank %d): the communicator's "
                                  "ncclCommInitRank has not completed (it cannot share a group "
                                  "with collectives)", name, c.rank));
    if (state != ncclComm::READY)
        return group_error(report(ncclInvalidUsage, "%s (rank %d): the communicator %s", name,
                                  c.rank, state == ncclComm::INIT_FAILED ? "failed to initialize"
                                                                         : "is finalized"));
    if (c.async_error.load() != ncclSuccess)
        return group_error(report((ncclResult_t)c.async_error.load(), "%s (rank %d): the "
                                  "communicator has an asynchronous error (%s): abort it", name,
                                  c.rank, ncclGetErrorString((ncclResult_t)c.async_error.load())));
    size_t es = dtype_size(d.dtype);
    if (es == 0)
        return group_error(report(ncclInvalidArgument, "%s: invalid datatype %d", name,
                                  (int)d.dtype));
    if (d.dtype == ncclFloat8e4m3 || d.dtype == ncclFloat8e5m2)
        return group_error(report(ncclInvalidArgument, "%s: %s is not emulated", name,
                                  dtype_name(d.dtype)));
    bool reduces = d.kind == ALL_REDUCE || d.kind == REDUCE || d.kind == REDUCE_SCATTER;
    if (reduces && ((int)d.op < 0 || (int)d.op >= (int)ncclNumOps))
        return group_error(report(ncclInvalidArgument, "%s: invalid or user-defined reduction "
                                  "op %d (not emulated)", name, (int)d.op));
    if ((d.kind == BROADCAST || d.kind == REDUCE) && (d.root < 0 || d.root >= c.nranks))
        return group_error(report(ncclInvalidArgument, "%s: root %d out of range (%d ranks)",
                                  name, d.root, c.nranks));
    if (d.count > SIZE_MAX / es / (size_t)c.nranks)
        return group_error(report(ncclInvalidArgument, "%s: count %zu overflows", name,
                                  d.count));
    {
        DeviceGuard dg(c.device);
        int sd = tdm_emu::stream_device(stream);
        if (sd < 0)
            return group_error(report(ncclInvalidArgument, "%s (rank %d): stream %p is not a "
                                      "live stream", name, c.rank, (void *)stream));
        if (sd != c.device)
            return group_error(report(ncclInvalidArgument, "%s (rank %d): the stream belongs to "
                                      "device cuda:%d, but the communicator's device is cuda:%d",
                                      name, c.rank, sd, c.device));
    }
    if (d.count == 0) return ncclSuccess;   // nothing moves, no rank waits (as NCCL skips it)
    char what[64];
    size_t ns = send_elems(d, c.rank, c.nranks), nr = recv_elems(d, c.rank, c.nranks);
    snprintf(what, sizeof what, "%s sendbuff", name);
    if (ns && !tdm_emu::check_device_range(d.send, ns * es, c.device, what))
        return group_error(report(ncclInvalidArgument, "%s (rank %d): sendbuff %p is not %zu "
                                  "bytes of cuda:%d's memory", name, c.rank, d.send, ns * es,
                                  c.device));
    snprintf(what, sizeof what, "%s recvbuff", name);
    if (nr && !tdm_emu::check_device_range(d.recv, nr * es, c.device, what))
        return group_error(report(ncclInvalidArgument, "%s (rank %d): recvbuff %p is not %zu "
                                  "bytes of cuda:%d's memory", name, c.rank, d.recv, nr * es,
                                  c.device));
    if (tl_group.depth > 0 && group_has(Op::INIT))
        return group_error(report(ncclInvalidUsage, "%s: ncclCommInitRank and collectives "
                                  "cannot share a group", name));
    return submit(Op{Op::COLL, comm, d, stream});
}

ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId &id, int rank) {
    if (!out) return group_error(report(ncclInvalidArgument, "ncclCommInitRank: comm is NULL"));
    *out = nullptr;
    IdBody body;
    memcpy(&body, id.internal, sizeof body);
    if (memcmp(body.magic, kIdMagic, sizeof kIdMagic) != 0)
        return group_error(report(ncclInvalidArgument, "ncclCommInitRank (rank %d): the unique "
                                  "id was not made by ncclGetUniqueId (not yet written?)", rank));
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return group_error(report(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank,
                                  nranks));
    int device = tdm_emu::current_device();
    if (device < 0 || device >= tdm_emu::device_count())
        return group_error(report(ncclInvalidArgument, "ncclCommInitRank (rank %d): the current "
                                  "device %d is not a device", rank, device));
    if (tl_group.depth > 0 && group_has(Op::COLL))
        return group_error(report(ncclInvalidUsage, "ncclCommInitRank: ncclCommInitRank and "
                                  "collectives cannot share a group"));
    CommRef comm = std::make_shared<ncclComm>();
    comm->key.assign(id.internal, NCCL_UNIQUE_ID_BYTES);
    comm->serial = body.serial;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->device = device;
    {
        std::lock_guard<std::mutex> g(g_mu);
        g_comms[comm.get()] = comm;
    }
    *out = comm.get();
    bool grouped = tl_group.depth > 0;
    ncclResult_t r = submit(Op{Op::INIT, comm, Desc{}, nullptr});
    if (r != ncclSuccess && !grouped) {   // a failed blocking init leaves no communicator
        release(comm, ncclComm::INIT_FAILED);
        *out = nullptr;
    }
    return r;
}

}   // namespace

// ---- what the runtime asks ------------------------------------------------------------------

int tdm_emu::collectives_pending(int device, unsigned long long *id, int *rank) {
    std::lock_guard<std::mutex> g(g_mu);
    int n = 0;
    for (const auto &it : g_comms) {
        const ncclComm &c = *it.second;
        if (c.device != device || !c.clique) continue;
        std::lock_guard<std::mutex> gk(c.clique->mu);
        if (c.pending > 0 && n == 0) {
            if (id) *id = c.serial;
            if (rank) *rank = c.rank;
        }
        n += c.pending;
    }
    return n;
}

// ---- the API -------------------------------------------------------------------------------

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return report(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (emulated NCCL: see stderr)";
    case ncclSystemError: return "unhandled system error (emulated NCCL: see stderr)";
    case ncclInternalError: return "internal error (emulated NCCL)";
    case ncclInvalidArgument: return "invalid argument (emulated NCCL: see stderr)";
    case ncclInvalidUsage: return "invalid usage (emulated NCCL: see stderr)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t) {
    static thread_local std::string copy;
    std::lock_guard<std::mutex> g(g_err_mu);
    copy = g_last_error;
    return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (!id) return report(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    static std::mutex mu;
    static std::mt19937_64 rng{std::random_device{}()};
    IdBody body;
    memcpy(body.magic, kIdMagic, sizeof kIdMagic);
    body.serial = ++g_id_serial;
    body.pid = (unsigned long long)getpid();
    {
        std::lock_guard<std::mutex> g(mu);
        body.nonce = rng();
    }
    memset(id->internal, 0, sizeof id->internal);
    memcpy(id->internal, &body, sizeof body);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
    return init_rank(comm, nranks, commId, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config) {
    if (config && (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking)))
        return group_error(report(ncclInvalidArgument, "ncclCommInitRankConfig: the config was "
                                  "not initialized with NCCL_CONFIG_INITIALIZER"));
    return init_rank(comm, nranks, commId, rank);   // non-blocking behaves as blocking
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    if (!comms || ndev < 1)
        return report(ncclInvalidArgument, "ncclCommInitAll: comms %p, ndev %d", (void *)comms,
                      ndev);
    if (tl_group.depth > 0)
        return report(ncclInvalidUsage, "ncclCommInitAll inside a group");
    for (int i = 0; i < ndev; i++) {
        int dev = devlist ? devlist[i] : i;
        if (dev < 0 || dev >= tdm_emu::device_count())
            return report(ncclInvalidArgument, "ncclCommInitAll: device %d of devlist is not a "
                          "device (%d)", dev, tdm_emu::device_count());
        comms[i] = nullptr;
    }
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return r;
    int prev = tdm_emu::current_device();
    ncclGroupStart();
    for (int i = 0; i < ndev; i++) {
        (void)cudaSetDevice(devlist ? devlist[i] : i);
        ncclCommInitRank(&comms[i], ndev, id, i);
    }
    r = ncclGroupEnd();
    (void)cudaSetDevice(prev);
    if (r != ncclSuccess)
        for (int i = 0; i < ndev; i++)
            if (comms[i]) {
                ncclCommAbort(comms[i]);
                comms[i] = nullptr;
            }
    return r;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    CommRef c = lookup(comm);
    if (!c || !count) return report(ncclInvalidArgument, "ncclCommCount: invalid argument");
    *count = c->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    CommRef c = lookup(comm);
    if (!c || !device) return report(ncclInvalidArgument, "ncclCommCuDevice: invalid argument");
    *device = c->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    CommRef c = lookup(comm);
    if (!c || !rank) return report(ncclInvalidArgument, "ncclCommUserRank: invalid argument");
    *rank = c->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    CommRef c = lookup(comm);
    if (!c || !asyncError)
        return report(ncclInvalidArgument, "ncclCommGetAsyncError: invalid argument");
    *asyncError = (ncclResult_t)c->async_error.load();
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    return collective(Desc{ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0}, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    return collective(Desc{BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root}, comm,
                      stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
    return collective(Desc{REDUCE, sendbuff, recvbuff, count, datatype, op, root}, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    return collective(Desc{ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0}, comm,
                      stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
    return collective(Desc{REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0}, comm,
                      stream);
}

ncclResult_t ncclGroupStart() {
    tl_group.depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    Group &g = tl_group;
    if (g.depth == 0) return report(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--g.depth > 0) return ncclSuccess;
    std::vector<Op> ops;
    ops.swap(g.ops);
    ncclResult_t err = g.err;
    g.err = ncclSuccess;
    if (err != ncclSuccess) {   // the whole group is dropped
        for (Op &op : ops)
            if (op.type == Op::INIT) op.comm->state = ncclComm::INIT_FAILED;
        return err;
    }
    return run_ops(ops);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    CommRef c = lookup(comm);
    if (!c) return group_error(report(ncclInvalidArgument, "ncclCommFinalize: not a live "
                                      "communicator"));
    if (c->state.load() == ncclComm::FINALIZED)
        return group_error(report(ncclInvalidUsage, "ncclCommFinalize: already finalized"));
    return submit(Op{Op::FINALIZE, c, Desc{}, nullptr});
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;   // as NCCL: destroying NULL is a no-op
    CommRef c = lookup(comm);
    if (!c) return group_error(report(ncclInvalidArgument, "ncclCommDestroy: %p is not a live "
                                      "communicator (destroyed twice?)", (void *)comm));
    return submit(Op{Op::DESTROY, c, Desc{}, nullptr});
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    CommRef c = lookup(comm);
    if (!c) return report(ncclInvalidArgument, "ncclCommAbort: %p is not a live communicator",
                          (void *)comm);
    release(c, ncclComm::ABORTED);
    return ncclSuccess;
}

}   // extern "C"
