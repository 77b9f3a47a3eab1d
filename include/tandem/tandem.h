/* tandem.h — the public API's foundation: status codes and the last error, dtypes and their
 * conversions, devices. Include this (it pulls in tensor.h and ops.h) and link `tandem`. */
#ifndef TANDEM_TANDEM_H
#define TANDEM_TANDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ----------------------------------------------------------------------------
// Status and errors. A function that can fail returns a tdm_status (or NULL) and leaves a
// one-line message, readable with tdm_last_error(), in thread-local storage. Nothing aborts.

typedef enum {
    TDM_OK = 0,
    TDM_ERR_ARG,         // an argument is invalid (NULL, out of range, unknown name)
    TDM_ERR_SHAPE,       // shapes do not fit together
    TDM_ERR_DTYPE,       // a dtype the op does not take
    TDM_ERR_DEVICE,      // tensors on different devices, or a device that is not there
    TDM_ERR_OOM,         // an allocation failed
    TDM_ERR_IO,          // a file could not be read or written
    TDM_ERR_FORMAT,      // a file is malformed
    TDM_ERR_UNSUPPORTED, // valid, but not implemented by this backend or build
    TDM_ERR_BACKEND,     // a backend library call failed (CUDA, cuBLAS, ...)
} tdm_status;

const char *tdm_last_error(void);   // "" when no error has been recorded on this thread
tdm_status tdm_last_status(void);
void tdm_error_clear(void);
const char *tdm_status_name(tdm_status s);

// ----------------------------------------------------------------------------
// Dtypes. f16 is IEEE binary16, bf16 is bfloat16; conversions round to nearest even and keep
// NaN and infinities.

typedef enum {
    TDM_DTYPE_F32 = 0,
    TDM_DTYPE_F16,
    TDM_DTYPE_BF16,
    TDM_DTYPE_F64,
    TDM_DTYPE_I32,
    TDM_DTYPE_I64,
    TDM_DTYPE_COUNT
} tdm_dtype;

size_t tdm_dtype_size(tdm_dtype dt);
const char *tdm_dtype_name(tdm_dtype dt);                   // "f32", "bf16", ...
tdm_status tdm_dtype_parse(const char *s, tdm_dtype *out);  // "f32" or "float32", ...
bool tdm_dtype_is_float(tdm_dtype dt);
double tdm_dtype_unit_roundoff(tdm_dtype dt);   // u = 2^-p: f32 2^-24, f16 2^-11, bf16 2^-8
double tdm_dtype_min_subnormal(tdm_dtype dt);   // spacing of the numbers near zero

uint16_t tdm_f32_to_f16(float x);
float tdm_f16_to_f32(uint16_t h);
uint16_t tdm_f32_to_bf16(float x);
float tdm_bf16_to_f32(uint16_t b);
uint16_t tdm_f64_to_f16(double x);   // one rounding, not two through f32
uint16_t tdm_f64_to_bf16(double x);

// ----------------------------------------------------------------------------
// Devices: "cpu" or "cuda:N" ("cuda" means cuda:0).

typedef enum { TDM_DEVICE_CPU = 0, TDM_DEVICE_CUDA } tdm_device_type;

typedef struct {
    tdm_device_type type;
    int index;
} tdm_device;

#define TDM_CPU ((tdm_device){TDM_DEVICE_CPU, 0})

tdm_status tdm_device_parse(const char *s, tdm_device *out);
const char *tdm_device_str(tdm_device d, char *buf, size_t n);  // writes "cpu" / "cuda:1"
bool tdm_device_equal(tdm_device a, tdm_device b);
// Is a backend for this device compiled in and the device present? On false, tdm_last_error()
// says why ("no CUDA device found", "built without CUDA").
bool tdm_device_available(tdm_device d);
const char *tdm_build_info(void);   // version, compiler, backends compiled in

#ifdef __cplusplus
}
#endif

#include "tandem/tensor.h"
#include "tandem/ops.h"
#include "tandem/io.h"
#include "tandem/autograd.h"
#include "tandem/amp.h"
#include "tandem/memory.h"
#include "tandem/data.h"
#include "tandem/nn.h"
#include "tandem/optim.h"
#include "tandem/parallel.h"

#endif
