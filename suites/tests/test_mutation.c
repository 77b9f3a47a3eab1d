/* test_mutation.c — every bound can fail. For every golden case and every expected tensor, the
 * element with the largest bound is planted wrong by twice its bound (expected := actual +- 2
 * bound): the comparison must fail. Planted at half its bound, the case must still pass. Also writes one
 * mutated case file (OUTDIR/mutated.safetensors) for the CLI test, which expects exit 1.
 * usage: test_mutation OUTDIR CASE_FILE... */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "case.h"
#include "check.h"

static tdm_tensor **expected_slot(tdm_case *c, int grad, int k) {
    return grad ? &c->grad_input[k] : &c->output[k];
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int planted = 0;
    bool wrote = false;
    for (int a = 2; a < argc; a++) {
        tdm_case *c = tdm_case_load(argv[a]);
        CHECK_MSG(c, "%s: %s", argv[a], tdm_last_error());
        if (!c) continue;
        tdm_case_result r;
        if (tdm_case_run(c, TDM_CPU, &r) != TDM_OK) {
            CHECK_MSG(0, "%s: %s", argv[a], tdm_last_error());
            tdm_case_free(c);
            continue;
        }
        for (int grad = 0; grad < 2; grad++) {
            for (int k = 0; k < TDM_CASE_MAX; k++) {
                tdm_tensor **slot = expected_slot(c, grad, k);
                if (!*slot) continue;
                tdm_tensor *orig = *slot;
                int64_t n = tdm_tensor_numel(orig);
                double *bound = malloc((size_t)n * sizeof *bound), *act = malloc((size_t)n * sizeof *act);
                const tdm_tensor *at = grad ? r.grad_input[k] : r.output[k];
                if (!bound || !act || !at || tdm_case_bounds(c, grad, k, TDM_CPU, bound) != TDM_OK ||
                    tdm_tensor_to_host_f64(at, act) != TDM_OK) {
                    CHECK_MSG(0, "%s: no bound or actual for %s.%d", argv[a], grad ? "grad_input" : "output", k);
                    free(bound);
                    free(act);
                    continue;
                }
                if (n == 0) {   // an empty result: no element to plant
                    free(bound);
                    free(act);
                    continue;
                }
                int64_t i = 0;
                for (int64_t j = 1; j < n; j++) if (bound[j] > bound[i]) i = j;
                // An integer result is exact (bound 0): planted one off it must fail, as is pass.
                const bool integer = !tdm_dtype_is_float(tdm_tensor_dtype(orig));
                for (int trial = 0; trial < 2; trial++) {
                    // Expected := actual +- factor * bound, stored in f64 (its own rounding is 2^-53).
                    double factor = trial == 0 ? 2.0 : 0.5;
                    tdm_tensor *mut =
                        tdm_tensor_to(orig, TDM_CPU, integer ? TDM_DTYPE_I64 : TDM_DTYPE_F64);
                    if (integer) {
                        CHECK_MSG(bound[i] == 0, "%s: an integer result with a bound", argv[a]);
                        ((int64_t *)tdm_tensor_data(mut))[i] += trial == 0;
                        tdm_tensor *back = tdm_tensor_to(mut, TDM_CPU, tdm_tensor_dtype(orig));
                        tdm_tensor_free(mut);
                        mut = back;
                    } else {
                        double *e = tdm_tensor_data(mut);
                        e[i] = act[i] + (act[i] >= e[i] ? -1 : 1) * factor * bound[i];
                    }
                    *slot = mut;
                    tdm_case_report rep;
                    CHECK(tdm_case_compare(c, &r, TDM_CPU, &rep) == TDM_OK);
                    if (trial == 0) {
                        CHECK_MSG(!rep.pass, "%s: %s.%d planted 2x its bound still passes", argv[a],
                                  grad ? "grad_input" : "output", k);
                        planted++;
                        if (!wrote) {
                            char path[1024];
                            snprintf(path, sizeof path, "%s/mutated.safetensors", argv[1]);
                            const char *names[4 * TDM_CASE_MAX];
                            const tdm_tensor *ts[4 * TDM_CASE_MAX];
                            char nm[4 * TDM_CASE_MAX][32];
                            int m = 0;
                            const char *kinds[] = {"input", "grad_output", "output", "grad_input"};
                            tdm_tensor **arrs[] = {c->input, c->grad_output, c->output, c->grad_input};
                            for (int q = 0; q < 4; q++)
                                for (int z = 0; z < TDM_CASE_MAX; z++)
                                    if (arrs[q][z]) {
                                        snprintf(nm[m], 32, "%s.%d", kinds[q], z);
                                        names[m] = nm[m];
                                        ts[m++] = arrs[q][z];
                                    }
                            char *attrs = cJSON_PrintUnformatted(c->attrs);
                            const char *meta[] = {"format", "tandem-case/1", "op", c->op, "attrs", attrs};
                            CHECK(tdm_safetensors_save(path, m, names, ts, 3, meta) == TDM_OK);
                            free(attrs);
                            wrote = true;
                        }
                    } else {
                        CHECK_MSG(rep.pass, "%s: %s.%d planted at half its bound fails", argv[a],
                                  grad ? "grad_input" : "output", k);
                    }
                    *slot = orig;
                    tdm_tensor_free(mut);
                }
                free(bound);
                free(act);
            }
        }
        tdm_case_result_free(&r);
        tdm_case_free(c);
    }
    printf("test_mutation: %d planted errors, every one caught\n", planted);
    CHECK_DONE("test_mutation");
}
