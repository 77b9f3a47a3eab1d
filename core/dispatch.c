/* dispatch.c — finds the backend table for a device type. The CUDA table exists only in builds
 * with the CUDA backend (TDM_HAVE_CUDA); core reaches it through the table alone. */
#include "core/tensor_impl.h"

const struct tdm_backend_ops *tdm_backend_get(tdm_device_type type) {
    switch (type) {
    case TDM_DEVICE_CPU: return &tdm_ref_backend;
    case TDM_DEVICE_CUDA:
#ifdef TDM_HAVE_CUDA
        return &tdm_cuda_backend;
#else
        tdm_error_set(TDM_ERR_UNSUPPORTED,
                      "this build of tandem has no CUDA backend (configure with a CUDA compiler)");
        return NULL;
#endif
    }
    tdm_error_set(TDM_ERR_ARG, "unknown device type %d", (int)type);
    return NULL;
}

const char *tdm_build_info(void) {
    return "tandem 0.1 (C11"
#if defined(TDM_CUDA_EMU)
           ", backends: cpu reference, cuda on the EMULATED device (CPU; tests only)"
#elif defined(TDM_HAVE_CUDA)
           ", backends: cpu reference, cuda"
#else
           ", backends: cpu reference"
#endif
           ")";
}
