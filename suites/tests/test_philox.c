/* test_philox.c — the counter-based generator: Random123's known answers, the per-element
 * streams of docs/CASE_FORMAT.md, and that rand/randn/dropout are reproducible from a seed. */
#include <math.h>

#include "check.h"
#include "core/philox.h"
#include "tandem/tandem.h"

int main(void) {
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        tdm_philox4 c = {{kat[i].ctr[0], kat[i].ctr[1], kat[i].ctr[2], kat[i].ctr[3]}};
        tdm_philox4 r = tdm_philox4x32_10(c, kat[i].key[0], kat[i].key[1]);
        for (int j = 0; j < 4; j++) CHECK_MSG(r.v[j] == kat[i].out[j], "kat %d word %d", i, j);
    }
    // Element i of the uniform stream is word i%4 of block i/4.
    tdm_philox4 c = {{1, 0, 7, 0}};
    tdm_philox4 r = tdm_philox4x32_10(c, 42, 0);
    for (int j = 0; j < 4; j++) CHECK(tdm_philox_bits(42, 7, 4 + j) == r.v[j]);
    // rand: the same seed gives the same tensor; values in [0,1); mean near 1/2.
    int64_t shape[2] = {64, 33};
    tdm_tensor *a = tdm_tensor_rand(2, shape, TDM_DTYPE_F32, TDM_CPU, 1234, 0);
    tdm_tensor *b = tdm_tensor_rand(2, shape, TDM_DTYPE_F32, TDM_CPU, 1234, 0);
    tdm_tensor *n = tdm_tensor_randn(2, shape, TDM_DTYPE_F64, TDM_CPU, 1234, 1);
    CHECK(a && b && n);
    const float *pa = tdm_tensor_data(a), *pb = tdm_tensor_data(b);
    const double *pn = tdm_tensor_data(n);
    double mean = 0, nmean = 0, nvar = 0;
    for (int64_t i = 0; i < 64 * 33; i++) {
        CHECK(pa[i] == pb[i] && pa[i] >= 0 && pa[i] < 1);
        mean += pa[i];
        nmean += pn[i];
        nvar += pn[i] * pn[i];
    }
    mean /= 64 * 33;
    nmean /= 64 * 33;
    nvar /= 64 * 33;
    CHECK_MSG(fabs(mean - 0.5) < 0.03, "uniform mean %g", mean);
    CHECK_MSG(fabs(nmean) < 0.06 && fabs(nvar - 1) < 0.1, "normal mean %g var %g", nmean, nvar);
    // Dropout: p = 0.25 keeps about 3/4, scales by 4/3, and is the same mask in backward.
    tdm_tensor *ones = tdm_tensor_rand(2, shape, TDM_DTYPE_F32, TDM_CPU, 9, 0);
    float *po = tdm_tensor_data(ones);
    for (int64_t i = 0; i < 64 * 33; i++) po[i] = 1.0f;
    tdm_tensor *y = tdm_dropout(ones, 0.25, true, 77, 3), *gx = NULL;
    CHECK(y && tdm_dropout_backward(ones, 0.25, true, 77, 3, &gx) == TDM_OK);
    int kept = 0;
    for (int64_t i = 0; y && gx && i < 64 * 33; i++) {
        float v = ((const float *)tdm_tensor_data(y))[i];
        bool keep = (tdm_philox_bits(77, 3, (uint64_t)i) >> 8) < tdm_dropout_threshold(0.25);
        CHECK(v == (keep ? (float)(1.0 / 0.75) : 0.0f));
        CHECK(((const float *)tdm_tensor_data(gx))[i] == v);
        kept += keep;
    }
    CHECK_MSG(fabs(kept / (64.0 * 33) - 0.75) < 0.03, "kept %d", kept);
    tdm_tensor_free(a);
    tdm_tensor_free(b);
    tdm_tensor_free(n);
    tdm_tensor_free(ones);
    tdm_tensor_free(y);
    tdm_tensor_free(gx);
    CHECK_DONE("test_philox");
}
