/* cuda_backend.cu — the CUDA backend's table. So far: devices, memory (the caching allocator of
 * kernels/caching_allocator.h over cudaMalloc) and copies, and what each device is (runtime
 * properties + NVML), and the table: the compute slots point at the kernels' launchers
 * (kernels/cuda_kernels.h, kernels/k_*.cu), matrix products at cuBLASLt (kernels/blas.cu),
 * convolutions at cuDNN (kernels/conv_cudnn.cu), streams/events/pinned memory at
 * kernels/streams.cu, collectives at NCCL (kernels/nccl.cu), profiling at NVTX and CUDA events
 * (kernels/nvtx.cu). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_impl.h"
#include "kernels/caching_allocator.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_graph.h"
#include "kernels/nccl.h"   // its slots are filled only with NCCL (TDM_HAVE_NCCL)
#include "kernels/nvtx.h"
#include "kernels/cuda_libs.h"
#include "kernels/cuda_stream.h"
#include "kernels/cuda_kernels.h"

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

// ---- what a device is: the CUDA runtime's properties, and NVML (the driver's management
//      library, opened at run time: no link dependency, absent in some containers) for what the
//      runtime does not tell — PCIe link (also in sysfs), current clocks, persistence, power,
//      throttling ----

// The few NVML entry points used, as nvml.h declares them (a stable C ABI; nvml.h is not in
// every CUDA toolkit). nvmlReturn_t is an int enum, 0 = NVML_SUCCESS.
typedef struct nvml_device_st *nvml_device;
// nvmlTemperature_v1_t (nvmlDeviceGetTemperatureV, which replaces the deprecated
// nvmlDeviceGetTemperature): version = NVML_STRUCT_VERSION(Temperature, 1), i.e. the struct's
// size | 1 << 24; sensorType an nvmlTemperatureSensors_t (NVML_TEMPERATURE_GPU = 0).
struct nvml_temperature_v1 {
    unsigned version;
    int sensor_type;
    int temperature;   // degrees C
};
enum { NVML_TEMPERATURE_V1 = (unsigned)sizeof(struct nvml_temperature_v1) | 1u << 24 };
// nvmlEventData_t, as nvml.h declares it (the gpu/compute instance ids since r450).
struct nvml_event_data {
    nvml_device device;
    unsigned long long event_type;   // nvmlEventTypeXidCriticalError = 0x8
    unsigned long long event_data;   // the Xid
    unsigned gpu_instance_id, compute_instance_id;
};
enum { NVML_EVENT_XID = 0x8, NVML_ERROR_TIMEOUT = 10, NVML_NVLINK_MAX_LINKS = 18 };
// nvmlFieldValue_t (nvmlDeviceGetFieldValues), as nvml.h declares it: the field's id in, its
// return code, value type and value out. NVML_FI_DEV_POWER_INSTANT = 186 (current power, mW, an
// unsigned int); nvmlValueType_t: 1 unsigned int, 2 unsigned long, 3 unsigned long long.
struct nvml_field_value {
    unsigned field_id, scope_id;
    long long timestamp, latency_usec;
    int value_type;   // nvmlValueType_t
    int nvml_return;  // nvmlReturn_t
    union {
        double d;
        unsigned ui;
        unsigned long ul;
        unsigned long long ull;
        long long sll;
    } value;
};
enum { NVML_FI_DEV_POWER_INSTANT = 186 };
// nvmlViolationTime_t (nvmlDeviceGetViolationStatus): referenceTime (us since 1970), violationTime
// (ns, cumulative) per nvmlPerfPolicyType_t (power 0, thermal 1, sync boost 2, board limit 3, low
// utilization 4, reliability 5, total app clocks 10, total base clocks 11).
struct nvml_violation_time {
    unsigned long long reference_time, violation_time;
};
static const int nvml_perf_policies[TDM_VIOLATION_N] = {0, 1, 2, 3, 4, 5, 10, 11};
// nvmlNvLinkErrorCounter_t: DL replay 0, DL recovery 1, CRC flit 2, CRC data 3
enum { NVML_NVLINK_REPLAY = 0, NVML_NVLINK_RECOVERY = 1, NVML_NVLINK_CRC_FLIT = 2,
       NVML_NVLINK_CRC_DATA = 3 };
struct nvml_api {
    void *lib;
    char why[96];   // "" when loaded and initialized
    int (*init)(void);
    const char *(*error_string)(int);
    int (*driver_version)(char *, unsigned);
    int (*handle_by_pci)(const char *, nvml_device *);
    int (*pcie_gen)(nvml_device, unsigned *), (*pcie_width)(nvml_device, unsigned *);
    int (*pcie_gen_max)(nvml_device, unsigned *), (*pcie_width_max)(nvml_device, unsigned *);
    int (*clock)(nvml_device, int, unsigned *), (*clock_max)(nvml_device, int, unsigned *);
    int (*persistence)(nvml_device, int *);
    int (*ecc)(nvml_device, int *, int *);
    int (*power_limit)(nvml_device, unsigned *);   // milliwatts
    int (*power_usage)(nvml_device, unsigned *);   // milliwatts, the board's draw now
    int (*throttle)(nvml_device, unsigned long long *);
    // sustained load: instantaneous power, the energy counter (mJ), violation times per policy
    int (*field_values)(nvml_device, int, struct nvml_field_value *);
    int (*energy)(nvml_device, unsigned long long *);
    int (*violation)(nvml_device, int, struct nvml_violation_time *);
    // health (bench check): temperature and its slowdown threshold, HBM row remapping, page
    // retirement (before Ampere), uncorrected ECC error counts
    int (*temperature_v)(nvml_device, struct nvml_temperature_v1 *);
    int (*temperature)(nvml_device, int, unsigned *);   // deprecated: drivers without the V form
    int (*temperature_threshold)(nvml_device, int, unsigned *);
    int (*remapped_rows)(nvml_device, unsigned *, unsigned *, unsigned *, unsigned *);
    int (*retired_pages)(nvml_device, int, unsigned *, unsigned long long *);
    int (*retired_pending)(nvml_device, int *);
    int (*ecc_errors)(nvml_device, int, int, unsigned long long *);
    // error counters (bench check's deltas): PCIe replays, NVLink state and error counters
    int (*pcie_replay)(nvml_device, unsigned *);
    int (*nvlink_state)(nvml_device, unsigned, int *);   // nvmlEnableState_t: 1 active
    int (*nvlink_errors)(nvml_device, unsigned, int, unsigned long long *);
    // Xid events: an event set (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2)
    int (*event_set_create)(void **);
    int (*register_events)(nvml_device, unsigned long long, void *);
    int (*event_set_wait)(void *, struct nvml_event_data *, unsigned);
    int (*event_set_free)(void *);
};
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };

static void nvml_load(struct nvml_api *n) {
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        snprintf(n->why, sizeof n->why, "NVML not found (libnvidia-ml.so.1)");
        return;
    }
#define NVML_SYM(field, sym) *(void **)&n->field = dlsym(n->lib, sym)
    NVML_SYM(init, "nvmlInit_v2");
    NVML_SYM(error_string, "nvmlErrorString");
    NVML_SYM(driver_version, "nvmlSystemGetDriverVersion");
    NVML_SYM(handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    NVML_SYM(pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    NVML_SYM(pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    NVML_SYM(pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration");
    NVML_SYM(pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth");
    NVML_SYM(clock, "nvmlDeviceGetClockInfo");
    NVML_SYM(clock_max, "nvmlDeviceGetMaxClockInfo");
    NVML_SYM(persistence, "nvmlDeviceGetPersistenceMode");
    NVML_SYM(ecc, "nvmlDeviceGetEccMode");
    NVML_SYM(power_limit, "nvmlDeviceGetPowerManagementLimit");
    NVML_SYM(power_usage, "nvmlDeviceGetPowerUsage");
    NVML_SYM(throttle, "nvmlDeviceGetCurrentClocksEventReasons");   // the name since r535
    if (!n->throttle) NVML_SYM(throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
    NVML_SYM(field_values, "nvmlDeviceGetFieldValues");
    NVML_SYM(energy, "nvmlDeviceGetTotalEnergyConsumption");
    NVML_SYM(violation, "nvmlDeviceGetViolationStatus");
    NVML_SYM(temperature_v, "nvmlDeviceGetTemperatureV");   // newer drivers
    NVML_SYM(temperature, "nvmlDeviceGetTemperature");
    NVML_SYM(temperature_threshold, "nvmlDeviceGetTemperatureThreshold");
    NVML_SYM(remapped_rows, "nvmlDeviceGetRemappedRows");
    NVML_SYM(retired_pages, "nvmlDeviceGetRetiredPages");
    NVML_SYM(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
    NVML_SYM(ecc_errors, "nvmlDeviceGetTotalEccErrors");
    NVML_SYM(pcie_replay, "nvmlDeviceGetPcieReplayCounter");
    NVML_SYM(nvlink_state, "nvmlDeviceGetNvLinkState");
    NVML_SYM(nvlink_errors, "nvmlDeviceGetNvLinkErrorCounter");
    NVML_SYM(event_set_create, "nvmlEventSetCreate");
    NVML_SYM(register_events, "nvmlDeviceRegisterEvents");
    NVML_SYM(event_set_wait, "nvmlEventSetWait_v2");
    NVML_SYM(event_set_free, "nvmlEventSetFree");
#undef NVML_SYM
    if (!n->init || !n->handle_by_pci) {
        snprintf(n->why, sizeof n->why, "NVML too old (no nvmlInit_v2)");
        return;
    }
    int rc = n->init();
    if (rc != 0)
        snprintf(n->why, sizeof n->why, "NVML init failed: %s",
                 n->error_string ? n->error_string(rc) : "error");
}

static const struct nvml_api *nvml_get(void) {
    static struct nvml_api api;
    static const bool loaded = (nvml_load(&api), true);   // once, thread-safe (C++ statics)
    (void)loaded;
    return &api;
}

static int nvml_uint(int (*fn)(nvml_device, unsigned *), nvml_device d) {
    unsigned v;
    return fn && fn(d, &v) == 0 ? (int)v : -1;
}

static int nvml_clock(int (*fn)(nvml_device, int, unsigned *), nvml_device d, int type) {
    unsigned v;
    return fn && fn(d, type, &v) == 0 ? (int)v : -1;
}

// The GPU's temperature (C): nvmlDeviceGetTemperatureV; the deprecated nvmlDeviceGetTemperature
// (announced for removal) only from a driver too old to have the V form, or
// when the V form refuses (an NVML that knows another struct version). -1: unknown.
static int nvml_temperature(const struct nvml_api *n, nvml_device d) {
    if (n->temperature_v) {
        struct nvml_temperature_v1 t = {NVML_TEMPERATURE_V1, 0, 0};
        if (n->temperature_v(d, &t) == 0) return t.temperature;
    }
    return nvml_clock(n->temperature, d, 0);
}

// The PCIe link from sysfs, for when NVML is not there: ".../current_link_speed" reads
// "32.0 GT/s PCIe" (gen 5), ".../current_link_width" "16". -1 when unreadable.
static int sysfs_pci_int(const char *bus_id, const char *file, bool speed) {
    char path[256], line[64];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/%s", bus_id, file);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    double v = atof(line);
    if (!speed) return v > 0 ? (int)v : -1;
    static const double gts[] = {2.5, 5, 8, 16, 32, 64, 128};   // GT/s of gen 1, 2, ...
    for (int g = 0; g < (int)(sizeof gts / sizeof *gts); g++)
        if (v > 0.9 * gts[g] && v < 1.1 * gts[g]) return g + 1;
    return -1;
}

static tdm_status cuda_device_props(int device_index, tdm_device_props *out) {
    cudaDeviceProp p;
    TDM_TRY(CUDA_CHECK(cudaGetDeviceProperties(&p, device_index)));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", p.name);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%04x:%02x:%02x.0", p.pciDomainID,
             p.pciBusID, p.pciDeviceID);
    out->total_memory = (int64_t)p.totalGlobalMem;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    out->l2_bytes = p.l2CacheSize;
    out->memory_bus_bits = p.memoryBusWidth;
    out->ecc = p.ECCEnabled ? 1 : 0;
#ifdef TDM_CUDA_EMU
    out->emulated = 1;   // built against suites/emu: the "device" is this CPU
#endif
    int khz = 0;   // peak clocks (kHz): attributes, as CUDA 13 dropped them from cudaDeviceProp
    out->clock_sm_max_mhz =
        cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device_index) == cudaSuccess
            ? khz / 1000 : -1;
    out->clock_mem_max_mhz =
        cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device_index) == cudaSuccess
            ? khz / 1000 : -1;
    (void)cudaGetLastError();
    out->clock_sm_mhz = out->clock_mem_mhz = -1;
    out->persistence = out->power_limit_w = -1;
    out->throttle_reasons = -1;
    out->temperature_c = out->temperature_slowdown_c = -1;
    out->remapped_rows_correctable = out->remapped_rows_uncorrectable = -1;
    out->remapped_rows_pending = out->remapped_rows_failed = -1;
    out->retired_pages_sbe = out->retired_pages_dbe = out->retired_pages_pending = -1;
    out->ecc_uncorrected_volatile = out->ecc_uncorrected_aggregate = -1;
    out->ecc_corrected_volatile = out->pcie_replay_count = -1;
    out->nvlink_links_active = -1;
    out->nvlink_crc_errors = out->nvlink_replay_errors = out->nvlink_recovery_errors = -1;
    out->cuda_driver_version = out->cuda_runtime_version = -1;
    int v;
    if (cudaDriverGetVersion(&v) == cudaSuccess) out->cuda_driver_version = v;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) out->cuda_runtime_version = v;
    (void)cudaGetLastError();
    tdm_cuda_cublas_version(out->cublas_version, sizeof out->cublas_version);
    tdm_cuda_cudnn_version(out->cudnn_version, sizeof out->cudnn_version);
#ifdef TDM_HAVE_NCCL
    tdm_cuda_nccl_version(out->nccl_version, sizeof out->nccl_version);
#else
    snprintf(out->nccl_version, sizeof out->nccl_version, "not linked");
#endif

    const struct nvml_api *n = nvml_get();
    nvml_device d;
    int rc;
    out->pcie_gen = sysfs_pci_int(out->pci_bus_id, "current_link_speed", true);
    out->pcie_width = sysfs_pci_int(out->pci_bus_id, "current_link_width", false);
    out->pcie_gen_max = sysfs_pci_int(out->pci_bus_id, "max_link_speed", true);
    out->pcie_width_max = sysfs_pci_int(out->pci_bus_id, "max_link_width", false);
    if (n->why[0]) {
        snprintf(out->nvml, sizeof out->nvml, "%s", n->why);
    } else if ((rc = n->handle_by_pci(out->pci_bus_id, &d)) != 0) {
        snprintf(out->nvml, sizeof out->nvml, "NVML does not know %s: %s", out->pci_bus_id,
                 n->error_string ? n->error_string(rc) : "error");
    } else {
        char ver[96];   // NVML wants room for 80 characters
        if (n->driver_version && n->driver_version(ver, sizeof ver) == 0)
            snprintf(out->driver_version, sizeof out->driver_version, "%.*s",
                     (int)sizeof out->driver_version - 1, ver);
        int link[4] = {nvml_uint(n->pcie_gen, d), nvml_uint(n->pcie_width, d),
                       nvml_uint(n->pcie_gen_max, d), nvml_uint(n->pcie_width_max, d)};
        if (link[0] > 0) out->pcie_gen = link[0];
        if (link[1] > 0) out->pcie_width = link[1];
        if (link[2] > 0) out->pcie_gen_max = link[2];
        if (link[3] > 0) out->pcie_width_max = link[3];
        out->clock_sm_mhz = nvml_clock(n->clock, d, NVML_CLOCK_SM);
        out->clock_mem_mhz = nvml_clock(n->clock, d, NVML_CLOCK_MEM);
        int sm_max = nvml_clock(n->clock_max, d, NVML_CLOCK_SM);
        int mem_max = nvml_clock(n->clock_max, d, NVML_CLOCK_MEM);
        if (sm_max > 0) out->clock_sm_max_mhz = sm_max;
        if (mem_max > 0) out->clock_mem_max_mhz = mem_max;
        int mode, pending;
        if (n->persistence && n->persistence(d, &mode) == 0) out->persistence = mode ? 1 : 0;
        if (n->ecc && n->ecc(d, &mode, &pending) == 0) out->ecc = mode ? 1 : 0;
        unsigned mw;
        if (n->power_limit && n->power_limit(d, &mw) == 0) out->power_limit_w = (int)(mw / 1000);
        unsigned long long reasons;
        if (n->throttle && n->throttle(d, &reasons) == 0)
            out->throttle_reasons = (int64_t)(reasons & ~(1ULL << 63));   // "unknown" bit
        // nvml.h: NVML_TEMPERATURE_GPU 0, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN 1; page retirement
        // causes 0 (multiple single-bit) and 1 (double-bit), queried with a zero-size buffer
        // (NVML_ERROR_INSUFFICIENT_SIZE = 7 still returns the count); ECC: uncorrected = 1,
        // volatile counter 0, aggregate 1. What a device does not support stays -1.
        out->temperature_c = nvml_temperature(n, d);
        out->temperature_slowdown_c = nvml_clock(n->temperature_threshold, d, 1);
        unsigned rr[4];
        if (n->remapped_rows && n->remapped_rows(d, &rr[0], &rr[1], &rr[2], &rr[3]) == 0) {
            out->remapped_rows_correctable = (int)rr[0];
            out->remapped_rows_uncorrectable = (int)rr[1];
            out->remapped_rows_pending = rr[2] ? 1 : 0;
            out->remapped_rows_failed = rr[3] ? 1 : 0;
        }
        for (int cause = 0; cause < 2 && n->retired_pages; cause++) {
            unsigned count = 0;
            unsigned long long addr[1];
            int r = n->retired_pages(d, cause, &count, addr);
            if (r == 0 || r == 7) *(cause ? &out->retired_pages_dbe : &out->retired_pages_sbe) = (int)count;
        }
        if (n->retired_pending && n->retired_pending(d, &mode) == 0) out->retired_pages_pending = mode ? 1 : 0;
        unsigned long long errs;
        if (n->ecc_errors && n->ecc_errors(d, 1, 0, &errs) == 0) out->ecc_uncorrected_volatile = (int64_t)errs;
        if (n->ecc_errors && n->ecc_errors(d, 1, 1, &errs) == 0) out->ecc_uncorrected_aggregate = (int64_t)errs;
        // corrected = 0, volatile = 0
        if (n->ecc_errors && n->ecc_errors(d, 0, 0, &errs) == 0) out->ecc_corrected_volatile = (int64_t)errs;
        unsigned replays;
        if (n->pcie_replay && n->pcie_replay(d, &replays) == 0) out->pcie_replay_count = replays;
        // NVLink: the error counters summed over the active links (a part without NVLink says
        // NOT_SUPPORTED for link 0: -1, not read; a part whose links are all down: 0 links)
        if (n->nvlink_state && n->nvlink_errors) {
            int active = 0, state;
            bool read = false;
            int64_t crc = 0, replay = 0, recovery = 0;
            for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
                if (n->nvlink_state(d, link, &state) != 0) continue;
                read = true;
                if (!state) continue;
                active++;
                unsigned long long c;
                if (n->nvlink_errors(d, link, NVML_NVLINK_CRC_FLIT, &c) == 0) crc += (int64_t)c;
                if (n->nvlink_errors(d, link, NVML_NVLINK_CRC_DATA, &c) == 0) crc += (int64_t)c;
                if (n->nvlink_errors(d, link, NVML_NVLINK_REPLAY, &c) == 0) replay += (int64_t)c;
                if (n->nvlink_errors(d, link, NVML_NVLINK_RECOVERY, &c) == 0) recovery += (int64_t)c;
            }
            if (read) {
                out->nvlink_links_active = active;
                out->nvlink_crc_errors = crc;
                out->nvlink_replay_errors = replay;
                out->nvlink_recovery_errors = recovery;
            }
        }
    }
    return TDM_OK;
}

// Xid events: one NVML event set per device, created and registered on the first call (which
// returns none), drained by each later one (nvmlEventSetWait_v2 with no wait until it times out).
static void *cuda_xid_sets[64];
static pthread_mutex_t cuda_xid_lock = PTHREAD_MUTEX_INITIALIZER;

static tdm_status cuda_device_xid_events(int device_index, uint64_t *xids, int max, int *count) {
    *count = 0;
    if (device_index < 0 || device_index >= 64)
        return tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: Xid events for cuda:0..63 only", device_index);
    const struct nvml_api *n = nvml_get();
    if (n->why[0]) return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s", n->why);
    if (!n->event_set_create || !n->register_events || !n->event_set_wait)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "NVML has no event sets (nvmlEventSetWait_v2)");
    tdm_status st = TDM_OK;
    pthread_mutex_lock(&cuda_xid_lock);
    if (!cuda_xid_sets[device_index]) {
        cudaDeviceProp p;
        char bus[32];
        nvml_device d;
        int rc;
        void *set = NULL;
        if (cudaGetDeviceProperties(&p, device_index) != cudaSuccess) {
            (void)cudaGetLastError();
            st = tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: no properties for NVML", device_index);
        } else if (snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID,
                            p.pciDeviceID) > 0 &&
                   (rc = n->handle_by_pci(bus, &d)) != 0) {
            st = tdm_error_set(TDM_ERR_UNSUPPORTED, "NVML does not know %s: %s", bus,
                               n->error_string ? n->error_string(rc) : "error");
        } else if ((rc = n->event_set_create(&set)) != 0 ||
                   (rc = n->register_events(d, NVML_EVENT_XID, set)) != 0) {
            if (set && n->event_set_free) n->event_set_free(set);
            st = tdm_error_set(TDM_ERR_UNSUPPORTED, "NVML's Xid events: %s",
                               n->error_string ? n->error_string(rc) : "error");
        } else {
            cuda_xid_sets[device_index] = set;   // kept for the process's life
        }
    } else {
        struct nvml_event_data e;
        int rc;
        while ((rc = n->event_set_wait(cuda_xid_sets[device_index], &e, 0)) == 0) {
            if (!(e.event_type & NVML_EVENT_XID)) continue;
            if (*count < max) xids[*count] = e.event_data;
            if (*count < max) ++*count;
        }
        if (rc != NVML_ERROR_TIMEOUT)
            st = tdm_error_set(TDM_ERR_DEVICE, "NVML's Xid events: %s",
                               n->error_string ? n->error_string(rc) : "error");
    }
    pthread_mutex_unlock(&cuda_xid_lock);
    return st;
}

// Telemetry (tandem.h tdm_device_telemetry_read): the device's NVML handle found once (through its
// PCI bus id, which needs cudaGetDeviceProperties: too slow to call at every sample), then only
// NVML's cheap readings.
static nvml_device cuda_nvml_handles[64];
static char cuda_nvml_why[64][128];   // why a device has no handle ("" while not looked up)
static pthread_mutex_t cuda_nvml_lock = PTHREAD_MUTEX_INITIALIZER;

static tdm_status cuda_device_telemetry(int device_index, tdm_device_telemetry *out) {
    memset(out, 0, sizeof *out);
    out->clock_sm_mhz = out->clock_mem_mhz = out->power_mw = out->temperature_c = -1;
    out->throttle_reasons = -1;
    out->energy_mj = -1;
    for (int k = 0; k < TDM_VIOLATION_N; k++) out->violation_ns[k] = -1;
    out->power_source = TDM_POWER_NONE;
    if (device_index < 0 || device_index >= 64)
        return tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: telemetry for cuda:0..63 only", device_index);
    const struct nvml_api *n = nvml_get();
    if (n->why[0]) {
        snprintf(out->nvml, sizeof out->nvml, "%s", n->why);
        return TDM_OK;
    }
    pthread_mutex_lock(&cuda_nvml_lock);
    if (!cuda_nvml_handles[device_index] && !cuda_nvml_why[device_index][0]) {
        cudaDeviceProp p;
        char bus[32];
        int rc;
        if (cudaGetDeviceProperties(&p, device_index) != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(cuda_nvml_why[device_index], sizeof cuda_nvml_why[0], "no properties for NVML");
        } else if (snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID,
                            p.pciDeviceID) > 0 &&
                   (rc = n->handle_by_pci(bus, &cuda_nvml_handles[device_index])) != 0) {
            cuda_nvml_handles[device_index] = NULL;
            snprintf(cuda_nvml_why[device_index], sizeof cuda_nvml_why[0], "NVML does not know %s: %s",
                     bus, n->error_string ? n->error_string(rc) : "error");
        }
    }
    nvml_device d = cuda_nvml_handles[device_index];
    snprintf(out->nvml, sizeof out->nvml, "%s", cuda_nvml_why[device_index]);
    pthread_mutex_unlock(&cuda_nvml_lock);
    if (!d) return TDM_OK;
    out->clock_sm_mhz = nvml_clock(n->clock, d, NVML_CLOCK_SM);
    out->clock_mem_mhz = nvml_clock(n->clock, d, NVML_CLOCK_MEM);
    // power: the instantaneous field where the driver has it (r530 and later), else
    // nvmlDeviceGetPowerUsage (a 1 s average on Ampere but GA100, and later GPUs)
    struct nvml_field_value fv;
    memset(&fv, 0, sizeof fv);
    fv.field_id = NVML_FI_DEV_POWER_INSTANT;
    if (n->field_values && n->field_values(d, 1, &fv) == 0 && fv.nvml_return == 0 &&
        (fv.value_type == 1 || fv.value_type == 2 || fv.value_type == 3)) {
        unsigned long long mw = fv.value_type == 1 ? fv.value.ui : fv.value_type == 2 ? fv.value.ul : fv.value.ull;
        if (mw <= 100000000ull) {
            out->power_mw = (int)mw;
            out->power_source = TDM_POWER_INSTANT;
        }
    }
    if (out->power_source == TDM_POWER_NONE && (out->power_mw = nvml_uint(n->power_usage, d)) >= 0)
        out->power_source = TDM_POWER_AVERAGE;
    out->temperature_c = nvml_temperature(n, d);
    unsigned long long reasons;
    if (n->throttle && n->throttle(d, &reasons) == 0)
        out->throttle_reasons = (int64_t)(reasons & ~(1ULL << 63));   // "unknown" bit
    unsigned long long mj;
    if (n->energy && n->energy(d, &mj) == 0 && mj < (1ull << 62)) out->energy_mj = (int64_t)mj;
    for (int k = 0; k < TDM_VIOLATION_N && n->violation; k++) {
        struct nvml_violation_time v = {0, 0};
        if (n->violation(d, nvml_perf_policies[k], &v) == 0 && v.violation_time < (1ull << 62))
            out->violation_ns[k] = (int64_t)v.violation_time;
    }
    return TDM_OK;
}

// ---- memory: one caching allocator per device (kernels/caching_allocator.h, PyTorch's design),
//      created on first use over cudaMalloc/cudaFree on that device. A block belongs to the
//      stream current on the allocating thread (kernels/cuda_stream.h). TANDEM_CACHING_ALLOCATOR=0 in the environment turns caching
//      off: every alloc and free is then a cudaMalloc/cudaFree (to measure what caching saves) ----

#define CUDA_MAX_DEVICES 64
static tdm_caching_allocator *cuda_allocators[CUDA_MAX_DEVICES];
static char cuda_device_names[CUDA_MAX_DEVICES][16];   // "cuda:N", for out-of-memory messages
static signed char cuda_caching_wanted[CUDA_MAX_DEVICES];   // set_caching before creation: -1/1
static pthread_mutex_t cuda_allocators_lock = PTHREAD_MUTEX_INITIALIZER;

static tdm_status cuda_check_index(int device_index) {
    if (device_index >= 0 && device_index < CUDA_MAX_DEVICES) return TDM_OK;
    return tdm_error_set(TDM_ERR_DEVICE, "cuda:%d: tandem manages memory on cuda:0..%d only",
                         device_index, CUDA_MAX_DEVICES - 1);
}

// A cudaMalloc or cudaFree waits for the device's queued all-reduces first (kernels/nccl.cu's
// header comment): on a GPU it would synchronize the device behind one that waits for the other
// ranks; the emulated device faults.
static void cuda_raw_quiesce(int device) {
#ifdef TDM_HAVE_NCCL
    tdm_cuda_comm_quiesce(device);
#else
    (void)device;
#endif
}

// The raw allocator under a device's cache; ctx is the device index.
static void *cuda_raw_alloc(size_t bytes, void *ctx) {
    void *p = NULL;
    cuda_raw_quiesce((int)(intptr_t)ctx);
    if (CUDA_CHECK(cudaSetDevice((int)(intptr_t)ctx)) != TDM_OK) return NULL;
    // Relaxed for the call: a graph capture on this thread (kernels/graph.cu) forbids cudaMalloc
    // otherwise; its private pool's segments outlive its replays, so capture does not need it.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    tdm_status s = CUDA_CHECK(cudaMalloc(&p, bytes));   // TDM_ERR_OOM when short
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    return s == TDM_OK ? p : NULL;
}

static void cuda_raw_free(void *p, size_t bytes, void *ctx) {
    (void)bytes;
    cuda_raw_quiesce((int)(intptr_t)ctx);
    if (CUDA_CHECK(cudaSetDevice((int)(intptr_t)ctx)) == TDM_OK) (void)CUDA_CHECK(cudaFree(p));
}

static int64_t cuda_raw_free_bytes(void *ctx) {
    size_t free_b = 0, total = 0;
    if (cudaSetDevice((int)(intptr_t)ctx) != cudaSuccess ||
        cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (int64_t)free_b;
}

static bool cuda_caching_from_env(void) {
    return tdm_env_flag("TANDEM_CACHING_ALLOCATOR", true);
}

// The device's allocator (index checked by the caller). With `create`, made on first use (NULL +
// error when the device cannot be reached); without, NULL while there is none.
static tdm_caching_allocator *cuda_allocator(int device_index, bool create) {
    pthread_mutex_lock(&cuda_allocators_lock);
    tdm_caching_allocator *ca = cuda_allocators[device_index];
    size_t free_b = 0, total = 0;
    if (!ca && create && CUDA_CHECK(cudaSetDevice(device_index)) == TDM_OK &&
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total)) == TDM_OK) {
        char *name = cuda_device_names[device_index];
        snprintf(name, sizeof cuda_device_names[0], "cuda:%d", device_index);
        tdm_raw_allocator raw = {cuda_raw_alloc, cuda_raw_free, (void *)(intptr_t)device_index,
                                 cuda_raw_free_bytes, name};
        int wanted = cuda_caching_wanted[device_index];
        bool caching = wanted ? wanted > 0 : cuda_caching_from_env();
        ca = cuda_allocators[device_index] = tdm_ca_new(&raw, caching, (int64_t)total);
    }
    pthread_mutex_unlock(&cuda_allocators_lock);
    return ca;
}

// ---- the allocator under data parallel's communicators (kernels/nccl.cu) ----

static int cuda_comm_members_n[CUDA_MAX_DEVICES];   // members on the device, under the lock

// Whether the device's allocator caches, or will when it is made (under cuda_allocators_lock).
static bool cuda_caching_locked(int device_index) {
    if (cuda_allocators[device_index]) return tdm_ca_caching(cuda_allocators[device_index]);
    int wanted = cuda_caching_wanted[device_index];
    return wanted ? wanted > 0 : cuda_caching_from_env();
}

tdm_status tdm_cuda_comm_check(int device_index) {
    TDM_TRY(cuda_check_index(device_index));
    pthread_mutex_lock(&cuda_allocators_lock);
    bool caching = cuda_caching_locked(device_index);
    pthread_mutex_unlock(&cuda_allocators_lock);
    if (caching) return TDM_OK;
    return tdm_error_set(TDM_ERR_UNSUPPORTED,
                         "data parallel: NCCL on cuda:%d needs the caching allocator, which is "
                         "off (TANDEM_CACHING_ALLOCATOR=0 or tdm_memory_set_caching): every "
                         "tensor freed would be a cudaFree, which synchronizes the device behind "
                         "an all-reduce waiting for the other ranks (the overlap is lost, and "
                         "NCCL's docs warn such calls can hang). Leave caching on, or set "
                         "TANDEM_DP_COMM=host to all-reduce through host memory",
                         device_index);
}

void tdm_cuda_comm_members(int device_index, int delta) {
    if (cuda_check_index(device_index) != TDM_OK) return;
    pthread_mutex_lock(&cuda_allocators_lock);
    cuda_comm_members_n[device_index] += delta;
    pthread_mutex_unlock(&cuda_allocators_lock);
}

tdm_caching_allocator *tdm_cuda_device_allocator(int device_index) {
    return cuda_check_index(device_index) == TDM_OK ? cuda_allocator(device_index, true) : NULL;
}

static void *cuda_alloc(size_t nbytes, int device_index) {
    if (cuda_check_index(device_index) != TDM_OK) return NULL;
    tdm_caching_allocator *ca = cuda_allocator(device_index, true);
    // blocks are pooled per stream: the calling thread's current one (kernels/streams.cu), or
    // while it captures a graph, the graph's private pool (kernels/graph.cu)
    void *pool = tdm_cuda_graph_pool(device_index);
    if (!pool) pool = (void *)tdm_cuda_current_stream(device_index);
    return ca ? tdm_ca_alloc(ca, nbytes, pool) : NULL;
}

// nbytes is not needed: the allocator knows each block's size.
static void cuda_free(void *ptr, size_t nbytes, int device_index) {
    (void)nbytes;
    if (!ptr || cuda_check_index(device_index) != TDM_OK) return;
    tdm_caching_allocator *ca = cuda_allocator(device_index, false);
    if (ca) (void)tdm_ca_free(ca, ptr);
}

static tdm_status cuda_memory_stats(int device_index, tdm_memory_stats *out) {
    TDM_TRY(cuda_check_index(device_index));
    tdm_caching_allocator *ca = cuda_allocator(device_index, false);
    if (ca) tdm_ca_memory_stats(ca, out);
    else memset(out, 0, sizeof *out);   // nothing allocated yet
    return TDM_OK;
}

static tdm_status cuda_memory_reset_peak(int device_index) {
    TDM_TRY(cuda_check_index(device_index));
    tdm_caching_allocator *ca = cuda_allocator(device_index, false);
    if (ca) tdm_ca_reset_peak(ca);
    return TDM_OK;
}

static tdm_status cuda_empty_cache(int device_index) {
    TDM_TRY(cuda_check_index(device_index));
    // cudaFree on a capturing thread would invalidate its capture (thread-local mode)
    if (tdm_cuda_graph_pool(device_index))
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "memory_empty_cache: cuda:%d: not while this "
                             "thread captures a CUDA graph there", device_index);
    tdm_caching_allocator *ca = cuda_allocator(device_index, false);
    if (ca) tdm_ca_empty_cache(ca);
    return TDM_OK;
}

static tdm_status cuda_memory_summary(int device_index, char *buf, size_t n) {
    TDM_TRY(cuda_check_index(device_index));
    tdm_caching_allocator *ca = cuda_allocator(device_index, false);
    if (ca) tdm_ca_summary(ca, buf, n);
    else snprintf(buf, n, "caching allocator on cuda:%d: nothing allocated yet\n", device_index);
    return TDM_OK;
}

// Before the allocator exists, the choice is kept for its creation (over the environment).
static tdm_status cuda_set_caching(int device_index, bool caching) {
    TDM_TRY(cuda_check_index(device_index));
    pthread_mutex_lock(&cuda_allocators_lock);
    if (!caching && cuda_comm_members_n[device_index] > 0) {
        pthread_mutex_unlock(&cuda_allocators_lock);
        return tdm_error_set(TDM_ERR_UNSUPPORTED,
                             "memory_set_caching: cuda:%d: not off while a data-parallel "
                             "communicator (NCCL) lives there: each free would be a cudaFree, "
                             "which synchronizes the device behind its all-reduces (free the "
                             "group first)", device_index);
    }
    cuda_caching_wanted[device_index] = caching ? 1 : -1;
    tdm_caching_allocator *ca = cuda_allocators[device_index];
    pthread_mutex_unlock(&cuda_allocators_lock);
    if (ca) tdm_ca_set_caching(ca, caching);
    return TDM_OK;
}

// Synchronous copies run on the calling thread's current stream and wait for it (PyTorch's
// copy_ without non_blocking); the memset is ordered on that stream.
static tdm_status cuda_copy_from_host(void *dst, const void *src, size_t nbytes, int device_index) {
    cudaStream_t s = tdm_cuda_current_stream(device_index);
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(tdm_cuda_capture_refuse(s, device_index, "copy from the host",
                                    "it synchronizes; fill static tensors before the capture"));
    TDM_TRY(CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s)));
    TDM_TRY(CUDA_CHECK(cudaStreamSynchronize(s)));
    return cuda_err_check(device_index);   // a host wait: the device's index checks are read
}

static tdm_status cuda_copy_to_host(void *dst, const void *src, size_t nbytes, int device_index) {
    cudaStream_t s = tdm_cuda_current_stream(device_index);
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    TDM_TRY(tdm_cuda_capture_refuse(s, device_index, "copy to the host",
                                    "it synchronizes; read outputs after a replay"));
    TDM_TRY(CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s)));
    TDM_TRY(CUDA_CHECK(cudaStreamSynchronize(s)));
    return cuda_err_check(device_index);   // a host wait: the device's index checks are read
}

static tdm_status cuda_memset_zero(void *dst, size_t nbytes, int device_index) {
    TDM_TRY(CUDA_CHECK(cudaSetDevice(device_index)));
    return CUDA_CHECK(cudaMemsetAsync(dst, 0, nbytes, tdm_cuda_current_stream(device_index)));
}


// C++20 designated initializers: in the order of core/backend.h, NULL slots left out.
extern "C" const struct tdm_backend_ops tdm_cuda_backend = {
    .name = "cuda",
    .device_count = cuda_device_count,
    .device_props = cuda_device_props,
    .device_xid_events = cuda_device_xid_events,
    .device_telemetry = cuda_device_telemetry,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memory_stats = cuda_memory_stats,
    .memory_reset_peak = cuda_memory_reset_peak,
    .empty_cache = cuda_empty_cache,
    .memory_summary = cuda_memory_summary,
    .set_caching = cuda_set_caching,
    .copy_from_host = cuda_copy_from_host,
    .copy_to_host = cuda_copy_to_host,
    .memset_zero = cuda_memset_zero,
    // streams, events, pinned host memory (kernels/streams.cu)
    .stream_new = tdm_cuda_stream_new,
    .stream_free = tdm_cuda_stream_free,
    .stream_synchronize = tdm_cuda_stream_synchronize,
    .stream_wait_event = tdm_cuda_stream_wait_event,
    .set_current_stream = tdm_cuda_set_current_stream,
    .device_synchronize = tdm_cuda_device_synchronize,
    .event_new = tdm_cuda_event_new,
    .event_free = tdm_cuda_event_free,
    .event_record = tdm_cuda_event_record,
    .event_synchronize = tdm_cuda_event_synchronize,
    .event_query = tdm_cuda_event_query,
    .event_elapsed_ms = tdm_cuda_event_elapsed_ms,
    .host_alloc = tdm_cuda_host_alloc,
    .host_free = tdm_cuda_host_free,
    .host_stats = tdm_cuda_host_stats,
    .host_empty_cache = tdm_cuda_host_empty_cache,
    .copy_async = tdm_cuda_copy_async,
    .copy_sm_async = tdm_cuda_copy_sm_async,
    // kernels/k_*.cu (cuda_kernels.h)
    .cast = cuda_cast,
    .rand_uniform = cuda_rand_uniform,
    .rand_normal = cuda_rand_normal,
    // kernels/blas.cu (cuBLASLt) and kernels/conv_cudnn.cu (cuDNN; NULL in a build without it)
    .linear = tdm_cuda_linear,
    .linear_backward = tdm_cuda_linear_backward,
    .linear_gelu = tdm_cuda_linear_gelu,
    .linear_dgelu_backward = tdm_cuda_linear_dgelu_backward,
    .matmul = tdm_cuda_matmul,
    .matmul_backward = tdm_cuda_matmul_backward,
    .conv2d = TDM_CUDA_CONV2D,
    .conv2d_backward = TDM_CUDA_CONV2D_BACKWARD,
    .max_pool2d = cuda_max_pool2d,
    .max_pool2d_backward = cuda_max_pool2d_backward,
    .avg_pool2d = cuda_avg_pool2d,
    .avg_pool2d_backward = cuda_avg_pool2d_backward,
    .unary = cuda_unary,
    .unary_backward = cuda_unary_backward,
    .binary = cuda_binary,
    .dropout = cuda_dropout,
    .binary_scalar = cuda_binary_scalar,
    .binary_scalar_backward = cuda_binary_scalar_backward,
    .reduce = cuda_reduce,
    .sum_to = cuda_sum_to,
    .expand = cuda_expand,
    .copy_strided = cuda_copy_strided,
    .softmax = cuda_softmax,
    .softmax_backward = cuda_softmax_backward,
    .cross_entropy = cuda_cross_entropy,
    .cross_entropy_backward = cuda_cross_entropy_backward,
    .cross_entropy_stats = cuda_cross_entropy_stats,
    .cross_entropy_backward_stats = cuda_cross_entropy_backward_stats,
    .mse_loss = cuda_mse_loss,
    .mse_loss_backward = cuda_mse_loss_backward,
    .sdpa = cuda_sdpa,
    .sdpa_backward = cuda_sdpa_backward,
    .sdpa_fused = cuda_sdpa_fused,
    .sdpa_fused_backward = cuda_sdpa_fused_backward,
    .layer_norm = cuda_layer_norm,
    .layer_norm_backward = cuda_layer_norm_backward,
    .add_layer_norm = cuda_add_layer_norm,
    .batch_norm = cuda_batch_norm,
    .batch_norm_backward = cuda_batch_norm_backward,
    .embedding = cuda_embedding,
    .embedding_backward = cuda_embedding_backward,
    .sgd_step = cuda_sgd_step,
    .adam_step = cuda_adam_step,
    .adam_step_multi = cuda_adam_step_multi,   // k_optim.cu: one launch for the list
#ifdef TDM_HAVE_NCCL
    .comm_unique_id = tdm_cuda_comm_unique_id,
    .comm_new = tdm_cuda_comm_new,
    .comm_free = tdm_cuda_comm_free,
    .comm_allreduce_mean = tdm_cuda_comm_allreduce_mean,
    .comm_wait = tdm_cuda_comm_wait,
    .comm_check = tdm_cuda_comm_check,
#endif
    // ---- profiling (kernels/nvtx.cu) ----
    .range_push = tdm_cuda_range_push,
    .range_pop = tdm_cuda_range_pop,
    .prof_event_record = tdm_cuda_prof_event_record,
    .prof_event_elapsed_ms = tdm_cuda_prof_event_elapsed_ms,
    .prof_event_free = tdm_cuda_prof_event_free,
    .launch_count = tdm_cuda_launch_count,
    // the convolution algorithm choice (kernels/conv_cudnn.cu)
    .conv_algo_last = TDM_CUDA_CONV_ALGO_LAST,
    .conv_algo_cache_clear = TDM_CUDA_CONV_ALGO_CACHE_CLEAR,
    .amp_unscale_check = cuda_amp_unscale_check,
    .grad_norm = cuda_grad_norm,
    .grad_clip_scale = cuda_grad_clip_scale,
    .counter_add = cuda_counter_add,
    // graph capture (kernels/graph.cu)
    .graph_capture_begin = tdm_cuda_graph_capture_begin,
    .graph_capture_end = tdm_cuda_graph_capture_end,
    .graph_replay = tdm_cuda_graph_replay,
    .graph_free = tdm_cuda_graph_free,
    .graph_alloc_persistent = tdm_cuda_graph_alloc_persistent,
    // capture-safe state (kernels/graph.cu, k_optim.cu, k_random.cu)
    .write_async = cuda_write_async,
    .sgd_step_dev = cuda_sgd_step_dev,
    .adam_step_dev = cuda_adam_step_dev,
    .rand_fill_dev = cuda_rand_fill_dev,
    .dropout_dev = cuda_dropout_dev,
    .memtest = cuda_memtest,   // k_memtest.cu
};
