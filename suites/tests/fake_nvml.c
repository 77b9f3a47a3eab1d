/* fake_nvml.c — a stand-in libnvidia-ml.so.1 for the emulated build's NVML tests (nvml.cmake):
 * the few entry points kernels/cuda_backend.cu needs to reach a device's health, answering
 * fixed values. nvmlDeviceGetTemperatureV (built with FAKE_NVML_V) reports 61 C when given
 * NVML_STRUCT_VERSION(Temperature, 1) and the GPU sensor, and refuses anything else as NVML does
 * (NVML_ERROR_ARGUMENT_VERSION_MISMATCH); the deprecated nvmlDeviceGetTemperature reports 17 C,
 * so which entry point the backend called shows in `bench env`'s temperature. */
#include <stdint.h>
#include <string.h>

typedef struct {
    unsigned version;
    int sensor_type;
    int temperature;
} fake_temperature_v1;

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
