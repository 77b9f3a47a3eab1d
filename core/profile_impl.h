/* profile_impl.h — the one line every op starts with to be profiled (core/profile.c records it).
 *
 *     tdm_tensor *tdm_linear(const tdm_tensor *x, const tdm_tensor *weight, const tdm_tensor *bias) {
 *         TDM_PROFILE_OP("linear", x, weight, bias);     // name, then the inputs (NULL allowed)
 *         ...
 *         TDM_PROFILE_FLOPS(2.0 * y->numel * k);          // where the op has a formula
 *         return y;
 *     }
 *
 * The scope closes itself on every return (the cleanup attribute of GCC and Clang), so early
 * returns need nothing. Off, TDM_PROFILE_OP is a store of a small struct and one predictable
 * branch on a global flag: no clock read, no allocation, the input list is never built.
 * C only (core/); a backend never includes it. */
#ifndef TANDEM_CORE_PROFILE_IMPL_H
#define TANDEM_CORE_PROFILE_IMPL_H

#include <stdatomic.h>

#include "core/tensor_impl.h"

// Bit 0: a session is recording; bit 1: NVTX ranges are on (a session runs, or TANDEM_NVTX=1).
#define TDM_PROFILE_RECORDING 1
#define TDM_PROFILE_NVTX 2
extern atomic_int tdm_profile_flags;

// One op's open scope: frame is its index on the thread's stack (-1: not recorded); nvtx: a
// backend range was pushed; flops: set by the op (TDM_PROFILE_FLOPS).
typedef struct {
    int frame;
    bool nvtx;
    double flops;
} tdm_profile_scope;

void tdm_profile_op_begin(tdm_profile_scope *s, const char *name, int n,
                          const tdm_tensor *const *inputs);
void tdm_profile_op_end(tdm_profile_scope *s);

static inline void tdm_profile_scope_close(tdm_profile_scope *s) {
    if (s->frame >= 0 || s->nvtx) tdm_profile_op_end(s);
}

#define TDM_PROFILE_NARGS_(...) \
    ((int)(sizeof((const tdm_tensor *[]){__VA_ARGS__}) / sizeof(const tdm_tensor *)))

#define TDM_PROFILE_OP(name, ...)                                                               \
    __attribute__((cleanup(tdm_profile_scope_close))) tdm_profile_scope tdm_prof_scope_ = {     \
        -1, false, 0.0};                                                                        \
    if (__builtin_expect(atomic_load_explicit(&tdm_profile_flags, memory_order_relaxed) != 0,  \
                         0))                                                                    \
    tdm_profile_op_begin(&tdm_prof_scope_, (name), TDM_PROFILE_NARGS_(__VA_ARGS__),             \
                         (const tdm_tensor *const[]){__VA_ARGS__})

// The op's FLOPs (evaluated only while recording).
#define TDM_PROFILE_FLOPS(expr)                                    \
    do {                                                           \
        if (tdm_prof_scope_.frame >= 0) tdm_prof_scope_.flops = (double)(expr); \
    } while (0)

#endif
