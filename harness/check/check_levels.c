/* check_levels.c — `bench check --level 1|2|3|4` (docs/CHECK.md "Levels"): the one table of which
 * check runs from which level (the measurements and the judge both read it, and a check of a later
 * work item plugs in by its row: `implemented` true), each level's time budget, and the table of
 * fault codes (TDM-Fnnn): every FAIL and WARN of the judge carries one, with its remediation and
 * the source it follows. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

// The checks of a GPU by the level they start at. A name ending in ".*" stands for its family
// (train.*). A row not implemented is listed at its level as not run: the verdict is incomplete.
static const check_level_row level_rows[] = {
    {"driver", 1, true, "the NVIDIA driver, the CUDA runtime and the libraries (cuBLAS, cuDNN, NCCL)"},
    {"nvml.persistence", 1, true, "persistence mode (the driver stays loaded between jobs)"},
    {"pcie.link", 1, true, "the PCIe link's generation and width against its maximum"},
    {"nvml.throttle", 1, true, "NVML's clocks-event reasons"},
    {"nvml.temperature", 1, true, "temperature against the slowdown threshold"},
    {"nvml.remapped_rows", 1, true, "HBM row remapping: pending or failed"},
    {"nvml.retired_pages", 1, true, "page retirement (before Ampere): pending"},
    {"nvml.ecc", 1, true, "ECC mode and uncorrected errors since boot"},
    {"nvml.xid", 1, true, "NVML's critical Xid events during the run (an event set)"},
    {"nvml.pcie_replay", 1, true, "PCIe replays during the run (counter delta)"},
    {"nvml.nvlink", 1, true, "NVLink CRC, replay and recovery errors during the run (deltas)"},
    {"nvml.ecc_delta", 1, true, "volatile ECC errors during the run (deltas)"},
    {"reference.golden", 2, true, "the host's CPU reference against the golden cases (host)"},
    {"numerics.golden", 2, true, "the golden cases on the GPU"},
    {"numerics.conform", 2, true, "a seeded random conformance run"},
    {"train.*", 2, true, "training trajectories against PyTorch's"},
    {"memory.d2d", 2, true, "device memory bandwidth"},
    {"gemm.tf32", 2, true, "GEMM TFLOP/s, TF32"},
    {"gemm.f16", 2, true, "GEMM TFLOP/s, f16"},
    {"gemm.bf16", 2, true, "GEMM TFLOP/s, bf16"},
    {"gemm.f64", 2, true, "GEMM TFLOP/s, f64"},
    {"pcie.h2d", 2, true, "pinned host to device bandwidth"},
    {"pcie.d2h", 2, true, "pinned device to host bandwidth"},
    {"multi.allreduce", 2, true, "all-reduce bus bandwidth (2 to 16 GPUs)"},
    {"multi.peer", 2, true, "peer copies, every ordered pair (2 to 16 GPUs)"},
    {"nvml.clocks", 2, true, "SM clock under load against its maximum"},
    {"sustained.load", 3, true, "sustained GEMM load: clocks, power and temperature over minutes"},
    {"memory.test", 4, true, "a device memory test (patterns over the free memory)"},
    {"pulsed.load", 4, true, "pulsed load: power transients"},
    // silent data corruption (check_sdc.c): the same bits every repetition, and on every GPU
    {"sdc.gemm", 3, true, "one seeded GEMM repeated: the same bits every time, on every GPU of the model"},
    {"sdc.train", 3, true, "a short deterministic training run: its fingerprint the same on every GPU of the model"},
    {NULL, 0, false, NULL}};

const check_level_row *check_level_rows(void) { return level_rows; }

const check_level_row *check_level_row_of(const char *check) {
    for (const check_level_row *r = level_rows; r->check; r++) {
        size_t l = strlen(r->check);
        if (l > 2 && !strcmp(r->check + l - 2, ".*") ? !strncmp(check, r->check, l - 1)
                                                    : !strcmp(check, r->check))
            return r;
    }
    return NULL;
}

bool check_level_runs(int level, const char *check) {
    const check_level_row *r = check_level_row_of(check);
    return !r || r->level <= level;   // a check the table does not name: every level's
}

// Level 1 takes seconds (NVML and the CUDA runtime's start), level 2 about two minutes a GPU
// (the GPUs are checked one after the other), the full check a few minutes a GPU; levels 3 and 4
// add their sustained part (--duration, else about 13 minutes, or 55) to the full check's.
double check_level_budget_s(int level, bool quick, int n_gpus, double duration_s) {
    int n = n_gpus > 0 ? n_gpus : 1;
    if (level <= 1) return 30;
    double base = quick ? 120.0 * n : 600.0 * n;
    if (level == 2) return base;
    double sustained = isfinite(duration_s) && duration_s > 0 ? duration_s : level == 3 ? 780 : 3300;
    return base + sustained;
}

// ---- fault codes ------------------------------------------------------------------------------

#define NV_XID "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors)"
#define NV_MEM "NVIDIA GPU memory error management (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt)"
#define NV_DPR "NVIDIA dynamic page retirement (docs.nvidia.com/deploy/dynamic-page-retirement)"
#define NV_NVML "NVML API reference (docs.nvidia.com/deploy/nvml-api)"
#define DCGM_STRESS "DCGM diagnostics, targeted stress (docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html)"
#define DCGM_POWER "DCGM diagnostics, targeted power (docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html)"
#define NV_EVENTS "NVML API reference, clocks-event reasons (docs.nvidia.com/deploy/nvml-api, nvmlClocksEventReasons)"
#define DCGM "DCGM diagnostics (docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html)"

static const check_code codes[] = {
    {"TDM-F001", "numerics wrong on the GPU",
     "rerun the check; a second failure means the GPU computes wrong results: drain the node and run `dcgmi diag -r 3`",
     DCGM},
    {"TDM-F002", "a run could not run (crash, time limit)",
     "read the run's log; a crash or hang on this GPU only: look for Xid events in the kernel log (`dmesg`), reset the GPU (`nvidia-smi -r`)",
     NV_XID},
    {"TDM-F003", "a training trajectory left PyTorch's",
     "rerun; if it fails again on this GPU only, drain it and run `dcgmi diag -r 3`", DCGM},
    {"TDM-F004", "the CPU reference failed the golden cases",
     "the build or the host is wrong, not the GPU: rebuild tandem and run `bench replay --device cpu`",
     "docs/CONFORMANCE.md"},
    {"TDM-F010", "a measurement failed (an error, or a wrong result)",
     "read the note; a wrong copy or product is a GPU fault: reset the GPU and rerun, drain it if it recurs",
     DCGM},
    {"TDM-F011", "a figure above the GPU's physical limit",
     "a timing bug of the check, not a GPU fault: report it with the results directory", "docs/CHECK.md"},
    {"TDM-F020", "device memory bandwidth below the model's",
     "check the memory clock (`nvidia-smi -q -d CLOCK`), ECC and remapped rows; run `dcgmi diag -r 3` (memory bandwidth)",
     DCGM},
    {"TDM-F021", "GEMM throughput below the model's",
     "check the throttle reasons, power limit and clocks (`nvidia-smi -q -d PERFORMANCE,POWER,CLOCK`) and persistence mode; run `dcgmi diag -r 3` (targeted stress)",
     DCGM},
    {"TDM-F022", "host<->device bandwidth below the link's",
     "check pcie.link, the slot and riser, and the host memory's NUMA node against the GPU's (`nvidia-smi topo -m`)",
     DCGM},
    {"TDM-F023", "all-reduce or peer bandwidth below the model's",
     "check the NVLinks (`nvidia-smi nvlink -s`), the fabric manager on NVSwitch systems and NCCL's topology (NCCL_DEBUG=INFO)",
     DCGM},
    {"TDM-F024", "a GPU far below its siblings",
     "compare its clocks, power and temperature with its siblings'; reset it and rerun; drain it if it stays slow",
     DCGM},
    {"TDM-F030", "the PCIe link trained below its maximum",
     "reseat the card or its riser and check the slot's BIOS settings; `lspci -vv`: LnkSta against LnkCap",
     NV_NVML},
    {"TDM-F031", "the slot allows less than the model's link",
     "a riser, a PCIe switch or the BIOS limits the slot: move the card or fix the setting", NV_NVML},
    {"TDM-F032", "PCIe replays during the run",
     "link-level errors retried: reseat the card, check the riser or cable and the slot; replays that keep growing: replace the board or the slot",
     DCGM},
    {"TDM-F040", "clocks held down by the hardware or by heat",
     "check cooling (fans, airflow, inlet temperature) and power delivery; `nvidia-smi -q -d PERFORMANCE`",
     NV_NVML},
    {"TDM-F041", "temperature at or near the slowdown threshold",
     "check cooling: fans, airflow, inlet temperature, the heat sink", NV_NVML},
    {"TDM-F042", "SM clock under load far below its maximum",
     "check the application clocks and locked clocks (`nvidia-smi -q -d CLOCK`), the power limit and the throttle reasons",
     NV_NVML},
    {"TDM-F050", "a row remap failed",
     "the GPU cannot repair its memory any more: drain it and RMA it (NVIDIA's criterion)", NV_MEM},
    {"TDM-F051", "a row remap is pending",
     "reset the GPU (`nvidia-smi -r`, or reboot) so that the remap takes effect", NV_MEM},
    {"TDM-F052", "a page retirement is pending",
     "reset the GPU (`nvidia-smi -r`, or reboot) so that the page is retired", NV_DPR},
    {"TDM-F053", "uncorrected ECC errors since boot",
     "results since boot may be wrong: reset the GPU; if they come back, drain it and RMA it", NV_MEM},
    {"TDM-F054", "ECC is off", "turn ECC on (`nvidia-smi -e 1`, then reset the GPU)", NV_NVML},
    {"TDM-F055", "uncorrected ECC errors in an earlier life",
     "watch the GPU: errors that come back are a memory fault (RMA)", NV_MEM},
    {"TDM-F056", "uncorrected ECC errors during the run",
     "the run's results may be wrong: reset the GPU; if they come back, drain it and RMA it", NV_MEM},
    {"TDM-F057", "corrected ECC errors during the run",
     "memory errors that ECC fixed: watch the count; a growing one foretells remaps (check nvml.remapped_rows)",
     NV_MEM},
    {"TDM-F058", "the memory test read a word back wrong",
     "note the failing addresses; reset the GPU (`nvidia-smi -r`), read nvml.remapped_rows and rerun `bench check --memtest`; a word wrong again: drain the GPU and run `dcgmi diag -r 4`, then RMA it",
     NV_MEM},
    {"TDM-F060", "a critical Xid event during the run",
     "look the Xid up in NVIDIA's catalog; reset the GPU; a hardware Xid that recurs: drain the node", NV_XID},
    {"TDM-F070", "NVLink CRC or replay errors during the run",
     "link errors on NVLink: `nvidia-smi nvlink -e`; reseat the NVLink bridge, or check the baseboard",
     DCGM},
    {"TDM-F071", "an NVLink recovered from a fault during the run",
     "the link is unstable: drain the node, `nvidia-smi nvlink -s`; replace the bridge or the board if it recurs",
     DCGM},
    {"TDM-F080", "persistence mode is off",
     "turn it on (`nvidia-smi -pm 1`, or run nvidia-persistenced) so that the driver stays loaded between jobs",
     "NVIDIA driver persistence (docs.nvidia.com/deploy/driver-persistence)"},
    {"TDM-F081", "the driver is older than the CUDA runtime",
     "install a driver that supports this CUDA runtime (or the CUDA compatibility package)",
     "CUDA compatibility (docs.nvidia.com/deploy/cuda-compatibility)"},
    {"TDM-F090", "the level ran past its time budget",
     "a slow node or a budget too tight: the logs have each run's seconds", "docs/CHECK.md"},
    {"TDM-F100", "the sustained or pulsed load could not run",
     "read the note: an error of the GEMM or its events under load is a GPU fault: reset the GPU and rerun; drain it if it recurs",
     DCGM_STRESS},
    {"TDM-F101", "targeted stress could not hold its target",
     "the GPU could not keep 0.8 x its own first rate: check clocks, power and temperature over the run (the plots, `nvidia-smi -q -d PERFORMANCE`); `dcgmi diag -r 3`",
     DCGM_STRESS},
    {"TDM-F102", "targeted power throughput below the model's",
     "check the power limit (`nvidia-smi -q -d POWER`), clocks and cooling; compare with siblings; `dcgmi diag -r 3` (targeted power)",
     DCGM_POWER},
    {"TDM-F103", "the SM clock fell during the load without a power cap",
     "heat or the hardware lowered the clock: check cooling (fans, airflow, inlet) and the clocks-event reasons over the run (`nvidia-smi -q -d PERFORMANCE`)",
     NV_EVENTS},
    {"TDM-F104", "throughput decayed during targeted power",
     "the GPU slowed as it ran: check temperature and clocks over the run; cooling; reset and rerun, drain it if it stays",
     DCGM_POWER},
    {"TDM-F105", "throttled for heat or by the hardware under sustained load",
     "by the reason named: hw slowdown or power brake: the board's power delivery or an external signal (PSU, baseboard); thermal: cooling (fans, airflow, inlet temperature, heat sink)",
     NV_EVENTS},
    {"TDM-F106", "throttled by the hardware during the pulsed load",
     "power transients tripped hw slowdown or the power brake: check the PSUs and the board's power delivery; thermal: cooling",
     NV_EVENTS},
    // silent data corruption (check_sdc.c, check_sdc_judge.c; docs/CHECK.md "Silent data corruption")
    {"TDM-F120", "the same GEMM gave different bits on a repetition",
     "the GPU computes different bits for the same input: drain it, run `dcgmi diag -r 3`; RMA it if it repeats",
     "gpu-burn (github.com/wilicc/gpu-burn): every product compared with the first; here bit for bit"},
    {"TDM-F121", "the GEMM's bits differ from those of the other GPUs of its model",
     "the GPU computes different bits from its siblings for the same input: drain it, run `dcgmi diag -r 3`; RMA it if it repeats",
     "docs/CHECK.md: the same inputs, build and model give the same bits (deterministic kernels)"},
    {"TDM-F122", "the deterministic training's fingerprint differs from the other GPUs' of its model",
     "the GPU trains to different bits than its siblings: drain it, run `dcgmi diag -r 3` and `bench check --memtest`; RMA it if it repeats",
     "Dixit et al., Silent Data Corruptions at Scale (Meta, arXiv:2102.11245)"},
    {"TDM-F123", "no GPU majority: the GPUs of one model disagree",
     "the GPUs of one model give different bits and none has a majority: run `bench check --level 3` again and `dcgmi diag -r 3` on each; compare with the fleet (`bench compare --fleet`)",
     "docs/CHECK.md: the majority of the GPUs of a model is the yardstick"},
    {NULL, NULL, NULL, NULL}};

const check_code *check_codes(void) { return codes; }

const check_code *check_code_of(const char *code) {
    for (const check_code *c = codes; code && c->code; c++)
        if (!strcmp(c->code, code)) return c;
    return NULL;
}

// What NVIDIA's Xid catalog says to do about the Xids a node meets most (the rest: the catalog).
const char *check_xid_remedy(unsigned long long xid) {
    switch (xid) {
    case 13: case 31: case 43: case 45:
        return "an application fault (a bad access, an exception, a killed context) rather than the GPU's: check the job; recurring on one GPU only, reset it";
    case 48: return "a double-bit ECC error: reset the GPU; if it recurs, RMA";
    case 63: return "a row remap (or page retirement) was recorded: reset the GPU so that it takes effect";
    case 64: return "a row remap (or page retirement) failed: drain the GPU and RMA it";
    case 74: return "an NVLink error: check nvml.nvlink, reseat the bridge or check the baseboard; reset the GPU";
    case 79: return "the GPU fell off the bus: reseat it, check its power and the slot; RMA if it recurs";
    case 92: return "a high single-bit ECC error rate: watch the GPU, reset it; RMA if it recurs";
    case 94: return "a contained ECC error: restart the affected application; reset the GPU when convenient";
    case 95: return "an uncontained ECC error: reset the GPU now";
    case 119: case 120: return "the GPU's GSP timed out or failed: reset the GPU; update the driver";
    default: return "see NVIDIA's Xid catalog for this Xid; reset the GPU; a hardware Xid that recurs: drain the node";
    }
}
