/* ref_backend.c — the CPU reference backend's table, its memory (host malloc), casts, random
 * fills, and the load/store helpers of ref.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "ref/ref.h"

// ---- load / store ------------------------------------------------------------------------

static void *arena_keep(ref_arena *a, void *p) {
    if (!p || a->n == REF_ARENA_MAX) {
        free(p);
        if (!a->failed) tdm_error_set(TDM_ERR_OOM, "reference backend: out of host memory");
        a->failed = true;
        return NULL;
    }
    a->ptr[a->n++] = p;
    return p;
}

double *ref_new(ref_arena *a, int64_t n) {
    static double dummy[1];   // returned on failure, never dereferenced: callers check a->failed
    if (a->failed) return dummy;
    // Scratch is sized from the dims, and a zero-size input can have huge other dims: batch_norm
    // of (0, 2^38) would ask for 2 TiB per channel statistic. Checked against the cap and the
    // machine's memory before calloc (which might overcommit, or abort under ASan).
    if (tdm_alloc_check("reference backend scratch", n > 0 ? n : 1, sizeof(double), true) != TDM_OK) {
        a->failed = true;
        return dummy;
    }
    double *p = arena_keep(a, calloc((size_t)(n > 0 ? n : 1), sizeof(double)));
    return p ? p : dummy;
}

const double *ref_in(ref_arena *a, const tdm_tensor *t) {
    if (!t) return NULL;
    double *p = ref_new(a, t->numel);
    if (a->failed) return p;
    const void *src = tdm_data_c(t);
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case TDM_DTYPE_F32: p[i] = ((const float *)src)[i]; break;
        case TDM_DTYPE_F16: p[i] = tdm_f16_to_f32(((const uint16_t *)src)[i]); break;
        case TDM_DTYPE_BF16: p[i] = tdm_bf16_to_f32(((const uint16_t *)src)[i]); break;
        case TDM_DTYPE_F64: p[i] = ((const double *)src)[i]; break;
        case TDM_DTYPE_I32: p[i] = ((const int32_t *)src)[i]; break;
        case TDM_DTYPE_I64: p[i] = (double)((const int64_t *)src)[i]; break;
        case TDM_DTYPE_BOOL: p[i] = ((const uint8_t *)src)[i] != 0; break;
        default: break;
        }
    }
    return p;
}

void ref_store(ref_arena *a, tdm_tensor *t, const double *v) {
    if (!t || a->failed) return;
    void *dst = tdm_data(t);
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case TDM_DTYPE_F32: ((float *)dst)[i] = (float)v[i]; break;
        case TDM_DTYPE_F16: ((uint16_t *)dst)[i] = tdm_f64_to_f16(v[i]); break;
        case TDM_DTYPE_BF16: ((uint16_t *)dst)[i] = tdm_f64_to_bf16(v[i]); break;
        case TDM_DTYPE_F64: ((double *)dst)[i] = v[i]; break;
        case TDM_DTYPE_I32: ((int32_t *)dst)[i] = (int32_t)v[i]; break;
        case TDM_DTYPE_I64: ((int64_t *)dst)[i] = (int64_t)v[i]; break;
        case TDM_DTYPE_BOOL: ((uint8_t *)dst)[i] = v[i] != 0; break;   // NaN != 0: true
        default: break;
        }
    }
}

tdm_status ref_finish(ref_arena *a) {
    for (int i = 0; i < a->n; i++) free(a->ptr[i]);
    a->n = 0;
    return a->failed ? TDM_ERR_OOM : TDM_OK;
}

int64_t ref_index(const tdm_tensor *t, int64_t i) {
    if (t->dtype == TDM_DTYPE_I32) return ((const int32_t *)tdm_data_c(t))[i];
    return ((const int64_t *)tdm_data_c(t))[i];
}

// ---- memory ------------------------------------------------------------------------------

static int ref_device_count(void) { return 1; }

// The host's tensor memory, counted (core/memory.c): reserved == allocated, nothing is cached.
static tdm_memory_stats ref_memory;

static void *ref_alloc(size_t nbytes, int device_index) {
    (void)device_index;
    void *p = malloc(nbytes);
    if (!p) tdm_error_set(TDM_ERR_OOM, "cpu: out of memory allocating %zu bytes", nbytes);
    else tdm_memory_count_alloc(&ref_memory, nbytes);
    return p;
}

static void ref_free(void *ptr, size_t nbytes, int device_index) {
    (void)device_index;
    if (!ptr) return;
    free(ptr);
    tdm_memory_count_free(&ref_memory, nbytes);
}

static tdm_status ref_memory_stats(int device_index, tdm_memory_stats *out) {
    (void)device_index;
    tdm_memory_count_get(&ref_memory, out);
    return TDM_OK;
}

static tdm_status ref_memory_reset_peak(int device_index) {
    (void)device_index;
    tdm_memory_count_reset_peak(&ref_memory);
    return TDM_OK;
}

static tdm_status ref_copy(void *dst, const void *src, size_t nbytes, int device_index) {
    (void)device_index;
    memmove(dst, src, nbytes);
    return TDM_OK;
}

static tdm_status ref_memset_zero(void *dst, size_t nbytes, int device_index) {
    (void)device_index;
    memset(dst, 0, nbytes);
    return TDM_OK;
}

// Float -> int truncates toward zero (C's conversion, as PyTorch's .to(int) does); to bool is
// x != 0 (NaN is true), from bool 0 or 1.
static tdm_status ref_cast(tdm_tensor *dst, const tdm_tensor *src) {
    ref_arena A = {0};
    const double *v = ref_in(&A, src);
    ref_store(&A, dst, v);
    return ref_finish(&A);
}

// t (i64) += n.
static tdm_status ref_counter_add(tdm_tensor *t, int64_t n) {
    int64_t *p = (int64_t *)tdm_data(t);
    for (int64_t i = 0; i < t->numel; i++) p[i] += n;
    return TDM_OK;
}

// ---- random fills ----------------------------------------------------------------------------

static tdm_status ref_rand_fill(tdm_tensor *t, uint64_t seed, uint64_t offset, bool normal) {
    ref_arena A = {0};
    double *v = ref_new(&A, t->numel);
    if (A.failed) return ref_finish(&A);
    for (int64_t i = 0; i < t->numel; i++)
        v[i] = normal ? tdm_philox_normal(seed, offset, (uint64_t)i)
                      : tdm_philox_uniform(seed, offset, (uint64_t)i);
    ref_store(&A, t, v);
    return ref_finish(&A);
}

static tdm_status ref_rand_uniform(tdm_tensor *t, uint64_t seed, uint64_t offset) {
    return ref_rand_fill(t, seed, offset, false);
}

static tdm_status ref_rand_normal(tdm_tensor *t, uint64_t seed, uint64_t offset) {
    return ref_rand_fill(t, seed, offset, true);
}

// ---- the table ------------------------------------------------------------------------------

// The reference has no algorithms to choose among: every convolution is the direct loops of
// ref_linalg.c.
static tdm_status ref_conv_algo_last(int device_index, tdm_conv_pass pass, tdm_conv_algo_info *out) {
    (void)device_index;
    memset(out, 0, sizeof *out);
    out->pass = pass;
    out->mode = tdm_conv_algo_mode_get();
    snprintf(out->engine, sizeof out->engine, "reference: direct loops");
    out->engine_id = -1;
    out->candidates = 1;
    return TDM_OK;
}

const struct tdm_backend_ops tdm_ref_backend = {
    .name = "cpu",
    .device_count = ref_device_count,
    .alloc = ref_alloc,
    .free = ref_free,
    .memory_stats = ref_memory_stats,
    .memory_reset_peak = ref_memory_reset_peak,
    .copy_from_host = ref_copy,
    .copy_to_host = ref_copy,
    .memset_zero = ref_memset_zero,
    .stream_new = ref_stream_new,
    .stream_free = ref_stream_free,
    .stream_synchronize = ref_stream_synchronize,
    .stream_wait_event = ref_stream_wait_event,
    .set_current_stream = ref_set_current_stream,
    .device_synchronize = ref_device_synchronize,
    .event_new = ref_event_new,
    .event_free = ref_event_free,
    .event_record = ref_event_record,
    .event_synchronize = ref_event_synchronize,
    .event_query = ref_event_query,
    .event_elapsed_ms = ref_event_elapsed_ms,
    .host_alloc = ref_host_alloc,
    .host_free = ref_host_free,
    .host_stats = ref_host_stats,
    .host_empty_cache = ref_host_empty_cache,
    .copy_async = ref_copy_async,
    .copy_sm_async = ref_copy_sm_async,
    .cast = ref_cast,
    .rand_uniform = ref_rand_uniform,
    .rand_normal = ref_rand_normal,
    .linear = ref_linear,
    .linear_backward = ref_linear_backward,
    .matmul = ref_matmul,
    .matmul_backward = ref_matmul_backward,
    .conv2d = ref_conv2d,
    .conv2d_backward = ref_conv2d_backward,
    .max_pool2d = ref_max_pool2d,
    .max_pool2d_backward = ref_max_pool2d_backward,
    .avg_pool2d = ref_avg_pool2d,
    .avg_pool2d_backward = ref_avg_pool2d_backward,
    .unary = ref_unary,
    .unary_backward = ref_unary_backward,
    .binary = ref_binary,
    .dropout = ref_dropout,
    .binary_scalar = ref_binary_scalar,
    .binary_scalar_backward = ref_binary_scalar_backward,
    .reduce = ref_reduce,
    .sum_to = ref_sum_to,
    .expand = ref_expand,
    .copy_strided = ref_copy_strided,
    .softmax = ref_softmax,
    .softmax_backward = ref_softmax_backward,
    .cross_entropy = ref_cross_entropy,
    .cross_entropy_backward = ref_cross_entropy_backward,
    .mse_loss = ref_mse_loss,
    .mse_loss_backward = ref_mse_loss_backward,
    .sdpa = ref_sdpa,
    .sdpa_backward = ref_sdpa_backward,
    .layer_norm = ref_layer_norm,
    .layer_norm_backward = ref_layer_norm_backward,
    .batch_norm = ref_batch_norm,
    .batch_norm_backward = ref_batch_norm_backward,
    .embedding = ref_embedding,
    .embedding_backward = ref_embedding_backward,
    .sgd_step = ref_sgd_step,
    .adam_step = ref_adam_step,
    .adam_step_multi = ref_adam_step_multi,
    .conv_algo_last = ref_conv_algo_last,
    .amp_unscale_check = ref_amp_unscale_check,
    .grad_norm = ref_grad_norm,
    .grad_clip_scale = ref_grad_clip_scale,
    .counter_add = ref_counter_add,
};
