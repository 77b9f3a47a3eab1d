/* cuda_backend.cu — the CUDA backend's table. So far: devices, memory and copies (plain
 * cudaMalloc; the caching allocator, kernels, cuBLAS/cuDNN and NCCL come with the CUDA backend
 * issue). Compute slots are NULL, which core reports as "not supported by the cuda backend". */
#include <stdio.h>

#include "kernels/cuda_check.h"

static int cuda_device_count(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        tdm_error_set(TDM_ERR_DEVICE, "no CUDA device found (%s: %s)", cudaGetErrorName(err),
                      cudaGetErrorString(err));
        return 0;
    }
    if (n == 0) tdm_error_set(TDM_ERR_DEVICE, "no CUDA device found (the driver reports 0)");
    return n;
}

// ---- memory: plain cudaMalloc/cudaFree, counted per device (core/memory.c); reserved ==
//      allocated until the caching allocator arrives ----

#define CUDA_MAX_DEVICES 64
static tdm_memory_stats cuda_memory[CUDA_MAX_DEVICES];

static tdm_status cuda_check_index(int device_index) {
    if (device_index >= 0 && device_index < CUDA_MAX_DEVICES) return TDM_OK;
    return tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: tandem counts memory on cuda:0..%d only",
                         device_index, CUDA_MAX_DEVICES - 1);
}

static void *cuda_alloc(size_t nbytes, int device_index) {
    void *p = NULL;
    if (cuda_check_index(device_index) != TDM_OK) return NULL;
    if (CUDA_CHECK(cudaSetDevice(device_index)) != TDM_OK) return NULL;
    if (CUDA_CHECK(cudaMalloc(&p, nbytes)) != TDM_OK) return NULL;
    tdm_memory_count_alloc(&cuda_memory[device_index], nbytes);
    return p;
}

static void cuda_free(void *ptr, size_t nbytes, int device_index) {
    if (!ptr || cuda_check_index(device_index) != TDM_OK) return;
    if (CUDA_CHECK(cudaSetDevice(device_index)) == TDM_OK) (void)CUDA_CHECK(cudaFree(ptr));
    tdm_memory_count_free(&cuda_memory[device_index], nbytes);
}

static tdm_status cuda_memory_stats(int device_index, tdm_memory_stats *out) {
    TDM_TRY(cuda_check_index(device_index));
    tdm_memory_count_get(&cuda_memory[device_index], out);
    return TDM_OK;
}

static tdm_status cuda_memory_reset_peak(int device_index) {
    TDM_TRY(cuda_check_index(device_index));
    tdm_memory_count_reset_peak(&cuda_memory[device_index]);
    return TDM_OK;
}

static tdm_status cuda_copy_from_host(void *dst, const void *src, size_t nbytes, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    return CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
}

static tdm_status cuda_copy_to_host(void *dst, const void *src, size_t nbytes, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    return CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
}

static tdm_status cuda_memset_zero(void *dst, size_t nbytes, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    return CUDA_CHECK(cudaMemset(dst, 0, nbytes));
}


extern "C" const struct tdm_backend_ops tdm_cuda_backend = {
    "cuda",                 // name
    cuda_device_count,      // device_count
    cuda_alloc,             // alloc
    cuda_free,              // free
    cuda_memory_stats,      // memory_stats
    cuda_memory_reset_peak, // memory_reset_peak
    cuda_copy_from_host,    // copy_from_host
    cuda_copy_to_host,      // copy_to_host
    cuda_memset_zero,       // memset_zero
    // every later slot (cast, rand, ops) is NULL: optional until the CUDA backend issue lands
};
