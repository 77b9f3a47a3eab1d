/* copy_kernel.cu — an SM-driven copy (the transfer suite's d2d_kernel and zero-copy reads and
 * writes of mapped host memory): a grid-stride loop of 16-byte vector loads and stores, the
 * unaligned head or tail bytewise. Paired with its launcher, tdm_cuda_copy_kernel
 * (kernels/cuda_stream.h). */
#include <stdint.h>

#include "kernels/cuda_check.h"
#include "kernels/cuda_stream.h"

#define COPY_THREADS 256
#define COPY_BLOCKS_PER_SM 8  // resident blocks per SM to keep enough loads in flight

// dst[i] = src[i] for i < n, uint4 (16 bytes) each: n = nbytes / 16
__global__ void copy_vec16_kernel(uint4 *__restrict__ dst, const uint4 *__restrict__ src,
                                  size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = src[i];
}

// dst[i] = src[i] for i < n bytes
__global__ void copy_bytes_kernel(unsigned char *__restrict__ dst,
                                  const unsigned char *__restrict__ src, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = src[i];
}

// Enough blocks to cover n items, at most COPY_BLOCKS_PER_SM per SM (the grid-stride loop does the
// rest).
static unsigned copy_grid(size_t n, int device) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
        (void)cudaGetLastError();
        sms = 108;  // an A100's count: only a launch-size hint
    }
    size_t want = (n + COPY_THREADS - 1) / COPY_THREADS;
    size_t cap = (size_t)sms * COPY_BLOCKS_PER_SM;
    if (want > cap) want = cap;
    return want ? (unsigned)want : 1u;
}

tdm_status tdm_cuda_copy_kernel(void *dst, const void *src, size_t nbytes, int device,
                                cudaStream_t stream) {
    if (!nbytes) return TDM_OK;
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device)));
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    size_t vec = 0;
    if ((((uintptr_t)d | (uintptr_t)s) & 15u) == 0) {
        vec = nbytes / 16;
        if (vec) {
            TDM_LAUNCH(copy_grid(vec, device), COPY_THREADS, 0, stream, copy_vec16_kernel)
            ((uint4 *)d, (const uint4 *)s, vec);
            TDM_TRY(CUDA_CHECK(cudaGetLastError()));
        }
    }
    size_t done = vec * 16, rest = nbytes - done;
    if (rest) {
        TDM_LAUNCH(copy_grid(rest, device), COPY_THREADS, 0, stream, copy_bytes_kernel)
        (d + done, s + done, rest);
        TDM_TRY(CUDA_CHECK(cudaGetLastError()));
    }
    return TDM_OK;
}
