/* exec.cc — kernel execution on the emulated device (emu.h): a grid's blocks spread over a pool
 * of OS threads, the threads of a block as fibers of the one OS thread that runs the block, a
 * scheduler that runs them one at a time between barriers in the order TANDEM_EMU_ORDER says, and
 * the checks a GPU makes at launch.
 *
 * Fibers. Each OS thread keeps a pool of fibers (256 KiB stacks, mmap'd with a guard page,
 * reused across blocks and launches) and switches between them with a hand-written x86-64
 * context switch (the callee-saved registers only: a block of 256 threads with 10 barriers took
 * 0.1 ms with it, 1.7 ms with ucontext, whose switch makes a signal-mask syscall); ucontext is
 * the fallback elsewhere. A fiber whose CUDA thread ends takes the
 * next thread that has not started yet, on the same stack and without a switch, so a block whose
 * threads never reach a barrier costs two switches, not two per thread. Under AddressSanitizer
 * every switch is announced (__sanitizer_start/finish_switch_fiber) so ASan knows the stack.
 *
 * Scheduling. A round runs every thread that can run (not started, or released from a barrier)
 * once, in the round's order, each until it reaches a barrier or ends. Between rounds the
 * barriers that are complete release their threads:
 *   __syncthreads (and _count/_and/_or): every thread of the block waits at the same call;
 *   a warp operation: every lane of its mask waits at the same kind of operation with the same
 *     mask (PTX's rule: "the same qualifiers and the same membermask"; lanes the block does not
 *     have, in a last partial warp, are not waited for);
 *   __activemask: every live lane of the warp waits somewhere; it returns the lanes at that call.
 * A round in which nothing can run and nothing completes is a deadlock on a GPU (or undefined
 * behaviour: a thread that exited is never at a barrier): it is reported through fault() with
 * the kernel, block, thread and what each side waits at, and the block is abandoned (its fibers
 * reset, the grid's remaining blocks not run). So is a warp operation whose mask leaves out its
 * own lane, and a shuffle width that is not a power of 2 in [1, 32].
 *
 * Orders: forward runs thread 0, 1, 2.. each round; reverse the other way; random a fresh shuffle
 * each round, seeded per block from the seed and the launch count (so a seed reproduces a run
 * with one OS thread); warp runs only the first warp that can run, forward, and after each round
 * resolves the barriers at once, so a warp whose warp operation completed goes on before any
 * later warp runs: warps as far apart as the __syncthreads allow (the other orders advance the
 * warps in step at every warp operation, which hides a buffer refilled while another warp's
 * warp-collective reads of it are still to come).
 * Code that forgets a __syncthreads reads what other threads have not
 * written yet in forward or random order, as on a GPU where warps run in any order. */
#include "cuda_emu.h"
#include "runtime_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define TDM_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TDM_EMU_ASAN 1
#endif
#endif
#ifndef TDM_EMU_ASAN
#define TDM_EMU_ASAN 0
#endif
#if TDM_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The hand-written switch on x86-64; ucontext elsewhere, or with -DTDM_EMU_UCONTEXT (to test it).
#if defined(__x86_64__) && !defined(TDM_EMU_UCONTEXT)
#define TDM_EMU_ASM_SWITCH 1
#else
#define TDM_EMU_ASM_SWITCH 0
#include <ucontext.h>
#endif

namespace tdm_emu {

__thread thread_coords here;

// ---- switches (environment, read once) ---------------------------------------------------------

static const size_t STACK_BYTES = 256 << 10;

struct config {
    int threads;             // OS threads that run blocks (the caller included)
    std::atomic<int> order;  // thread_order
    std::atomic<unsigned long long> seed;
};

static config &cfg() {
    static config *c = [] {
        config *c = new config;
        int cpus = (int)std::thread::hardware_concurrency();
        cpus = cpus > 0 ? (cpus < 256 ? cpus : 256) : 1;
        c->threads = (int)env_number("TANDEM_EMU_THREADS", 1, 256, (unsigned long long)cpus);
        thread_order o = order_forward;
        unsigned long long seed = 0;
        const char *s = getenv("TANDEM_EMU_ORDER");
        if (s && *s && strcmp(s, "forward") != 0) {
            if (strcmp(s, "reverse") == 0) {
                o = order_reverse;
            } else if (strcmp(s, "warp") == 0) {
                o = order_warp;
            } else if (strncmp(s, "random", 6) == 0 &&
                       (s[6] == 0 || (s[6] == ':' && parse_number(s + 7, 0, ULLONG_MAX, &seed)))) {
                o = order_random;
                if (s[6] != ':') {
                    // No seed given: a fresh one per run, said once so that a failure can be rerun.
                    seed =
                        (unsigned long long)time(NULL) * 2654435761u ^ (unsigned long long)getpid();
                    fprintf(stderr, "tandem emu: TANDEM_EMU_ORDER=random:%llu\n", seed);
                }
            } else {
                fprintf(stderr,
                        "tandem emu: ignoring TANDEM_EMU_ORDER=%s: expected forward, reverse, "
                        "random, random:SEED (SEED a whole number) or warp; using forward\n",
                        s);
            }
        }
        c->order.store(o);
        c->seed.store(seed);
        return c;
    }();
    return *c;
}

void set_thread_order(thread_order order, unsigned long long seed) {
    cfg().order.store(order);
    cfg().seed.store(seed);
}
thread_order get_thread_order() {
    return (thread_order)cfg().order.load();
}

static uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// ---- fibers
// --------------------------------------------------------------------------------------

struct fiber {
    void *sp = nullptr;        // saved stack pointer while switched out
    char *map = nullptr;       // the mapping: guard page, then the stack
    char *stack_lo = nullptr;  // lowest usable byte of the stack
    size_t stack_size = 0;
    void *asan_fake = nullptr;  // ASan's fake stack while switched out
    int thread = -1;            // CUDA thread it runs; -1: idle
#if !TDM_EMU_ASM_SWITCH
    ucontext_t uc;
#endif
};

extern "C" __attribute__((visibility("hidden"))) void tdm_emu_fiber_main(fiber *f);

#if TDM_EMU_ASM_SWITCH
// void tdm_emu_switch(void **save_sp, void *next_sp): saves the callee-saved registers on the
// current stack, stores its pointer in *save_sp, and resumes the stack at next_sp the same way.
// The MXCSR and x87 control words are not switched (a third of the cost): every fiber of an OS
// thread shares them, and kernels do not change rounding modes. tdm_emu_fiber_entry is where a
// fresh fiber's first switch "returns" to: it calls tdm_emu_fiber_main(r12), which never returns.
extern "C" void tdm_emu_switch(void **save_sp, void *next_sp);
extern "C" void tdm_emu_fiber_entry();
__asm__(R"(
    .text
    .p2align 4
    .globl tdm_emu_switch
    .hidden tdm_emu_switch
    .type tdm_emu_switch, @function
tdm_emu_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size tdm_emu_switch, .-tdm_emu_switch

    .p2align 4
    .globl tdm_emu_fiber_entry
    .hidden tdm_emu_fiber_entry
    .type tdm_emu_fiber_entry, @function
tdm_emu_fiber_entry:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    call tdm_emu_fiber_main
    ud2
    .cfi_endproc
    .size tdm_emu_fiber_entry, .-tdm_emu_fiber_entry
)");

// A fresh fiber's stack: what tdm_emu_switch pops (r15..r12 = f, rbx, rbp = 0 to end
// frame-pointer walks), then tdm_emu_fiber_entry as the return address, placed so the stack is
// 16-byte aligned after that `ret`, as the call in the entry needs.
static void fiber_reset_context(fiber *f) {
    uint64_t *top = (uint64_t *)((uintptr_t)(f->stack_lo + f->stack_size) & ~(uintptr_t)15);
    uint64_t *sp = top - 7;
    sp[0] = 0;                       // r15
    sp[1] = 0;                       // r14
    sp[2] = 0;                       // r13
    sp[3] = (uint64_t)(uintptr_t)f;  // r12: the entry's argument
    sp[4] = 0;                       // rbx
    sp[5] = 0;                       // rbp
    sp[6] = (uint64_t)(uintptr_t)&tdm_emu_fiber_entry;
    f->sp = sp;
}
#else
static __thread fiber *entering;  // ucontext's entry takes ints only: the fiber goes by here
static void fiber_uc_entry() {
    tdm_emu_fiber_main(entering);
}
static void fiber_reset_context(fiber *f) {
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack_lo;
    f->uc.uc_stack.ss_size = f->stack_size;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_uc_entry, 0);
    f->sp = &f->uc;
}
#endif

static fiber *fiber_new() {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    fiber *f = new fiber;
    f->map = (char *)mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (f->map == MAP_FAILED) {
        fprintf(stderr, "tandem emu: cannot map a %zu-byte fiber stack: %s\n", STACK_BYTES,
                strerror(errno));
        abort();
    }
    mprotect(f->map, page, PROT_NONE);  // the guard: an overflow faults instead of corrupting
    f->stack_lo = f->map + page;
    f->stack_size = STACK_BYTES;
    fiber_reset_context(f);
    return f;
}

static void fiber_free(fiber *f) {
#if TDM_EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(f->stack_lo, f->stack_size);
#endif
    munmap(f->map, STACK_BYTES + (size_t)(f->stack_lo - f->map));
    delete f;
}

// ---- the block scheduler (one per OS thread) --------------------------------------------------

enum thread_state : uint8_t { ts_unstarted, ts_ready, ts_running, ts_waiting, ts_done };
static const uint8_t K_BARRIER = 100;  // tstate::kind of a thread at a block barrier

struct tstate {
    uint8_t st;    // thread_state
    uint8_t kind;  // what it waits at: K_BARRIER (op in arg) or a warp_kind
    fiber *fib;
    unsigned mask;
    int arg, width, pred;
    unsigned size;
    const char *file;
    int line;
    unsigned result;
    uint3 idx;                          // its threadIdx
    alignas(16) unsigned char val[16];  // its value in a shuffle / match / reduce
    alignas(16) unsigned char out[16];  // what it gets back
    const void *wide_in;                // a tensor-core op's operands and results (the lane's
    void *wide_out;                     // own, on its fiber's stack while it waits)
};

struct grid_job;

struct runner {
    // the grid and block being run
    const grid_job *job = nullptr;
    unsigned n = 0, bx = 1, bxy = 1;  // threads of the block, x and x*y dims
    uint3 block = {0, 0, 0};
    std::vector<tstate> th;
    std::vector<int> order;  // this round's order
    size_t pos = 0;          // next in `order`
    unsigned n_done = 0, n_at_barrier = 0;
    int current = -1;  // the running thread
    bool faulted = false;
    uint64_t rng = 0;
    // fibers
    std::vector<fiber *> all, idle;
    void *os_sp = nullptr;  // the OS thread's stack while a fiber runs
#if !TDM_EMU_ASM_SWITCH
    ucontext_t os_uc;
#endif
    void *os_fake = nullptr;
    const void *os_stack_lo = nullptr;
    size_t os_stack_size = 0;
    bool from_os = false;  // the switch in progress left the OS stack

    ~runner() {
        for (fiber *f : all) fiber_free(f);
    }

    uint3 idx(int t) const {
        return th[t].idx;
    }

    void run_block(const grid_job &job, uint64_t linear);
    int next_thread();
    void build_order();
    bool any_runnable() const {
        for (unsigned t = 0; t < n; t++)
            if (th[t].st == ts_unstarted || th[t].st == ts_ready) return true;
        return false;
    }
    bool resolve();
    void diagnose();
    void complete_warp_op(int base, unsigned group);
    void abandon();
    void begin(int t);
    void switch_to(fiber *from, fiber *to);
    void switch_away(fiber *self, bool self_idle);
    void wait(int t);
    [[noreturn]] void fail_here(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void report(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    fiber *take_idle();
};

static __thread runner *tl_runner;

static runner *this_runner() {
    // The owner frees the fibers when the OS thread ends; tl_runner is the fast way in.
    static thread_local std::unique_ptr<runner> owner;
    if (!tl_runner) {
        owner.reset(new runner);
        tl_runner = owner.get();
    }
    return tl_runner;
}

// ---- the grid: blocks over a pool of OS threads -------------------------------------------------

struct grid_job {
    const char *kernel;
    dim3 grid, block;
    const std::function<void()> *body;
    uint64_t nblocks;
    std::atomic<uint64_t> next{0};              // next block to take
    mutable std::atomic<bool> aborted{false};   // a block faulted: take no more
    mutable std::atomic<bool> reported{false};  // its report is out: one per grid, as a GPU's
    int order;
    uint64_t seed;
    int device;                // whose context a fault makes sticky (the launching work item's)
    int helpers = 0;           // pool threads working on it (under pool().mu)
    grid_job *link = nullptr;  // the pool's list of jobs with blocks left
    void *counters = nullptr;  // counters.cc's launch, when counting
    bool racecheck = false;    // racecheck.cc checks its blocks
    std::atomic<bool> race_reported{false};   // its first hazard is out: one report a launch
};

struct thread_pool {
    std::mutex mu;
    std::condition_variable work, done;
    grid_job *jobs = nullptr;
    int started = 0;
};

static thread_pool &pool() {
    static thread_pool *p = new thread_pool;  // never destroyed: helpers outlive main's statics
    return *p;
}

static void run_blocks(grid_job &job) {
    runner *r = this_runner();
    while (!job.aborted.load(std::memory_order_relaxed)) {
        const uint64_t b = job.next.fetch_add(1, std::memory_order_relaxed);
        if (b >= job.nblocks) break;
        r->run_block(job, b);
    }
}

static void helper_main() {
    thread_pool &p = pool();
    std::unique_lock<std::mutex> lock(p.mu);
    for (;;) {
        grid_job *j = p.jobs;
        while (j && (j->aborted.load() || j->next.load() >= j->nblocks)) j = j->link;
        if (!j) {
            p.work.wait(lock);
            continue;
        }
        j->helpers++;
        lock.unlock();
        run_blocks(*j);
        lock.lock();
        if (--j->helpers == 0) p.done.notify_all();
    }
}

static std::atomic<uint64_t> launches{0};

atomic_hook_fn atomic_hook;   // cuda_emu.h: after_atomic

}  // namespace tdm_emu

// Test-only (not a CUDA API): `hook` runs after every integer atomic of every kernel from the
// next one on (NULL: none), on the thread of the block that made it.
extern "C" void tdm_emu_set_atomic_hook(void (*hook)(const void *addr)) {
    __atomic_store_n(&tdm_emu::atomic_hook, hook, __ATOMIC_RELAXED);
}

namespace tdm_emu {

void run_grid(const char *kernel, dim3 grid, dim3 block, size_t dynamic_smem,
              const std::function<void()> &body) {
    (void)dynamic_smem;  // extern __shared__ is not supported (cuda_emu.h)
    config &c = cfg();
    grid_job job;
    job.kernel = kernel;
    job.grid = grid;
    job.block = block;
    job.body = &body;
    job.nblocks = (uint64_t)grid.x * grid.y * grid.z;
    job.order = c.order.load();
    job.seed = mix64(c.seed.load() ^ mix64(launches.fetch_add(1)));
    job.device = rt::context_device();
    if (job.nblocks == 0 || (uint64_t)block.x * block.y * block.z == 0) return;
    if (counters_on()) job.counters = counters_launch_begin(kernel, grid, block);
    job.racecheck = racecheck_on();

    thread_pool &p = pool();
    const bool shared = job.nblocks > 1 && c.threads > 1;
    if (shared) {
        std::lock_guard<std::mutex> lock(p.mu);
        while (p.started < c.threads - 1) {  // the pool starts with the first grid that needs it
            std::thread(helper_main).detach();
            p.started++;
        }
        job.link = p.jobs;
        p.jobs = &job;
        if (job.nblocks == 2)
            p.work.notify_one();
        else
            p.work.notify_all();
    }
    run_blocks(job);  // the caller takes blocks too: the grid ends even if every helper is busy
    if (shared) {
        std::unique_lock<std::mutex> lock(p.mu);
        for (grid_job **q = &p.jobs; *q; q = &(*q)->link)
            if (*q == &job) {
                *q = job.link;
                break;
            }
        p.done.wait(lock, [&] { return job.helpers == 0; });
    }
    if (job.counters) counters_launch_end(job.counters);
}

int current_block_thread() {
    return tl_runner && tl_runner->job ? tl_runner->current : -1;
}

// ---- one block -------------------------------------------------------------------------------

void runner::run_block(const grid_job &j, uint64_t linear) {
    poison_shared();   // garbage at block start, as on a GPU: before any of its threads runs
    job = &j;
    bx = j.block.x;
    bxy = j.block.x * j.block.y;
    n = bxy * j.block.z;
    const uint64_t gxy = (uint64_t)j.grid.x * j.grid.y;
    block = uint3{(unsigned)(linear % j.grid.x), (unsigned)((linear / j.grid.x) % j.grid.y),
                  (unsigned)(linear / gxy)};
    here.block_idx = block;
    here.block_dim = uint3{j.block.x, j.block.y, j.block.z};
    here.grid_dim = uint3{j.grid.x, j.grid.y, j.grid.z};
    if (th.size() < n) th.resize(n);
    for (unsigned t = 0; t < n; t++) {
        th[t].st = ts_unstarted;
        th[t].fib = nullptr;
        // x fastest, as CUDA numbers threads (and warps are 32 consecutive ones)
        th[t].idx =
            bxy == bx && bx == n ? uint3{t, 0, 0} : uint3{t % bx, (t / bx) % j.block.y, t / bxy};
    }
    n_done = n_at_barrier = 0;
    faulted = false;
    current = -1;
    rng = mix64(j.seed ^ mix64(linear + 1));
    build_order();

    const int t = next_thread();
    fiber *f = take_idle();
    f->thread = t;
    th[t].fib = f;
    if (j.counters) counters_block_begin(j.counters);
    if (j.racecheck)
        racecheck_block_begin(j.kernel, block, here.block_dim,
                              const_cast<std::atomic<bool> *>(&j.race_reported));
    switch_to(nullptr, f);  // back here when the block is over
    if (j.racecheck) racecheck_block_end();
    if (j.counters) counters_block_end();
    if (faulted) abandon();
    current = -1;
    job = nullptr;
}

fiber *runner::take_idle() {
    if (!idle.empty()) {
        fiber *f = idle.back();
        idle.pop_back();
        return f;
    }
    fiber *f = fiber_new();
    all.push_back(f);
    return f;
}

void runner::build_order() {
    order.clear();
    for (unsigned t = 0; t < n; t++)
        if (th[t].st == ts_unstarted || th[t].st == ts_ready) {
            // warp order: only the first warp that can run, each of its threads forward
            if (job->order == order_warp && !order.empty() && t / 32 != (unsigned)order[0] / 32)
                break;
            order.push_back((int)t);
        }
    if (job->order == order_reverse) {
        std::reverse(order.begin(), order.end());
    } else if (job->order == order_random) {
        for (size_t i = order.size(); i > 1; i--) {  // Fisher-Yates
            rng = mix64(rng);
            std::swap(order[i - 1], order[rng % i]);
        }
    }
    pos = 0;
}

// The thread to run next, in this round's order; rounds end with the barriers resolved. -1:
// the block is over (every thread done, or a fault).
int runner::next_thread() {
    for (;;) {
        if (faulted) return -1;
        while (pos < order.size()) {
            const int t = order[pos++];
            if (th[t].st == ts_unstarted || th[t].st == ts_ready) return t;
        }
        if (n_done == n) return -1;
        // A warp's completed warp operation lets it go on first (warp order); a block whose
        // runnable threads all waited is stuck unless a barrier completes. In the other orders a
        // round runs every thread that can run, so none can when it ends.
        if (!resolve() && !any_runnable()) {
            diagnose();
            faulted = true;
            return -1;
        }
        build_order();
    }
}

void runner::begin(int t) {
    current = t;
    th[t].st = ts_running;
    here.thread_idx = th[t].idx;
}

void runner::switch_to(fiber *from, fiber *to) {
#if TDM_EMU_ASAN
    __sanitizer_start_switch_fiber(from ? &from->asan_fake : &os_fake,
                                   to ? to->stack_lo : os_stack_lo,
                                   to ? to->stack_size : os_stack_size);
#endif
    from_os = from == nullptr;
#if TDM_EMU_ASM_SWITCH
    tdm_emu_switch(from ? &from->sp : &os_sp, to ? to->sp : os_sp);
#else
    entering = to;
    swapcontext(from ? &from->uc : &os_uc, to ? &to->uc : &os_uc);
#endif
#if TDM_EMU_ASAN
    // Back on `from`'s stack, on the same OS thread (fibers never migrate), so `this` holds.
    const void *lo;
    size_t size;
    __sanitizer_finish_switch_fiber(from ? from->asan_fake : os_fake, &lo, &size);
    if (from_os) {  // set by the switch that resumed us
        os_stack_lo = lo;
        os_stack_size = size;
    }
#endif
}

// From a fiber whose thread waits (self_idle false) or ended (true): on to the next thread.
// Returns when `self` runs again: its thread released, or (idle) a new thread given to it.
void runner::switch_away(fiber *self, bool self_idle) {
    const int t = next_thread();
    if (t < 0) {  // the block is over: back to run_block on the OS stack
        if (self_idle) {
            self->thread = -1;
            idle.push_back(self);
        }
        switch_to(self, nullptr);
        return;
    }
    if (th[t].st == ts_unstarted) {
        fiber *f = self_idle ? self : take_idle();
        f->thread = t;
        th[t].fib = f;
        if (f != self) switch_to(self, f);
        return;
    }
    if (th[t].fib == self) return;  // released by the round that ended here, and first in the next
    if (self_idle) {
        self->thread = -1;
        idle.push_back(self);
    }
    switch_to(self, th[t].fib);
}

extern "C" __attribute__((visibility("hidden"), used)) void tdm_emu_fiber_main(fiber *f) {
    runner *r = tl_runner;
#if TDM_EMU_ASAN
    const void *lo;
    size_t size;
    __sanitizer_finish_switch_fiber(nullptr, &lo, &size);
    if (r->from_os) {
        r->os_stack_lo = lo;
        r->os_stack_size = size;
    }
#endif
    for (;;) {
        const int t = f->thread;
        r->begin(t);
        (*r->job->body)();
        r->th[t].st = ts_done;
        r->n_done++;
        r->current = -1;
        r->switch_away(f, true);
    }
}

// The running thread t stops at the barrier its tstate describes until it is released.
void runner::wait(int t) {
    th[t].st = ts_waiting;
    current = -1;
    switch_away(th[t].fib, false);
    begin(t);
}

// Any thread of the block may release the others (it runs the scheduler on its own stack), and
// the fault report names the thread that waits, not the one that noticed.
void runner::fail_here(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const uint3 t = idx(current);
    report("kernel %s: block (%u,%u,%u), thread (%u,%u,%u): %s", job->kernel, block.x, block.y,
           block.z, t.x, t.y, t.z, msg);
    faulted = true;
    switch_away(th[current].fib, false);  // never resumed: abandon() resets this fiber
    __builtin_unreachable();
}

// The grid's failure, through fault() (sticky, or abort with TANDEM_EMU_ABORT=1). Blocks running on
// other OS threads when it happens stop at their own failure without a second report.
void runner::report(const char *fmt, ...) {
    job->aborted.store(true);
    if (job->reported.exchange(true)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fault_on(job->device, cudaErrorLaunchFailure, "%s", msg);   // helpers run no work item
}

void runner::abandon() {
    for (unsigned t = 0; t < n; t++) {
        tstate &s = th[t];
        if (s.st == ts_done || s.st == ts_unstarted || !s.fib) continue;
        fiber *f = s.fib;
#if TDM_EMU_ASAN
        // Frames left on the stack keep their red zones poisoned; a fresh start must not see them.
        ASAN_UNPOISON_MEMORY_REGION(f->stack_lo, f->stack_size);
        f->asan_fake = nullptr;
#endif
        fiber_reset_context(f);
        f->thread = -1;
        idle.push_back(f);
        s.fib = nullptr;
    }
    job->aborted.store(true);
}

// ---- barriers ---------------------------------------------------------------------------------

static const char *warp_name(int kind) {
    static const char *const names[] = {
        "__syncwarp",        "__shfl_sync",       "__shfl_up_sync",    "__shfl_down_sync",
        "__shfl_xor_sync",   "__ballot_sync",     "__any_sync",        "__all_sync",
        "__activemask",      "__match_any_sync",  "__match_all_sync",  "__reduce_add_sync",
        "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
        "__reduce_xor_sync"};
    if (kind == wk_tensor_core) return "a tensor-core instruction (mma.sync / ldmatrix)";
    return kind >= 0 && kind < (int)(sizeof names / sizeof *names) ? names[kind] : "warp op";
}
static const char *barrier_name(int op) {
    static const char *const names[] = {"__syncthreads", "__syncthreads_count", "__syncthreads_and",
                                        "__syncthreads_or"};
    return op >= 0 && op < 4 ? names[op] : "__syncthreads";
}
static const char *base_name(const char *file) {
    const char *s = strrchr(file, '/');
    return s ? s + 1 : file;
}
static bool same_site(const tstate &a, const tstate &b) {
    return a.line == b.line && (a.file == b.file || strcmp(a.file, b.file) == 0);
}

static runner *kernel_runner(const char *what) {
    runner *r = tl_runner;
    if (!r || r->current < 0) {
        fprintf(stderr, "tandem emu: %s called outside a kernel\n", what);
        abort();
    }
    return r;
}

int block_barrier(int op, int pred, const char *file, int line) {
    runner *r = kernel_runner("__syncthreads");
    const int t = r->current;
    tstate &s = r->th[t];
    s.kind = K_BARRIER;
    s.arg = op;
    s.pred = pred != 0;
    s.file = file;
    s.line = line;
    r->n_at_barrier++;
    r->wait(t);
    return (int)s.result;
}

unsigned warp_op(const warp_call &c) {
    runner *r = kernel_runner(warp_name(c.kind));
    const int t = r->current;
    const int lane = t & 31;
    if (!(c.mask >> lane & 1u))
        r->fail_here("%s (%s:%d) with mask 0x%08x, which leaves out its own lane %d",
                     warp_name(c.kind), base_name(c.file), c.line, c.mask, lane);
    const bool shuffle = c.kind >= wk_shfl && c.kind <= wk_shfl_xor;
    if (shuffle && (c.width < 1 || c.width > 32 || (c.width & (c.width - 1))))
        r->fail_here("%s (%s:%d) with width %d: not a power of 2 in [1, 32]", warp_name(c.kind),
                     base_name(c.file), c.line, c.width);
    tstate &s = r->th[t];
    s.kind = (uint8_t)c.kind;
    s.mask = c.mask;
    s.arg = c.arg;
    s.width = c.width;
    s.pred = c.pred;
    s.size = c.size;
    s.file = c.file;
    s.line = c.line;
    if (c.size) memcpy(s.val, c.in, c.size);
    if (c.kind == wk_tensor_core) {
        // .sync.aligned: the whole warp, which must exist (a block of 48 threads has no second
        // warp for an mma)
        const unsigned base = (unsigned)t & ~31u;
        if (r->n - base < 32)
            r->fail_here("%s (%s:%d) in a warp of %u threads: it needs all 32",
                         tc_op_name(c.arg), base_name(c.file), c.line, r->n - base);
        s.wide_in = c.in;
        s.wide_out = c.out;
    }
    r->wait(t);
    if (c.out) memcpy(c.out, s.out, c.size);
    return s.result;
}

void kernel_trap(const char *what, const char *file, int line) {
    runner *r = kernel_runner(what);
    r->fail_here("%s (%s:%d)", what, base_name(file), line);
}

bool describe_current_thread(char *buf, size_t n) {
    runner *r = tl_runner;
    if (!r || !r->job || r->current < 0) return false;
    const uint3 t = r->idx(r->current);
    snprintf(buf, n, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", r->job->kernel, r->block.x,
             r->block.y, r->block.z, t.x, t.y, t.z);
    return true;
}

// The source lane of a shuffle, as PTX's shfl.sync computes it from b and c (the CUDA wrappers
// pass c = ((32 - width) << 8) | (up ? 0 : 31)); out of the segment: the lane's own.
static int shfl_source(int kind, int lane, int b, int width) {
    const int seg = (32 - width) & 31;             // c[12:8]: the bits that pick the segment
    const int cval = kind == wk_shfl_up ? 0 : 31;  // c[4:0]
    const int bval = b & 31;
    const int max_lane = (lane & seg) | (cval & ~seg & 31);
    const int min_lane = lane & seg;
    int j;
    bool ok;
    switch (kind) {
        case wk_shfl_up:
            j = lane - bval;
            ok = j >= max_lane;
            break;
        case wk_shfl_down:
            j = lane + bval;
            ok = j <= max_lane;
            break;
        case wk_shfl_xor:
            j = lane ^ bval;
            ok = j <= max_lane;
            break;
        default:
            j = min_lane | (bval & ~seg & 31);
            ok = j <= max_lane;
            break;
    }
    return ok ? j : lane;
}

// Lanes `group` (bits, relative to thread `base`) of one warp are all at the same operation:
// compute what each gets and release them.
void runner::complete_warp_op(int base, unsigned group) {
    const tstate &first = th[base + __builtin_ctz(group)];
    const int kind = first.kind;
    if (kind == wk_tensor_core) {   // group is the full warp (warp_op checked)
        const void *in[32];
        void *out[32];
        for (int l = 0; l < 32; l++) in[l] = th[base + l].wide_in, out[l] = th[base + l].wide_out;
        tc_complete(first.arg, in, out, base);
        for (int l = 0; l < 32; l++) th[base + l].st = ts_ready;
        return;
    }
    unsigned votes = 0;
    for (unsigned g = group; g; g &= g - 1) {
        const int l = __builtin_ctz(g);
        if (th[base + l].pred) votes |= 1u << l;
    }
    for (unsigned g = group; g; g &= g - 1) {
        const int l = __builtin_ctz(g);
        tstate &s = th[base + l];
        switch (kind) {
            case wk_shfl:
            case wk_shfl_up:
            case wk_shfl_down:
            case wk_shfl_xor: {
                const int src = shfl_source(kind, l, s.arg, s.width);
                if (group >> src & 1u) memcpy(s.out, th[base + src].val, s.size);
                // A lane that is not taking part: undefined on a GPU; all ones (NaN) shows up.
                else
                    memset(s.out, 0xff, s.size);
                break;
            }
            case wk_ballot:
                s.result = votes;
                break;
            case wk_any:
                s.result = votes != 0;
                break;
            case wk_all:
                s.result = votes == group;
                break;
            case wk_match_any: {
                unsigned m = 0;
                for (unsigned h = group; h; h &= h - 1) {
                    const int k = __builtin_ctz(h);
                    if (memcmp(th[base + k].val, s.val, s.size) == 0) m |= 1u << k;
                }
                s.result = m;
                break;
            }
            case wk_match_all: {
                bool all = true;
                for (unsigned h = group; h; h &= h - 1)
                    all = all && memcmp(th[base + __builtin_ctz(h)].val, s.val, s.size) == 0;
                s.result = all ? group : 0;
                break;
            }
            case wk_reduce_add:
            case wk_reduce_min:
            case wk_reduce_max:
            case wk_reduce_and:
            case wk_reduce_or:
            case wk_reduce_xor: {
                uint32_t acc = 0;
                bool init = false;
                for (unsigned h = group; h; h &= h - 1) {
                    uint32_t v;
                    memcpy(&v, th[base + __builtin_ctz(h)].val, 4);
                    if (!init) {
                        acc = v;
                        init = true;
                        continue;
                    }
                    switch (kind) {
                        case wk_reduce_add:
                            acc += v;
                            break;
                        case wk_reduce_and:
                            acc &= v;
                            break;
                        case wk_reduce_or:
                            acc |= v;
                            break;
                        case wk_reduce_xor:
                            acc ^= v;
                            break;
                        default: {
                            const bool less = s.arg ? (int32_t)v < (int32_t)acc : v < acc;
                            if ((kind == wk_reduce_min) == less) acc = v;
                        }
                    }
                }
                memcpy(s.out, &acc, 4);
                break;
            }
            default:
                break;  // __syncwarp
        }
        s.st = ts_ready;
    }
}

// Releases what the barriers let go; false when nothing could be.
bool runner::resolve() {
    bool progress = false;
    const int nwarps = (int)((n + 31) / 32);
    for (int w = 0; w < nwarps; w++) {
        const int base = w * 32;
        const int lanes = (int)std::min(32u, n - (unsigned)base);
        const unsigned exist = lanes == 32 ? ~0u : (1u << lanes) - 1;
        unsigned at_op = 0, at_active = 0, live = 0;
        for (int l = 0; l < lanes; l++) {
            const tstate &s = th[base + l];
            if (s.st != ts_done) live |= 1u << l;
            if (s.st != ts_waiting || s.kind == K_BARRIER) continue;
            if (s.kind == wk_activemask)
                at_active |= 1u << l;
            else
                at_op |= 1u << l;
        }
        for (unsigned todo = at_op; todo;) {
            const int l = __builtin_ctz(todo);
            const tstate &s = th[base + l];
            const unsigned group = s.mask & exist;
            todo &= ~(1u << l);
            bool ok = (group & at_op) == group;
            for (unsigned g = group; ok && g; g &= g - 1) {
                const tstate &o = th[base + __builtin_ctz(g)];
                ok = o.kind == s.kind && o.mask == s.mask &&
                     (s.kind != wk_tensor_core || o.arg == s.arg);   // the same instruction
            }
            if (!ok) continue;
            complete_warp_op(base, group);
            todo &= ~group;
            at_op &= ~group;
            progress = true;
        }
        // __activemask: once every live lane of the warp has stopped somewhere.
        bool stopped = at_active != 0;
        for (int l = 0; stopped && l < lanes; l++)
            stopped = !(live >> l & 1u) || th[base + l].st == ts_waiting;
        if (stopped) {
            for (unsigned todo = at_active; todo;) {
                const tstate &s = th[base + __builtin_ctz(todo)];
                unsigned group = 0;
                for (unsigned g = todo; g; g &= g - 1)
                    if (same_site(th[base + __builtin_ctz(g)], s)) group |= 1u << __builtin_ctz(g);
                for (unsigned g = group; g; g &= g - 1) {
                    th[base + __builtin_ctz(g)].result = group;
                    th[base + __builtin_ctz(g)].st = ts_ready;
                }
                todo &= ~group;
                progress = true;
            }
        }
    }
    if (n_at_barrier == n) {  // everyone at a block barrier: the same one?
        const tstate &s0 = th[0];
        bool same = true;
        unsigned count = 0;
        for (unsigned t = 0; t < n; t++) {
            same = same && th[t].arg == s0.arg && same_site(th[t], s0);
            count += (unsigned)th[t].pred;
        }
        if (same) {
            const unsigned result = s0.arg == bar_count ? count
                                    : s0.arg == bar_and ? (unsigned)(count == n)
                                    : s0.arg == bar_or  ? (unsigned)(count != 0)
                                                        : 0u;
            for (unsigned t = 0; t < n; t++) {
                th[t].result = result;
                th[t].st = ts_ready;
            }
            n_at_barrier = 0;
            if (tl_watch & 2) racecheck_barrier();
            progress = true;
        }
    }
    return progress;
}

// Nothing can run and no barrier can complete: say why, from the first waiting thread's side.
void runner::diagnose() {
    char who[64], why[256];
    auto thread_name = [&](int t, char *buf, size_t len) {
        const uint3 i = idx(t);
        snprintf(buf, len, "thread (%u,%u,%u)", i.x, i.y, i.z);
    };
    auto doing = [&](int t, char *buf, size_t len) {
        const tstate &s = th[t];
        if (s.st == ts_done)
            snprintf(buf, len, "has exited");
        else if (s.st != ts_waiting)
            snprintf(buf, len, "is running");
        else if (s.kind == K_BARRIER)
            snprintf(buf, len, "waits at %s (%s:%d)", barrier_name(s.arg), base_name(s.file),
                     s.line);
        else if (s.kind == wk_activemask)
            snprintf(buf, len, "waits at __activemask (%s:%d)", base_name(s.file), s.line);
        else
            snprintf(buf, len, "waits at %s (mask 0x%08x, %s:%d)", warp_name(s.kind), s.mask,
                     base_name(s.file), s.line);
    };
    const char *k = job->kernel;
    // A warp operation that cannot complete.
    for (unsigned t = 0; t < n; t++) {
        const tstate &s = th[t];
        if (s.st != ts_waiting || s.kind == K_BARRIER || s.kind == wk_activemask) continue;
        const int base = (int)(t & ~31u);
        const unsigned lanes = std::min(32u, n - (unsigned)base);
        const unsigned exist = lanes == 32 ? ~0u : (1u << lanes) - 1;
        for (unsigned g = s.mask & exist; g; g &= g - 1) {
            const int j = base + __builtin_ctz(g);
            const tstate &o = th[j];
            if (o.st == ts_waiting && o.kind == s.kind && o.mask == s.mask) continue;
            char mine[160], other[64];
            doing((int)t, mine, sizeof mine);
            doing(j, why, sizeof why);
            thread_name(j, other, sizeof other);
            thread_name((int)t, who, sizeof who);
            report(
                "kernel %s: block (%u,%u,%u): warp %d: %s %s, but lane %d of its mask, %s, %s "
                "(a warp operation's lanes must all reach it with the same mask)",
                k, block.x, block.y, block.z, base / 32, who, mine, j - base, other, why);
            return;
        }
    }
    // The block barrier.
    for (unsigned t = 0; t < n; t++) {
        const tstate &s = th[t];
        if (s.st != ts_waiting || s.kind != K_BARRIER) continue;
        unsigned exited = 0;
        int culprit = -1;
        for (unsigned j = 0; j < n; j++)
            if (th[j].st == ts_done && exited++ == 0) culprit = (int)j;
        if (culprit < 0)
            for (unsigned j = 0; j < n && culprit < 0; j++)
                if (th[j].st != ts_waiting || th[j].kind != K_BARRIER || th[j].arg != s.arg ||
                    !same_site(th[j], s))
                    culprit = (int)j;
        if (culprit < 0) break;
        char mine[160], other[64];
        doing((int)t, mine, sizeof mine);
        doing(culprit, why, sizeof why);
        thread_name(culprit, other, sizeof other);
        thread_name((int)t, who, sizeof who);
        char more[64] = "";
        if (exited > 1) snprintf(more, sizeof more, " (%u of %u threads exited)", exited, n);
        report("kernel %s: block (%u,%u,%u): barrier divergence: %s %s, but %s %s%s", k, block.x,
               block.y, block.z, who, mine, other, why, more);
        return;
    }
    report("kernel %s: block (%u,%u,%u): deadlock among its threads", k, block.x, block.y, block.z);
}

#if TDM_EMU_ASAN
}  // namespace tdm_emu
// ASan's hook, called as it starts a report: an error inside a kernel says which CUDA thread.
extern "C" void __asan_on_error() {
    char who[200], line[260];
    if (!tdm_emu::describe_current_thread(who, sizeof who)) return;
    const int k =
        snprintf(line, sizeof line, "tandem emu: AddressSanitizer's report is about %s\n", who);
    if (k > 0 && write(2, line, (size_t)k) < 0) {
    }
}
namespace tdm_emu {
#endif

// ---- launch configuration
// ------------------------------------------------------------------------

static std::mutex smem_mu;
static std::unordered_map<const void *, int> *smem_max;  // under smem_mu

// Kernel launches the host made (each TDM_LAUNCH whose configuration passed launch_check, a
// captured one included; a graph replay makes none), counted for tdm_emu_kernel_launches.
static std::atomic<unsigned long long> g_launches{0};

void set_max_dynamic_smem(const void *func, int bytes) {
    std::lock_guard<std::mutex> lock(smem_mu);
    if (!smem_max) smem_max = new std::unordered_map<const void *, int>;
    (*smem_max)[func] = bytes;
}

cudaError_t launch_check(const char *kernel, const void *func, dim3 grid, dim3 block,
                         size_t dynamic_smem) {
    char why[256];
    cudaError_t err = cudaErrorInvalidConfiguration;
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0) {
        snprintf(why, sizeof why, "block (%u,%u,%u) has a zero dimension", block.x, block.y,
                 block.z);
    } else if (threads > 1024) {
        snprintf(why, sizeof why, "block (%u,%u,%u) has %llu threads, more than 1024", block.x,
                 block.y, block.z, threads);
    } else if (block.x > 1024 || block.y > 1024 || block.z > 64) {
        snprintf(why, sizeof why, "block (%u,%u,%u): dimensions at most (1024,1024,64)", block.x,
                 block.y, block.z);
    } else if (grid.x == 0 || grid.y == 0 || grid.z == 0) {
        snprintf(why, sizeof why, "grid (%u,%u,%u) has a zero dimension", grid.x, grid.y, grid.z);
    } else if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        snprintf(why, sizeof why, "grid (%u,%u,%u): dimensions at most (2147483647,65535,65535)",
                 grid.x, grid.y, grid.z);
    } else {
        size_t limit = 48 << 10;
        if (dynamic_smem > limit && func) {
            std::lock_guard<std::mutex> lock(smem_mu);
            if (smem_max) {
                auto it = smem_max->find(func);
                if (it != smem_max->end()) limit = (size_t)it->second;
            }
        }
        if (dynamic_smem <= limit) {
            g_launches.fetch_add(1, std::memory_order_relaxed);
            return cudaSuccess;
        }
        err = cudaErrorInvalidValue;
        snprintf(why, sizeof why,
                 "%zu bytes of dynamic shared memory, more than %zu (cudaFuncSetAttribute with "
                 "cudaFuncAttributeMaxDynamicSharedMemorySize raises the limit)",
                 dynamic_smem, limit);
    }
    fprintf(stderr, "tandem emu: kernel %s: %s\n", kernel, why);
    return err;
}

}  // namespace tdm_emu

// The emulator's own query for tests (not a CUDA API): how many kernels the host has launched
// so far (launch_check above), so a test can prove how many launches a piece of work makes
// (docs/EMULATION.md).
extern "C" unsigned long long tdm_emu_kernel_launches(void) {
    return tdm_emu::g_launches.load(std::memory_order_relaxed);
}
