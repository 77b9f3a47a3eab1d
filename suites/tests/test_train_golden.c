/* test_train_golden.c — `bench train` against PyTorch's training trajectories
 * (suites/golden/train, written by gen_train.py). For one golden file: runs
 *     bench train --model SPEC --batch B --steps N --opt O --lr ... --amp A
 *                 --init FILE --data FILE --dump OUTDIR/<name>
 * and compares the dumped losses and final state with the float64 trajectory (loss.f64,
 * final.f64.*), against PyTorch's own run R at the precision tandem trains in (loss.R, final.R.*):
 *
 *   losses:  max_t |loss_tandem - loss_f64| <= 4 * max_t |loss_R - loss_f64| + N u |loss|
 *   tensors: max|w_tandem - w_f64| / max|w_f64| <= 4 * (same for R) + N u
 *
 * N the steps, u the unit roundoff of the precision: tandem may be at most 4x further from the
 * exact trajectory than PyTorch itself is at the same precision. A trajectory amplifies each
 * step's rounding (Adam turns gradient noise into steps of ~lr), so N u alone is no bound:
 * PyTorch's own deviation is the yardstick. R and u by precision:
 *
 *   f32   amp off, TF32 off      torch                          u = 2^-24
 *   bf16  amp bf16               torch (CPU autocast)           u = 2^-8
 *   TF32  amp off, --tf32 on     tf32_rna and tf32_rz (worse)   u = 2^-10
 *   fp16  --amp fp16 (-off file) fp16 (autocast + GradScaler)   u = 2^-11
 *
 * tf32_rna, tf32_rz and fp16 are PyTorch emulated in f32 by gen_train.py (in the -off files):
 * TF32 rounds every operand of the matmuls and convs, forward and backward, to nearest (ties
 * away) or by truncation — NVIDIA documents neither, so the worse of the two, per tensor; fp16 is
 * CUDA autocast with the GradScaler (f16 activations and gradients, f16 weight copies, loss x 2^16).
 * Tensors listed in the file's `ill_conditioned` (conv biases followed by batch norm, whose exact
 * gradient is zero, and the running means that contain them) have no reproducible value under
 * Adam: there each element must stay within N * 3 lr of the exact trajectory (3 lr bounds one
 * Adam step at these betas). num_batches_tracked must match exactly.
 *
 * On another device (DEVICE, e.g. cuda:0; exit 77 with one line when it is absent) the same
 * bounds hold: the GPU run is held to the exact trajectory like the reference is. Extra bench
 * flags follow (--tf32 off for strict f32, --tf32 on, --amp fp16 to train an -off file in fp16).
 * usage: test_train_golden BENCH GOLDEN_FILE OUTDIR [DEVICE [BENCH FLAGS...]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tandem/tandem.h"

static double *values(tdm_safetensors *st, const char *name, int64_t *n) {
    tdm_tensor *t = tdm_safetensors_get(st, name, TDM_CPU);
    if (!t) return NULL;
    *n = tdm_tensor_numel(t);
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    if (v) tdm_tensor_to_host_f64(t, v);
    tdm_tensor_free(t);
    return v;
}

static double max_abs_diff(const double *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

// PyTorch's deviation from the exact trajectory: max over its runs ref[0], ref[1] (NULL: one run)
// of max_i |R[i] - exact[i]| for the entry "<what>.<R>" (entry NULL) or "<what>.<R>.<entry>";
// -1 when a run lacks it or has another size.
static double torch_dev(tdm_safetensors *g, const char *const ref[2], const char *what, const char *entry,
                        const double *exact, int64_t n) {
    double dev = 0;
    for (int r = 0; r < 2 && ref[r]; r++) {
        char name[300];
        if (entry) snprintf(name, sizeof name, "%s.%s.%s", what, ref[r], entry);
        else snprintf(name, sizeof name, "%s.%s", what, ref[r]);
        int64_t m = 0;
        double *v = values(g, name, &m);
        if (!v || m != n) {
            free(v);
            return -1;
        }
        dev = fmax(dev, max_abs_diff(v, exact, n));
        free(v);
    }
    return dev;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 10) return 2;
    const char *device = argc > 4 ? argv[4] : "cpu";
    tdm_device dev;
    if (tdm_device_parse(device, &dev) != TDM_OK) return 2;
    if (!tdm_device_available(dev)) {
        printf("SKIP: %s: %s\n", device, tdm_last_error());
        return 77;
    }
    bool tf32 = false;         // "--tf32 on" among the flags
    const char *amp = NULL;    // "--amp A" among the flags: A instead of the file's amp
    for (int i = 5; i + 1 < argc; i++) {
        tf32 = tf32 || (!strcmp(argv[i], "--tf32") && !strcmp(argv[i + 1], "on"));
        if (!strcmp(argv[i], "--amp")) amp = argv[i + 1];
    }
    const char *bench = argv[1], *golden = argv[2];
    tdm_safetensors *g = tdm_safetensors_open(golden);
    if (!g) {
        fprintf(stderr, "%s\n", tdm_last_error());
        return 1;
    }
    const char *model = tdm_safetensors_metadata(g, "model"), *opt = tdm_safetensors_metadata(g, "opt");
    const char *lr = tdm_safetensors_metadata(g, "lr"), *mom = tdm_safetensors_metadata(g, "momentum");
    const char *wd = tdm_safetensors_metadata(g, "weight_decay");
    const char *file_amp = tdm_safetensors_metadata(g, "amp");
    const char *batch = tdm_safetensors_metadata(g, "batch"), *steps = tdm_safetensors_metadata(g, "steps");
    const char *ill = tdm_safetensors_metadata(g, "ill_conditioned");
    if (!model || !opt || !lr || !wd || !file_amp || !batch || !steps) {
        fprintf(stderr, "%s: not a tandem-train/1 file\n", golden);
        return 1;
    }
    if (!amp) amp = file_amp;
    if (strcmp(amp, file_amp) && (strcmp(amp, "fp16") || strcmp(file_amp, "off"))) {
        fprintf(stderr, "%s: --amp %s: only an amp off file can be trained in another precision (fp16)\n",
                golden, amp);
        return 2;
    }
    // PyTorch's run(s) at tandem's precision, and its unit roundoff (the table above)
    const char *ref[2] = {"torch", NULL};
    double u = ldexp(1.0, -24);
    if (!strcmp(amp, "fp16")) {
        ref[0] = "fp16";
        u = ldexp(1.0, -11);
    } else if (!strcmp(amp, "bf16")) {
        u = ldexp(1.0, -8);
    } else if (tf32) {
        ref[0] = "tf32_rna";
        ref[1] = "tf32_rz";
        u = ldexp(1.0, -10);
    }

    const char *base = strrchr(golden, '/') ? strrchr(golden, '/') + 1 : golden;
    char dump[1024];
    snprintf(dump, sizeof dump, "%s/%s%s%s%s", argv[3], dev.type == TDM_DEVICE_CPU ? "" : "gpu-",
             tf32 ? "tf32-" : "", strcmp(amp, file_amp) ? "fp16-" : "", base);
    const char *args[40];
    int na = 0;
    const char *fixed[] = {bench, "train", "--model", model, "--batch", batch, "--steps", steps,
                           "--opt", opt, "--lr", lr, "--weight-decay", wd, "--amp", amp,
                           "--init", golden, "--data", golden, "--dump", dump};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) args[na++] = fixed[i];
    if (mom && *mom) {
        args[na++] = "--momentum";
        args[na++] = mom;
    }
    args[na++] = "--device";
    args[na++] = device;
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--amp") && i + 1 < argc) {   // already in fixed
            i++;
            continue;
        }
        args[na++] = argv[i];
    }
    args[na] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        execv(bench, (char *const *)args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench train failed on %s", golden);
    tdm_safetensors *d = tdm_safetensors_open(dump);
    CHECK_MSG(d, "%s", tdm_last_error());
    if (!d) CHECK_DONE("test_train_golden");

    int64_t N = atoll(steps), n1, n3;
    double lrv = atof(lr);
    double *l_f64 = values(g, "loss.f64", &n1), *l_t = values(d, "loss", &n3);
    CHECK(l_f64 && l_t && n1 == N && n3 == N);
    if (l_f64 && l_t && n1 == N && n3 == N) {
        double lmax = 0;
        for (int64_t i = 0; i < N; i++) lmax = fmax(lmax, fabs(l_f64[i]));
        double dt = max_abs_diff(l_t, l_f64, N), dp = torch_dev(g, ref, "loss", NULL, l_f64, N);
        double tol = 4 * dp + (double)N * u * lmax;
        CHECK_MSG(dp >= 0, "%s: no loss.%s (PyTorch's run at this precision; gen_train.py writes the "
                  "TF32 and fp16 ones into the amp off files)", base, ref[0]);
        if (dp >= 0) {
            printf("%s: loss %.6f -> %.6f; max |loss - exact|: tandem %.3g, pytorch (%s%s%s) %.3g "
                   "(tolerance %.3g)\n", base, l_t[0], l_t[N - 1], dt, ref[0], ref[1] ? ", " : "", ref[1] ? ref[1] : "", dp, tol);
            CHECK_MSG(dt <= tol, "%s: loss deviates %.3g from the exact trajectory (tolerance %.3g)",
                      base, dt, tol);
        }
    }
    free(l_f64);
    free(l_t);

    double worst = 0;
    for (int i = 0; i < tdm_safetensors_count(g); i++) {
        const char *name = tdm_safetensors_name(g, i);
        if (strncmp(name, "final.f64.", 10)) continue;
        const char *entry = name + 10;
        char quoted[260];
        snprintf(quoted, sizeof quoted, "\"%s\"", entry);
        int64_t a, c;
        double *ex = values(g, name, &a), *tt = values(d, entry, &c);
        double dp = ex ? torch_dev(g, ref, "final", entry, ex, a) : -1;
        CHECK_MSG(ex && tt && dp >= 0 && a == c, "%s: entry %s (or final.%s.%s) missing or of another size",
                  base, entry, ref[0], entry);
        if (ex && tt && dp >= 0 && a == c) {
            double scale = 0;
            for (int64_t j = 0; j < a; j++) scale = fmax(scale, fabs(ex[j]));
            double rt = max_abs_diff(tt, ex, a) / (scale > 0 ? scale : 1);
            double rp = dp / (scale > 0 ? scale : 1);
            if (strstr(entry, "num_batches_tracked")) {
                CHECK_MSG(max_abs_diff(tt, ex, a) == 0, "%s: %s differs", base, entry);
            } else if (ill && strstr(ill, quoted) && strcmp(opt, "sgd")) {
                double abs_tol = (double)N * 3 * lrv, dev = max_abs_diff(tt, ex, a);
                CHECK_MSG(dev <= abs_tol, "%s: %s (ill-conditioned) deviates %.3g > %.3g", base, entry, dev, abs_tol);
            } else {
                double tol = 4 * rp + (double)N * u;
                worst = fmax(worst, rt / tol);
                CHECK_MSG(rt <= tol, "%s: %s relative deviation %.3g, pytorch %.3g (tolerance %.3g)",
                          base, entry, rt, rp, tol);
            }
        }
        free(ex);
        free(tt);
    }
    printf("%s: final state: worst deviation/tolerance %.3g\n", base, worst);
    tdm_safetensors_close(d);
    tdm_safetensors_close(g);
    CHECK_DONE("test_train_golden");
}
