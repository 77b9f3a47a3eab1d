/* test_caching_allocator.c — the CUDA backend's caching allocator (kernels/caching_allocator.c)
 * on the CPU, over a malloc-backed mock raw allocator that counts its calls and has a capacity
 * (to force out-of-memory). One test per argv[1]: reuse, rounding, small_share, split_merge,
 * streams, oom_retry, oom, caching_off, stats, empty_cache, random, summary, bad_free, threads,
 * public_api (the tdm_memory_* controls on the cpu), and gpu (cuda:0 through tensors). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/caching_allocator.h"
#include "tandem/tandem.h"

#define KIB ((size_t)1024)
#define MIB ((size_t)1 << 20)

// ---- the mock raw allocator -------------------------------------------------------------

// Each raw block carries its size in a 64-byte header, so raw_free can check the size it is given.
typedef struct {
    size_t capacity, in_use, peak_in_use;
    int64_t n_alloc, n_free, n_fail;
    int64_t n_bad_free;  // raw_free given another size than raw_alloc was
} mock_raw;

#define MOCK_HEADER 64

static void *mock_alloc(size_t bytes, void *ctx) {
    mock_raw *m = ctx;
    if (bytes > m->capacity - m->in_use) {
        m->n_fail++;
        return NULL;
    }
    char *p = malloc(bytes + MOCK_HEADER);
    if (!p) return NULL;
    memcpy(p, &bytes, sizeof bytes);
    m->in_use += bytes;
    if (m->in_use > m->peak_in_use) m->peak_in_use = m->in_use;
    m->n_alloc++;
    return p + MOCK_HEADER;
}

static void mock_free(void *p, size_t bytes, void *ctx) {
    mock_raw *m = ctx;
    char *base = (char *)p - MOCK_HEADER;
    size_t had;
    memcpy(&had, base, sizeof had);
    if (had != bytes) m->n_bad_free++;
    m->in_use -= had;
    m->n_free++;
    free(base);
}

static int64_t mock_free_bytes(void *ctx) {
    const mock_raw *m = ctx;
    return (int64_t)(m->capacity - m->in_use);
}

// A caching allocator over a fresh mock of `capacity` bytes (0: unlimited).
static tdm_caching_allocator *mock_ca(mock_raw *m, size_t capacity, bool caching) {
    memset(m, 0, sizeof *m);
    m->capacity = capacity ? capacity : SIZE_MAX / 2;
    tdm_raw_allocator raw = {mock_alloc, mock_free, m, mock_free_bytes, "mock:0"};
    tdm_caching_allocator *ca = tdm_ca_new(&raw, caching, capacity ? (int64_t)capacity : 0);
    CHECK(ca != NULL);
    return ca;
}

// Destroys the allocator: every raw segment must be back, each with the size it was given.
static void mock_done(tdm_caching_allocator *ca, mock_raw *m) {
    tdm_ca_destroy(ca);
    CHECK_MSG(m->in_use == 0, "%zu bytes still held by the mock", m->in_use);
    CHECK(m->n_alloc == m->n_free);
    CHECK(m->n_bad_free == 0);
}

static tdm_ca_stats stats_of(tdm_caching_allocator *ca) {
    tdm_ca_stats s;
    tdm_ca_stats_get(ca, &s);
    return s;
}

// ---- the tests --------------------------------------------------------------------------

// A freed block comes back for the same size without a raw call.
static void test_reuse(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    void *a = tdm_ca_alloc(ca, 1000, NULL);
    CHECK(a != NULL && m.n_alloc == 1);
    CHECK(tdm_ca_free(ca, a) == TDM_OK);
    CHECK(m.n_free == 0);  // cached, not released
    void *b = tdm_ca_alloc(ca, 1000, NULL);
    CHECK(b == a);
    CHECK(m.n_alloc == 1);
    CHECK(stats_of(ca).n_cache_hits == 1);
    void *big = tdm_ca_alloc(ca, 30 * MIB, NULL);
    tdm_ca_free(ca, big);
    CHECK(tdm_ca_alloc(ca, 30 * MIB, NULL) == big);
    CHECK(m.n_alloc == 2 && stats_of(ca).n_cache_hits == 2);
    mock_done(ca, &m);
}

// Sizes are rounded up to 512 bytes, at least 512.
static void test_rounding(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    const size_t asked[] = {0, 1, 511, 512, 513, 1000, 1024, 4097, MIB - 1, MIB};
    const size_t want[] = {512, 512, 512, 512, 1024, 1024, 1024, 4608, MIB, MIB};
    void *p[10];
    int64_t total = 0;
    for (int i = 0; i < 10; i++) {
        p[i] = tdm_ca_alloc(ca, asked[i], NULL);
        CHECK(p[i] != NULL);
        CHECK_MSG(tdm_ca_block_size(ca, p[i]) == want[i], "asked %zu: block %zu, want %zu",
                  asked[i], tdm_ca_block_size(ca, p[i]), want[i]);
        CHECK((uintptr_t)p[i] % 512 == (uintptr_t)p[0] % 512);  // offsets are multiples of 512
        total += (int64_t)want[i];
    }
    CHECK(stats_of(ca).mem.allocated == total);
    for (int i = 0; i < 10; i++) tdm_ca_free(ca, p[i]);
    CHECK(stats_of(ca).mem.allocated == 0);
    mock_done(ca, &m);
}

// Small requests are carved from one 2 MiB segment, one after the other.
static void test_small_share(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    char *p[4];
    for (int i = 0; i < 4; i++) p[i] = tdm_ca_alloc(ca, 100 * KIB, NULL);
    CHECK(m.n_alloc == 1);
    CHECK(stats_of(ca).mem.reserved == (int64_t)(2 * MIB));
    for (int i = 1; i < 4; i++) CHECK(p[i] == p[i - 1] + 100 * KIB);
    // 2 MiB - 400 KiB left: a 1 MiB request still fits, a second one does not
    void *q = tdm_ca_alloc(ca, MIB, NULL);
    CHECK(q == p[3] + 100 * KIB && m.n_alloc == 1);
    void *r = tdm_ca_alloc(ca, MIB, NULL);
    CHECK(r != NULL && m.n_alloc == 2);
    CHECK(stats_of(ca).mem.reserved == (int64_t)(4 * MIB));
    mock_done(ca, &m);
}

// Three neighbours; freeing the middle and an edge merges them into one block that a request of
// their combined size gets back, without a raw call. Both pools.
static void test_split_merge(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    const size_t sizes[2] = {64 * KIB, 2 * MIB};  // small pool (2 MiB segment), large (20 MiB)
    for (int pool = 0; pool < 2; pool++) {
        size_t s = sizes[pool];
        int64_t raw_before = m.n_alloc;
        char *a = tdm_ca_alloc(ca, s, NULL), *b = tdm_ca_alloc(ca, s, NULL);
        char *c = tdm_ca_alloc(ca, s, NULL);
        CHECK(m.n_alloc == raw_before + 1);
        CHECK(b == a + s && c == b + s);
        tdm_ca_free(ca, b);
        tdm_ca_free(ca, a);
        // best fit: the merged 2s block, not the segment's larger tail after c
        char *ab = tdm_ca_alloc(ca, 2 * s, NULL);
        CHECK_MSG(ab == a, "pool %d: merged block not reused (%p, want %p)", pool, (void *)ab,
                  (void *)a);
        CHECK(m.n_alloc == raw_before + 1);
        CHECK(tdm_ca_block_size(ca, ab) == 2 * s);
        tdm_ca_free(ca, c);   // merges with the tail
        tdm_ca_free(ca, ab);  // ... and now the whole segment is one free block
        int64_t frees = m.n_free;
        tdm_ca_empty_cache(ca);
        CHECK_MSG(m.n_free == frees + 1, "pool %d: segment did not coalesce", pool);
    }
    CHECK(stats_of(ca).mem.reserved == 0);
    mock_done(ca, &m);
}

// A block freed on one stream is not handed out on another.
static void test_streams(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    int s1, s2;
    void *a = tdm_ca_alloc(ca, 4096, &s1);
    tdm_ca_free(ca, a);
    void *b = tdm_ca_alloc(ca, 4096, &s2);
    CHECK(b != a && m.n_alloc == 2);
    void *c = tdm_ca_alloc(ca, 4096, &s1);
    CHECK(c == a && m.n_alloc == 2);
    void *d = tdm_ca_alloc(ca, 4096, &s2);  // s2's own segment
    CHECK(d != NULL && m.n_alloc == 2 && (char *)d == (char *)b + 4096);
    void *big1 = tdm_ca_alloc(ca, 12 * MIB, &s1);
    tdm_ca_free(ca, big1);
    void *big2 = tdm_ca_alloc(ca, 12 * MIB, &s2);
    CHECK(big2 != big1 && m.n_alloc == 4);
    mock_done(ca, &m);
}

// The capacity is taken by cached, free segments: the allocator releases them and retries.
static void test_oom_retry(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 24 * MIB, true);
    int s2, s3;
    void *a = tdm_ca_alloc(ca, 2 * MIB, NULL);  // a 20 MiB segment
    void *b = tdm_ca_alloc(ca, 1000, &s2);      // a 2 MiB segment, stream s2
    tdm_ca_free(ca, a);
    tdm_ca_free(ca, b);
    CHECK(stats_of(ca).mem.reserved == (int64_t)(22 * MIB));
    void *c = tdm_ca_alloc(ca, 12 * MIB, &s3);  // no cached block of s3; 12 MiB, 2 left
    CHECK_MSG(c != NULL, "retry failed: %s", tdm_last_error());
    tdm_ca_stats s = stats_of(ca);
    CHECK(m.n_fail == 1 && s.n_oom_retries == 1);
    CHECK(s.mem.reserved == (int64_t)(12 * MIB) && s.mem.allocated == (int64_t)(12 * MIB));
    CHECK(s.n_segment_frees == 2);
    mock_done(ca, &m);
}

// True out-of-memory: NULL and a message with the requested, allocated, reserved and free sizes.
static void test_oom(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 24 * MIB, true);
    void *a = tdm_ca_alloc(ca, 12 * MIB, NULL);
    void *b = tdm_ca_alloc(ca, 100 * KIB, NULL);  // 2 MiB segment, partly free: kept
    CHECK(a && b);
    tdm_error_clear();
    void *c = tdm_ca_alloc(ca, 3 * MIB, NULL);  // a 20 MiB segment: 10 MiB left
    CHECK(c == NULL);
    CHECK(tdm_last_status() == TDM_ERR_OOM);
    const char *msg = tdm_last_error();
    const char *want[] = {"out of memory on mock:0", "tried to allocate 3.00 MiB",
                          "12.10 MiB allocated", "14.00 MiB reserved (cached)",
                          "10.00 MiB free of 24.00 MiB"};
    for (int i = 0; i < 5; i++) CHECK_MSG(strstr(msg, want[i]), "no '%s' in: %s", want[i], msg);
    tdm_ca_stats s = stats_of(ca);
    CHECK(s.n_oom_retries == 0 && s.mem.n_allocs == 2);  // nothing was free to release
    CHECK(s.mem.allocated == (int64_t)(12 * MIB + 100 * KIB));
    // A size beyond any segment fails cleanly too.
    CHECK(tdm_ca_alloc(ca, SIZE_MAX - 100, NULL) == NULL && tdm_last_status() == TDM_ERR_OOM);
    mock_done(ca, &m);
}

// Caching off: one raw call per alloc and per free; switched on, blocks are cached again.
static void test_caching_off(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, false);
    void *p[10];
    for (int i = 0; i < 10; i++) p[i] = tdm_ca_alloc(ca, 1000, NULL);
    CHECK(m.n_alloc == 10);
    CHECK(stats_of(ca).mem.reserved == 10 * 1024 && stats_of(ca).mem.allocated == 10 * 1024);
    for (int i = 0; i < 10; i++) tdm_ca_free(ca, p[i]);
    CHECK(m.n_free == 10 && stats_of(ca).mem.reserved == 0);
    void *q = tdm_ca_alloc(ca, 30 * MIB, NULL);
    CHECK(m.n_alloc == 11 && stats_of(ca).mem.reserved == (int64_t)(30 * MIB));
    tdm_ca_free(ca, q);
    CHECK(m.n_free == 11 && stats_of(ca).n_cache_hits == 0);

    tdm_ca_set_caching(ca, true);
    void *a = tdm_ca_alloc(ca, 1000, NULL);
    tdm_ca_free(ca, a);
    CHECK(tdm_ca_alloc(ca, 1000, NULL) == a && m.n_alloc == 12);
    void *b = tdm_ca_alloc(ca, 1000, NULL);  // from the same cached segment
    tdm_ca_free(ca, b);
    tdm_ca_set_caching(ca, false);  // a's segment is not free: kept ...
    CHECK(m.n_free == 11);
    tdm_ca_free(ca, a);  // ... and released once it is
    CHECK(m.n_free == 12 && stats_of(ca).mem.reserved == 0);
    mock_done(ca, &m);
}

// allocated, reserved, peaks and counts, exactly, after a known sequence.
static void test_stats(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    void *a = tdm_ca_alloc(ca, 1000, NULL);          // 1024 of a 2 MiB segment
    void *b = tdm_ca_alloc(ca, 3000, NULL);          // 3072, same segment
    void *d = tdm_ca_alloc(ca, 11 * MIB + 1, NULL);  // 11 MiB + 512 of a 12 MiB segment: the
    CHECK(tdm_ca_block_size(ca, d) == 12 * MIB);     //   1 MiB - 512 left is not split off
    void *c = tdm_ca_alloc(ca, 5 * MIB, NULL);       // 5 MiB of a 20 MiB segment
    int64_t alloc1 = 1024 + 3072 + (int64_t)(17 * MIB), res1 = (int64_t)(34 * MIB);
    tdm_ca_stats s = stats_of(ca);
    CHECK(s.mem.allocated == alloc1 && s.mem.reserved == res1);
    CHECK(s.mem.peak_allocated == alloc1 && s.mem.peak_reserved == res1);
    tdm_ca_free(ca, c);
    s = stats_of(ca);
    CHECK(s.mem.allocated == alloc1 - (int64_t)(5 * MIB) && s.mem.reserved == res1);
    CHECK(s.mem.peak_allocated == alloc1);
    tdm_ca_reset_peak(ca);
    s = stats_of(ca);
    CHECK(s.mem.peak_allocated == alloc1 - (int64_t)(5 * MIB) && s.mem.peak_reserved == res1);
    void *e = tdm_ca_alloc(ca, 4 * MIB, NULL);  // from c's merged 20 MiB block
    s = stats_of(ca);
    CHECK(s.mem.allocated == alloc1 - (int64_t)MIB && s.mem.peak_allocated == s.mem.allocated);
    // cache hits (no raw call): b from a's segment, e from c's
    CHECK(s.mem.n_allocs == 5 && s.mem.n_frees == 1 && s.n_cache_hits == 2);
    CHECK(s.n_segment_allocs == 3 && s.n_segment_frees == 0 && s.n_segments == 3);
    tdm_ca_free(ca, a);
    tdm_ca_free(ca, b);
    tdm_ca_free(ca, d);
    tdm_ca_free(ca, e);
    tdm_ca_empty_cache(ca);
    s = stats_of(ca);
    CHECK(s.mem.allocated == 0 && s.mem.reserved == 0 && s.mem.peak_reserved == res1);
    CHECK(s.mem.n_frees == 5 && s.n_segment_frees == 3 && s.n_segments == 0);
    tdm_memory_stats ms;
    tdm_ca_memory_stats(ca, &ms);
    CHECK(ms.n_allocs == 5 && ms.peak_allocated == s.mem.peak_allocated);
    mock_done(ca, &m);
}

// empty_cache releases the fully free segments only; live blocks stay usable.
static void test_empty_cache(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    char *x = tdm_ca_alloc(ca, 1000, NULL);      // 2 MiB segment, partly used
    char *z = tdm_ca_alloc(ca, 12 * MIB, NULL);  // 12 MiB segment, live
    void *y = tdm_ca_alloc(ca, 5 * MIB, NULL);   // 20 MiB segment, freed below
    tdm_ca_free(ca, y);
    tdm_ca_empty_cache(ca);
    CHECK(m.n_free == 1 && stats_of(ca).mem.reserved == (int64_t)(14 * MIB));
    memset(x, 1, 1000);
    memset(z, 2, 12 * MIB);
    tdm_ca_free(ca, x);
    tdm_ca_empty_cache(ca);
    CHECK(m.n_free == 2 && stats_of(ca).mem.reserved == (int64_t)(12 * MIB));
    CHECK(z[12 * MIB - 1] == 2);
    tdm_ca_free(ca, z);
    tdm_ca_empty_cache(ca);
    CHECK(m.n_free == 3 && stats_of(ca).mem.reserved == 0);
    mock_done(ca, &m);
}

// ---- the random sequence against a shadow model -----------------------------------------

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void) {  // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static size_t rng_below(size_t n) {
    return (size_t)(rng_next() % n);
}

typedef struct {
    char *p;
    size_t asked, size;
    unsigned char tag;
} live_block;

// Mostly small, some medium and large, a few over 10 MiB.
static size_t random_size(void) {
    size_t r = rng_below(100);
    if (r < 70) return 1 + rng_below(64 * KIB);
    if (r < 90) return 64 * KIB + rng_below(MIB);
    if (r < 99) return MIB + rng_below(11 * MIB);
    return 10 * MIB + rng_below(30 * MIB);
}

static int cmp_live(const void *a, const void *b) {
    const live_block *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

// Every live block inside its own bytes: sorted by address, each ends before the next begins,
// and its first and last bytes still carry its tag.
static bool check_live(live_block *live, int n) {
    live_block sorted[256];
    memcpy(sorted, live, (size_t)n * sizeof *live);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_live);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (i + 1 < n && sorted[i].p + sorted[i].size > sorted[i + 1].p) ok = false;
        if ((unsigned char)sorted[i].p[0] != sorted[i].tag ||
            (unsigned char)sorted[i].p[sorted[i].size - 1] != sorted[i].tag)
            ok = false;
    }
    return ok;
}

static void test_random(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 256 * MIB, true);
    int streams[2];
    live_block live[256];
    int n_live = 0;
    int64_t allocated = 0, peak = 0, n_allocs = 0, n_frees = 0, n_oom = 0;
    for (int step = 0; step < 4000 && check_failures == 0; step++) {
        size_t r = rng_below(100);
        if (r == 0) {
            tdm_ca_empty_cache(ca);
        } else if ((r < 55 && n_live < 256) || n_live == 0) {
            size_t asked = random_size();
            void *stream = &streams[rng_below(2)];
            char *p = tdm_ca_alloc(ca, asked, stream);
            if (!p) {
                CHECK_MSG(tdm_last_status() == TDM_ERR_OOM, "step %d: %s", step, tdm_last_error());
                n_oom++;
            } else {
                size_t size = tdm_ca_block_size(ca, p), rounded = (asked + 511) / 512 * 512;
                CHECK_MSG(size == rounded || (rounded > MIB && size - rounded <= MIB),
                          "step %d: asked %zu, block %zu", step, asked, size);
                unsigned char tag = (unsigned char)(1 + step % 255);
                memset(p, tag, size);
                live[n_live++] = (live_block){p, asked, size, tag};
                allocated += (int64_t)size;
                if (allocated > peak) peak = allocated;
                n_allocs++;
            }
        } else {
            int i = (int)rng_below((size_t)n_live);
            CHECK(tdm_ca_free(ca, live[i].p) == TDM_OK);
            allocated -= (int64_t)live[i].size;
            live[i] = live[--n_live];
            n_frees++;
        }
        tdm_ca_stats s = stats_of(ca);
        CHECK_MSG(check_live(live, n_live), "step %d: live blocks overlap or were overwritten",
                  step);
        CHECK_MSG(s.mem.allocated == allocated && s.mem.peak_allocated == peak,
                  "step %d: allocated %lld (peak %lld), shadow %lld (%lld)", step,
                  (long long)s.mem.allocated, (long long)s.mem.peak_allocated, (long long)allocated,
                  (long long)peak);
        CHECK(s.mem.reserved == (int64_t)m.in_use && s.mem.peak_reserved == (int64_t)m.peak_in_use);
        CHECK(s.mem.n_allocs == n_allocs && s.mem.n_frees == n_frees);
        CHECK(s.n_segment_allocs == m.n_alloc && s.n_segment_frees == m.n_free);
        CHECK(s.mem.allocated <= s.mem.reserved);
    }
    tdm_ca_stats s = stats_of(ca);
    printf(
        "random: %lld allocs (%lld from the cache), %lld raw segments, %lld oom retries, "
        "%lld out of memory\n",
        (long long)n_allocs, (long long)s.n_cache_hits, (long long)s.n_segment_allocs,
        (long long)s.n_oom_retries, (long long)n_oom);
    CHECK(s.n_cache_hits > n_allocs / 2);  // caching does its job
    while (n_live > 0) tdm_ca_free(ca, live[--n_live].p);
    tdm_ca_empty_cache(ca);
    CHECK(stats_of(ca).mem.reserved == 0 && m.in_use == 0);
    mock_done(ca, &m);
}

// ---- the summary, misuse, threads ----------------------------------------------------------

static void test_summary(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    int s1;
    void *a = tdm_ca_alloc(ca, 1000, NULL);
    void *b = tdm_ca_alloc(ca, 12 * MIB, &s1);
    (void)a;
    tdm_ca_free(ca, b);
    char buf[4096];
    size_t len = tdm_ca_summary(ca, buf, sizeof buf);
    CHECK(len == strlen(buf));
    const char *want[] = {"caching allocator on mock:0: caching on",
                          "allocated 1024 B",
                          "reserved 14680064 B",
                          "2 segments",
                          "size 2097152 small stream default",
                          "block offset 0 size 1024 used",
                          "block offset 1024 size 2096128 free",
                          "size 12582912 large",
                          "block offset 0 size 12582912 free"};
    for (int i = 0; i < 9; i++) CHECK_MSG(strstr(buf, want[i]), "no '%s' in:\n%s", want[i], buf);
    char small[16];
    CHECK(tdm_ca_summary(ca, small, sizeof small) == len);  // the full length, as snprintf
    CHECK(strlen(small) == sizeof small - 1 && strncmp(small, buf, sizeof small - 1) == 0);
    CHECK(tdm_ca_summary(ca, NULL, 0) == len);
    printf("%s", buf);
    mock_done(ca, &m);
}

static void test_bad_free(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 0, true);
    char *a = tdm_ca_alloc(ca, 1000, NULL);
    CHECK(tdm_ca_free(ca, a + 8) == TDM_ERR_ARG);
    CHECK(tdm_ca_free(ca, a) == TDM_OK);
    CHECK(tdm_ca_free(ca, a) == TDM_ERR_ARG);  // twice
    CHECK(strstr(tdm_last_error(), "did not hand out") != NULL);
    CHECK(tdm_ca_free(ca, NULL) == TDM_OK);
    CHECK(stats_of(ca).mem.n_frees == 1 && stats_of(ca).mem.allocated == 0);
    tdm_raw_allocator none = {0};
    CHECK(tdm_ca_new(&none, true, 0) == NULL && tdm_last_status() == TDM_ERR_ARG);
    void *b = tdm_ca_alloc(ca, 1000, NULL);
    (void)b;
    tdm_ca_free_all(ca);  // live blocks too
    CHECK(m.in_use == 0 && stats_of(ca).mem.allocated == 0 && stats_of(ca).mem.reserved == 0);
    mock_done(ca, &m);
}

// Threads allocating and freeing on their own streams: the mutex keeps the books straight.
#define N_THREADS 4
static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;  // the mock itself is not safe
static void *locked_alloc(size_t bytes, void *ctx) {
    pthread_mutex_lock(&mock_lock);
    void *p = mock_alloc(bytes, ctx);
    pthread_mutex_unlock(&mock_lock);
    return p;
}
static void locked_free(void *p, size_t bytes, void *ctx) {
    pthread_mutex_lock(&mock_lock);
    mock_free(p, bytes, ctx);
    pthread_mutex_unlock(&mock_lock);
}

static void *thread_body(void *arg) {
    tdm_caching_allocator *ca = arg;
    int stream;
    char *held[16] = {0};
    unsigned x = (unsigned)(uintptr_t)&stream;
    for (int i = 0; i < 3000; i++) {
        x = x * 1664525u + 1013904223u;
        int k = (int)(x >> 28);
        if (held[k]) {
            tdm_ca_free(ca, held[k]);
            held[k] = NULL;
        } else {
            size_t bytes = 1 + (x >> 8) % (2 * MIB);
            held[k] = tdm_ca_alloc(ca, bytes, &stream);
            if (held[k]) memset(held[k], k, bytes);
        }
    }
    for (int k = 0; k < 16; k++) tdm_ca_free(ca, held[k]);
    return NULL;
}

static void test_threads(void) {
    mock_raw m = {0};
    m.capacity = SIZE_MAX / 2;
    tdm_raw_allocator raw = {locked_alloc, locked_free, &m, NULL, NULL};
    tdm_caching_allocator *ca = tdm_ca_new(&raw, true, 0);
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) pthread_create(&t[i], NULL, thread_body, ca);
    for (int i = 0; i < N_THREADS; i++) pthread_join(t[i], NULL);
    tdm_ca_stats s = stats_of(ca);
    CHECK(s.mem.allocated == 0 && s.mem.n_allocs == s.mem.n_frees);
    CHECK(s.mem.reserved == (int64_t)m.in_use);
    mock_done(ca, &m);
}

// ---- through the public API ---------------------------------------------------------------

// The cpu backend has no caching allocator: the controls say so.
static void test_public_api(void) {
    char buf[64];
    CHECK(tdm_memory_empty_cache(TDM_CPU) == TDM_ERR_UNSUPPORTED);
    CHECK(strstr(tdm_last_error(), "memory_empty_cache: not supported by the cpu backend"));
    CHECK(tdm_memory_summary(TDM_CPU, buf, sizeof buf) == TDM_ERR_UNSUPPORTED && buf[0] == 0);
    CHECK(tdm_memory_summary(TDM_CPU, NULL, 0) == TDM_ERR_ARG);
    CHECK(tdm_memory_set_caching(TDM_CPU, false) == TDM_ERR_UNSUPPORTED);
    tdm_device cuda9 = {TDM_DEVICE_CUDA, 99};
    CHECK(tdm_memory_empty_cache(cuda9) != TDM_OK);  // no such device (or no CUDA backend)
}

// cuda:0's allocator through tensors (gpu label: exit 77 without a device).
static void test_gpu(void) {
    tdm_device dev = {TDM_DEVICE_CUDA, 0};
    if (!tdm_device_available(dev)) {
        printf("SKIP: %s\n", tdm_last_error());
        exit(77);
    }
    CHECK(tdm_memory_set_caching(dev, true) == TDM_OK);
    tdm_memory_stats s0, s1, s2;
    CHECK(tdm_memory_stats_get(dev, &s0) == TDM_OK);
    int64_t n = (int64_t)(MIB / 4);
    tdm_tensor *a = tdm_tensor_empty(1, &n, TDM_DTYPE_F32, dev);
    CHECK(a != NULL);
    CHECK(tdm_memory_stats_get(dev, &s1) == TDM_OK);
    CHECK(s1.allocated - s0.allocated == (int64_t)MIB && s1.reserved >= s1.allocated);
    tdm_tensor_free(a);
    tdm_tensor *b = tdm_tensor_empty(1, &n, TDM_DTYPE_F32, dev);  // the cached block
    CHECK(tdm_memory_stats_get(dev, &s2) == TDM_OK);
    CHECK(s2.reserved == s1.reserved && s2.n_allocs == s1.n_allocs + 1);
    char buf[4096];
    CHECK(tdm_memory_summary(dev, buf, sizeof buf) == TDM_OK);
    CHECK(strstr(buf, "caching allocator on cuda:0: caching on") && strstr(buf, " used"));
    printf("%s", buf);
    tdm_tensor_free(b);
    CHECK(tdm_memory_empty_cache(dev) == TDM_OK);
    CHECK(tdm_memory_stats_get(dev, &s2) == TDM_OK);
    CHECK(s2.allocated == s0.allocated && s2.reserved == s0.reserved);
    // caching off: freed memory goes straight back
    CHECK(tdm_memory_set_caching(dev, false) == TDM_OK);
    tdm_tensor *c = tdm_tensor_empty(1, &n, TDM_DTYPE_F32, dev);
    tdm_tensor_free(c);
    CHECK(tdm_memory_stats_get(dev, &s2) == TDM_OK);
    CHECK(s2.reserved == s0.reserved);
    CHECK(tdm_memory_set_caching(dev, true) == TDM_OK);
    // 512 GiB: more than any GPU's memory (an H200 has 141 GB) yet under core's cap on one
    // allocation (TDM_MAX_ALLOC_BYTES, 1 TiB), so the device's allocator is asked and must say
    // out of memory, with the numbers
    int64_t huge = (int64_t)1 << 37;
    CHECK(tdm_tensor_empty(1, &huge, TDM_DTYPE_F32, dev) == NULL);
    CHECK(tdm_last_status() == TDM_ERR_OOM);
    CHECK_MSG(strstr(tdm_last_error(), "out of memory on cuda:0: tried to allocate 524288.00 MiB"),
              "%s", tdm_last_error());
}

// A held private pool (a CUDA graph's): its blocks are served only to its key, its free segments
// survive empty_cache, the out-of-memory retry and caching off, and release gives them back.
static void test_private_pool(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 24 * MIB, true);
    void *pool = (void *)(uintptr_t)0x11;  // an odd key, as kernels/graph.cu makes
    CHECK(tdm_ca_pool_hold(ca, pool) == TDM_OK);
    void *a = tdm_ca_alloc(ca, 1000, pool);
    CHECK(a != NULL && m.n_alloc == 1);
    CHECK(tdm_ca_free(ca, a) == TDM_OK);
    void *other = tdm_ca_alloc(ca, 1000, NULL);  // another pool: a segment of its own
    CHECK(other != NULL && other != a && m.n_alloc == 2);
    CHECK(tdm_ca_free(ca, other) == TDM_OK);
    tdm_ca_empty_cache(ca);  // the default pool's segment goes, the held one stays
    CHECK(m.n_free == 1 && stats_of(ca).n_segments == 1);
    tdm_ca_set_caching(ca, false);
    CHECK(m.n_free == 1);
    CHECK(tdm_ca_alloc(ca, 1000, pool) == a);  // reused although caching is off
    CHECK(m.n_alloc == 2);
    CHECK(tdm_ca_free(ca, a) == TDM_OK);
    CHECK(m.n_free == 1);
    tdm_ca_set_caching(ca, true);
    // out of memory: the retry may not take the held segment (2 MiB of the 24 are held)
    CHECK(tdm_ca_alloc(ca, 23 * MIB, NULL) == NULL);
    CHECK(stats_of(ca).n_segments == 1);
    // a live block at release: its segment stays until freed, then empty_cache returns it
    void *live = tdm_ca_alloc(ca, 4 * MIB, pool);
    CHECK(live != NULL && stats_of(ca).n_segments == 2);
    tdm_ca_pool_release(ca, pool);
    CHECK(stats_of(ca).n_segments == 1);  // the free small segment went back
    CHECK(tdm_ca_free(ca, live) == TDM_OK);
    tdm_ca_empty_cache(ca);
    CHECK(stats_of(ca).n_segments == 0 && stats_of(ca).mem.reserved == 0);
    tdm_ca_pool_release(ca, pool);  // twice: a no-op
    mock_done(ca, &m);
}

// A request for a held pool (made while a CUDA graph is captured) that the device cannot serve
// fails with TDM_ERR_OOM without releasing other pools' free segments: the raw free (cudaFree)
// would invalidate the capture. Outside the pool the retry still releases them.
static void test_pool_oom_no_release(void) {
    mock_raw m;
    tdm_caching_allocator *ca = mock_ca(&m, 24 * MIB, true);
    void *pool = (void *)(uintptr_t)0x11;
    void *a = tdm_ca_alloc(ca, 2 * MIB, NULL);  // a 20 MiB segment of the default stream
    CHECK(a != NULL && tdm_ca_free(ca, a) == TDM_OK);
    CHECK(tdm_ca_pool_hold(ca, pool) == TDM_OK);
    tdm_error_clear();
    CHECK(tdm_ca_alloc(ca, 12 * MIB, pool) == NULL);  // 4 MiB free on the device
    CHECK(tdm_last_status() == TDM_ERR_OOM);
    tdm_ca_stats s = stats_of(ca);
    CHECK_MSG(m.n_free == 0 && s.n_segment_frees == 0 && s.n_oom_retries == 0,
              "%lld raw frees during a capture's allocation", (long long)m.n_free);
    CHECK(s.n_segments == 1 && s.mem.reserved == (int64_t)(20 * MIB));
    tdm_ca_pool_release(ca, pool);
    int s2;
    void *b = tdm_ca_alloc(ca, 12 * MIB, &s2);  // not held: the retry releases and succeeds
    CHECK(b != NULL && stats_of(ca).n_oom_retries == 1);
    CHECK(tdm_ca_free(ca, b) == TDM_OK);
    mock_done(ca, &m);
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"reuse", test_reuse},
        {"rounding", test_rounding},
        {"small_share", test_small_share},
        {"split_merge", test_split_merge},
        {"streams", test_streams},
        {"oom_retry", test_oom_retry},
        {"oom", test_oom},
        {"caching_off", test_caching_off},
        {"stats", test_stats},
        {"empty_cache", test_empty_cache},
        {"random", test_random},
        {"summary", test_summary},
        {"bad_free", test_bad_free},
        {"threads", test_threads},
        {"public_api", test_public_api},
        {"private_pool", test_private_pool},
        {"pool_oom_no_release", test_pool_oom_no_release},
        {"gpu", test_gpu},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++)
        if (argc < 2 ? tests[i].fn != test_gpu : strcmp(argv[1], tests[i].name) == 0) {
            tests[i].fn();
            ran++;
        }
    if (!ran) {
        fprintf(stderr, "test_caching_allocator: no test named %s\n", argv[1]);
        return 2;
    }
    CHECK_DONE(argc < 2 ? "caching_allocator" : argv[1]);
}
