/* test_parallel.c — data parallel's all-reduce paths (core/parallel.c):
 *   cpu:  two thread ranks, a backward whose gradient hooks reduce buckets as they complete
 *         (overlap on) gives the same averaged gradients, bit for bit, as reducing every bucket
 *         at sync (overlap off), and both equal the mean computed here; the cpu never uses a
 *         device communicator.
 *   gpu:  one rank per GPU (all of them; one is enough), gradients set to rank + 1 + element/8
 *         on each rank's device, averaged through the backend's communicator (NCCL): every rank
 *         must read the mean over ranks; TANDEM_DP_COMM=host must give the same through the host.
 *   accumulate (two GPUs, NCCL): three backwards before one sync, overlap on, give the mean over
 *         ranks of the summed gradients, as the same on the cpu's host path does — run with
 *         TANDEM_EMU_NCCL_DELAY_MS, so that an all-reduce not ordered before the next backward
 *         is still running when that backward adds into its gradients (it then wrote over them);
 *         with tdm_dp_no_sync on for all but the last the same, and the gradients after a
 *         no_sync backward are the rank's own; a parameter without a gradient in an accumulating
 *         backward is an error sync reports; caching cannot be turned off under a communicator.
 *   memory (two GPUs, NCCL, with the delay): right after the sync, while the all-reduce is still
 *         queued, the cached segments are released and a new one made: the allocator waits for
 *         the all-reduce first (the emulated device faults on a cudaFree or cudaMalloc then).
 *   peer  (the emulated device with two devices: it counts copies staged through the host) copies
 *         between cuda:0 and cuda:1, both ways, synchronous and asynchronous, stage none: tandem
 *         enabled peer access.
 *   Exit 77 (skip) when there is no CUDA device (or two), or no collectives in this build. */
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

// ---- accumulation, no_sync, memory under a queued all-reduce (two GPUs) ------------------------

enum { ACC_BACKWARDS = 3 };

typedef struct {
    tdm_dp_group *g;
    tdm_device base;
    bool no_sync;       // tdm_dp_no_sync for all backwards but the last
    bool unused;        // a fourth parameter that gets no gradient (its bucket never completes)
    bool memory;        // after sync: empty the cache and allocate a new segment at once
    double grads[2][N_PARAMS][15];
    double local[2][N_PARAMS][15];   // no_sync: rank's own gradients after the first backward
    tdm_status sync[2];
    char error[2][600];
    tdm_status set_caching_off;      // tdm_memory_set_caching(false) with the member alive
    bool device_comm;
} acc_case;

static tdm_status acc_rank(int rank, void *arg) {
    acc_case *c = arg;
    tdm_device dev = c->base;
    if (dev.type == TDM_DEVICE_CUDA) dev.index += rank;
    tdm_tensor *p[N_PARAMS + 1] = {0};
    const int np = c->unused ? N_PARAMS + 1 : N_PARAMS;
    for (int i = 0; i < np; i++) {
        int64_t one[2] = {2, 2};
        p[i] = tdm_tensor_randn(2, i < N_PARAMS ? shapes[i] : one, TDM_DTYPE_F32, dev, 7,
                                (uint64_t)i * 100);
        if (!p[i]) return tdm_last_status();
        tdm_tensor_set_requires_grad(p[i], true);
    }
    // attached as (u, p0, p1, p2): in reverse, p0 and the unused u share the last bucket, which
    // never completes, so the first backward's end is not ordered, and the second adds into p2
    // while its all-reduce may still run: an error
    tdm_tensor *att[N_PARAMS + 1] = {p[N_PARAMS], p[0], p[1], p[2]};
    tdm_status s = tdm_dp_attach(c->g, rank, c->unused ? att : p, np);
    if (rank == 0) c->device_comm = tdm_dp_uses_device_comm(c->g, 0);
    if (s == TDM_OK && rank == 0 && dev.type == TDM_DEVICE_CUDA) {
        c->set_caching_off = tdm_memory_set_caching(dev, false);
        tdm_error_clear();
    }
    // 32 MiB, its own segment, cached when freed: what `memory` releases under the all-reduce
    int64_t big = 8 << 20;
    if (s == TDM_OK && c->memory) {
        tdm_tensor *t = tdm_tensor_zeros(1, &big, TDM_DTYPE_F32, dev);
        s = t ? TDM_OK : tdm_last_status();
        tdm_tensor_free(t);
    }
    for (int k = 0; s == TDM_OK && k < ACC_BACKWARDS; k++) {   // loss = sum(x @ p0 @ p1 @ p2)
        if (c->no_sync) tdm_dp_no_sync(c->g, rank, k + 1 < ACC_BACKWARDS);
        int64_t xs[2] = {2, 4};
        const uint64_t offset = (uint64_t)(rank * 10 + k) * 1000;
        tdm_tensor *x = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, dev, 11, offset);
        tdm_tensor *h1 = tdm_matmul(x, p[0]), *h2 = tdm_matmul(h1, p[1]);
        tdm_tensor *h3 = tdm_matmul(h2, p[2]);
        tdm_tensor *loss = tdm_sum(h3, 0, NULL, false);
        s = loss ? tdm_backward(loss, NULL) : tdm_last_status();
        tdm_tensor_free(x), tdm_tensor_free(h1), tdm_tensor_free(h2), tdm_tensor_free(h3);
        tdm_tensor_free(loss);
        for (int i = 0; s == TDM_OK && k == 0 && c->no_sync && i < N_PARAMS; i++)
            s = tdm_tensor_to_host_f64(tdm_tensor_grad(p[i]), c->local[rank][i]);
    }
    if (s == TDM_OK) {
        c->sync[rank] = tdm_dp_sync(c->g, rank);
        if (c->sync[rank] != TDM_OK)
            snprintf(c->error[rank], sizeof c->error[rank], "%s", tdm_last_error());
    }
    if (s == TDM_OK && c->sync[rank] == TDM_OK && c->memory) {   // the all-reduce is still queued
        s = tdm_memory_empty_cache(dev);
        tdm_tensor *t = s == TDM_OK ? tdm_tensor_zeros(1, &big, TDM_DTYPE_F32, dev) : NULL;
        if (s == TDM_OK && !t) s = tdm_last_status();
        tdm_tensor_free(t);
    }
    for (int i = 0; s == TDM_OK && c->sync[rank] == TDM_OK && i < N_PARAMS; i++)
        s = tdm_tensor_to_host_f64(tdm_tensor_grad(p[i]), c->grads[rank][i]);
    for (int i = 0; i < np; i++) tdm_tensor_free(p[i]);
    return s;
}

static int acc_run(acc_case *c, tdm_device base) {
    c->base = base;
    c->g = tdm_dp_group_new(2, 64);   // 64-byte buckets: one or two parameters each
    if (!c->g) return 1;
    tdm_status s = tdm_dp_run(c->g, acc_rank, c);
    CHECK_MSG(s == TDM_OK, "%s run: %s", base.type == TDM_DEVICE_CPU ? "cpu" : "cuda",
              tdm_last_error());
    tdm_dp_group_free(c->g);
    return s != TDM_OK;
}

// Gradients of the gpu run against the cpu's (the host path: no stream to order), within the
// rounding of f32 matmuls of length <= 5 summed over three backwards.
static void acc_compare(const acc_case *gpu, const acc_case *cpu, const char *what) {
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N_PARAMS; i++)
            for (int64_t k = 0; k < shapes[i][0] * shapes[i][1]; k++) {
                double a = gpu->grads[r][i][k], b = cpu->grads[r][i][k];
                CHECK_MSG(fabs(a - b) <= 1e-4 * (1 + fabs(b)),
                          "%s: rank %d param %d [%lld] = %.9g, the host path's %.9g", what, r, i,
                          (long long)k, a, b);
            }
}

static int two_gpus(void) {
    tdm_device cuda1 = {TDM_DEVICE_CUDA, 1};
    if (!tdm_device_available(cuda1)) {
        printf("SKIP: two CUDA devices needed (%s)\n", tdm_last_error());
        return 0;
    }
    return 1;
}

static int test_accumulate(void) {
    if (!two_gpus()) return 77;
    const tdm_device cpu = TDM_CPU, cuda0 = {TDM_DEVICE_CUDA, 0};
    static acc_case ref, on, nosync, unused;
    ref = (acc_case){0};
    if (acc_run(&ref, cpu)) return 1;
    on = (acc_case){0};
    if (acc_run(&on, cuda0)) return 1;
    if (!on.device_comm) {
        printf("SKIP: this build has no device collectives (NCCL not found at configure)\n");
        return 77;
    }
    CHECK_MSG(on.set_caching_off == TDM_ERR_UNSUPPORTED,
              "caching turned off under a communicator: status %d", (int)on.set_caching_off);
    for (int r = 0; r < 2; r++) CHECK_MSG(on.sync[r] == TDM_OK, "sync: %s", on.error[r]);
    acc_compare(&on, &ref, "3 backwards, overlap on");
    nosync = (acc_case){.no_sync = true};
    if (acc_run(&nosync, cuda0)) return 1;
    acc_compare(&nosync, &ref, "3 backwards, no_sync for 2");
    // after a no_sync backward each rank holds its own gradient: the ranks' differ
    CHECK(memcmp(nosync.local[0], nosync.local[1], sizeof nosync.local[0]) != 0);
    unused = (acc_case){.unused = true};
    if (acc_run(&unused, cuda0)) return 1;
    for (int r = 0; r < 2; r++)
        CHECK_MSG(unused.sync[r] != TDM_OK && strstr(unused.error[r], "tdm_dp_no_sync"),
                  "rank %d: an incomplete bucket then another backward: sync gave %d (%s)", r,
                  (int)unused.sync[r], unused.error[r]);
    return 0;
}

static int test_memory(void) {
    if (!two_gpus()) return 77;
    const tdm_device cpu = TDM_CPU, cuda0 = {TDM_DEVICE_CUDA, 0};
    static acc_case ref, mem;
    ref = (acc_case){0};
    mem = (acc_case){.memory = true};
    if (acc_run(&ref, cpu) || acc_run(&mem, cuda0)) return 1;
    if (!mem.device_comm) {
        printf("SKIP: this build has no device collectives (NCCL not found at configure)\n");
        return 77;
    }
    for (int r = 0; r < 2; r++) CHECK_MSG(mem.sync[r] == TDM_OK, "sync: %s", mem.error[r]);
    acc_compare(&mem, &ref, "cache emptied and refilled under the all-reduce");
    return 0;
}

#ifdef TDM_TEST_EMU
unsigned long long tdm_emu_staged_peer_copies(void);   // suites/emu/runtime_copy.cc

static int test_peer(void) {
    if (!two_gpus()) return 77;
    const tdm_device cuda0 = {TDM_DEVICE_CUDA, 0}, cuda1 = {TDM_DEVICE_CUDA, 1};
    const unsigned long long before = tdm_emu_staged_peer_copies();
    int64_t n = 1000;
    tdm_tensor *a = tdm_tensor_rand(1, &n, TDM_DTYPE_F32, cuda0, 3, 0);
    tdm_tensor *b = a ? tdm_tensor_to(a, cuda1, TDM_DTYPE_F32) : NULL;   // cuda:0 -> cuda:1
    tdm_tensor *c = b ? tdm_tensor_zeros(1, &n, TDM_DTYPE_F32, cuda0) : NULL;
    tdm_status s = c ? tdm_tensor_copy_async(c, b, NULL) : tdm_last_status();   // cuda:1 -> 0
    static double ha[1000], hc[1000];
    if (s == TDM_OK) s = tdm_tensor_to_host_f64(a, ha);
    if (s == TDM_OK) s = tdm_tensor_to_host_f64(c, hc);
    CHECK_MSG(s == TDM_OK, "%s", tdm_last_error());
    CHECK(s != TDM_OK || memcmp(ha, hc, sizeof ha) == 0);
    CHECK_MSG(tdm_emu_staged_peer_copies() == before, "%llu copies between devices were staged "
              "through the host (no peer access)", tdm_emu_staged_peer_copies() - before);
    tdm_tensor_free(a), tdm_tensor_free(b), tdm_tensor_free(c);
    return 0;
}
#endif

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*fn)(void);
    } modes[] = {{"accumulate", test_accumulate}, {"memory", test_memory},
#ifdef TDM_TEST_EMU
                 {"peer", test_peer},
#endif
    };
    for (size_t m = 0; argc > 1 && m < sizeof modes / sizeof *modes; m++)
        if (!strcmp(argv[1], modes[m].name)) {
            tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
            if (!tdm_device_available(cuda0)) {
                printf("SKIP: no CUDA device found (%s)\n", tdm_last_error());
                return 77;
            }
            int rc = modes[m].fn();
            if (rc == 77) return 77;
            CHECK(rc == 0);
            CHECK_DONE(modes[m].name);
        }
    if (argc > 1 && !strcmp(argv[1], "gpu")) {
        int rc = test_gpu();
        if (rc == 77) return 77;
        CHECK(rc == 0);
        CHECK_DONE("parallel.gpu");
    }
    CHECK(test_cpu() == 0);
    CHECK_DONE("parallel.cpu");
}
