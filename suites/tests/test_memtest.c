/* test_memtest.c — the device memory test (tandem/memtest.h, kernels/k_memtest.cu):
 *   api     its parameters are checked, and the cpu has no device memory to test (a clear
 *           TDM_ERR_UNSUPPORTED); any build
 *   clean   (cuda:0; exit 77 without one) every pattern over >= 90 % of the free memory finds
 *           nothing, and the memory goes back to the device (a second run finds as much free)
 *   stuck   (the emulated device, built with TDM_TEST_EMU; TANDEM_EMU_FLIP_BIT set by the test's
 *           environment) every pattern finds the stuck bit: errors counted, and every failing
 *           word it reports is the planted cell's word with exactly that one bit wrong, stuck
 *           at the planted value
 *   evict   (cuda:0; TANDEM_EMU_MEM=256M in the emulated build) before every reading step the L2
 *           was evicted by a buffer of at least twice its size (cudaDevAttrL2CacheSize), so what
 *           is read comes from the DRAM: evictions == reading steps
 *   region  (the emulated device, a stuck bit planted) at the first atomic of the test's kernels
 *           (the stuck cell found) 256 KiB after the cell are overwritten: thousands of words
 *           read wrong in that step, and the kernels' integer atomics (counted by the emulator's
 *           hook) stay far below one per bad word: a bad region costs no atomic per word */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"
#include "tandem/memtest.h"

#ifdef TDM_TEST_EMU
unsigned long long tdm_emu_stuck_bit(int *device, int *bit, int *value);   // suites/emu/runtime.cc
void tdm_emu_set_atomic_hook(void (*hook)(const void *addr));             // suites/emu/exec.cc
#endif

static const tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};

static int api(void) {
    tdm_memtest_result *r = calloc(1, sizeof *r);
    tdm_memtest_params bad = {.fraction = 1.5};
    CHECK(tdm_device_memtest(cuda0, &bad, r) == TDM_ERR_ARG);
    bad = (tdm_memtest_params){.patterns = 1u << TDM_MEMTEST_N_PATTERNS};
    CHECK(tdm_device_memtest(cuda0, &bad, r) == TDM_ERR_ARG);
    bad = (tdm_memtest_params){.passes = -1};
    CHECK(tdm_device_memtest(cuda0, &bad, r) == TDM_ERR_ARG);
    CHECK(tdm_device_memtest(cuda0, NULL, NULL) == TDM_ERR_ARG);
    CHECK(tdm_device_memtest(TDM_CPU, NULL, r) == TDM_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(tdm_last_error(), "not supported by the cpu backend") &&
                  strstr(tdm_last_error(), "give a CUDA device"),
              "%s", tdm_last_error());
    for (int k = 0; k < TDM_MEMTEST_N_PATTERNS; k++) CHECK(tdm_memtest_pattern_name(k) != NULL);
    CHECK(tdm_memtest_pattern_name(TDM_MEMTEST_N_PATTERNS) == NULL);
    free(r);
    CHECK_DONE("memtest.api");
}

static bool have_cuda(void) {
    if (tdm_device_available(cuda0)) return true;
    printf("SKIP: no CUDA device: %s\n", tdm_last_error());
    return false;
}

static int clean(void) {
    if (!have_cuda()) return 77;
    tdm_memtest_result *r = calloc(2, sizeof *r);
    // something cached first: the test empties the cache and tests that memory too
    int64_t shape[1] = {1 << 16};
    tdm_tensor *t = tdm_tensor_zeros(1, shape, TDM_DTYPE_F32, cuda0);
    CHECK_MSG(t != NULL, "%s", tdm_last_error());
    tdm_tensor_free(t);
    tdm_memtest_params p = {.seed = 7};
    for (int run = 0; run < 2; run++) {
        CHECK_MSG(tdm_device_memtest(cuda0, &p, &r[run]) == TDM_OK, "%s", tdm_last_error());
        printf("run %d: %llu of %llu free bytes (%.1f %%) in %d chunk(s), %.2f s\n", run,
               (unsigned long long)r[run].bytes_tested, (unsigned long long)r[run].free_bytes,
               100 * r[run].fraction, r[run].chunks, r[run].seconds_total);
        CHECK_MSG(r[run].errors_total == 0, "%llu errors", (unsigned long long)r[run].errors_total);
        CHECK(r[run].n_failures == 0);
        CHECK_MSG(r[run].fraction >= 0.90, "tested %.3f of the free memory", r[run].fraction);
        CHECK(r[run].patterns == TDM_MEMTEST_ALL && r[run].passes == 1);
        for (int k = 0; k < TDM_MEMTEST_N_PATTERNS; k++) CHECK(r[run].seconds[k] > 0);
    }
    // the memory went back to the device, not into a cache
    CHECK_MSG(r[1].free_bytes == r[0].free_bytes, "free %llu after the first run, %llu before",
              (unsigned long long)r[1].free_bytes, (unsigned long long)r[0].free_bytes);
    free(r);
    CHECK_DONE("memtest.clean");
}

#ifdef TDM_TEST_EMU
static int stuck(void) {
    if (!have_cuda()) return 77;
    int device = -1, bit = -1, value = -1;
    const unsigned long long at = tdm_emu_stuck_bit(&device, &bit, &value);
    CHECK_MSG(at != 0, "TANDEM_EMU_FLIP_BIT is not set (or was refused)");
    if (!at) CHECK_DONE("memtest.stuck");
    tdm_device dev = {TDM_DEVICE_CUDA, device};
    tdm_memtest_result *r = calloc(1, sizeof *r);
    CHECK_MSG(tdm_device_memtest(dev, NULL, r) == TDM_OK, "%s", tdm_last_error());
    printf("stuck bit %d of the byte at 0x%llx (cuda:%d) at %d: %llu words read wrong\n", bit, at,
           device, value, (unsigned long long)r->errors_total);
    for (int k = 0; k < TDM_MEMTEST_N_PATTERNS; k++) {
        int found = 0;
        for (int i = 0; i < r->n_failures; i++) {
            const tdm_memtest_failure *f = &r->failures[i];
            if (f->pattern != k) continue;
            const uint64_t word = at & ~(uint64_t)(f->word_bytes - 1);
            const uint64_t mask = (uint64_t)1 << (8 * (at - word) + (uint64_t)bit);
            printf("  %s pass %d: 0x%llx expected 0x%llx got 0x%llx\n", tdm_memtest_pattern_name(k),
                   f->pass, (unsigned long long)f->address, (unsigned long long)f->expected,
                   (unsigned long long)f->got);
            CHECK_MSG(f->address == word, "%s reports 0x%llx, the stuck cell's word is 0x%llx",
                      tdm_memtest_pattern_name(k), (unsigned long long)f->address,
                      (unsigned long long)word);
            CHECK_MSG((f->expected ^ f->got) == mask, "%s: xor 0x%llx, want 0x%llx",
                      tdm_memtest_pattern_name(k), (unsigned long long)(f->expected ^ f->got),
                      (unsigned long long)mask);
            CHECK_MSG(((f->got & mask) != 0) == (value == 1), "%s: got 0x%llx: the bit is not %d",
                      tdm_memtest_pattern_name(k), (unsigned long long)f->got, value);
            found++;
        }
        CHECK_MSG(r->errors[k] > 0 && found >= 1, "%s: %llu errors, %d reported",
                  tdm_memtest_pattern_name(k), (unsigned long long)r->errors[k], found);
    }
    free(r);
    CHECK_DONE("memtest.stuck");
}
#endif

static int evict(void) {
    if (!have_cuda()) return 77;
    tdm_device_props p;
    CHECK(tdm_device_props_get(cuda0, &p) == TDM_OK);
    tdm_memtest_result *r = calloc(1, sizeof *r);
    // a small share of the device: the eviction buffer comes from what the test leaves
    tdm_memtest_params q = {.fraction = 0.02, .patterns = 1u << TDM_MEMTEST_MOVING_INVERSIONS};
    CHECK_MSG(tdm_device_memtest(cuda0, &q, r) == TDM_OK, "%s", tdm_last_error());
    printf("L2 %llu bytes (props %d), eviction buffer %llu bytes, %llu reading steps, %llu evictions\n",
           (unsigned long long)r->l2_bytes, p.l2_bytes, (unsigned long long)r->evict_bytes,
           (unsigned long long)r->verify_steps, (unsigned long long)r->evictions);
    CHECK(r->l2_bytes > 0 && r->l2_bytes == (uint64_t)p.l2_bytes);
    CHECK_MSG(r->evict_bytes >= 2 * r->l2_bytes, "eviction buffer %llu < 2 x L2",
              (unsigned long long)r->evict_bytes);
    // moving inversions: 2 constants x (two sweeps + the final check)
    CHECK_MSG(r->verify_steps == 6 && r->evictions == r->verify_steps, "%llu steps, %llu evictions",
              (unsigned long long)r->verify_steps, (unsigned long long)r->evictions);
    CHECK(r->errors_total == 0);
    free(r);
    CHECK_DONE("memtest.evict");
}

#ifdef TDM_TEST_EMU
static unsigned long long region_at;   // the stuck byte's address
static unsigned long long atomics;     // integer atomics of the kernels so far

static void on_atomic(const void *addr) {
    (void)addr;
    // the first: the stuck cell was found; the 256 KiB after it read wrong from now on
    if (__atomic_fetch_add(&atomics, 1, __ATOMIC_RELAXED) == 0)
        memset((void *)(uintptr_t)((region_at | 7) + 1), 0xa5, 256 << 10);
}

static int region(void) {
    if (!have_cuda()) return 77;
    int device = -1, bit = -1, value = -1;
    region_at = tdm_emu_stuck_bit(&device, &bit, &value);
    CHECK_MSG(region_at != 0, "TANDEM_EMU_FLIP_BIT is not set (or was refused)");
    if (!region_at) CHECK_DONE("memtest.region");
    tdm_memtest_result *r = calloc(1, sizeof *r);
    tdm_memtest_params q = {.patterns = 1u << TDM_MEMTEST_RANDOM};
    tdm_emu_set_atomic_hook(on_atomic);
    CHECK_MSG(tdm_device_memtest((tdm_device){TDM_DEVICE_CUDA, device}, &q, r) == TDM_OK, "%s", tdm_last_error());
    tdm_emu_set_atomic_hook(NULL);
    const unsigned long long n = __atomic_load_n(&atomics, __ATOMIC_RELAXED);
    printf("%llu words read wrong, %llu integer atomics, %d failures kept\n",
           (unsigned long long)r->errors_total, n, r->n_failures);
    CHECK_MSG(r->errors_total >= 4096, "only %llu words read wrong: the region was not planted",
              (unsigned long long)r->errors_total);
    CHECK_MSG(n * 8 < r->errors_total, "%llu atomics for %llu bad words: work per bad word", n,
              (unsigned long long)r->errors_total);
    CHECK(r->n_failures >= 1);
    free(r);
    CHECK_DONE("memtest.region");
}
#endif

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "api")) return api();
    if (!strcmp(what, "clean")) return clean();
#ifdef TDM_TEST_EMU
    if (!strcmp(what, "stuck")) return stuck();
    if (!strcmp(what, "region")) return region();
#endif
    if (!strcmp(what, "evict")) return evict();
    fprintf(stderr, "usage: test_memtest api|clean|stuck|evict|region\n");
    return 2;
}
