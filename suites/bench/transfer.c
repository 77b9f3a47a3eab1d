/* transfer.c — suite `transfer`: host<->device bandwidth through tandem's copy API
 * (tandem/stream.h), per direction, host-memory kind, synchronous or asynchronous, over sizes.
 *
 * Benchmarks `<dir>_<mem>[_async]/bytes:N` (docs/suites/transfer.md):
 *   h2d, d2h       host<->device; mem = pageable (malloc), pinned (cudaHostAlloc), pinned_wc
 *                  (write-combined), registered (cudaHostRegister), mapped (zero-copy: a copy
 *                  kernel reads or writes the host buffer over the bus)
 *   d2d            device->device by a copy engine (cudaMemcpyAsync)
 *   d2d_kernel     device->device by the SMs (kernels/copy_kernel.cu)
 *   bidir_<mem>_async  h2d and d2h at once on two streams, `bytes` each way (pageable: the d2h
 *                  issued by a second host thread, as a pageable copy blocks its caller)
 * Timing: every figure is Google Benchmark manual time, one copy per iteration. Asynchronous
 * copies, the copy kernels and bidir are timed by events recorded around the copy on its stream
 * (GPU time); synchronous copies by the host clock around the call, which returns once the data
 * has arrived (what the caller waits). Bytes are counted as docs/RESULTS_FORMAT.md says, one
 * convention per metric: a copy across the link (h2d, d2h, mapped, bidir) reports `link_GB/s` =
 * the bytes that cross the link / t / 1e9 (bidir: 2 * bytes, both directions); a copy within one
 * memory (d2d, d2d_kernel; every copy on the cpu, a host memcpy) reports `GB/s` = bytes read +
 * bytes written / t / 1e9 = 2 * bytes / t / 1e9, as nvbandwidth and PyTorch report a copy. The
 * `time` metric at small sizes is the latency of one copy. On cuda, `link_share` = link_GB/s over
 * the PCIe link's theoretical rate per direction (generation and width from the device's
 * properties).
 * Data: the source holds a non-zero pattern (splitmix64 of the index), the destination starts
 * zeroed, and after the loop every 8-byte word of the destination is checked, in ordinary host
 * memory (a write-combined destination is first copied through the device).
 *
 * On the cpu ("device" = cpu tensors, copies through the same API: the baseline of a host
 * memcpy): h2d_pageable, h2d_pinned, d2h_pageable, d2h_pinned, d2d, synchronous. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tensor_impl.h"   // tdm_error_set
#include "harness/gbench_shim.h"
#include "harness/suites.h"
#include "tandem/tandem.h"

static bench_suite_config tr_cfg;  // the device and sizes of this registration
static double tr_link_gbps;        // the link's rate per direction, GB/s (0 unknown)
static char tr_where[160];         // "PCIe gen5 x16 = 63.0 GB/s per direction; GPU NUMA node 0"

#define TR_TRY(expr)                       \
    do {                                   \
        tdm_status tr_s_ = (expr);         \
        if (tr_s_ != TDM_OK) return tr_s_; \
    } while (0)

typedef enum { TR_H2D, TR_D2H, TR_D2D, TR_D2D_KERNEL, TR_BIDIR } tr_dir;

typedef struct {
    const char *name;
    tr_dir dir;
    tdm_host_kind mem;  // the host side (h2d, d2h, bidir)
    bool async;         // on a stream, timed by events
} tr_case;

// ---- the pattern: word i = splitmix64(i + seed) | 1, never zero ----------------------------

static uint64_t tr_word(uint64_t i, uint64_t seed) {
    uint64_t z = i + seed * 0x9E3779B97F4A7C15ull + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 31)) | 1u;
}

static bool tr_is_host(const tdm_tensor *t) {
    return tdm_tensor_device(t).type == TDM_DEVICE_CPU;
}

static void tr_fill(uint64_t *p, int64_t n, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) p[i] = tr_word((uint64_t)i, seed);
}

static void tr_fail(tdm_gb_state *st, const char *what) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what, tdm_last_error());
    tdm_gb_skip_with_error(st, msg);
}

// Every word of t (any device) against the pattern; fails the benchmark at the first mismatch.
// The CPU reads only ordinary (cached) memory: device memory is copied to a malloc'd buffer, and
// so is write-combined host memory, through a device buffer the copy engine fills from it (it is
// uncached for the CPU: reading 1 GiB of it word by word took tens of seconds on a GPU machine).
static void tr_verify(tdm_gb_state *st, const tdm_tensor *t, uint64_t seed, const char *what) {
    int64_t n = tdm_tensor_numel(t);
    const uint64_t *h = NULL;
    uint64_t *copy = NULL;
    if (tr_is_host(t) && tdm_tensor_host_kind(t) != TDM_HOST_PINNED_WC) {
        h = tdm_tensor_data_const(t);
    } else {
        tdm_tensor *staged = NULL;   // write-combined t, copied to the device by DMA
        if (tr_is_host(t)) {
            staged = tdm_tensor_empty(1, &n, TDM_DTYPE_I64, tr_cfg.device);
            if (!staged || tdm_tensor_copy_(staged, t) != TDM_OK) {
                tr_fail(st, "verify: staging write-combined memory on the device");
                tdm_tensor_free(staged);
                return;
            }
        }
        copy = malloc((size_t)n * 8);
        tdm_status s = copy ? tdm_tensor_to_host(staged ? staged : t, copy, (size_t)n * 8)
                            : TDM_ERR_OOM;
        tdm_tensor_free(staged);
        if (s != TDM_OK) {
            if (!copy)
                tdm_gb_skip_with_error(st, "verify: out of host memory");
            else
                tr_fail(st, "verify: reading back");
            free(copy);
            return;
        }
        h = copy;
    }
    for (int64_t i = 0; i < n; i++) {
        uint64_t want = tr_word((uint64_t)i, seed);
        if (h[i] != want) {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "%s: word %" PRId64 " of %" PRId64 " is 0x%016" PRIx64
                     ", expected 0x%016" PRIx64 " (the copied pattern)",
                     what, i, n, h[i], want);
            tdm_gb_skip_with_error(st, msg);
            break;
        }
    }
    free(copy);
}

static double tr_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---- one benchmark -------------------------------------------------------------------------

typedef struct tr_side tr_side;

typedef struct {
    tdm_tensor *host, *host2;  // host sides (bidir: host -> dev_a, dev_b -> host2)
    tdm_tensor *dev_a, *dev_b;
    tdm_stream *s1, *s2;
    tdm_event *e0, *e1, *e2;
    tr_side *side;             // bidir with pageable memory: the thread that issues the d2h
} tr_bufs;

// ---- bidir with pageable memory: the d2h from a second host thread --------------------------
// A copy from or to pageable memory blocks the thread that issues it, cudaMemcpyAsync or not (an
// h2d until the driver has staged the source, a d2h until it is done), so one thread issuing both
// runs them one after the other. A helper thread issues the d2h (and records e2 on s2) while the
// benchmark's thread issues the h2d: both directions in flight at once, as with pinned memory.

struct tr_side {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go, quit;      // a d2h to issue; end the thread
    tr_bufs *b;
    tdm_status status;  // of the last d2h, and its message
    char msg[400];
};

static void *tr_side_main(void *arg) {
    tr_side *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->go && !t->quit) pthread_cond_wait(&t->cv, &t->mu);
        if (t->quit) break;
        pthread_mutex_unlock(&t->mu);
        tdm_status s = tdm_tensor_copy_async(t->b->host2, t->b->dev_b, t->b->s2);
        if (s == TDM_OK) s = tdm_event_record(t->b->e2, t->b->s2);
        pthread_mutex_lock(&t->mu);
        t->status = s;
        snprintf(t->msg, sizeof t->msg, "%s", s == TDM_OK ? "" : tdm_last_error());
        t->go = false;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static tdm_status tr_side_new(tr_bufs *b) {
    tr_side *t = calloc(1, sizeof *t);
    if (!t) return tdm_error_set(TDM_ERR_OOM, "transfer: out of host memory");
    t->b = b;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, tr_side_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return tdm_error_set(TDM_ERR_BACKEND, "transfer: cannot start the d2h thread of bidir");
    }
    b->side = t;
    return TDM_OK;
}

static void tr_side_free(tr_side *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->quit = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static void tr_side_start(tr_side *t) {
    pthread_mutex_lock(&t->mu);
    t->go = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

// Waits until the helper has issued its d2h; its error becomes this thread's.
static tdm_status tr_side_wait(tr_side *t) {
    pthread_mutex_lock(&t->mu);
    while (t->go) pthread_cond_wait(&t->cv, &t->mu);
    const tdm_status s = t->status;
    char msg[sizeof t->msg];
    memcpy(msg, t->msg, sizeof msg);
    pthread_mutex_unlock(&t->mu);
    return s == TDM_OK ? s : tdm_error_set(s, "bidir's d2h thread: %s", msg);
}

static void tr_bufs_free(tr_bufs *b) {
    tr_side_free(b->side);
    tdm_tensor_free(b->host);
    tdm_tensor_free(b->host2);
    tdm_tensor_free(b->dev_a);
    tdm_tensor_free(b->dev_b);
    tdm_event_free(b->e0);
    tdm_event_free(b->e1);
    tdm_event_free(b->e2);
    tdm_stream_free(b->s1);
    tdm_stream_free(b->s2);
}

// Zero-fills t (any device).
static tdm_status tr_zero(tdm_tensor *t) {
    if (tr_is_host(t)) {
        memset(tdm_tensor_data(t), 0, tdm_tensor_nbytes(t));
        return TDM_OK;
    }
    tdm_tensor *z = tdm_tensor_zeros(tdm_tensor_ndim(t), tdm_tensor_shape(t), tdm_tensor_dtype(t),
                                     tdm_tensor_device(t));
    tdm_status s = z ? tdm_tensor_copy_(t, z) : tdm_last_status();
    tdm_tensor_free(z);
    return s;
}

// Fills t (any device) with the pattern of seed.
static tdm_status tr_pattern(tdm_tensor *t, uint64_t seed) {
    int64_t n = tdm_tensor_numel(t);
    if (tr_is_host(t)) {
        tr_fill(tdm_tensor_data(t), n, seed);
        return TDM_OK;
    }
    uint64_t *h = malloc((size_t)n * 8);
    if (!h) return TDM_ERR_OOM;
    tr_fill(h, n, seed);
    tdm_tensor *src = tdm_tensor_from_host(1, &n, TDM_DTYPE_I64, TDM_CPU, h);
    free(h);
    tdm_status s = src ? tdm_tensor_copy_(t, src) : tdm_last_status();
    tdm_tensor_free(src);
    return s;
}

static tdm_status tr_setup_buffers(const tr_case *c, int64_t n, tr_bufs *b);

// Sets up the buffers of case c for n words: sources patterned, destinations zeroed, and done:
// the fills run on the current stream, the copies on side streams that do not wait for it.
static tdm_status tr_setup(const tr_case *c, int64_t n, tr_bufs *b) {
    TR_TRY(tr_setup_buffers(c, n, b));
    return tdm_device_synchronize(tr_cfg.device);
}

static tdm_status tr_setup_buffers(const tr_case *c, int64_t n, tr_bufs *b) {
    tdm_device dev = tr_cfg.device;
    bool gpu = dev.type == TDM_DEVICE_CUDA;
    b->dev_a = tdm_tensor_empty(1, &n, TDM_DTYPE_I64, dev);
    if (!b->dev_a) return tdm_last_status();
    if (c->dir != TR_H2D && c->dir != TR_D2H &&
        !(b->dev_b = tdm_tensor_empty(1, &n, TDM_DTYPE_I64, dev)))
        return tdm_last_status();
    if (c->dir == TR_H2D || c->dir == TR_D2H || c->dir == TR_BIDIR) {
        if (!(b->host = tdm_tensor_empty_host(1, &n, TDM_DTYPE_I64, c->mem, dev)))
            return tdm_last_status();
    }
    if (c->dir == TR_BIDIR &&
        !(b->host2 = tdm_tensor_empty_host(1, &n, TDM_DTYPE_I64, c->mem, dev)))
        return tdm_last_status();
    if (c->async || c->mem == TDM_HOST_MAPPED || c->dir == TR_D2D_KERNEL ||
        (gpu && c->dir == TR_D2D) || c->dir == TR_BIDIR) {
        if (!(b->s1 = tdm_stream_new(dev)) || !(b->e0 = tdm_event_new(dev)) ||
            !(b->e1 = tdm_event_new(dev)))
            return tdm_last_status();
        if (c->dir == TR_BIDIR && (!(b->s2 = tdm_stream_new(dev)) || !(b->e2 = tdm_event_new(dev))))
            return tdm_last_status();
        if (c->dir == TR_BIDIR && c->mem == TDM_HOST_PAGEABLE) TR_TRY(tr_side_new(b));
    }
    switch (c->dir) {  // sources: seed 1 (and 2 for bidir's d2h side); destinations: zero
        case TR_H2D:
            TR_TRY(tr_pattern(b->host, 1));
            return tr_zero(b->dev_a);
        case TR_D2H:
            TR_TRY(tr_pattern(b->dev_a, 1));
            return tr_zero(b->host);
        case TR_D2D:
        case TR_D2D_KERNEL:
            TR_TRY(tr_pattern(b->dev_a, 1));
            return tr_zero(b->dev_b);
        case TR_BIDIR:
            TR_TRY(tr_pattern(b->host, 1));
            TR_TRY(tr_pattern(b->dev_b, 2));
            TR_TRY(tr_zero(b->dev_a));
            return tr_zero(b->host2);
    }
    return TDM_OK;
}

// The copy of one iteration, enqueued (async) or done (sync).
static tdm_status tr_copy(const tr_case *c, tr_bufs *b) {
    tdm_tensor *dst = NULL;
    const tdm_tensor *src = NULL;
    switch (c->dir) {
        case TR_H2D:
            dst = b->dev_a, src = b->host;
            break;
        case TR_D2H:
            dst = b->host, src = b->dev_a;
            break;
        case TR_D2D:
        case TR_D2D_KERNEL:
            dst = b->dev_b, src = b->dev_a;
            break;
        case TR_BIDIR:  // both ways at once: s2 starts with s1, s1 ends after s2
            TR_TRY(tdm_stream_wait_event(b->s2, b->e0));
            if (b->side) {   // pageable: the d2h from the helper thread, meanwhile the h2d here
                tr_side_start(b->side);
                const tdm_status h2d = tdm_tensor_copy_async(b->dev_a, b->host, b->s1);
                char msg[400];
                snprintf(msg, sizeof msg, "%s", tdm_last_error());
                const tdm_status d2h = tr_side_wait(b->side);
                if (h2d != TDM_OK) return tdm_error_set(h2d, "%s", msg);
                TR_TRY(d2h);
            } else {
                TR_TRY(tdm_tensor_copy_async(b->dev_a, b->host, b->s1));
                TR_TRY(tdm_tensor_copy_async(b->host2, b->dev_b, b->s2));
                TR_TRY(tdm_event_record(b->e2, b->s2));
            }
            return tdm_stream_wait_event(b->s1, b->e2);
    }
    if (c->dir == TR_D2D_KERNEL || c->mem == TDM_HOST_MAPPED)
        return tdm_tensor_copy_sm_async(dst, src, b->s1);
    if (b->s1) return tdm_tensor_copy_async(dst, src, b->s1);
    return tdm_tensor_copy_(dst, src);
}

// Whether a case's copy crosses a link (host <-> GPU) or stays within one memory (d2d; on the cpu
// every copy is a host memcpy): which byte count and metric it reports.
static bool tr_over_link(const tr_case *c, bool gpu) {
    return gpu && (c->dir == TR_H2D || c->dir == TR_D2H || c->dir == TR_BIDIR);
}

static void bm_transfer(tdm_gb_state *st, void *ctx) {
    const tr_case *c = ctx;
    int64_t bytes = tdm_gb_arg(st, 0), n = bytes / 8;
    tr_bufs b = {0};
    bool ok = tr_setup(c, n, &b) == TDM_OK;
    if (!ok) tr_fail(st, "setup");
    double total_s = 0;
    int64_t iters = 0;
    while (tdm_gb_keep_running(st)) {
        if (!ok) continue;
        double seconds = 0;
        if (b.e0) {  // GPU time between two events around the copy on its stream
            double ms = 0;
            ok = tdm_event_record(b.e0, b.s1) == TDM_OK && tr_copy(c, &b) == TDM_OK &&
                 tdm_event_record(b.e1, b.s1) == TDM_OK && tdm_event_synchronize(b.e1) == TDM_OK &&
                 tdm_event_elapsed_ms(b.e0, b.e1, &ms) == TDM_OK;
            seconds = ms * 1e-3;
        } else {  // the host waits for a synchronous copy
            double t0 = tr_now();
            ok = tr_copy(c, &b) == TDM_OK;
            seconds = tr_now() - t0;
        }
        if (!ok) {
            tr_fail(st, c->name);
            continue;
        }
        if (seconds <= 0) seconds = 1e-9;  // below the clock's resolution
        tdm_gb_set_iteration_time(st, seconds);
        total_s += seconds;
        iters++;
    }
    if (ok && !tdm_gb_error_occurred(st)) {
        switch (c->dir) {
            case TR_H2D:
                tr_verify(st, b.dev_a, 1, "h2d: device buffer");
                break;
            case TR_D2H:
                tr_verify(st, b.host, 1, "d2h: host buffer");
                break;
            case TR_D2D:
            case TR_D2D_KERNEL:
                tr_verify(st, b.dev_b, 1, "d2d: destination");
                break;
            case TR_BIDIR:
                tr_verify(st, b.dev_a, 1, "bidir: device buffer (h2d)");
                if (!tdm_gb_error_occurred(st))
                    tr_verify(st, b.host2, 2, "bidir: host buffer (d2h)");
                break;
        }
    }
    // across the link: the bytes that cross it (both directions' for bidir); within one memory
    // (d2d, or any copy on the cpu): the bytes read + the bytes written
    bool over_link = tr_over_link(c, tr_cfg.device.type == TDM_DEVICE_CUDA);
    double moved = c->dir == TR_BIDIR || !over_link ? 2.0 * (double)bytes : (double)bytes;
    tdm_gb_counter(st, over_link ? "link_GB/s" : "GB/s", moved / 1e9, TDM_GB_PER_ITERATION_RATE);
    tdm_gb_counter(st, "bytes/iteration", moved, TDM_GB_PLAIN);
    if (over_link && tr_link_gbps > 0 && iters > 0 && total_s > 0) {
        double gbps = moved / (total_s / (double)iters) / 1e9;
        double link = c->dir == TR_BIDIR ? 2 * tr_link_gbps : tr_link_gbps;
        tdm_gb_counter(st, "link_share", gbps / link, TDM_GB_PLAIN);
    }
    char label[320];
    bool host_side = c->dir == TR_H2D || c->dir == TR_D2H || c->dir == TR_BIDIR;
    snprintf(label, sizeof label, "%s, %s; bytes = %s%s%s",
             host_side ? tdm_host_kind_name(c->mem) : "device memory",
             b.e0 ? "event-timed" : "host-timed", c->dir == TR_BIDIR ? "2*N" : "N",
             tr_where[0] ? "; " : "", tr_where);
    tdm_gb_set_label(st, label);
    tr_bufs_free(&b);
    // page-locked and device memory are not hoarded from one size to the next
    (void)tdm_host_memory_empty_cache(tr_cfg.device);
    if (tr_cfg.device.type == TDM_DEVICE_CUDA) (void)tdm_memory_empty_cache(tr_cfg.device);
    tdm_error_clear();
}

// ---- the link and the NUMA node ----------------------------------------------------------------

// GB/s per direction of PCIe generation gen (1-6) and `width` lanes: GT/s x encoding / 8 bits.
static double tr_pcie_gbps(int gen, int width) {
    static const double gts[] = {2.5, 5, 8, 16, 32, 64};
    static const double enc[] = {0.8, 0.8, 128.0 / 130, 128.0 / 130, 128.0 / 130, 242.0 / 256};
    if (gen < 1 || gen > 6 || width < 1) return 0;
    return gts[gen - 1] * enc[gen - 1] / 8 * width;
}

// The NUMA node of the GPU at bus_id from sysfs, -1 when unknown.
static int tr_numa_node(const char *bus_id) {
    char path[160], lower[32];
    size_t i = 0;
    for (; bus_id[i] && i < sizeof lower - 1; i++)
        lower[i] = (char)(bus_id[i] >= 'A' && bus_id[i] <= 'F' ? bus_id[i] - 'A' + 'a' : bus_id[i]);
    lower[i] = '\0';
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", lower);
    FILE *f = fopen(path, "r");
    int node = -1;
    if (f) {
        if (fscanf(f, "%d", &node) != 1) node = -1;
        fclose(f);
    }
    return node;
}

static void tr_describe_link(tdm_device dev) {
    tr_link_gbps = 0;
    tr_where[0] = '\0';
    tdm_device_props p;
    if (dev.type != TDM_DEVICE_CUDA || tdm_device_props_get(dev, &p) != TDM_OK) {
        tdm_error_clear();
        return;
    }
    // the most the link can do: the current one trains down when idle
    int gen = p.pcie_gen_max > 0 ? p.pcie_gen_max : p.pcie_gen;
    int width = p.pcie_width_max > 0 ? p.pcie_width_max : p.pcie_width;
    tr_link_gbps = tr_pcie_gbps(gen, width);
    int node = tr_numa_node(p.pci_bus_id);
    char numa[48];
    if (node >= 0)
        snprintf(numa, sizeof numa, "GPU NUMA node %d", node);
    else
        snprintf(numa, sizeof numa, "GPU NUMA node unknown");
    if (tr_link_gbps > 0)
        snprintf(tr_where, sizeof tr_where, "PCIe gen%d x%d = %.1f GB/s per direction; %s", gen,
                 width, tr_link_gbps, numa);
    else
        snprintf(tr_where, sizeof tr_where, "PCIe link unknown; %s", numa);
    tdm_gb_add_context("transfer.link", tr_where);
}

// ---- registration -------------------------------------------------------------------------------

#define TR_CASE(name, dir, mem, async) \
    { name, dir, mem, async }
static const tr_case tr_cuda_cases[] = {
    TR_CASE("h2d_pageable", TR_H2D, TDM_HOST_PAGEABLE, false),
    TR_CASE("h2d_pinned", TR_H2D, TDM_HOST_PINNED, false),
    TR_CASE("h2d_pinned_wc", TR_H2D, TDM_HOST_PINNED_WC, false),
    TR_CASE("h2d_registered", TR_H2D, TDM_HOST_REGISTERED, false),
    TR_CASE("h2d_mapped", TR_H2D, TDM_HOST_MAPPED, false),
    TR_CASE("h2d_pageable_async", TR_H2D, TDM_HOST_PAGEABLE, true),
    TR_CASE("h2d_pinned_async", TR_H2D, TDM_HOST_PINNED, true),
    TR_CASE("h2d_pinned_wc_async", TR_H2D, TDM_HOST_PINNED_WC, true),
    TR_CASE("h2d_registered_async", TR_H2D, TDM_HOST_REGISTERED, true),
    TR_CASE("d2h_pageable", TR_D2H, TDM_HOST_PAGEABLE, false),
    TR_CASE("d2h_pinned", TR_D2H, TDM_HOST_PINNED, false),
    TR_CASE("d2h_pinned_wc", TR_D2H, TDM_HOST_PINNED_WC, false),
    TR_CASE("d2h_registered", TR_D2H, TDM_HOST_REGISTERED, false),
    TR_CASE("d2h_mapped", TR_D2H, TDM_HOST_MAPPED, false),
    TR_CASE("d2h_pageable_async", TR_D2H, TDM_HOST_PAGEABLE, true),
    TR_CASE("d2h_pinned_async", TR_D2H, TDM_HOST_PINNED, true),
    TR_CASE("d2h_pinned_wc_async", TR_D2H, TDM_HOST_PINNED_WC, true),
    TR_CASE("d2h_registered_async", TR_D2H, TDM_HOST_REGISTERED, true),
    TR_CASE("d2d", TR_D2D, TDM_HOST_PAGEABLE, true),
    TR_CASE("d2d_kernel", TR_D2D_KERNEL, TDM_HOST_PAGEABLE, true),
    TR_CASE("bidir_pageable_async", TR_BIDIR, TDM_HOST_PAGEABLE, true),
    TR_CASE("bidir_pinned_async", TR_BIDIR, TDM_HOST_PINNED, true),
};
static const tr_case tr_cpu_cases[] = {
    TR_CASE("h2d_pageable", TR_H2D, TDM_HOST_PAGEABLE, false),
    TR_CASE("h2d_pinned", TR_H2D, TDM_HOST_PINNED, false),
    TR_CASE("d2h_pageable", TR_D2H, TDM_HOST_PAGEABLE, false),
    TR_CASE("d2h_pinned", TR_D2H, TDM_HOST_PINNED, false),
    TR_CASE("d2d", TR_D2D, TDM_HOST_PAGEABLE, false),
};

static void tr_describe(const tr_case *c, bool gpu, char *buf, size_t n) {
    const char *what = c->dir == TR_H2D          ? "host -> device"
                       : c->dir == TR_D2H        ? "device -> host"
                       : c->dir == TR_D2D        ? "device -> device by a copy engine"
                       : c->dir == TR_D2D_KERNEL ? "device -> device by a copy kernel (SMs)"
                                                 : "host -> device and device -> host at once, "
                                                   "two streams";
    if (!gpu)
        what = c->dir == TR_D2D   ? "cpu tensor -> cpu tensor"
               : c->dir == TR_H2D ? "host buffer -> cpu tensor"
                                  : "cpu tensor -> host buffer";
    const char *how = c->mem == TDM_HOST_MAPPED
                          ? "a kernel reading/writing mapped host memory, event-timed"
                      : c->async || c->dir >= TR_D2D
                          ? (gpu ? "async on a stream, event-timed" : "through the API, host-timed")
                          : "synchronous copy, host-timed";
    bool link = tr_over_link(c, gpu);
    snprintf(buf, n, "%s%s%s, %s; %s = %s / t / 1e9; checks every word of the destination", what,
             c->dir <= TR_D2H || c->dir == TR_BIDIR ? ", host memory " : "",
             c->dir <= TR_D2H || c->dir == TR_BIDIR ? tdm_host_kind_name(c->mem) : "", how,
             link ? "link_GB/s" : "GB/s",
             c->dir == TR_BIDIR ? "2*bytes (both directions over the link)"
             : link             ? "bytes (crossing the link once)"
                                : "2*bytes (read + written)");
}

// The work of one timed iteration (bench list --json; the PyTorch peer's rows match: test
// peer.work_match): one copy of `size` bytes (bidir: one each way), its direction, the host
// memory of a host side, sync or async for h2d/d2h, and the bytes its metric counts.
static void tr_work(const int64_t *args, int n, void *ctx, char *buf, int len) {
    const tr_case *c = ctx;
    const bool gpu = tr_cfg.device.type == TDM_DEVICE_CUDA, link = tr_over_link(c, gpu);
    static const char *const dirs[] = {"h2d", "d2h", "d2d", "d2d_kernel", "bidir"};
    const long long size = n ? (long long)args[0] : 0;
    char host[96] = "";
    if (c->dir == TR_H2D || c->dir == TR_D2H)
        snprintf(host, sizeof host, ", \"host_memory\": \"%s\", \"async\": %s",
                 tdm_host_kind_name(c->mem), c->async ? "true" : "false");
    else if (c->dir == TR_BIDIR)
        snprintf(host, sizeof host, ", \"host_memory\": \"%s\"", tdm_host_kind_name(c->mem));
    snprintf(buf, (size_t)len,
             "{\"op\": \"copy\", \"direction\": \"%s\"%s, \"size\": %lld, \"per_iteration\": 1, "
             "\"%s\": %lld}",
             dirs[c->dir], host, size, link ? "link_bytes" : "bytes",
             c->dir == TR_BIDIR || !link ? 2 * size : size);
}

static int tr_register(const bench_suite_config *cfg) {
    tr_cfg = *cfg;
    bool gpu = cfg->device.type == TDM_DEVICE_CUDA;
    tr_describe_link(cfg->device);
    // powers of two 1 KiB .. 1 GiB and the seeds' 1e6 .. 1e9, ascending; quick: up to 4 MiB
    int64_t sizes[40];
    int ns = 0;
    int64_t decimal[] = {1000000, 10000000, 100000000, 1000000000};
    int d = 0;
    int64_t top = cfg->quick ? (int64_t)4 << 20 : (int64_t)1 << 30;
    for (int64_t p = 1024; p <= top; p *= 2) {
        while (d < 4 && decimal[d] < p && decimal[d] <= top) sizes[ns++] = decimal[d++];
        sizes[ns++] = p;
    }
    while (d < 4 && decimal[d] <= top) sizes[ns++] = decimal[d++];

    const tr_case *cases = gpu ? tr_cuda_cases : tr_cpu_cases;
    int nc = gpu ? (int)(sizeof tr_cuda_cases / sizeof *tr_cuda_cases)
                 : (int)(sizeof tr_cpu_cases / sizeof *tr_cpu_cases);
    for (int i = 0; i < nc; i++) {
        tdm_gb_bench *b = tdm_gb_register(cases[i].name, bm_transfer, (void *)&cases[i]);
        if (!b) return -1;
        tdm_gb_arg_names(b, 1, (const char *const[]){"bytes"});
        for (int k = 0; k < ns; k++) tdm_gb_args(b, 1, &sizes[k]);
        tdm_gb_use_manual_time(b);
        char desc[400];
        tr_describe(&cases[i], gpu, desc, sizeof desc);
        tdm_gb_set_info(b, desc, tr_over_link(&cases[i], gpu) ? "link_GB/s" : "GB/s");
        tdm_gb_set_work(b, tr_work, (void *)&cases[i]);
    }
    return 0;
}

// (on cuda the copies cross the link: link_GB/s; on the cpu they are host memcpys: GB/s)
static const bench_ratio tr_ratios[] = {
    {"pinned / pageable (h2d)", "h2d_pinned", "h2d_pageable", "link_GB/s"},
    {"pinned / pageable (d2h)", "d2h_pinned", "d2h_pageable", "link_GB/s"},
    {"pinned / pageable (h2d, host memcpy)", "h2d_pinned", "h2d_pageable", "GB/s"},
    {"pinned / pageable (d2h, host memcpy)", "d2h_pinned", "d2h_pageable", "GB/s"},
    {0},
};

const bench_suite bench_suite_transfer = {
    .name = "transfer",
    .description =
        "host<->device copy bandwidth and latency by direction, host memory (pageable, "
        "pinned, write-combined, registered, mapped), sync/async, 1 KiB..1 GiB; on "
        "the cpu only the host-memcpy baseline (h2d/d2h pageable and pinned, d2d)",
    .doc = "docs/suites/transfer.md",
    .devices = BENCH_SUITE_CPU | BENCH_SUITE_CUDA,
    .ratios = tr_ratios,
    .register_benchmarks = tr_register,
};
