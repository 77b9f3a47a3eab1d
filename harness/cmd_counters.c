/* cmd_counters.c — `bench counters FILE`: the report a kernel engineer reads from the emulated
 * device's counters (TANDEM_EMU_COUNTERS=FILE, docs/EMULATION.md "Counters"): per kernel, what it
 * moves and issues, how well its accesses use what they move, and what that PREDICTS on each GPU
 * model of suites/check/expectations.json by a roofline: max(bytes a perfect cache moves to and
 * from HBM / the HBM bandwidth, tensor-core FLOPs / the dense f16/bf16 peak), launch overhead and
 * occupancy left out. Labelled PREDICTED everywhere: counts are exact, the time is a model, never
 * a measurement. --json FILE writes the rows beside the table. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "harness/check/check.h"
#include "harness/fileio.h"
#include "harness/json_strict.h"

typedef struct {
    const char *name;
    double launches, ld_req, ld_sec, ld_bytes, ld_unique, st_req, st_sec, st_bytes, st_unique;
    double sh_req, sh_wave, sh_conf, sh_ways, lm_req, lm_wave, lm_conf, mma, flops, atomics;
    double pred_us[2];  // per GPU model (gpus below)
    char why[240];      // what makes it an offender ("" when nothing)
} counter_row;

static double num_at(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 ? v->valuedouble
                                                                                : NAN;
}

// Bytes asked for / bytes the sectors carry: 1 when every sector a request touches is used whole.
static double efficiency(double bytes, double sectors) {
    return sectors > 0 ? bytes / (sectors * 32) : NAN;
}

static int cmp_pred(const void *a, const void *b) {
    const counter_row *x = a, *y = b;
    double p = x->pred_us[1], q = y->pred_us[1];
    return p < q ? 1 : p > q ? -1 : strcmp(x->name, y->name);
}

// Offenders first (something wastes what they move), each part by predicted time.
static int cmp_offender(const void *a, const void *b) {
    const counter_row *x = *(const counter_row *const *)a, *y = *(const counter_row *const *)b;
    if (!x->why[0] != !y->why[0]) return x->why[0] ? -1 : 1;
    return cmp_pred(x, y);
}

static void print_pct(double v) {
    if (isnan(v))
        printf(" %6s", "-");
    else
        printf(" %5.0f%%", 100 * v);
}

// ---- budgets -----------------------------------------------------------------------------------
// A budget file (suites/emu/budgets.json, format tandem-counter-budgets/1) names kernels and the
// limits their counts must keep: min_load_efficiency, min_store_efficiency (bytes asked for / bytes
// of the sectors touched), max_shared_conflicts (bank conflicts per shared-memory request, loads
// and stores), max_ldmatrix_conflicts. Each kernel named must have run. 0: all within; 1: one is
// not (each said on a BUDGET FAIL line). A file that is not one is refused (exit 2) before the
// counters are read.

static const char *const budget_keys[] = {"min_load_efficiency", "min_store_efficiency",
                                          "max_shared_conflicts", "max_ldmatrix_conflicts"};

// The whole file checked before any kernel is (bench_json_parse_valid's validator): a bad entry
// anywhere is exit 2 with nothing judged.
static bool valid_budget(const cJSON *b, const char *name, char *err, size_t len) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(b, "format");
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(b, "kernels");
    if (!cJSON_IsObject(b) || !cJSON_IsString(fmt) ||
        strcmp(fmt->valuestring, "tandem-counter-budgets/1"))
        return bench_err(err, len, "%s: format is not \"tandem-counter-budgets/1\"", name);
    if (!cJSON_IsArray(ks)) return bench_err(err, len, "%s: no \"kernels\" array", name);
    int i = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, ks) {
        const cJSON *kn = cJSON_GetObjectItemCaseSensitive(k, "name");
        if (!cJSON_IsString(kn)) return bench_err(err, len, "%s: kernels[%d]: no name", name, i);
        for (size_t j = 0; j < sizeof budget_keys / sizeof *budget_keys; j++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(k, budget_keys[j]);
            if (x && !(cJSON_IsNumber(x) && isfinite(x->valuedouble) && x->valuedouble >= 0))
                return bench_err(err, len, "%s: kernels[%d] (%s): %s is not a number >= 0", name, i,
                                 kn->valuestring, budget_keys[j]);
        }
        i++;
    }
    return true;
}

// A validated entry's limit, or `def` when it sets none.
static double budget_limit(const cJSON *k, const char *key, double def) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(k, key);
    return x ? x->valuedouble : def;
}

// "a; b; " as "a; b".
static void drop_last_separator(char *s) {
    size_t len = strlen(s);
    if (len >= 2 && !strcmp(s + len - 2, "; ")) s[len - 2] = '\0';
}

// Each kernel the budget b (validated: valid_budget) names, against its rows: a line each.
static int check_budget(const cJSON *b, const char *path, const counter_row *rows, int nr) {
    int failed = 0, i = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(b, "kernels")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(k, "name")->valuestring;
        const double lo_ld = budget_limit(k, "min_load_efficiency", 0);
        const double lo_st = budget_limit(k, "min_store_efficiency", 0);
        const double hi_sh = budget_limit(k, "max_shared_conflicts", INFINITY);
        const double hi_lm = budget_limit(k, "max_ldmatrix_conflicts", INFINITY);
        const counter_row *r = NULL;
        for (int j = 0; j < nr && !r; j++)
            if (!strcmp(rows[j].name, name)) r = &rows[j];
        char msg[400];
        char *at = msg, *end = msg + sizeof msg;
        *at = '\0';
        if (!r) {
            snprintf(at, (size_t)(end - at), "did not run (no launch of it was counted)");
        } else {
            const double eld = efficiency(r->ld_bytes, r->ld_sec);
            const double est = efficiency(r->st_bytes, r->st_sec);
            const double sh = r->sh_req > 0 ? r->sh_conf / r->sh_req : 0;
            const double lm = r->lm_req > 0 ? r->lm_conf / r->lm_req : 0;
            if (!isnan(eld) && eld < lo_ld - 1e-9 && at < end)
                at += snprintf(at, (size_t)(end - at), "load efficiency %.3f < %.3f; ", eld, lo_ld);
            if (!isnan(est) && est < lo_st - 1e-9 && at < end)
                at +=
                    snprintf(at, (size_t)(end - at), "store efficiency %.3f < %.3f; ", est, lo_st);
            if (sh > hi_sh + 1e-9 && at < end)
                at += snprintf(at, (size_t)(end - at),
                               "%.3f bank conflicts a shared request > %.3f; ", sh, hi_sh);
            if (lm > hi_lm + 1e-9 && at < end)
                snprintf(at, (size_t)(end - at), "%.3f ldmatrix conflicts a request > %.3f; ", lm,
                         hi_lm);
        }
        if (msg[0]) {
            drop_last_separator(msg);
            printf("BUDGET FAIL %s: %s\n", name, msg);
            failed++;
        } else {
            printf("BUDGET ok   %s\n", name);
        }
        i++;
    }
    printf("budget %s: %d kernel%s, %d past %s limits\n", path, i, i == 1 ? "" : "s", failed,
           failed == 1 ? "its" : "their");
    return failed ? 1 : 0;
}

static int counters_report(const char *path, const char *json_out, long top, const cJSON *bud,
                           const char *budget_path);

int bench_counters(int argc, char **argv) {
    static const struct option opts[] = {{"json", required_argument, 0, 'j'},
                                         {"budget", required_argument, 0, 'b'},
                                         {"top", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *json_out = NULL, *budget = NULL;
    long top = 5;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'j') {
            json_out = optarg;
        } else if (c == 'b') {
            budget = optarg;
        } else if (c == 't') {
            char *end;
            top = strtol(optarg, &end, 10);
            if (*end || end == optarg || top < 0 || top > 1000)
                return bench_bad("counters", "--top %s: expected a number from 0 to 1000", optarg);
        } else if (c == 'h') {
            printf(
                "usage: bench counters [--json FILE] [--top N] [--budget FILE] COUNTERS.json\n"
                "the emulated device's counters (TANDEM_EMU_COUNTERS=FILE, docs/EMULATION.md):\n"
                "per kernel what it moves and issues, and a roofline PREDICTION per GPU model\n"
                "(never a measurement); --json FILE writes the rows, --top N the offenders;\n"
                "--budget FILE (suites/emu/budgets.json) checks each kernel it names against\n"
                "its limits: exit 1 when one is past them, or did not run\n");
            return 0;
        } else {
            return bench_bad("counters",
                             "usage: bench counters [--json FILE] [--top N] [--budget FILE] FILE");
        }
    }
    if (optind != argc - 1)
        return bench_bad("counters", "expected one counters file (TANDEM_EMU_COUNTERS=FILE)");
    const char *path = argv[optind];
    if (json_out && bench_check_target(json_out) != 0)
        return bench_bad("counters", "--json %s: %s", json_out, bench_strerror(errno));
    char berr[700];
    cJSON *bud =
        budget ? bench_json_load_valid(budget, 1u << 20, valid_budget, berr, sizeof berr) : NULL;
    if (budget && !bud) return bench_bad("counters", "--budget %s", berr);
    const int rc = counters_report(path, json_out, top, bud, budget);
    cJSON_Delete(bud);
    return rc;
}

// The report of the counters file at path (and --json, --top); with a budget (validated), its
// verdicts after the table.
static int counters_report(const char *path, const char *json_out, long top, const cJSON *bud,
                           const char *budget_path) {
    size_t n = 0;
    char *text = bench_read_file(path, &n);
    if (!text) return bench_bad("counters", "%s: %s", path, bench_strerror(errno));
    char why[600];
    cJSON *root = bench_json_parse_strict(text, n, false, why, sizeof why);
    free(text);
    const cJSON *ks = root ? cJSON_GetObjectItemCaseSensitive(root, "kernels") : NULL;
    if (!root || !cJSON_IsArray(ks)) {
        cJSON_Delete(root);
        return bench_bad("counters", "%s: %s", path,
                         root ? "not the emulated device's counters (no \"kernels\" array)" : why);
    }

    // The GPU models: an A100 and an H100 (SXM), their HBM and dense f16/bf16 tensor peak.
    static const char *const gpus[2] = {"A100 SXM4 80GB", "H100 SXM5"};
    double hbm[2] = {NAN, NAN}, tflops[2] = {NAN, NAN};
    char epath[4096], err[600] = "not found (TANDEM_CHECK_EXPECT, or the source tree)";
    cJSON *ex = check_expect_default_path(epath, sizeof epath)
                    ? check_expect_load(epath, err, sizeof err)
                    : NULL;
    if (!ex) {
        cJSON_Delete(root);
        return bench_bad("counters", "the GPU models' figures (suites/check/expectations.json): %s",
                         err);
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(ex, "models")) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "model");
        for (int g = 0; g < 2; g++)
            if (cJSON_IsString(name) && !strcmp(name->valuestring, gpus[g])) {
                hbm[g] = num_at(m, "hbm_GBps", NULL);
                tflops[g] = num_at(m, "tflops", "bf16");
            }
    }
    cJSON_Delete(ex);

    int nk = cJSON_GetArraySize(ks);
    counter_row *rows = calloc((size_t)(nk > 0 ? nk : 1), sizeof *rows);
    if (!rows) {
        cJSON_Delete(root);
        return bench_bad("counters", "out of memory");
    }
    int nr = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, ks) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(k, "name");
        counter_row *r = &rows[nr];
        r->name = cJSON_IsString(name) ? name->valuestring : NULL;
        r->launches = num_at(k, "launches", NULL);
        r->ld_req = num_at(k, "global_load", "requests");
        r->ld_sec = num_at(k, "global_load", "sectors");
        r->ld_bytes = num_at(k, "global_load", "bytes_requested");
        r->ld_unique = num_at(k, "global_load", "bytes_unique");
        r->st_req = num_at(k, "global_store", "requests");
        r->st_sec = num_at(k, "global_store", "sectors");
        r->st_bytes = num_at(k, "global_store", "bytes_requested");
        r->st_unique = num_at(k, "global_store", "bytes_unique");
        r->sh_req = num_at(k, "shared_load", "requests") + num_at(k, "shared_store", "requests");
        r->sh_wave =
            num_at(k, "shared_load", "wavefronts") + num_at(k, "shared_store", "wavefronts");
        r->sh_conf = num_at(k, "shared_load", "bank_conflicts") +
                     num_at(k, "shared_store", "bank_conflicts");
        r->sh_ways =
            fmax(num_at(k, "shared_load", "max_ways"), num_at(k, "shared_store", "max_ways"));
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(k, "tensor_core");
        r->mma = num_at(tc, "mma", NULL);
        r->flops = num_at(tc, "flops", NULL);
        r->lm_req = num_at(tc, "ldmatrix", NULL);
        r->lm_wave = num_at(tc, "ldmatrix_shared", "wavefronts");
        r->lm_conf = num_at(tc, "ldmatrix_shared", "bank_conflicts");
        r->atomics = num_at(k, "atomics", "global") + num_at(k, "atomics", "shared");
        const double all[] = {r->launches, r->ld_req,  r->ld_sec,   r->ld_bytes,  r->ld_unique,
                              r->st_req,   r->st_sec,  r->st_bytes, r->st_unique, r->sh_req,
                              r->sh_wave,  r->sh_conf, r->sh_ways,  r->lm_req,    r->lm_wave,
                              r->lm_conf,  r->mma,     r->flops,    r->atomics};
        bool ok = r->name != NULL;
        for (size_t i = 0; ok && i < sizeof all / sizeof *all; i++) ok = !isnan(all[i]);
        if (!ok) {
            free(rows);
            cJSON_Delete(root);
            return bench_bad("counters", "%s: kernel %d: a field is missing or not a count", path,
                             nr);
        }
        for (int g = 0; g < 2; g++) {
            const double t_mem = (r->ld_unique + r->st_unique) / (hbm[g] * 1e9);
            const double t_tc = r->flops / (tflops[g] * 1e12);
            r->pred_us[g] = 1e6 * fmax(t_mem, t_tc);
        }
        // What wastes what it moves: loads or stores using under half of their sectors' bytes,
        // bank conflicts.
        const double eld = efficiency(r->ld_bytes, r->ld_sec);
        const double est = efficiency(r->st_bytes, r->st_sec);
        char *at = r->why, *end = r->why + sizeof r->why;
        if (eld < 0.5)
            at +=
                snprintf(at, (size_t)(end - at), "loads use %.0f%% of their sectors; ", 100 * eld);
        if (est < 0.5 && at < end)
            at += snprintf(at, (size_t)(end - at), "stores use %.0f%% of theirs; ", 100 * est);
        if (r->sh_conf > 0 && at < end)
            at += snprintf(at, (size_t)(end - at),
                           "%.2f bank conflicts a shared request (up to %.0f-way); ",
                           r->sh_conf / r->sh_req, r->sh_ways);
        if (r->lm_conf > 0 && at < end)
            snprintf(at, (size_t)(end - at), "ldmatrix: %.2f conflicts a request; ",
                     r->lm_conf / r->lm_req);
        drop_last_separator(r->why);
        nr++;
    }
    qsort(rows, (size_t)nr, sizeof *rows, cmp_pred);

    printf(
        "PREDICTED from counts on the emulated CUDA device (%s): not a measurement.\n"
        "Counts are exact (docs/EMULATION.md \"Counters\"); the time is a roofline: max(HBM bytes\n"
        "/ bandwidth, tensor FLOPs / dense bf16 peak) with a perfect cache, no launch overhead\n"
        "and full occupancy: a lower bound, not what the GPU takes.\n\n",
        path);
    printf("%-44s %8s %7s %7s %9s %8s %10s %9s %9s\n", "kernel", "launches", "ld eff", "st eff",
           "smem ways", "mma", "HBM MB", "A100 us", "H100 us");
    double tot[2] = {0, 0};
    for (int i = 0; i < nr; i++) {
        const counter_row *r = &rows[i];
        printf("%-44.44s %8.0f", r->name, r->launches);
        print_pct(efficiency(r->ld_bytes, r->ld_sec));
        print_pct(efficiency(r->st_bytes, r->st_sec));
        printf(" %9.0f %8.0f %10.3f %9.2f %9.2f\n", r->sh_req > 0 ? r->sh_ways : 0, r->mma,
               (r->ld_unique + r->st_unique) / 1e6, r->pred_us[0], r->pred_us[1]);
        tot[0] += r->pred_us[0], tot[1] += r->pred_us[1];
    }
    printf("%-44s %8s %7s %7s %9s %8s %10s %9.2f %9.2f  (PREDICTED)\n", "total", "", "", "", "", "",
           "", tot[0], tot[1]);
    printf(
        "Library calls (cuBLASLt, cuDNN, NCCL) are not kernels of tandem's and are not counted.\n");
    if (top > 0 && nr > 0) {
        // Kernels that waste what they move (loads or stores using under half of their sectors,
        // bank conflicts), by predicted time; then the others.
        const counter_row **order = malloc((size_t)nr * sizeof *order);
        if (order) {
            for (int i = 0; i < nr; i++) order[i] = &rows[i];
            qsort(order, (size_t)nr, sizeof *order, cmp_offender);
            printf(
                "\nTop offenders (wasted sectors or bank conflicts first, by PREDICTED H100 "
                "time):\n");
            for (int i = 0; i < nr && i < top; i++)
                printf("  %d. %s: %.2f us PREDICTED on an H100 (%.0f%% of the total); %s\n", i + 1,
                       order[i]->name, order[i]->pred_us[1],
                       tot[1] > 0 ? 100 * order[i]->pred_us[1] / tot[1] : 0,
                       order[i]->why[0] ? order[i]->why : "its accesses use what they move");
            free(order);
        }
    }

    int rc = bud ? check_budget(bud, budget_path, rows, nr) : 0;
    if (json_out) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "predicted", true);
        cJSON_AddStringToObject(o, "what",
                                "a roofline prediction from counts on the emulated CUDA device, "
                                "never a measurement (bench counters)");
        cJSON_AddStringToObject(o, "counters", path);
        cJSON *arr = cJSON_AddArrayToObject(o, "kernels");
        for (int i = 0; i < nr; i++) {
            const counter_row *r = &rows[i];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "name", r->name);
            cJSON_AddNumberToObject(x, "launches", r->launches);
            double e = efficiency(r->ld_bytes, r->ld_sec);
            if (isnan(e))
                cJSON_AddNullToObject(x, "load_efficiency");
            else
                cJSON_AddNumberToObject(x, "load_efficiency", e);
            e = efficiency(r->st_bytes, r->st_sec);
            if (isnan(e))
                cJSON_AddNullToObject(x, "store_efficiency");
            else
                cJSON_AddNumberToObject(x, "store_efficiency", e);
            cJSON_AddNumberToObject(x, "shared_bank_conflicts", r->sh_conf);
            cJSON_AddNumberToObject(x, "shared_max_ways", r->sh_ways);
            cJSON_AddNumberToObject(x, "mma", r->mma);
            cJSON_AddNumberToObject(x, "hbm_bytes", r->ld_unique + r->st_unique);
            for (int g = 0; g < 2; g++) {
                char key[64];
                snprintf(key, sizeof key, "predicted_us %s", gpus[g]);
                cJSON_AddNumberToObject(x, key, r->pred_us[g]);
            }
            cJSON_AddItemToArray(arr, x);
        }
        char *s = cJSON_Print(o);
        cJSON_Delete(o);
        if (!s || bench_write_atomic(json_out, s, strlen(s)) != 0) {
            fprintf(stderr, "bench counters: cannot write %s: %s\n", json_out,
                    s ? bench_strerror(errno) : "out of memory");
            rc = 2;
        }
        cJSON_free(s);
    }
    free(rows);
    cJSON_Delete(root);
    return rc;
}
