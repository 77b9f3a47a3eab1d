/* plan_cache.h — the CUDA backend's caches of library plans (cuBLASLt algorithms, cuDNN execution
 * plans), in plain C so that their key logic is tested on the CPU (suites/tests/test_plan_cache.c):
 * a hash map from a key (bytes, compared exactly) to an owned value, and the convolution plan key.
 *
 * A key is a struct the caller fills after zeroing it whole (tdm_conv_plan_key_make does), so that
 * padding bytes compare equal. Values are freed by the cache's destroy function on clear/free;
 * a value found stays valid until then. Every entry point takes the cache's mutex. */
#ifndef TANDEM_KERNELS_PLAN_CACHE_H
#define TANDEM_KERNELS_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_plan_cache tdm_plan_cache;

// destroy may be NULL (values not owned). NULL + error when out of memory.
tdm_plan_cache *tdm_plan_cache_new(void (*destroy)(void *value));
void tdm_plan_cache_free(tdm_plan_cache *c);   // destroys every value; NULL is a no-op
// The value stored under key, or NULL.
void *tdm_plan_cache_find(tdm_plan_cache *c, const void *key, size_t key_len);
// Stores value under key (the key is copied). A key already present keeps its value and the new
// one is destroyed (two threads that searched at once: the first stays). TDM_ERR_OOM (value
// destroyed) when out of memory.
tdm_status tdm_plan_cache_insert(tdm_plan_cache *c, const void *key, size_t key_len, void *value);
void tdm_plan_cache_clear(tdm_plan_cache *c);  // destroys every value
size_t tdm_plan_cache_size(tdm_plan_cache *c);

// ---- the convolution plan key: everything a cuDNN plan depends on ----
typedef struct {
    int32_t device, pass, dtype, layout;   // layout 0 = NCHW, 1 = NHWC
    int32_t mode, tf32;                    // tdm_conv_algo_mode; TF32 allowed for convs (0/1)
    int64_t x[4], w[4], y[4];              // (N,C,H,W), (O,C/g,kh,kw), (N,O,OH,OW)
    int32_t stride[2], padding[2], padding_extra[2], dilation[2], groups;
    int32_t align[3];                      // byte alignment (<= 16) of the x, w, y pointers
    int32_t accumulate;                    // beta = 1 (forward into a pre-filled bias): another
                                           // operation; set after tdm_conv_plan_key_make
} tdm_conv_plan_key;

// Zeroes *k and fills it.
void tdm_conv_plan_key_make(tdm_conv_plan_key *k, int device, int pass, tdm_dtype dtype,
                            int layout, int mode, int tf32, const int64_t x[4],
                            const int64_t w[4], const int64_t y[4], const tdm_conv2d_params *p,
                            const int32_t align[3]);
// The alignment cuDNN is told about for a pointer: the largest power of two <= 16 dividing it.
int32_t tdm_ptr_alignment(const void *p);

#ifdef __cplusplus
}
#endif

#endif
