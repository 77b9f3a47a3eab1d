/* runtime_streams.cc — the emulated CUDA runtime's streams, events, graph capture and graphs.
 *
 * Streams. Each stream has a FIFO of work items and, from its first item on, a worker thread that
 * runs them in order (TANDEM_EMU_SYNC=1: every item runs on the calling thread at once). Ordering
 * between streams is made of wait items: cudaStreamWaitEvent queues one that waits for the
 * event's latest record as of the call; the legacy default stream (0) follows CUDA's implicit
 * synchronization: an item on it first waits for the work queued so far on every blocking stream
 * of its device, and an item on a blocking stream first waits for the legacy stream's queued work
 * (streams made with cudaStreamNonBlocking do neither). An event record is an item that marks the
 * record done and takes a timestamp. The workers belong to the runtime: at process exit (an
 * atexit handler, which runs before LeakSanitizer's check) every worker runs what is queued and
 * ends, and is waited for; work pushed after that runs on the calling thread, as with
 * TANDEM_EMU_SYNC=1. A worker still running a kernel while exit tears the process down would
 * otherwise touch memory being destroyed, and hold its access scope where no scan finds it.
 *
 * Capture. While a stream captures, what is enqueued on it becomes a node of the capture instead
 * of running; an event recorded there and waited on by another stream brings that stream into the
 * capture (fork) and back (join), as CUDA's cross-stream capture. The nodes keep the order the
 * host made them in (one valid order of CUDA's dependency graph), and cudaGraphLaunch runs them
 * in that order on the launch stream. Calls that CUDA forbids during a capture (a synchronization,
 * cudaMalloc and other "potentially unsafe" calls under the capture's and the thread's mode, the
 * legacy stream while a blocking stream captures, a wait on an event from outside the capture)
 * invalidate it, with CUDA's error codes; cudaStreamEndCapture then returns
 * cudaErrorStreamCaptureInvalidated. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime_internal.h"

namespace tdm_emu {
namespace rt {

struct Capture;

struct Item {
    std::string what;
    std::function<void()> fn;
    bool scoped;     // inside an access_scope (device memory readable)
    bool internal;   // a wait or an event record: runs even after a fault
};

struct Stream : std::enable_shared_from_this<Stream> {
    enum Kind { USER, LEGACY, PER_THREAD };
    int device;
    unsigned flags;
    Kind kind;
    std::mutex mu;                 // guards the queue and the counts
    std::condition_variable cv;    // an item queued, an item done, the stream destroyed
    std::deque<Item> q;
    uint64_t queued = 0, done = 0;   // items pushed / run: position n is done when done >= n
    bool worker = false, dead = false;
    // the capture (guarded by g_cap_mu)
    Capture *cap = nullptr;
    uint64_t cap_nodes = 0;   // nodes this stream recorded in it
    bool unjoined = false;    // forked into it and not joined back since

    Stream(int d, unsigned f, Kind k) : device(d), flags(f), kind(k) {}
    // A stream the legacy stream synchronizes with (the legacy stream itself is not one).
    bool blocking() const {
        return kind == PER_THREAD || (kind == USER && !(flags & cudaStreamNonBlocking));
    }
};

struct Node {
    std::string what;
    std::function<void()> fn;
    bool scoped;
};
typedef std::shared_ptr<const std::vector<Node>> Nodes;

struct Capture {
    uint64_t id;
    int device;
    cudaStreamCaptureMode mode;
    const void *owner;   // the thread that began it
    StreamRef origin;
    std::vector<StreamRef> members;   // origin first
    std::vector<Node> nodes;
    bool invalidated = false;
};

struct Event {
    int device;
    unsigned flags;
    std::mutex mu;
    std::condition_variable cv;
    uint64_t recorded = 0, done = 0;   // records issued / the latest record done
    double ms = 0;                     // when the latest record was done
    // the last record, when it was in a capture (guarded by g_cap_mu)
    uint64_t cap_id = 0;
    Stream *cap_stream = nullptr;
    uint64_t cap_nodes = 0;
};

struct Graph {
    int device;
    Nodes nodes;
};

struct Device {
    std::mutex mu;   // the stream list; the order of items on blocking streams and the legacy one
    std::vector<StreamRef> streams;   // every stream with work that may still run
    StreamRef legacy;
};

// Process state: made once, never freed (atexit handlers after exit_workers may still use it).
static Device *g_devices = new Device[kMaxDevices];
static std::mutex g_reg_mu;   // the handle registries
static auto *g_streams = new std::unordered_map<const void *, StreamRef>;
static auto *g_events = new std::unordered_map<const void *, std::shared_ptr<Event>>;
static auto *g_graphs = new std::unordered_map<const void *, std::shared_ptr<Graph>>;
static auto *g_execs = new std::unordered_map<const void *, std::shared_ptr<Graph>>;
static std::mutex g_cap_mu;   // captures, and the capture state of streams and events
static auto *g_captures = new std::vector<Capture *>;
static uint64_t g_next_capture = 1;

static thread_local cudaStreamCaptureMode tls_mode = cudaStreamCaptureModeGlobal;
static thread_local char tls_token;   // its address names the calling thread
static const void *me() { return &tls_token; }

static double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// ---- running items ----

// in_scope: the caller holds an access_scope already. A fault while it runs is device's.
static void run_item(Item &it, bool in_scope, int device) {
    if (!it.internal && sticky_error(device)) return;   // after a fault there: nothing runs
    const int outer = tls_work_device;
    tls_work_device = device;
    struct restore {
        int v;
        ~restore() { tls_work_device = v; }
    } restore_{outer};
    if (it.scoped) {
        std::unique_ptr<access_scope> scope(in_scope ? nullptr : new access_scope);
        tls_work = it.what.c_str();
        it.fn();
        tls_work = nullptr;
        stuck_bit_apply(device);   // a stuck cell holds its value whatever the work wrote
    } else {
        it.fn();
    }
}

// ---- the workers' lifetime ----
// Live workers are counted; at exit, exit_workers() marks the process exiting (no new worker
// starts: push() runs items inline), wakes every worker so that it ends once its queue is empty,
// and waits until the count is zero (at most a minute). Only in the process that started them (a
// fork's child has none), and not for the calling thread when exit() is called from a worker's
// host function.
static std::mutex g_workers_mu;
static std::condition_variable g_workers_cv;
static int g_workers = 0;
static std::atomic<bool> g_exiting{false};
static pid_t g_workers_pid = 0;
static thread_local bool tls_is_worker = false;
static std::once_flag g_exit_once;

static void exit_workers() {
    {
        std::lock_guard<std::mutex> lk(g_workers_mu);
        g_exiting.store(true);
        if (g_workers_pid != getpid()) return;
    }
    for (int d = 0; d < kMaxDevices; d++) {   // wake idle workers: an exiting one ends when dry
        std::vector<StreamRef> all;
        {
            std::lock_guard<std::mutex> lk(g_devices[d].mu);
            all = g_devices[d].streams;
        }
        for (const StreamRef &s : all) {
            std::lock_guard<std::mutex> lk(s->mu);
            s->cv.notify_all();
        }
    }
    // Bounded: work that waits on the host (a host function blocked on a flag nobody will set
    // now) must not hang the exit; a kernel, a copy or a collective ends well within it.
    std::unique_lock<std::mutex> lk(g_workers_mu);
    const int self = tls_is_worker ? 1 : 0;
    if (!g_workers_cv.wait_for(lk, std::chrono::seconds(60), [&] { return g_workers == self; }))
        fprintf(stderr, "tandem emu: exit: %d stream worker%s still busy after 60 s; exiting "
                "without waiting for %s\n", g_workers - self, g_workers - self == 1 ? "" : "s",
                g_workers - self == 1 ? "it" : "them");
}

// A stream's worker. Back-to-back scoped items share one access scope (protecting the arenas
// again between them would cost time, not catch anything); it closes when the queue runs dry or
// before an unscoped item (a wait, a host function). It ends when its stream is destroyed or the
// process exits, once the queue is empty.
static void worker_run(const StreamRef &s) {
    pthread_setname_np(pthread_self(), s->kind == Stream::LEGACY ? "emu-legacy" : "emu-stream");
    set_current_device(s->device);
    std::unique_ptr<access_scope> scope;
    std::unique_lock<std::mutex> lk(s->mu);
    for (;;) {
        if (s->q.empty() && scope) {
            lk.unlock();
            scope.reset();
            lk.lock();
            continue;
        }
        s->cv.wait(lk, [&] { return !s->q.empty() || s->dead || g_exiting.load(); });
        if (s->q.empty()) break;   // destroyed (or the process exits) and drained
        Item it = std::move(s->q.front());
        s->q.pop_front();
        lk.unlock();
        if (!it.scoped)
            scope.reset();
        else if (!scope)
            scope.reset(new access_scope);
        run_item(it, scope != nullptr, s->device);
        it = Item();   // what the work held goes before the stream counts it done
        lk.lock();
        // The queue ran dry: device memory closes before the stream counts the item done, so a
        // host thread that waited for it finds the memory closed (a host read after a
        // synchronize was missed when the worker closed it later, and write-combined reads were
        // counted or not by the race: emu.runtime's write_combined failed 1 run in 3).
        if (s->q.empty()) scope.reset();
        s->done++;
        s->cv.notify_all();
    }
    s->worker = false;
    lk.unlock();
    Device &D = g_devices[s->device];
    std::lock_guard<std::mutex> dl(D.mu);
    for (size_t i = 0; i < D.streams.size(); i++)
        if (D.streams[i] == s) D.streams.erase(D.streams.begin() + (long)i--);
}

static void worker_main(StreamRef s) {
    tls_is_worker = true;
    worker_run(s);
    s.reset();
    std::lock_guard<std::mutex> lk(g_workers_mu);
    g_workers--;
    g_workers_cv.notify_all();
}

// Starts s's worker (s->mu held); false when the process is exiting (the caller runs the item).
static bool start_worker(const StreamRef &s) {
    std::call_once(g_exit_once, [] {
        g_workers_pid = getpid();
        atexit(exit_workers);
    });
    std::lock_guard<std::mutex> lk(g_workers_mu);
    if (g_exiting.load()) return false;
    std::thread(worker_main, s).detach();
    g_workers++;
    s->worker = true;
    return true;
}

// Queues an item (or, with TANDEM_EMU_SYNC=1 or once the process exits, runs it now). Returns
// the item's position.
static uint64_t push(const StreamRef &s, Item &&it) {
    std::unique_lock<std::mutex> lk(s->mu);
    if (!config().sync && (s->worker || start_worker(s))) {
        s->q.push_back(std::move(it));
        uint64_t pos = ++s->queued;
        s->cv.notify_all();
        return pos;
    }
    lk.unlock();
    run_item(it, false, s->device);
    lk.lock();
    s->done = ++s->queued;
    s->cv.notify_all();
    return s->queued;
}

// The position to wait for on s so that its queued work is done, or 0 when it is idle.
static uint64_t pending(const StreamRef &s) {
    std::lock_guard<std::mutex> lk(s->mu);
    return s->done < s->queued ? s->queued : 0;
}

static Item wait_item(const StreamRef &t, uint64_t pos) {
    return Item{"wait for another stream",
                [t, pos] {
                    std::unique_lock<std::mutex> lk(t->mu);
                    t->cv.wait(lk, [&] { return t->done >= pos; });
                },
                false, true};
}

// push() with the legacy stream's implicit synchronization.
static uint64_t submit(const StreamRef &s, Item &&it) {
    if (config().sync || !(s->kind == Stream::LEGACY || s->blocking()))
        return push(s, std::move(it));
    Device &D = g_devices[s->device];
    std::lock_guard<std::mutex> lk(D.mu);
    if (s->kind == Stream::LEGACY) {
        for (const StreamRef &t : D.streams)
            if (t != s && t->blocking())
                if (uint64_t pos = pending(t)) push(s, wait_item(t, pos));
    } else if (D.legacy) {
        if (uint64_t pos = pending(D.legacy)) push(s, wait_item(D.legacy, pos));
    }
    return push(s, std::move(it));
}

// Host waits (every API call that blocks the calling thread on device work: synchronizes,
// synchronizing copies and memsets, cudaFree's drain), counted for tdm_emu_host_waits.
static std::atomic<unsigned long long> g_host_waits{0};

void stream_wait(const StreamRef &s, uint64_t pos) {
    g_host_waits.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> lk(s->mu);
    s->cv.wait(lk, [&] { return s->done >= pos; });
}

void stream_drain(const StreamRef &s) {
    uint64_t pos;
    {
        std::lock_guard<std::mutex> lk(s->mu);
        pos = s->queued;
    }
    stream_wait(s, pos);
}

void device_drain(int device) {
    std::vector<StreamRef> all;
    {
        std::lock_guard<std::mutex> lk(g_devices[device].mu);
        all = g_devices[device].streams;
    }
    for (const StreamRef &s : all) stream_drain(s);
}

// ---- streams: handles ----

static StreamRef new_stream(int device, unsigned flags, Stream::Kind kind) {
    auto s = std::make_shared<Stream>(device, flags, kind);
    std::lock_guard<std::mutex> lk(g_devices[device].mu);
    g_devices[device].streams.push_back(s);
    return s;
}

// Marks s destroyed: its worker runs what is queued, then goes (with the stream).
static void retire(const StreamRef &s) {
    bool idle;
    {
        std::lock_guard<std::mutex> lk(s->mu);
        s->dead = true;
        idle = !s->worker;
        s->cv.notify_all();
    }
    if (idle) {
        Device &D = g_devices[s->device];
        std::lock_guard<std::mutex> lk(D.mu);
        for (size_t i = 0; i < D.streams.size(); i++)
            if (D.streams[i] == s) D.streams.erase(D.streams.begin() + (long)i--);
    }
}

// The calling thread's cudaStreamPerThread streams, one per device, retired with the thread.
struct PerThread {
    StreamRef s[kMaxDevices];
    ~PerThread() {
        for (auto &p : s)
            if (p) retire(p);
    }
};
static thread_local PerThread tls_per_thread;

StreamRef stream_of(cudaStream_t h) {
    int d = current_device();
    config();
    if (h == nullptr || h == cudaStreamLegacy) {
        Device &D = g_devices[d];
        {
            std::lock_guard<std::mutex> lk(D.mu);
            if (D.legacy) return D.legacy;
        }
        auto s = std::make_shared<Stream>(d, 0u, Stream::LEGACY);
        std::lock_guard<std::mutex> lk(D.mu);
        if (!D.legacy) {
            D.legacy = s;
            D.streams.push_back(s);
        }
        return D.legacy;
    }
    if (h == cudaStreamPerThread) {
        StreamRef &p = tls_per_thread.s[d];
        if (!p) p = new_stream(d, 0u, Stream::PER_THREAD);
        return p;
    }
    std::lock_guard<std::mutex> lk(g_reg_mu);
    auto it = g_streams->find(h);
    return it == g_streams->end() ? nullptr : it->second;
}

int stream_device_of(const StreamRef &s) { return s->device; }
bool stream_is_legacy(const StreamRef &s) { return s->kind == Stream::LEGACY; }

bool stream_capturing(const StreamRef &s) {
    std::lock_guard<std::mutex> lk(g_cap_mu);
    return s->cap != nullptr;
}

static std::shared_ptr<Event> event_of(cudaEvent_t h) {
    std::lock_guard<std::mutex> lk(g_reg_mu);
    auto it = g_events->find(h);
    return it == g_events->end() ? nullptr : it->second;
}

// ---- capture rules (g_cap_mu held unless said) ----

static void invalidate(Capture *c, const char *api, cudaError_t why) {
    if (c->invalidated) return;
    c->invalidated = true;
    say("%s during the graph capture of stream %p: %s; the capture is invalidated", api,
        (void *)c->origin.get(), cudaGetErrorName(why));
}

static Capture *capture_by_id(uint64_t id) {
    for (Capture *c : *g_captures)
        if (c->id == id) return c;
    return nullptr;
}

cudaError_t unsafe_call(const char *api) {
    if (tls_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
    std::lock_guard<std::mutex> lk(g_cap_mu);
    bool forbidden = false;
    for (Capture *c : *g_captures) {
        bool mine = c->owner == me() && c->mode != cudaStreamCaptureModeRelaxed;
        bool global = tls_mode == cudaStreamCaptureModeGlobal && c->owner != me() &&
                      c->mode == cudaStreamCaptureModeGlobal;
        if (mine || global) {
            invalidate(c, api, cudaErrorStreamCaptureUnsupported);
            forbidden = true;
        }
    }
    return forbidden ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

static cudaError_t legacy_use_locked(int device, const char *api) {
    bool found = false;
    for (Capture *c : *g_captures)
        for (const StreamRef &m : c->members)
            if (m->device == device && m->blocking()) {
                invalidate(c, api, cudaErrorStreamCaptureImplicit);
                found = true;
            }
    return found ? cudaErrorStreamCaptureImplicit : cudaSuccess;
}

cudaError_t legacy_use(int device, const char *api) {
    std::lock_guard<std::mutex> lk(g_cap_mu);
    return legacy_use_locked(device, api);
}

cudaError_t refuse_in_capture(const StreamRef &s, const char *api) {
    std::lock_guard<std::mutex> lk(g_cap_mu);
    if (!s->cap) return cudaSuccess;
    invalidate(s->cap, api, cudaErrorStreamCaptureUnsupported);
    return cudaErrorStreamCaptureUnsupported;
}

// A synchronization or query of s (cudaStreamSynchronize, cudaStreamQuery): not of a capturing
// stream, not of the legacy stream while a blocking stream captures, and a potentially unsafe call.
static cudaError_t check_sync_of(const StreamRef &s, const char *api) {
    if (cudaError_t e = refuse_in_capture(s, api)) return e;
    if (s->kind == Stream::LEGACY)
        if (cudaError_t e = legacy_use(s->device, api)) return e;
    return unsafe_call(api);
}

// ---- enqueue ----

cudaError_t stream_enqueue(const StreamRef &s, const char *what, std::function<void()> fn,
                           bool scoped, uint64_t *ticket) {
    if (ticket) *ticket = 0;
    {
        std::lock_guard<std::mutex> lk(g_cap_mu);
        if (s->kind == Stream::LEGACY)
            if (cudaError_t e = legacy_use_locked(s->device, what)) return e;
        if (Capture *c = s->cap) {
            if (c->invalidated) return cudaErrorStreamCaptureInvalidated;
            c->nodes.push_back(Node{what, std::move(fn), scoped});
            s->cap_nodes++;
            if (s != c->origin) s->unjoined = true;
            return cudaSuccess;
        }
    }
    uint64_t pos = submit(s, Item{what, std::move(fn), scoped, false});
    if (ticket) *ticket = pos;
    return cudaSuccess;
}

}  // namespace rt

// ---- emu.h ----

cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> fn) {
    rt::StreamRef s = rt::stream_of(stream);
    if (!s) return rt::fail(cudaErrorInvalidResourceHandle);
    if (cudaError_t e = rt::sticky_error(s->device)) return e;
    return rt::fail(rt::stream_enqueue(s, what, std::move(fn), true, nullptr));
}

int stream_device(cudaStream_t stream) {
    rt::StreamRef s = rt::stream_of(stream);
    return s ? s->device : -1;
}

}  // namespace tdm_emu

// ---- the CUDA runtime API: streams, events, capture, graphs ----

using namespace tdm_emu;
using namespace tdm_emu::rt;

#define STICKY()                                                    \
    do {                                                            \
        config();                                                   \
        if (cudaError_t e_ = sticky_error()) return e_;             \
    } while (0)

#define RESOLVE(var, handle)                                        \
    StreamRef var = stream_of(handle);                              \
    if (!var) return fail(cudaErrorInvalidResourceHandle)

extern "C" {

// ---- streams ----

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned int flags, int priority) {
    (void)priority;
    STICKY();
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking)) return fail(cudaErrorInvalidValue);
    StreamRef s = new_stream(current_device(), flags, Stream::USER);
    std::lock_guard<std::mutex> lk(g_reg_mu);
    (*g_streams)[s.get()] = s;
    *out = (cudaStream_t)s.get();
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags) {
    return cudaStreamCreateWithPriority(out, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *out) {
    return cudaStreamCreateWithPriority(out, cudaStreamDefault, 0);
}

// Returns at once; the stream's queued work still runs (CUDA's contract).
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    STICKY();
    if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
        return fail(cudaErrorInvalidResourceHandle);
    StreamRef s;
    {
        std::lock_guard<std::mutex> lk(g_reg_mu);
        auto it = g_streams->find(stream);
        if (it == g_streams->end()) return fail(cudaErrorInvalidResourceHandle);
        s = it->second;
        g_streams->erase(it);
    }
    {
        std::lock_guard<std::mutex> lk(g_cap_mu);
        if (s->cap) invalidate(s->cap, "cudaStreamDestroy", cudaErrorStreamCaptureInvalidated);
    }
    retire(s);
    return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int *flags) {
    STICKY();
    RESOLVE(s, stream);
    if (!flags) return fail(cudaErrorInvalidValue);
    *flags = s->flags;
    return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int *device) {
    STICKY();
    RESOLVE(s, stream);
    if (!device) return fail(cudaErrorInvalidValue);
    *device = s->device;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    STICKY();
    RESOLVE(s, stream);
    if (cudaError_t e = check_sync_of(s, "cudaStreamSynchronize")) return fail(e);
    stream_drain(s);
    return sticky_error(s->device);   // a fault in the work waited for
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    STICKY();
    RESOLVE(s, stream);
    if (cudaError_t e = check_sync_of(s, "cudaStreamQuery")) return fail(e);
    std::lock_guard<std::mutex> lk(s->mu);
    return s->done >= s->queued ? cudaSuccess : cudaErrorNotReady;   // not an error: not recorded
}

cudaError_t cudaDeviceSynchronize(void) {
    STICKY();
    int d = current_device();
    {
        // "a broader handle which encompasses an active stream capture": any capture on d
        std::lock_guard<std::mutex> lk(g_cap_mu);
        bool capturing = false;
        for (Capture *c : *g_captures)
            if (c->device == d) {
                invalidate(c, "cudaDeviceSynchronize", cudaErrorStreamCaptureUnsupported);
                capturing = true;
            }
        if (capturing) return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (cudaError_t e = unsafe_call("cudaDeviceSynchronize")) return fail(e);
    device_drain(d);
    return sticky_error();
}

// A host function in stream order (it must not touch device memory: no access scope).
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data) {
    STICKY();
    RESOLVE(s, stream);
    if (!fn) return fail(cudaErrorInvalidValue);
    return fail(stream_enqueue(s, "host function", [fn, data] { fn(data); }, false, nullptr));
}

// ---- events ----

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags) {
    STICKY();
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!out || (flags & ~known)) return fail(cudaErrorInvalidValue);
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return fail(cudaErrorInvalidValue);
    auto e = std::make_shared<Event>();
    e->device = current_device();
    e->flags = flags;
    std::lock_guard<std::mutex> lk(g_reg_mu);
    (*g_events)[e.get()] = e;
    *out = (cudaEvent_t)e.get();
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) {
    return cudaEventCreateWithFlags(out, cudaEventDefault);
}

// Returns at once; waits already queued on the event still see its record (CUDA's contract).
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    STICKY();
    std::lock_guard<std::mutex> lk(g_reg_mu);
    if (!g_events->erase(event)) return fail(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    STICKY();
    RESOLVE(s, stream);
    std::shared_ptr<Event> e = event_of(event);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (e->device != s->device) {
        say("cudaEventRecord: the event belongs to emulated cuda:%d, the stream to cuda:%d",
            e->device, s->device);
        return fail(cudaErrorInvalidResourceHandle);
    }
    {
        std::lock_guard<std::mutex> lk(g_cap_mu);
        if (s->kind == Stream::LEGACY)
            if (cudaError_t err = legacy_use_locked(s->device, "cudaEventRecord")) return fail(err);
        if (Capture *c = s->cap) {   // a record in a capture: a point other streams may fork from
            if (c->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
            e->cap_id = c->id;
            e->cap_stream = s.get();
            e->cap_nodes = s->cap_nodes;
            return cudaSuccess;
        }
        e->cap_id = 0;
    }
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lk(e->mu);
        seq = ++e->recorded;
    }
    submit(s, Item{"event record",
                   [e, seq] {
                       std::lock_guard<std::mutex> lk(e->mu);
                       if (seq > e->done) {
                           e->done = seq;
                           e->ms = now_ms();
                       }
                       e->cv.notify_all();
                   },
                   false, true});
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    STICKY();
    RESOLVE(s, stream);
    std::shared_ptr<Event> e = event_of(event);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (flags & ~(unsigned)cudaEventWaitExternal) return fail(cudaErrorInvalidValue);
    uint64_t target;
    {
        std::lock_guard<std::mutex> lk(g_cap_mu);
        if (s->kind == Stream::LEGACY)
            if (cudaError_t err = legacy_use_locked(s->device, "cudaStreamWaitEvent"))
                return fail(err);
        if (e->cap_id) {   // the event's last record is in a capture
            Capture *c = capture_by_id(e->cap_id);
            if (!c) return fail(cudaErrorCapturedEvent);   // that capture has ended
            if (c->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
            if (s->cap == c) {   // a join: the recording stream's work so far is waited for
                Stream *src = e->cap_stream;
                if (src != s.get() && src->cap == c && src->cap_nodes == e->cap_nodes)
                    src->unjoined = false;
                return cudaSuccess;
            }
            if (s->cap) {
                invalidate(s->cap, "cudaStreamWaitEvent", cudaErrorStreamCaptureMerge);
                invalidate(c, "cudaStreamWaitEvent", cudaErrorStreamCaptureMerge);
                return fail(cudaErrorStreamCaptureMerge);
            }
            if (s->kind == Stream::LEGACY) {
                invalidate(c, "cudaStreamWaitEvent", cudaErrorStreamCaptureUnsupported);
                return fail(cudaErrorStreamCaptureUnsupported);
            }
            // a fork: s joins the capture (its own queued work is not waited for by the graph)
            s->cap = c;
            s->cap_nodes = 0;
            s->unjoined = true;
            c->members.push_back(s);
            return cudaSuccess;
        }
        if (s->cap) {
            std::lock_guard<std::mutex> el(e->mu);
            if (e->recorded == 0 || (flags & cudaEventWaitExternal)) return cudaSuccess;
            // a dependency of captured work on work that was not captured
            invalidate(s->cap, "cudaStreamWaitEvent on an event recorded outside the capture",
                       cudaErrorStreamCaptureIsolation);
            return fail(cudaErrorStreamCaptureIsolation);
        }
    }
    {
        std::lock_guard<std::mutex> lk(e->mu);
        target = e->recorded;
        if (target == 0 || e->done >= target) return cudaSuccess;   // nothing to wait for
    }
    submit(s, Item{"wait for an event",
                   [e, target] {
                       std::unique_lock<std::mutex> lk(e->mu);
                       e->cv.wait(lk, [&] { return e->done >= target; });
                   },
                   false, true});
    return cudaSuccess;
}

// An event whose last record is in a capture cannot be queried or waited for by the host.
static cudaError_t check_host_wait(const std::shared_ptr<Event> &e, const char *api) {
    {
        std::lock_guard<std::mutex> lk(g_cap_mu);
        if (e->cap_id) {
            if (Capture *c = capture_by_id(e->cap_id))
                invalidate(c, api, cudaErrorCapturedEvent);
            return cudaErrorCapturedEvent;
        }
    }
    return unsafe_call(api);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    STICKY();
    std::shared_ptr<Event> e = event_of(event);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (cudaError_t err = check_host_wait(e, "cudaEventQuery")) return fail(err);
    std::lock_guard<std::mutex> lk(e->mu);
    return e->done >= e->recorded ? cudaSuccess : cudaErrorNotReady;   // not recorded as an error
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    STICKY();
    std::shared_ptr<Event> e = event_of(event);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (cudaError_t err = check_host_wait(e, "cudaEventSynchronize")) return fail(err);
    rt::g_host_waits.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> lk(e->mu);
    uint64_t target = e->recorded;
    e->cv.wait(lk, [&] { return e->done >= target; });
    lk.unlock();
    return sticky_error(e->device);
}

// Milliseconds between the two records (the emulator's time: no measure of a GPU's).
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    STICKY();
    std::shared_ptr<Event> a = event_of(start), b = event_of(end);
    if (!ms) return fail(cudaErrorInvalidValue);
    if (!a || !b) return fail(cudaErrorInvalidResourceHandle);
    if ((a->flags | b->flags) & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard<std::mutex> lk(g_cap_mu);
        if (a->cap_id || b->cap_id) return fail(cudaErrorCapturedEvent);
    }
    std::scoped_lock lk(a->mu, b->mu);
    if (a->recorded == 0 || b->recorded == 0) return fail(cudaErrorInvalidResourceHandle);
    if (a->done < a->recorded || b->done < b->recorded) return fail(cudaErrorNotReady);
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}

// ---- capture ----

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    STICKY();
    RESOLVE(s, stream);
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue);
    if (s->kind == Stream::LEGACY) {
        say("cudaStreamBeginCapture: the legacy default stream cannot be captured");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    std::lock_guard<std::mutex> lk(g_cap_mu);
    if (s->cap) return fail(cudaErrorIllegalState);
    Capture *c = new Capture;
    c->id = g_next_capture++;
    c->device = s->device;
    c->mode = mode;
    c->owner = me();
    c->origin = s;
    c->members.push_back(s);
    s->cap = c;
    s->cap_nodes = 0;
    s->unjoined = false;
    g_captures->push_back(c);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    STICKY();
    RESOLVE(s, stream);
    if (!graph) return fail(cudaErrorInvalidValue);
    *graph = nullptr;
    Capture *c;
    cudaError_t err = cudaSuccess;
    {
        std::lock_guard<std::mutex> lk(g_cap_mu);
        c = s->cap;
        if (!c) return fail(cudaErrorIllegalState);
        if (c->mode != cudaStreamCaptureModeRelaxed && c->owner != me())
            return fail(cudaErrorStreamCaptureWrongThread);
        if (c->origin != s) {
            invalidate(c, "cudaStreamEndCapture on a stream that did not begin the capture",
                       cudaErrorStreamCaptureUnmatched);
            return fail(cudaErrorStreamCaptureUnmatched);
        }
        for (const StreamRef &m : c->members) {
            if (m != s && m->unjoined && !c->invalidated && !err) {
                say("cudaStreamEndCapture: stream %p was forked into the capture of stream %p "
                    "and not joined back",
                    (void *)m.get(), (void *)s.get());
                err = cudaErrorStreamCaptureUnjoined;
            }
            m->cap = nullptr;
        }
        for (size_t i = 0; i < g_captures->size(); i++)
            if ((*g_captures)[i] == c) g_captures->erase(g_captures->begin() + (long)i);
    }
    if (c->invalidated) err = cudaErrorStreamCaptureInvalidated;
    if (!err) {
        auto g = std::make_shared<Graph>();
        g->device = c->device;
        g->nodes = std::make_shared<const std::vector<Node>>(std::move(c->nodes));
        std::lock_guard<std::mutex> lk(g_reg_mu);
        (*g_graphs)[g.get()] = g;
        *graph = (cudaGraph_t)g.get();
    }
    delete c;
    return fail(err);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status) {
    STICKY();
    RESOLVE(s, stream);
    if (!status) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(g_cap_mu);
    *status = cudaStreamCaptureStatusNone;
    if (s->kind == Stream::LEGACY) {
        for (Capture *c : *g_captures)
            for (const StreamRef &m : c->members)
                if (m->device == s->device && m->blocking())
                    return fail(cudaErrorStreamCaptureImplicit);
        return cudaSuccess;
    }
    if (s->cap)
        *status = s->cap->invalidated ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

// The status and id; the graph in construction and its dependencies are not exposed.
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *n_deps) {
    STICKY();
    RESOLVE(s, stream);
    if (!status) return fail(cudaErrorInvalidValue);
    if (graph) *graph = nullptr;
    if (deps) *deps = nullptr;
    if (edges) *edges = nullptr;
    if (n_deps) *n_deps = 0;
    std::lock_guard<std::mutex> lk(g_cap_mu);
    *status = !s->cap ? cudaStreamCaptureStatusNone
              : s->cap->invalidated ? cudaStreamCaptureStatusInvalidated
                                    : cudaStreamCaptureStatusActive;
    if (id && s->cap) *id = s->cap->id;
    return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode) {
    if (!mode || (*mode != cudaStreamCaptureModeGlobal &&
                  *mode != cudaStreamCaptureModeThreadLocal &&
                  *mode != cudaStreamCaptureModeRelaxed))
        return fail(cudaErrorInvalidValue);
    std::swap(*mode, tls_mode);
    return cudaSuccess;
}

// ---- graphs ----

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags) {
    (void)flags;
    STICKY();
    if (!exec) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(g_reg_mu);
    auto it = g_graphs->find(graph);
    if (it == g_graphs->end()) return fail(cudaErrorInvalidValue);
    auto x = std::make_shared<Graph>(*it->second);   // the nodes are shared: they do not change
    (*g_execs)[x.get()] = x;
    *exec = (cudaGraphExec_t)x.get();
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph,
                                          unsigned long long flags) {
    return cudaGraphInstantiate(exec, graph, flags);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    STICKY();
    std::lock_guard<std::mutex> lk(g_reg_mu);
    if (!g_graphs->erase(graph)) return fail(cudaErrorInvalidValue);
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    STICKY();
    std::lock_guard<std::mutex> lk(g_reg_mu);
    if (!g_execs->erase(exec)) return fail(cudaErrorInvalidValue);
    return cudaSuccess;
}

// Every node, in the order captured, on `stream` (or into its capture).
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    STICKY();
    RESOLVE(s, stream);
    std::shared_ptr<Graph> x;
    {
        std::lock_guard<std::mutex> lk(g_reg_mu);
        auto it = g_execs->find(exec);
        if (it == g_execs->end()) return fail(cudaErrorInvalidResourceHandle);
        x = it->second;
    }
    if (stream_capturing(s)) {   // a graph launched into a capture: its nodes join it
        for (const Node &n : *x->nodes)
            if (cudaError_t e = stream_enqueue(s, n.what.c_str(), n.fn, n.scoped, nullptr))
                return fail(e);
        return cudaSuccess;
    }
    Nodes nodes = x->nodes;
    std::string what = "graph launch (" + std::to_string(nodes->size()) + " nodes)";
    const int device = stream_device_of(s);
    return fail(stream_enqueue(
        s, what.c_str(),
        [nodes, device] {
            for (const Node &n : *nodes) {
                if (sticky_error()) return;
                if (n.scoped) {
                    access_scope scope;
                    tls_work = n.what.c_str();
                    n.fn();
                    tls_work = nullptr;
                    stuck_bit_apply(device);
                } else {
                    n.fn();
                }
            }
        },
        false, nullptr));
}

// The emulator's own query for tests (not a CUDA API): how many host waits so far (above), so a
// test can prove that a piece of work never blocks the host (docs/EMULATION.md).
unsigned long long tdm_emu_host_waits(void) {
    return rt::g_host_waits.load(std::memory_order_relaxed);
}

}  // extern "C"
