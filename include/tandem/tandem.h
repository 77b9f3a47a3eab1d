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
    TDM_DTYPE_BOOL,   // 1 byte: 0 false, any other value true (safetensors "BOOL"); masks
    TDM_DTYPE_COUNT
} tdm_dtype;

size_t tdm_dtype_size(tdm_dtype dt);
const char *tdm_dtype_name(tdm_dtype dt);                   // "f32", "bf16", "bool", ...
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

// What a device is (for `bench env` and the context of results): filled by the device's
// backend. Numbers it cannot tell are -1, strings it cannot tell "". Clocks in MHz; the current
// ones, persistence, power and throttling come from NVML (libnvidia-ml, opened at run time) and
// are -1 without it, `nvml` saying why; the PCIe link from NVML or else sysfs. The CPU backend
// does not describe its device (TDM_ERR_UNSUPPORTED).
typedef struct {
    char name[256];            // "NVIDIA H100 80GB HBM3"
    char pci_bus_id[32];       // "0000:17:00.0"
    int64_t total_memory;      // bytes
    int cc_major, cc_minor;    // compute capability
    int sm_count, l2_bytes, memory_bus_bits;
    int clock_sm_mhz, clock_mem_mhz;            // now
    int clock_sm_max_mhz, clock_mem_max_mhz;    // the most they can be
    int pcie_gen, pcie_width;                   // the link now (it trains down when idle)
    int pcie_gen_max, pcie_width_max;           // the most the device and slot can do
    int ecc, persistence;                       // 1 on, 0 off, -1 unknown
    int power_limit_w;
    int64_t throttle_reasons;   // NVML's clocks-event bits but 63 (0 = none), -1 unknown
    int cuda_driver_version, cuda_runtime_version;   // 12040 = 12.4
    char driver_version[32];   // the NVIDIA driver, "550.54.15"
    char cublas_version[32], cudnn_version[32], nccl_version[32];   // "not linked" until used
    char nvml[128];            // "" when NVML answered, else why not
    int emulated;              // 1: the emulated CUDA device on the CPU (suites/emu): no GPU
                               // at all, its timings are not GPU figures (docs/EMULATION.md)
    // Health, from NVML (-1: no NVML, or the device does not report it; `bench check`):
    int temperature_c, temperature_slowdown_c;   // GPU core now; where the GPU starts to slow down
    int remapped_rows_correctable, remapped_rows_uncorrectable;   // HBM rows remapped (Ampere on)
    int remapped_rows_pending, remapped_rows_failed;   // 1: a remap waits for a reset; one failed
    int retired_pages_sbe, retired_pages_dbe, retired_pages_pending;   // page retirement (Volta)
    int64_t ecc_uncorrected_volatile, ecc_uncorrected_aggregate;   // since boot; over its life
    // Error counters (bench check samples them at the start and the end of a run: the deltas):
    int64_t ecc_corrected_volatile;   // corrected ECC errors since boot
    int64_t pcie_replay_count;        // PCIe link-level replays since boot
    int nvlink_links_active;          // NVLinks up (0: none; -1: NVML does not say)
    int64_t nvlink_crc_errors;        // over the active links: CRC flit + CRC data errors
    int64_t nvlink_replay_errors, nvlink_recovery_errors;   // data-link replays, recoveries
} tdm_device_props;

tdm_status tdm_device_props_get(tdm_device d, tdm_device_props *out);

// NVML's critical Xid events of a device (an NVML event set, nvmlEventTypeXidCriticalError):
// the first call registers the device and returns none; each later call returns (up to max, in
// xids) the Xids that arrived since the one before, *n their count. TDM_ERR_UNSUPPORTED, with
// tdm_last_error() saying why, where NVML or its events are not there (no NVML, a container,
// the CPU backend).
tdm_status tdm_device_xid_events(tdm_device d, uint64_t *xids, int max, int *n);

// A device's readings while it works, cheap enough to take several times a second (NVML only:
// the device's NVML handle is looked up once, then each call is a few NVML queries; `bench check`'s
// sustained load samples them at 2 Hz and reads them at each phase's start and end). Each is -1
// when unknown (no NVML, or the device does not report it), `nvml` saying why when NVML is not
// there at all ("" when it answered). The CPU backend has no such readings (TDM_ERR_UNSUPPORTED).
//
// Power: NVML_FI_DEV_POWER_INSTANT (nvmlDeviceGetFieldValues) where the driver has it, else
// nvmlDeviceGetPowerUsage, which NVML documents as averaged over 1 s on Ampere (except GA100) and
// later GPUs and instantaneous on GA100 (A100) and earlier: power_source says which was read.
// energy_mj (nvmlDeviceGetTotalEnergyConsumption, Volta and later) is a counter: two readings give
// the mean power between them exactly. violation_ns are NVML's cumulative times (ns) during which
// each perf policy held the clocks down (nvmlDeviceGetViolationStatus), in the order of
// tdm_violation_policy: two readings give how long each did, however short the events were.
typedef enum {
    TDM_VIOLATION_POWER = 0,          // NVML_PERF_POLICY_POWER: the power cap
    TDM_VIOLATION_THERMAL,            // NVML_PERF_POLICY_THERMAL
    TDM_VIOLATION_SYNC_BOOST,         // NVML_PERF_POLICY_SYNC_BOOST
    TDM_VIOLATION_BOARD_LIMIT,        // NVML_PERF_POLICY_BOARD_LIMIT
    TDM_VIOLATION_LOW_UTILIZATION,    // NVML_PERF_POLICY_LOW_UTILIZATION
    TDM_VIOLATION_RELIABILITY,        // NVML_PERF_POLICY_RELIABILITY (board reliability limit)
    TDM_VIOLATION_TOTAL_APP_CLOCKS,   // NVML_PERF_POLICY_TOTAL_APP_CLOCKS (10)
    TDM_VIOLATION_TOTAL_BASE_CLOCKS,  // NVML_PERF_POLICY_TOTAL_BASE_CLOCKS (11)
    TDM_VIOLATION_N
} tdm_violation_policy;

typedef enum {
    TDM_POWER_NONE = 0,      // not read
    TDM_POWER_INSTANT,       // NVML_FI_DEV_POWER_INSTANT
    TDM_POWER_AVERAGE        // nvmlDeviceGetPowerUsage (1 s average on Ampere but GA100 and later)
} tdm_power_source;

typedef struct {
    int clock_sm_mhz, clock_mem_mhz;   // now (nvmlDeviceGetClockInfo)
    int power_mw;                      // the board's draw, milliwatts (power_source: how read)
    int temperature_c;                 // GPU core
    int64_t throttle_reasons;          // NVML's clocks-event bits but 63 (0 = none)
    char nvml[128];
    tdm_power_source power_source;
    int64_t energy_mj;                         // total energy since the driver loaded, mJ
    int64_t violation_ns[TDM_VIOLATION_N];     // cumulative, per tdm_violation_policy
} tdm_device_telemetry;

// "power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability",
// "total_app_clocks", "total_base_clocks"; NULL out of range.
const char *tdm_violation_policy_name(int policy);

tdm_status tdm_device_telemetry_read(tdm_device d, tdm_device_telemetry *out);

#ifdef __cplusplus
}
#endif

#include "tandem/tensor.h"
#include "tandem/ops.h"
#include "tandem/io.h"
#include "tandem/autograd.h"
#include "tandem/amp.h"
#include "tandem/backends.h"
#include "tandem/memory.h"
#include "tandem/data.h"
#include "tandem/nn.h"
#include "tandem/optim.h"
#include "tandem/parallel.h"
#include "tandem/debug.h"
#include "tandem/profile.h"
#include "tandem/stream.h"
#include "tandem/graph.h"

#endif
