/* test_add_layer_norm.c — tdm_add_layer_norm (a transformer block's residual add and the next
 * layer_norm as one op) gives exactly what tdm_add then tdm_layer_norm give: the sum, the
 * normalized result and, through autograd, the gradients of x, the residual, the weight and the
 * bias, bit for bit. On the cpu (the two ops) and, with `gpu` (label gpu, exit 77 without a
 * device), on cuda:0, where the backend's add_layer_norm fuses them: f32, bf16, f16, an f32
 * stream plus a bf16 residual under bf16 autocast (a GPT's), rows of a warp (K <= 1024) and of a
 * block; and fewer launches than the two ops (one kernel for both).
 * usage: test_add_layer_norm cpu | gpu */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"   // first: the other public headers build on it
#include "tandem/amp.h"
#include "tandem/profile.h"
#include "tensor_eq.h"

// One configuration on dev: fused (one op) against the two ops, forward and backward.
static void compare(tdm_device dev, tdm_dtype xd, tdm_dtype rd, int64_t K, bool autocast) {
    const int64_t shape[3] = {2, 5, K};
    tdm_tensor *x0 = tdm_tensor_randn(3, shape, xd, dev, 31, (uint64_t)K);
    tdm_tensor *r0 = tdm_tensor_randn(3, shape, rd, dev, 32, (uint64_t)K);
    tdm_tensor *w0 = tdm_tensor_randn(1, &K, TDM_DTYPE_F32, dev, 33, 0);
    tdm_tensor *b0 = tdm_tensor_randn(1, &K, TDM_DTYPE_F32, dev, 34, 0);
    tdm_tensor *gy = tdm_tensor_randn(3, shape, autocast ? TDM_DTYPE_F32 : xd, dev, 35, 0);
    tdm_tensor *gs = tdm_tensor_randn(3, shape, xd, dev, 36, 0);
    tdm_tensor *res[2][6];   // per way: y, sum, grads of x, r, w, b
    for (int way = 0; way < 2; way++) {
        tdm_tensor *in[4] = {tdm_tensor_detach(x0), tdm_tensor_detach(r0), tdm_tensor_detach(w0),
                             tdm_tensor_detach(b0)};
        for (int i = 0; i < 4; i++) tdm_tensor_set_requires_grad(in[i], true);
        tdm_autocast_state prev = {0};
        if (autocast) prev = tdm_autocast_enter(TDM_DTYPE_BF16);
        tdm_tensor *sum = NULL, *y = NULL;
        if (way == 0) {
            y = tdm_add_layer_norm(in[0], in[1], 1, in[2], in[3], 1e-5, &sum);
        } else {
            sum = tdm_add(in[0], in[1], 1.0);
            y = sum ? tdm_layer_norm(sum, 1, in[2], in[3], 1e-5, NULL, NULL) : NULL;
        }
        if (autocast) tdm_autocast_exit(prev);
        CHECK_MSG(y && sum, "%s", tdm_last_error());
        // both results flow back: y's gradient and the sum's own (the residual stream)
        CHECK_MSG(y && tdm_backward(y, gy) == TDM_OK && sum && tdm_backward(sum, gs) == TDM_OK,
                  "%s", tdm_last_error());
        res[way][0] = y, res[way][1] = sum;
        for (int i = 0; i < 4; i++) {
            res[way][2 + i] = tdm_tensor_grad(in[i]) ? tdm_tensor_detach(tdm_tensor_grad(in[i])) : NULL;
            tdm_tensor_free(in[i]);
        }
    }
    static const char *const what[6] = {"output", "sum", "grad x", "grad residual", "grad weight",
                                        "grad bias"};
    for (int i = 0; i < 6; i++) {
        CHECK_MSG(res[0][i] && tensors_same_bytes(res[0][i], res[1][i]),
                  "%s: %s + %s K=%lld autocast=%d: %s differs", dev.type ? "cuda" : "cpu",
                  tdm_dtype_name(xd), tdm_dtype_name(rd), (long long)K, autocast, what[i]);
        tdm_tensor_free(res[0][i]);
        tdm_tensor_free(res[1][i]);
    }
    tdm_tensor *all[] = {x0, r0, w0, b0, gy, gs};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

// Launches of the forward: one op against two.
static void launches(tdm_device dev) {
    const int64_t shape[2] = {4, 64}, K = 64;
    tdm_tensor *x = tdm_tensor_randn(2, shape, TDM_DTYPE_F32, dev, 1, 0);
    tdm_tensor *r = tdm_tensor_randn(2, shape, TDM_DTYPE_F32, dev, 2, 0);
    tdm_tensor *w = tdm_tensor_randn(1, &K, TDM_DTYPE_F32, dev, 3, 0);
    tdm_tensor *sum = NULL;
    uint64_t l0 = tdm_profile_launches();
    tdm_tensor *y = tdm_add_layer_norm(x, r, 1, w, NULL, 1e-5, &sum);
    uint64_t fused = tdm_profile_launches() - l0;
    l0 = tdm_profile_launches();
    tdm_tensor *s2 = tdm_add(x, r, 1.0);
    tdm_tensor *y2 = tdm_layer_norm(s2, 1, w, NULL, 1e-5, NULL, NULL);
    uint64_t two = tdm_profile_launches() - l0;
    printf("launches: add_layer_norm %llu, add + layer_norm %llu\n", (unsigned long long)fused,
           (unsigned long long)two);
    CHECK(y && y2 && fused == 1 && two == 2);
    tdm_tensor *all[] = {x, r, w, sum, y, s2, y2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
}

int main(int argc, char **argv) {
    const bool gpu = argc > 1 && !strcmp(argv[1], "gpu");
    const tdm_device dev = {gpu ? TDM_DEVICE_CUDA : TDM_DEVICE_CPU, 0};
    if (gpu && !tdm_device_available(dev)) {
        printf("SKIP add_layer_norm.gpu: %s\n", tdm_last_error());
        return 77;
    }
    const tdm_dtype same[3] = {TDM_DTYPE_F32, TDM_DTYPE_BF16, TDM_DTYPE_F16};
    for (int d = 0; d < 3; d++)
        for (int64_t K = 48; K <= 1500; K += 1452) compare(dev, same[d], same[d], K, false);
    compare(dev, TDM_DTYPE_F32, TDM_DTYPE_BF16, 96, true);     // a GPT's stream under autocast
    compare(dev, TDM_DTYPE_F32, TDM_DTYPE_BF16, 1100, true);   // (a block per row)
    compare(dev, TDM_DTYPE_BF16, TDM_DTYPE_BF16, 64, true);    // autocast casts the sum: two ops
    tdm_tensor *sum = NULL;
    {   // mixed dtypes without autocast: add's refusal, nothing returned
        const int64_t s2[2] = {2, 4};
        tdm_tensor *a = tdm_tensor_randn(2, s2, TDM_DTYPE_F32, dev, 1, 0);
        tdm_tensor *b = tdm_tensor_randn(2, s2, TDM_DTYPE_BF16, dev, 2, 0);
        CHECK(!tdm_add_layer_norm(a, b, 1, NULL, NULL, 1e-5, &sum) && !sum &&
              strstr(tdm_last_error(), "same dtype"));
        tdm_tensor_free(a);
        tdm_tensor_free(b);
    }
    CHECK(!tdm_add_layer_norm(NULL, NULL, 1, NULL, NULL, 1e-5, &sum) && !sum);
    CHECK(!tdm_add_layer_norm(NULL, NULL, 1, NULL, NULL, 1e-5, NULL));
    if (gpu) launches(dev);
    CHECK_DONE(gpu ? "add_layer_norm.gpu" : "add_layer_norm.cpu");
}
