/* check_train.c — `bench check`'s training check: the argv of `bench train` for a golden
 * trajectory (suites/golden/train, gen_train.py) and the rule that judges its dump against the
 * float64 trajectory, docs/CONFORMANCE.md "Training trajectories" — the one copy of the rule:
 * suites/tests/test_train_golden.c (the train.golden* tests) links this file too:
 *   losses:  max_t |loss - loss_f64| <= 4 max_t |loss_R - loss_f64| + N u max|loss_f64|
 *   tensors: max|w - w_f64| / max|w_f64| <= 4 (same for R) + N u
 * R PyTorch's run at the precision trained (torch, tf32_rna + tf32_rz, fp16), u its unit
 * roundoff; the `ill_conditioned` tensors under Adam within N 3 lr; num_batches_tracked exact. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

static double *values(tdm_safetensors *st, const char *name, int64_t *n) {
    tdm_tensor *t = tdm_safetensors_get(st, name, TDM_CPU);
    if (!t) return NULL;
    *n = tdm_tensor_numel(t);
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    if (v && tdm_tensor_to_host_f64(t, v) != TDM_OK) {
        free(v);
        v = NULL;
    }
    tdm_tensor_free(t);
    return v;
}

static double max_abs_diff(const double *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

// PyTorch's deviation from the exact trajectory over its runs ref[0], ref[1]; -1 when missing.
static double torch_dev(tdm_safetensors *g, const char *const ref[2], const char *what,
                        const char *entry, const double *exact, int64_t n) {
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

int check_train_argv(const char *golden, const char *amp, bool tf32, const char *device,
                     const char *dump, char *store, size_t store_len, char **argv, int max) {
    tdm_safetensors *g = tdm_safetensors_open(golden);
    if (!g) return -1;
    static const char *keys[] = {"model", "batch", "steps", "opt", "lr", "weight_decay", "amp", "momentum"};
    static const char *flags[] = {"--model", "--batch", "--steps", "--opt", "--lr", "--weight-decay", "--amp", "--momentum"};
    int na = 0;
    size_t used = 0;
    bool ok = max > 30;
    argv[na++] = "bench";
    argv[na++] = "train";
    for (size_t k = 0; ok && k < sizeof keys / sizeof *keys; k++) {
        const char *v = tdm_safetensors_metadata(g, keys[k]);
        if (k == 6 && amp) v = amp;            // --amp fp16 on an amp off file
        if (!v || !*v) {
            ok = k == 7;                       // momentum is optional
            continue;
        }
        size_t l = strlen(v) + 1;
        if (used + l > store_len) {
            ok = false;
            break;
        }
        memcpy(store + used, v, l);
        argv[na++] = (char *)flags[k];
        argv[na++] = store + used;
        used += l;
    }
    tdm_safetensors_close(g);
    if (!ok) return -1;
    const char *rest[] = {"--init", golden, "--data", golden, "--dump", dump, "--device", device,
                          "--tf32", tf32 ? "on" : "off"};
    for (size_t k = 0; k < sizeof rest / sizeof *rest; k++) argv[na++] = (char *)rest[k];
    argv[na] = NULL;
    return na;
}

int check_train_judge(const char *golden, const char *dump, const char *amp, bool tf32,
                      char *detail, size_t len) {
    tdm_safetensors *g = tdm_safetensors_open(golden), *d = g ? tdm_safetensors_open(dump) : NULL;
    if (!g || !d) {
        snprintf(detail, len, "%s", tdm_last_error());
        tdm_safetensors_close(g);
        return -1;
    }
    const char *opt = tdm_safetensors_metadata(g, "opt"), *lr = tdm_safetensors_metadata(g, "lr");
    const char *steps = tdm_safetensors_metadata(g, "steps"), *ill = tdm_safetensors_metadata(g, "ill_conditioned");
    const char *ref[2] = {"torch", NULL};
    double u = ldexp(1.0, -24);
    if (amp && !strcmp(amp, "fp16")) {
        ref[0] = "fp16";
        u = ldexp(1.0, -11);
    } else if (amp && !strcmp(amp, "bf16")) {
        u = ldexp(1.0, -8);
    } else if (tf32) {
        ref[0] = "tf32_rna";
        ref[1] = "tf32_rz";
        u = ldexp(1.0, -10);
    }
    int64_t N = steps ? atoll(steps) : 0, n1 = 0, n2 = 0;
    double lrv = lr ? atof(lr) : 0;
    int pass = 1;
    char why[400] = "";
    double *lf = values(g, "loss.f64", &n1), *lt = values(d, "loss", &n2);
    double loss_dev = NAN, loss_tol = NAN;
    if (!opt || !lf || !lt || n1 != N || n2 != N || N < 1) {
        pass = -1;
        snprintf(why, sizeof why, "the losses are missing or of another length");
    } else {
        double lmax = 0;
        for (int64_t i = 0; i < N; i++) lmax = fmax(lmax, fabs(lf[i]));
        double dp = torch_dev(g, ref, "loss", NULL, lf, N);
        loss_dev = max_abs_diff(lt, lf, N);
        loss_tol = 4 * dp + (double)N * u * lmax;
        if (dp < 0) {
            pass = -1;
            snprintf(why, sizeof why, "no loss.%s in the golden file", ref[0]);
        } else if (!(loss_dev <= loss_tol)) {
            pass = 0;
            snprintf(why, sizeof why, "the loss deviates %.3g from the exact trajectory (tolerance %.3g)",
                     loss_dev, loss_tol);
        }
    }
    free(lf);
    free(lt);
    double worst = 0;
    char worst_name[200] = "";
    for (int i = 0; pass >= 0 && i < tdm_safetensors_count(g); i++) {
        const char *name = tdm_safetensors_name(g, i);
        if (strncmp(name, "final.f64.", 10)) continue;
        const char *entry = name + 10;
        char quoted[260];
        snprintf(quoted, sizeof quoted, "\"%s\"", entry);
        int64_t a = 0, c = 0;
        double *ex = values(g, name, &a), *tt = values(d, entry, &c);
        double dp = ex ? torch_dev(g, ref, "final", entry, ex, a) : -1;
        if (!ex || !tt || dp < 0 || a != c) {
            pass = -1;
            snprintf(why, sizeof why, "%s (or final.%s.%s) is missing or of another size", entry, ref[0], entry);
        } else {
            double scale = 0;
            for (int64_t j = 0; j < a; j++) scale = fmax(scale, fabs(ex[j]));
            if (scale <= 0) scale = 1;
            double dev = max_abs_diff(tt, ex, a);
            double ratio, tol;
            if (strstr(entry, "num_batches_tracked")) {
                tol = 0;
                ratio = dev == 0 ? 0 : INFINITY;
            } else if (ill && strstr(ill, quoted) && strcmp(opt, "sgd")) {
                tol = (double)N * 3 * lrv;
                ratio = dev / tol;
            } else {
                tol = 4 * dp / scale + (double)N * u;
                ratio = dev / scale / tol;
            }
            if (ratio > worst) {
                worst = ratio;
                snprintf(worst_name, sizeof worst_name, "%s", entry);
            }
            if (!(ratio <= 1) && pass == 1) {
                pass = 0;
                snprintf(why, sizeof why, "%s deviates %.3g x its tolerance %.3g", entry, ratio, tol);
            }
        }
        free(ex);
        free(tt);
    }
    tdm_safetensors_close(d);
    tdm_safetensors_close(g);
    if (pass == 1)
        snprintf(detail, len, "loss within %.2g of its tolerance; worst tensor %s at %.2g of its tolerance",
                 loss_tol > 0 ? loss_dev / loss_tol : 0, worst_name[0] ? worst_name : "-", worst);
    else snprintf(detail, len, "%s", why);
    return pass;
}
