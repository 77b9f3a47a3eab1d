/* cuda_emu.h — CUDA C++ device code as host C++17, for the emulated device (emu.h).
 * Force-included (g++ -include) before every kernels/ .cu file of the TDM_CUDA_EMU build and
 * before the emulator's tests: the execution-space qualifiers become nothing, __shared__ becomes
 * per-OS-thread storage, threadIdx & co read the running CUDA thread's coordinates, the barriers
 * and warp intrinsics call into exec.cc's scheduler (threads of a block are fibers there),
 * atomics are host atomics, and TDM_LAUNCH(grid, block, smem, stream, kernel)(args) becomes a
 * launch on the emulator.
 *
 * Why __shared__ can be `static thread_local`: exec.cc runs each block start to finish on one OS
 * thread (its threads are fibers of that OS thread and never migrate), one block at a time per
 * OS thread, so per-OS-thread storage is per-block storage. Each __shared__ declaration also
 * declares a one-byte tag, tdm_emu_shm_tag_<n>, beside it, by which shared_mem.cc finds in the
 * program's symbol table the thread-local statics of every function that has shared memory, and
 * fills them with 0xFF bytes at the start of each block (NaN in every float type, -1 in every
 * integer): on a GPU shared memory is garbage at block start, so a kernel that reads it before
 * writing it computes NaN here rather than passing on zeros or on what the previous block left.
 *
 * Not supported: extern __shared__ (dynamic shared memory: `extern static thread_local` does not
 * compile, so a kernel using it fails to build rather than running wrongly), cooperative groups,
 * textures and surfaces, device-side launches, inline PTX (the tensor-core instructions the kernels
 * use come as TDM_EMU_MMA / TDM_EMU_LDMATRIX instead: kernels/k_mma.cuh, tensor_core.cc). */
#ifndef TANDEM_CUDA_EMU_H
#define TANDEM_CUDA_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emu.h"

// ---- execution spaces and storage ----------------------------------------------------------
// The toolkit's host headers already make __global__/__device__/__host__ annotations of nothing;
// set them explicitly so that nothing depends on that.

#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __constant__
#define __constant__
#undef __managed__
#define __managed__
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __shared__
#define TDM_EMU_CAT2(a, b) a##b
#define TDM_EMU_CAT(a, b) TDM_EMU_CAT2(a, b)
#define __shared__                                                                    \
    [[maybe_unused]] __attribute__((used)) static thread_local char TDM_EMU_CAT(    \
        tdm_emu_shm_tag_, __COUNTER__);                                               \
    static thread_local

// ---- the running CUDA thread -----------------------------------------------------------------

namespace tdm_emu {

// Where the CUDA thread that runs on this OS thread is. exec.cc rewrites thread_idx at every
// switch between fibers and the rest at every block. uint3 rather than dim3 for the dimensions:
// __thread needs a trivially constructible type (dim3 has constructors); the fields are the same.
struct thread_coords {
    uint3 thread_idx, block_idx, block_dim, grid_dim;
};
extern __thread thread_coords here;

// The order in which the scheduler runs the threads of a block between barriers (the
// TANDEM_EMU_ORDER switch): thread 0, 1, 2..; the reverse; a fresh shuffle at every round; each
// warp as far as it can go (its warp operations completed at once) before the next one runs.
enum thread_order { order_forward, order_reverse, order_random, order_warp };

// Test hook: overrides TANDEM_EMU_ORDER for the launches that start after it (seed: random's).
void set_thread_order(thread_order order, unsigned long long seed);
thread_order get_thread_order();

// "kernel k, block (x,y,z), thread (x,y,z)" of the CUDA thread running on this OS thread, for
// reports from other parts (a fault inside a kernel); false outside a kernel.
bool describe_current_thread(char *buf, size_t n);

// Barriers of the block: __syncthreads and its count/and/or forms (op: barrier_op).
enum barrier_op { bar_sync, bar_count, bar_and, bar_or };
int block_barrier(int op, int pred, const char *file, int line);

// Warp operations: each one is a barrier of the lanes in `mask` (see exec.cc for the rules).
enum warp_kind {
    wk_syncwarp,
    wk_shfl,
    wk_shfl_up,
    wk_shfl_down,
    wk_shfl_xor,
    wk_ballot,
    wk_any,
    wk_all,
    wk_activemask,
    wk_match_any,
    wk_match_all,
    wk_reduce_add,
    wk_reduce_min,
    wk_reduce_max,
    wk_reduce_and,
    wk_reduce_or,
    wk_reduce_xor,
    wk_tensor_core,  // mma.sync / ldmatrix (tensor_core.cc): arg is the tc_op
};
struct warp_call {
    int kind;          // warp_kind
    unsigned mask;     // the lanes taking part
    int arg;           // srcLane / delta / laneMask; signedness of a __reduce_*_sync
    int width;         // shuffles' segment width
    int pred;          // ballot / any / all
    unsigned size;     // bytes of the value (shuffles, match, reduce), at most 16
    const void *in;    // the lane's value
    void *out;         // the value it gets (shuffles, reduce)
    const char *file;  // the call site, for reports
    int line;
};
unsigned warp_op(const warp_call &c);  // ballot / any / all / match / activemask result

// Tensor-core instructions (tensor_core.cc), warp-collective as PTX defines them: every lane of
// a full warp executes the same one (.sync.aligned), each gives its fragments and gets its own.
enum tc_op {
    tc_mma_m16n8k16_f16,    // mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
    tc_mma_m16n8k16_bf16,   // mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
    tc_ldmatrix_x1,         // ldmatrix.sync.aligned.m8n8.x1.shared.b16
    tc_ldmatrix_x2,         //   .x2
    tc_ldmatrix_x4,         //   .x4
    tc_ldmatrix_x1_trans,   // ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16
    tc_ldmatrix_x2_trans,
    tc_ldmatrix_x4_trans,
    tc_op_count
};
struct tc_mma_in {          // one lane's operands of an mma (PTX's registers, in order)
    uint32_t a[4];          // four .f16x2 / .bf16x2 registers of A (16x16, row)
    uint32_t b[2];          // two of B (16x8, col)
    float c[4];             // four .f32 of C (16x8)
};
const char *tc_op_name(int op);
// Completes op for the 32 lanes of a warp: in[l] and out[l] are lane l's operands and results
// (tc_mma_in / float[4] for an mma; the row address / uint32_t[n] for ldmatrix); warp_base is
// the warp's first thread in the block (for the counters and racecheck).
void tc_complete(int op, const void *const in[32], void *const out[32], int warp_base);

// A __trap() or another fatal error in a kernel: reported (naming the thread), block abandoned.
[[noreturn]] void kernel_trap(const char *what, const char *file, int line);

// Barriers order memory for the compiler too: shared memory is `static` storage the compiler
// might otherwise keep in registers across the call.
#define TDM_EMU_COMPILER_FENCE() __asm__ __volatile__("" ::: "memory")

inline void syncthreads_at(const char *file, int line) {
    TDM_EMU_COMPILER_FENCE();
    block_barrier(bar_sync, 0, file, line);
    TDM_EMU_COMPILER_FENCE();
}
inline int syncthreads_op_at(int op, int pred, const char *file, int line) {
    TDM_EMU_COMPILER_FENCE();
    const int r = block_barrier(op, pred, file, line);
    TDM_EMU_COMPILER_FENCE();
    return r;
}

inline unsigned warp_op_fenced(const warp_call &c) {
    TDM_EMU_COMPILER_FENCE();
    const unsigned r = warp_op(c);
    TDM_EMU_COMPILER_FENCE();
    return r;
}

inline void mma_at(const char *file, int line, int op, float d[4], const uint32_t a[4],
                   const uint32_t b[2], const float c[4]) {
    tc_mma_in in;
    memcpy(in.a, a, sizeof in.a);
    memcpy(in.b, b, sizeof in.b);
    memcpy(in.c, c, sizeof in.c);
    float out[4];
    warp_call w = {wk_tensor_core, 0xffffffffu, op, 32, 0, 0, &in, out, file, line};
    warp_op_fenced(w);
    memcpy(d, out, sizeof out);
}
// ldmatrix: `row` is this lane's row address (used from lanes 0-7 / 0-15 / 0-31 for x1 / x2 /
// x4), 16-byte aligned in shared memory; r gets the 1 / 2 / 4 registers.
void ldmatrix_check(const char *file, int line, int op, const void *row, int lane);
inline void ldmatrix_at(const char *file, int line, int op, uint32_t *r, const void *row) {
    const uint3 t = static_cast<uint3>(here.thread_idx), b = static_cast<uint3>(here.block_dim);
    ldmatrix_check(file, line, op, row, (int)((t.x + b.x * (t.y + b.y * t.z)) % 32));
    uint32_t out[4];
    warp_call w = {wk_tensor_core, 0xffffffffu, op, 32, 0, 0, row, out, file, line};
    warp_op_fenced(w);
    const int n = op == tc_ldmatrix_x1 || op == tc_ldmatrix_x1_trans   ? 1
                  : op == tc_ldmatrix_x2 || op == tc_ldmatrix_x2_trans ? 2
                                                                       : 4;
    memcpy(r, out, (size_t)n * sizeof *r);
}

inline unsigned warp_vote_at(const char *file, int line, int kind, unsigned mask, int pred) {
    warp_call c = {kind, mask, 0, 32, pred != 0, 0, nullptr, nullptr, file, line};
    return warp_op_fenced(c);
}

template <typename T>
inline T shfl_at(const char *file, int line, int kind, unsigned mask, T var, int arg,
                 int width = 32) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 16,
                  "warp shuffles move trivially copyable values of at most 16 bytes");
    T out = var;
    warp_call c = {kind, mask, arg, width, 0, (unsigned)sizeof(T), &var, &out, file, line};
    warp_op_fenced(c);
    return out;
}

template <typename T>
inline unsigned match_any_at(const char *file, int line, unsigned mask, T value) {
    static_assert(std::is_integral<T>::value || std::is_floating_point<T>::value,
                  "__match_any_sync takes a number");
    warp_call c = {wk_match_any, mask, 0, 32, 0, (unsigned)sizeof(T), &value, nullptr, file, line};
    return warp_op_fenced(c);
}
template <typename T>
inline unsigned match_all_at(const char *file, int line, unsigned mask, T value, int *pred) {
    static_assert(std::is_integral<T>::value || std::is_floating_point<T>::value,
                  "__match_all_sync takes a number");
    warp_call c = {wk_match_all, mask, 0, 32, 0, (unsigned)sizeof(T), &value, nullptr, file, line};
    const unsigned r = warp_op_fenced(c);
    *pred = r != 0;
    return r;
}
template <typename T>
inline T reduce_at(const char *file, int line, int kind, unsigned mask, T v) {
    static_assert(std::is_same<T, int>::value || std::is_same<T, unsigned>::value,
                  "__reduce_*_sync takes int or unsigned");
    T out = v;
    warp_call c = {kind, mask, std::is_signed<T>::value, 32, 0, 4, &v, &out, file, line};
    warp_op_fenced(c);
    return out;
}

}  // namespace tdm_emu

// Read-only copies (prvalues): a kernel cannot assign them, and no reference to the TLS object
// is formed (g++ 12's -fsanitize=undefined null check of such a reference tests stale flags and
// reports a null pointer at random).
#define threadIdx (static_cast<uint3>(::tdm_emu::here.thread_idx))
#define blockIdx (static_cast<uint3>(::tdm_emu::here.block_idx))
#define blockDim (static_cast<uint3>(::tdm_emu::here.block_dim))
#define gridDim (static_cast<uint3>(::tdm_emu::here.grid_dim))
// A constant rather than a macro: cudaDeviceProp has a member of that name.
static constexpr int warpSize = 32;

#define __syncthreads() ::tdm_emu::syncthreads_at(__FILE__, __LINE__)
#define __syncthreads_count(p) \
    ::tdm_emu::syncthreads_op_at(::tdm_emu::bar_count, (p), __FILE__, __LINE__)
#define __syncthreads_and(p) \
    ::tdm_emu::syncthreads_op_at(::tdm_emu::bar_and, (p), __FILE__, __LINE__)
#define __syncthreads_or(p) ::tdm_emu::syncthreads_op_at(::tdm_emu::bar_or, (p), __FILE__, __LINE__)

// __syncwarp() and __syncwarp(mask): the site first, then the optional mask as a call's.
#define __syncwarp(...) ::tdm_emu::syncwarp_site{__FILE__, __LINE__}(__VA_ARGS__)
namespace tdm_emu {
struct syncwarp_site {
    const char *file;
    int line;
    void operator()(unsigned mask = 0xffffffffu) const {
        warp_vote_at(file, line, wk_syncwarp, mask, 0);
    }
};
}  // namespace tdm_emu
#define __shfl_sync(...) ::tdm_emu::shfl_at(__FILE__, __LINE__, ::tdm_emu::wk_shfl, __VA_ARGS__)
#define __shfl_up_sync(...) \
    ::tdm_emu::shfl_at(__FILE__, __LINE__, ::tdm_emu::wk_shfl_up, __VA_ARGS__)
#define __shfl_down_sync(...) \
    ::tdm_emu::shfl_at(__FILE__, __LINE__, ::tdm_emu::wk_shfl_down, __VA_ARGS__)
#define __shfl_xor_sync(...) \
    ::tdm_emu::shfl_at(__FILE__, __LINE__, ::tdm_emu::wk_shfl_xor, __VA_ARGS__)
#define __ballot_sync(mask, pred) \
    ::tdm_emu::warp_vote_at(__FILE__, __LINE__, ::tdm_emu::wk_ballot, (mask), (pred))
#define __any_sync(mask, pred) \
    ((int)::tdm_emu::warp_vote_at(__FILE__, __LINE__, ::tdm_emu::wk_any, (mask), (pred)))
#define __all_sync(mask, pred) \
    ((int)::tdm_emu::warp_vote_at(__FILE__, __LINE__, ::tdm_emu::wk_all, (mask), (pred)))
// The lanes converged with the caller: those at the same __activemask() call once every other
// lane of the warp has stopped (at a barrier, another call, or exited).
#define __activemask() \
    ::tdm_emu::warp_vote_at(__FILE__, __LINE__, ::tdm_emu::wk_activemask, 0xffffffffu, 0)
#define __match_any_sync(mask, v) ::tdm_emu::match_any_at(__FILE__, __LINE__, (mask), (v))
#define __match_all_sync(mask, v, pred) \
    ::tdm_emu::match_all_at(__FILE__, __LINE__, (mask), (v), (pred))
#define __reduce_add_sync(mask, v) \
    ::tdm_emu::reduce_at(__FILE__, __LINE__, ::tdm_emu::wk_reduce_add, (mask), (v))
#define __reduce_min_sync(mask, v) \
    ::tdm_emu::reduce_at(__FILE__, __LINE__, ::tdm_emu::wk_reduce_min, (mask), (v))
#define __reduce_max_sync(mask, v) \
    ::tdm_emu::reduce_at(__FILE__, __LINE__, ::tdm_emu::wk_reduce_max, (mask), (v))
#define __reduce_and_sync(mask, v) \
    ::tdm_emu::reduce_at(__FILE__, __LINE__, ::tdm_emu::wk_reduce_and, (mask), (v))
#define __reduce_or_sync(mask, v) \
    ::tdm_emu::reduce_at(__FILE__, __LINE__, ::tdm_emu::wk_reduce_or, (mask), (v))
#define __reduce_xor_sync(mask, v) \
    ::tdm_emu::reduce_at(__FILE__, __LINE__, ::tdm_emu::wk_reduce_xor, (mask), (v))
#define __trap() ::tdm_emu::kernel_trap("__trap()", __FILE__, __LINE__)
// The tensor-core instructions, which device code writes as inline PTX (kernels/k_mma.cuh):
// op is a tdm_emu::tc_op.
#define TDM_EMU_MMA(op, d, a, b, c) ::tdm_emu::mma_at(__FILE__, __LINE__, (op), (d), (a), (b), (c))
#define TDM_EMU_LDMATRIX(op, r, row) ::tdm_emu::ldmatrix_at(__FILE__, __LINE__, (op), (r), (row))

// ---- memory fences and loads -----------------------------------------------------------------

inline void __threadfence() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_block() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_system() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
template <typename T>
inline T __ldg(const T *p) {
    return *p;
}
template <typename T>
inline T __ldcg(const T *p) {
    return *p;
}
template <typename T>
inline T __ldca(const T *p) {
    return *p;
}
template <typename T>
inline T __ldcs(const T *p) {
    return *p;
}
template <typename T>
inline T __ldlu(const T *p) {
    return *p;
}
template <typename T>
inline T __ldcv(const T *p) {
    return *p;
}
template <typename T>
inline void __stcg(T *p, T v) {
    *p = v;
}
template <typename T>
inline void __stcs(T *p, T v) {
    *p = v;
}
template <typename T>
inline void __stwb(T *p, T v) {
    *p = v;
}
template <typename T>
inline void __stwt(T *p, T v) {
    *p = v;
}

// ---- atomics: real host atomics (blocks run concurrently on several OS threads) -------------
// Relaxed, as CUDA's atomics are; __threadfence orders. Floating types by compare-and-swap on
// their bits, the sum rounded once to the type as the GPU's.

namespace tdm_emu {
// Test hook (exec.cc: tdm_emu_set_atomic_hook): called on the kernel's thread right after each
// integer atomic, before the kernel goes on; a test may look at memory then as the host could
// while the kernel runs (the window between an atomic claim and what the kernel writes next).
typedef void (*atomic_hook_fn)(const void *addr);
extern atomic_hook_fn atomic_hook;   // read relaxed: set by a test before its launches
inline void after_atomic(const void *p) {
    if (atomic_hook_fn f = __atomic_load_n(&atomic_hook, __ATOMIC_RELAXED)) f(p);
}

// Counters (counters.cc): an atomic counts as one, and its own loads and stores are not counted.
void atomic_enter(const void *p);
void atomic_leave();
struct atomic_scope {
    explicit atomic_scope(const void *p) {
        atomic_enter(p);
    }
    ~atomic_scope() {
        atomic_leave();
    }
    atomic_scope(const atomic_scope &) = delete;
    atomic_scope &operator=(const atomic_scope &) = delete;
};

template <typename Bits, typename T, typename F>
inline T atomic_cas_loop(T *p, F f) {
    static_assert(sizeof(Bits) == sizeof(T), "bit width");
    const atomic_scope scope(p);
    Bits *q = reinterpret_cast<Bits *>(p);
    Bits old = __atomic_load_n(q, __ATOMIC_RELAXED);
    for (;;) {
        T o, n;
        memcpy((void *)&o, &old, sizeof o);  // the void*: __half's copy is not trivial to g++
        n = f(o);
        Bits nb;
        memcpy(&nb, (const void *)&n, sizeof nb);
        if (__atomic_compare_exchange_n(q, &old, nb, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return o;
    }
}
}  // namespace tdm_emu

#define TDM_EMU_INT_ATOMICS(T)                                                              \
    inline T atomicAdd(T *p, T v) {                                                         \
        const ::tdm_emu::atomic_scope scope_(p);                                            \
        const T o = __atomic_fetch_add(p, v, __ATOMIC_RELAXED);                             \
        ::tdm_emu::after_atomic(p);                                                         \
        return o;                                                                           \
    }                                                                                       \
    inline T atomicExch(T *p, T v) {                                                        \
        const ::tdm_emu::atomic_scope scope_(p);                                            \
        const T o = __atomic_exchange_n(p, v, __ATOMIC_RELAXED);                            \
        ::tdm_emu::after_atomic(p);                                                         \
        return o;                                                                           \
    }                                                                                       \
    inline T atomicCAS(T *p, T cmp, T v) {                                                  \
        {                                                                                   \
            const ::tdm_emu::atomic_scope scope_(p);                                        \
            __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
        }                                                                                   \
        ::tdm_emu::after_atomic(p);                                                         \
        return cmp;                                                                         \
    }                                                                                       \
    inline T atomicAnd(T *p, T v) {                                                         \
        const ::tdm_emu::atomic_scope scope_(p);                                            \
        const T o = __atomic_fetch_and(p, v, __ATOMIC_RELAXED);                             \
        ::tdm_emu::after_atomic(p);                                                         \
        return o;                                                                           \
    }                                                                                       \
    inline T atomicOr(T *p, T v) {                                                          \
        const ::tdm_emu::atomic_scope scope_(p);                                            \
        const T o = __atomic_fetch_or(p, v, __ATOMIC_RELAXED);                              \
        ::tdm_emu::after_atomic(p);                                                         \
        return o;                                                                           \
    }                                                                                       \
    inline T atomicXor(T *p, T v) {                                                         \
        const ::tdm_emu::atomic_scope scope_(p);                                            \
        const T o = __atomic_fetch_xor(p, v, __ATOMIC_RELAXED);                             \
        ::tdm_emu::after_atomic(p);                                                         \
        return o;                                                                           \
    }                                                                                       \
    inline T atomicMax(T *p, T v) {                                                         \
        return ::tdm_emu::atomic_cas_loop<T>(p, [v](T o) { return o < v ? v : o; });        \
    }                                                                                       \
    inline T atomicMin(T *p, T v) {                                                         \
        return ::tdm_emu::atomic_cas_loop<T>(p, [v](T o) { return v < o ? v : o; });        \
    }
TDM_EMU_INT_ATOMICS(int)
TDM_EMU_INT_ATOMICS(unsigned)
TDM_EMU_INT_ATOMICS(unsigned long long)
#undef TDM_EMU_INT_ATOMICS
inline int atomicSub(int *p, int v) {
    const tdm_emu::atomic_scope scope(p);
    return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED);
}
inline unsigned atomicSub(unsigned *p, unsigned v) {
    const tdm_emu::atomic_scope scope(p);
    return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED);
}
inline long long atomicMax(long long *p, long long v) {
    return tdm_emu::atomic_cas_loop<long long>(p, [v](long long o) { return o < v ? v : o; });
}
inline long long atomicMin(long long *p, long long v) {
    return tdm_emu::atomic_cas_loop<long long>(p, [v](long long o) { return v < o ? v : o; });
}
inline unsigned short atomicCAS(unsigned short *p, unsigned short cmp, unsigned short v) {
    const tdm_emu::atomic_scope scope(p);
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
// ((old >= limit) ? 0 : old + 1) and ((old == 0 || old > limit) ? limit : old - 1), as CUDA's.
inline unsigned atomicInc(unsigned *p, unsigned limit) {
    return tdm_emu::atomic_cas_loop<unsigned>(
        p, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned *p, unsigned limit) {
    return tdm_emu::atomic_cas_loop<unsigned>(
        p, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; });
}
inline float atomicExch(float *p, float v) {
    return tdm_emu::atomic_cas_loop<uint32_t>(p, [v](float) { return v; });
}
inline float atomicAdd(float *p, float v) {
    return tdm_emu::atomic_cas_loop<uint32_t>(p, [v](float o) { return o + v; });
}
inline double atomicAdd(double *p, double v) {
    return tdm_emu::atomic_cas_loop<uint64_t>(p, [v](double o) { return o + v; });
}
inline __half atomicAdd(__half *p, __half v) {
    return tdm_emu::atomic_cas_loop<uint16_t>(p, [v](__half o) { return __hadd(o, v); });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v) {
    return tdm_emu::atomic_cas_loop<uint16_t>(p, [v](__nv_bfloat16 o) { return __hadd(o, v); });
}
inline __half2 atomicAdd(__half2 *p, __half2 v) {
    return tdm_emu::atomic_cas_loop<uint32_t>(p, [v](__half2 o) { return __hadd2(o, v); });
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162 *p, __nv_bfloat162 v) {
    return tdm_emu::atomic_cas_loop<uint32_t>(p, [v](__nv_bfloat162 o) { return __hadd2(o, v); });
}
// The scoped forms (_block, _system) are the same operations here.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicExch_block atomicExch
#define atomicCAS_block atomicCAS
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin

// ---- device functions without a host definition in the toolkit's headers -------------------

#define TDM_EMU_MINMAX(A, B, R)           \
    inline R min(A a, B b) {              \
        return (R)a < (R)b ? (R)a : (R)b; \
    }                                     \
    inline R max(A a, B b) {              \
        return (R)a > (R)b ? (R)a : (R)b; \
    }
TDM_EMU_MINMAX(int, int, int)
TDM_EMU_MINMAX(unsigned, unsigned, unsigned)
TDM_EMU_MINMAX(int, unsigned, unsigned)
TDM_EMU_MINMAX(unsigned, int, unsigned)
TDM_EMU_MINMAX(long, long, long)
TDM_EMU_MINMAX(unsigned long, unsigned long, unsigned long)
TDM_EMU_MINMAX(long, unsigned long, unsigned long)
TDM_EMU_MINMAX(unsigned long, long, unsigned long)
TDM_EMU_MINMAX(long long, long long, long long)
TDM_EMU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
TDM_EMU_MINMAX(long long, unsigned long long, unsigned long long)
TDM_EMU_MINMAX(unsigned long long, long long, unsigned long long)
#undef TDM_EMU_MINMAX
// Floating min/max as fminf/fmin (a NaN operand loses), as CUDA's.
inline float min(float a, float b) {
    return fminf(a, b);
}
inline float max(float a, float b) {
    return fmaxf(a, b);
}
inline double min(double a, double b) {
    return fmin(a, b);
}
inline double max(double a, double b) {
    return fmax(a, b);
}
inline double min(float a, double b) {
    return fmin(a, b);
}
inline double max(float a, double b) {
    return fmax(a, b);
}
inline double min(double a, float b) {
    return fmin(a, b);
}
inline double max(double a, float b) {
    return fmax(a, b);
}

inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
    return __builtin_popcountll(x);
}
inline int __clz(int x) {
    return x ? __builtin_clz((unsigned)x) : 32;
}
inline int __clzll(long long x) {
    return x ? __builtin_clzll((unsigned long long)x) : 64;
}
inline int __ffs(int x) {
    return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
    return __builtin_ffsll(x);
}
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((uint64_t)a * b) >> 32);
}
inline int __mulhi(int a, int b) {
    return (int)(((int64_t)a * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline long long __mul64hi(long long a, long long b) {
    return (long long)(((__int128)a * b) >> 64);
}
inline int __float_as_int(float x) {
    int r;
    memcpy(&r, &x, 4);
    return r;
}
inline unsigned __float_as_uint(float x) {
    unsigned r;
    memcpy(&r, &x, 4);
    return r;
}
inline float __int_as_float(int x) {
    float r;
    memcpy(&r, &x, 4);
    return r;
}
inline float __uint_as_float(unsigned x) {
    float r;
    memcpy(&r, &x, 4);
    return r;
}
inline long long __double_as_longlong(double x) {
    long long r;
    memcpy(&r, &x, 8);
    return r;
}
inline double __longlong_as_double(long long x) {
    double r;
    memcpy(&r, &x, 8);
    return r;
}
// The fast approximate forms, computed accurately (a kernel cannot rely on their error).
inline float __expf(float x) {
    return expf(x);
}
inline float __exp10f(float x) {
    return powf(10.0f, x);
}
inline float __logf(float x) {
    return logf(x);
}
inline float __log2f(float x) {
    return log2f(x);
}
inline float __log10f(float x) {
    return log10f(x);
}
inline float __powf(float x, float y) {
    return powf(x, y);
}
inline float __sinf(float x) {
    return sinf(x);
}
inline float __cosf(float x) {
    return cosf(x);
}
inline float __tanf(float x) {
    return tanf(x);
}
inline void __sincosf(float x, float *s, float *c) {
    *s = sinf(x);
    *c = cosf(x);
}
inline float __fdividef(float a, float b) {
    return a / b;
}
inline float __frcp_rn(float x) {
    return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
    return sqrtf(x);
}
inline float __fadd_rn(float a, float b) {
    return a + b;
}
inline float __fsub_rn(float a, float b) {
    return a - b;
}
inline float __fmul_rn(float a, float b) {
    return a * b;
}
inline float __fdiv_rn(float a, float b) {
    return a / b;
}
inline float __fmaf_rn(float a, float b, float c) {
    return fmaf(a, b, c);
}
inline double __dadd_rn(double a, double b) {
    return a + b;
}
inline double __dmul_rn(double a, double b) {
    return a * b;
}
inline double __fma_rn(double a, double b, double c) {
    return fma(a, b, c);
}
inline float rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
    return 1.0 / sqrt(x);
}
inline float __saturatef(float x) {
    return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x;
}
inline float exp10f(float x) {
    return powf(10.0f, x);
}
inline float normcdff(float x) {
    return 0.5f * erfcf(-x * 0.70710678118654752f);
}
inline double normcdf(double x) {
    return 0.5 * erfc(-x * 0.70710678118654752);
}
inline void sincospif(float x, float *s, float *c) {
    *s = sinf((float)M_PI * x);
    *c = cosf((float)M_PI * x);
}
// Float to integer conversions saturate on a GPU (NaN gives 0); C++'s casts do not.
namespace tdm_emu {
template <typename I>
inline I f2i_sat(double v) {
    if (v != v) return 0;
    if (v <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (v >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)v;
}
}  // namespace tdm_emu
inline int __float2int_rz(float x) {
    return tdm_emu::f2i_sat<int>(truncf(x));
}
inline int __float2int_rn(float x) {
    return tdm_emu::f2i_sat<int>(nearbyintf(x));
}
inline int __float2int_rd(float x) {
    return tdm_emu::f2i_sat<int>(floorf(x));
}
inline int __float2int_ru(float x) {
    return tdm_emu::f2i_sat<int>(ceilf(x));
}
inline unsigned __float2uint_rz(float x) {
    return tdm_emu::f2i_sat<unsigned>(truncf(x));
}
inline unsigned __float2uint_rn(float x) {
    return tdm_emu::f2i_sat<unsigned>(nearbyintf(x));
}
inline long long __float2ll_rz(float x) {
    return tdm_emu::f2i_sat<long long>(truncf(x));
}
inline long long __float2ll_rn(float x) {
    return tdm_emu::f2i_sat<long long>(nearbyintf(x));
}
inline int __double2int_rz(double x) {
    return tdm_emu::f2i_sat<int>(trunc(x));
}
inline int __double2int_rn(double x) {
    return tdm_emu::f2i_sat<int>(nearbyint(x));
}
inline long long __double2ll_rn(double x) {
    return tdm_emu::f2i_sat<long long>(nearbyint(x));
}
inline float __int2float_rn(int x) {
    return (float)x;
}
inline float __uint2float_rn(unsigned x) {
    return (float)x;
}
inline float __ll2float_rn(long long x) {
    return (float)x;
}
inline float __double2float_rn(double x) {
    return (float)x;
}
inline __half __hfma(__half a, __half b, __half c) {
    return __float2half_rn(fmaf(__half2float(a), __half2float(b), __half2float(c)));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return __float2bfloat16_rn(fmaf(__bfloat162float(a), __bfloat162float(b), __bfloat162float(c)));
}
inline long long clock64() {
#if defined(__x86_64__)
    return (long long)__builtin_ia32_rdtsc();
#else
    return (long long)std::chrono::steady_clock::now().time_since_epoch().count();
#endif
}
inline void __nanosleep(unsigned) {}

// ---- launches ----------------------------------------------------------------------------------
// TDM_LAUNCH(grid, block, smem, stream, kernel)(args...) is an object whose call launches. When
// `kernel` names one function (k_cast<S, D>, a non-template kernel) the call's parameters are the
// kernel's, so the arguments convert to them at the launch, as CUDA's (NULL to a pointer, an
// int64_t to an int), and are copied into the work item by value. A template whose arguments
// are to be deduced from the call (bias_fill_kernel) cannot be named before the call: its
// arguments are copied as they come and the kernel is called with them, deducing then.

namespace tdm_emu {

struct launch_config {
    const char *what;  // "kernel <expression>" (the enqueue's `what`); what + 7 is the name
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};

template <typename Body>
void launch_body(const launch_config &c, const void *func, Body &&body) {
    const char *name = c.what + 7;
    cudaError_t err = launch_check(name, func, c.grid, c.block, c.smem);
    if (err != cudaSuccess) {
        set_last_error(err);
        return;
    }
    err = enqueue(
        c.stream, c.what,
        [name, grid = c.grid, block = c.block, smem = c.smem, body = std::forward<Body>(body)]() {
            run_grid(name, grid, block, smem, std::function<void()>(std::cref(body)));
        });
    if (err != cudaSuccess) set_last_error(err);
}

// `kernel` names one function: parameters known.
template <typename... P>
struct fn_launcher {
    launch_config c;
    void (*fn)(P...);
    void operator()(P... a) const {
        launch_body(c, (const void *)fn, [fn = fn, args = std::tuple<P...>(std::move(a)...)]() {
            std::apply(fn, args);
        });
    }
};

// `kernel` is a template to deduce at the call.
template <typename Call>
struct deducing_launcher {
    launch_config c;
    Call call;
    template <typename... A>
    void operator()(A &&...a) const {
        launch_body(c, nullptr,
                    [call = call, args = std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)]() {
                        std::apply(call, args);
                    });
    }
};

// Substitution fails (Tag keeps it in the immediate context) unless `f` names one function.
template <typename Tag, typename... P>
auto kernel_ptr(void (*f)(P...)) -> void (*)(P...) {
    return f;
}

template <typename... P>
fn_launcher<P...> fn_launcher_of(const launch_config &c, void (*fn)(P...)) {
    return fn_launcher<P...>{c, fn};
}

template <typename Probe, typename Call>
auto make_launch(const char *what, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                 Probe probe, Call call) {
    const launch_config c = {what, grid, block, smem, stream};
    if constexpr (std::is_invocable<Probe &, int>::value)
        return fn_launcher_of(c, probe(0));
    else
        return deducing_launcher<Call>{c, call};
}

}  // namespace tdm_emu

// TDM_EMU_LAUNCH(grid, block, smem, stream, kernel)(args...); TDM_LAUNCH is the same here (the
// library's kernels/cuda_check.h redefines it to count its launches first).
#undef TDM_LAUNCH
#define TDM_LAUNCH(...) TDM_EMU_LAUNCH(__VA_ARGS__)
#define TDM_EMU_LAUNCH(grid, block, smem, stream, ...)                                          \
    ::tdm_emu::make_launch(                                                                     \
        "kernel " #__VA_ARGS__, grid, block, smem, stream,                                      \
        [](auto tdm_tag_) -> decltype(::tdm_emu::kernel_ptr<decltype(tdm_tag_)>(__VA_ARGS__)) { \
            return ::tdm_emu::kernel_ptr<decltype(tdm_tag_)>(__VA_ARGS__);                      \
        },                                                                                      \
        [](auto &...tdm_args_) -> void { __VA_ARGS__(tdm_args_...); })

#endif
