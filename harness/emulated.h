/* emulated.h — runs on the emulated CUDA device (suites/emu, -DTDM_CUDA_EMU=ON): `cuda:N` is then an
 * emulation on the CPU, which proves that the benchmarks run and verify but never how fast a GPU
 * is. How `bench run` marks such a run, and how `bench report`, `plot` and `compare` tell one
 * (docs/RESULTS_FORMAT.md): context.json and status.json "emulated": true, an `emulated` column
 * in the CSVs, "cuda_emulated" and gpus[].emulated in the env. */
#ifndef TANDEM_BENCH_EMULATED_H
#define TANDEM_BENCH_EMULATED_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

// The words every command uses.
#define BENCH_EMU_DEVICE "EMULATED on the CPU (suites/emu): not a GPU"
#define BENCH_EMU_BANNER                                                                        \
    "Emulated CUDA device on the CPU: these timings measure the emulator, not a GPU; they prove " \
    "only that the benchmarks run and verify"
#define BENCH_EMU_LABEL "EMULATED device (suites/emu), not a GPU figure"   // Google Benchmark labels

// Markers are read failing safe (json_strict.h bench_json_truthy): true, 1, "TRUE" all say so.
// A `bench env` object: does it hold an emulated GPU ("cuda_emulated": true, or a gpus[] entry
// with "emulated": true)?
bool bench_env_emulated(const cJSON *env);

// A parsed context.json: was the run's device the emulated one? Yes when its "emulated" is true,
// or when its "device" is cuda:N and env.gpus[N] (the entry whose "index" is N) has "emulated":
// true, or when its device is another cuda one (cuda:all) and any env.gpus entry is emulated, or
// (any cuda device) env.cuda_emulated is true. A run on the cpu of an emulated build is not
// emulated: its figures are the CPU's.
bool bench_context_emulated(const cJSON *context);

// A results directory: 1 when it is a run on the emulated device — context.json says so (above),
// status.json has "emulated": true, or any *.csv in it (hidden ones too) has an `emulated` column
// (any case) with a true row —, 0 when not (nothing says so), -1 when context.json or
// status.json exists but cannot be read or is not strict JSON (a key twice: readers disagree), or
// a CSV cannot be read. WHY (may be NULL) gets the file (its name in DIR) and the field that said
// so, or the error (with the file's path).
int bench_dir_emulated(const char *dir, char *why, size_t why_len);

#endif
