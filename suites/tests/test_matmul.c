/* test_matmul.c — torch.matmul's shape rules in tdm_matmul beyond the four forms the backends
 * take: 1-D operands (the added dim dropped), broadcast batch dims, empty batches; each result
 * checked against 2-D products of the matching slices (the reference computes every dot product
 * the same way whatever the form, so they agree bit for bit), and the refusals' messages. The
 * values of the forms and their gradients are also golden cases (matmul-*-{vm,mv,dot,vbm,bmv,
 * bcast4d,b1}) and random cases of bench conform. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

static const tdm_device CPU = {TDM_DEVICE_CPU, 0};

static bool has(const char *needle) { return strstr(tdm_last_error(), needle) != NULL; }

static tdm_tensor *randn(int nd, const int64_t *shape, uint64_t seed) {
    return tdm_tensor_randn(nd, shape, TDM_DTYPE_F32, CPU, seed, 0);
}

static bool shape_is(const tdm_tensor *t, int nd, const int64_t *shape) {
    if (!t || tdm_tensor_ndim(t) != nd) return false;
    for (int i = 0; i < nd; i++)
        if (tdm_tensor_shape(t)[i] != shape[i]) return false;
    return true;
}

// The floats of t (numel of them), malloc'd.
static float *floats(const tdm_tensor *t) {
    size_t n = tdm_tensor_nbytes(t);
    float *f = malloc(n + 4);
    if (f && tdm_tensor_to_host(t, f, n) != TDM_OK) {
        free(f);
        return NULL;
    }
    return f;
}

// c (rows, cols) against the 2-D product of a's matrix at offset ao (rows,k) and b's at bo (k,cols)
// computed by tdm_matmul itself on 2-D copies.
static bool slice_matches(const float *a, int64_t ao, const float *b, int64_t bo, const float *c,
                          int64_t co, int64_t rows, int64_t k, int64_t cols) {
    tdm_tensor *a2 = tdm_tensor_from_host(2, (int64_t[]){rows, k}, TDM_DTYPE_F32, CPU, a + ao);
    tdm_tensor *b2 = tdm_tensor_from_host(2, (int64_t[]){k, cols}, TDM_DTYPE_F32, CPU, b + bo);
    tdm_tensor *c2 = a2 && b2 ? tdm_matmul(a2, b2) : NULL;
    float *h = c2 ? floats(c2) : NULL;
    bool same = h && memcmp(h, c + co, (size_t)(rows * cols) * sizeof *h) == 0;
    free(h);
    tdm_tensor_free(c2);
    tdm_tensor_free(b2);
    tdm_tensor_free(a2);
    return same;
}

int main(void) {
    // (2,1,3,5) @ (4,5,6) -> (2,4,3,6): y[i,j] = a[i,0] @ b[j]
    tdm_tensor *a = randn(4, (int64_t[]){2, 1, 3, 5}, 1), *b = randn(3, (int64_t[]){4, 5, 6}, 2);
    tdm_tensor *y = tdm_matmul(a, b);
    CHECK(shape_is(y, 4, (int64_t[]){2, 4, 3, 6}));
    float *ha = floats(a), *hb = floats(b), *hy = y ? floats(y) : NULL;
    for (int i = 0; hy && i < 2; i++)
        for (int j = 0; j < 4; j++)
            CHECK_MSG(slice_matches(ha, i * 15, hb, j * 30, hy, (i * 4 + j) * 18, 3, 5, 6),
                      "broadcast batch [%d,%d]", i, j);
    free(hy);
    tdm_tensor_free(y);

    // vector @ batch of matrices: (5) @ (4,5,6) -> (4,6)
    tdm_tensor *v = randn(1, (int64_t[]){5}, 3);
    y = tdm_matmul(v, b);
    CHECK(shape_is(y, 2, (int64_t[]){4, 6}));
    float *hv = floats(v);
    hy = y ? floats(y) : NULL;
    for (int j = 0; hy && j < 4; j++)
        CHECK_MSG(slice_matches(hv, 0, hb, j * 30, hy, j * 6, 1, 5, 6), "vector @ b[%d]", j);
    free(hy);
    tdm_tensor_free(y);

    // batch @ vector: (2,1,3,5) @ (5) -> (2,1,3); dot: (5) @ (5) -> scalar
    y = tdm_matmul(a, v);
    CHECK(shape_is(y, 3, (int64_t[]){2, 1, 3}));
    hy = y ? floats(y) : NULL;
    for (int i = 0; hy && i < 2; i++)
        CHECK_MSG(slice_matches(ha, i * 15, hv, 0, hy, i * 3, 3, 5, 1), "a[%d] @ vector", i);
    free(hy);
    tdm_tensor_free(y);
    y = tdm_matmul(v, v);
    CHECK(shape_is(y, 0, NULL));
    hy = y ? floats(y) : NULL;
    CHECK(hy && slice_matches(hv, 0, hv, 0, hy, 0, 1, 5, 1));
    free(hy);

    // gradients keep the operands' shapes (values: golden cases and gradcheck)
    tdm_tensor *ga = NULL, *gb = NULL;
    tdm_tensor *gy = randn(4, (int64_t[]){2, 4, 3, 6}, 4);
    CHECK(tdm_matmul_backward(gy, a, b, &ga, &gb) == TDM_OK);
    CHECK(shape_is(ga, 4, (int64_t[]){2, 1, 3, 5}) && shape_is(gb, 3, (int64_t[]){4, 5, 6}));
    tdm_tensor_free(ga);
    tdm_tensor_free(gb);
    tdm_tensor *gs = randn(0, NULL, 5), *gv1 = NULL, *gv2 = NULL;
    CHECK(tdm_matmul_backward(gs, v, v, &gv1, &gv2) == TDM_OK);
    CHECK(shape_is(gv1, 1, (int64_t[]){5}) && shape_is(gv2, 1, (int64_t[]){5}));
    tdm_tensor_free(gv1);
    tdm_tensor_free(gv2);
    tdm_tensor_free(gs);

    // an empty batch: (0,3,5) @ (5,6) -> (0,3,6); the gradient of b is zero
    tdm_tensor *e = randn(3, (int64_t[]){0, 3, 5}, 6), *m = randn(2, (int64_t[]){5, 6}, 7);
    tdm_tensor *ye = tdm_matmul(e, m);
    CHECK(shape_is(ye, 3, (int64_t[]){0, 3, 6}));
    tdm_tensor *gm = NULL;
    CHECK(ye && tdm_matmul_backward(ye, e, m, NULL, &gm) == TDM_OK && shape_is(gm, 2, (int64_t[]){5, 6}));
    float *hg = gm ? floats(gm) : NULL;
    for (int i = 0; hg && i < 30; i++) CHECK(hg[i] == 0.0f);
    free(hg);
    tdm_tensor_free(gm);
    tdm_tensor_free(ye);

    // refusals
    tdm_tensor *c = randn(3, (int64_t[]){3, 5, 6}, 8);
    tdm_tensor *ac = tdm_matmul(a, c);   // (2,1,3,5) @ (3,5,6): batch 2x1 vs 3 broadcast to (2,3)
    CHECK(shape_is(ac, 4, (int64_t[]){2, 3, 3, 6}));
    tdm_tensor_free(ac);
    tdm_tensor *d = randn(4, (int64_t[]){3, 1, 5, 6}, 9);
    CHECK(!tdm_matmul(a, d) && has("batch dims do not broadcast"));   // 2 vs 3
    tdm_tensor *s = randn(0, NULL, 10);
    CHECK(!tdm_matmul(s, v) && has("at least 1 dimension"));
    tdm_tensor *w = randn(2, (int64_t[]){4, 6}, 11);
    CHECK(!tdm_matmul(a, w) && has("cannot be multiplied"));
    tdm_tensor *big = randn(6, (int64_t[]){1, 1, 1, 2, 3, 5}, 12);
    tdm_tensor *big2 = randn(6, (int64_t[]){1, 1, 2, 1, 5, 3}, 13);
    tdm_tensor *yb = tdm_matmul(big, big2);
    CHECK(shape_is(yb, 6, (int64_t[]){1, 1, 2, 2, 3, 3}));
    tdm_tensor_free(yb);

    tdm_tensor *all[] = {a, b, y, v, gy, e, m, c, d, s, w, big, big2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    free(ha);
    free(hb);
    free(hv);
    CHECK_DONE("matmul.forms");
}
