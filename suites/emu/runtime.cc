/* runtime.cc — the emulated CUDA runtime's process state and memory: the switches, the devices
 * (an A100's properties and attributes), errors (the per-thread last error, the sticky error of a
 * fault, names and strings as cudart's), device memory and pinned host memory. Streams, events and
 * graphs: runtime_streams.cc; copies: runtime_copy.cc.
 *
 * Device memory. Each device reserves one arena (mmap PROT_NONE, MAP_NORESERVE) at the first
 * runtime call. cudaMalloc carves a page-aligned slot out of it: the block, then its red zone
 * (ASan-poisoned under -fsanitize=address, else filled with 0xFD and checked at cudaFree). A new
 * block is filled with 0xFF (NaN in every float type: a kernel that reads memory nobody wrote
 * shows it). A freed slot is poisoned (without ASan: filled with 0xFD, and when small checked for
 * writes when it leaves) and stays in a quarantine, so that its addresses are not handed out again
 * for a while. The arenas are readable and writable only while an access_scope exists somewhere
 * (a work item runs): host code that touches device memory otherwise gets SIGSEGV, and the
 * handler says which allocation it hit. The arenas ask for transparent huge pages: protecting and
 * unprotecting costs time per page mapped. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>

#include "runtime_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define TDM_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TDM_EMU_ASAN 1
#endif
#endif
#ifdef TDM_EMU_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tdm_emu {
namespace rt {

// ---- layout of an arena ----

constexpr size_t kPage = 4096;
constexpr size_t kHuge = 2 << 20;                // the arena is protected in 2 MiB steps
constexpr size_t kLead = 1 << 20;                // unused guard at the start of an arena
constexpr size_t kQuarantineBytes = 1ull << 30;  // slots kept from reuse after cudaFree...
constexpr size_t kQuarantineCount = 1 << 14;     // ...at most this many
constexpr size_t kFillFreedMax = 1 << 20;        // freed blocks up to 1 MiB are checked on leaving
constexpr size_t kFilledBudget = 64 << 20;       // ...while the checked ones hold at most 64 MiB
constexpr unsigned char kFresh = 0xFF;           // a new block's bytes
constexpr unsigned char kGuard = 0xFD;           // red zones and checked freed blocks

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// The red zone after a block of n bytes: 1/16 of it, between 1 KiB and 64 KiB.
static size_t red_zone(size_t n) { return std::min<size_t>(std::max<size_t>(n / 16, 1024), 65536); }

struct Block {
    size_t size;   // what cudaMalloc was asked for
    size_t slot;   // the block and its red zone, a multiple of the page
    bool live;     // false: freed, in the quarantine
    bool filled;   // freed and filled with kGuard (checked when it leaves the quarantine)
};

struct Arena {
    int device;
    char *base;
    size_t len;
    size_t cap;                          // TANDEM_EMU_MEM
    std::atomic<size_t> high{0};         // [base, base+high) holds every slot ever carved
                                         // (a multiple of kHuge)
    cudaDeviceProp props;
    std::mutex mu;                       // guards what follows
    size_t used = 0;                     // live bytes (256-byte granules), against cap
    std::map<uintptr_t, Block> blocks;   // live and quarantined, by address
    std::map<uintptr_t, size_t> free;    // free ranges: address -> length
    std::deque<uintptr_t> quarantine;    // oldest first
    size_t quarantine_bytes = 0, filled_bytes = 0;
};

static Config g_cfg;
static Arena *g_arenas[kMaxDevices];   // made at init, never freed (workers may outlive main)

__thread const char *tls_work;

// ---- access scopes: the arenas are readable while one exists anywhere ----

static std::mutex g_scope_mu;
static std::atomic<int> g_scope_count{0};

static void protect(Arena *a, size_t from, size_t to, int prot) {
    if (to <= from) return;
    if (mprotect(a->base + from, to - from, prot) != 0) {
        fprintf(stderr, "tandem emu: mprotect of emulated cuda:%d's memory failed: %s\n",
                a->device, strerror(errno));
        abort();
    }
}

// Write-combined pinned memory (cudaHostAllocWriteCombined): legal for the host to read on a GPU,
// but uncached there (each read a bus transaction: tens of seconds for 1 GiB), so a host read is
// a defect of speed the emulator shows. Such blocks are PROT_NONE while no device work runs, as
// the arenas are; the fault handler lets a host write through (the page stays open until the next
// scope closes) and counts a host read (tdm_emu_wc_host_reads), saying so once on stderr. The
// blocks live in a fixed table the handler reads without locks (past kMaxWc blocks, not watched).
constexpr int kMaxWc = 64;
static std::atomic<uintptr_t> g_wc_lo[kMaxWc], g_wc_hi[kMaxWc];   // [lo, hi): whole pages
static std::atomic<unsigned long long> g_wc_reads{0};

static void protect_wc(int prot) {   // g_scope_mu held
    for (int i = 0; i < kMaxWc; i++) {
        const uintptr_t lo = g_wc_lo[i].load(), hi = g_wc_hi[i].load();
        if (lo && mprotect((void *)lo, hi - lo, prot) != 0) abort();
    }
}

}  // namespace rt

access_scope::access_scope() {
    using namespace rt;
    config();
    std::lock_guard<std::mutex> lk(g_scope_mu);
    if (g_scope_count.fetch_add(1) == 0) {
        for (int d = 0; d < g_cfg.devices; d++)
            protect(g_arenas[d], 0, g_arenas[d]->high.load(), PROT_READ | PROT_WRITE);
        protect_wc(PROT_READ | PROT_WRITE);
    }
}

access_scope::~access_scope() {
    using namespace rt;
    std::lock_guard<std::mutex> lk(g_scope_mu);
    if (g_scope_count.fetch_sub(1) == 1) {
        for (int d = 0; d < g_cfg.devices; d++)
            protect(g_arenas[d], 0, g_arenas[d]->high.load(), PROT_NONE);
        protect_wc(PROT_NONE);
    }
}

namespace rt {

// The arena grew to `high` (a->mu held): readable at once if a scope is open. In whole 2 MiB
// steps, so that transparent huge pages back it (see init).
static void grow_high(Arena *a, size_t high) {
    high = round_up(high, kHuge);
    size_t old = a->high.load();
    if (high <= old) return;
    a->high.store(high);
    std::lock_guard<std::mutex> lk(g_scope_mu);
    if (g_scope_count.load() > 0) protect(a, old, high, PROT_READ | PROT_WRITE);
}

// ---- errors ----

// Per device, as a GPU's context error: a fault on cuda:1 leaves cuda:0's calls working.
static std::atomic<int> g_sticky[kMaxDevices];   // cudaSuccess (0) while none
static thread_local cudaError_t tls_last = cudaSuccess;
static std::atomic<int> g_faults_printed{0};
__thread int tls_work_device = -1;

int context_device() { return tls_work_device >= 0 ? tls_work_device : current_device(); }

cudaError_t sticky_error(int device) {
    if (device < 0 || device >= kMaxDevices) return cudaSuccess;
    return (cudaError_t)g_sticky[device].load(std::memory_order_relaxed);
}

cudaError_t sticky_error() { return sticky_error(context_device()); }

cudaError_t fail(cudaError_t err) {
    if (err != cudaSuccess) tls_last = err;
    return err;
}

void say(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tandem emu: %s\n", msg);
}

// ---- describing device addresses ----

// The block of `a` that holds address p (in its slot), or NULL; a->mu held.
static const std::pair<const uintptr_t, Block> *block_at(Arena *a, uintptr_t p) {
    auto it = a->blocks.upper_bound(p);
    if (it == a->blocks.begin()) return nullptr;
    --it;
    return p < it->first + it->second.slot ? &*it : nullptr;
}

static void describe_locked(Arena *a, uintptr_t p, char *buf, size_t n) {
    auto *b = block_at(a, p);
    if (!b) {
        snprintf(buf, n, "in no allocation of emulated cuda:%d", a->device);
        return;
    }
    size_t off = p - b->first, size = b->second.size;
    if (b->second.live && off < size)
        snprintf(buf, n, "inside a %zu-byte allocation on emulated cuda:%d, offset %zu", size,
                 a->device, off);
    else if (b->second.live)
        snprintf(buf, n, "%zu bytes past the end of a %zu-byte allocation on emulated cuda:%d",
                 off - size, size, a->device);
    else if (off < size)
        snprintf(buf, n,
                 "inside a freed %zu-byte allocation on emulated cuda:%d, offset %zu: use after "
                 "free",
                 size, a->device, off);
    else
        snprintf(buf, n,
                 "%zu bytes past the end of a freed %zu-byte allocation on emulated cuda:%d",
                 off - size, size, a->device);
}

int arena_device(const void *p) {
    uintptr_t u = (uintptr_t)p;
    for (int d = 0; d < g_cfg.devices; d++) {
        Arena *a = g_arenas[d];
        if (a && u >= (uintptr_t)a->base && u < (uintptr_t)a->base + a->len) return d;
    }
    return -1;
}

void describe_address(const void *p, char *buf, size_t n) {
    int d = arena_device(p);
    if (d < 0) {
        snprintf(buf, n, "not device memory");
        return;
    }
    std::lock_guard<std::mutex> lk(g_arenas[d]->mu);
    describe_locked(g_arenas[d], (uintptr_t)p, buf, n);
}

void describe_range(const void *p, size_t n, char *buf, size_t len) {
    int d = arena_device(p);
    if (d < 0) {
        snprintf(buf, len, "it is not device memory");
        return;
    }
    Arena *a = g_arenas[d];
    std::lock_guard<std::mutex> lk(a->mu);
    auto *b = block_at(a, (uintptr_t)p);
    size_t off = b ? (uintptr_t)p - b->first : 0;
    if (b && b->second.live && off < b->second.size)
        snprintf(buf, len,
                 "it runs %zu bytes past the end of its %zu-byte allocation on emulated cuda:%d "
                 "(it starts at offset %zu)",
                 off + n - b->second.size, b->second.size, d, off);
    else {
        char where[200];
        describe_locked(a, (uintptr_t)p, where, sizeof where);
        snprintf(buf, len, "it starts %s", where);
    }
}

// ---- the fault handler: host code touched device memory ----

}  // namespace rt

// exec.cc's: which CUDA thread of which kernel runs on this OS thread (weak: the runtime's own
// test links without kernels).
bool describe_current_thread(char *buf, size_t n) __attribute__((weak));

namespace rt {

static struct sigaction g_prev_segv, g_prev_bus;

// What ran on this thread when it faulted: "kernel k, block (..), thread (..)", a work item's
// name, or "" (host code).
static void who(char *buf, size_t n) {
    buf[0] = 0;
    if (describe_current_thread && describe_current_thread(buf, n)) return;
    if (tls_work) snprintf(buf, n, "%s", tls_work);
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    int d = arena_device(si->si_addr);
    if (d >= 0) {
        Arena *a = g_arenas[d];
        char where[256], msg[640];
        // the faulting thread may hold the lock (it should not): then no details
        if (a->mu.try_lock()) {
            describe_locked(a, (uintptr_t)si->si_addr, where, sizeof where);
            a->mu.unlock();
        } else {
            snprintf(where, sizeof where, "on emulated cuda:%d", d);
        }
        char running[200];
        who(running, sizeof running);
        int n;
        if (g_scope_count.load() == 0)   // no device work anywhere: host code
            n = snprintf(msg, sizeof msg,
                         "tandem emu: host code read or wrote device memory at %p (%s) outside "
                         "a kernel or copy: a GPU would fault here\n",
                         si->si_addr, where);
        else   // beyond every block ever carved: a wild pointer
            n = snprintf(msg, sizeof msg,
                         "tandem emu: %s read or wrote device memory at %p (%s) where no "
                         "allocation ever was: a GPU would fault here (cudaErrorIllegalAddress)\n",
                         running[0] ? running : "host code (while device work ran)", si->si_addr,
                         where);
        if (n > 0 && write(2, msg, std::min<size_t>((size_t)n, sizeof msg - 1)) < 0) {
        }
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    // write-combined pinned memory, closed while no device work runs: open the page; a read is
    // counted (a write is not: writing is what such memory is for)
    const uintptr_t addr = (uintptr_t)si->si_addr;
    for (int i = 0; i < kMaxWc; i++) {
        const uintptr_t lo = g_wc_lo[i].load(), hi = g_wc_hi[i].load();
        if (!lo || addr < lo || addr >= hi) continue;
#if defined(__x86_64__)
        const bool is_write = (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
        const bool is_write = true;   // unknown here: never a false report
#endif
        if (!is_write && g_wc_reads.fetch_add(1) == 0) {
            char msg[400];
            int n = snprintf(msg, sizeof msg,
                             "tandem emu: host code read write-combined pinned memory at %p "
                             "(cudaHostAllocWriteCombined): uncached on a GPU, far slower than "
                             "ordinary memory; let the device copy it to ordinary memory first\n",
                             si->si_addr);
            if (n > 0 && write(2, msg, std::min<size_t>((size_t)n, sizeof msg - 1)) < 0) {
            }
        }
        if (mprotect((void *)(addr & ~(uintptr_t)(kPage - 1)), kPage, PROT_READ | PROT_WRITE) != 0)
            abort();
        return;   // the access runs again, now allowed
    }
    // not device memory: say so when device work faulted, then the previous handler (ASan's, or
    // the default action)
    char running[200];
    who(running, sizeof running);
    if (running[0]) {
        char msg[400];
        int n = snprintf(msg, sizeof msg,
                         "tandem emu: %s faulted at %p, which is not device memory (a host "
                         "pointer, NULL or garbage): a GPU would report cudaErrorIllegalAddress\n",
                         running, si->si_addr);
        if (n > 0 && write(2, msg, std::min<size_t>((size_t)n, sizeof msg - 1)) < 0) {
        }
    }
    struct sigaction *prev = sig == SIGBUS ? &g_prev_bus : &g_prev_segv;
    if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
        prev->sa_sigaction(sig, si, uc);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
    } else {
        sigaction(sig, prev, nullptr);   // the default: returning re-executes the access
    }
}

// ---- the devices: an A100-SXM4's properties ----

static void make_props(int d, size_t mem, cudaDeviceProp *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "tandem emulated CUDA device (A100-like, on the CPU)");
    static const char uuid[] = "tdm-emu-cuda-dev";
    memcpy(p->uuid.bytes, uuid, sizeof p->uuid.bytes);
    p->uuid.bytes[15] = (char)('0' + d);
    p->totalGlobalMem = mem;
    p->sharedMemPerBlock = 48 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 8, p->minor = 0;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = 108;
    p->canMapHostMemory = 1;
    p->maxTexture1D = 131072;
    p->maxTexture2D[0] = 131072, p->maxTexture2D[1] = 65536;
    p->maxTexture3D[0] = p->maxTexture3D[1] = p->maxTexture3D[2] = 16384;
    p->surfaceAlignment = 512;
    p->concurrentKernels = 1;
    p->ECCEnabled = 1;
    p->pciDomainID = 0x7e;   // no such PCI domain: sysfs and NVML know nothing of it
    p->pciBusID = d + 1;
    p->pciDeviceID = 0;
    p->asyncEngineCount = 3;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 40 << 20;
    p->persistingL2CacheMaxSize = 30 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->sharedMemPerMultiprocessor = 164 << 10;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->multiGpuBoardGroupID = d;
    p->concurrentManagedAccess = 1;
    p->computePreemptionSupported = 1;
    p->canUseHostPointerForRegisteredMem = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = 163 << 10;
    p->maxBlocksPerMultiProcessor = 32;
    p->accessPolicyMaxWindowSize = 134213632;
    p->reservedSharedMemPerBlock = 1024;
    p->hostRegisterSupported = 1;
    p->memoryPoolsSupported = 1;
    p->ipcEventSupported = 1;
    p->deviceNumaId = -1;
    p->hostNumaId = -1;
    p->gpuPciDeviceID = 0x20B010DE;   // A100-SXM4-40GB, NVIDIA
}

// A number of decimal digits from lo to hi, then `suffix` ("" none, or K/M/G: x 2^10/20/30).
static bool parse_scaled(const char *s, unsigned long long lo, unsigned long long hi, bool suffix,
                         unsigned long long *out) {
    if (!s || *s < '0' || *s > '9') return false;   // no sign, no space, not empty
    unsigned long long v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (ULLONG_MAX - d) / 10) return false;   // overflow
        v = v * 10 + d;
    }
    int shift = 0;
    if (suffix && *s && !s[1]) {
        switch (*s) {
            case 'k': case 'K': shift = 10; s++; break;
            case 'm': case 'M': shift = 20; s++; break;
            case 'g': case 'G': shift = 30; s++; break;
            default: break;
        }
    }
    if (*s || v > (ULLONG_MAX >> shift)) return false;   // trailing text, or wrapped by the unit
    v <<= shift;
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

}  // namespace rt

bool parse_number(const char *s, unsigned long long lo, unsigned long long hi,
                  unsigned long long *out) {
    return rt::parse_scaled(s, lo, hi, false, out);
}

// env_number (suffix false) and env_bytes (suffix true).
static unsigned long long env_scaled(const char *name, unsigned long long lo,
                                     unsigned long long hi, unsigned long long def, bool suffix) {
    const char *v = getenv(name);
    unsigned long long x;
    if (!v) return def;
    if (rt::parse_scaled(v, lo, hi, suffix, &x)) return x;
    fprintf(stderr, "tandem emu: ignoring %s=%s: not a %s from %llu to %llu%s; using %llu\n", name,
            v, suffix ? "size" : "whole number", lo, hi,
            suffix ? " bytes (digits, then K, M or G for KiB, MiB, GiB)" : "", def);
    return def;
}

unsigned long long env_number(const char *name, unsigned long long lo, unsigned long long hi,
                              unsigned long long def) {
    return env_scaled(name, lo, hi, def, false);
}

unsigned long long env_bytes(const char *name, unsigned long long lo, unsigned long long hi,
                             unsigned long long def) {
    return env_scaled(name, lo, hi, def, true);
}

bool env_flag(const char *name, bool def) {
    const char *v = getenv(name);
    if (!v) return def;
    if (v[0] == '1' && !v[1]) return true;
    if (v[0] == '0' && !v[1]) return false;
    fprintf(stderr, "tandem emu: ignoring %s=%s: expected 0 or 1; using %d\n", name, v, (int)def);
    return def;
}

namespace rt {

// ---- a stuck bit (TANDEM_EMU_FLIP_BIT): a faulty cell of device memory ----
// One bit of one device's memory holds `value` whatever is written to it, as a stuck-at cell of
// a real HBM stack does: writes of the other value are lost, every later read returns `value`.
// The emulator forces it after each piece of device work (a kernel, a copy, a memset, a library
// call: stream_apply below) and after cudaMalloc's fill, so any later kernel or copy reads the
// stuck value; the writing kernel itself may still see its own write (a GPU's L2 may serve that
// read too). Only while the byte lies in a live allocation: nothing may read it otherwise.
struct StuckBit {
    int device = -1;     // -1: none
    size_t offset = 0;   // bytes from the start of the device's address range (the arena)
    int bit = 0;         // 0..7 in that byte
    int value = 0;       // stuck at 0 or 1
    uintptr_t addr = 0;  // the byte
};
static StuckBit g_stuck;

// TANDEM_EMU_FLIP_BIT=OFFSET:BIT[:VALUE] (VALUE 0 or 1, default 0) on TANDEM_EMU_FLIP_DEVICE
// (default 0); malformed: ignored with one line on stderr, as every switch.
static void stuck_bit_parse() {
    const char *v = getenv("TANDEM_EMU_FLIP_BIT");
    if (!v) return;
    char off[32] = "", bit[8] = "", val[8] = "0";
    const char *c1 = strchr(v, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : nullptr;
    unsigned long long o = 0, b = 0, x = 0;
    bool ok = c1 && (size_t)(c1 - v) < sizeof off;
    if (ok) {
        memcpy(off, v, (size_t)(c1 - v));
        const char *be = c2 ? c2 : c1 + strlen(c1);
        ok = (size_t)(be - c1 - 1) < sizeof bit;
        if (ok) memcpy(bit, c1 + 1, (size_t)(be - c1 - 1));
        if (ok && c2) {
            ok = strlen(c2 + 1) < sizeof val;
            if (ok) snprintf(val, sizeof val, "%s", c2 + 1);
        }
    }
    ok = ok && parse_scaled(off, 0, 1ull << 42, true, &o) && parse_number(bit, 0, 7, &b) &&
         parse_number(val, 0, 1, &x);
    if (!ok) {
        say("ignoring TANDEM_EMU_FLIP_BIT=%s: expected OFFSET:BIT[:VALUE] (OFFSET a size in "
            "bytes into the device's address range, K, M or G allowed; BIT 0 to 7; VALUE 0 or "
            "1); no bit is stuck",
            v);
        return;
    }
    g_stuck.device = (int)env_number("TANDEM_EMU_FLIP_DEVICE", 0, kMaxDevices - 1, 0);
    g_stuck.offset = (size_t)o;
    g_stuck.bit = (int)b;
    g_stuck.value = (int)x;
}

void stuck_bit_apply(int device) {
    if (g_stuck.device < 0 || device != g_stuck.device) return;
    Arena *a = g_arenas[device];
    std::lock_guard<std::mutex> lk(a->mu);
    auto *b = block_at(a, g_stuck.addr);
    if (!b || !b->second.live || g_stuck.addr - b->first >= b->second.size) return;
    if (g_scope_count.load() == 0) return;   // the arena is closed: nothing runs that reads it
    volatile unsigned char *p = (volatile unsigned char *)g_stuck.addr;
    const unsigned char m = (unsigned char)(1u << g_stuck.bit);
    *p = g_stuck.value ? (unsigned char)(*p | m) : (unsigned char)(*p & ~m);
}

static void init() {
    g_cfg.devices = (int)env_number("TANDEM_EMU_DEVICES", 1, kMaxDevices, 1);
    g_cfg.mem = (size_t)env_bytes("TANDEM_EMU_MEM", 1, 1ull << 40, 4ull << 30);
    g_cfg.sync = env_flag("TANDEM_EMU_SYNC", false);
    g_cfg.abort_on_fault = env_flag("TANDEM_EMU_ABORT", false);
    stuck_bit_parse();

    for (int d = 0; d < g_cfg.devices; d++) {
        Arena *a = new Arena;
        a->device = d;
        a->cap = g_cfg.mem;
        a->len = round_up(2 * g_cfg.mem + kQuarantineBytes + kLead + (64 << 20), 2 << 20);
        void *m = mmap(nullptr, a->len + kHuge, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "tandem emu: cannot reserve %zu bytes for emulated cuda:%d: %s\n",
                    a->len, d, strerror(errno));
            abort();
        }
        a->base = (char *)round_up((uintptr_t)m, kHuge);
        // Huge pages: mprotect's cost grows with the pages mapped, and the arena is protected
        // and unprotected around device work (300 times faster for 100 MiB in use than with
        // 4 KiB pages). Only a hint: without transparent huge pages it is merely slower.
        madvise(a->base, a->len, MADV_HUGEPAGE);
        a->free[(uintptr_t)a->base + kLead] = a->len - kLead;
        make_props(d, g_cfg.mem, &a->props);
        g_arenas[d] = a;
    }

    if (g_stuck.device >= 0 && g_stuck.device < g_cfg.devices) {
        Arena *a = g_arenas[g_stuck.device];
        if (g_stuck.offset >= a->len) {
            say("ignoring TANDEM_EMU_FLIP_BIT: offset %zu is past emulated cuda:%d's address "
                "range of %zu bytes",
                g_stuck.offset, g_stuck.device, a->len);
            g_stuck.device = -1;
        } else {
            g_stuck.addr = (uintptr_t)a->base + g_stuck.offset;
            say("TANDEM_EMU_FLIP_BIT: bit %d of the byte at %p (emulated cuda:%d + %zu) is stuck "
                "at %d",
                g_stuck.bit, (void *)g_stuck.addr, g_stuck.device, g_stuck.offset, g_stuck.value);
        }
    } else if (g_stuck.device >= 0) {
        say("ignoring TANDEM_EMU_FLIP_DEVICE=%d: there are %d emulated devices", g_stuck.device,
            g_cfg.devices);
        g_stuck.device = -1;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_prev_segv);
    sigaction(SIGBUS, &sa, &g_prev_bus);
}

const Config &config() {
    static std::once_flag once;
    std::call_once(once, init);
    return g_cfg;
}

// ---- device memory: carving and freeing slots ----

// First byte in [p, p+n) that is not v, or n.
static size_t first_not(const unsigned char *p, size_t n, unsigned char v) {
    size_t i = 0;
    uint64_t w = 0x0101010101010101ull * v;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        if (x != w) break;
    }
    for (; i < n; i++)
        if (p[i] != v) return i;
    return n;
}

// Gives back the memory of the whole 2 MiB pages inside [p, p+n) (splitting a huge page would make
// every later mprotect of the arena slower).
static void drop_pages(uintptr_t p, size_t n) {
    uintptr_t from = round_up(p, kHuge), to = (p + n) / kHuge * kHuge;
    if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
}

// Puts a slot back among the free ranges, merged with its neighbours; a->mu held.
static void free_range(Arena *a, uintptr_t p, size_t n) {
    auto next = a->free.lower_bound(p);
    if (next != a->free.end() && p + n == next->first) {
        n += next->second;
        next = a->free.erase(next);
    }
    if (next != a->free.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == p) {
            prev->second += n;
            return;
        }
    }
    a->free[p] = n;
}

// The oldest quarantined slot goes back to the free ranges; a->mu held. Returns a fault message
// (empty when none) for a checked block that was written after cudaFree.
static std::string release_oldest(Arena *a) {
    std::string err;
    uintptr_t p = a->quarantine.front();
    a->quarantine.pop_front();
    Block b = a->blocks[p];
    if (b.filled) {
        size_t at;
        {
            access_scope scope;
            at = first_not((const unsigned char *)p, b.slot, kGuard);
        }
        if (at < b.slot) {
            char msg[400];
            snprintf(msg, sizeof msg,
                     "a %zu-byte allocation on emulated cuda:%d (at %p) was written after "
                     "cudaFree (the byte at offset %zu changed): use after free by a kernel, copy "
                     "or library call",
                     b.size, a->device, (void *)p, at);
            err = msg;
        }
        a->filled_bytes -= b.slot;
    }
    drop_pages(p, b.slot);
    a->quarantine_bytes -= b.slot;
    a->blocks.erase(p);
    free_range(a, p, b.slot);
    return err;
}

static void report_release(int device, const std::string &err) {
    if (!err.empty()) fault_on(device, cudaErrorIllegalAddress, "%s", err.c_str());
}

// A block of `size` bytes on device d, or NULL (out of memory).
static void *carve(int d, size_t size) {
    Arena *a = g_arenas[d];
    size_t slot = round_up(size + red_zone(size), kPage);
    uintptr_t p = 0;
    std::string err;
    {
        std::lock_guard<std::mutex> lk(a->mu);
        if (size > a->cap || a->used + round_up(size, 256) > a->cap) return nullptr;
        for (;;) {
            for (auto it = a->free.begin(); it != a->free.end(); ++it)
                if (it->second >= slot) {
                    p = it->first;
                    size_t rest = it->second - slot;
                    a->free.erase(it);
                    if (rest) a->free[p + slot] = rest;
                    break;
                }
            if (p || a->quarantine.empty()) break;
            std::string e = release_oldest(a);   // no room: take from the quarantine
            if (err.empty()) err = e;
        }
        if (p) {
            a->blocks[p] = Block{size, slot, true, false};
            a->used += round_up(size, 256);
            grow_high(a, p + slot - (uintptr_t)a->base);
        }
    }
    report_release(a->device, err);
    if (!p) return nullptr;
    UNPOISON((void *)p, size);
    {
        access_scope scope;
        memset((void *)p, kFresh, size);
#ifndef TDM_EMU_ASAN
        memset((void *)(p + size), kGuard, slot - size);
#endif
        stuck_bit_apply(d);
    }
    POISON((void *)(p + size), slot - size);
    return (void *)p;
}

// Frees the live block that starts at p on device d (the caller synchronized the device).
static cudaError_t release(int d, void *ptr) {
    Arena *a = g_arenas[d];
    uintptr_t p = (uintptr_t)ptr;
    Block b;
    {
        std::lock_guard<std::mutex> lk(a->mu);
        auto it = a->blocks.find(p);
        if (it == a->blocks.end() || !it->second.live) {
            char where[256];
            describe_locked(a, p, where, sizeof where);
            say("cudaFree(%p): not the start of a live allocation (%s)%s", ptr, where,
                it != a->blocks.end() ? ": freed twice" : "");
            return fail(cudaErrorInvalidValue);
        }
        it->second.live = false;
        a->used -= round_up(it->second.size, 256);
        b = it->second;
    }
    cudaError_t result = cudaSuccess;
    bool filled = false;
#ifdef TDM_EMU_ASAN
    POISON(ptr, b.slot);
    drop_pages(p, b.slot);
#else
    {
        access_scope scope;
        const unsigned char *rz = (const unsigned char *)ptr + b.size;
        size_t at = first_not(rz, b.slot - b.size, kGuard);
        if (at < b.slot - b.size) {
            fault_on(d, cudaErrorIllegalAddress,
                     "cudaFree(%p): the %zu-byte allocation on emulated cuda:%d was written past "
                     "its end (the red-zone byte %zu bytes past the end changed): an "
                     "out-of-bounds write by a kernel, copy or library call",
                     ptr, b.size, d, at);
            result = cudaErrorIllegalAddress;
        }
        std::lock_guard<std::mutex> lk(a->mu);
        filled = b.size <= kFillFreedMax && a->filled_bytes + b.slot <= kFilledBudget;
        if (filled) a->filled_bytes += b.slot;
    }
    {
        // A read of freed memory gets 0xFD bytes, or zeros in the whole 2 MiB pages of a large
        // block, which go back to the system now.
        uintptr_t end = p + b.size, from = round_up(p, kHuge), to = (p + b.slot) / kHuge * kHuge;
        access_scope scope;
        if (filled || to <= from) {
            memset(ptr, kGuard, b.size);
        } else {
            memset(ptr, kGuard, std::min(from, end) - p);
            if (end > to) memset((void *)to, kGuard, end - to);
            drop_pages(p, b.slot);
        }
    }
#endif
    std::string err;
    {
        std::lock_guard<std::mutex> lk(a->mu);
        a->blocks[p].filled = filled;
        a->quarantine.push_back(p);
        a->quarantine_bytes += b.slot;
        while (a->quarantine_bytes > kQuarantineBytes || a->quarantine.size() > kQuarantineCount) {
            std::string e = release_oldest(a);
            if (err.empty()) err = e;
        }
    }
    report_release(a->device, err);
    return result;
}

// ---- pinned host memory: cudaHostAlloc'd blocks and cudaHostRegister'd ranges ----

struct Pinned {
    size_t size;
    int device;        // current at allocation or registration
    bool registered;   // cudaHostRegister (else cudaHostAlloc / cudaMallocHost)
};
static std::mutex g_pinned_mu;
static std::map<uintptr_t, Pinned> *g_pinned = new std::map<uintptr_t, Pinned>;

// The pinned range holding [p, p+n), or end().
static std::map<uintptr_t, Pinned>::iterator pinned_find(uintptr_t p, size_t n) {
    auto it = g_pinned->upper_bound(p);
    if (it == g_pinned->begin()) return g_pinned->end();
    --it;
    return p + n <= it->first + it->second.size ? it : g_pinned->end();
}

// Every device synchronized: pinned memory is freed or unregistered only when no copy uses it.
static void drain_all() {
    for (int d = 0; d < g_cfg.devices; d++) device_drain(d);
}

}  // namespace rt

// ---- emu.h: the runtime's part ----

int device_count() { return rt::config().devices; }

static thread_local int tls_device = 0;

int current_device() { return tls_device; }

void rt::set_current_device(int device) { tls_device = device; }

const cudaDeviceProp &device_props(int device) {
    rt::config();
    if (device < 0 || device >= rt::g_cfg.devices) device = 0;
    return rt::g_arenas[device]->props;
}

bool device_range(const void *p, size_t n, int *device) {
    rt::config();
    int d = rt::arena_device(p);
    if (d < 0) return false;
    rt::Arena *a = rt::g_arenas[d];
    std::lock_guard<std::mutex> lk(a->mu);
    auto *b = rt::block_at(a, (uintptr_t)p);
    if (!b || !b->second.live || (uintptr_t)p + n > b->first + b->second.size ||
        (uintptr_t)p >= b->first + b->second.size + (n == 0))
        return false;
    if (device) *device = d;
    return true;
}

bool pinned_range(const void *p, size_t n) {
    std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
    return rt::pinned_find((uintptr_t)p, n ? n : 1) != rt::g_pinned->end();
}

bool check_device_range(const void *p, size_t n, int device, const char *what) {
    int d = -1;
    if (device_range(p, n, &d) && d == device) return true;
    char why[300];
    if (d >= 0)
        snprintf(why, sizeof why, "it is memory of emulated cuda:%d", d);
    else if (rt::arena_device(p) >= 0)
        rt::describe_range(p, n, why, sizeof why);
    else if (pinned_range(p, n))
        snprintf(why, sizeof why, "it is pinned host memory");
    else
        snprintf(why, sizeof why, "it is not device memory (a host pointer?)");
    fault_on(device, cudaErrorIllegalAddress,
             "%s: the operand [%p, +%zu bytes) is not device memory of emulated cuda:%d: %s", what,
             p, n, device, why);
    return false;
}

static void fault_v(int device, cudaError_t err, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

void fault(cudaError_t err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fault_v(rt::context_device(), err, fmt, ap);
    va_end(ap);
}

void fault_on(int device, cudaError_t err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fault_v(device, err, fmt, ap);
    va_end(ap);
}

static void fault_v(int device, cudaError_t err, const char *fmt, va_list ap) {
    rt::config();
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int printed = rt::g_faults_printed.fetch_add(1);
    if (printed < 20)
        fprintf(stderr, "tandem emu: %s\n", msg);
    else if (printed == 20)
        fprintf(stderr, "tandem emu: (further fault reports are not printed)\n");
    if (rt::g_cfg.abort_on_fault) {
        fprintf(stderr, "tandem emu: TANDEM_EMU_ABORT=1: aborting at the first fault (%s)\n",
                cudaGetErrorName(err));
        abort();
    }
    if (device < 0 || device >= rt::kMaxDevices) device = 0;
    int none = cudaSuccess;
    rt::g_sticky[device].compare_exchange_strong(none, (int)err);
}

void set_last_error(cudaError_t err) { rt::fail(err); }

}  // namespace tdm_emu

// Test-only (not a CUDA API): how many times host code read write-combined pinned memory (a page
// at a time: reads of a page already opened by a read or write are not counted again).
extern "C" unsigned long long tdm_emu_wc_host_reads(void) {
    return tdm_emu::rt::g_wc_reads.load();
}

// ---- the CUDA runtime API: errors, devices, memory ----

using namespace tdm_emu;
using rt::fail;

// After a fault, every call that needs the device returns its error.
#define STICKY()                                            \
    do {                                                    \
        rt::config();                                       \
        if (cudaError_t e_ = rt::sticky_error()) return e_; \
    } while (0)

// cudart 13.0's names and strings (as its cudaGetErrorName and cudaGetErrorString return them).
static const struct {
    int code;
    const char *name, *text;
} error_table[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {4, "cudaErrorCudartUnloading", "driver shutting down"},
    {5, "cudaErrorProfilerDisabled", "profiler disabled while using external profiling tool"},
    {6, "cudaErrorProfilerNotInitialized", "profiler not initialized: call cudaProfilerInitialize()"},
    {7, "cudaErrorProfilerAlreadyStarted", "profiler already started"},
    {8, "cudaErrorProfilerAlreadyStopped", "profiler already stopped"},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {12, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {13, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {16, "cudaErrorInvalidHostPointer", "invalid host pointer"},
    {17, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {18, "cudaErrorInvalidTexture", "invalid texture reference"},
    {19, "cudaErrorInvalidTextureBinding", "texture is not bound to a pointer"},
    {20, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {22, "cudaErrorAddressOfConstant", "invalid address of constant"},
    {23, "cudaErrorTextureFetchFailed", "fetch from texture failed"},
    {24, "cudaErrorTextureNotBound", "cannot fetch from a texture that is not bound"},
    {25, "cudaErrorSynchronizationError", "incorrect use of __syncthreads()"},
    {26, "cudaErrorInvalidFilterSetting", "linear filtering not supported for non-float type"},
    {27, "cudaErrorInvalidNormSetting", "read as normalized float not supported for data type"},
    {28, "cudaErrorMixedDeviceExecution", "device emulation mode and device execution mode cannot be mixed"},
    {31, "cudaErrorNotYetImplemented", "feature not yet implemented"},
    {32, "cudaErrorMemoryValueTooLarge", "memory size or pointer value too large to fit in 32 bit"},
    {34, "cudaErrorStubLibrary", "CUDA driver is a stub library"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {36, "cudaErrorCallRequiresNewerDriver", "API call is not supported in the installed CUDA driver"},
    {37, "cudaErrorInvalidSurface", "invalid surface reference"},
    {43, "cudaErrorDuplicateVariableName", "duplicate global variable looked up by string name"},
    {44, "cudaErrorDuplicateTextureName", "duplicate texture looked up by string name"},
    {45, "cudaErrorDuplicateSurfaceName", "duplicate surface looked up by string name"},
    {46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"},
    {49, "cudaErrorIncompatibleDriverContext", "incompatible driver context"},
    {52, "cudaErrorMissingConfiguration", "__global__ function call is not configured"},
    {53, "cudaErrorPriorLaunchFailure", "unspecified launch failure in prior launch"},
    {65, "cudaErrorLaunchMaxDepthExceeded", "launch would exceed maximum depth of nested launches"},
    {66, "cudaErrorLaunchFileScopedTex", "launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)"},
    {67, "cudaErrorLaunchFileScopedSurf", "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)"},
    {68, "cudaErrorSyncDepthExceeded", "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth"},
    {69, "cudaErrorLaunchPendingCountExceeded", "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {102, "cudaErrorDeviceNotLicensed", "device doesn't have valid Grid license"},
    {103, "cudaErrorSoftwareValidityNotEstablished", "integrity checks failed"},
    {127, "cudaErrorStartupFailure", "startup failure in cuda runtime"},
    {200, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
    {201, "cudaErrorDeviceUninitialized", "invalid device context"},
    {205, "cudaErrorMapBufferObjectFailed", "mapping of buffer object failed"},
    {206, "cudaErrorUnmapBufferObjectFailed", "unmapping of buffer object failed"},
    {207, "cudaErrorArrayIsMapped", "array is mapped"},
    {208, "cudaErrorAlreadyMapped", "resource already mapped"},
    {209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"},
    {210, "cudaErrorAlreadyAcquired", "resource already acquired"},
    {211, "cudaErrorNotMapped", "resource not mapped"},
    {212, "cudaErrorNotMappedAsArray", "resource not mapped as array"},
    {213, "cudaErrorNotMappedAsPointer", "resource not mapped as pointer"},
    {214, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered"},
    {215, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture"},
    {216, "cudaErrorDeviceAlreadyInUse", "exclusive-thread device already in use by a different thread"},
    {217, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
    {218, "cudaErrorInvalidPtx", "a PTX JIT compilation failed"},
    {219, "cudaErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context"},
    {220, "cudaErrorNvlinkUncorrectable", "uncorrectable NVLink error detected during the execution"},
    {221, "cudaErrorJitCompilerNotFound", "PTX JIT compiler library not found"},
    {222, "cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain."},
    {223, "cudaErrorJitCompilationDisabled", "PTX JIT compilation was disabled"},
    {224, "cudaErrorUnsupportedExecAffinity", "the provided execution affinity is not supported"},
    {225, "cudaErrorUnsupportedDevSideSync", "the provided PTX contains unsupported call to cudaDeviceSynchronize"},
    {226, "cudaErrorContained", "Invalid access of peer GPU memory over nvlink or a hardware error"},
    {300, "cudaErrorInvalidSource", "device kernel image is invalid"},
    {301, "cudaErrorFileNotFound", "file not found"},
    {302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found"},
    {303, "cudaErrorSharedObjectInitFailed", "shared object initialization failed"},
    {304, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {402, "cudaErrorLossyQuery", "attempted introspection would be semantically lossy"},
    {500, "cudaErrorSymbolNotFound", "named symbol not found"},
    {600, "cudaErrorNotReady", "device not ready"},
    {700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {703, "cudaErrorLaunchIncompatibleTexturing", "launch uses incompatible texturing mode"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {708, "cudaErrorSetOnActiveProcess", "cannot set while device is active in this process"},
    {709, "cudaErrorContextIsDestroyed", "context is destroyed"},
    {710, "cudaErrorAssert", "device-side assert triggered"},
    {711, "cudaErrorTooManyPeers", "peer mapping resources exhausted"},
    {712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {714, "cudaErrorHardwareStackError", "hardware stack error"},
    {715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {716, "cudaErrorMisalignedAddress", "misaligned address"},
    {717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space"},
    {718, "cudaErrorInvalidPc", "invalid program counter"},
    {719, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
    {721, "cudaErrorTensorMemoryLeak", "tensor memory not completely freed"},
    {800, "cudaErrorNotPermitted", "operation not permitted"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {802, "cudaErrorSystemNotReady", "system not yet initialized"},
    {803, "cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination"},
    {804, "cudaErrorCompatNotSupportedOnDevice", "forward compatibility was attempted on non supported HW"},
    {805, "cudaErrorMpsConnectionFailed", "MPS client failed to connect to the MPS control daemon or the MPS server"},
    {806, "cudaErrorMpsRpcFailure", "the remote procedural call between the MPS server and the MPS client failed"},
    {807, "cudaErrorMpsServerNotReady", "MPS server is not ready to accept new MPS client requests"},
    {808, "cudaErrorMpsMaxClientsReached", "the hardware resources required to create MPS client have been exhausted"},
    {809, "cudaErrorMpsMaxConnectionsReached", "the hardware resources required to support device connections have been exhausted"},
    {810, "cudaErrorMpsClientTerminated", "the MPS client has been terminated by the server"},
    {811, "cudaErrorCdpNotSupported", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"},
    {812, "cudaErrorCdpVersionMismatch", "unsupported interaction between different versions of CUDA Dynamic Parallelism"},
    {900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {906, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
    {907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
    {909, "cudaErrorTimeout", "wait operation timed out"},
    {910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {911, "cudaErrorExternalDevice", "an async error has occured in external entity outside of CUDA"},
    {912, "cudaErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration"},
    {913, "cudaErrorFunctionNotLoaded", "the function handle is not loaded when calling an API that requires a loaded function"},
    {914, "cudaErrorInvalidResourceType", "one or more resources passed in are not valid resource types for the operation"},
    {915, "cudaErrorInvalidResourceConfiguration", "one or more resources are insufficient or non-applicable for the operation"},
    {999, "cudaErrorUnknown", "unknown error"},
};

extern "C" {

const char *cudaGetErrorName(cudaError_t error) {
    for (const auto &e : error_table)
        if (e.code == (int)error) return e.name;
    return "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t error) {
    for (const auto &e : error_table)
        if (e.code == (int)error) return e.text;
    return "unrecognized error code";
}

// The sticky error is not cleared: every later call returns it (as after a fault on a GPU).
cudaError_t cudaGetLastError(void) {
    rt::config();
    if (cudaError_t e = rt::sticky_error()) return e;
    cudaError_t e = rt::tls_last;
    rt::tls_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    rt::config();
    if (cudaError_t e = rt::sticky_error()) return e;
    return rt::tls_last;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return fail(cudaErrorInvalidValue);
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
    if (!v) return fail(cudaErrorInvalidValue);
    *v = 13000;
    return cudaSuccess;
}

// ---- devices ----

cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return fail(cudaErrorInvalidValue);
    *count = device_count();
    return cudaSuccess;
}

// Switching away from a faulted device works (its error is its context's); to one, it is reported.
cudaError_t cudaSetDevice(int device) {
    rt::config();
    if (device < 0 || device >= rt::g_cfg.devices) return fail(cudaErrorInvalidDevice);
    tls_device = device;
    return rt::sticky_error(device);
}

cudaError_t cudaGetDevice(int *device) {
    if (!device) return fail(cudaErrorInvalidValue);
    *device = tls_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    rt::config();
    if (!prop) return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= rt::g_cfg.devices) return fail(cudaErrorInvalidDevice);
    *prop = device_props(device);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    rt::config();
    if (!value) return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= rt::g_cfg.devices) return fail(cudaErrorInvalidDevice);
    const cudaDeviceProp &p = device_props(device);
    int v;
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock: v = p.maxThreadsPerBlock; break;
        case cudaDevAttrMaxBlockDimX: v = p.maxThreadsDim[0]; break;
        case cudaDevAttrMaxBlockDimY: v = p.maxThreadsDim[1]; break;
        case cudaDevAttrMaxBlockDimZ: v = p.maxThreadsDim[2]; break;
        case cudaDevAttrMaxGridDimX: v = p.maxGridSize[0]; break;
        case cudaDevAttrMaxGridDimY: v = p.maxGridSize[1]; break;
        case cudaDevAttrMaxGridDimZ: v = p.maxGridSize[2]; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: v = (int)p.sharedMemPerBlock; break;
        case cudaDevAttrTotalConstantMemory: v = (int)p.totalConstMem; break;
        case cudaDevAttrWarpSize: v = p.warpSize; break;
        case cudaDevAttrMaxPitch: v = (int)p.memPitch; break;
        case cudaDevAttrMaxRegistersPerBlock: v = p.regsPerBlock; break;
        case cudaDevAttrClockRate: v = 1410000; break;         // kHz: an A100's boost clock
        case cudaDevAttrMemoryClockRate: v = 1215000; break;   // kHz: its HBM2
        case cudaDevAttrTextureAlignment: v = (int)p.textureAlignment; break;
        case cudaDevAttrTexturePitchAlignment: v = (int)p.texturePitchAlignment; break;
        case cudaDevAttrGpuOverlap: v = 1; break;
        case cudaDevAttrMultiProcessorCount: v = p.multiProcessorCount; break;
        case cudaDevAttrKernelExecTimeout: v = 0; break;
        case cudaDevAttrIntegrated: v = p.integrated; break;
        case cudaDevAttrCanMapHostMemory: v = p.canMapHostMemory; break;
        case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
        case cudaDevAttrConcurrentKernels: v = p.concurrentKernels; break;
        case cudaDevAttrEccEnabled: v = p.ECCEnabled; break;
        case cudaDevAttrPciBusId: v = p.pciBusID; break;
        case cudaDevAttrPciDeviceId: v = p.pciDeviceID; break;
        case cudaDevAttrPciDomainId: v = p.pciDomainID; break;
        case cudaDevAttrTccDriver: v = 0; break;
        case cudaDevAttrGlobalMemoryBusWidth: v = p.memoryBusWidth; break;
        case cudaDevAttrL2CacheSize: v = p.l2CacheSize; break;
        case cudaDevAttrMaxThreadsPerMultiProcessor: v = p.maxThreadsPerMultiProcessor; break;
        case cudaDevAttrAsyncEngineCount: v = p.asyncEngineCount; break;
        case cudaDevAttrUnifiedAddressing: v = p.unifiedAddressing; break;
        case cudaDevAttrComputeCapabilityMajor: v = p.major; break;
        case cudaDevAttrComputeCapabilityMinor: v = p.minor; break;
        case cudaDevAttrStreamPrioritiesSupported: v = p.streamPrioritiesSupported; break;
        case cudaDevAttrGlobalL1CacheSupported: v = p.globalL1CacheSupported; break;
        case cudaDevAttrLocalL1CacheSupported: v = p.localL1CacheSupported; break;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
            v = (int)p.sharedMemPerMultiprocessor;
            break;
        case cudaDevAttrMaxRegistersPerMultiprocessor: v = p.regsPerMultiprocessor; break;
        case cudaDevAttrManagedMemory: v = p.managedMemory; break;
        case cudaDevAttrIsMultiGpuBoard: v = p.isMultiGpuBoard; break;
        case cudaDevAttrMultiGpuBoardGroupID: v = p.multiGpuBoardGroupID; break;
        case cudaDevAttrHostNativeAtomicSupported: v = p.hostNativeAtomicSupported; break;
        case cudaDevAttrPageableMemoryAccess: v = p.pageableMemoryAccess; break;
        case cudaDevAttrConcurrentManagedAccess: v = p.concurrentManagedAccess; break;
        case cudaDevAttrComputePreemptionSupported: v = p.computePreemptionSupported; break;
        case cudaDevAttrCanUseHostPointerForRegisteredMem:
            v = p.canUseHostPointerForRegisteredMem;
            break;
        case cudaDevAttrCooperativeLaunch: v = p.cooperativeLaunch; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = (int)p.sharedMemPerBlockOptin; break;
        case cudaDevAttrMaxBlocksPerMultiprocessor: v = p.maxBlocksPerMultiProcessor; break;
        case cudaDevAttrMaxPersistingL2CacheSize: v = p.persistingL2CacheMaxSize; break;
        case cudaDevAttrMaxAccessPolicyWindowSize: v = p.accessPolicyMaxWindowSize; break;
        case cudaDevAttrReservedSharedMemoryPerBlock: v = (int)p.reservedSharedMemPerBlock; break;
        case cudaDevAttrHostRegisterSupported: v = p.hostRegisterSupported; break;
        case cudaDevAttrMemoryPoolsSupported: v = p.memoryPoolsSupported; break;
        case cudaDevAttrGPUDirectRDMASupported: v = 0; break;
        case cudaDevAttrClusterLaunch: v = 0; break;   // sm_80: no thread-block clusters
        default:
            rt::say("cudaDeviceGetAttribute: attribute %d is not emulated", (int)attr);
            return fail(cudaErrorInvalidValue);
    }
    *value = v;
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
    rt::config();
    if (!can) return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= rt::g_cfg.devices || peer < 0 || peer >= rt::g_cfg.devices)
        return fail(cudaErrorInvalidDevice);
    *can = device != peer;
    return cudaSuccess;
}

static std::mutex peer_mu;
static bool peer_enabled[rt::kMaxDevices][rt::kMaxDevices];

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
    STICKY();
    if (flags) return fail(cudaErrorInvalidValue);
    if (peer < 0 || peer >= rt::g_cfg.devices || peer == tls_device)
        return fail(cudaErrorInvalidDevice);
    std::lock_guard<std::mutex> lk(peer_mu);
    if (peer_enabled[tls_device][peer]) return fail(cudaErrorPeerAccessAlreadyEnabled);
    peer_enabled[tls_device][peer] = true;
    return cudaSuccess;
}

extern "C++" {   // runtime_internal.h's (this part of the file is extern "C")
bool tdm_emu::rt::peer_access(int device, int peer) {
    std::lock_guard<std::mutex> lk(peer_mu);
    return device == peer || peer_enabled[device][peer];
}
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
    STICKY();
    if (peer < 0 || peer >= rt::g_cfg.devices) return fail(cudaErrorInvalidDevice);
    std::lock_guard<std::mutex> lk(peer_mu);
    if (!peer_enabled[tls_device][peer]) return fail(cudaErrorPeerAccessNotEnabled);
    peer_enabled[tls_device][peer] = false;
    return cudaSuccess;
}

// Kernel attributes: the dynamic shared memory limit goes to the launcher (exec.cc).
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    STICKY();
    if (!func) return fail(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        int optin = (int)device_props(tls_device).sharedMemPerBlockOptin;
        if (value < 0 || value > optin) {
            rt::say("cudaFuncSetAttribute: MaxDynamicSharedMemorySize %d is past the device's "
                    "%d bytes per block",
                    value, optin);
            return fail(cudaErrorInvalidValue);
        }
        set_max_dynamic_smem(func, value);
    } else if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
        if (value < -1 || value > 100) return fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

// ---- device memory ----

// cudaMalloc and cudaFree while a collective of the device is queued or waits for its peers: a
// fault (nccl.cc's header comment says why), naming the call and the communicator.
static cudaError_t refuse_while_collective(const char *api, int device) {
    unsigned long long id = 0;
    int rank = -1;
    const int n = collectives_pending(device, &id, &rank);
    if (n == 0) return cudaSuccess;
    fault_on(device, cudaErrorNotPermitted,
             "%s on cuda:%d while %d NCCL collective(s) of that device (rank %d of communicator "
             "id #%llu) are queued or waiting for their peers: a device memory allocation or "
             "free synchronizes the device behind a collective that waits for other ranks, "
             "which can deadlock (NCCL docs, usage/communicators.html: \"Using multiple NCCL "
             "communicators concurrently\"); on a GPU this can hang. Wait for the collective "
             "(its stream or an event) first",
             api, device, n, rank, id);
    return cudaErrorNotPermitted;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
    STICKY();
    if (!ptr) return fail(cudaErrorInvalidValue);
    if (cudaError_t e = rt::unsafe_call("cudaMalloc")) return fail(e);
    if (cudaError_t e = refuse_while_collective("cudaMalloc", tls_device)) return e;
    *ptr = nullptr;
    if (size == 0) return cudaSuccess;
    void *p = rt::carve(tls_device, size);
    if (!p) return fail(cudaErrorMemoryAllocation);
    *ptr = p;
    return cudaSuccess;
}

// Synchronizes the allocation's device first, as cudaFree does.
cudaError_t cudaFree(void *ptr) {
    STICKY();
    if (!ptr) return cudaSuccess;
    if (cudaError_t e = rt::unsafe_call("cudaFree")) return fail(e);
    int d = rt::arena_device(ptr);
    if (d < 0) {
        rt::say("cudaFree(%p): not device memory%s", ptr,
                pinned_range(ptr, 1) ? " (pinned host memory: cudaFreeHost)" : "");
        return fail(cudaErrorInvalidValue);
    }
    if (cudaError_t e = refuse_while_collective("cudaFree", d)) return e;
    rt::device_drain(d);
    return rt::release(d, ptr);
}

// Where TANDEM_EMU_FLIP_BIT's stuck cell is, for tests (not a CUDA API): the byte's address
// (0: no bit is stuck), its device, the bit and the value it is stuck at.
unsigned long long tdm_emu_stuck_bit(int *device, int *bit, int *value) {
    rt::config();
    if (rt::g_stuck.device < 0) return 0;
    if (device) *device = rt::g_stuck.device;
    if (bit) *bit = rt::g_stuck.bit;
    if (value) *value = rt::g_stuck.value;
    return (unsigned long long)rt::g_stuck.addr;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    STICKY();
    if (!free_bytes || !total) return fail(cudaErrorInvalidValue);
    rt::Arena *a = rt::g_arenas[tls_device];
    std::lock_guard<std::mutex> lk(a->mu);
    *free_bytes = a->cap - a->used;
    *total = a->cap;
    return cudaSuccess;
}

// ---- pinned host memory ----

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
    STICKY();
    if (!ptr) return fail(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
                            cudaHostAllocWriteCombined))
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = rt::unsafe_call("cudaHostAlloc")) return fail(e);
    *ptr = nullptr;
    if (size == 0) return cudaSuccess;
    // heap memory (page-aligned): under ASan its bounds are checked like any heap block's.
    // Write-combined: whole pages (the slack poisoned), watched for host reads (rt::protect_wc).
    const bool wc = (flags & cudaHostAllocWriteCombined) != 0;
    const size_t bytes = wc ? rt::round_up(size, rt::kPage) : size;
    void *p = nullptr;
    if (posix_memalign(&p, rt::kPage, bytes) != 0) return fail(cudaErrorMemoryAllocation);
    if (wc) {
        POISON((char *)p + size, bytes - size);
        std::lock_guard<std::mutex> lk(rt::g_scope_mu);
        for (int i = 0; i < rt::kMaxWc; i++)
            if (!rt::g_wc_lo[i].load()) {
                rt::g_wc_hi[i].store((uintptr_t)p + bytes);
                rt::g_wc_lo[i].store((uintptr_t)p);
                if (rt::g_scope_count.load() == 0 && mprotect(p, bytes, PROT_NONE) != 0) abort();
                break;
            }
    }
    std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
    (*rt::g_pinned)[(uintptr_t)p] = rt::Pinned{size, tls_device, false};
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr) {
    STICKY();
    if (!ptr) return cudaSuccess;
    if (cudaError_t e = rt::unsafe_call("cudaFreeHost")) return fail(e);
    {
        std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
        auto it = rt::g_pinned->find((uintptr_t)ptr);
        if (it == rt::g_pinned->end() || it->second.registered) {
            rt::say("cudaFreeHost(%p): not memory of cudaHostAlloc / cudaMallocHost%s", ptr,
                    it != rt::g_pinned->end() ? " (registered: cudaHostUnregister)" : "");
            return fail(cudaErrorInvalidValue);
        }
    }
    rt::drain_all();
    {
        std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
        rt::g_pinned->erase((uintptr_t)ptr);
    }
    {
        std::lock_guard<std::mutex> lk(rt::g_scope_mu);   // no longer watched: open for free()
        for (int i = 0; i < rt::kMaxWc; i++)
            if (rt::g_wc_lo[i].load() == (uintptr_t)ptr) {
                const uintptr_t hi = rt::g_wc_hi[i].load();
                rt::g_wc_lo[i].store(0);
                if (mprotect(ptr, hi - (uintptr_t)ptr, PROT_READ | PROT_WRITE) != 0) abort();
                UNPOISON(ptr, hi - (uintptr_t)ptr);
            }
    }
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    STICKY();
    if (!ptr || size == 0 ||
        (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
                             cudaHostRegisterIoMemory | cudaHostRegisterReadOnly)))
        return fail(cudaErrorInvalidValue);
    if (rt::arena_device(ptr) >= 0) {
        rt::say("cudaHostRegister(%p): device memory cannot be registered", ptr);
        return fail(cudaErrorInvalidValue);
    }
    if (cudaError_t e = rt::unsafe_call("cudaHostRegister")) return fail(e);
    std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
    uintptr_t p = (uintptr_t)ptr;
    auto it = rt::g_pinned->lower_bound(p);   // overlap with the next range or the previous one
    bool overlap = it != rt::g_pinned->end() && it->first < p + size;
    if (it != rt::g_pinned->begin()) {
        auto prev = std::prev(it);
        overlap = overlap || prev->first + prev->second.size > p;
    }
    if (overlap) return fail(cudaErrorHostMemoryAlreadyRegistered);
    (*rt::g_pinned)[p] = rt::Pinned{size, tls_device, true};
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr) {
    STICKY();
    if (!ptr) return fail(cudaErrorInvalidValue);
    if (cudaError_t e = rt::unsafe_call("cudaHostUnregister")) return fail(e);
    {
        std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
        auto it = rt::g_pinned->find((uintptr_t)ptr);
        if (it == rt::g_pinned->end() || !it->second.registered)
            return fail(cudaErrorHostMemoryNotRegistered);
    }
    rt::drain_all();
    std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
    rt::g_pinned->erase((uintptr_t)ptr);
    return cudaSuccess;
}

// With unified addressing, pinned memory is mapped at its host address.
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags) {
    STICKY();
    if (!dev || flags) return fail(cudaErrorInvalidValue);
    if (!pinned_range(host, 1)) return fail(cudaErrorInvalidValue);
    *dev = host;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *ptr) {
    STICKY();
    if (!attr) return fail(cudaErrorInvalidValue);
    memset(attr, 0, sizeof *attr);
    int d = -1;
    if (device_range(ptr, 1, &d)) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = d;
        attr->devicePointer = (void *)ptr;
        return cudaSuccess;
    }
    {
        std::lock_guard<std::mutex> lk(rt::g_pinned_mu);
        auto it = rt::pinned_find((uintptr_t)ptr, 1);
        if (it != rt::g_pinned->end()) {
            attr->type = cudaMemoryTypeHost;
            attr->device = it->second.device;
            attr->devicePointer = (void *)ptr;
            attr->hostPointer = (void *)ptr;
            return cudaSuccess;
        }
    }
    attr->type = cudaMemoryTypeUnregistered;   // memory CUDA does not know: no error
    attr->device = -2;
    attr->hostPointer = (void *)ptr;
    return cudaSuccess;
}

}  // extern "C"
