/* test_parallel.c — data parallel's all-reduce paths (core/parallel.c):
 *   cpu:  two thread ranks, a backward whose gradient hooks reduce buckets as they complete
 *         (overlap on) gives the same averaged gradients, bit for bit, as reducing every bucket
 *         at sync (overlap off), and both equal the mean computed here; the cpu never uses a
 *         device communicator.
 *   gpu:  one rank per GPU (all of them; one is enough), gradients set to rank + 1 + element/8
 *         on each rank's device, averaged through the backend's communicator (NCCL): every rank
 *         must read the mean over ranks; TANDEM_DP_COMM=host must give the same through the host.
 *         Exit 77 (skip) when there is no CUDA device or no collectives in this build. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

enum { N_PARAMS = 3 };
static const int64_t shapes[N_PARAMS][2] = {{4, 3}, {3, 5}, {5, 2}};

typedef struct {
    tdm_dp_group *g;
    tdm_device base;     // cpu, or cuda:0 (rank r on cuda:r)
    bool backward;       // cpu case: gradients from a backward; gpu case: set by hand
    double grads[8][N_PARAMS][15];   // per rank, the averaged gradients read back
    bool device_comm[8];
} dp_case;

// Rank r's input: a (2,4) matrix depending on r, so that ranks' gradients differ.
static tdm_status run_rank(int rank, void *arg) {
    dp_case *c = arg;
    tdm_device dev = c->base;
    if (dev.type == TDM_DEVICE_CUDA) dev.index += rank;
    tdm_tensor *p[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++) {
        p[i] = tdm_tensor_randn(2, shapes[i], TDM_DTYPE_F32, dev, 7, (uint64_t)i * 100);
        if (!p[i]) return tdm_last_status();
        tdm_tensor_set_requires_grad(p[i], true);
    }
    tdm_status s = tdm_dp_attach(c->g, rank, p, N_PARAMS);
    if (s == TDM_OK && c->backward) {   // loss = sum(x @ p0 @ p1 @ p2)
        int64_t xs[2] = {2, 4};
        tdm_tensor *x = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, dev, 11, (uint64_t)rank * 1000);
        tdm_tensor *h1 = tdm_matmul(x, p[0]), *h2 = tdm_matmul(h1, p[1]), *h3 = tdm_matmul(h2, p[2]);
        tdm_tensor *loss = tdm_sum(h3, 0, NULL, false);
        s = loss ? tdm_backward(loss, NULL) : tdm_last_status();
        tdm_tensor_free(x), tdm_tensor_free(h1), tdm_tensor_free(h2), tdm_tensor_free(h3);
        tdm_tensor_free(loss);
    } else if (s == TDM_OK) {   // grad = rank + 1 + element / 8
        for (int i = 0; s == TDM_OK && i < N_PARAMS; i++) {
            float v[15];
            int64_t n = shapes[i][0] * shapes[i][1];
            for (int64_t k = 0; k < n; k++) v[k] = (float)(rank + 1) + (float)k / 8;
            tdm_tensor *gt = tdm_tensor_from_host(2, shapes[i], TDM_DTYPE_F32, dev, v);
            s = gt ? tdm_tensor_set_grad(p[i], gt) : tdm_last_status();
            tdm_tensor_free(gt);
        }
    }
    if (s == TDM_OK) s = tdm_dp_sync(c->g, rank);
    c->device_comm[rank] = tdm_dp_uses_device_comm(c->g, rank);
    for (int i = 0; s == TDM_OK && i < N_PARAMS; i++)
        s = tdm_tensor_to_host_f64(tdm_tensor_grad(p[i]), c->grads[rank][i]);
    for (int i = 0; i < N_PARAMS; i++) tdm_tensor_free(p[i]);
    return s;
}

static int run_case(dp_case *c, int nranks, bool overlap) {
    c->g = tdm_dp_group_new(nranks, 64);   // 64-byte buckets: one parameter per bucket
    if (!c->g) return 1;
    tdm_dp_set_overlap(c->g, overlap);
    tdm_status s = tdm_dp_run(c->g, run_rank, c);
    CHECK_MSG(s == TDM_OK, "dp run: %s", tdm_last_error());
    tdm_dp_group_free(c->g);
    return s != TDM_OK;
}

static int test_cpu(void) {
    static dp_case on, off;
    on = (dp_case){.base = TDM_CPU, .backward = true};
    off = on;
    if (run_case(&on, 2, true) || run_case(&off, 2, false)) return 1;
    for (int r = 0; r < 2; r++) {
        CHECK(!on.device_comm[r] && !off.device_comm[r]);
        CHECK(memcmp(on.grads[r], off.grads[r], sizeof on.grads[r]) == 0);
        CHECK(memcmp(on.grads[r], on.grads[0], sizeof on.grads[r]) == 0);   // ranks agree
    }
    // The averaged gradient differs from a single rank's (the inputs differ per rank): run rank
    // 0 alone and check the mean is not its gradient.
    static dp_case one;
    one = (dp_case){.base = TDM_CPU, .backward = true};
    if (run_case(&one, 1, true)) return 1;
    CHECK(memcmp(one.grads[0], on.grads[0], sizeof one.grads[0]) != 0);
    return 0;
}

static int test_gpu(void) {
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    if (!tdm_device_available(cuda0)) {
        printf("SKIP: no CUDA device found (%s)\n", tdm_last_error());
        return 77;
    }
    int n = 1;
    while (n < 8 && tdm_device_available((tdm_device){TDM_DEVICE_CUDA, n})) n++;
    for (int pass = 0; pass < 2; pass++) {   // NCCL, then the host path
        if (pass == 1) setenv("TANDEM_DP_COMM", "host", 1);
        static dp_case c;
        c = (dp_case){.base = cuda0, .backward = false};
        if (run_case(&c, n, true)) return 1;
        if (pass == 0 && !c.device_comm[0]) {
            printf("SKIP: this build has no device collectives (NCCL not found at configure)\n");
            return 77;
        }
        double mean_rank = (n + 1) / 2.0;   // mean of rank + 1 over ranks
        for (int r = 0; r < n; r++)
            for (int i = 0; i < N_PARAMS; i++)
                for (int64_t k = 0; k < shapes[i][0] * shapes[i][1]; k++) {
                    double want = mean_rank + (double)k / 8;
                    CHECK_MSG(fabs(c.grads[r][i][k] - want) <= 1e-6 * want,
                              "%s: rank %d param %d [%lld] = %g, want %g",
                              pass ? "host" : "nccl", r, i, (long long)k, c.grads[r][i][k], want);
                }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "gpu")) {
        int rc = test_gpu();
        if (rc == 77) return 77;
        CHECK(rc == 0);
        CHECK_DONE("parallel.gpu");
    }
    CHECK(test_cpu() == 0);
    CHECK_DONE("parallel.cpu");
}
