/* bench.h — the commands of the `bench` program; each takes its own argv (argv[0] = the command)
 * and returns the process exit code: 0 success, 1 a failed check, 2 bad usage or input. */
#ifndef TANDEM_BENCH_H
#define TANDEM_BENCH_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

int bench_replay(int argc, char **argv);
int bench_conform(int argc, char **argv);
int bench_train(int argc, char **argv);
int bench_plot(int argc, char **argv);
int bench_report(int argc, char **argv);
int bench_env(int argc, char **argv);
int bench_compare(int argc, char **argv);
int bench_run(int argc, char **argv);
int bench_list(int argc, char **argv);
int bench_check(int argc, char **argv);
int bench_counters(int argc, char **argv);
int bench_resources(int argc, char **argv);

// The machine's context (cmd_env.c), as `bench env --json` prints it: a flat object of strings,
// numbers and null (unknown), plus "gpus", an array of flat objects. The caller cJSON_Deletes it;
// NULL when out of memory.
cJSON *bench_env_json(void);
// Prints "bench CMD: <message>" on stderr and returns 2, the exit code of bad usage or input.
int bench_bad(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *bench_git_commit(void);
double bench_now_s(void);   // seconds on the monotonic clock (CLOCK_MONOTONIC): for durations   // short hash bench was configured from, or "unknown"
// Text from a results directory (names, reasons, GPU models) as report.html and report.md write
// it (cmd_report.c): in HTML, & < > " ' as entities (control characters but line breaks and tabs
// as spaces); in Markdown, its punctuation (\ ` * _ [ ] < > | ~ & #) backslash-escaped, control
// characters and line breaks as spaces.
void bench_html_text(FILE *f, const char *s);
void bench_md_text(FILE *f, const char *s);
// A results directory's context.json (cmd_run.c): format, tandem's version, commit and build, the
// command line (argv without "bench"), the device, emulated (with the banner), the start time and
// the machine's env (taken; NULL: null). The caller adds what its command knows and deletes it.
cJSON *bench_context_json(int argc, char **argv, const char *device, bool emulated, const char *started,
                          cJSON *env);

#endif
