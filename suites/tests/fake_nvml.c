/* fake_nvml.c — a stand-in libnvidia-ml.so.1 for the emulated build's NVML tests (nvml.cmake,
 * check.cmake's levels): the entry points kernels/cuda_backend.cu needs to reach a device's health
 * and its error counters, answering fixed values. nvmlDeviceGetTemperatureV (built with
 * FAKE_NVML_V) reports 61 C when given NVML_STRUCT_VERSION(Temperature, 1) and the GPU sensor, and
 * refuses anything else as NVML does (NVML_ERROR_ARGUMENT_VERSION_MISMATCH); the deprecated
 * nvmlDeviceGetTemperature reports 17 C, so which entry point the backend called shows in
 * `bench env`'s temperature.
 * Faults are planted by the environment, so that a test can make a counter grow during a run or an
 * Xid arrive: each counter answers its base value on its first read and base + growth after it
 * (the start and the end of `bench check`'s run):
 *   FAKE_NVML_XID=N                 one critical Xid event N, at the first wait on an event set
 *   FAKE_NVML_PCIE_REPLAY_GROWTH=N  PCIe replays (base 3)
 *   FAKE_NVML_NVLINK_CRC_GROWTH=N   CRC flit errors of NVLink 0 (base 0; 2 links, both active)
 *   FAKE_NVML_NVLINK_RECOVERY_GROWTH=N
 *   FAKE_NVML_ECC_CORRECTED_GROWTH=N, FAKE_NVML_ECC_UNCORRECTED_GROWTH=N   volatile ECC counts
 *   FAKE_NVML_REMAPPED_PENDING=1, FAKE_NVML_REMAPPED_FAILED=1   a remap pending, one failed
 *   FAKE_NVML_PERSISTENCE=0         persistence mode off (default on)
 * The readings bench check's sustained load samples (tdm_device_telemetry_read): SM clock 1410 MHz,
 * memory clock 1593 MHz, 250 W drawn (nvmlDeviceGetPowerUsage), no clocks-event reason; a throttle
 * is planted by
 *   FAKE_NVML_THROTTLE_AFTER=N      from the N-th read of the clocks-event reasons on (counting
 *                                   from 1), the reasons are FAKE_NVML_THROTTLE (default 0x40, hw
 *                                   thermal slowdown) and the SM clock reads 1005 MHz
 * Power, energy and violation times (the sustained load's phases): nvmlDeviceGetFieldValues
 * answers NVML_FI_DEV_POWER_INSTANT with 300 W (FAKE_NVML_NO_INSTANT=1: NOT_SUPPORTED, as a driver
 * before r530 or a part without it; then only the 250 W average is there);
 * nvmlDeviceGetTotalEnergyConsumption counts 250 W since the library was first called (mJ, from
 * a base of 1e9 mJ: the mean power over any interval is 250 W); nvmlDeviceGetViolationStatus gives
 * each perf policy's cumulative violation time, 0, but for
 *   FAKE_NVML_VIOLATION_POLICY=P    (default 1, thermal) growing by
 *   FAKE_NVML_VIOLATION_MS=N        N ms at every read of it after the first */
#include <time.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned version;
    int sensor_type;
    int temperature;
} fake_temperature_v1;

typedef struct {   // nvmlEventData_t
    void *device;
    unsigned long long event_type, event_data;
    unsigned gpu_instance_id, compute_instance_id;
} fake_event_data;

static unsigned long long env_u(const char *name, unsigned long long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

// base on the first read of counter k, base + the growth its variable plants after it
static unsigned long long counter(int k, const char *growth, unsigned long long base) {
    static int reads[8];
    return base + (reads[k]++ ? env_u(growth, 0) : 0);
}

int nvmlInit_v2(void) { return 0; }

const char *nvmlErrorString(int rc) { return rc ? "fake NVML error" : "Success"; }

int nvmlSystemGetDriverVersion(char *out, unsigned n) {
    if (n < 5) return 7;   // NVML_ERROR_INSUFFICIENT_SIZE
    memcpy(out, "fake", 5);
    return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, void **device) {
    (void)bus_id;
    *device = (void *)(uintptr_t)1;
    return 0;
}

int nvmlDeviceGetTemperature(void *device, int sensor, unsigned *celsius) {
    (void)device;
    if (sensor != 0) return 2;   // NVML_ERROR_INVALID_ARGUMENT
    *celsius = 17;
    return 0;
}

#ifdef FAKE_NVML_V
int nvmlDeviceGetTemperatureV(void *device, fake_temperature_v1 *t) {
    (void)device;
    if (t->version != ((unsigned)sizeof *t | 1u << 24)) return 25;   // ARGUMENT_VERSION_MISMATCH
    if (t->sensor_type != 0) return 2;
    t->temperature = 61;
    return 0;
}
#endif

int nvmlDeviceGetPersistenceMode(void *device, int *mode) {
    (void)device;
    *mode = (int)env_u("FAKE_NVML_PERSISTENCE", 1);
    return 0;
}

int nvmlDeviceGetRemappedRows(void *device, unsigned *corr, unsigned *unc, unsigned *pending,
                              unsigned *failed) {
    (void)device;
    *corr = 0;
    *unc = 0;
    *pending = (unsigned)env_u("FAKE_NVML_REMAPPED_PENDING", 0);
    *failed = (unsigned)env_u("FAKE_NVML_REMAPPED_FAILED", 0);
    return 0;
}

// error type: 0 corrected, 1 uncorrected; counter type: 0 volatile, 1 aggregate
int nvmlDeviceGetTotalEccErrors(void *device, int type, int counter_type, unsigned long long *count) {
    (void)device;
    if (counter_type == 1) *count = 0;
    else if (type == 0) *count = counter(0, "FAKE_NVML_ECC_CORRECTED_GROWTH", 0);
    else *count = counter(1, "FAKE_NVML_ECC_UNCORRECTED_GROWTH", 0);
    return 0;
}

int nvmlDeviceGetPcieReplayCounter(void *device, unsigned *value) {
    (void)device;
    *value = (unsigned)counter(2, "FAKE_NVML_PCIE_REPLAY_GROWTH", 3);
    return 0;
}

int nvmlDeviceGetNvLinkState(void *device, unsigned link, int *active) {
    (void)device;
    if (link >= 2) return 2;   // INVALID_ARGUMENT: this part has 2 links
    *active = 1;
    return 0;
}

// counter: 0 DL replay, 1 DL recovery, 2 CRC flit, 3 CRC data
int nvmlDeviceGetNvLinkErrorCounter(void *device, unsigned link, int c, unsigned long long *value) {
    (void)device;
    if (link >= 2) return 2;
    *value = 0;
    if (link == 0 && c == 2) *value = counter(3, "FAKE_NVML_NVLINK_CRC_GROWTH", 0);
    if (link == 0 && c == 1) *value = counter(4, "FAKE_NVML_NVLINK_RECOVERY_GROWTH", 0);
    return 0;
}

static int fake_set;   // the one event set's storage: its address is the handle

int nvmlEventSetCreate(void **set) {
    *set = &fake_set;
    return 0;
}

int nvmlDeviceRegisterEvents(void *device, unsigned long long types, void *set) {
    (void)device;
    return set == &fake_set && (types & 0x8) ? 0 : 2;
}

int nvmlEventSetWait_v2(void *set, fake_event_data *data, unsigned timeout_ms) {
    static int delivered;
    (void)timeout_ms;
    if (set != &fake_set) return 2;
    unsigned long long xid = env_u("FAKE_NVML_XID", 0);
    if (!xid || delivered) return 10;   // NVML_ERROR_TIMEOUT
    delivered = 1;
    memset(data, 0, sizeof *data);
    data->device = (void *)(uintptr_t)1;
    data->event_type = 0x8;   // nvmlEventTypeXidCriticalError
    data->event_data = xid;
    return 0;
}

int nvmlEventSetFree(void *set) { return set == &fake_set ? 0 : 2; }

static unsigned throttle_reads;   // reads of the clocks-event reasons so far

static int throttled(void) {
    unsigned long long after = env_u("FAKE_NVML_THROTTLE_AFTER", 0);
    return after && throttle_reads >= after;
}

// clock: 0 graphics, 1 SM, 2 memory
int nvmlDeviceGetClockInfo(void *device, int clock, unsigned *mhz) {
    (void)device;
    if (clock < 0 || clock > 2) return 2;
    *mhz = clock == 2 ? 1593 : throttled() ? 1005 : 1410;
    return 0;
}

int nvmlDeviceGetPowerUsage(void *device, unsigned *mw) {
    (void)device;
    *mw = 250000;
    return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(void *device, unsigned long long *reasons) {
    (void)device;
    throttle_reads++;
    *reasons = throttled() ? strtoull(getenv("FAKE_NVML_THROTTLE") && *getenv("FAKE_NVML_THROTTLE")
                                          ? getenv("FAKE_NVML_THROTTLE") : "0x40", NULL, 0)
                           : 0;
    return 0;
}

// ---- power, energy, violation times ----------------------------------------------------------

typedef struct {   // nvmlFieldValue_t
    unsigned field_id, scope_id;
    long long timestamp, latency_usec;
    int value_type, nvml_return;
    union {
        double d;
        unsigned ui;
        unsigned long long ull;
    } value;
} fake_field_value;

int nvmlDeviceGetFieldValues(void *device, int count, fake_field_value *values) {
    (void)device;
    for (int i = 0; i < count; i++) {
        fake_field_value *v = &values[i];
        if (v->field_id == 186 && !env_u("FAKE_NVML_NO_INSTANT", 0)) {   // NVML_FI_DEV_POWER_INSTANT
            v->value_type = 1;   // NVML_VALUE_TYPE_UNSIGNED_INT
            v->value.ui = 300000;
            v->nvml_return = 0;
        } else {
            v->nvml_return = 3;   // NVML_ERROR_NOT_SUPPORTED
        }
    }
    return 0;
}

static double fake_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int nvmlDeviceGetTotalEnergyConsumption(void *device, unsigned long long *mj) {
    static double t0 = -1;
    (void)device;
    double now = fake_now_s();
    if (t0 < 0) t0 = now;
    *mj = 1000000000ull + (unsigned long long)((now - t0) * 250.0 * 1000.0);   // 250 W = 250 000 mJ/s
    return 0;
}

typedef struct {
    unsigned long long reference_time, violation_time;
} fake_violation_time;

int nvmlDeviceGetViolationStatus(void *device, int policy, fake_violation_time *v) {
    static unsigned long long reads[16];
    (void)device;
    if (policy < 0 || policy > 11 || (policy > 5 && policy < 10)) return 2;   // INVALID_ARGUMENT
    v->reference_time = 0;
    v->violation_time = 0;
    if ((unsigned long long)policy == env_u("FAKE_NVML_VIOLATION_POLICY", 1))
        v->violation_time = reads[policy] * env_u("FAKE_NVML_VIOLATION_MS", 0) * 1000000ull;
    reads[policy]++;
    return 0;
}
