/* nccl.h — the CUDA backend's collective slots (kernels/nccl.cu; core/backend.h says what each
 * does). nccl.cu is built only when NCCL is found (TDM_HAVE_NCCL). */
#ifndef TANDEM_KERNELS_NCCL_H
#define TANDEM_KERNELS_NCCL_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

tdm_status tdm_cuda_comm_unique_id(void *id);
void *tdm_cuda_comm_new(const void *id, int nranks, int rank, int device_index);
void tdm_cuda_comm_free(void *comm);
tdm_status tdm_cuda_comm_allreduce_mean(void *comm, tdm_tensor *const *grads, int n);
tdm_status tdm_cuda_comm_wait(void *comm);
void tdm_cuda_nccl_version(char *buf, size_t n);   // "2.27.7"
// Waits (on the host) for every all-reduce queued on the device's communicators: what a
// cudaMalloc or cudaFree there must do first (nccl.cu's header comment).
void tdm_cuda_comm_quiesce(int device_index);

// In kernels/cuda_backend.cu (built with or without NCCL): whether a communicator member may
// live on the device (its caching allocator must be on: TDM_ERR_UNSUPPORTED with the reason
// otherwise), and the count of members there (+1 made, -1 freed), which keeps
// tdm_memory_set_caching(false) from turning caching off under them.
tdm_status tdm_cuda_comm_check(int device_index);
void tdm_cuda_comm_members(int device_index, int delta);

#ifdef __cplusplus
}
#endif

#endif
