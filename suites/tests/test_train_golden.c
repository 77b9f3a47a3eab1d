/* test_train_golden.c — `bench train` against PyTorch's training trajectories
 * (suites/golden/train, written by gen_train.py). For one golden file: runs
 *     bench train --model SPEC --batch B --steps N --opt O --lr ... --amp A
 *                 --init FILE --data FILE --dump OUTDIR/<name>
 * and judges the dumped losses and final state against the float64 trajectory (loss.f64,
 * final.f64.*) and PyTorch's own run R at the precision tandem trains in (loss.R, final.R.*) by
 * the rule below, implemented once in harness/check/check_train.c (bench check judges with it too):
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
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"            // the tests' CHECK macros (suites/tests/check.h)
#include "harness/check/check.h"    // check_train_argv, check_train_judge
#include "tandem/tandem.h"

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
    char file_amp[16];
    const char *fa = tdm_safetensors_metadata(g, "amp");
    snprintf(file_amp, sizeof file_amp, "%s", fa ? fa : "");
    tdm_safetensors_close(g);
    if (!amp) amp = file_amp;
    if (strcmp(amp, file_amp) && (strcmp(amp, "fp16") || strcmp(file_amp, "off"))) {
        fprintf(stderr, "%s: --amp %s: only an amp off file can be trained in another precision (fp16)\n",
                golden, amp);
        return 2;
    }

    const char *base = strrchr(golden, '/') ? strrchr(golden, '/') + 1 : golden;
    char dump[1024], store[4096];
    snprintf(dump, sizeof dump, "%s/%s%s%s%s", argv[3], dev.type == TDM_DEVICE_CPU ? "" : "gpu-",
             tf32 ? "tf32-" : "", strcmp(amp, file_amp) ? "fp16-" : "", base);
    char *args[64];
    int na = check_train_argv(golden, amp, tf32, device, dump, store, sizeof store, args, 48);
    if (na < 0) {
        fprintf(stderr, "%s: not a tandem-train/1 file\n", golden);
        return 1;
    }
    args[0] = (char *)bench;
    for (int i = 5; i < argc; i++) {   // the extra flags; --amp is in args already
        if (!strcmp(argv[i], "--amp") && i + 1 < argc) {
            i++;
            continue;
        }
        args[na++] = argv[i];
    }
    args[na] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        execv(bench, args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench train failed on %s", golden);
    if (check_failures) CHECK_DONE("test_train_golden");

    char detail[1024];
    int verdict = check_train_judge(golden, dump, amp, tf32, detail, sizeof detail);
    printf("%s (%s%s): %s\n", base, amp, tf32 ? ", TF32" : "", detail);
    CHECK_MSG(verdict == 1, "%s: %s", base, verdict < 0 ? "cannot judge" : "outside the rule");
    CHECK_DONE("test_train_golden");
}
