/* test_graph.c — CUDA graph capture and replay (tandem/graph.h): on the cpu every call refuses
 * with "graph capture needs a CUDA device"; on cuda:0 (exit 77 with one line without one) a
 * captured elementwise computation replayed after refilling its static input gives the eager
 * result bit for bit, a host copy during the capture fails and makes the capture fail, and the
 * graph's private pool takes memory of its own and gives it all back once the graph is freed.
 * Usage: test_graph cpu_refuses | gpu_replay | gpu_memory | gpu_pinned */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"

#define N 4096

static bool has_msg(const char *needle) {
    return strstr(tdm_last_error(), needle) != NULL;
}

static int run_cpu_refuses(void) {
    CHECK(tdm_graph_capture_begin(TDM_CPU) == TDM_ERR_UNSUPPORTED);
    CHECK_MSG(has_msg("graph capture needs a CUDA device"), "%s", tdm_last_error());
    tdm_graph *g = (tdm_graph *)&g;   // must be overwritten with NULL
    CHECK(tdm_graph_capture_end(TDM_CPU, &g) == TDM_ERR_UNSUPPORTED && g == NULL);
    CHECK(!tdm_graph_is_capturing(TDM_CPU));
    CHECK(tdm_graph_replay(NULL) == TDM_ERR_ARG);
    tdm_graph_free(NULL);
    CHECK_DONE("graph.cpu_refuses");
}

static bool gpu_or_skip(const char *name) {
    tdm_device d = {TDM_DEVICE_CUDA, 0};
    if (tdm_device_available(d)) return true;
    printf("SKIP %s: %s\n", name, tdm_last_error());
    return false;
}

// (N) f32 on dev: v[i] = (i % 97) * scale - 3.
static tdm_tensor *ramp(tdm_device dev, float scale) {
    float *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = (float)(i % 97) * scale - 3.0f;
    int64_t n = N;
    tdm_tensor *t = tdm_tensor_from_host(1, &n, TDM_DTYPE_F32, dev, v);
    free(v);
    return t;
}

// y = relu(x * x - 2 x): three kernels, two temporaries.
static tdm_tensor *compute(const tdm_tensor *x) {
    tdm_tensor *sq = tdm_mul(x, x);
    tdm_tensor *d = sq ? tdm_add(sq, x, -2.0) : NULL;
    tdm_tensor *y = d ? tdm_relu(d) : NULL;
    tdm_tensor_free(sq);
    tdm_tensor_free(d);
    return y;
}

static bool same_values(const tdm_tensor *a, const tdm_tensor *b) {
    float *ha = malloc(N * sizeof *ha), *hb = malloc(N * sizeof *hb);
    bool ok = a && b && tdm_tensor_to_host(a, ha, N * sizeof *ha) == TDM_OK &&
              tdm_tensor_to_host(b, hb, N * sizeof *hb) == TDM_OK &&
              memcmp(ha, hb, N * sizeof *ha) == 0;
    free(ha);
    free(hb);
    return ok;
}

static int run_gpu_replay(void) {
    if (!gpu_or_skip("graph.gpu_replay")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    tdm_tensor *x = ramp(cuda0, 0.25f);   // the static input
    CHECK(x != NULL);
    tdm_tensor_free(compute(x));   // eager warm-up first, as PyTorch asks (lazy queries done)
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    CHECK(tdm_graph_is_capturing(cuda0));
    tdm_tensor *y = compute(x);   // recorded, not run
    CHECK_MSG(y != NULL, "%s", tdm_last_error());
    CHECK(tdm_graph_capture_end(cuda0, &g) == TDM_OK && g != NULL);
    CHECK(!tdm_graph_is_capturing(cuda0));
    // first replay on the captured input, then on a new one copied into the static tensor
    CHECK(tdm_graph_replay(g) == TDM_OK);
    tdm_tensor *want = compute(x);
    CHECK_MSG(same_values(y, want), "replay 1 differs from the eager result");
    tdm_tensor *x2 = ramp(cuda0, -0.5f);
    CHECK(x2 && tdm_tensor_copy_(x, x2) == TDM_OK);
    tdm_tensor *want2 = compute(x);
    CHECK(!same_values(want, want2));   // the new input changes the result
    CHECK(tdm_graph_replay(g) == TDM_OK);
    CHECK_MSG(same_values(y, want2), "replay 2 differs from the eager result");
    tdm_graph_free(g);

    // a host copy cannot be captured: the op fails, and so does the end of the capture
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    tdm_tensor *bad = ramp(cuda0, 1.0f);
    CHECK(bad == NULL);
    CHECK_MSG(has_msg("cannot be captured in a CUDA graph"), "%s", tdm_last_error());
    g = (tdm_graph *)&g;
    CHECK(tdm_graph_capture_end(cuda0, &g) != TDM_OK && g == NULL);
    CHECK_MSG(has_msg("an op failed during the capture"), "%s", tdm_last_error());
    CHECK(!tdm_graph_is_capturing(cuda0));
    // nesting is refused; the default stream is current again afterwards
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_ERR_ARG);
    CHECK(tdm_graph_capture_end(cuda0, &g) == TDM_OK);
    tdm_graph_free(g);
    CHECK(tdm_stream_current(cuda0) == NULL);
    tdm_tensor_free(bad);
    tdm_tensor_free(x);
    tdm_tensor_free(x2);
    tdm_tensor_free(y);
    tdm_tensor_free(want);
    tdm_tensor_free(want2);
    CHECK_DONE("graph.gpu_replay");
}

static int64_t reserved(tdm_device dev) {
    tdm_memory_stats s;
    return tdm_memory_stats_get(dev, &s) == TDM_OK ? s.reserved : -1;
}

static int run_gpu_memory(void) {
    if (!gpu_or_skip("graph.gpu_memory")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    tdm_tensor *x = ramp(cuda0, 0.25f);
    CHECK(x != NULL);
    CHECK(tdm_memory_empty_cache(cuda0) == TDM_OK);
    const int64_t r0 = reserved(cuda0);
    // cached free blocks of the sizes the capture asks for, in the default stream's pool (x's
    // own segment has free room too)
    int64_t n = N;
    tdm_tensor_free(tdm_tensor_empty(1, &n, TDM_DTYPE_F32, cuda0));
    tdm_tensor_free(compute(x));   // eager warm-up; its blocks stay cached in the default pool
    const int64_t r1 = reserved(cuda0);
    CHECK(r1 >= r0);   // likely equal: x's 2 MiB segment has room for these blocks
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    tdm_tensor *y = compute(x);
    CHECK(tdm_graph_capture_end(cuda0, &g) == TDM_OK);
    // the private pool did not take the cached block: a segment of its own
    CHECK_MSG(reserved(cuda0) > r1, "reserved %lld, before the capture %lld",
              (long long)reserved(cuda0), (long long)r1);
    // empty_cache keeps the graph's pool (its replays write there)
    CHECK(tdm_memory_empty_cache(cuda0) == TDM_OK);
    CHECK(reserved(cuda0) > r0);
    CHECK(tdm_graph_replay(g) == TDM_OK);
    tdm_tensor *want = compute(x);
    CHECK(same_values(y, want));
    tdm_tensor_free(want);
    tdm_tensor_free(y);
    tdm_graph_free(g);
    CHECK(tdm_memory_empty_cache(cuda0) == TDM_OK);
    CHECK_MSG(reserved(cuda0) == r0, "reserved %lld after the graph, %lld before",
              (long long)reserved(cuda0), (long long)r0);
    tdm_tensor_free(x);
    CHECK_DONE("graph.gpu_memory");
}

// A host-to-device copy from pinned memory is captured (it does not synchronize) and replayed;
// its pinned block, freed after the capture, is not left waiting for an event recorded during the
// capture (such an event can never be queried: cudaErrorCapturedEvent): the next pinned
// allocation of its size reuses it.
static int run_gpu_pinned(void) {
    if (!gpu_or_skip("graph.gpu_pinned")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    int64_t n = N;
    tdm_tensor *h = tdm_tensor_empty_host(1, &n, TDM_DTYPE_F32, TDM_HOST_PINNED, cuda0);
    tdm_tensor *x = tdm_tensor_empty(1, &n, TDM_DTYPE_F32, cuda0);
    tdm_tensor *want = ramp(cuda0, 0.5f);
    CHECK(h && x && want);
    CHECK(tdm_tensor_to_host(want, tdm_tensor_data(h), N * sizeof(float)) == TDM_OK);
    tdm_graph *g = NULL;
    CHECK(tdm_graph_capture_begin(cuda0) == TDM_OK);
    CHECK_MSG(tdm_tensor_copy_async(x, h, NULL) == TDM_OK, "%s", tdm_last_error());
    CHECK_MSG(tdm_graph_capture_end(cuda0, &g) == TDM_OK, "%s", tdm_last_error());
    CHECK(tdm_graph_replay(g) == TDM_OK);
    CHECK(tdm_device_synchronize(cuda0) == TDM_OK);
    CHECK_MSG(same_values(x, want), "the replayed copy differs");
    tdm_graph_free(g);
    tdm_host_memory_stats a, b;
    tdm_tensor_free(h);
    CHECK(tdm_host_memory_stats_get(cuda0, &a) == TDM_OK);
    CHECK_MSG(a.n_blocks_pending == 0, "%lld freed pinned blocks still waiting",
              (long long)a.n_blocks_pending);
    h = tdm_tensor_empty_host(1, &n, TDM_DTYPE_F32, TDM_HOST_PINNED, cuda0);
    CHECK(h != NULL && tdm_host_memory_stats_get(cuda0, &b) == TDM_OK);
    CHECK_MSG(b.n_cache_hits == a.n_cache_hits + 1 && b.n_raw_allocs == a.n_raw_allocs,
              "the pinned block was not reused");
    tdm_tensor_free(h);
    tdm_tensor_free(x);
    tdm_tensor_free(want);
    CHECK_DONE("graph.gpu_pinned");
}

int main(int argc, char **argv) {
    const char *t = argc > 1 ? argv[1] : "";
    if (!strcmp(t, "cpu_refuses")) return run_cpu_refuses();
    if (!strcmp(t, "gpu_replay")) return run_gpu_replay();
    if (!strcmp(t, "gpu_memory")) return run_gpu_memory();
    if (!strcmp(t, "gpu_pinned")) return run_gpu_pinned();
    fprintf(stderr, "usage: test_graph cpu_refuses | gpu_replay | gpu_memory | gpu_pinned\n");
    return 2;
}
