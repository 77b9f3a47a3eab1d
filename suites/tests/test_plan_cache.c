/* test_plan_cache.c — the CUDA backend's plan caches (kernels/plan_cache.h) on the CPU: keys that
 * differ in any field find different plans, equal keys the same one, values are destroyed on
 * clear/free and on a duplicate insert; and the public algorithm-choice API of backends.h
 * (tdm_conv_algo_last on the reference, argument errors, TANDEM_* environment defaults). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/plan_cache.h"
#include "tandem/tandem.h"

static int destroyed;
static void count_destroy(void *v) {
    destroyed++;
    free(v);
}

static int *boxed(int v) {
    int *p = malloc(sizeof *p);
    *p = v;
    return p;
}

static void key_of(tdm_conv_plan_key *k, int field) {
    const int64_t x[4] = {8, 16, 32, 32}, w[4] = {32, 16, 3, 3}, y[4] = {8, 32, 32, 32};
    int64_t xx[4], ww[4], yy[4];
    memcpy(xx, x, sizeof x);
    memcpy(ww, w, sizeof w);
    memcpy(yy, y, sizeof y);
    tdm_conv2d_params p = TDM_CONV2D_DEFAULT;
    p.padding[0] = p.padding[1] = 1;
    int32_t align[3] = {16, 16, 16};
    int dev = 0, pass = 0, layout = 0, mode = 0, tf32 = 1;
    tdm_dtype dt = TDM_DTYPE_F32;
    switch (field) {   // 0: the base key; each other value changes one thing
    case 1: dev = 1; break;
    case 2: pass = 2; break;
    case 3: dt = TDM_DTYPE_F16; break;
    case 4: layout = 1; break;
    case 5: mode = 1; break;
    case 6: tf32 = 0; break;
    case 7: xx[0] = 9, yy[0] = 9; break;
    case 8: ww[2] = ww[3] = 1; break;
    case 9: p.stride[1] = 2; break;
    case 10: p.padding[0] = 0; break;
    case 11: p.dilation[0] = 2; break;
    case 12: p.groups = 2, ww[1] = 8; break;
    case 13: align[1] = 8; break;
    case 15: p.padding_extra[1] = 1; break;
    default: break;
    }
    tdm_conv_plan_key_make(k, dev, pass, dt, layout, mode, tf32, xx, ww, yy, &p, align);
    if (field == 14) k->accumulate = 1;
}
enum { N_FIELDS = 16 };

static void test_keys(void) {
    destroyed = 0;
    tdm_plan_cache *c = tdm_plan_cache_new(count_destroy);
    CHECK(c != NULL);
    for (int f = 0; f < N_FIELDS; f++) {
        tdm_conv_plan_key k;
        key_of(&k, f);
        CHECK_MSG(tdm_plan_cache_find(c, &k, sizeof k) == NULL, "field %d found before insert", f);
        CHECK(tdm_plan_cache_insert(c, &k, sizeof k, boxed(f)) == TDM_OK);
    }
    CHECK(tdm_plan_cache_size(c) == N_FIELDS);   // every key distinct (grown past 16 buckets too)
    for (int f = 0; f < N_FIELDS; f++) {
        tdm_conv_plan_key k;
        memset(&k, 0xff, sizeof k);   // garbage in the padding: make must zero it
        key_of(&k, f);
        int *v = tdm_plan_cache_find(c, &k, sizeof k);
        CHECK_MSG(v && *v == f, "field %d: found %d", f, v ? *v : -1);
    }
    tdm_conv_plan_key k;
    key_of(&k, 0);
    CHECK(tdm_plan_cache_insert(c, &k, sizeof k, boxed(99)) == TDM_OK);   // duplicate: first stays
    CHECK(destroyed == 1);
    CHECK(*(int *)tdm_plan_cache_find(c, &k, sizeof k) == 0);
    CHECK(tdm_plan_cache_find(c, &k, sizeof k - 1) == NULL);   // another length, another key
    tdm_plan_cache_clear(c);
    CHECK(destroyed == 1 + N_FIELDS);
    CHECK(tdm_plan_cache_size(c) == 0 && tdm_plan_cache_find(c, &k, sizeof k) == NULL);
    for (int i = 0; i < 100; i++) {
        int key = i * 7919;
        CHECK(tdm_plan_cache_insert(c, &key, sizeof key, boxed(i)) == TDM_OK);
    }
    for (int i = 0; i < 100; i++) {
        int key = i * 7919, *v = tdm_plan_cache_find(c, &key, sizeof key);
        CHECK(v && *v == i);
    }
    tdm_plan_cache_free(c);
    CHECK(destroyed == 1 + N_FIELDS + 100);
    char buf[64];
    CHECK(tdm_ptr_alignment((void *)(buf + 0)) >= 1);
    CHECK(tdm_ptr_alignment((void *)(uintptr_t)0x1000) == 16);
    CHECK(tdm_ptr_alignment((void *)(uintptr_t)0x1004) == 4);
    CHECK(tdm_ptr_alignment((void *)(uintptr_t)0x1001) == 1);
}

static void test_algo_api(void) {
    tdm_conv_algo_info info;
    CHECK(strcmp(tdm_conv_pass_name(TDM_CONV_PASS_BACKWARD_FILTER), "backward_filter") == 0);
    CHECK(tdm_conv_algo_last(TDM_CPU, TDM_CONV_PASS_FORWARD, NULL) == TDM_ERR_ARG);
    CHECK(tdm_conv_algo_last(TDM_CPU, (tdm_conv_pass)7, &info) == TDM_ERR_ARG);
    CHECK(strstr(tdm_last_error(), "unknown pass") != NULL);
    tdm_conv_algo_mode_set(TDM_CONV_ALGO_DETERMINISTIC);
    CHECK(tdm_conv_algo_last(TDM_CPU, TDM_CONV_PASS_BACKWARD_DATA, &info) == TDM_OK);
    CHECK(strcmp(info.engine, "reference: direct loops") == 0);
    CHECK(info.pass == TDM_CONV_PASS_BACKWARD_DATA && info.mode == TDM_CONV_ALGO_DETERMINISTIC);
    CHECK(info.engine_id == -1 && info.candidates == 1 && !info.tf32);
    CHECK(tdm_conv_algo_cache_clear(TDM_CPU) == TDM_OK);
    tdm_device nodev = {TDM_DEVICE_CPU, 3};
    CHECK(tdm_conv_algo_last(nodev, TDM_CONV_PASS_FORWARD, &info) != TDM_OK);
    tdm_conv_algo_mode_set(TDM_CONV_ALGO_HEURISTIC);
}

// Run with TANDEM_TF32_MATMUL=1 TANDEM_TF32_CONV=0 TANDEM_CONV_ALGO=benchmark (plan.env test).
static void test_env(void) {
    CHECK(tdm_tf32_allowed(TDM_TF32_MATMUL));
    CHECK(!tdm_tf32_allowed(TDM_TF32_CONV));
    CHECK(tdm_conv_algo_mode_get() == TDM_CONV_ALGO_BENCHMARK);
    tdm_conv_algo_mode_set(TDM_CONV_ALGO_HEURISTIC);   // a set after the environment wins
    CHECK(tdm_conv_algo_mode_get() == TDM_CONV_ALGO_HEURISTIC);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "";
    if (!strcmp(which, "keys")) test_keys();
    else if (!strcmp(which, "algo_api")) test_algo_api();
    else if (!strcmp(which, "env")) test_env();
    else {
        fprintf(stderr, "usage: test_plan_cache keys|algo_api|env\n");
        return 2;
    }
    CHECK_DONE(which);
}
