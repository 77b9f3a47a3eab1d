/* backends.c — the process-wide backend switches of tandem/backends.h (atomics: read by every op
 * on any thread, set rarely). */
#include <stdatomic.h>

#include "tandem/backends.h"

static atomic_bool tf32_matmul = false;   // PyTorch >= 1.12: matmul TF32 off by default
static atomic_bool tf32_conv = true;      // cuDNN TF32 on by default
static atomic_int conv_mode = TDM_CONV_ALGO_HEURISTIC;

void tdm_tf32_set_allowed(tdm_tf32_scope scope, bool allow) {
    atomic_store(scope == TDM_TF32_CONV ? &tf32_conv : &tf32_matmul, allow);
}

bool tdm_tf32_allowed(tdm_tf32_scope scope) {
    return atomic_load(scope == TDM_TF32_CONV ? &tf32_conv : &tf32_matmul);
}

void tdm_conv_algo_mode_set(tdm_conv_algo_mode mode) {
    if (mode >= TDM_CONV_ALGO_HEURISTIC && mode <= TDM_CONV_ALGO_DETERMINISTIC)
        atomic_store(&conv_mode, (int)mode);
}

tdm_conv_algo_mode tdm_conv_algo_mode_get(void) { return (tdm_conv_algo_mode)atomic_load(&conv_mode); }

const char *tdm_conv_algo_mode_name(tdm_conv_algo_mode mode) {
    switch (mode) {
    case TDM_CONV_ALGO_HEURISTIC: return "heuristic";
    case TDM_CONV_ALGO_BENCHMARK: return "benchmark";
    case TDM_CONV_ALGO_DETERMINISTIC: return "deterministic";
    }
    return "unknown";
}
