/* test_loss_falls.c — the loss of a `bench train --dump` run falls: the mean of its last tenth of
 * steps is at most FRACTION of the mean of its first tenth. usage: test_loss_falls DUMP FRACTION */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "tandem/tandem.h"

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    tdm_safetensors *st = tdm_safetensors_open(argv[1]);
    tdm_tensor *l = st ? tdm_safetensors_get(st, "loss", TDM_CPU) : NULL;
    CHECK_MSG(l, "%s", tdm_last_error());
    if (l) {
        int64_t n = tdm_tensor_numel(l), k = n / 10 > 0 ? n / 10 : 1;
        double *v = malloc((size_t)n * sizeof *v), first = 0, last = 0;
        tdm_tensor_to_host_f64(l, v);
        for (int64_t i = 0; i < k; i++) first += v[i] / k, last += v[n - 1 - i] / k;
        printf("loss: first %lld steps %.4f, last %lld steps %.4f\n", (long long)k, first, (long long)k, last);
        CHECK_MSG(last <= atof(argv[2]) * first, "loss did not fall enough: %.4f -> %.4f", first, last);
        free(v);
    }
    tdm_tensor_free(l);
    tdm_safetensors_close(st);
    CHECK_DONE("test_loss_falls");
}
