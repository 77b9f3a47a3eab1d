/* backends.c — the process-wide backend switches of tandem/backends.h (atomics: read by every op
 * on any thread, set rarely), and the questions about a device's convolution algorithm choice,
 * passed to its backend. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/env_impl.h"
#include "core/tensor_impl.h"
#include "tandem/backends.h"

static atomic_bool tf32_matmul = false;   // PyTorch >= 1.12: matmul TF32 off by default
static atomic_bool tf32_conv = true;      // cuDNN TF32 on by default
static atomic_int conv_mode = TDM_CONV_ALGO_HEURISTIC;
static atomic_int attn_mode = TDM_ATTN_HEURISTIC;
static atomic_bool fusions = true;

// The environment's defaults (backends.h), read once before the first get or set.
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void env_bool(const char *name, atomic_bool *flag) {
    atomic_store(flag, tdm_env_flag(name, atomic_load(flag)));
}

static void env_read(void) {
    env_bool("TANDEM_TF32_MATMUL", &tf32_matmul);
    env_bool("TANDEM_TF32_CONV", &tf32_conv);
    env_bool("TANDEM_FUSIONS", &fusions);
    const char *a = getenv("TANDEM_ATTN");
    if (a) {
        int m = TDM_ATTN_HEURISTIC;
        while (m <= TDM_ATTN_CONFORMANCE && strcmp(a, tdm_attn_mode_name((tdm_attn_mode)m))) m++;
        if (m <= TDM_ATTN_CONFORMANCE) atomic_store(&attn_mode, m);
        else
            fprintf(stderr, "tandem: ignoring TANDEM_ATTN=%s: expected heuristic, deterministic "
                    "or conformance; using heuristic\n", a);
    }
    const char *v = getenv("TANDEM_CONV_ALGO");
    if (!v) return;
    for (int m = TDM_CONV_ALGO_HEURISTIC; m <= TDM_CONV_ALGO_DIRECT; m++)
        if (!strcmp(v, tdm_conv_algo_mode_name((tdm_conv_algo_mode)m))) {
            atomic_store(&conv_mode, m);
            return;
        }
    fprintf(stderr, "tandem: ignoring TANDEM_CONV_ALGO=%s: expected heuristic, benchmark, "
            "deterministic or direct; using %s\n", v,
            tdm_conv_algo_mode_name((tdm_conv_algo_mode)atomic_load(&conv_mode)));
}

void tdm_tf32_set_allowed(tdm_tf32_scope scope, bool allow) {
    pthread_once(&env_once, env_read);
    atomic_store(scope == TDM_TF32_CONV ? &tf32_conv : &tf32_matmul, allow);
}

bool tdm_tf32_allowed(tdm_tf32_scope scope) {
    pthread_once(&env_once, env_read);
    return atomic_load(scope == TDM_TF32_CONV ? &tf32_conv : &tf32_matmul);
}

void tdm_conv_algo_mode_set(tdm_conv_algo_mode mode) {
    pthread_once(&env_once, env_read);
    if (mode >= TDM_CONV_ALGO_HEURISTIC && mode <= TDM_CONV_ALGO_DIRECT)
        atomic_store(&conv_mode, (int)mode);
}

tdm_conv_algo_mode tdm_conv_algo_mode_get(void) {
    pthread_once(&env_once, env_read);
    return (tdm_conv_algo_mode)atomic_load(&conv_mode);
}

const char *tdm_conv_algo_mode_name(tdm_conv_algo_mode mode) {
    switch (mode) {
    case TDM_CONV_ALGO_HEURISTIC: return "heuristic";
    case TDM_CONV_ALGO_BENCHMARK: return "benchmark";
    case TDM_CONV_ALGO_DETERMINISTIC: return "deterministic";
    case TDM_CONV_ALGO_DIRECT: return "direct";
    }
    return "unknown";
}

void tdm_fusions_set(bool on) {
    pthread_once(&env_once, env_read);
    atomic_store(&fusions, on);
}

bool tdm_fusions_enabled(void) {
    pthread_once(&env_once, env_read);
    return atomic_load(&fusions);
}

void tdm_attn_mode_set(tdm_attn_mode mode) {
    pthread_once(&env_once, env_read);
    if (mode >= TDM_ATTN_HEURISTIC && mode <= TDM_ATTN_CONFORMANCE)
        atomic_store(&attn_mode, (int)mode);
}

tdm_attn_mode tdm_attn_mode_get(void) {
    pthread_once(&env_once, env_read);
    return (tdm_attn_mode)atomic_load(&attn_mode);
}

const char *tdm_attn_mode_name(tdm_attn_mode mode) {
    switch (mode) {
    case TDM_ATTN_HEURISTIC: return "heuristic";
    case TDM_ATTN_DETERMINISTIC: return "deterministic";
    case TDM_ATTN_CONFORMANCE: return "conformance";
    }
    return "unknown";
}

bool tdm_attn_fused_applies(tdm_device device, tdm_dtype dtype, int64_t E, int64_t Ev,
                            bool has_mask, double dropout_p) {
    const struct tdm_backend_ops *be = tdm_backend_get(device.type);
    return be && be->sdpa_fused && be->sdpa_fused_backward &&
           tdm_attn_mode_get() != TDM_ATTN_CONFORMANCE &&
           (dtype == TDM_DTYPE_F16 || dtype == TDM_DTYPE_BF16 || dtype == TDM_DTYPE_F32) && E >= 1 && Ev >= 1 &&
           E <= TDM_ATTN_FUSED_MAX_HEAD && Ev <= TDM_ATTN_FUSED_MAX_HEAD && !has_mask &&
           !(dropout_p > 0);
}

const char *tdm_conv_pass_name(tdm_conv_pass pass) {
    switch (pass) {
    case TDM_CONV_PASS_FORWARD: return "forward";
    case TDM_CONV_PASS_BACKWARD_DATA: return "backward_data";
    case TDM_CONV_PASS_BACKWARD_FILTER: return "backward_filter";
    case TDM_CONV_PASS_COUNT: break;
    }
    return "unknown";
}

tdm_status tdm_conv_algo_last(tdm_device device, tdm_conv_pass pass, tdm_conv_algo_info *out) {
    if (!out) return tdm_error_set(TDM_ERR_ARG, "conv algo last: out is NULL");
    memset(out, 0, sizeof *out);
    if ((int)pass < 0 || pass >= TDM_CONV_PASS_COUNT)
        return tdm_error_set(TDM_ERR_ARG, "conv algo last: unknown pass %d", (int)pass);
    if (!tdm_device_available(device)) return tdm_last_status();
    const struct tdm_backend_ops *be = tdm_backend_get(device.type);
    char name[32];
    if (!be->conv_algo_last)
        return tdm_error_set(TDM_ERR_UNSUPPORTED,
                             "conv algo last: the %s backend does not choose algorithms for %s",
                             be->name, tdm_device_str(device, name, sizeof name));
    return be->conv_algo_last(device.index, pass, out);
}

// A backend that caches nothing has nothing to forget.
tdm_status tdm_conv_algo_cache_clear(tdm_device device) {
    if (!tdm_device_available(device)) return tdm_last_status();
    const struct tdm_backend_ops *be = tdm_backend_get(device.type);
    return be->conv_algo_cache_clear ? be->conv_algo_cache_clear(device.index) : TDM_OK;
}
