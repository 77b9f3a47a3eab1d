/* cuda_libs.h — what kernels/blas.cu (cuBLASLt) and kernels/conv_cudnn.cu (cuDNN's graph API)
 * give the CUDA backend's table in kernels/cuda_backend.cu: the matrix-product and convolution
 * slots, the convolution algorithm questions, the libraries' versions, and the small kernels the
 * two share (bias fill, sums over leading/trailing dims). Built without cuDNN (TDM_HAVE_CUDNN
 * unset), the convolution slots are NULL: core reports "not supported by the cuda backend". */
#ifndef TANDEM_KERNELS_CUDA_LIBS_H
#define TANDEM_KERNELS_CUDA_LIBS_H

#include <stddef.h>

#include "core/tensor_impl.h"

// ---- kernels/blas.cu: the backend.h slots (shapes and NULL grads as ref/ref_linalg.c) ----
tdm_status tdm_cuda_linear(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                           tdm_tensor *y);
tdm_status tdm_cuda_linear_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_tensor *w, tdm_tensor *gx, tdm_tensor *gw,
                                    tdm_tensor *gb);
// The optional MLP slots: cuBLASLt's GELU_AUX_BIAS and DGELU epilogues where the aux matrix's
// leading dimension (out, in) is a multiple of 8 and cuBLASLt has an algorithm, else the unfused
// product and GELU kernels.
tdm_status tdm_cuda_linear_gelu(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                                tdm_tensor *pre, tdm_tensor *h);
tdm_status tdm_cuda_linear_dgelu_backward(const tdm_tensor *gy, const tdm_tensor *w,
                                          const tdm_tensor *pre, tdm_tensor *gpre);
tdm_status tdm_cuda_matmul(const tdm_tensor *a, const tdm_tensor *b, tdm_tensor *y);
tdm_status tdm_cuda_matmul_backward(const tdm_tensor *gy, const tdm_tensor *a,
                                    const tdm_tensor *b, tdm_tensor *ga, tdm_tensor *gb);
// Row-major C[t] (M,N) = op(A[t]) op(B[t]) for t < batch on the current device and stream: A
// stored (M,K) ((K,M) when ta: op transposes it), B stored (K,N) ((N,K) when tb), strides in
// elements between batch entries, C contiguous (ld N); dt f32 or f64 for A, B and C, and never
// TF32 whatever tdm_tf32_allowed says (the attention's bound counts f32 products); K = 0 writes
// zeros (stride_c * batch elements).
tdm_status tdm_cuda_gemm_rm(tdm_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                            const void *a, int64_t stride_a, const void *b, int64_t stride_b,
                            void *c, int64_t stride_c, int64_t batch);
// "13.0.2" (cublasLtGetVersion), for tdm_device_props.cublas_version.
void tdm_cuda_cublas_version(char *buf, size_t n);

// Shared small kernels (on the device's current stream; the caller has set the device):
// y viewed as (outer, C, inner) = b[c] broadcast: a bias pre-filled into an output that the
// library then accumulates into with beta = 1, so that the sum is rounded once (linear's bias:
// inner 1; conv's: inner HW).
tdm_status tdm_cuda_bias_fill(void *y, const void *b, tdm_dtype dt, int64_t outer, int64_t c,
                              int64_t inner);
// out[c] = sum over o < outer and i < inner of x[(o*C + c)*inner + i], accumulated in f32 (f64
// for f64) and rounded once: bias gradients, and gradients of a broadcast matmul operand.
tdm_status tdm_cuda_sum_outer_inner(const void *x, void *out, tdm_dtype dt, int64_t outer,
                                    int64_t c, int64_t inner);

// ---- kernels/conv_cudnn.cu ----
#ifdef TDM_HAVE_CUDNN
tdm_status tdm_cuda_conv2d(const tdm_tensor *x, const tdm_tensor *w, const tdm_tensor *b,
                           const tdm_conv2d_params *p, tdm_tensor *y);
tdm_status tdm_cuda_conv2d_backward(const tdm_tensor *gy, const tdm_tensor *x,
                                    const tdm_tensor *w, const tdm_conv2d_params *p,
                                    tdm_tensor *gx, tdm_tensor *gw, tdm_tensor *gb);
tdm_status tdm_cuda_conv_algo_last(int device_index, tdm_conv_pass pass,
                                   tdm_conv_algo_info *out);
tdm_status tdm_cuda_conv_algo_cache_clear(int device_index);
#define TDM_CUDA_CONV2D tdm_cuda_conv2d
#define TDM_CUDA_CONV2D_BACKWARD tdm_cuda_conv2d_backward
#define TDM_CUDA_CONV_ALGO_LAST tdm_cuda_conv_algo_last
#define TDM_CUDA_CONV_ALGO_CACHE_CLEAR tdm_cuda_conv_algo_cache_clear
#else
#define TDM_CUDA_CONV2D NULL
#define TDM_CUDA_CONV2D_BACKWARD NULL
#define TDM_CUDA_CONV_ALGO_LAST NULL
#define TDM_CUDA_CONV_ALGO_CACHE_CLEAR NULL
#endif
// "9.19.0" (cudnnGetVersion), or "not linked" in a build without cuDNN.
void tdm_cuda_cudnn_version(char *buf, size_t n);

#endif
