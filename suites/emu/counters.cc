/* counters.cc — what each kernel moves and issues on the emulated device, counted as Nsight
 * Compute counts it on a GPU (docs/EMULATION.md "Counters"). Off unless TANDEM_EMU_COUNTERS
 * names a file (written at exit) or a test turns it on (tdm_emu_counters_enable).
 *
 * How accesses are seen. In the sanitized emulated build, the kernels' .cu files (and the
 * emulator's kernel tests) are compiled with `--param asan-instrumentation-with-call-threshold=0`:
 * AddressSanitizer then checks each load and store through a call to __asan_load<N> /
 * __asan_store<N> (N = 1, 2, 4, 8, 16, or __asan_loadN with a size) instead of inline code. This
 * file defines those functions: each records the access while a counted block runs on the calling
 * OS thread, then makes AddressSanitizer's check (below), so every check still happens. The same
 * .cu files the GPU build compiles are counted, with no change to them.
 *
 * Requests. A warp's load or store instruction issues one request for its active lanes. Here the
 * threads of a block run one at a time, so the instruction is identified by the call's return
 * address (the instrumented instruction's place in the kernel's code) and the k-th time lane l
 * executes it is the k-th request of that instruction in l's warp: lanes that run a loop the same
 * number of times share each iteration's request, and after a divergent branch the lanes that
 * take it form requests of their own, as SIMT hardware issues them. (Two branches that call one
 * non-inlined device function from different places are merged into one request here, where a
 * GPU issues two: none of tandem's kernels does that with memory accesses on both sides.)
 *
 * What a request costs:
 *   global memory: the distinct 32-byte sectors its lanes' bytes touch (ncu's
 *     l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum against ..._requests_...);
 *   shared memory: 32 banks of 4 bytes. A request is served in phases (all 32 lanes for 4-byte
 *     and narrower accesses, half-warps for 8 bytes, quarter-warps for 16), each phase in as many
 *     wavefronts as the most distinct 4-byte words any one bank holds among its lanes' bytes (the
 *     same word for several lanes is one broadcast). Bank conflicts = wavefronts - phases (ncu's
 *     l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum), ways = the most wavefronts
 *     of a phase;
 *   ldmatrix: per 8x8 matrix, its 8 rows of 16 bytes as one phase (tensor_core.cc calls
 *     counters_tensor_op); mma.sync.m16n8k16: 2*16*8*16 = 4096 FLOPs each. cp.async is not
 *     emulated (no kernel uses it): counted 0.
 * Atomics count once each (cuda_emu.h's atomic_scope); their own accesses are not loads or
 * stores. Accesses outside device memory and shared memory (a thread's locals, kernel
 * parameters) are not counted. Also per launch: the distinct bytes each kernel reads and writes
 * in global memory (what a perfect cache would move to and from DRAM).
 *
 * Cost: a counted kernel keeps a record of every access of a block (24 bytes each) and runs
 * several times slower; uncounted, each access pays one extra call. */
#include "runtime_internal.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_emu.h"

namespace tdm_emu {

__thread int tl_watch;

namespace {

enum space_kind : uint8_t { sp_global_ld, sp_global_st, sp_shared_ld, sp_shared_st };

struct access {  // one lane's access
    const void *pc;
    uintptr_t addr;
    uint32_t k;       // the k-th execution of pc by this thread
    uint32_t thread;  // in the block (x fastest): warp = thread / 32, lane = thread % 32
    uint16_t size;
    uint8_t kind;  // space_kind
};

struct interval {
    uintptr_t lo, hi;
};

struct block_ctx {
    struct launch_ctx *launch = nullptr;
    std::vector<access> acc;
    std::unordered_map<uint64_t, uint32_t> occ;  // (thread, pc) -> executions so far
    kernel_counters c;
};

struct launch_ctx {
    std::string kernel;
    std::mutex mu;
    kernel_counters c;
    std::vector<interval> ld, st;  // global bytes read and written
};

std::atomic<bool> g_on{false};
std::mutex g_mu;                                    // g_kernels
std::map<std::string, kernel_counters> *g_kernels;  // by kernel name, summed over launches
std::string *g_file;                                // TANDEM_EMU_COUNTERS
__thread block_ctx *tl_block;
__thread int tl_quiet;  // inside an atomic (atomic_scope): its accesses are not loads or stores

typedef void (*check_n_fn)(void *, long);

void *real(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "tandem emu: counters: AddressSanitizer's %s is missing\n", name);
        abort();
    }
    return f;
}

// Where a kernel's access goes: device memory (global), a __shared__ variable of the block, or
// neither (a thread's locals, the kernel's parameters: not counted).
enum memory_space { space_global, space_shared, space_other };
memory_space space_of(const void *p) {
    return rt::arena_device(p) >= 0 ? space_global : shared_address(p) ? space_shared : space_other;
}

void record(const void *pc, const void *p, size_t size, bool store) {
    block_ctx *b = tl_block;
    if (!b || size == 0) return;
    const memory_space space = space_of(p);
    if (space == space_other) return;
    const uint8_t kind = space == space_global ? (store ? sp_global_st : sp_global_ld)
                                               : (store ? sp_shared_st : sp_shared_ld);
    const int t = current_block_thread();
    if (t < 0) return;
    const uint64_t key = (uint64_t)(uintptr_t)pc * 1024 + (uint64_t)t;  // t < 1024
    const uint32_t k = b->occ[key]++;
    b->acc.push_back(
        {pc, (uintptr_t)p, k, (uint32_t)t, (uint16_t)(size > 65535 ? 65535 : size), kind});
}

// An instrumented access while a watched block runs: to the counters, to racecheck.
void observe(const void *pc, const void *p, size_t size, bool store) {
    if (tl_quiet) return;
    if (tl_watch & 1) record(pc, p, size, store);
    if (tl_watch & 2) racecheck_access(p, size, store, current_block_thread());
}

// Wavefronts of one shared-memory phase: the most distinct words any bank holds.
unsigned phase_wavefronts(const access *const *lanes, size_t n) {
    std::vector<uint64_t> words;  // (bank, word) pairs, deduplicated
    for (size_t i = 0; i < n; i++)
        for (uintptr_t w = lanes[i]->addr / 4; w <= (lanes[i]->addr + lanes[i]->size - 1) / 4; w++)
            words.push_back(w);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    unsigned per_bank[32] = {0}, most = 0;
    for (uint64_t w : words) most = std::max(most, ++per_bank[w % 32]);
    return most;
}

// One request (the lanes of a warp at the k-th execution of one instruction) into c.
void count_request(kernel_counters &c, const access *const *lanes, size_t n) {
    const uint8_t kind = lanes[0]->kind;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += lanes[i]->size;
    if (kind == sp_global_ld || kind == sp_global_st) {
        std::vector<uintptr_t> sectors;
        for (size_t i = 0; i < n; i++)
            for (uintptr_t s = lanes[i]->addr / 32; s <= (lanes[i]->addr + lanes[i]->size - 1) / 32;
                 s++)
                sectors.push_back(s);
        std::sort(sectors.begin(), sectors.end());
        const size_t distinct = std::unique(sectors.begin(), sectors.end()) - sectors.begin();
        mem_counters &m = kind == sp_global_ld ? c.global_ld : c.global_st;
        m.requests++;
        m.sectors += distinct;
        m.bytes += bytes;
        return;
    }
    // Shared: phases by the widest access of the request (lanes issue one width per instruction).
    unsigned width = 0;
    for (size_t i = 0; i < n; i++) width = std::max<unsigned>(width, lanes[i]->size);
    const unsigned per_phase = width <= 4 ? 32 : width <= 8 ? 16 : 8;
    shared_counters &s = kind == sp_shared_ld ? c.shared_ld : c.shared_st;
    s.requests++;
    s.bytes += bytes;
    size_t i = 0;
    while (i < n) {  // lanes sorted by thread: a phase is a run of lanes / per_phase
        const unsigned phase = (lanes[i]->thread % 32) / per_phase;
        size_t j = i;
        while (j < n && (lanes[j]->thread % 32) / per_phase == phase) j++;
        const unsigned w = phase_wavefronts(lanes + i, j - i);
        s.wavefronts += w;
        s.conflicts += w - 1;
        s.max_ways = std::max<uint64_t>(s.max_ways, w);
        i = j;
    }
}

// A block's accesses into its requests, and its global intervals into the launch's.
void fold_block(block_ctx &b, std::vector<interval> &ld, std::vector<interval> &st) {
    std::vector<const access *> v(b.acc.size());
    for (size_t i = 0; i < v.size(); i++) v[i] = &b.acc[i];
    std::sort(v.begin(), v.end(), [](const access *x, const access *y) {
        if (x->kind != y->kind) return x->kind < y->kind;
        if (x->thread / 32 != y->thread / 32) return x->thread / 32 < y->thread / 32;
        if (x->pc != y->pc) return x->pc < y->pc;
        if (x->k != y->k) return x->k < y->k;
        return x->thread < y->thread;
    });
    size_t i = 0;
    while (i < v.size()) {
        size_t j = i + 1;
        while (j < v.size() && v[j]->kind == v[i]->kind && v[j]->thread / 32 == v[i]->thread / 32 &&
               v[j]->pc == v[i]->pc && v[j]->k == v[i]->k)
            j++;
        count_request(b.c, v.data() + i, j - i);
        i = j;
    }
    for (const access &a : b.acc)
        if (a.kind == sp_global_ld)
            ld.push_back({a.addr, a.addr + a.size});
        else if (a.kind == sp_global_st)
            st.push_back({a.addr, a.addr + a.size});
}

uint64_t union_bytes(std::vector<interval> &v) {
    std::sort(v.begin(), v.end(), [](const interval &a, const interval &b) { return a.lo < b.lo; });
    uint64_t total = 0;
    uintptr_t lo = 0, hi = 0;
    bool open = false;
    for (const interval &x : v) {
        if (open && x.lo <= hi) {
            hi = std::max(hi, x.hi);
            continue;
        }
        if (open) total += hi - lo;
        lo = x.lo, hi = x.hi, open = true;
    }
    if (open) total += hi - lo;
    return total;
}

void add_mem(mem_counters &a, const mem_counters &b) {
    a.requests += b.requests, a.sectors += b.sectors, a.bytes += b.bytes, a.unique += b.unique;
}
void add_shared(shared_counters &a, const shared_counters &b) {
    a.requests += b.requests, a.wavefronts += b.wavefronts, a.conflicts += b.conflicts;
    a.bytes += b.bytes, a.max_ways = std::max(a.max_ways, b.max_ways);
}

cJSON *mem_json(const mem_counters &m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "requests", (double)m.requests);
    cJSON_AddNumberToObject(o, "sectors", (double)m.sectors);
    cJSON_AddNumberToObject(o, "sectors_per_request",
                            m.requests ? (double)m.sectors / (double)m.requests : 0);
    cJSON_AddNumberToObject(o, "bytes_requested", (double)m.bytes);
    cJSON_AddNumberToObject(o, "bytes_unique", (double)m.unique);
    return o;
}
cJSON *shared_json(const shared_counters &s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "requests", (double)s.requests);
    cJSON_AddNumberToObject(o, "wavefronts", (double)s.wavefronts);
    cJSON_AddNumberToObject(o, "bank_conflicts", (double)s.conflicts);
    cJSON_AddNumberToObject(o, "max_ways", (double)s.max_ways);
    cJSON_AddNumberToObject(o, "bytes_requested", (double)s.bytes);
    return o;
}

char *counters_json_text() {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "what",
                            "counted on the emulated CUDA device (docs/EMULATION.md \"Counters\"): "
                            "instructions and memory traffic of tandem's kernels, never a time");
    cJSON *ks = cJSON_AddArrayToObject(root, "kernels");
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (g_kernels)
            for (const auto &kv : *g_kernels) {
                const kernel_counters &c = kv.second;
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "name", kv.first.c_str());
                cJSON_AddNumberToObject(o, "launches", (double)c.launches);
                cJSON_AddNumberToObject(o, "blocks", (double)c.blocks);
                cJSON_AddNumberToObject(o, "threads", (double)c.threads);
                cJSON_AddItemToObject(o, "global_load", mem_json(c.global_ld));
                cJSON_AddItemToObject(o, "global_store", mem_json(c.global_st));
                cJSON_AddItemToObject(o, "shared_load", shared_json(c.shared_ld));
                cJSON_AddItemToObject(o, "shared_store", shared_json(c.shared_st));
                cJSON *a = cJSON_AddObjectToObject(o, "atomics");
                cJSON_AddNumberToObject(a, "global", (double)c.atom_global);
                cJSON_AddNumberToObject(a, "shared", (double)c.atom_shared);
                cJSON *t = cJSON_AddObjectToObject(o, "tensor_core");
                cJSON_AddNumberToObject(t, "mma", (double)c.mma);
                cJSON_AddNumberToObject(t, "flops", (double)c.mma * 4096.0);
                cJSON_AddNumberToObject(t, "ldmatrix", (double)c.ldmatrix);
                cJSON_AddItemToObject(t, "ldmatrix_shared", shared_json(c.ldmatrix_sh));
                cJSON_AddNumberToObject(t, "cp_async", 0);
                cJSON_AddItemToArray(ks, o);
            }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

// At exit: TANDEM_EMU_COUNTERS's file, written whole (temp + rename) or not at all.
void write_file() {
    if (!g_file) return;
    char *text = counters_json_text();
    std::string tmp = *g_file + ".tmp";
    FILE *f = text ? fopen(tmp.c_str(), "w") : nullptr;
    bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f) ok = fclose(f) == 0 && ok;
    if (ok) ok = rename(tmp.c_str(), g_file->c_str()) == 0;
    if (!ok) {
        fprintf(stderr, "tandem emu: TANDEM_EMU_COUNTERS: cannot write %s\n", g_file->c_str());
        unlink(tmp.c_str());
    }
    cJSON_free(text);
}

struct env_init {
    env_init() {
        const char *f = getenv("TANDEM_EMU_COUNTERS");
        if (!f || !*f) return;
        g_file = new std::string(f);
        g_on.store(true);
#if !defined(__SANITIZE_ADDRESS__)
        fprintf(stderr,
                "tandem emu: TANDEM_EMU_COUNTERS: this build is not under AddressSanitizer, "
                "whose calls the counters see: no load or store will be counted (build "
                "with the emu preset)\n");
#endif
        atexit(write_file);
    }
} g_env_init;

}  // namespace

bool counters_on() {
    return g_on.load(std::memory_order_relaxed);
}

void *counters_launch_begin(const char *kernel, dim3 grid, dim3 block) {
    launch_ctx *l = new launch_ctx;
    l->kernel = kernel;
    l->c.launches = 1;
    l->c.blocks = (uint64_t)grid.x * grid.y * grid.z;
    l->c.threads = l->c.blocks * block.x * block.y * block.z;
    return l;
}

void counters_launch_end(void *launch) {
    launch_ctx *l = (launch_ctx *)launch;
    l->c.global_ld.unique = union_bytes(l->ld);
    l->c.global_st.unique = union_bytes(l->st);
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (!g_kernels) g_kernels = new std::map<std::string, kernel_counters>;
        kernel_counters &k = (*g_kernels)[l->kernel];
        counters_add(k, l->c);
    }
    delete l;
}

void counters_block_begin(void *launch) {
    static thread_local std::unique_ptr<block_ctx> owner;  // reused: the vectors keep their
    if (!owner) owner.reset(new block_ctx);                // capacity; freed as the thread ends
    block_ctx *mine = owner.get();
    mine->launch = (launch_ctx *)launch;
    mine->acc.clear();
    mine->occ.clear();
    mine->c = kernel_counters();
    tl_block = mine;
    tl_watch |= 1;
}

void counters_block_end() {
    block_ctx *b = tl_block;
    if (!b) return;
    tl_block = nullptr;
    tl_watch &= ~1;
    std::vector<interval> ld, st;
    fold_block(*b, ld, st);
    launch_ctx *l = b->launch;
    std::lock_guard<std::mutex> lk(l->mu);
    const uint64_t launches = l->c.launches, blocks = l->c.blocks, threads = l->c.threads;
    counters_add(l->c, b->c);
    l->c.launches = launches, l->c.blocks = blocks, l->c.threads = threads;
    l->ld.insert(l->ld.end(), ld.begin(), ld.end());
    l->st.insert(l->st.end(), st.begin(), st.end());
}

void counters_add(kernel_counters &a, const kernel_counters &b) {
    a.launches += b.launches, a.blocks += b.blocks, a.threads += b.threads;
    add_mem(a.global_ld, b.global_ld);
    add_mem(a.global_st, b.global_st);
    add_shared(a.shared_ld, b.shared_ld);
    add_shared(a.shared_st, b.shared_st);
    add_shared(a.ldmatrix_sh, b.ldmatrix_sh);
    a.atom_global += b.atom_global, a.atom_shared += b.atom_shared;
    a.mma += b.mma, a.ldmatrix += b.ldmatrix;
}

void counters_tensor_op(int op, const void *const in[32], int matrices, int warp_base) {
    (void)warp_base;
    block_ctx *b = tl_block;
    if (!b) return;
    if (op == tc_mma_m16n8k16_f16 || op == tc_mma_m16n8k16_bf16) {
        b->c.mma++;
        return;
    }
    b->c.ldmatrix++;
    b->c.ldmatrix_sh.requests++;
    for (int m = 0; m < matrices; m++) {  // rows of matrix m: lanes 8m..8m+7, 16 bytes each
        access rows[8];
        const access *p[8];
        for (int r = 0; r < 8; r++) {
            rows[r] = access{nullptr, (uintptr_t)in[8 * m + r], 0, (uint32_t)r, 16, sp_shared_ld};
            p[r] = &rows[r];
        }
        const unsigned w = phase_wavefronts(p, 8);
        b->c.ldmatrix_sh.wavefronts += w;
        b->c.ldmatrix_sh.conflicts += w - 1;
        b->c.ldmatrix_sh.bytes += 128;
        b->c.ldmatrix_sh.max_ways = std::max<uint64_t>(b->c.ldmatrix_sh.max_ways, w);
    }
}

void atomic_enter(const void *p) {
    if (block_ctx *b = tl_block) {
        const memory_space space = space_of(p);
        if (space == space_global) b->c.atom_global++;
        if (space == space_shared) b->c.atom_shared++;
    }
    tl_quiet++;
}

void atomic_leave() {
    tl_quiet--;
}

}  // namespace tdm_emu

// ---- the instrumentation's calls ----------------------------------------------------------------
// Only in a build under AddressSanitizer (the emu preset's): elsewhere nothing calls them, and a
// counted run says once that nothing is seen.
#if defined(__SANITIZE_ADDRESS__)

// AddressSanitizer's check, as its inline instrumentation makes it (x86-64 Linux: shadow byte at
// (a >> 3) + 0x7fff8000; 0 = the 8-byte granule addressable, k in 1..7 = its first k bytes,
// negative = none), on the first and the last byte of the access: red zones are at least 16 bytes,
// so an access of at most 16 that reaches into one has an end in it. A bad access is reported by
// AddressSanitizer itself (__asan_report_error), naming the kernel's instruction. One call per
// access instead of two: uncounted, a kernel runs about as fast as with inline checks.
__attribute__((no_sanitize_address)) static inline bool bad_byte(uintptr_t a) {
    const int8_t s = *(const int8_t *)((a >> 3) + 0x7fff8000ull);
    return s != 0 && (int8_t)(a & 7) >= s;
}
__attribute__((no_sanitize_address)) static inline void asan_check(void *p, size_t n, bool store,
                                                                   void *pc) {
    const uintptr_t a = (uintptr_t)p;
    if (__builtin_expect(bad_byte(a) || bad_byte(a + n - 1), 0))
        __asan_report_error(pc, __builtin_frame_address(0), __builtin_frame_address(0), p,
                            store ? 1 : 0, n);
}

#define TDM_EMU_CHECK(N)                                                                   \
    extern "C" __attribute__((no_sanitize_address)) void __asan_load##N(void *p) {         \
        if (tdm_emu::tl_watch) tdm_emu::observe(__builtin_return_address(0), p, N, false); \
        asan_check(p, N, false, __builtin_return_address(0));                              \
    }                                                                                      \
    extern "C" __attribute__((no_sanitize_address)) void __asan_store##N(void *p) {        \
        if (tdm_emu::tl_watch) tdm_emu::observe(__builtin_return_address(0), p, N, true);  \
        asan_check(p, N, true, __builtin_return_address(0));                               \
    }
TDM_EMU_CHECK(1)
TDM_EMU_CHECK(2)
TDM_EMU_CHECK(4)
TDM_EMU_CHECK(8)
TDM_EMU_CHECK(16)
#undef TDM_EMU_CHECK

// Accesses of other sizes (rare): AddressSanitizer's own check.
extern "C" void __asan_loadN(void *p, long n) {
    static const tdm_emu::check_n_fn f = (tdm_emu::check_n_fn)tdm_emu::real("__asan_loadN");
    if (tdm_emu::tl_watch) tdm_emu::observe(__builtin_return_address(0), p, (size_t)n, false);
    f(p, n);
}
extern "C" void __asan_storeN(void *p, long n) {
    static const tdm_emu::check_n_fn f = (tdm_emu::check_n_fn)tdm_emu::real("__asan_storeN");
    if (tdm_emu::tl_watch) tdm_emu::observe(__builtin_return_address(0), p, (size_t)n, true);
    f(p, n);
}
#endif

// ---- for tests (not CUDA APIs) ------------------------------------------------------------------

// Counting on (1) or off (0) for the launches that start after the call.
extern "C" void tdm_emu_counters_enable(int on) {
    tdm_emu::g_on.store(on != 0);
}

// Forgets what was counted.
extern "C" void tdm_emu_counters_reset(void) {
    std::lock_guard<std::mutex> lk(tdm_emu::g_mu);
    if (tdm_emu::g_kernels) tdm_emu::g_kernels->clear();
}

// The counters so far, as the file TANDEM_EMU_COUNTERS names holds them (free() it).
extern "C" char *tdm_emu_counters_json(void) {
    return tdm_emu::counters_json_text();
}
