/* check_memtest.c — the memory test as a check of `bench check` (check_memtest.h): runs
 * tdm_device_memtest on a GPU, judges it (pass: no word read wrong over >= 90 % of the free
 * memory) and reports the failing words with the bits that differ, so that a bad cell is named
 * by its device address and bit. NVML's ECC counts (volatile corrected and uncorrected) and the
 * remapped rows are read before and after the test and judged with it: with HBM's ECC always on,
 * a single-bit fault is corrected before the test reads it, so a count that grew during the test
 * is what the test found. On the emulated device its time is labelled EMULATED. */
#include "check_memtest.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "harness/bench.h"
#include "check.h"
#include "harness/emulated.h"
#include "tandem/tandem.h"

static void add_hex(cJSON *o, const char *name, uint64_t v, int digits) {
    char s[24];
    snprintf(s, sizeof s, "0x%0*" PRIx64, digits, v);
    cJSON_AddStringToObject(o, name, s);
}

static void mib_text(char *buf, size_t n, uint64_t bytes) {
    snprintf(buf, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

// NVML's counters the test is judged with, in the order of the JSON's "start"/"end" keys.
static const char *const ecc_keys[] = {"ecc_corrected_volatile", "ecc_uncorrected_volatile",
                                       "remapped_rows_correctable", "remapped_rows_uncorrectable",
                                       "remapped_rows_pending", "remapped_rows_failed"};
enum { N_ECC = 6 };

// (props: the device's description read for them; false when it could not be read)
static bool ecc_read(tdm_device d, double v[N_ECC], char *why, size_t n, tdm_device_props *props) {
    tdm_device_props q, *pp = props ? props : &q;
    tdm_device_props p;
    for (int k = 0; k < N_ECC; k++) v[k] = -1;
    if (tdm_device_props_get(d, pp) != TDM_OK) {
        snprintf(why, n, "%s", tdm_last_error());
        tdm_error_clear();
        return false;
    }
    p = *pp;
    double x[N_ECC] = {(double)p.ecc_corrected_volatile, (double)p.ecc_uncorrected_volatile,
                       p.remapped_rows_correctable, p.remapped_rows_uncorrectable,
                       p.remapped_rows_pending, p.remapped_rows_failed};
    memcpy(v, x, sizeof x);
    if (p.nvml[0]) snprintf(why, n, "%s", p.nvml);
    return true;
}

// What NVML's counters say of the test (into fault; empty when nothing): a count that grew, a
// remap pending or failed at its end.
static void ecc_judge(const double a[N_ECC], const double b[N_ECC], char *fault, size_t n) {
    static const char *const what[N_ECC] = {"corrected ECC errors", "uncorrected ECC errors",
                                            "rows remapped (correctable)", "rows remapped (uncorrectable)"};
    size_t len = 0;
    fault[0] = '\0';
    for (int k = 0; k < 4 && len < n; k++)
        if (a[k] >= 0 && b[k] > a[k])
            len += (size_t)snprintf(fault + len, n - len, "%s%s +%.0f", len ? ", " : "", what[k], b[k] - a[k]);
    if (b[4] > 0 && len < n) len += (size_t)snprintf(fault + len, n - len, "%sa row remap pending", len ? ", " : "");
    if (b[5] > 0 && len < n) snprintf(fault + len, n - len, "%sa row remap failed", len ? ", " : "");
}

cJSON *check_memtest_run(int index, const tdm_memtest_params *p) {
    cJSON *e = cJSON_CreateObject();
    if (!e) return NULL;
    tdm_device dev = {TDM_DEVICE_CUDA, index};
    char name[32];
    tdm_device_str(dev, name, sizeof name);
    cJSON_AddStringToObject(e, "device", name);
    // NVML's counters before the test (with the device's description)
    tdm_device_props props;
    double ecc0[N_ECC], ecc1[N_ECC];
    char ecc_why[160] = "", ecc_fault[300];
    bool emu = ecc_read(dev, ecc0, ecc_why, sizeof ecc_why, &props) && props.emulated;
    cJSON_AddBoolToObject(e, "emulated", emu);
    tdm_memtest_result *r = calloc(1, sizeof *r);
    if (!r) {
        cJSON_AddStringToObject(e, "result", "error");
        cJSON_AddStringToObject(e, "detail", "out of host memory");
        return e;
    }
    tdm_error_clear();
    tdm_status st = tdm_device_memtest(dev, p, r);
    char tested[32], detail[1000];
    const char *test_error = st != TDM_OK ? tdm_last_error() : "";
    char test_error_copy[600];
    snprintf(test_error_copy, sizeof test_error_copy, "%s", test_error);
    ecc_read(dev, ecc1, ecc_why, sizeof ecc_why, NULL);
    ecc_judge(ecc0, ecc1, ecc_fault, sizeof ecc_fault);
    mib_text(tested, sizeof tested, r->bytes_tested);
    const char *result;
    if (st != TDM_OK) {
        result = "error";
        snprintf(detail, sizeof detail, "%s%s%s", test_error_copy, ecc_fault[0] ? "; NVML during the test: " : "",
                 ecc_fault);
    } else if (ecc_fault[0] && !r->errors_total) {
        result = "fail";
        snprintf(detail, sizeof detail,
                 "no word read wrong in %s, but NVML counted during the test: %s (HBM's ECC corrects a "
                 "single-bit fault before the test reads it)",
                 tested, ecc_fault);
    } else if (r->errors_total) {
        result = "fail";
        const tdm_memtest_failure *f = &r->failures[0];
        snprintf(detail, sizeof detail,
                 "%" PRIu64 " words read wrong in %s; first: %s at 0x%" PRIx64 ", expected 0x%" PRIx64
                 ", got 0x%" PRIx64,
                 r->errors_total, tested, tdm_memtest_pattern_name(f->pattern), f->address,
                 f->expected, f->got);
        if (ecc_fault[0]) {
            size_t dl = strlen(detail);
            snprintf(detail + dl, sizeof detail - dl, "; NVML counted during the test: %s", ecc_fault);
        }
    } else if (r->fraction < CHECK_MEMTEST_MIN_FRACTION) {
        result = "error";
        snprintf(detail, sizeof detail,
                 "tested only %s, %.1f %% of the %.1f MiB free (at least %.0f %% is a full test)",
                 tested, 100 * r->fraction, (double)r->free_bytes / (1024.0 * 1024.0),
                 100 * CHECK_MEMTEST_MIN_FRACTION);
    } else {
        result = "pass";
        snprintf(detail, sizeof detail, "no word read wrong in %s (%.1f %% of the free memory), %d pass%s",
                 tested, 100 * r->fraction, r->passes, r->passes == 1 ? "" : "es");
    }
    cJSON_AddStringToObject(e, "result", result);
    cJSON_AddStringToObject(e, "detail", detail);
    char measured[96];
    snprintf(measured, sizeof measured, "%" PRIu64 " error%s in %s", r->errors_total,
             r->errors_total == 1 ? "" : "s", tested);
    cJSON_AddStringToObject(e, "measured", measured);
    cJSON_AddStringToObject(e, "expected", "0 errors in >= 90 % of free");
    cJSON_AddNumberToObject(e, "seconds", r->seconds_total);
    if (emu) cJSON_AddStringToObject(e, "timing", CHECK_EMULATED);
    cJSON_AddNumberToObject(e, "bytes_tested", (double)r->bytes_tested);
    cJSON_AddNumberToObject(e, "free_bytes", (double)r->free_bytes);
    cJSON_AddNumberToObject(e, "total_bytes", (double)r->total_bytes);
    cJSON_AddNumberToObject(e, "fraction", r->fraction);
    cJSON_AddNumberToObject(e, "chunks", r->chunks);
    cJSON_AddNumberToObject(e, "passes", r->passes);
    cJSON_AddNumberToObject(e, "l2_bytes", (double)r->l2_bytes);
    cJSON_AddNumberToObject(e, "evict_bytes", (double)r->evict_bytes);
    cJSON_AddNumberToObject(e, "verify_steps", (double)r->verify_steps);
    cJSON_AddNumberToObject(e, "evictions", (double)r->evictions);
    // NVML's counters around the test (null: not read), and why not when NVML is not there
    cJSON *nv = cJSON_AddObjectToObject(e, "nvml");
    for (int side = 0; side < 2; side++) {
        cJSON *o = cJSON_AddObjectToObject(nv, side ? "end" : "start");
        for (int k = 0; k < N_ECC; k++) {
            double v = side ? ecc1[k] : ecc0[k];
            if (v >= 0) cJSON_AddNumberToObject(o, ecc_keys[k], v);
            else cJSON_AddNullToObject(o, ecc_keys[k]);
        }
    }
    cJSON_AddStringToObject(nv, "why", ecc_why);
    cJSON *pats = cJSON_AddObjectToObject(e, "patterns");
    for (int k = 0; k < TDM_MEMTEST_N_PATTERNS; k++) {
        if (!(r->patterns & (1u << k))) continue;
        cJSON *o = cJSON_AddObjectToObject(pats, tdm_memtest_pattern_name(k));
        cJSON_AddNumberToObject(o, "errors", (double)r->errors[k]);
        cJSON_AddNumberToObject(o, "seconds", r->seconds[k]);
    }
    cJSON_AddNumberToObject(e, "errors", (double)r->errors_total);
    cJSON *fails = cJSON_AddArrayToObject(e, "failures");
    for (int i = 0; i < r->n_failures; i++) {
        const tdm_memtest_failure *f = &r->failures[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "pattern", tdm_memtest_pattern_name(f->pattern));
        cJSON_AddNumberToObject(o, "pass", f->pass);
        add_hex(o, "address", f->address, 1);
        add_hex(o, "expected", f->expected, 2 * f->word_bytes);
        add_hex(o, "got", f->got, 2 * f->word_bytes);
        add_hex(o, "xor", f->expected ^ f->got, 2 * f->word_bytes);
        cJSON_AddNumberToObject(o, "word_bytes", f->word_bytes);
        // the bits that differ, as the byte (little-endian words) and the bit in it
        cJSON *bits = cJSON_AddArrayToObject(o, "bits");
        const uint64_t x = f->expected ^ f->got;
        for (int b = 0; b < 8 * f->word_bytes; b++) {
            if (!((x >> b) & 1)) continue;
            cJSON *bo = cJSON_CreateObject();
            add_hex(bo, "byte", f->address + (uint64_t)(b / 8), 1);
            cJSON_AddNumberToObject(bo, "bit", b % 8);
            cJSON_AddItemToArray(bits, bo);
        }
        cJSON_AddItemToArray(fails, o);
    }
    free(r);
    return e;
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

static double jnum(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *verdict_of(const char *result) {
    return !strcmp(result, "pass") ? CHECK_PASS : CHECK_FAIL;
}

void check_memtest_print(FILE *f, const cJSON *e) {
    const char *dev = jstr(e, "device");
    const bool emu = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "emulated"));
    const char *label = emu ? "  EMULATED" : "";
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(e, "patterns")) {
        char m[48];
        snprintf(m, sizeof m, "%.0f error%s", jnum(p, "errors"), jnum(p, "errors") == 1 ? "" : "s");
        fprintf(f, "%-7s %-30s %-24s %-10s %-7s %.2f s%s\n", dev, p->string, m, "0 errors",
                jnum(p, "errors") ? CHECK_FAIL : CHECK_PASS, jnum(p, "seconds"), label);
    }
    const char *result = jstr(e, "result");
    fprintf(f, "%-7s %-30s %-24s %-10s %-7s %.2f s%s  %s\n", dev, CHECK_MEMTEST_NAME,
            jstr(e, "measured"), "0 errors", verdict_of(result), jnum(e, "seconds"), label,
            jstr(e, "detail"));
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(e, "failures")) {
        fprintf(f, "%-7s   failing address %s: expected %s, got %s (xor %s; %s, pass %.0f)", dev,
                jstr(x, "address"), jstr(x, "expected"), jstr(x, "got"), jstr(x, "xor"),
                jstr(x, "pattern"), jnum(x, "pass"));
        const cJSON *b;
        int nb = 0;
        cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(x, "bits")) {
            if (nb++ < 8) fprintf(f, "%s bit %.0f of the byte at %s", nb == 1 ? ":" : ",", jnum(b, "bit"), jstr(b, "byte"));
        }
        if (nb > 8) fprintf(f, ", and %d more bits", nb - 8);
        fprintf(f, "\n");
    }
}

int check_memtest_main(const char *device, bool json, unsigned seed) {
    int index[64], n = 0;
    char no_gpu[400] = "";
    if (check_devices_pick(device, "--memtest --device", index, &n, no_gpu, sizeof no_gpu))
        return 2;
    if (n == 0) {
        const char *why = no_gpu[0] ? no_gpu : "no CUDA device";
        fprintf(json ? stderr : stdout,
                "bench check: no GPU: %s\nNO GPU: the memory test needs a CUDA device; nothing was tested\n",
                why);
        if (json) {   // as the check's figures say it: no GPU entries, and why
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "check", CHECK_MEMTEST_NAME);
            cJSON_AddArrayToObject(o, "gpus");
            cJSON_AddStringToObject(o, "no_gpu", why);
            char *s = cJSON_Print(o);
            if (s) printf("%s\n", s);
            free(s);
            cJSON_Delete(o);
        }
        return CHECK_EXIT_NO_GPU;
    }
    cJSON *all = cJSON_CreateArray();
    int failed = 0;
    bool emu = false;
    for (int i = 0; i < n; i++) {
        tdm_memtest_params p = {.seed = seed};
        cJSON *e = check_memtest_run(index[i], &p);
        if (!e) {
            cJSON_Delete(all);
            fprintf(stderr, "bench check: out of host memory\n");
            return CHECK_EXIT_FAIL;
        }
        emu = emu || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "emulated"));
        failed += strcmp(jstr(e, "result"), "pass") != 0;
        if (!json) {
            if (i == 0 && emu) printf("%s\n", BENCH_EMU_BANNER);
            check_memtest_print(stdout, e);
        }
        cJSON_AddItemToArray(all, e);
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "check", CHECK_MEMTEST_NAME);
        cJSON_AddItemToObject(o, "gpus", all);
        char *s = cJSON_Print(o);
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        if (failed)
            printf("FAIL: the memory test failed on %d of %d GPU%s\n", failed, n, n == 1 ? "" : "s");
        else
            printf("PASS: the memory test found no error on %d GPU%s%s\n", n, n == 1 ? "" : "s",
                   emu ? " (EMULATED device: its times are the emulator's)" : "");
        cJSON_Delete(all);
    }
    return failed ? CHECK_EXIT_FAIL : CHECK_EXIT_PASS;
}
