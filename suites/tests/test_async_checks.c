/* test_async_checks.c — index checks on the GPU without host synchronization (issue 14, point 2):
 * embedding and cross_entropy validate their indices on the device and the error surfaces at the
 * next point where the host waits anyway, naming the op, the bad value and the bound, once.
 *   errors     (cuda:0; exit 77 without one) a bad embedding index, a bad embedding index with
 *              nothing to gather (D = 0), a bad index in embedding's backward, a bad
 *              cross_entropy target: each op returns without an error, the next copy to the host
 *              or synchronize fails with the message, the one after succeeds; good ops stay fine.
 *   record_published_last  (the emulated device only: its atomic hook) the host reads the
 *              record right after a kernel claims it, as a wait on another stream could: it must
 *              see nothing or the whole record, never a raised record with fields missing.
 *   no_waits   (the emulated device only: it counts host waits) a whole training step —
 *              embedding, linear, cross_entropy, backward, SGD with momentum — makes no host wait
 *              until the loss is read, after a first (warm-up) step; reading it waits; nor
 *              does a BatchNorm2d forward in training (num_batches_tracked counts on the
 *              device). With the caching allocator, whatever TANDEM_CACHING_ALLOCATOR says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

#ifdef TDM_TEST_EMU
#include <pthread.h>

unsigned long long tdm_emu_host_waits(void);                    // suites/emu/runtime_streams.cc
void tdm_emu_set_atomic_hook(void (*hook)(const void *addr));   // suites/emu/exec.cc
#endif

static const tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};

static bool has(const char *needle) {
    return strstr(tdm_last_error(), needle) != NULL;
}

static tdm_tensor *indices(int n, const int64_t *v) {
    int64_t shape[1] = {n};
    return tdm_tensor_from_host(1, shape, TDM_DTYPE_I64, cuda0, v);
}

static tdm_tensor *weight(int64_t V, int64_t D, uint64_t seed) {
    int64_t shape[2] = {V, D};
    return tdm_tensor_rand(2, shape, TDM_DTYPE_F32, cuda0, seed, 0);
}

// The next host wait reports `want` once; the wait after that is clean.
static int reported_once(const char *what, const tdm_tensor *y, const char *want,
                         const char *want_at) {
    float *h = y ? malloc((size_t)tdm_tensor_numel(y) * sizeof *h + 1) : NULL;
    tdm_status s = y ? tdm_tensor_to_host(y, h, (size_t)tdm_tensor_numel(y) * sizeof *h)
                     : tdm_device_synchronize(cuda0);
    free(h);
    CHECK_MSG(s == TDM_ERR_ARG && has(want), "%s: the next wait gave %d '%s', want '%s'", what,
              (int)s, tdm_last_error(), want);
    CHECK_MSG(has("reported at the next host wait") && has(want_at), "%s: %s (want %s)", what,
              tdm_last_error(), want_at);
    CHECK_MSG(tdm_device_synchronize(cuda0) == TDM_OK, "%s: reported twice: %s", what,
              tdm_last_error());
    return 0;
}

static int run_errors(void) {
    if (!tdm_device_available(cuda0)) {
        printf("SKIP async_checks.errors: %s\n", tdm_last_error());
        return 77;
    }
    const int64_t good[4] = {0, 3, 9, 2}, bad[4] = {0, 12, 9, 2};
    tdm_tensor *w = weight(10, 8, 1), *w0 = weight(10, 0, 2);
    tdm_tensor *ig = indices(4, good), *ib = indices(4, bad);
    CHECK(w && w0 && ig && ib);

    // forward: no error from the op itself (nothing waited for it), then from the copy
    tdm_tensor *y = tdm_embedding(ib, w, -1);
    CHECK_MSG(y != NULL, "embedding returned an error before any wait: %s", tdm_last_error());
    if (reported_once("embedding", y, "embedding: index 12 out of range for 10 rows", "indices[1]"))
        return 1;
    tdm_tensor_free(y);
    // a good one afterwards is clean
    y = tdm_embedding(ig, w, -1);
    CHECK(y && tdm_device_synchronize(cuda0) == TDM_OK);
    tdm_tensor_free(y);

    // D = 0: nothing to gather, the index is still checked (as the reference does)
    y = tdm_embedding(ib, w0, -1);
    CHECK_MSG(y != NULL, "%s", tdm_last_error());
    if (reported_once("embedding D=0", NULL, "embedding: index 12 out of range for 10 rows",
                      "indices[1]"))
        return 1;
    tdm_tensor_free(y);

    // backward
    int64_t gshape[2] = {4, 8};
    tdm_tensor *gy = tdm_tensor_rand(2, gshape, TDM_DTYPE_F32, cuda0, 3, 0), *gw = NULL;
    CHECK(gy && tdm_embedding_backward(gy, ib, w, -1, &gw) == TDM_OK && gw);
    if (reported_once("embedding_backward", gw,
                      "embedding_backward: index 12 out of range for 10 rows", "indices[1]"))
        return 1;
    tdm_tensor_free(gw);

    // cross_entropy: a target outside [0, C), the loss read
    int64_t lshape[2] = {4, 5};
    const int64_t tbad[4] = {1, 4, 7, 0};
    tdm_tensor *logits = tdm_tensor_rand(2, lshape, TDM_DTYPE_F32, cuda0, 4, 0);
    tdm_tensor *tb = indices(4, tbad);
    tdm_tensor *loss = tdm_cross_entropy(logits, tb, TDM_REDUCTION_MEAN, 0.0, -100);
    CHECK_MSG(loss != NULL, "cross_entropy returned an error before any wait: %s", tdm_last_error());
    if (reported_once("cross_entropy", loss, "cross_entropy: target 7 out of bounds for 5 classes",
                      "row 2"))
        return 1;
    tdm_tensor *all[] = {w, w0, ig, ib, gy, logits, tb, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    CHECK_DONE("async_checks.errors");
}

#ifdef TDM_TEST_EMU
static int run_no_waits(void) {
    // The claim is the caching allocator's (the default): without it every free is a cudaFree,
    // which waits for the device as CUDA documents, so an emu-nocache run would count those.
    setenv("TANDEM_CACHING_ALLOCATOR", "1", 1);   // before the backend's first allocation
    const int64_t B = 6, V = 10, D = 8, C = 5;
    const int64_t ids[6] = {1, 0, 9, 4, 4, 7}, cls[6] = {0, 4, 2, 2, 1, 3};
    tdm_tensor *w = weight(V, D, 5);
    int64_t lw_shape[2] = {C, D}, lb_shape[1] = {C};
    tdm_tensor *lw = tdm_tensor_rand(2, lw_shape, TDM_DTYPE_F32, cuda0, 6, 0);
    tdm_tensor *lb = tdm_tensor_rand(1, lb_shape, TDM_DTYPE_F32, cuda0, 7, 0);
    tdm_tensor *idx = indices((int)B, ids), *tgt = indices((int)B, cls);
    CHECK(w && lw && lb && idx && tgt);
    tdm_tensor *params[3] = {w, lw, lb};
    for (int i = 0; i < 3; i++) tdm_tensor_set_requires_grad(params[i], true);
    tdm_sgd_params sp = {.lr = 0.1, .momentum = 0.9};
    tdm_optimizer *opt = tdm_optim_sgd(params, 3, &sp);
    CHECK(opt && tdm_device_synchronize(cuda0) == TDM_OK);   // uploads done

    // step 0 is the warm-up: it makes what later steps reuse (momentum buffers, the backward's
    // seed of ones on the device, cached plans), as a first step does on a GPU
    for (int step = 0; step < 4; step++) {
        const unsigned long long before = tdm_emu_host_waits();
        tdm_tensor *e = tdm_embedding(idx, w, -1);                       // (B,D)
        tdm_tensor *logits = e ? tdm_linear(e, lw, lb) : NULL;           // (B,C)
        tdm_tensor *loss = logits ? tdm_cross_entropy(logits, tgt, TDM_REDUCTION_MEAN, 0.0, -100)
                                  : NULL;
        CHECK_MSG(loss != NULL, "%s", tdm_last_error());
        CHECK_MSG(tdm_backward(loss, NULL) == TDM_OK, "%s", tdm_last_error());
        // clip_grad_norm_ (issue 23): the norm and the scale stay on the device
        tdm_tensor *norm = tdm_clip_grad_norm_(params, 3, 0.5, 2.0, false);
        CHECK_MSG(norm != NULL, "%s", tdm_last_error());
        tdm_tensor_free(norm);
        CHECK_MSG(tdm_optimizer_step(opt) == TDM_OK, "%s", tdm_last_error());
        tdm_optimizer_zero_grad(opt);
        const unsigned long long during = tdm_emu_host_waits() - before;
        CHECK_MSG(step == 0 || during == 0, "step %d: %llu host wait(s) before the loss was read",
                  step, during);
        float l = 0;
        CHECK_MSG(tdm_tensor_to_host(loss, &l, sizeof l) == TDM_OK, "%s", tdm_last_error());
        CHECK_MSG(tdm_emu_host_waits() > before, "step %d: reading the loss did not wait", step);
        CHECK_MSG(l > 0 && l < 10, "step %d: loss %g", step, l);
        tdm_tensor_free(e);
        tdm_tensor_free(logits);
        tdm_tensor_free(loss);
    }
    // BatchNorm2d in training: its statistics and num_batches_tracked stay on the device
    tdm_module *bn = tdm_nn_batch_norm2d(3, 1e-5, 0.1);
    int64_t xshape[4] = {2, 3, 4, 4};
    tdm_tensor *xb = tdm_tensor_rand(4, xshape, TDM_DTYPE_F32, cuda0, 8, 0);
    CHECK(bn && xb && tdm_module_to(bn, cuda0) == TDM_OK);
    for (int step = 0; step < 3; step++) {
        const unsigned long long before = tdm_emu_host_waits();
        tdm_tensor *y = tdm_module_forward(bn, xb);
        CHECK_MSG(y != NULL, "%s", tdm_last_error());
        const unsigned long long during = tdm_emu_host_waits() - before;
        CHECK_MSG(step == 0 || during == 0, "batch_norm2d step %d: %llu host wait(s)", step, during);
        tdm_tensor_free(y);
    }
    CHECK(tdm_device_synchronize(cuda0) == TDM_OK);   // nothing left queued at exit
    tdm_module_free(bn);
    tdm_tensor_free(xb);
    tdm_optimizer_free(opt);
    tdm_tensor *all[] = {w, lw, lb, idx, tgt};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdm_tensor_free(all[i]);
    CHECK_DONE("async_checks.no_waits");
}
#endif

#ifdef TDM_TEST_EMU
// The host may read the error record while a kernel writes it: a wait on another stream of the
// device returns while that kernel runs, and reads the record. The emulator's atomic hook makes
// such a wait (on an idle side stream) right after every integer atomic of every kernel, i.e.
// right after a kernel claims the record: a record published before its fields are written is
// then reported half-written ("?: index 0 out of range for 0 rows") and the real report is lost.
// Exactly one report must come, complete.
static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static tdm_stream *side;
static int hook_calls, hook_reports;
static char hook_msg[512];

static void wait_on_side_stream(const void *addr) {
    (void)addr;
    pthread_mutex_lock(&hook_mu);   // one host thread waiting at a time
    hook_calls++;
    if (tdm_stream_synchronize(side) != TDM_OK && hook_reports++ == 0)
        snprintf(hook_msg, sizeof hook_msg, "%s", tdm_last_error());
    pthread_mutex_unlock(&hook_mu);
}

static int run_record_published(void) {
    const int64_t bad[4] = {0, 12, 9, 2};
    tdm_tensor *w = weight(10, 8, 1), *ib = indices(4, bad);
    side = tdm_stream_new(cuda0);
    CHECK(w && ib && side && tdm_device_synchronize(cuda0) == TDM_OK);
    for (int round = 0; round < 3; round++) {
        hook_calls = hook_reports = 0;
        hook_msg[0] = 0;
        tdm_emu_set_atomic_hook(wait_on_side_stream);
        tdm_tensor *y = tdm_embedding(ib, w, -1);
        CHECK_MSG(y != NULL, "%s", tdm_last_error());
        const tdm_status s = tdm_device_synchronize(cuda0);
        tdm_emu_set_atomic_hook(NULL);
        char wait_msg[512] = "";
        if (s != TDM_OK) snprintf(wait_msg, sizeof wait_msg, "%s", tdm_last_error());
        CHECK_MSG(hook_calls > 0, "the kernel made no atomic: nothing was read mid-write");
        const char *got = hook_reports ? hook_msg : wait_msg;
        CHECK_MSG(hook_reports + (s != TDM_OK) == 1,
                  "round %d: %d report(s) while the kernel ran ('%s'), the wait gave '%s'", round,
                  hook_reports, hook_msg, wait_msg);
        CHECK_MSG(strstr(got, "embedding: index 12 out of range for 10 rows") &&
                      strstr(got, "indices[1]"),
                  "round %d: the record was read half-written: '%s'", round, got);
        CHECK(tdm_device_synchronize(cuda0) == TDM_OK);
        tdm_tensor_free(y);
    }
    tdm_stream_free(side);
    tdm_tensor_free(w);
    tdm_tensor_free(ib);
    CHECK_DONE("async_checks.record_published_last");
}
#endif

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "errors")) return run_errors();
#ifdef TDM_TEST_EMU
    if (argc == 2 && !strcmp(argv[1], "no_waits")) return run_no_waits();
    if (argc == 2 && !strcmp(argv[1], "record_published_last")) return run_record_published();
#endif
    fprintf(stderr, "usage: test_async_checks errors%s\n",
#ifdef TDM_TEST_EMU
            " | no_waits | record_published_last"
#else
            ""
#endif
    );
    return 2;
}
