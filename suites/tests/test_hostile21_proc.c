/* test_hostile21_proc.c — writes the weight files of hostile21_proc.cmake's `bench train --init`
 * tests (issue 21): state dicts of mlp:4-2 ("0.weight" (2, 4), "0.bias" (2)) that load but hold
 * values no training can start from, and one that is fine.
 *   init_ok.safetensors           finite f32 weights (the control)
 *   init_nan_weight.safetensors   0.weight[5] is NaN
 *   init_inf_bias.safetensors     0.bias[1] is -inf
 *   init_f64_overflow.safetensors f64 weights, 0.weight[2] = 1e300: finite in the file, +inf as
 *                                 the model's f32
 *   init_golden_nan.safetensors   a golden training file's init.0.weight[0] is NaN
 * With --parse: the strict parser of numbers in the environment and metadata (core/env_impl.h)
 * against strings that atoi/strtoull took ("12abc" as 12, "" as 0, overflow wrapped or saturated).
 * usage: test_hostile21_proc OUTDIR | --parse */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "check.h"
#include "core/env_impl.h"
#include "tandem/tandem.h"

static int test_parse(void) {
    static const struct {
        const char *s;
        int64_t lo, hi;
        bool ok;
        int64_t want;
    } t[] = {{"12", 0, 100, true, 12},
             {"0", 0, 100, true, 0},
             {"100", 0, 100, true, 100},
             {"101", 0, 100, false, 0},
             {"12abc", 0, 100, false, 0},
             {"", 0, 100, false, 0},
             {" 12", 0, 100, false, 0},
             {"12 ", 0, 100, false, 0},
             {"+12", 0, 100, false, 0},
             {"-1", 0, 100, false, 0},
             {"0x10", 0, 100, false, 0},
             {"1e3", 0, 10000, false, 0},
             {"0", 1, 8, false, 0},
             {"9223372036854775807", 0, INT64_MAX, true, INT64_MAX},
             {"9223372036854775808", 0, INT64_MAX, false, 0},
             {"18446744073709551616", 0, INT64_MAX, false, 0},  // 2^64: wraps to 0 in u64
             {"99999999999999999999999", 0, INT64_MAX, false, 0},
             {"007", 0, 10, true, 7}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        int64_t v = -42;
        bool ok = tdm_parse_i64(t[i].s, t[i].lo, t[i].hi, &v);
        CHECK_MSG(ok == t[i].ok && (!ok || v == t[i].want), "'%s' in [%lld, %lld]: %s %lld", t[i].s,
                  (long long)t[i].lo, (long long)t[i].hi, ok ? "took" : "refused", (long long)v);
    }
    // the environment: unset and malformed give the default, a good value itself
    unsetenv("TANDEM_TEST_H21");
    CHECK(tdm_env_i64("TANDEM_TEST_H21", 1, 8, 3) == 3 && tdm_env_flag("TANDEM_TEST_H21", true));
    setenv("TANDEM_TEST_H21", "2abc", 1);
    CHECK(tdm_env_i64("TANDEM_TEST_H21", 1, 8, 3) == 3 && !tdm_env_flag("TANDEM_TEST_H21", false));
    setenv("TANDEM_TEST_H21", "", 1);
    CHECK(tdm_env_i64("TANDEM_TEST_H21", 1, 8, 3) == 3 && tdm_env_flag("TANDEM_TEST_H21", true));
    setenv("TANDEM_TEST_H21", "7", 1);
    CHECK(tdm_env_i64("TANDEM_TEST_H21", 1, 8, 3) == 7);
    setenv("TANDEM_TEST_H21", "0", 1);
    CHECK(!tdm_env_flag("TANDEM_TEST_H21", true) && tdm_env_i64("TANDEM_TEST_H21", 1, 8, 3) == 3);
    CHECK_DONE("hostile21_proc --parse");
}

static void save(const char *dir, const char *file, const char *prefix, tdm_dtype dt,
                 const double *w, const double *b, bool golden) {
    char path[1200], wn[64], bn[64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(wn, sizeof wn, "%s0.weight", prefix);
    snprintf(bn, sizeof bn, "%s0.bias", prefix);
    int64_t ws[2] = {2, 4}, bs = 2;
    tdm_tensor *wt = tdm_tensor_from_host(2, ws, TDM_DTYPE_F64, TDM_CPU, w);
    tdm_tensor *bt = tdm_tensor_from_host(1, &bs, TDM_DTYPE_F64, TDM_CPU, b);
    tdm_tensor *wc = wt ? tdm_tensor_to(wt, TDM_CPU, dt) : NULL;
    tdm_tensor *bc = bt ? tdm_tensor_to(bt, TDM_CPU, dt) : NULL;
    CHECK_MSG(wc && bc, "%s", tdm_last_error());
    const char *names[] = {wn, bn};
    const tdm_tensor *ts[] = {wc, bc};
    const char *meta[] = {"format", "tandem-train/1"};
    CHECK_MSG(wc && bc && tdm_safetensors_save(path, 2, names, ts, golden ? 1 : 0, meta) == TDM_OK,
              "%s: %s", path, tdm_last_error());
    tdm_tensor_free(wt);
    tdm_tensor_free(bt);
    tdm_tensor_free(wc);
    tdm_tensor_free(bc);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_hostile21_proc OUTDIR | --parse\n");
        return 2;
    }
    if (!strcmp(argv[1], "--parse")) return test_parse();
    const char *dir = argv[1];
    const double w[8] = {0.25, -0.5, 0.125, 0.75, -0.25, 0.5, -0.125, 0.0625};
    const double b[2] = {0.1, -0.1};
    double wx[8], bx[2];
    save(dir, "init_ok.safetensors", "", TDM_DTYPE_F32, w, b, false);
    memcpy(wx, w, sizeof w);
    wx[5] = NAN;
    save(dir, "init_nan_weight.safetensors", "", TDM_DTYPE_F32, wx, b, false);
    memcpy(bx, b, sizeof b);
    bx[1] = -INFINITY;
    save(dir, "init_inf_bias.safetensors", "", TDM_DTYPE_F32, w, bx, false);
    memcpy(wx, w, sizeof w);
    wx[2] = 1e300;
    save(dir, "init_f64_overflow.safetensors", "", TDM_DTYPE_F64, wx, b, false);
    memcpy(wx, w, sizeof w);
    wx[0] = NAN;
    save(dir, "init_golden_nan.safetensors", "init.", TDM_DTYPE_F32, wx, b, true);
    CHECK_DONE("hostile21_proc files");
}
