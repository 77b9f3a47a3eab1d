/* check_memtest.h — `bench check`'s memory test (check_memtest.c, docs/CHECK.md "Memory test"):
 * tdm_device_memtest on one GPU as a check entry in the style of the numerics ({"result":
 * "pass"|"fail"|"error", "detail", ...} with the failing addresses), its text, and the standalone
 * `bench check --memtest`. Level 4 of `bench check --level` calls check_memtest_run per GPU. */
#ifndef TANDEM_BENCH_CHECK_MEMTEST_H
#define TANDEM_BENCH_CHECK_MEMTEST_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "tandem/memtest.h"

#define CHECK_MEMTEST_NAME "memory.test"
#define CHECK_MEMTEST_MIN_FRACTION 0.90   // less of the free memory tested: "error", not a pass

// Runs the memory test on cuda:INDEX (P NULL: every pattern once over 95 % of the free memory)
// and returns its entry (never NULL but out of host memory):
//   {"result": "pass" | "fail" | "error", "detail": one line, "device": "cuda:0",
//    "emulated": bool, "measured": "0 errors in 3.6 MiB", "expected": "0 errors in >= 90 % of
//    free", "seconds", "timing": "EMULATED" (only on the emulated device: the emulator's time),
//    "bytes_tested", "free_bytes", "total_bytes", "fraction", "chunks", "passes",
//    "patterns": {"walking_ones": {"errors", "seconds"}, ...},
//    "errors": total words read wrong,
//    "failures": [{"pattern", "pass", "address", "expected", "got", "xor" (hex strings),
//                  "word_bytes", "bits": [{"byte": hex address, "bit": 0..7}...]}]}
// pass: no word read wrong over at least CHECK_MEMTEST_MIN_FRACTION of the free memory; fail:
// any word read wrong (the failures list the first per pattern); error: the test could not run
// or covered less (the detail says why).
cJSON *check_memtest_run(int index, const tdm_memtest_params *p);

// The entry as text: a line per pattern and the verdict, then each failing word (address,
// expected, got, the bits that differ as byte address and bit), as `bench check --memtest`
// prints it.
void check_memtest_print(FILE *f, const cJSON *entry);

// `bench check --memtest [--device cuda:N|all] [--json] [--seed S]` (cmd_check.c): every GPU
// asked for (DEVICE "all" or cuda:N), SEED the random pattern's. Exit: 0 every test passed, 1 one
// failed or could not run, 2 bad input, 3 no GPU (nothing tested).
int check_memtest_main(const char *device, bool json, unsigned seed);

#endif
