/* check.h — the parts of `bench check` (docs/CHECK.md): the expectations file (check_expect.c),
 * the judging of measured figures against it (check_judge.c: a pure function of two JSON
 * objects, so it is tested without a GPU), the measurements (check_measure.c), the training
 * trajectory rule (check_train.c), the verdict table of `bench report` (check_report.c), a
 * fleet's baseline and rules (check_rules.c, printed by check_rules_print.c), the levels and
 * fault codes (check_levels.c), the sustained and pulsed load with their judge
 * (check_sustained.c, check_sustained_judge.c), and the silent data corruption checks
 * (check_sdc.c measures, check_sdc_judge.c judges; `bench compare --fleet` votes on their
 * fingerprints too).
 *
 * The figures of a check (format tandem-check-figures/1, also the "check" section of a results
 * directory's status.json, where each GPU also carries its "checks"):
 *   {"gpus": [{"index", "device", "name", "emulated",
 *              "figures": {"memory.d2d": {"value", "unit", "samples": [...]}, "gemm.tf32": ...},
 *              "link": {"pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "under_load"},
 *              "health": {"throttle_reasons", "temperature_c", ... null when not read, "nvml"},
 *              "numerics": {"numerics.golden": {"result": "pass"|"fail"|"error", "detail"}, ...},
 *              "driver": {"driver_version", "cuda_driver_version", "cuda_runtime_version", ...},
 *              "counters": {"seconds", "start": {"pcie_replay", ...}, "end": {...}, "xid": [...]},
 *              "series": {"sustained.load": {"t_s": [...], "sm_clock_mhz", "mem_clock_mhz", "power_w",
 *                         "temperature_c", "throttle_reasons", "tflops", "phase": arrays of one
 *                         length, "target_tflops", "median_tflops", ...}, "pulsed.load": {...}},
 *              "sdc" (levels 3, 4): {"sdc.gemm": {"repeats", "mismatches", "first_mismatch" (a
 *                        repetition, 0 the first, or null), "dtype", "shape": [m, k, n], "digest"
 *                        (SHA-256 of the first product, 64 hex digits, or null), "seconds", "error"},
 *                      "sdc.train": {"fingerprints": [{"digest", "build", "libs", "gpu",
 *                        "emulated", "precision", "model", "steps", "final_loss",
 *                        "final_loss_bits"}], "seconds", "error"}}}],
 *    "host": {"numerics": {"reference.golden": ...}}, "no_gpu": "why" or absent,
 *    "level": 1..4, "budget_s", "elapsed_s"}
 * The judged lines of a FAIL or WARN carry "code" (TDM-Fnnn) and "remedy" (check_levels.c).
 * A value that was not measured is absent or null: it is reported, never guessed. */
#ifndef TANDEM_BENCH_CHECK_H
#define TANDEM_BENCH_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#define CHECK_EXPECT_FORMAT "tandem-check-expectations/1"
#define CHECK_FIGURES_FORMAT "tandem-check-figures/1"
#define CHECK_SECTION_FORMAT "tandem-check/1"
#define CHECK_BASELINE_FORMAT "tandem-check-baseline/1"
#define CHECK_RULES_FORMAT "tandem-check-rules/1"

// Exit codes of `bench check` (bench.h: 0, 1, 2), the one of a check that judged no GPU, and the
// one of a check that misses an expected check of a GPU (absent or not run) while nothing failed.
enum {
    CHECK_EXIT_PASS = 0,
    CHECK_EXIT_FAIL = 1,
    CHECK_EXIT_BAD = 2,
    CHECK_EXIT_NO_GPU = 3,
    CHECK_EXIT_INCOMPLETE = 4
};

// The words of a verdict, as printed and stored ("verdict" of each check).
#define CHECK_PASS "PASS"
#define CHECK_WARN "WARN"
#define CHECK_FAIL "FAIL"
#define CHECK_NEEDS_GPU "needs a GPU"
#define CHECK_EMULATED "EMULATED"           // measured on the emulated device: not judged
#define CHECK_NO_EXPECT "no expectation"    // unknown model (or precision): not judged
#define CHECK_MISSING "missing"             // the reading is not there: reported, not guessed
#define CHECK_NOT_RUN "not run"             // a GPU's check that was not measured: incomplete
#define CHECK_ABSENT "absent"               // an expected check the figures do not hold: incomplete

// The physical limit of a figure (docs/CHECK.md): the model's datasheet figure x the file's
// "physical_limit": {"margin"} (default below); for a model the file does not know, or a figure it
// does not give, CHECK_UNKNOWN_FACTOR x the fastest model of the file, else CHECK_FIGURE_CAP.
#define CHECK_LIMIT_MARGIN 1.10
#define CHECK_UNKNOWN_FACTOR 10.0
#define CHECK_FIGURE_CAP 1e5  // GB/s or TFLOP/s: no GPU is within a factor of 10 of it
// PCIe replays in one run from which nvml.pcie_replay FAILs (any growth is a WARN): DCGM's
// diagnostic PCIe test's default limit (pcie.max_pcie_replays).
#define CHECK_PCIE_REPLAY_FAIL 80

// NVML's clocks-event reasons that are a fault under load (nvml.throttle, sustained.throttle,
// pulsed.load): hw slowdown (0x8), sw thermal (0x20), hw thermal (0x40), hw power brake (0x80).
// The sw power cap (0x4) is normal at full load.
#define CHECK_THROTTLE_BAD ((1ULL << 3) | (1ULL << 5) | (1ULL << 6) | (1ULL << 7))
#define CHECK_THROTTLE_POWER_CAP (1ULL << 2)

// The checks whose figures are performance (judged against the model, and across siblings).
extern const char *const check_perf_names[];   // NULL-terminated: "memory.d2d", "gemm.tf32", ...

// ---- levels and fault codes (check_levels.c) -------------------------------------------------

// The level a check starts at (docs/CHECK.md "Levels"): the one table the measurements and the
// judge read. A check whose name ends in ".*" stands for its family (train.*). implemented false:
// listed at its level as not run (incomplete) until its work item lands.
typedef struct {
    const char *check;
    int level;
    bool implemented;
    const char *what;
} check_level_row;
#define CHECK_LEVEL_MIN 1
#define CHECK_LEVEL_MAX 4
const check_level_row *check_level_rows(void);   // ended by a row with check NULL
const check_level_row *check_level_row_of(const char *check);   // NULL: not in the table
bool check_level_runs(int level, const char *check);   // a check the table lacks: every level's
// The level's time budget, seconds: the whole node's (n_gpus GPUs, checked one after another);
// duration_s (levels 3 and 4; NaN or 0: the default) is the sustained part's.
double check_level_budget_s(int level, bool quick, int n_gpus, double duration_s);

// A fault code: every FAIL and WARN of the judge carries one ("code", "remedy" in its line).
typedef struct {
    const char *code;     // "TDM-F051"
    const char *title;    // "a row remap is pending"
    const char *remedy;   // "reset the GPU ..."
    const char *source;   // what the rule and the remedy follow
} check_code;
const check_code *check_codes(void);   // ended by a row with code NULL
const check_code *check_code_of(const char *code);
const char *check_xid_remedy(unsigned long long xid);   // NVIDIA's Xid catalog, in short

// ---- sustained and pulsed load (check_sustained.c, docs/CHECK.md) ------------------------------

// Levels 3 and 4 on the n GPUs of gpus (entries of check_run_gpu; index: their device indexes), all
// at once (a thread each: the node's power supply carries them together, as in DCGM): the
// sustained load (calibrate, targeted stress, targeted power) and, at level 4, the pulsed load,
// for duration_s seconds in all (NaN or 0: the level's default), each as a time series in the
// GPU's "series" ({"sustained.load": {...}, "pulsed.load": {...}}).
void check_run_sustained(cJSON *gpus, const int *index, int n, int level, double duration_s);
// The judge of those series (pure; a one-line hook of check_judge): the lines sustained.stress,
// sustained.power, sustained.clocks, sustained.decay, sustained.throttle and pulsed.load.
void check_judge_sustained(cJSON *checks, const cJSON *gpu, const cJSON *model, const cJSON *expect,
                           bool emulated, int level);
// The series SERIES ("sustained.load" or "pulsed.load") of every GPU of GPUS as a tidy CSV
// (docs/RESULTS_FORMAT.md; suite "sustained" or "pulsed", a benchmark per GPU, x the seconds since
// the load began, metrics sm_clock, memory_clock, power, temperature, throughput): what `bench
// report` draws, a line per GPU (plots/sustained.gp, plots/pulsed.gp). NULL when no GPU has a
// reading of it. The caller frees it.
char *check_series_csv(const cJSON *gpus, const char *series, bool emulated);
// GPU i's recorded "series", strictly (check_judge's input check): false with err naming the field.
bool check_sustained_valid(const cJSON *gpu, int i, char *err, size_t len);
// (The judges' check lines and the clocks-event reasons by name: check_lines.h.)

// ---- the expectations file -----------------------------------------------------------------

// Parses and validates an expectations file. NULL with a one-line message in err (naming the
// file and the field) when it cannot be read or is malformed: the caller exits 2.
cJSON *check_expect_load(const char *path, char *err, size_t err_len);
// The same from text already read (for tests and --from-figures); name is used in messages.
cJSON *check_expect_parse(const char *text, const char *name, char *err, size_t err_len);
// The model entry for a device name ("NVIDIA A100-SXM4-80GB"): NULL when no model's `names`
// match (case-insensitively, without the leading "NVIDIA ").
const cJSON *check_expect_model(const cJSON *expect, const char *device_name);
// The fastest a GPU of MODEL (NULL: unknown) can be on performance check NAME, in its unit (the
// physical limit above); why says how it was found ("1.1 x the datasheet's 2039 GB/s").
double check_expect_limit(const cJSON *expect, const cJSON *model, const char *name, char *why,
                          size_t why_len);
// PCIe per-direction rate, GB/s: GT/s x encoding / 8 x lanes (as suites/bench/transfer.c); NaN
// for a generation outside 1..6 or a width outside 1..32.
double check_pcie_gbps(double gen, double width);
// Whether s can name a model or a device in an expectations file: UTF-8 text of at most 200
// bytes, not blank, without control characters. why (may be NULL) says what is wrong.
bool check_name_valid(const char *s, char *why, size_t why_len);
// The default file: $TANDEM_CHECK_EXPECT, else suites/check/expectations.json as
// check_find_source_path finds it.
bool check_expect_default_path(char *out, size_t len);
// A file of the source tree (relative path, e.g. "suites/golden/cases"): under $TANDEM_DOCS_ROOT,
// else as bench_find_source (fileio.h) finds it (an install's share/tandem/ first).
bool check_find_source_path(const char *rel, char *out, size_t len);

// --write-expect: an expectations object whose models' "checks" are the medians of the figures
// of the GPUs in the check results directories DIRS (their status.json "check" sections, judged
// again against BASE), per model; a directory named twice (realpath) counts once; runs that are
// emulated, incomplete ("complete" not true, write_errors) or failed (a host FAIL) and GPUs that
// had a FAIL, miss an expected check or have no valid name are left out (said in err as a note).
// The datasheet entries of BASE for the same models are kept. The result passes
// check_expect_parse (the rule --expect applies) or is not returned. NULL with a message on bad
// input.
cJSON *check_expect_from_runs(const cJSON *base, char **dirs, int n, char *err, size_t err_len);

// A results directory of `bench check --out` as --write-expect and the fleet's baseline and rules
// (check_rules.c) read it: status.json (strict JSON, with a "check" section), that section judged
// again against BASE (a figure that cannot be true is bad input), whether the run is on the
// emulated device (bench_dir_emulated; why says which file said so), why the run as a whole gives
// no healthy figure (skip: emulated, incomplete, write_errors, a host FAIL; NULL when none) and
// the host name its context.json records ("" when none). False with err on bad input.
typedef struct {
    cJSON *status;        // status.json
    cJSON *judged;        // its "check" section judged again
    bool emulated;
    const char *skip;
    char why[1200];
    char host[256];
} check_run_dir;
bool check_run_read(const cJSON *base, const char *dir, check_run_dir *r, char *err, size_t len);
void check_run_dir_free(check_run_dir *r);
// Why a GPU of a read run gives no healthy figure (RECORDED: its entry in status.json, JUDGED:
// the same GPU judged again): emulated, no model name, a FAIL, an expected check not measured;
// NULL when it is healthy. The reason is written to why.
const char *check_gpu_excluded(const cJSON *recorded, const cJSON *judged, char *why, size_t n);

// --from-figures: the figures in text (len bytes, from the file path), as strict JSON
// (json_strict.h): a figures file as it is, or a status.json's "check" section, whose GPUs are
// marked emulated when the status.json says "emulated" or, for a file named status.json, its
// results directory does (emulated.h): an emulated run is never judged as GPU figures. NULL with a
// message in err when it is not strict JSON. The caller deletes the result.
cJSON *check_figures_parse(const char *text, size_t len, const char *path, char *err,
                           size_t err_len);

// ---- judging (pure) --------------------------------------------------------------------------

// Judges figures (CHECK_FIGURES_FORMAT, or a status.json "check" section) against expect: returns
// a new check section — the figures, each GPU's "model" and "checks" ([{check, measured, unit,
// expected, ratio, verdict, note}]), node-wide "outliers", host "checks" and "summary"
// ({pass, warn, fail, not_judged, judged_gpus, exit, line}). NULL with err on malformed figures.
cJSON *check_judge(const cJSON *figures, const cJSON *expect, char *err, size_t err_len);
// The summary's exit code (CHECK_EXIT_*).
int check_exit_code(const cJSON *judged);
// One line per check, per GPU, then the node's outliers and the summary.
void check_print_text(FILE *f, const cJSON *judged);

// ---- a fleet's baseline and rules (check_rules.c, docs/CHECK.md) -------------------------------

// The metrics of a judged GPU (an entry of check_judge's "gpus"), by name: each figure
// ("gemm.bf16"), NVML reading ("nvml.temperature_c") and link field ("link.pcie_width") that is a
// number or null, as {"value": number or null, "unit", "state"}: "ok"; "failed" (bench check's
// verdict on it is FAIL); "not run" (a figure of null); "missing" (an expected performance check
// the figures lack, a reading NVML did not give). The caller deletes it.
cJSON *check_gpu_metrics(const cJSON *judged_gpu);
// --write-baseline: per model (the expectations' model name, else the device name without
// "NVIDIA ") and metric, the median, min, max and count of the healthy GPUs' values in the results
// ARGS (directories of `bench check --out`, or their status.json), and the nodes they came from
// (context.json's host, else the path). A run on the emulated device is bad input; runs and GPUs
// --write-expect leaves out are left out here too, said in note. The result passes
// check_baseline_parse or is not returned; NULL with err on bad input.
cJSON *check_baseline_from_runs(const cJSON *expect, char **args, int n, char *note,
                                size_t note_len, char *err, size_t err_len);
// A baseline file (CHECK_BASELINE_FORMAT), strictly: NULL with err naming NAME and the field.
cJSON *check_baseline_parse(const char *text, size_t n, const char *name, char *err,
                            size_t err_len);
// A rules file (CHECK_RULES_FORMAT) against BASELINE: every rule named once, a pattern matching a
// metric of the baseline, exactly one criterion; NULL with err naming NAME and the field.
cJSON *check_rules_parse(const char *text, size_t n, const char *name, const cJSON *baseline,
                         char *err, size_t err_len);
// One node by every rule (pure): {"node", "verdict": "accepted" | "rejected", "gpus",
// "failures": [{"rule", "device", "metric", "value", "limit", "ratio", "why"}]}. JUDGED is a
// check_judge result, RECORDED (may be NULL) the check section it was judged from; a GPU line of
// bench check's own that is a FAIL (judged again, or as recorded), absent or not run rejects the
// node (rule "(check)"), as EMULATED, RUN_PROBLEM (a reason the run is not whole, or NULL) and a
// node without a GPU do.
cJSON *check_rules_judge_node(const char *node, const cJSON *judged, const cJSON *recorded,
                              bool emulated, const char *run_problem, const cJSON *baseline,
                              const cJSON *rules);
// The rows of the results ARGS (as above, "results" the path given); NULL with err on bad input.
cJSON *check_rules_judge_runs(const cJSON *expect, const cJSON *baseline, const cJSON *rules,
                              char **args, int n, char *err, size_t err_len);

// The rows as FORMAT: "text" (a table, then a summary line), "jsonl" (a JSON object a line),
// "md" or "html" (check_rules_print.c). Returns CHECK_EXIT_PASS when every node was accepted,
// CHECK_EXIT_FAIL when one was rejected or the output could not be written.
bool check_rules_format_known(const char *format);
int check_rules_print(FILE *f, const cJSON *rows, const char *format);

// ---- fleet tools: Prometheus (check_prometheus.c) ----------------------------------------------

// The judged check (check_judge's result) in Prometheus's text exposition format, as
// node_exporter's textfile collector reads it: the gauge tandem_check_verdict per check and GPU
// (0 PASS, 1 WARN, 2 FAIL, 3 incomplete, 4 not judged; labels check, gpu, device, uuid, model,
// verdict, code), tandem_check_ratio where a line has a ratio, tandem_check_exit,
// tandem_check_lines per verdict and tandem_check_timestamp_seconds (the figures' "started", else
// NOW_S). NULL out of memory; the caller frees it.
char *check_prometheus_text(const cJSON *judged, double now_s);

// ---- the report's verdict table (bench report) ------------------------------------------------

// When DIR/status.json has a "check" section: writes its verdict table (a row per check, a column
// per GPU, green/red) to f as HTML or Markdown and returns true; false (nothing written) when not.
bool check_report_table(FILE *f, const char *dir, bool as_html);

// ---- the training trajectory rule (check_train.c) ---------------------------------------------

// docs/CONFORMANCE.md "Training trajectories" (suites/tests/test_train_golden.c judges with it):
// the dump of `bench train` on GOLDEN's model, data and initial weights against GOLDEN's float64
// trajectory. amp: "off", "bf16" or "fp16"; tf32: TF32 products on. Returns 1 pass, 0 fail, -1 the
// files cannot be read; detail says the loss deviation, its tolerance and the worst tensor.
int check_train_judge(const char *golden, const char *dump, const char *amp, bool tf32,
                      char *detail, size_t detail_len);
// The argv of `bench train` ("bench", "train", ...) that trains GOLDEN as its metadata says, on
// DEVICE, dumping to DUMP; amp NULL keeps the file's. Strings are copied into STORE. Returns argc,
// or -1 when GOLDEN is not a tandem-train/1 file.
int check_train_argv(const char *golden, const char *amp, bool tf32, const char *device,
                     const char *dump, char *store, size_t store_len, char **argv, int max);

// ---- the golden GPT-2 rule (check_gpt.c) -------------------------------------------------------

// docs/CONFORMANCE.md "Golden GPT-2": a run of tandem's GPT (CAND: bench train --dump with
// --dump-step0, or a test's step 0: loss, grad_norm, lr, logits0, grad0.<name> and the final
// <name>s) against GOLDEN (tandem-gpt/1) at PRECISION "f32", "tf32", "bf16" or "fp16".
// step0_only: logits0, grad0 and the first loss only. Returns 1 pass, 0 fail, -1 a file cannot
// be read or lacks an entry; detail names the worst check (or the failing one) and its ratio.
int check_gpt_judge(const char *golden, const char *cand, const char *precision, bool step0_only,
                    char *detail, size_t detail_len);
// The argv of `bench train` ("bench", "train", ...) that trains GOLDEN's run as its metadata says
// (nanoGPT's AdamW: groups decayed by dim, betas, clipping, the cosine schedule) at PRECISION on
// DEVICE, dumping with --dump-step0 to DUMP. Strings are copied into STORE. Returns argc, or -1
// when GOLDEN is not a tandem-gpt/1 file of a run bench train can make (or max < 48).
int check_gpt_argv(const char *golden, const char *precision, const char *device, const char *dump,
                   char *store, size_t store_len, char **argv, int max);

// ---- the measurements (check_measure.c) ---------------------------------------------------------

typedef struct {
    bool quick;
    unsigned seed;          // bench conform's seed
    char logdir[4096];      // where the runs' outputs and dumps go
    double timeout_s;       // each child run's limit
    int level;              // 1 to 4 (check_levels.c): which checks run
} check_run_opts;

// Children and signals: check_signals_install() makes SIGINT, SIGTERM and SIGHUP kill the running
// child and be remembered (check_interrupted() returns the signal, else 0); nothing starts after
// one; check_signals_reraise() ends the process by it (when there was one). check_run_child runs
// this program (argv[0] onwards) in a process group of its own that dies with this process, its
// output into LOG (NULL: stdout to /dev/null), at most timeout_s seconds: its exit status, 124 on
// the time limit, 128 + signal, -1 when it could not start; LAST gets the log's last line.
void check_signals_install(void);
int check_interrupted(void);
// The GPUs `--device D` names (cuda:N or all) into index[] (*n of them, at most 64); with none
// present, *n = 0 and no_gpu says why. 0, or bench_bad's 2 on a bad D; `flag` prefixes the
// message ("--device" or "--memtest --device").
int check_devices_pick(const char *device, const char *flag, int index[64], int *n, char *no_gpu,
                       size_t no_gpu_n);
void check_signals_reraise(void);
int check_run_child(char *const argv[], const char *log, double timeout_s, char *last, size_t n);

// The host's checks: the reference against the golden cases ({"numerics": {...}}).
cJSON *check_run_host(const check_run_opts *o);
// One GPU's entry (index, device, name, emulated, driver, figures, link, health, numerics): the
// checks of o->level.
cJSON *check_run_gpu(int index, const check_run_opts *o);
// The run's error counters of GPU index: check_counters_begin reads them (NVML) and registers
// the GPU for Xid events at the start of the run; check_counters_end reads them again and adds
// "counters" ({"seconds", "start", "end", "xid", "xid_why"}) to the GPU's entry. begin is freed.
cJSON *check_counters_begin(int index);
void check_counters_end(cJSON *gpu, cJSON *begin, int index);
// With two or more GPUs: adds multi.allreduce and multi.peer to each entry of gpus.
void check_run_multi(cJSON *gpus, const int *index, int n, const check_run_opts *o);

// ---- silent data corruption (check_sdc.c measures, check_sdc_judge.c judges) -----------------

// sdc.gemm's repetitions on a GPU last about this long (the emulated device: 10 repetitions).
#define CHECK_SDC_GEMM_SECONDS 10.0
// sdc.train's run: the model (bench train's grammar) and its steps (on the emulated device fewer).
#define CHECK_SDC_TRAIN_MODEL "gpt:L2-H2-D32-T16-V67"
#define CHECK_SDC_TRAIN_STEPS "50"
#define CHECK_SDC_TRAIN_STEPS_EMU "4"
// What the judge takes for sdc.gemm's work (check_sdc_judge.c): an n^3 bf16 GEMM, n this on a GPU
// and CHECK_SDC_GEMM_N_EMU on the emulated device, repeated CHECK_SDC_GEMM_MIN_REPS times at least;
// and for sdc.train's: one fingerprint per precision trained (f32, bf16) of the model and steps
// above. A record of other work is "not run" (incomplete): it is not the check's.
#define CHECK_SDC_GEMM_N 4096
#define CHECK_SDC_GEMM_N_EMU 64
#define CHECK_SDC_GEMM_MIN_REPS 10
// Adds "sdc" ({"sdc.gemm": {...}, "sdc.train": {...}}, the format comment at the top) to each
// entry of gpus (index[i]'s): levels 3 and 4.
void check_sdc_run(cJSON *gpus, const int *index, int n, const check_run_opts *o);
// gpus[i].sdc as a recorded figure may hold it: false with err naming the field (bad input).
bool check_sdc_valid(const cJSON *sdc, int i, char *err, size_t len);
// The sdc.gemm and sdc.train lines of each of the n judged GPUs gp[] (their "checks" arrays):
// each GPU's repetitions, then its digests and fingerprints against those of the other GPUs of
// its model (the majority; docs/CHECK.md). At a level from 3 an absent record is absent (the
// verdict incomplete); the emulated device's lines are EMULATED, the note saying what a GPU's
// verdict would be.
void check_sdc_judge(cJSON **gp, int n, int level);
// The vote of the same work on many GPUs (a node's, a fleet's): the digests of one group must be
// the same bits, the majority's (more than half of the group) the yardstick. check_sdc_tally
// sorts v by group and digest and fills in each vote's size (votes in its group), same (of them
// with its digest, itself included), majority (votes with the majority's digest; 0: no digest
// has more than half) and major (that digest, or NULL).
typedef struct {
    char *group;          // what must give the same bits (the caller's, freed by it)
    const char *digest;
    int owner, sub;       // the caller's: the GPU's place; the node's and the GPU's in it
    const char *what;     // a label: "GEMM", a precision
    bool gemm;            // sdc.gemm's digest, else a training fingerprint
    const cJSON *ref;     // the caller's: the record voted with
    int size, same, majority;
    const char *major;
} check_sdc_vote;
void check_sdc_tally(check_sdc_vote *v, int m);
// Whether s is a SHA-256 digest as recorded: 64 lowercase hexadecimal digits.
bool check_sdc_digest_valid(const char *s);

#endif
