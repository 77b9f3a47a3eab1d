/* check_memtest.c — the memory test as a check of `bench check` (check_memtest.h): runs
 * tdm_device_memtest on a GPU, judges it (pass: no word read wrong over >= 90 % of the free
 * memory) and reports the failing words with the bits that differ, so that a bad cell is named
 * by its device address and bit. On the emulated device its time is labelled EMULATED. */
#include "check_memtest.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "check.h"
#include "emulated.h"
#include "tandem/tandem.h"

static void add_hex(cJSON *o, const char *name, uint64_t v, int digits) {
    char s[24];
    snprintf(s, sizeof s, "0x%0*" PRIx64, digits, v);
    cJSON_AddStringToObject(o, name, s);
}

static void mib_text(char *buf, size_t n, uint64_t bytes) {
    snprintf(buf, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

cJSON *check_memtest_run(int index, const tdm_memtest_params *p) {
    cJSON *e = cJSON_CreateObject();
    if (!e) return NULL;
    tdm_device dev = {TDM_DEVICE_CUDA, index};
    char name[32];
    tdm_device_str(dev, name, sizeof name);
    cJSON_AddStringToObject(e, "device", name);
    tdm_device_props props;
    bool emu = tdm_device_props_get(dev, &props) == TDM_OK && props.emulated;
    cJSON_AddBoolToObject(e, "emulated", emu);
    tdm_memtest_result *r = calloc(1, sizeof *r);
    if (!r) {
        cJSON_AddStringToObject(e, "result", "error");
        cJSON_AddStringToObject(e, "detail", "out of host memory");
        return e;
    }
    tdm_error_clear();
    tdm_status st = tdm_device_memtest(dev, p, r);
    char tested[32], detail[600];
    mib_text(tested, sizeof tested, r->bytes_tested);
    const char *result;
    if (st != TDM_OK) {
        result = "error";
        snprintf(detail, sizeof detail, "%s", tdm_last_error());
    } else if (r->errors_total) {
        result = "fail";
        const tdm_memtest_failure *f = &r->failures[0];
        snprintf(detail, sizeof detail,
                 "%" PRIu64 " words read wrong in %s; first: %s at 0x%" PRIx64 ", expected 0x%" PRIx64
                 ", got 0x%" PRIx64,
                 r->errors_total, tested, tdm_memtest_pattern_name(f->pattern), f->address,
                 f->expected, f->got);
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
