/* check_sdc.c — `bench check`'s silent data corruption checks, levels 3 and 4 (docs/CHECK.md
 * "Silent data corruption"); what they measure on each GPU, through the public API:
 *   sdc.gemm   one seeded bf16 GEMM repeated (tdm_matmul, fixed inputs), gpu-burn's check: every
 *              repetition compared with the first on the device (the GPU kept busy), the first's
 *              bytes hashed once (SHA-256, OpenSSL's EVP) for the GPUs of a model to compare;
 *   sdc.train  a short deterministic training run (`bench train --deterministic` as a child run,
 *              a tiny model, fixed seed and synthetic data) per precision: its fingerprint is the
 *              SHA-256 of the final state dict and every step's loss (the --dump), recorded with
 *              the build, the libraries, the GPU model and the precision.
 * The comparisons across the GPUs of the node and across a fleet are pure functions of these
 * records (check_sdc_judge.c, `bench compare --fleet`). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "harness/bench.h"
#include "check.h"
#include "tandem/tandem.h"

#ifndef TDM_GIT_COMMIT
#define TDM_GIT_COMMIT "unknown"
#endif

static void hex(const unsigned char *md, unsigned n, char *out) {  // out: 2 n + 1 bytes
    for (unsigned i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

// ---- sdc.gemm: the same product, the same bits ------------------------------------------------

// Whether a comparison's scalar (a sum of squared differences, bf16 or f32) says "differs".
static bool differs(const unsigned char *h, tdm_dtype dt, int i) {
    float v;
    if (dt == TDM_DTYPE_F32) memcpy(&v, h + 4 * i, 4);
    else {
        uint16_t b;
        memcpy(&b, h + 2 * i, 2);
        v = dt == TDM_DTYPE_BF16 ? tdm_bf16_to_f32(b) : tdm_f16_to_f32(b);
    }
    return v != 0;   // NaN too
}

// The product c = a @ b of two seeded (n, n) bf16 matrices, repeated: on a GPU for about
// CHECK_SDC_GEMM_SECONDS (n = 4096), on the emulated device 10 times at n = 64. The first product
// stays on the device and its bytes are hashed once (SHA-256: the digest the GPUs of a model
// compare). Every later repetition is compared with it ON THE DEVICE: the sum of squared
// differences (tdm_mse_loss, reduction sum) is 0 exactly when every element is equal (a NaN
// counts as a difference; +0 and -0 are the only bits it cannot tell apart). The comparisons of a
// batch (about 0.5 s of GEMMs; the whole run on the emulated device) are stacked and read back at
// once: the host waits once per batch, the GPU is kept busy (no 32 MB copy and hash per 0.2 ms
// GEMM, which kept it 2 % busy). "gpu_seconds" (CUDA events around each batch) over "seconds" is
// the GPU's busy fraction.
static void sdc_gemm(cJSON *sdc, tdm_device d, bool emu) {
    const int64_t n = emu ? 64 : 4096;
    const int max_reps = emu ? 10 : 1000000;
    const double max_s = emu ? 1e9 : CHECK_SDC_GEMM_SECONDS;
    int64_t shape[2] = {n, n};
    bool tf32_was = tdm_tf32_allowed(TDM_TF32_MATMUL);
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, false);
    tdm_tensor *a = tdm_tensor_randn(2, shape, TDM_DTYPE_BF16, d, 1201, 0);
    tdm_tensor *b = tdm_tensor_randn(2, shape, TDM_DTYPE_BF16, d, 1202, 0);
    tdm_event *e0 = tdm_event_new(d), *e1 = tdm_event_new(d);
    size_t bytes = (size_t)(n * n) * 2;
    unsigned char *h = malloc(bytes), md[EVP_MAX_MD_SIZE];
    unsigned mdn = 0;
    char error[400] = "", digest[2 * EVP_MAX_MD_SIZE + 1] = "";
    int reps = 0, mismatches = 0, first_mismatch = -1, readbacks = 0, batch = emu ? max_reps - 1 : 16;
    double gpu_s = 0;
    tdm_tensor *c0 = NULL, **diffs = calloc((size_t)(emu ? max_reps : 4096), sizeof *diffs);
    if (!a || !b || !e0 || !e1)
        snprintf(error, sizeof error, "%s", tdm_last_error());
    else if (!h || !diffs)
        snprintf(error, sizeof error, "out of host memory for the product");
    double t0 = bench_now_s();
    // the first repetition: kept, and its digest
    if (!error[0]) {
        if (!(c0 = tdm_matmul(a, b)) || tdm_tensor_to_host(c0, h, bytes) != TDM_OK)
            snprintf(error, sizeof error, "repetition 0: %s", tdm_last_error());
        else if (!EVP_Digest(h, bytes, md, &mdn, EVP_sha256(), NULL))
            snprintf(error, sizeof error, "SHA-256 (OpenSSL) failed");
        else {
            hex(md, mdn, digest);
            reps = 1;
        }
    }
    while (!error[0] && reps < max_reps && (reps < 2 || bench_now_s() - t0 < max_s) && !check_interrupted()) {
        int k = 0, want = batch < max_reps - reps ? batch : max_reps - reps;
        bool ok = tdm_event_record(e0, NULL) == TDM_OK;
        for (; ok && k < want; k++) {
            tdm_tensor *c = tdm_matmul(a, b);
            ok = c && (diffs[k] = tdm_mse_loss(c, c0, TDM_REDUCTION_SUM)) != NULL;
            tdm_tensor_free(c);
        }
        tdm_tensor *all = ok ? tdm_stack(diffs, k, 0) : NULL;
        ok = all && tdm_event_record(e1, NULL) == TDM_OK;
        tdm_dtype dt = all ? tdm_tensor_dtype(all) : TDM_DTYPE_F32;
        double ms = 0;
        ok = ok && tdm_tensor_nbytes(all) <= bytes && tdm_tensor_to_host(all, h, tdm_tensor_nbytes(all)) == TDM_OK &&
             tdm_event_elapsed_ms(e0, e1, &ms) == TDM_OK;
        if (!ok) snprintf(error, sizeof error, "repetition %d: %s", reps + k, tdm_last_error());
        for (int i = 0; ok && i < k; i++)
            if (differs(h, dt, i)) {
                mismatches++;
                if (first_mismatch < 0) first_mismatch = reps + i;
            }
        for (int i = 0; i < k; i++) {
            tdm_tensor_free(diffs[i]);
            diffs[i] = NULL;
        }
        tdm_tensor_free(all);
        if (!ok) break;
        readbacks++;
        reps += k;
        gpu_s += ms / 1e3;
        // the next batch: about 0.5 s of GPU time (at most 4096 comparisons)
        if (!emu && ms > 0) {
            double next = ceil(k * 500.0 / ms);
            batch = next < 1 ? 1 : next > 4096 ? 4096 : (int)next;
        }
    }
    double seconds = bench_now_s() - t0;
    cJSON *g = cJSON_AddObjectToObject(sdc, "sdc.gemm");
    cJSON_AddNumberToObject(g, "repeats", reps);
    cJSON_AddNumberToObject(g, "mismatches", mismatches);
    if (first_mismatch >= 0)
        cJSON_AddNumberToObject(g, "first_mismatch", first_mismatch);
    else
        cJSON_AddNullToObject(g, "first_mismatch");
    cJSON_AddStringToObject(g, "dtype", "bf16");
    double sh[3] = {(double)n, (double)n, (double)n};
    cJSON_AddItemToObject(g, "shape", cJSON_CreateDoubleArray(sh, 3));
    if (reps > 0)
        cJSON_AddStringToObject(g, "digest", digest);
    else
        cJSON_AddNullToObject(g, "digest");
    cJSON_AddNumberToObject(g, "seconds", seconds);
    cJSON_AddStringToObject(g, "compare", "device");
    cJSON_AddNumberToObject(g, "readbacks", readbacks);
    cJSON_AddNumberToObject(g, "gpu_seconds", gpu_s);
    cJSON_AddNumberToObject(g, "busy_fraction", seconds > 0 ? fmin(1, gpu_s / seconds) : 0);
    if (error[0]) cJSON_AddStringToObject(g, "error", error);
    tdm_tf32_set_allowed(TDM_TF32_MATMUL, tf32_was);
    free(h);
    free(diffs);
    tdm_tensor_free(c0);
    tdm_tensor_free(a);
    tdm_tensor_free(b);
    tdm_event_free(e0);
    tdm_event_free(e1);
    tdm_error_clear();
}

// ---- sdc.train: a deterministic training run's fingerprint ------------------------------------

static int cmp_str(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

// The SHA-256 of a --dump (safetensors): per tensor in name order, its name, dtype name, shape
// (int64, host order) and bytes; the last step's loss (f32) into *loss. False with why.
static bool dump_fingerprint(const char *path, char digest[65], float *loss, char *why, size_t n) {
    tdm_safetensors *st = tdm_safetensors_open(path);
    if (!st) {
        snprintf(why, n, "%s", tdm_last_error());
        return false;
    }
    int k = tdm_safetensors_count(st);
    const char **names = malloc((size_t)(k ? k : 1) * sizeof *names);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = names && ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    if (!ok) snprintf(why, n, "out of memory, or SHA-256 (OpenSSL) failed");
    for (int i = 0; ok && i < k; i++) names[i] = tdm_safetensors_name(st, i);
    if (ok) qsort(names, (size_t)k, sizeof *names, cmp_str);
    *loss = NAN;
    for (int i = 0; ok && i < k; i++) {
        tdm_tensor *t = tdm_safetensors_get(st, names[i], TDM_CPU);
        if (!t) {
            snprintf(why, n, "%s: %s", names[i], tdm_last_error());
            ok = false;
            break;
        }
        const char *dt = tdm_dtype_name(tdm_tensor_dtype(t));
        int nd = tdm_tensor_ndim(t);
        ok = EVP_DigestUpdate(ctx, names[i], strlen(names[i]) + 1) &&
             EVP_DigestUpdate(ctx, dt, strlen(dt) + 1) &&
             EVP_DigestUpdate(ctx, tdm_tensor_shape(t), (size_t)nd * sizeof(int64_t)) &&
             EVP_DigestUpdate(ctx, tdm_tensor_data_const(t), tdm_tensor_nbytes(t));
        if (!ok) snprintf(why, n, "SHA-256 (OpenSSL) failed");
        if (!strcmp(names[i], "loss") && tdm_tensor_dtype(t) == TDM_DTYPE_F32 &&
            tdm_tensor_numel(t) > 0)
            *loss = ((const float *)tdm_tensor_data_const(t))[tdm_tensor_numel(t) - 1];
        tdm_tensor_free(t);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdn = 0;
    if (ok && !(EVP_DigestFinal_ex(ctx, md, &mdn) && mdn == 32)) {
        snprintf(why, n, "SHA-256 (OpenSSL) failed");
        ok = false;
    }
    if (ok && isnan(*loss)) {
        snprintf(why, n, "the dump holds no loss");
        ok = false;
    }
    if (ok) hex(md, mdn, digest);
    EVP_MD_CTX_free(ctx);
    free(names);
    tdm_safetensors_close(st);
    tdm_error_clear();
    return ok;
}

// The precisions trained (docs/CHECK.md): f32 (TF32 off) and bf16 autocast.
static const struct {
    const char *precision, *amp;
} train_precs[] = {{"f32", "off"}, {"bf16", "bf16"}};

static void sdc_train(cJSON *sdc, const char *dev, const char *gpu_name, const char *libs, bool emu,
                      const check_run_opts *o) {
    cJSON *t = cJSON_AddObjectToObject(sdc, "sdc.train");
    cJSON *fps = cJSON_AddArrayToObject(t, "fingerprints");
    const char *model = CHECK_SDC_TRAIN_MODEL;
    const char *steps = emu ? CHECK_SDC_TRAIN_STEPS_EMU : CHECK_SDC_TRAIN_STEPS;
    char build[400], error[1200] = "";
    snprintf(build, sizeof build, "%s, commit %s", tdm_build_info(), TDM_GIT_COMMIT);
    double t0 = bench_now_s();
    for (size_t k = 0; k < sizeof train_precs / sizeof *train_precs && !error[0]; k++) {
        char dump[4400], log[4400], last[600], why[600];
        snprintf(dump, sizeof dump, "%s/sdc.train.%s.%s.safetensors", o->logdir,
                 train_precs[k].precision, dev);
        snprintf(log, sizeof log, "%s/sdc.train.%s.%s.log", o->logdir, train_precs[k].precision,
                 dev);
        char *argv[] = {"bench",
                        "train",
                        "--model",
                        (char *)model,
                        "--batch",
                        "8",
                        "--steps",
                        (char *)steps,
                        "--opt",
                        "adamw",
                        "--lr",
                        "1e-3",
                        "--seed",
                        "1234",
                        "--device",
                        (char *)dev,
                        "--deterministic",
                        "--tf32",
                        "off",
                        "--amp",
                        (char *)train_precs[k].amp,
                        "--dump",
                        dump,
                        NULL};
        int rc = check_run_child(argv, log, o->timeout_s, last, sizeof last);
        char digest[65];
        float loss;
        if (rc != 0) {
            snprintf(error, sizeof error, "%s: bench train %s (%.500s; log %.600s)",
                     train_precs[k].precision,
                     rc == 124  ? "ran out of its time limit"
                     : rc > 128 ? "was ended by a signal"
                                : "failed",
                     last, log);
        } else if (!dump_fingerprint(dump, digest, &loss, why, sizeof why)) {
            snprintf(error, sizeof error, "%s: the dump %.600s: %.500s", train_precs[k].precision,
                     dump, why);
        } else {
            cJSON *f = cJSON_CreateObject();
            cJSON_AddStringToObject(f, "digest", digest);
            cJSON_AddStringToObject(f, "build", build);
            cJSON_AddStringToObject(f, "libs", libs);
            cJSON_AddStringToObject(f, "gpu", gpu_name);
            cJSON_AddBoolToObject(f, "emulated", emu);
            cJSON_AddStringToObject(f, "precision", train_precs[k].precision);
            cJSON_AddStringToObject(f, "model", model);
            cJSON_AddNumberToObject(f, "steps", atoi(steps));
            cJSON_AddNumberToObject(f, "final_loss", loss);
            uint32_t bits;
            memcpy(&bits, &loss, sizeof bits);
            char lb[16];
            snprintf(lb, sizeof lb, "0x%08x", (unsigned)bits);
            cJSON_AddStringToObject(f, "final_loss_bits", lb);
            cJSON_AddItemToArray(fps, f);
        }
    }
    cJSON_AddNumberToObject(t, "seconds", bench_now_s() - t0);
    if (error[0]) cJSON_AddStringToObject(t, "error", error);
}

void check_sdc_run(cJSON *gpus, const int *index, int n, const check_run_opts *o) {
    for (int i = 0; i < n && !check_interrupted(); i++) {
        cJSON *g = cJSON_GetArrayItem(gpus, i);
        if (!g) break;
        tdm_device d = {TDM_DEVICE_CUDA, index[i]};
        char dev[32];
        tdm_device_str(d, dev, sizeof dev);
        tdm_device_props p;
        bool props = tdm_device_props_get(d, &p) == TDM_OK;
        tdm_error_clear();
        bool emu = props && p.emulated;
        char libs[400];
        snprintf(libs, sizeof libs, "cuBLAS %s, cuDNN %s", props ? p.cublas_version : "?",
                 props ? p.cudnn_version : "?");
        fprintf(stderr,
                "bench check: %s: silent data corruption: a GEMM repeated, training runs ...\n",
                dev);
        cJSON *sdc = cJSON_AddObjectToObject(g, "sdc");
        sdc_gemm(sdc, d, emu);
        if (!check_interrupted()) sdc_train(sdc, dev, props ? p.name : "?", libs, emu, o);
        (void)tdm_memory_empty_cache(d);
        tdm_error_clear();
    }
}
