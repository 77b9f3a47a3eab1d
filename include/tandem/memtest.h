/* memtest.h — a test of a GPU's device memory (docs/CHECK.md "Memory test"): pattern tests over
 * most of the device's free memory, as memtestG80 / cuda_memtest and MemTest86 run them —
 * walking ones and walking zeros, address in address, moving inversions and a seeded random
 * pattern — each writing its pattern, then reading it back in a later kernel and reporting the
 * words that differ: their device address, what was written and what was read. The memory is
 * taken from the device for the test (cudaMalloc, the caching allocator's free cache emptied
 * first) and given back at the end. A backend without device memory (the cpu) answers
 * TDM_ERR_UNSUPPORTED. */
#ifndef TANDEM_MEMTEST_H
#define TANDEM_MEMTEST_H

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TDM_MEMTEST_WALKING_ONES = 0,   // 32-bit words: word i holds 1 << ((i + s) mod 32), s = 0..31
    TDM_MEMTEST_WALKING_ZEROS,      // the same inverted
    TDM_MEMTEST_ADDRESS,            // 64-bit words: each its own address, then its complement
    TDM_MEMTEST_MOVING_INVERSIONS,  // 64-bit: P up; verify P + write ~P ascending; verify ~P +
                                    // write P descending; verify P (P = 0, then 0x55..55)
    TDM_MEMTEST_RANDOM,             // 64-bit: Philox(seed, pass, index), then its complement
    TDM_MEMTEST_N_PATTERNS
} tdm_memtest_pattern;

#define TDM_MEMTEST_ALL ((1u << TDM_MEMTEST_N_PATTERNS) - 1u)
#define TDM_MEMTEST_DEFAULT_FRACTION 0.95   // of the free memory; at least 0.90 is a full test
enum {
    TDM_MEMTEST_PER_PATTERN = 8,   // failing words kept per pattern (distinct address and bits)
    TDM_MEMTEST_MAX_FAILURES = TDM_MEMTEST_PER_PATTERN * TDM_MEMTEST_N_PATTERNS
};

typedef struct {
    double fraction;     // of the device's free memory to test, (0, 1]; 0: the default (0.95)
    unsigned patterns;   // 1 << tdm_memtest_pattern for each; 0: all
    int passes;          // each pattern this many times (1..1000); 0: once
    uint64_t seed;       // the random pattern's stream
} tdm_memtest_params;

// One word that read back differently from what was written (expected ^ got: the bits).
typedef struct {
    uint64_t address;    // the word's device address (the first byte of it)
    uint64_t expected, got;
    int word_bytes;      // 4 (walking) or 8
    int pattern;         // tdm_memtest_pattern
    int pass;            // 0-based
} tdm_memtest_failure;

typedef struct {
    uint64_t free_bytes, total_bytes;   // the device's (cudaMemGetInfo), before the test
    uint64_t bytes_tested;              // in `chunks` allocations
    int chunks;
    double fraction;                    // bytes_tested / free_bytes
    uint64_t errors[TDM_MEMTEST_N_PATTERNS];   // words read wrong, per pattern (every read)
    uint64_t errors_total;
    int n_failures;                     // failures kept, pattern by pattern, in address order
    tdm_memtest_failure failures[TDM_MEMTEST_MAX_FAILURES];
    double seconds[TDM_MEMTEST_N_PATTERNS];   // wall time of each pattern, all passes
    double seconds_total;                     // allocation and release included
    unsigned patterns;                  // the patterns run
    int passes;
    // Before each reading step the L2 is evicted by writing a buffer of evict_bytes (twice the
    // L2's l2_bytes when the memory left allows), so that what is read back comes from the DRAM:
    uint64_t l2_bytes, evict_bytes;
    uint64_t verify_steps, evictions;   // reading steps; evictions before them (equal when evicted)
} tdm_memtest_result;

// "walking_ones", "walking_zeros", "address", "moving_inversions", "random"; NULL out of range.
const char *tdm_memtest_pattern_name(int pattern);

// Tests the memory of dev (a CUDA device; p NULL: the defaults). Returns TDM_OK when the test
// ran, whatever it found (out->errors_total counts the words read wrong); an error when it could
// not run (TDM_ERR_UNSUPPORTED on the cpu or while the thread captures a graph, TDM_ERR_OOM when
// no memory could be taken, TDM_ERR_ARG for bad parameters). Blocks until done; nothing else
// should use the device meanwhile (its memory is taken).
tdm_status tdm_device_memtest(tdm_device dev, const tdm_memtest_params *p, tdm_memtest_result *out);

#ifdef __cplusplus
}
#endif

#endif
