/* graph.c — CUDA graph capture and replay (tandem/graph.h): the argument checks, the side stream
 * made current for the capture, the per-thread capture state; the work goes through the backend
 * table's optional graph_* slots (kernels/graph.cu). Without them (the cpu reference) every call
 * fails with TDM_ERR_UNSUPPORTED. */
#include <stdio.h>
#include <stdlib.h>

#include "core/backend.h"
#include "core/tensor_impl.h"
#include "tandem/graph.h"
#include "tandem/stream.h"

#define GRAPH_MAX_DEVICES 64

struct tdm_graph {
    tdm_device dev;
    const struct tdm_backend_ops *be;
    void *handle;  // the backend's capture, executable after capture_end
};

// The capture under way on this thread per cuda device index: the side stream it runs on, the
// stream that was current before, the backend's handle.
typedef struct {
    bool active;
    tdm_stream *side, *prev;
    void *handle;
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
    *c = (graph_capture){true, side, prev, handle};
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
    *c = (graph_capture){0};
    if (s != TDM_OK) return s;
    tdm_graph *g = calloc(1, sizeof *g);
    if (!g) {
        be->graph_free(handle, dev.index);
        return tdm_error_set(TDM_ERR_OOM, "graph_capture_end: out of host memory");
    }
    *g = (tdm_graph){dev, be, handle};
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
    return g->be->graph_replay(g->handle, g->dev.index);
}

void tdm_graph_free(tdm_graph *g) {
    if (!g) return;
    g->be->graph_free(g->handle, g->dev.index);
    free(g);
}
