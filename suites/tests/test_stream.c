/* test_stream.c — streams, events, pinned host memory and asynchronous copies (tandem/stream.h):
 * their cpu meanings and errors, the loader's pin_memory, the caching pinned-host allocator
 * (kernels/host_allocator.c) over a mock raw allocator and mock events, and on cuda:0 (skipping
 * with exit 77 without one) an async round trip from pinned memory and the allocator's reuse rule.
 * Usage: test_stream streams | events | pinned | copies | loader | host_allocator | gpu_copy |
 *        gpu_host_reuse | gpu_loader */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kernels/host_allocator.h"
#include "tandem/tandem.h"

static bool has_msg(const char *needle) {
    return strstr(tdm_last_error(), needle) != NULL;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// A (n) i64 cpu tensor 3*i + 1 + seed (never zero for seed >= 0).
static tdm_tensor *pattern(int64_t n, int64_t seed) {
    int64_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = 3 * i + 1 + seed;
    tdm_tensor *t = tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, v);
    free(v);
    return t;
}

static bool same_bytes(const tdm_tensor *a, const tdm_tensor *b) {
    size_t n = tdm_tensor_nbytes(a);
    if (n != tdm_tensor_nbytes(b)) return false;
    void *ha = malloc(n ? n : 1), *hb = malloc(n ? n : 1);
    bool ok = tdm_tensor_to_host(a, ha, n) == TDM_OK && tdm_tensor_to_host(b, hb, n) == TDM_OK &&
              memcmp(ha, hb, n) == 0;
    free(ha);
    free(hb);
    return ok;
}

// ---- streams: the per-thread current stream on the cpu ----

static void *other_thread(void *arg) {
    // another thread starts with the default stream
    *(tdm_stream **)arg = tdm_stream_current(TDM_CPU);
    return NULL;
}

static int run_streams(void) {
    CHECK(tdm_stream_current(TDM_CPU) == NULL);
    tdm_stream *s = tdm_stream_new(TDM_CPU);
    CHECK(s != NULL);
    CHECK(tdm_device_equal(tdm_stream_device(s), TDM_CPU));
    CHECK(tdm_stream_set_current(TDM_CPU, s) == TDM_OK);
    CHECK(tdm_stream_current(TDM_CPU) == s);
    pthread_t th;
    tdm_stream *seen = s;
    CHECK(pthread_create(&th, NULL, other_thread, &seen) == 0);
    pthread_join(th, NULL);
    CHECK(seen == NULL);
    CHECK(tdm_stream_synchronize(s) == TDM_OK);
    CHECK(tdm_device_synchronize(TDM_CPU) == TDM_OK);
    CHECK(tdm_stream_set_current(TDM_CPU, NULL) == TDM_OK);
    CHECK(tdm_stream_current(TDM_CPU) == NULL);
    // freeing the current stream makes the default stream current again
    CHECK(tdm_stream_set_current(TDM_CPU, s) == TDM_OK);
    tdm_stream_free(s);
    CHECK(tdm_stream_current(TDM_CPU) == NULL);
    tdm_stream_free(NULL);

    // errors: a NULL stream, a stream made current for another device
    CHECK(tdm_stream_synchronize(NULL) == TDM_ERR_ARG && has_msg("stream is NULL"));
    s = tdm_stream_new(TDM_CPU);
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    CHECK(tdm_stream_set_current(cuda0, s) != TDM_OK);
    CHECK_MSG(has_msg("stream_set_current: cuda:0"), "%s", tdm_last_error());
    tdm_stream_free(s);
    CHECK(tdm_stream_new((tdm_device){TDM_DEVICE_CUDA, 9999}) == NULL);
    CHECK_DONE("stream.streams");
}

// ---- events: the host clock on the cpu ----

static int run_events(void) {
    tdm_event *a = tdm_event_new(TDM_CPU), *b = tdm_event_new(TDM_CPU);
    CHECK(a && b);
    bool done = false;
    CHECK(tdm_event_query(a, &done) == TDM_OK && done);  // never recorded: done, as PyTorch
    CHECK(tdm_event_synchronize(a) == TDM_OK);
    double ms = -1;
    CHECK(tdm_event_elapsed_ms(a, b, &ms) == TDM_ERR_ARG && has_msg("recorded"));
    CHECK(tdm_event_record(a, NULL) == TDM_OK);
    CHECK(tdm_event_elapsed_ms(a, b, &ms) == TDM_ERR_ARG && has_msg("end is not"));
    sleep_ms(30);
    tdm_stream *s = tdm_stream_new(TDM_CPU);
    CHECK(tdm_event_record(b, s) == TDM_OK);
    CHECK(tdm_event_query(b, &done) == TDM_OK && done);
    CHECK(tdm_event_synchronize(b) == TDM_OK);
    CHECK(tdm_stream_wait_event(s, a) == TDM_OK);
    CHECK(tdm_event_elapsed_ms(a, b, &ms) == TDM_OK);
    CHECK_MSG(ms >= 25 && ms < 5000, "elapsed %.3f ms over a 30 ms sleep", ms);
    double back = 0;
    CHECK(tdm_event_elapsed_ms(b, a, &back) == TDM_OK && back == -ms);
    CHECK(tdm_event_elapsed_ms(a, NULL, &ms) == TDM_ERR_ARG);
    CHECK(tdm_event_record(NULL, s) == TDM_ERR_ARG);
    CHECK(tdm_stream_wait_event(s, NULL) == TDM_ERR_ARG);
    tdm_stream_free(s);
    tdm_event_free(a);
    tdm_event_free(b);
    tdm_event_free(NULL);
    CHECK_DONE("stream.events");
}

// ---- pinned memory (the reference stand-in without a CUDA device) ----

static int run_pinned(void) {
    tdm_tensor *t = pattern(1000, 7);
    CHECK(!tdm_tensor_is_pinned(t));
    tdm_host_memory_stats h0, h1;
    // pin_memory pins for cuda:0 when there is one (blocks rounded to powers of two), else the cpu
    tdm_device pin_dev = {TDM_DEVICE_CUDA, 0};
    if (!tdm_device_available(pin_dev)) pin_dev = TDM_CPU;
    tdm_error_clear();
    const int64_t pinned_bytes = pin_dev.type == TDM_DEVICE_CPU ? 8000 : 8192;
    CHECK(tdm_host_memory_stats_get(pin_dev, &h0) == TDM_OK);
    tdm_tensor *p = tdm_tensor_pin_memory(t);
    CHECK(p != NULL);
    CHECK(tdm_tensor_is_pinned(p) && tdm_tensor_host_kind(p) == TDM_HOST_PINNED);
    CHECK(tdm_device_equal(tdm_tensor_device(p), TDM_CPU));
    CHECK(tdm_tensor_data(p) != tdm_tensor_data(t));  // a copy
    CHECK(same_bytes(p, t));
    CHECK(tdm_host_memory_stats_get(pin_dev, &h1) == TDM_OK);
    CHECK(h1.n_allocs == h0.n_allocs + 1 && h1.allocated == h0.allocated + pinned_bytes);
    CHECK(h1.peak_allocated >= h1.allocated && h1.reserved >= h1.allocated);
    // a view of a pinned tensor is pinned; ops on it give ordinary tensors
    int64_t shape[2] = {10, 100};
    tdm_tensor *v = tdm_tensor_reshape(p, 2, shape);
    CHECK(v && tdm_tensor_is_pinned(v));
    tdm_tensor *c = tdm_tensor_clone(p);
    CHECK(c && !tdm_tensor_is_pinned(c) && same_bytes(c, t));
    tdm_tensor_free(v);
    tdm_tensor_free(c);
    tdm_tensor_free(p);
    CHECK(tdm_host_memory_stats_get(pin_dev, &h1) == TDM_OK);
    CHECK(h1.n_frees == h0.n_frees + 1 && h1.allocated == h0.allocated);

    // every kind, by name
    const char *names[] = {"pageable", "pinned", "pinned_wc", "registered", "mapped"};
    for (int k = 0; k < TDM_HOST_KIND_COUNT; k++) {
        CHECK(!strcmp(tdm_host_kind_name((tdm_host_kind)k), names[k]));
        tdm_tensor *h = tdm_tensor_empty_host(2, shape, TDM_DTYPE_F32, (tdm_host_kind)k, TDM_CPU);
        CHECK(h && tdm_tensor_host_kind(h) == (tdm_host_kind)k);
        CHECK(h && tdm_tensor_is_pinned(h) == (k != TDM_HOST_PAGEABLE));
        tdm_tensor_free(h);
    }
    CHECK(tdm_tensor_empty_host(2, shape, TDM_DTYPE_F32, TDM_HOST_KIND_COUNT, TDM_CPU) == NULL &&
          tdm_last_status() == TDM_ERR_ARG);
    CHECK(tdm_tensor_pin_memory(NULL) == NULL && tdm_last_status() == TDM_ERR_ARG);
    CHECK(tdm_host_memory_empty_cache(TDM_CPU) == TDM_OK);
    tdm_tensor_free(t);
    CHECK_DONE("stream.pinned");
}

// ---- asynchronous copies on the cpu: round trips and errors ----

static int run_copies(void) {
    tdm_tensor *src = pattern(4096, 3);
    int64_t n = 4096;
    tdm_tensor *pinned = tdm_tensor_empty_host(1, &n, TDM_DTYPE_I64, TDM_HOST_PINNED, TDM_CPU);
    tdm_tensor *back = tdm_tensor_zeros(1, &n, TDM_DTYPE_I64, TDM_CPU);
    tdm_stream *s = tdm_stream_new(TDM_CPU);
    tdm_event *done = tdm_event_new(TDM_CPU);
    CHECK(tdm_tensor_copy_async(pinned, src, s) == TDM_OK);
    CHECK(tdm_tensor_copy_async(back, pinned, NULL) == TDM_OK);
    CHECK(tdm_event_record(done, s) == TDM_OK && tdm_event_synchronize(done) == TDM_OK);
    CHECK(same_bytes(back, src));
    // the copy kernel's cpu meaning
    tdm_tensor *k = tdm_tensor_zeros(1, &n, TDM_DTYPE_I64, TDM_CPU);
    CHECK(tdm_tensor_copy_sm_async(k, pinned, s) == TDM_OK && tdm_stream_synchronize(s) == TDM_OK);
    CHECK(same_bytes(k, src));
    // to_non_blocking with a dtype change: f64 of the same values
    tdm_tensor *d = tdm_tensor_to_non_blocking(src, TDM_CPU, TDM_DTYPE_F64);
    CHECK(d && tdm_tensor_dtype(d) == TDM_DTYPE_F64);
    double *hv = malloc((size_t)n * sizeof *hv);
    CHECK(d && tdm_tensor_to_host_f64(d, hv) == TDM_OK);
    bool ok = true;
    for (int64_t i = 0; d && i < n; i++) ok = ok && hv[i] == (double)(3 * i + 4);
    CHECK(ok);
    free(hv);

    // errors: shapes, dtypes, NULLs, a stream on another device
    int64_t m = 4095, shape2[2] = {64, 64};
    tdm_tensor *shorter = tdm_tensor_zeros(1, &m, TDM_DTYPE_I64, TDM_CPU);
    tdm_tensor *square = tdm_tensor_zeros(2, shape2, TDM_DTYPE_I64, TDM_CPU);
    tdm_tensor *f32 = tdm_tensor_zeros(1, &n, TDM_DTYPE_F32, TDM_CPU);
    CHECK(tdm_tensor_copy_async(shorter, src, s) == TDM_ERR_SHAPE && has_msg("(4095)") &&
          has_msg("(4096)"));
    CHECK(tdm_tensor_copy_async(square, src, s) == TDM_ERR_SHAPE);  // same numel, other shape
    CHECK(tdm_tensor_copy_async(f32, src, s) == TDM_ERR_DTYPE && has_msg("f32") && has_msg("i64"));
    CHECK(tdm_tensor_copy_sm_async(f32, src, s) == TDM_ERR_DTYPE);
    CHECK(tdm_tensor_copy_async(NULL, src, s) == TDM_ERR_ARG && has_msg("dst is NULL"));
    CHECK(tdm_tensor_to_non_blocking(NULL, TDM_CPU, TDM_DTYPE_F32) == NULL);
    tdm_tensor_free(shorter);
    tdm_tensor_free(square);
    tdm_tensor_free(f32);
    tdm_tensor_free(d);
    tdm_tensor_free(k);
    tdm_event_free(done);
    tdm_stream_free(s);
    tdm_tensor_free(back);
    tdm_tensor_free(pinned);
    tdm_tensor_free(src);
    CHECK_DONE("stream.copies");
}

// ---- the loader's pin_memory: the same batches, pinned ----

static int run_loader(void) {
    int64_t N = 203, xs[2] = {203, 5};
    tdm_tensor *x = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, TDM_CPU, 11, 0);
    tdm_tensor *y = pattern(N, 0);
    for (int workers = 0; workers <= 2; workers += 2) {
        tdm_loader_params p = {
            .batch_size = 16, .shuffle = true, .seed = 5, .workers = workers, .device = TDM_CPU};
        tdm_loader *plain = tdm_loader_new(x, y, &p);
        p.pin_memory = true;
        tdm_loader *pinned = tdm_loader_new(x, y, &p);
        CHECK(plain && pinned);
        for (int epoch = 0; plain && pinned && epoch < 2; epoch++) {
            CHECK(tdm_loader_start_epoch(plain, epoch) == TDM_OK);
            CHECK(tdm_loader_start_epoch(pinned, epoch) == TDM_OK);
            int64_t batches = 0;
            tdm_tensor *ax, *ay, *bx, *by;
            while (tdm_loader_next(plain, &ax, &ay)) {
                CHECK(tdm_loader_next(pinned, &bx, &by));
                CHECK(!tdm_tensor_is_pinned(ax) && !tdm_tensor_is_pinned(ay));
                CHECK(tdm_tensor_is_pinned(bx) && tdm_tensor_is_pinned(by));
                CHECK(same_bytes(ax, bx) && same_bytes(ay, by));
                tdm_tensor_free(ax);
                tdm_tensor_free(ay);
                tdm_tensor_free(bx);
                tdm_tensor_free(by);
                batches++;
            }
            CHECK(tdm_last_status() == TDM_OK);
            CHECK(!tdm_loader_next(pinned, &bx, &by) && tdm_last_status() == TDM_OK);
            CHECK(batches == 13);
        }
        tdm_loader_free(plain);
        tdm_loader_free(pinned);
    }
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    CHECK_DONE("stream.loader_pin_memory");
}

// ---- the caching pinned-host allocator over mocks ----

// Raw blocks from malloc, counted; events complete when the mock clock reaches their ticket.
typedef struct {
    int64_t raw_allocs, raw_frees, live, events_made, events_freed;
    int64_t clock;        // work done up to this ticket
    int64_t next_ticket;  // the ticket of the next recorded event
    int64_t fail_record;  // 1: event_record fails
} mock;

typedef struct {
    int64_t ticket;
} mock_event;

static void *m_alloc(size_t bytes, tdm_host_kind kind, void *ctx) {
    (void)kind;
    mock *m = ctx;
    m->raw_allocs++;
    m->live++;
    return malloc(bytes);
}
static void m_free(void *p, size_t bytes, tdm_host_kind kind, void *ctx) {
    (void)bytes, (void)kind;
    mock *m = ctx;
    m->raw_frees++;
    m->live--;
    free(p);
}
static void *m_event_new(void *ctx) {
    ((mock *)ctx)->events_made++;
    return calloc(1, sizeof(mock_event));
}
static tdm_status m_event_record(void *ev, void *stream, void *ctx) {
    (void)stream;
    mock *m = ctx;
    if (m->fail_record) return TDM_ERR_BACKEND;
    ((mock_event *)ev)->ticket = ++m->next_ticket;
    return TDM_OK;
}
static int m_event_query(void *ev, void *ctx) {
    return ((mock *)ctx)->clock >= ((mock_event *)ev)->ticket ? 1 : 0;
}
static void m_event_free(void *ev, void *ctx) {
    ((mock *)ctx)->events_freed++;
    free(ev);
}

static tdm_host_allocator *mock_ha(mock *m, bool caching) {
    memset(m, 0, sizeof *m);
    tdm_host_raw_allocator raw = {m_alloc,      m_free, m_event_new, m_event_record, m_event_query,
                                  m_event_free, m};
    return tdm_ha_new(&raw, caching);
}

static int run_host_allocator(void) {
    mock m;
    tdm_host_allocator *ha = mock_ha(&m, true);
    tdm_host_memory_stats st;
    int stream = 0;  // an opaque stream token

    // rounding: 5000 bytes -> 8192, 1 byte -> 4096
    void *a = tdm_ha_alloc(ha, 5000, TDM_HOST_PINNED);
    tdm_ha_stats_get(ha, &st);
    CHECK(a && st.allocated == 8192 && st.reserved == 8192 && m.raw_allocs == 1);
    tdm_host_kind kind = TDM_HOST_PAGEABLE;
    CHECK(tdm_ha_owns(ha, (char *)a + 8191, &kind) && kind == TDM_HOST_PINNED);
    CHECK(!tdm_ha_owns(ha, (char *)a + 8192, NULL));

    // a copy uses a; a is freed at once: not reused while its event is pending
    bool owned = false;
    CHECK(tdm_ha_record_event(ha, (char *)a + 100, &stream, &owned) == TDM_OK && owned);
    CHECK(tdm_ha_free(ha, a) == TDM_OK);
    tdm_ha_stats_get(ha, &st);
    CHECK(st.n_blocks_pending == 1 && st.allocated == 0 && st.reserved == 8192);
    void *b = tdm_ha_alloc(ha, 8000, TDM_HOST_PINNED);
    CHECK(b && b != a && m.raw_allocs == 2);
    // ... and reused once it completed
    m.clock = m.next_ticket;
    void *c = tdm_ha_alloc(ha, 6000, TDM_HOST_PINNED);
    tdm_ha_stats_get(ha, &st);
    CHECK_MSG(c == a && m.raw_allocs == 2 && st.n_cache_hits == 1 && st.n_blocks_pending == 0,
              "c %p a %p raw %lld hits %lld", c, a, (long long)m.raw_allocs,
              (long long)st.n_cache_hits);
    // two events: both must complete
    CHECK(tdm_ha_record_event(ha, c, &stream, NULL) == TDM_OK);
    CHECK(tdm_ha_record_event(ha, c, &stream, NULL) == TDM_OK);
    CHECK(tdm_ha_free(ha, c) == TDM_OK);
    m.clock = m.next_ticket - 1;
    CHECK(tdm_ha_process_events(ha) == 1);
    m.clock = m.next_ticket;
    CHECK(tdm_ha_process_events(ha) == 0);
    CHECK(m.events_made == 2);  // completed events are reused

    // kinds and sizes do not mix
    void *wc = tdm_ha_alloc(ha, 8192, TDM_HOST_PINNED_WC);
    CHECK(wc && wc != a && m.raw_allocs == 3);
    void *big = tdm_ha_alloc(ha, 8193, TDM_HOST_PINNED);
    tdm_ha_stats_get(ha, &st);
    CHECK(big && big != a && st.allocated == 8192 + 8192 + 16384 && m.raw_allocs == 4);
    CHECK(tdm_ha_free(ha, wc) == TDM_OK && tdm_ha_free(ha, big) == TDM_OK);

    // pageable memory is not ours: nothing recorded; a foreign free is an error
    int local = 0;
    CHECK(tdm_ha_record_event(ha, &local, &stream, &owned) == TDM_OK && !owned);
    CHECK(tdm_ha_free(ha, &local) == TDM_ERR_ARG && has_msg("did not hand out"));
    CHECK(tdm_ha_free(ha, NULL) == TDM_OK);
    CHECK(tdm_ha_alloc(ha, 10, TDM_HOST_PAGEABLE) == NULL && tdm_last_status() == TDM_ERR_ARG);
    CHECK(tdm_ha_alloc(ha, SIZE_MAX, TDM_HOST_PINNED) == NULL && tdm_last_status() == TDM_ERR_OOM);

    // a failed record leaves the block usable and reports the error
    m.fail_record = 1;
    CHECK(tdm_ha_record_event(ha, b, &stream, NULL) == TDM_ERR_BACKEND);
    m.fail_record = 0;

    // empty_cache gives back the free, completed blocks; a pending one stays
    CHECK(tdm_ha_record_event(ha, b, &stream, NULL) == TDM_OK);
    CHECK(tdm_ha_free(ha, b) == TDM_OK);
    tdm_ha_empty_cache(ha);
    tdm_ha_stats_get(ha, &st);
    CHECK_MSG(st.reserved == 8192 && st.n_blocks_pending == 1 && m.live == 1,
              "reserved %lld pending %lld live %lld", (long long)st.reserved,
              (long long)st.n_blocks_pending, (long long)m.live);
    m.clock = m.next_ticket;
    tdm_ha_empty_cache(ha);
    tdm_ha_stats_get(ha, &st);
    CHECK(st.reserved == 0 && m.live == 0 && st.n_raw_frees == m.raw_frees);
    CHECK(st.peak_allocated == 8192 + 8192 + 16384);  // b, wc and big at once
    tdm_ha_destroy(ha);
    CHECK(m.events_made == m.events_freed);

    // caching off: a freed block goes back once its event completed
    ha = mock_ha(&m, false);
    a = tdm_ha_alloc(ha, 4096, TDM_HOST_MAPPED);
    CHECK(tdm_ha_record_event(ha, a, &stream, NULL) == TDM_OK);
    CHECK(tdm_ha_free(ha, a) == TDM_OK);
    CHECK(m.live == 1);
    m.clock = m.next_ticket;
    CHECK(tdm_ha_process_events(ha) == 0 && m.live == 0);
    // live blocks are released by destroy
    a = tdm_ha_alloc(ha, 4096, TDM_HOST_REGISTERED);
    tdm_ha_destroy(ha);
    CHECK(m.live == 0 && m.events_made == m.events_freed);
    CHECK_DONE("stream.host_allocator");
}

// ---- on cuda:0 ----

static bool gpu_or_skip(const char *name) {
    tdm_device d = {TDM_DEVICE_CUDA, 0};
    if (tdm_device_available(d)) return true;
    printf("SKIP %s: %s\n", name, tdm_last_error());
    return false;
}

// pinned -> cuda:0 -> pinned on a side stream, checked after one synchronize.
static int run_gpu_copy(void) {
    if (!gpu_or_skip("stream.gpu.copy")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    int64_t n = (int64_t)1 << 22;  // 32 MiB of i64
    tdm_tensor *src = pattern(n, 5);
    tdm_tensor *pin = tdm_tensor_pin_memory(src);
    CHECK(pin && tdm_tensor_is_pinned(pin));
    tdm_tensor *dev = tdm_tensor_zeros(1, &n, TDM_DTYPE_I64, cuda0);
    tdm_tensor *back = tdm_tensor_empty_host(1, &n, TDM_DTYPE_I64, TDM_HOST_PINNED, cuda0);
    memset(tdm_tensor_data(back), 0, (size_t)n * 8);
    tdm_stream *s = tdm_stream_new(cuda0);
    tdm_event *e0 = tdm_event_new(cuda0), *e1 = tdm_event_new(cuda0);
    CHECK(s && e0 && e1 && dev && back);
    // the zero fill ran on the default stream, which a non-blocking stream does not wait for
    CHECK(tdm_device_synchronize(cuda0) == TDM_OK);
    CHECK(tdm_event_record(e0, s) == TDM_OK);
    CHECK(tdm_tensor_copy_async(dev, pin, s) == TDM_OK);
    CHECK(tdm_tensor_copy_async(back, dev, s) == TDM_OK);
    CHECK(tdm_event_record(e1, s) == TDM_OK);
    CHECK(tdm_stream_synchronize(s) == TDM_OK);
    bool done = false;
    CHECK(tdm_event_query(e1, &done) == TDM_OK && done);
    double ms = -1;
    CHECK(tdm_event_elapsed_ms(e0, e1, &ms) == TDM_OK && ms > 0);
    CHECK(same_bytes(back, src));
    // the copy kernel, device to device, and to_non_blocking on the current stream
    tdm_tensor *dev2 = tdm_tensor_zeros(1, &n, TDM_DTYPE_I64, cuda0);
    CHECK(tdm_device_synchronize(cuda0) == TDM_OK);
    CHECK(tdm_stream_set_current(cuda0, s) == TDM_OK);
    CHECK(tdm_tensor_copy_sm_async(dev2, dev, NULL) == TDM_OK);
    tdm_tensor *nb = tdm_tensor_to_non_blocking(pin, cuda0, TDM_DTYPE_I64);
    CHECK(tdm_stream_synchronize(s) == TDM_OK);
    CHECK(tdm_stream_set_current(cuda0, NULL) == TDM_OK);
    CHECK(same_bytes(dev2, src) && nb && same_bytes(nb, src));
    // errors: pinning a cuda tensor; events of different devices; a pinned side not mapped
    CHECK(tdm_tensor_pin_memory(dev) == NULL && has_msg("only cpu tensors"));
    tdm_event *c = tdm_event_new(TDM_CPU);
    CHECK(tdm_event_record(c, NULL) == TDM_OK);
    CHECK(tdm_event_elapsed_ms(e0, c, &ms) == TDM_ERR_DEVICE && has_msg("different devices"));
    CHECK(tdm_event_record(c, s) == TDM_ERR_DEVICE);
    CHECK(tdm_tensor_copy_sm_async(dev2, pin, s) == TDM_ERR_ARG && has_msg("mapped"));
    tdm_event_free(c);
    tdm_tensor_free(nb);
    tdm_tensor_free(dev2);
    tdm_event_free(e0);
    tdm_event_free(e1);
    tdm_stream_free(s);
    tdm_tensor_free(back);
    tdm_tensor_free(dev);
    tdm_tensor_free(pin);
    tdm_tensor_free(src);
    CHECK_DONE("stream.gpu.copy");
}

// A pinned block freed while its copy is queued is not handed out again until the copy is done.
static int run_gpu_host_reuse(void) {
    if (!gpu_or_skip("stream.gpu.host_reuse")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    int64_t n = (int64_t)1 << 25;  // 256 MiB of i64: copies take milliseconds
    tdm_stream *s = tdm_stream_new(cuda0);
    tdm_tensor *busy_a = tdm_tensor_zeros(1, &n, TDM_DTYPE_I64, cuda0);
    tdm_tensor *busy_b = tdm_tensor_zeros(1, &n, TDM_DTYPE_I64, cuda0);
    int64_t m = 1 << 20;
    tdm_tensor *dst = tdm_tensor_zeros(1, &m, TDM_DTYPE_I64, cuda0);
    tdm_tensor *p = tdm_tensor_empty_host(1, &m, TDM_DTYPE_I64, TDM_HOST_PINNED, cuda0);
    CHECK(s && busy_a && busy_b && dst && p);
    CHECK(tdm_device_synchronize(cuda0) == TDM_OK);
    tdm_host_memory_stats h0, h1;
    CHECK(tdm_host_memory_stats_get(cuda0, &h0) == TDM_OK);
    // keep the stream busy (32 large device copies: milliseconds), then queue the copy from p
    // and free p
    for (int i = 0; i < 32; i++) CHECK(tdm_tensor_copy_async(busy_b, busy_a, s) == TDM_OK);
    CHECK(tdm_tensor_copy_async(dst, p, s) == TDM_OK);
    void *old = tdm_tensor_data(p);
    tdm_tensor_free(p);
    CHECK(tdm_host_memory_stats_get(cuda0, &h1) == TDM_OK);
    CHECK_MSG(h1.n_blocks_pending == h0.n_blocks_pending + 1, "pending %lld -> %lld",
              (long long)h0.n_blocks_pending, (long long)h1.n_blocks_pending);
    tdm_tensor *q = tdm_tensor_empty_host(1, &m, TDM_DTYPE_I64, TDM_HOST_PINNED, cuda0);
    CHECK(q && tdm_tensor_data(q) != old);
    CHECK(tdm_stream_synchronize(s) == TDM_OK);
    tdm_tensor *r = tdm_tensor_empty_host(1, &m, TDM_DTYPE_I64, TDM_HOST_PINNED, cuda0);
    CHECK(r && tdm_tensor_data(r) == old);  // the copy is done: the block is reused
    CHECK(tdm_host_memory_stats_get(cuda0, &h1) == TDM_OK);
    CHECK(h1.n_cache_hits >= h0.n_cache_hits + 1 && h1.n_blocks_pending == h0.n_blocks_pending);
    tdm_tensor_free(r);
    tdm_tensor_free(q);
    tdm_tensor_free(dst);
    tdm_tensor_free(busy_a);
    tdm_tensor_free(busy_b);
    tdm_stream_free(s);
    CHECK_DONE("stream.gpu.host_reuse");
}

// The loader delivering pinned batches to cuda:0 without blocking: the same bytes as on the cpu.
static int run_gpu_loader(void) {
    if (!gpu_or_skip("stream.gpu.loader")) return 77;
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    int64_t xs[2] = {300, 33};
    tdm_tensor *x = tdm_tensor_randn(2, xs, TDM_DTYPE_F32, TDM_CPU, 12, 0);
    tdm_tensor *y = pattern(300, 1);
    tdm_loader_params p = {.batch_size = 32, .shuffle = true, .seed = 3, .workers = 2,
                           .device = TDM_CPU};
    tdm_loader *ref = tdm_loader_new(x, y, &p);
    p.device = cuda0;
    p.pin_memory = true;
    tdm_loader *gpu = tdm_loader_new(x, y, &p);
    CHECK(ref && gpu);
    tdm_tensor *ax, *ay, *bx, *by;
    int64_t batches = 0;
    while (ref && gpu && tdm_loader_next(ref, &ax, &ay)) {
        CHECK(tdm_loader_next(gpu, &bx, &by));
        CHECK(tdm_tensor_device(bx).type == TDM_DEVICE_CUDA);
        CHECK(same_bytes(ax, bx) && same_bytes(ay, by));   // reads on the same (current) stream
        tdm_tensor_free(ax);
        tdm_tensor_free(ay);
        tdm_tensor_free(bx);
        tdm_tensor_free(by);
        batches++;
    }
    CHECK(batches == 10);
    tdm_loader_free(ref);
    tdm_loader_free(gpu);
    tdm_tensor_free(x);
    tdm_tensor_free(y);
    CHECK_DONE("stream.gpu.loader");
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "streams")) return run_streams();
    if (!strcmp(what, "events")) return run_events();
    if (!strcmp(what, "pinned")) return run_pinned();
    if (!strcmp(what, "copies")) return run_copies();
    if (!strcmp(what, "loader")) return run_loader();
    if (!strcmp(what, "host_allocator")) return run_host_allocator();
    if (!strcmp(what, "gpu_copy")) return run_gpu_copy();
    if (!strcmp(what, "gpu_host_reuse")) return run_gpu_host_reuse();
    if (!strcmp(what, "gpu_loader")) return run_gpu_loader();
    fprintf(stderr,
            "usage: test_stream streams|events|pinned|copies|loader|host_allocator|"
            "gpu_copy|gpu_host_reuse|gpu_loader\n");
    return 2;
}
