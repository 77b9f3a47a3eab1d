/* test_dump_compare.c — compares two `bench train --dump` files tensor by tensor:
 * max |a - b| / max |a| <= TOL for every tensor (TOL 0: bit-identical), and the same names.
 * usage: test_dump_compare A B TOL */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    double tol = atof(argv[3]), worst = 0;
    tdm_safetensors *a = tdm_safetensors_open(argv[1]), *b = tdm_safetensors_open(argv[2]);
    CHECK_MSG(a && b, "%s", tdm_last_error());
    if (!a || !b) CHECK_DONE("test_dump_compare");
    CHECK_MSG(tdm_safetensors_count(a) == tdm_safetensors_count(b), "different tensor counts");
    for (int i = 0; i < tdm_safetensors_count(a); i++) {
        const char *name = tdm_safetensors_name(a, i);
        tdm_tensor *ta = tdm_safetensors_get(a, name, TDM_CPU), *tb = tdm_safetensors_get(b, name, TDM_CPU);
        CHECK_MSG(ta && tb && tdm_tensor_numel(ta) == tdm_tensor_numel(tb), "%s missing or resized", name);
        if (ta && tb && tdm_tensor_numel(ta) == tdm_tensor_numel(tb)) {
            int64_t n = tdm_tensor_numel(ta);
            double *va = malloc((size_t)(n + 1) * sizeof *va), *vb = malloc((size_t)(n + 1) * sizeof *vb);
            tdm_tensor_to_host_f64(ta, va);
            tdm_tensor_to_host_f64(tb, vb);
            double d = 0, s = 0;
            for (int64_t j = 0; j < n; j++) {
                d = fmax(d, fabs(va[j] - vb[j]));
                s = fmax(s, fabs(va[j]));
            }
            double rel = d / (s > 0 ? s : 1);
            worst = fmax(worst, rel);
            CHECK_MSG(tol == 0 ? d == 0 : rel <= tol, "%s: relative difference %.3g (tolerance %g)", name, rel, tol);
            free(va);
            free(vb);
        }
        tdm_tensor_free(ta);
        tdm_tensor_free(tb);
    }
    printf("test_dump_compare: worst relative difference %.3g (tolerance %g)\n", worst, tol);
    tdm_safetensors_close(a);
    tdm_safetensors_close(b);
    CHECK_DONE("test_dump_compare");
}
