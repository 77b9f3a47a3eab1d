/* k_common.cu — the launchers' host helpers (kernels/cuda_kernels.h): the device of a call, grid
 * sizes from the device's SM count, scratch tensors, and reading a kernel's error flag. */
#include "kernels/k_common.cuh"
#include "kernels/cuda_graph.h"

tdm_status cuda_use_device(const tdm_tensor *t) {
    return CUDA_CHECK(cudaSetDevice(t->device.index));
}

#define CUDA_SM_CACHE 64
static int cuda_sm_counts[CUDA_SM_CACHE];   // 0: not asked yet (races write the same value)

int cuda_sm_count(void) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    if (dev >= 0 && dev < CUDA_SM_CACHE && cuda_sm_counts[dev] > 0) return cuda_sm_counts[dev];
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        n = 1;
    }
    if (dev >= 0 && dev < CUDA_SM_CACHE) cuda_sm_counts[dev] = n;
    return n;
}

// 2048 resident threads per SM on sm_80/sm_90; a grid-stride loop needs no more than that.
unsigned cuda_grid_blocks(int64_t items, int threads) {
    int64_t need = (items + threads - 1) / threads;
    int64_t full = (int64_t)cuda_sm_count() * (2048 / threads);
    int64_t b = need < full ? need : full;
    return (unsigned)(b > 0 ? b : 1);
}

tdm_tensor *cuda_scratch(const tdm_tensor *like, int64_t n, tdm_dtype dt) {
    int64_t shape[1] = {n > 0 ? n : 1};
    return tdm_tensor_empty(1, shape, dt, like->device);
}

tdm_tensor *cuda_flag_new(const tdm_tensor *like, int64_t n) {
    tdm_tensor *f = cuda_scratch(like, n < 2 ? 2 : n, TDM_DTYPE_I64);
    if (f && CUDA_CHECK(cudaMemsetAsync(tdm_data(f), 0, (size_t)f->numel * sizeof(int64_t),
                                        cuda_stream_current())) != TDM_OK) {
        tdm_tensor_free(f);
        return NULL;
    }
    return f;
}

tdm_status cuda_flag_read(tdm_tensor *flag, int64_t out[2]) {
    // Under graph capture the read cannot happen (it synchronizes): indices are not checked, as
    // in PyTorch; the flag, which the captured kernel writes on a bad index, lives with the graph.
    if (tdm_cuda_stream_capturing(cuda_stream_current())) {
        out[0] = out[1] = 0;
        return tdm_cuda_graph_keep(flag);
    }
    tdm_status s = CUDA_CHECK(cudaMemcpyAsync(out, tdm_data_c(flag), 2 * sizeof(int64_t),
                                              cudaMemcpyDeviceToHost, cuda_stream_current()));
    if (s == TDM_OK) s = CUDA_CHECK(cudaStreamSynchronize(cuda_stream_current()));
    tdm_tensor_free(flag);
    return s;
}
