/* test_train_golden.c — `bench train` against PyTorch's training trajectories
 * (suites/golden/train, written by gen_train.py). For one golden file: runs
 *     bench train --model SPEC --batch B --steps N --opt O --lr ... --amp A
 *                 --init FILE --data FILE --dump OUTDIR/<name>
 * and compares the dumped losses and final state with the float64 trajectory (loss.f64,
 * final.f64.*), against PyTorch's own float32/bf16 run (loss.torch, final.torch.*):
 *
 *   losses:  max_t |loss_tandem - loss_f64| <= 4 * max_t |loss_torch - loss_f64| + N u |loss|
 *   tensors: max|w_tandem - w_f64| / max|w_f64| <= 4 * (same for torch) + N u
 *
 * u the unit roundoff of the training precision (2^-24 f32, 2^-8 bf16), N the steps: tandem may
 * be at most 4x further from the exact trajectory than PyTorch itself is. Tensors listed in the
 * file's `ill_conditioned` (conv biases followed by batch norm, whose exact gradient is zero, and
 * the running means that contain them) have no reproducible value under Adam: there each element
 * must stay within N * 3 lr of the exact trajectory (3 lr bounds one Adam step at these betas).
 * num_batches_tracked must match exactly.
 *
 * On another device (DEVICE, e.g. cuda:0; exit 77 with one line when it is absent) the same
 * bounds hold: the GPU run is held to the exact trajectory like the reference is. Extra bench
 * flags follow (--tf32 off for strict f32); with --tf32 on (f32 matmuls and convs on tensor
 * cores, 10-bit mantissas) u is 2^-10: TF32's 2^-11 if the conversion rounds, and NVIDIA does
 * not say whether it rounds or truncates (docs/CONFORMANCE.md).
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

int main(int argc, char **argv) {
    if (argc < 4 || argc > 10) return 2;
    const char *device = argc > 4 ? argv[4] : "cpu";
    tdm_device dev;
    if (tdm_device_parse(device, &dev) != TDM_OK) return 2;
    if (!tdm_device_available(dev)) {
        printf("SKIP: %s: %s\n", device, tdm_last_error());
        return 77;
    }
    bool tf32 = false;   // "--tf32 on" among the flags
    for (int i = 5; i + 1 < argc; i++) tf32 = tf32 || (!strcmp(argv[i], "--tf32") && !strcmp(argv[i + 1], "on"));
    const char *bench = argv[1], *golden = argv[2];
    tdm_safetensors *g = tdm_safetensors_open(golden);
    if (!g) {
        fprintf(stderr, "%s\n", tdm_last_error());
        return 1;
    }
    const char *model = tdm_safetensors_metadata(g, "model"), *opt = tdm_safetensors_metadata(g, "opt");
    const char *lr = tdm_safetensors_metadata(g, "lr"), *mom = tdm_safetensors_metadata(g, "momentum");
    const char *wd = tdm_safetensors_metadata(g, "weight_decay"), *amp = tdm_safetensors_metadata(g, "amp");
    const char *batch = tdm_safetensors_metadata(g, "batch"), *steps = tdm_safetensors_metadata(g, "steps");
    const char *ill = tdm_safetensors_metadata(g, "ill_conditioned");
    if (!model || !opt || !lr || !wd || !amp || !batch || !steps) {
        fprintf(stderr, "%s: not a tandem-train/1 file\n", golden);
        return 1;
    }
    const char *base = strrchr(golden, '/') ? strrchr(golden, '/') + 1 : golden;
    char dump[1024];
    snprintf(dump, sizeof dump, "%s/%s%s%s", argv[3], dev.type == TDM_DEVICE_CPU ? "" : "gpu-",
             tf32 ? "tf32-" : "", base);
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
    for (int i = 5; i < argc; i++) args[na++] = argv[i];
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

    int64_t N = atoll(steps), n1, n2, n3;
    double u = strcmp(amp, "off") ? ldexp(1.0, -8) : ldexp(1.0, tf32 ? -10 : -24), lrv = atof(lr);
    double *l_f64 = values(g, "loss.f64", &n1), *l_pt = values(g, "loss.torch", &n2), *l_t = values(d, "loss", &n3);
    CHECK(l_f64 && l_pt && l_t && n1 == N && n2 == N && n3 == N);
    if (l_f64 && l_pt && l_t && n3 == N) {
        double lmax = 0;
        for (int64_t i = 0; i < N; i++) lmax = fmax(lmax, fabs(l_f64[i]));
        double dt = max_abs_diff(l_t, l_f64, N), dp = max_abs_diff(l_pt, l_f64, N);
        double tol = 4 * dp + (double)N * u * lmax;
        printf("%s: loss %.6f -> %.6f; max |loss - exact|: tandem %.3g, pytorch %.3g (tolerance %.3g)\n",
               base, l_t[0], l_t[N - 1], dt, dp, tol);
        CHECK_MSG(dt <= tol, "%s: loss deviates %.3g from the exact trajectory (tolerance %.3g)", base, dt, tol);
    }
    free(l_f64);
    free(l_pt);
    free(l_t);

    double worst = 0;
    for (int i = 0; i < tdm_safetensors_count(g); i++) {
        const char *name = tdm_safetensors_name(g, i);
        if (strncmp(name, "final.f64.", 10)) continue;
        const char *entry = name + 10;
        char pt[256], quoted[260];
        snprintf(pt, sizeof pt, "final.torch.%s", entry);
        snprintf(quoted, sizeof quoted, "\"%s\"", entry);
        int64_t a, b, c;
        double *ex = values(g, name, &a), *tp = values(g, pt, &b), *tt = values(d, entry, &c);
        CHECK_MSG(ex && tp && tt && a == b && a == c, "%s: entry %s missing or of another size", base, entry);
        if (ex && tp && tt && a == b && a == c) {
            double scale = 0;
            for (int64_t j = 0; j < a; j++) scale = fmax(scale, fabs(ex[j]));
            double rt = max_abs_diff(tt, ex, a) / (scale > 0 ? scale : 1);
            double rp = max_abs_diff(tp, ex, a) / (scale > 0 ? scale : 1);
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
        free(tp);
        free(tt);
    }
    printf("%s: final state: worst deviation/tolerance %.3g\n", base, worst);
    tdm_safetensors_close(d);
    tdm_safetensors_close(g);
    CHECK_DONE("test_train_golden");
}
