/* nvtx.cu — NVTX ranges for the CUDA backend's profiling slots: core's profiler (core/profile.c)
 * calls them around every op and named range while a session runs or TANDEM_NVTX=1, so Nsight
 * Systems (nsys profile) shows tandem's op and phase names over the kernels they launch.
 *
 * NVTX 3 is header-only (the toolkit's nvtx3/nvToolsExt.h): without a tool attached the calls
 * are no-ops that cost a few nanoseconds; with nsys they go to its injection library. */
#include <stdlib.h>

#include <nvtx3/nvToolsExt.h>

#include "kernels/cuda_stream.h"
#include "kernels/nvtx.h"

void tdm_cuda_range_push(const char *name) { nvtxRangePushA(name); }

void tdm_cuda_range_pop(void) { nvtxRangePop(); }

// ---- device time of ops: an event and the device it belongs to ----

typedef struct {
    void *event;   // cudaEvent_t (kernels/streams.cu's timing events)
    int device;
} prof_event;

void *tdm_cuda_prof_event_record(int device_index) {
    prof_event *p = (prof_event *)malloc(sizeof *p);
    if (!p) return NULL;
    p->device = device_index;
    if (tdm_cuda_event_new(device_index, &p->event) != TDM_OK) {
        free(p);
        return NULL;   // the op is "not measured"
    }
    if (tdm_cuda_event_record(p->event, (void *)tdm_cuda_current_stream(device_index),
                              device_index) != TDM_OK) {
        tdm_cuda_event_free(p->event, device_index);
        free(p);
        return NULL;
    }
    return p;
}

double tdm_cuda_prof_event_elapsed_ms(void *start, void *end) {
    const prof_event *a = (const prof_event *)start, *b = (const prof_event *)end;
    double ms = -1;
    if (a->device != b->device ||
        tdm_cuda_event_elapsed_ms(a->event, b->event, a->device, &ms) != TDM_OK)
        return -1;
    return ms;
}

void tdm_cuda_prof_event_free(void *event) {
    prof_event *p = (prof_event *)event;
    if (!p) return;
    tdm_cuda_event_free(p->event, p->device);
    free(p);
}
