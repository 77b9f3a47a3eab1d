/* nccl.h — the CUDA backend's collective slots (kernels/nccl.cu; core/backend.h says what each
 * does). Built only when NCCL is found (TDM_HAVE_NCCL). */
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

#ifdef __cplusplus
}
#endif

#endif
