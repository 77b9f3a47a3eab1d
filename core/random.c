/* random.c — random streams with state: tandem/tensor.h's tdm_generator and the streams of nn's
 * Dropout modules (core/random_impl.h). Eagerly a draw is the explicit (seed, offset) draw of
 * tdm_tensor_rand / tdm_dropout, then offset += 1. Under CUDA graph capture (PyTorch's graph-safe
 * Philox state): the first draw of a stream in a capture registers a replay hook
 * (core/graph_impl.h) with a device counter `delta`; the captured kernels draw at the offset they
 * had during the capture plus *delta. When the capture ends the stream's offset is rewound to
 * where it began (the capture ran nothing) and the hook remembers how far one step moves it
 * (`count`); before each replay it writes delta = offset - begin and moves offset on by count.
 * So replay k draws exactly the numbers of the k-th eager run of the step, eager draws may be
 * mixed with replays, and checkpointing's recompute (which rewinds the offset to the forward's)
 * redraws the forward's mask inside the graph too. */
#include <stdlib.h>

#include "core/backend.h"
#include "core/graph_impl.h"
#include "core/random_impl.h"
#include "tandem/ops.h"

typedef struct {
    tdm_philox_stream *st;
    uint64_t begin, count;
    tdm_tensor *delta;   // (1) u64 (as i64) on the device, written before each replay
} stream_capture;

static void stream_capture_release(void *ctx) {
    stream_capture *c = ctx;
    tdm_tensor_free(c->delta);
    free(c);
}

static const uint64_t *delta_ptr(const stream_capture *c) {
    return (const uint64_t *)tdm_data_c(c->delta);
}

static void stream_capture_ended(void *ctx, bool ok) {
    (void)ok;
    stream_capture *c = ctx;
    c->count = c->st->offset - c->begin;
    c->st->offset = c->begin;
}

static tdm_status stream_capture_replay(void *ctx) {
    stream_capture *c = ctx;
    uint64_t d = c->st->offset - c->begin;
    TDM_TRY(tdm_graph_write_async(c->delta, 0, &d, sizeof d));
    c->st->offset += c->count;
    return TDM_OK;
}

// The device counter of st's draws in this thread's capture on dev (registered on first use);
// NULL + error when the backend cannot draw at a device offset.
static const uint64_t *stream_delta(tdm_philox_stream *st, tdm_device dev) {
    stream_capture *c = tdm_graph_hook_find(dev, st);
    if (c) return delta_ptr(c);
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be || !be->write_async) {
        tdm_error_set(TDM_ERR_UNSUPPORTED, "random stream: the %s backend cannot capture draws",
                      be ? be->name : "?");
        return NULL;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        tdm_error_set(TDM_ERR_OOM, "random stream: out of host memory");
        return NULL;
    }
    int64_t one = 1;
    *c = (stream_capture){st, st->offset, 0, tdm_graph_empty_persistent(1, &one, TDM_DTYPE_I64, dev)};
    if (!c->delta) {
        free(c);
        return NULL;
    }
    tdm_graph_hook h = {.owner = st, .ctx = c, .replay = stream_capture_replay,
                        .ended = stream_capture_ended, .release = stream_capture_release};
    if (tdm_graph_hook_add(dev, &h) != TDM_OK) return NULL;   // c released
    return delta_ptr(c);
}

tdm_tensor *tdm_stream_rand(tdm_philox_stream *st, int ndim, const int64_t *shape, tdm_dtype dt,
                            tdm_device dev, bool normal) {
    if (!tdm_graph_is_capturing(dev)) {
        tdm_tensor *t = normal ? tdm_tensor_randn(ndim, shape, dt, dev, st->seed, st->offset)
                               : tdm_tensor_rand(ndim, shape, dt, dev, st->seed, st->offset);
        if (t) st->offset++;
        return t;
    }
    const char *op = normal ? "randn" : "rand";
    if (!tdm_dtype_is_float(dt)) {
        tdm_error_set(TDM_ERR_DTYPE, "%s: dtype %s is not floating point", op, tdm_dtype_name(dt));
        return NULL;
    }
    const uint64_t *delta = stream_delta(st, dev);
    if (!delta) return NULL;
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be->rand_fill_dev) {
        tdm_error_unsupported(op, be);
        return NULL;
    }
    tdm_tensor *t = tdm_tensor_empty(ndim, shape, dt, dev);
    if (t && be->rand_fill_dev(t, normal, st->seed, st->offset, delta) != TDM_OK) {
        tdm_tensor_free(t);
        return NULL;
    }
    if (t) st->offset++;
    return t;
}

tdm_tensor *tdm_stream_dropout(tdm_philox_stream *st, const tdm_tensor *x, double p,
                               bool training) {
    const uint64_t *delta = NULL;
    if (x && training && p != 0 && tdm_graph_is_capturing(x->device) &&
        !(delta = stream_delta(st, x->device)))
        return NULL;
    tdm_tensor *y = tdm_dropout_at(x, p, training, st->seed, st->offset, delta);
    if (y && training) st->offset++;
    return y;
}

void tdm_stream_release(tdm_philox_stream *st) { tdm_graph_forget(st); }

// ---- tdm_generator (tandem/tensor.h) -----------------------------------------------------------

struct tdm_generator {
    tdm_philox_stream st;
};

tdm_generator *tdm_generator_new(uint64_t seed, uint64_t offset) {
    tdm_generator *g = malloc(sizeof *g);
    if (!g) {
        tdm_error_set(TDM_ERR_OOM, "generator: out of host memory");
        return NULL;
    }
    g->st = (tdm_philox_stream){seed, offset};
    return g;
}

void tdm_generator_free(tdm_generator *g) {
    if (!g) return;
    tdm_stream_release(&g->st);
    free(g);
}

uint64_t tdm_generator_seed(const tdm_generator *g) { return g->st.seed; }
uint64_t tdm_generator_offset(const tdm_generator *g) { return g->st.offset; }
void tdm_generator_set_offset(tdm_generator *g, uint64_t offset) { g->st.offset = offset; }

static bool generator_ok(const tdm_generator *g, const char *op) {
    if (g) return true;
    tdm_error_set(TDM_ERR_ARG, "%s: generator is NULL", op);
    return false;
}

tdm_tensor *tdm_generator_rand(tdm_generator *g, int ndim, const int64_t *shape, tdm_dtype dt,
                               tdm_device dev) {
    return generator_ok(g, "rand") ? tdm_stream_rand(&g->st, ndim, shape, dt, dev, false) : NULL;
}

tdm_tensor *tdm_generator_randn(tdm_generator *g, int ndim, const int64_t *shape, tdm_dtype dt,
                                tdm_device dev) {
    return generator_ok(g, "randn") ? tdm_stream_rand(&g->st, ndim, shape, dt, dev, true) : NULL;
}

tdm_tensor *tdm_generator_dropout(tdm_generator *g, const tdm_tensor *x, double p, bool training) {
    return generator_ok(g, "dropout") ? tdm_stream_dropout(&g->st, x, p, training) : NULL;
}

tdm_status tdm_generator_draw(tdm_generator *g, tdm_device dev, uint64_t *seed, uint64_t *offset,
                              const uint64_t **delta) {
    *seed = g->st.seed;
    *offset = g->st.offset;
    *delta = NULL;
    if (tdm_graph_is_capturing(dev) && !(*delta = stream_delta(&g->st, dev)))
        return tdm_last_status();
    return TDM_OK;
}
