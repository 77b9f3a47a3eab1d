/* test_memtest.c — the device memory test (tandem/memtest.h, kernels/k_memtest.cu):
 *   api     its parameters are checked, and the cpu has no device memory to test (a clear
 *           TDM_ERR_UNSUPPORTED); any build
 *   clean   (cuda:0; exit 77 without one) every pattern over >= 90 % of the free memory finds
 *           nothing, and the memory goes back to the device (a second run finds as much free)
 *   stuck   (the emulated device, built with TDM_TEST_EMU; TANDEM_EMU_FLIP_BIT set by the test's
 *           environment) every pattern finds the stuck bit: errors counted, and every failing
 *           word it reports is the planted cell's word with exactly that one bit wrong, stuck
 *           at the planted value */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"
#include "tandem/memtest.h"

#ifdef TDM_TEST_EMU
unsigned long long tdm_emu_stuck_bit(int *device, int *bit, int *value);   // suites/emu/runtime.cc
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

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "api")) return api();
    if (!strcmp(what, "clean")) return clean();
#ifdef TDM_TEST_EMU
    if (!strcmp(what, "stuck")) return stuck();
#endif
    fprintf(stderr, "usage: test_memtest api|clean|stuck\n");
    return 2;
}
