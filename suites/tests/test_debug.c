/* test_debug.c — core's debug mode (include/tandem/debug.h) and the random cases of bench conform:
 *   poison   tdm_tensor_empty reads NaN (floats) / 0x5A bytes (ints) with poison on; zeros,
 *            from_host and randn still give their values; nothing changes with poison off
 *   guards   a byte written one past a tensor's end (into the guard region) is counted when the
 *            tensor is freed, and the message names its shape and dtype; an intact tensor is not
 *   random   a random case saved as a case file loads back and replays within its bounds
 * Usage: test_debug poison|guards|random [TMPDIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "random.h"
#include "tandem/tandem.h"

static int test_poison(void) {
    int64_t shape[2] = {3, 7};
    tdm_debug_set_poison(true);
    CHECK(tdm_debug_poison());
    tdm_dtype floats[] = {TDM_DTYPE_F32, TDM_DTYPE_F16, TDM_DTYPE_BF16, TDM_DTYPE_F64};
    for (int k = 0; k < 4; k++) {
        tdm_tensor *t = tdm_tensor_empty(2, shape, floats[k], TDM_CPU);
        double v[21];
        CHECK(t && tdm_tensor_to_host_f64(t, v) == TDM_OK);
        for (int i = 0; i < 21; i++) CHECK_MSG(isnan(v[i]), "%s [%d] = %g", tdm_dtype_name(floats[k]), i, v[i]);
        tdm_tensor_free(t);
        t = tdm_tensor_zeros(2, shape, floats[k], TDM_CPU);
        CHECK(t && tdm_tensor_to_host_f64(t, v) == TDM_OK);
        for (int i = 0; i < 21; i++) CHECK(v[i] == 0.0);
        tdm_tensor_free(t);
    }
    tdm_tensor *ti = tdm_tensor_empty(2, shape, TDM_DTYPE_I32, TDM_CPU);
    const unsigned char *b = tdm_tensor_data(ti);
    for (int i = 0; i < 21 * 4; i++) CHECK(b[i] == 0x5A);
    tdm_tensor_free(ti);
    float host[21];
    for (int i = 0; i < 21; i++) host[i] = (float)i - 3.5f;
    tdm_tensor *t = tdm_tensor_from_host(2, shape, TDM_DTYPE_F32, TDM_CPU, host);
    CHECK(t && !memcmp(tdm_tensor_data(t), host, sizeof host));
    tdm_tensor_free(t);
    t = tdm_tensor_randn(2, shape, TDM_DTYPE_F32, TDM_CPU, 1, 0);
    for (int i = 0; t && i < 21; i++) CHECK(isfinite(((float *)tdm_tensor_data(t))[i]));
    tdm_tensor_free(t);
    // An op's output is fully written: relu of a from_host tensor has no NaN.
    tdm_tensor *x = tdm_tensor_from_host(2, shape, TDM_DTYPE_F32, TDM_CPU, host);
    tdm_tensor *y = tdm_relu(x);
    for (int i = 0; y && i < 21; i++) CHECK(((float *)tdm_tensor_data(y))[i] == (host[i] > 0 ? host[i] : 0));
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    tdm_debug_set_poison(false);
    t = tdm_tensor_empty(2, shape, TDM_DTYPE_I32, TDM_CPU);   // off: not filled (no check of
    CHECK(t != NULL);                                        // the bytes: they are undefined)
    tdm_tensor_free(t);
    CHECK_DONE("debug.poison");
}

static int test_guards(void) {
    int64_t shape[2] = {5, 13};
    tdm_debug_set_guards(true);
    int64_t before = tdm_debug_guard_violations();
    tdm_tensor *ok = tdm_tensor_zeros(2, shape, TDM_DTYPE_F32, TDM_CPU);
    CHECK(ok != NULL);
    tdm_tensor_free(ok);
    CHECK(tdm_debug_guard_violations() == before);
    tdm_tensor *t = tdm_tensor_zeros(2, shape, TDM_DTYPE_BF16, TDM_CPU);
    CHECK(t != NULL);
    unsigned char *p = tdm_tensor_data(t);
    p[tdm_tensor_nbytes(t)] = 0x00;   // one byte past the end: inside the guard
    tdm_tensor_free(t);
    CHECK(tdm_debug_guard_violations() == before + 1);
    const char *msg = tdm_debug_last_violation();
    CHECK_MSG(strstr(msg, "(5, 13)") && strstr(msg, "bf16") && strstr(msg, "after"), "%s", msg);
    t = tdm_tensor_zeros(1, shape, TDM_DTYPE_F64, TDM_CPU);
    p = tdm_tensor_data(t);
    p[-1] = 0x00;   // one byte before the start
    tdm_tensor_free(t);
    CHECK(tdm_debug_guard_violations() == before + 2);
    CHECK(strstr(tdm_debug_last_violation(), "before") != NULL);
    // A tensor allocated with guards off and freed with them on (and the reverse) is fine.
    tdm_debug_set_guards(false);
    t = tdm_tensor_zeros(2, shape, TDM_DTYPE_F32, TDM_CPU);
    tdm_debug_set_guards(true);
    tdm_tensor *u = tdm_tensor_zeros(2, shape, TDM_DTYPE_F32, TDM_CPU);
    tdm_tensor_free(t);
    tdm_debug_set_guards(false);
    tdm_tensor_free(u);
    CHECK(tdm_debug_guard_violations() == before + 2);
    CHECK_DONE("debug.guards");
}

static int test_random(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/random-conv2d.safetensors", dir);
    tdm_case *c = tdm_random_case("conv2d", TDM_DTYPE_F16, 3, 2);
    CHECK(c != NULL);
    if (!c) CHECK_DONE("debug.random");
    CHECK(tdm_tensor_dtype(c->input[0]) == TDM_DTYPE_F16 && c->grad_output[0]);
    CHECK(tdm_tensor_dtype(c->output[0]) == TDM_DTYPE_F64 && c->grad_input[1]);
    // The same (seed, index) gives the same case.
    tdm_case *c2 = tdm_random_case("conv2d", TDM_DTYPE_F16, 3, 2);
    CHECK(c2 && tdm_tensor_nbytes(c2->input[0]) == tdm_tensor_nbytes(c->input[0]) &&
          !memcmp(tdm_tensor_data(c2->input[0]), tdm_tensor_data(c->input[0]),
                  tdm_tensor_nbytes(c->input[0])));
    tdm_case_free(c2);
    CHECK(tdm_random_case_save(c, path, 3, 2) == TDM_OK);
    tdm_case_free(c);
    tdm_case *l = tdm_case_load(path);
    CHECK_MSG(l != NULL, "%s", tdm_last_error());
    tdm_case_result r;
    tdm_case_report rep;
    CHECK(l && tdm_case_run(l, TDM_CPU, &r) == TDM_OK);
    CHECK(l && tdm_case_compare(l, &r, TDM_CPU, &rep) == TDM_OK && rep.pass && rep.n >= 3);
    if (l) tdm_case_result_free(&r);
    tdm_case_free(l);
    CHECK(tdm_random_case("no_such_op", TDM_DTYPE_F32, 1, 0) == NULL);
    CHECK_DONE("debug.random");
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "poison")) return test_poison();
    if (argc >= 2 && !strcmp(argv[1], "guards")) return test_guards();
    if (argc >= 3 && !strcmp(argv[1], "random")) return test_random(argv[2]);
    fprintf(stderr, "usage: test_debug poison|guards|random TMPDIR\n");
    return 2;
}
