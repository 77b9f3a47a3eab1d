/* profile.h — the profiler: where a training step's time and memory go, per op, as a table
 * (torch.profiler's key_averages) and as a Chrome trace (Perfetto, chrome://tracing).
 *
 * A session is process-wide: between tdm_profile_start and tdm_profile_stop every op of every
 * thread is recorded (the data loader's workers and data-parallel rank threads included), each
 * thread on its own track. Per op: its name ("linear", "linear_backward", "sgd_step", ...), host
 * time (monotonic clock, children included; self time without them), the shapes and dtypes of its
 * inputs, the net bytes allocated on its device while it ran, the FLOPs of the ops that have a
 * formula (linear/matmul 2*M*N*K, conv2d 2*N*Cout*Hout*Wout*Cin/groups*kh*kw, their backwards per
 * gradient computed), the device's allocated and reserved bytes when it ended (the memory
 * timeline), and the device time where the backend measures it (the CUDA backend's event slots;
 * never on the cpu, where it reads "not measured"). Named ranges (tdm_profile_range_push/pop:
 * "step", "forward", "backward", "optimizer", "data") nest around ops on the calling thread.
 *
 * Off, an op costs one predictable branch on a global flag: no clock read, no allocation.
 * Start and stop between steps: an op that is running on another thread while the session stops
 * is dropped. The environment variable TANDEM_NVTX=1 (or a running session) also emits NVTX ranges
 * on backends that have them (CUDA), for Nsight Systems. docs/PROFILING.md has the details. */
#ifndef TANDEM_PROFILE_H
#define TANDEM_PROFILE_H

#include <stdio.h>

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_profile tdm_profile;   // a finished recording

// Starts the session (TDM_ERR_ARG if one is running). Records from now on, on every thread.
tdm_status tdm_profile_start(void);
// Kernel launches and library compute calls (a cuBLASLt matmul, a cuDNN convolution, an NCCL
// all-reduce: each one or more kernels) the backends have issued in this process so far (the
// CUDA backend counts them; the reference backend launches nothing). Profiled ops carry their own
// count ("launches" in the trace).
uint64_t tdm_profile_launches(void);
// Ends the session and returns what it recorded (free with tdm_profile_free), or NULL with the
// error set when none was running. Device times, where measured, are resolved here.
tdm_profile *tdm_profile_stop(void);
void tdm_profile_free(tdm_profile *p);
bool tdm_profile_is_recording(void);

// A named range on the calling thread (copied; at most 63 characters kept), nesting with the ops
// and ranges inside it. No-ops when no session runs (and TANDEM_NVTX is not set). pop without a push
// on this thread is TDM_ERR_ARG while recording.
tdm_status tdm_profile_range_push(const char *name);
tdm_status tdm_profile_range_pop(void);

// ---- the table: one row per op name (ranges are not ops: they are in the trace only) ----

typedef struct {
    const char *name;
    int64_t calls;
    double host_total_us;    // children (ops nested inside, e.g. autocast's casts) included
    double host_self_us;     // without them
    double host_mean_us;     // host_total_us / calls
    double share;            // host_self_us / the session's wall time (0..1)
    double device_total_us;  // < 0: not measured (no backend timer, e.g. cpu)
    double flops;            // total over the calls; 0 where the op has no formula
    int64_t bytes;           // net bytes allocated during the calls, summed
} tdm_profile_row;

// The rows, sorted by device time when measured, else by host total time (descending). The
// array belongs to p. Returns the number of rows.
int tdm_profile_rows(const tdm_profile *p, const tdm_profile_row **rows);
double tdm_profile_wall_us(const tdm_profile *p);   // stop - start
int64_t tdm_profile_event_count(const tdm_profile *p);   // ops and ranges recorded

// Prints the table (the top `top` rows; <= 0: all) as aligned text.
void tdm_profile_table_print(const tdm_profile *p, FILE *f, int top);
// The table as JSON text ({"wall_us":..,"rows":[{"name":..,"calls":..,...}]}); free() it. NULL
// with the error set on failure.
char *tdm_profile_table_json(const tdm_profile *p);

// Writes the Chrome trace (Trace Event Format: complete "X" events for ops and ranges on a host
// track per thread and, when measured, a device track; "C" counters of allocated/reserved bytes
// per device; an "i" instant at the peak) to path, atomically (temp file, fsync, rename).
tdm_status tdm_profile_trace_save(const tdm_profile *p, const char *path);
// Writes the table JSON to path, atomically.
tdm_status tdm_profile_table_save(const tdm_profile *p, const char *path);

#ifdef __cplusplus
}
#endif

#endif
