/* test_gradcheck.c — every backward against central finite differences, in float64, on the
 * reference: for each case with grad_output.0, the inputs are widened to f64 and jittered (to
 * step away from ties and kinks), the analytic gradient of L = <grad_output.0, output.0> is
 * computed by the case's backward, and up to SAMPLES elements of each gradient are compared with
 * (L(x + h) - L(x - h)) / 2h. This checks the math of the backward, independent of PyTorch.
 * Tolerance: |fd - analytic| <= 1e-5 (1 + |analytic|): truncation h^2 |f'''| and roundoff
 * eps |L| / h are both far below it for h = 1e-6 (1 + |x|).
 * usage: test_gradcheck CASE_FILE... */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"
#include "check.h"

#define SAMPLES 6

// L = <gy, output.0> for the case with its current inputs (f64, cpu).
static int loss_of(const tdm_case *c, double *L) {
    tdm_case_result r;
    tdm_case tmp = *c;
    for (int i = 0; i < TDM_CASE_MAX; i++) tmp.grad_output[i] = NULL;   // forward only
    if (tdm_case_run(&tmp, TDM_CPU, &r) != TDM_OK) return -1;
    int64_t n = tdm_tensor_numel(r.output[0]);
    double *y = malloc((size_t)(n ? n : 1) * sizeof *y), *g = malloc((size_t)(n ? n : 1) * sizeof *g);
    int rc = y && g && tdm_tensor_to_host_f64(r.output[0], y) == TDM_OK &&
                     tdm_tensor_to_host_f64(c->grad_output[0], g) == TDM_OK ? 0 : -1;
    double s = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) s += g[i] * y[i];
    *L = s;
    free(y);
    free(g);
    tdm_case_result_free(&r);
    return rc;
}

static int64_t checked;

static void gradcheck(const char *path) {
    tdm_case *c = tdm_case_load(path);
    CHECK_MSG(c, "%s: %s", path, tdm_last_error());
    if (!c) return;
    if (!c->grad_output[0]) {
        tdm_case_free(c);
        return;
    }
    uint64_t state = 0x2545f4914f6cdd1dull;
    // Widen to f64 and jitter each floating input (relative 1e-4) so no two window values tie
    // and no relu input sits on its kink.
    for (int i = 0; i < TDM_CASE_MAX; i++) {
        tdm_tensor **slots[2] = {&c->input[i], &c->grad_output[i]};
        for (int s = 0; s < 2; s++) {
            tdm_tensor *t = *slots[s];
            if (!t || !tdm_dtype_is_float(tdm_tensor_dtype(t))) continue;
            tdm_tensor *w = tdm_tensor_to(t, TDM_CPU, TDM_DTYPE_F64);
            double *v = tdm_tensor_data(w);
            bool is_stat = !strcmp(c->op, "batch_norm") && (i == 1 || i == 2) && s == 0;
            for (int64_t q = 0; q < tdm_tensor_numel(w) && !is_stat; q++) {
                state ^= state << 13, state ^= state >> 7, state ^= state << 17;
                v[q] *= 1.0 + 1e-4 * ((double)(state >> 11) / 9007199254740992.0 - 0.5);
            }
            tdm_tensor_free(t);
            *slots[s] = w;
        }
    }
    c->dtype = TDM_DTYPE_F64;
    tdm_case_result r;
    if (tdm_case_run(c, TDM_CPU, &r) != TDM_OK) {
        CHECK_MSG(0, "%s: %s", path, tdm_last_error());
        tdm_case_free(c);
        return;
    }
    for (int k = 0; k < TDM_CASE_MAX; k++) {
        if (!r.grad_input[k] || !c->input[k]) continue;
        tdm_tensor *x = c->input[k];
        double *xv = tdm_tensor_data(x);
        int64_t n = tdm_tensor_numel(x);
        double *an = malloc((size_t)n * sizeof *an);
        if (!an || tdm_tensor_to_host_f64(r.grad_input[k], an) != TDM_OK) {
            free(an);
            continue;
        }
        for (int s = 0; s < SAMPLES && s < n; s++) {
            int64_t i = s == 0 ? 0 : s == 1 ? n - 1 : (int64_t)((uint64_t)(state = state * 6364136223846793005ull + 1) >> 33) % n;
            double x0 = xv[i], h = 1e-6 * (1 + fabs(x0)), Lp, Lm;
            // -inf in an additive attention mask: no finite neighbourhood to difference over
            // (the analytic gradient there is 0: the weight is exactly 0 around it)
            if (!isfinite(x0)) {
                CHECK_MSG(an[i] == 0, "%s: grad_input.%d[%lld] at %g is %g, expected 0", path, k,
                          (long long)i, x0, an[i]);
                continue;
            }
            xv[i] = x0 + h;
            int ok = loss_of(c, &Lp);
            xv[i] = x0 - h;
            ok |= loss_of(c, &Lm);
            xv[i] = x0;
            double fd = (Lp - Lm) / (2 * h);
            CHECK_MSG(ok == 0 && fabs(fd - an[i]) <= 1e-5 * (1 + fabs(an[i])),
                      "%s: grad_input.%d[%lld] analytic %.10g, finite difference %.10g", path, k,
                      (long long)i, an[i], fd);
            checked++;
        }
        free(an);
    }
    tdm_case_result_free(&r);
    tdm_case_free(c);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) gradcheck(argv[i]);
    printf("test_gradcheck: %lld gradient elements checked against finite differences\n",
           (long long)checked);
    CHECK_DONE("test_gradcheck");
}
