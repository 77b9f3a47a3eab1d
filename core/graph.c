/* graph.c — CUDA graph capture and replay (tandem/graph.h): the argument checks, the side stream
 * made current for the capture, the per-thread capture state; the work goes through the backend
 * table's optional graph_* slots (kernels/graph.cu). Without them (the cpu reference) every call
 * fails with TDM_ERR_UNSUPPORTED. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/graph_impl.h"
#include "core/tensor_impl.h"
#include "tandem/graph.h"
#include "tandem/stream.h"

#define GRAPH_MAX_DEVICES 64

// ---- replay hooks (core/graph_impl.h) ----------------------------------------------------------
// A capture's hooks, then its graph's. Every set is on one global list so that tdm_graph_forget
// (an optimizer or random stream being freed, on any thread) can mark its hooks dead.

typedef struct hook_set {
    tdm_graph_hook *h;
    bool *dead;
    int n, cap;
    struct hook_set *prev, *next;
} hook_set;

static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static hook_set *all_sets;

static void hook_set_free(hook_set *s) {
    if (!s) return;
    pthread_mutex_lock(&hooks_lock);
    if (s->prev) s->prev->next = s->next;
    else all_sets = s->next;
    if (s->next) s->next->prev = s->prev;
    pthread_mutex_unlock(&hooks_lock);
    for (int i = 0; i < s->n; i++) s->h[i].release(s->h[i].ctx);
    free(s->h);
    free(s->dead);
    free(s);
}

static void hook_set_ended(hook_set *s, bool ok) {
    for (int i = 0; s && i < s->n; i++)
        if (s->h[i].ended) s->h[i].ended(s->h[i].ctx, ok);
}

void tdm_graph_forget(const void *owner) {
    pthread_mutex_lock(&hooks_lock);
    for (hook_set *s = all_sets; s; s = s->next)
        for (int i = 0; i < s->n; i++)
            if (s->h[i].owner == owner) s->dead[i] = true;
    pthread_mutex_unlock(&hooks_lock);
}

// Runs a graph's hooks before its replay; fails, running none, when an owner is gone.
static tdm_status hook_set_replay(hook_set *s) {
    if (!s) return TDM_OK;
    pthread_mutex_lock(&hooks_lock);
    bool dead = false;
    for (int i = 0; i < s->n; i++) dead = dead || s->dead[i];
    pthread_mutex_unlock(&hooks_lock);
    if (dead)
        return tdm_error_set(TDM_ERR_ARG, "graph_replay: an optimizer or random stream (dropout "
                                          "module, generator) whose state the graph advances was "
                                          "freed; free the graph first");
    for (int i = 0; i < s->n; i++) TDM_TRY(s->h[i].replay(s->h[i].ctx));
    return TDM_OK;
}

struct tdm_graph {
    tdm_device dev;
    const struct tdm_backend_ops *be;
    void *handle;  // the backend's capture, executable after capture_end
    hook_set *hooks;   // run before each replay (NULL: none)
};

// The capture under way on this thread per cuda device index: the side stream it runs on, the
// stream that was current before, the backend's handle, the hooks registered so far.
typedef struct {
    bool active;
    tdm_stream *side, *prev;
    void *handle;
    hook_set *hooks;
} graph_capture;

static _Thread_local graph_capture captures[GRAPH_MAX_DEVICES];

// The backend of dev for `op` when it can capture; NULL + error otherwise.
static const struct tdm_backend_ops *graph_backend(const char *op, tdm_device dev) {
    char name[32];
    tdm_device_str(dev, name, sizeof name);
    if (dev.type != TDM_DEVICE_CUDA) {
        tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: graph capture needs a CUDA device (got %s)", op,
                      name);
        return NULL;
    }
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be || !tdm_device_available(dev)) {
        char why[400];
        snprintf(why, sizeof why, "%s", tdm_last_error());
        tdm_error_set(TDM_ERR_DEVICE, "%s: %s: %s", op, name, why);
        return NULL;
    }
    if (!be->graph_capture_begin || !be->graph_capture_end || !be->graph_replay ||
        !be->graph_free) {
        tdm_error_set(TDM_ERR_UNSUPPORTED,
                      "%s: graph capture needs a CUDA device (the %s backend cannot capture)", op,
                      be->name);
        return NULL;
    }
    if (dev.index < 0 || dev.index >= GRAPH_MAX_DEVICES) {
        tdm_error_set(TDM_ERR_DEVICE, "%s: %s: graphs are kept for device indices below %d", op,
                      name, GRAPH_MAX_DEVICES);
        return NULL;
    }
    return be;
}

bool tdm_graph_is_capturing(tdm_device dev) {
    return dev.type == TDM_DEVICE_CUDA && dev.index >= 0 && dev.index < GRAPH_MAX_DEVICES &&
           captures[dev.index].active;
}

tdm_status tdm_graph_capture_begin(tdm_device dev) {
    const struct tdm_backend_ops *be = graph_backend("graph_capture_begin", dev);
    if (!be) return tdm_last_status();
    graph_capture *c = &captures[dev.index];
    if (c->active)
        return tdm_error_set(TDM_ERR_ARG, "graph_capture_begin: this thread is already capturing "
                                          "on cuda:%d (captures do not nest)",
                             dev.index);
    // The work queued so far must not run into the capture's stream order: finish it (as
    // torch.cuda.graph synchronizes before capturing).
    TDM_TRY(tdm_device_synchronize(dev));
    tdm_stream *side = tdm_stream_new(dev);
    if (!side) return tdm_last_status();
    tdm_stream *prev = tdm_stream_current(dev);
    tdm_status s = tdm_stream_set_current(dev, side);
    void *handle = NULL;
    if (s == TDM_OK) s = be->graph_capture_begin(dev.index, &handle);
    if (s != TDM_OK) {
        (void)tdm_stream_set_current(dev, prev);
        tdm_stream_free(side);
        return s;
    }
    *c = (graph_capture){true, side, prev, handle, NULL};
    return TDM_OK;
}

tdm_status tdm_graph_capture_end(tdm_device dev, tdm_graph **out) {
    if (!out) return tdm_error_set(TDM_ERR_ARG, "graph_capture_end: out is NULL");
    *out = NULL;
    const struct tdm_backend_ops *be = graph_backend("graph_capture_end", dev);
    if (!be) return tdm_last_status();
    graph_capture *c = &captures[dev.index];
    if (!c->active)
        return tdm_error_set(TDM_ERR_ARG,
                             "graph_capture_end: this thread is not capturing on cuda:%d",
                             dev.index);
    tdm_status s = be->graph_capture_end(c->handle, dev.index);   // frees it on failure
    // The capture stream has no work of its own: it was recorded, not run.
    tdm_status r = tdm_stream_set_current(dev, c->prev);
    tdm_stream_free(c->side);
    void *handle = c->handle;
    hook_set *hooks = c->hooks;
    *c = (graph_capture){0};
    tdm_graph *g = s == TDM_OK ? calloc(1, sizeof *g) : NULL;
    hook_set_ended(hooks, g != NULL);   // e.g. random streams rewind: the capture ran nothing
    if (s != TDM_OK) {
        hook_set_free(hooks);
        return s;
    }
    if (!g) {
        hook_set_free(hooks);
        be->graph_free(handle, dev.index);
        return tdm_error_set(TDM_ERR_OOM, "graph_capture_end: out of host memory");
    }
    *g = (tdm_graph){dev, be, handle, hooks};
    if (r != TDM_OK) {
        tdm_graph_free(g);
        return r;
    }
    *out = g;
    return TDM_OK;
}

tdm_status tdm_graph_replay(tdm_graph *g) {
    if (!g) return tdm_error_set(TDM_ERR_ARG, "graph_replay: graph is NULL");
    if (tdm_graph_is_capturing(g->dev))
        return tdm_error_set(TDM_ERR_ARG, "graph_replay: this thread is capturing on cuda:%d; "
                                          "end the capture first",
                             g->dev.index);
    TDM_TRY(hook_set_replay(g->hooks));   // the state the replay reads, on the same stream
    return g->be->graph_replay(g->handle, g->dev.index);
}

void tdm_graph_free(tdm_graph *g) {
    if (!g) return;
    g->be->graph_free(g->handle, g->dev.index);   // waits for its replays
    hook_set_free(g->hooks);   // their state goes back to the graph's (released) pool
    free(g);
}

tdm_status tdm_graph_hook_add(tdm_device dev, const tdm_graph_hook *h) {
    graph_capture *c = tdm_graph_is_capturing(dev) ? &captures[dev.index] : NULL;
    hook_set *s = c ? c->hooks : NULL;
    if (c && !s && (s = calloc(1, sizeof *s))) {
        pthread_mutex_lock(&hooks_lock);
        s->next = all_sets;
        if (all_sets) all_sets->prev = s;
        all_sets = s;
        pthread_mutex_unlock(&hooks_lock);
        c->hooks = s;
    }
    if (s && s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        tdm_graph_hook *nh = realloc(s->h, (size_t)cap * sizeof *nh);
        if (nh) s->h = nh;
        bool *nd = nh ? realloc(s->dead, (size_t)cap * sizeof *nd) : NULL;
        if (nd) {
            s->dead = nd;
            s->cap = cap;
        }
    }
    if (!s || s->n == s->cap) {
        h->release(h->ctx);
        return c ? tdm_error_set(TDM_ERR_OOM, "graph capture: out of host memory")
                 : tdm_error_set(TDM_ERR_ARG, "graph hook: this thread is not capturing on "
                                              "cuda:%d",
                                 dev.index);
    }
    pthread_mutex_lock(&hooks_lock);   // forget() may read the set from another thread
    s->h[s->n] = *h;
    s->dead[s->n] = false;
    s->n++;
    pthread_mutex_unlock(&hooks_lock);
    return TDM_OK;
}

tdm_tensor *tdm_graph_empty_persistent(int ndim, const int64_t *shape, tdm_dtype dt,
                                       tdm_device dev) {
    graph_capture *c = tdm_graph_is_capturing(dev) ? &captures[dev.index] : NULL;
    if (!c) return tdm_tensor_empty(ndim, shape, dt, dev);
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be->graph_alloc_persistent) {
        tdm_error_set(TDM_ERR_UNSUPPORTED, "graph capture: the %s backend cannot keep state made "
                                           "during a capture", be->name);
        return NULL;
    }
    if (be->graph_alloc_persistent(c->handle, dev.index, true) != TDM_OK) return NULL;
    tdm_tensor *t = tdm_tensor_empty(ndim, shape, dt, dev);
    tdm_status s = be->graph_alloc_persistent(c->handle, dev.index, false);
    if (s != TDM_OK) {
        tdm_tensor_free(t);
        return NULL;
    }
    return t;
}

void *tdm_graph_hook_find(tdm_device dev, const void *owner) {
    hook_set *s = tdm_graph_is_capturing(dev) ? captures[dev.index].hooks : NULL;
    for (int i = 0; s && i < s->n; i++)
        if (s->h[i].owner == owner) return s->h[i].ctx;
    return NULL;
}

tdm_status tdm_graph_write_async(tdm_tensor *t, size_t at, const void *src, size_t nbytes) {
    const struct tdm_backend_ops *be = tdm_backend_of(t);
    if (!be->write_async) return tdm_error_unsupported("graph replay state", be);
    if (at + nbytes > tdm_tensor_nbytes(t))
        return tdm_error_set(TDM_ERR_ARG, "graph replay state: %zu bytes at %zu past the end", nbytes, at);
    for (size_t k = 0; k < nbytes; k += TDM_WRITE_ASYNC_MAX) {
        size_t n = nbytes - k < TDM_WRITE_ASYNC_MAX ? nbytes - k : TDM_WRITE_ASYNC_MAX;
        TDM_TRY(be->write_async((char *)tdm_data(t) + at + k, (const char *)src + k, n,
                                t->device.index));
    }
    return TDM_OK;
}
