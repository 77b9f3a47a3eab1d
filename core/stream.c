/* stream.c — streams, events, pinned host memory and asynchronous copies (tandem/stream.h): the
 * argument checks and the per-thread current stream; the work goes through the backend table's
 * optional stream/event/host slots (the reference backend's host-clock meanings on the cpu, the
 * CUDA runtime in kernels/streams.cu). */
#include <stdlib.h>
#include <string.h>

#include "core/autograd_impl.h"
#include "core/tensor_impl.h"
#include "tandem/graph.h"

// Current streams are kept for device indices below this (the CUDA backend's own limit).
#define STREAM_MAX_DEVICES 64

struct tdm_stream {
    tdm_device device;
    const struct tdm_backend_ops *be;
    void *handle;  // the backend's
};

struct tdm_event {
    tdm_device device;
    const struct tdm_backend_ops *be;
    void *handle;  // the backend's
    bool recorded;
};

// The calling thread's current stream per device type and index; NULL = the default stream.
static _Thread_local tdm_stream *stream_current[2][STREAM_MAX_DEVICES];

// The backend of dev for `op`, with dev present and its index in range; NULL + error otherwise.
static const struct tdm_backend_ops *stream_backend(const char *op, tdm_device dev) {
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    char name[32];
    if (!be || (dev.type != TDM_DEVICE_CPU && !tdm_device_available(dev))) {
        char why[400];
        strncpy(why, tdm_last_error(), sizeof why - 1);
        why[sizeof why - 1] = '\0';
        tdm_error_set(TDM_ERR_DEVICE, "%s: %s: %s", op, tdm_device_str(dev, name, sizeof name),
                      why);
        return NULL;
    }
    if (dev.index < 0 || dev.index >= STREAM_MAX_DEVICES) {
        tdm_error_set(TDM_ERR_DEVICE, "%s: %s: streams are kept for device indices below %d", op,
                      tdm_device_str(dev, name, sizeof name), STREAM_MAX_DEVICES);
        return NULL;
    }
    return be;
}

static tdm_status stream_unsupported(const char *op, const struct tdm_backend_ops *be) {
    return tdm_error_unsupported(op, be);
}

// ---- streams ---------------------------------------------------------------------------------

tdm_stream *tdm_stream_new(tdm_device dev) {
    const struct tdm_backend_ops *be = stream_backend("stream_new", dev);
    if (!be) return NULL;
    if (!be->stream_new) {
        stream_unsupported("stream_new", be);
        return NULL;
    }
    tdm_stream *s = calloc(1, sizeof *s);
    if (!s) {
        tdm_error_set(TDM_ERR_OOM, "stream_new: out of host memory");
        return NULL;
    }
    s->device = dev.type == TDM_DEVICE_CPU ? TDM_CPU : dev;
    s->be = be;
    if (be->stream_new(dev.index, &s->handle) != TDM_OK) {
        free(s);
        return NULL;
    }
    return s;
}

void tdm_stream_free(tdm_stream *s) {
    if (!s) return;
    tdm_stream **cur = &stream_current[s->device.type][s->device.index];
    if (*cur == s) {  // it stops being this thread's current stream
        *cur = NULL;
        if (s->be->set_current_stream) (void)s->be->set_current_stream(NULL, s->device.index);
    }
    s->be->stream_free(s->handle, s->device.index);
    free(s);
}

tdm_device tdm_stream_device(const tdm_stream *s) {
    return s ? s->device : TDM_CPU;
}

tdm_status tdm_stream_synchronize(tdm_stream *s) {
    if (!s) return tdm_error_set(TDM_ERR_ARG, "stream_synchronize: stream is NULL");
    if (!s->be->stream_synchronize) return stream_unsupported("stream_synchronize", s->be);
    return s->be->stream_synchronize(s->handle, s->device.index);
}

tdm_status tdm_stream_wait_event(tdm_stream *s, tdm_event *e) {
    if (!s || !e)
        return tdm_error_set(TDM_ERR_ARG, "stream_wait_event: %s is NULL", !s ? "stream" : "event");
    if (s->device.type != e->device.type) {
        char a[32], b[32];
        return tdm_error_set(
            TDM_ERR_DEVICE, "stream_wait_event: the stream is on %s, the event on %s",
            tdm_device_str(s->device, a, sizeof a), tdm_device_str(e->device, b, sizeof b));
    }
    if (!e->recorded) return TDM_OK;  // nothing to wait for, as PyTorch
    if (!s->be->stream_wait_event) return stream_unsupported("stream_wait_event", s->be);
    return s->be->stream_wait_event(s->handle, e->handle, s->device.index);
}

tdm_status tdm_stream_set_current(tdm_device dev, tdm_stream *s) {
    const struct tdm_backend_ops *be = stream_backend("stream_set_current", dev);
    if (!be) return tdm_last_status();
    if (s && !tdm_device_equal(s->device, dev)) {
        char a[32], b[32];
        return tdm_error_set(TDM_ERR_DEVICE, "stream_set_current: the stream is on %s, not on %s",
                             tdm_device_str(s->device, a, sizeof a),
                             tdm_device_str(dev, b, sizeof b));
    }
    if (be->set_current_stream) TDM_TRY(be->set_current_stream(s ? s->handle : NULL, dev.index));
    stream_current[dev.type][dev.type == TDM_DEVICE_CPU ? 0 : dev.index] = s;
    return TDM_OK;
}

tdm_stream *tdm_stream_current(tdm_device dev) {
    if ((unsigned)dev.type > TDM_DEVICE_CUDA) return NULL;
    int i = dev.type == TDM_DEVICE_CPU ? 0 : dev.index;
    return i >= 0 && i < STREAM_MAX_DEVICES ? stream_current[dev.type][i] : NULL;
}

tdm_status tdm_device_synchronize(tdm_device dev) {
    const struct tdm_backend_ops *be = stream_backend("device_synchronize", dev);
    if (!be) return tdm_last_status();
    if (!be->device_synchronize) return stream_unsupported("device_synchronize", be);
    return be->device_synchronize(dev.index);
}

// The backend handle of s, or of the calling thread's current stream on dev when s is NULL.
static void *stream_handle(tdm_stream *s, tdm_device dev) {
    if (!s) s = tdm_stream_current(dev);
    return s ? s->handle : NULL;
}

// ---- events ----------------------------------------------------------------------------------

tdm_event *tdm_event_new(tdm_device dev) {
    const struct tdm_backend_ops *be = stream_backend("event_new", dev);
    if (!be) return NULL;
    if (!be->event_new) {
        stream_unsupported("event_new", be);
        return NULL;
    }
    tdm_event *e = calloc(1, sizeof *e);
    if (!e) {
        tdm_error_set(TDM_ERR_OOM, "event_new: out of host memory");
        return NULL;
    }
    e->device = dev.type == TDM_DEVICE_CPU ? TDM_CPU : dev;
    e->be = be;
    if (be->event_new(dev.index, &e->handle) != TDM_OK) {
        free(e);
        return NULL;
    }
    return e;
}

void tdm_event_free(tdm_event *e) {
    if (!e) return;
    e->be->event_free(e->handle, e->device.index);
    free(e);
}

tdm_status tdm_event_record(tdm_event *e, tdm_stream *s) {
    if (!e) return tdm_error_set(TDM_ERR_ARG, "event_record: event is NULL");
    if (s && !tdm_device_equal(s->device, e->device)) {
        char a[32], b[32];
        return tdm_error_set(
            TDM_ERR_DEVICE, "event_record: the event is on %s but the stream on %s",
            tdm_device_str(e->device, a, sizeof a), tdm_device_str(s->device, b, sizeof b));
    }
    TDM_TRY(e->be->event_record(e->handle, stream_handle(s, e->device), e->device.index));
    e->recorded = true;
    return TDM_OK;
}

tdm_status tdm_event_synchronize(tdm_event *e) {
    if (!e) return tdm_error_set(TDM_ERR_ARG, "event_synchronize: event is NULL");
    if (!e->recorded) return TDM_OK;
    return e->be->event_synchronize(e->handle, e->device.index);
}

tdm_status tdm_event_query(tdm_event *e, bool *done) {
    if (!e || !done)
        return tdm_error_set(TDM_ERR_ARG, "event_query: %s is NULL", !e ? "event" : "done");
    *done = true;
    if (!e->recorded) return TDM_OK;
    return e->be->event_query(e->handle, e->device.index, done);
}

tdm_status tdm_event_elapsed_ms(const tdm_event *start, const tdm_event *end, double *ms) {
    if (!start || !end || !ms)
        return tdm_error_set(TDM_ERR_ARG, "event_elapsed_ms: %s is NULL",
                             !start ? "start"
                             : !end ? "end"
                                    : "ms");
    if (!tdm_device_equal(start->device, end->device)) {
        char a[32], b[32];
        return tdm_error_set(
            TDM_ERR_DEVICE, "event_elapsed_ms: the events are on different devices (%s and %s)",
            tdm_device_str(start->device, a, sizeof a), tdm_device_str(end->device, b, sizeof b));
    }
    if (!start->recorded || !end->recorded)
        return tdm_error_set(TDM_ERR_ARG,
                             "event_elapsed_ms: both events must be recorded first (%s is not)",
                             !start->recorded ? "start" : "end");
    return start->be->event_elapsed_ms(start->handle, end->handle, start->device.index, ms);
}

// ---- host memory -----------------------------------------------------------------------------

const char *tdm_host_kind_name(tdm_host_kind k) {
    static const char *const names[] = {"pageable", "pinned", "pinned_wc", "registered", "mapped"};
    return (unsigned)k < TDM_HOST_KIND_COUNT ? names[k] : "unknown";
}

// The backend that page-locks host memory for dev: its host slots, or NULL + error.
static const struct tdm_backend_ops *host_backend(const char *op, tdm_device dev) {
    const struct tdm_backend_ops *be = stream_backend(op, dev);
    if (be && (!be->host_alloc || !be->host_free)) {
        stream_unsupported(op, be);
        return NULL;
    }
    return be;
}

tdm_tensor *tdm_tensor_empty_host(int ndim, const int64_t *shape, tdm_dtype dt, tdm_host_kind kind,
                                  tdm_device dev) {
    if ((unsigned)kind >= TDM_HOST_KIND_COUNT) {
        tdm_error_set(TDM_ERR_ARG, "empty_host: unknown host memory kind %d", (int)kind);
        return NULL;
    }
    if (kind == TDM_HOST_PAGEABLE) return tdm_tensor_empty(ndim, shape, dt, TDM_CPU);
    const struct tdm_backend_ops *be = host_backend("empty_host", dev);
    return be ? tdm_tensor_empty_host_of(ndim, shape, dt, be, kind, dev.index) : NULL;
}

// Where pin_memory() pins: for cuda:0 when a CUDA device is there, else the reference stand-in.
tdm_device tdm_pin_device(void) {
    tdm_device cuda0 = {TDM_DEVICE_CUDA, 0};
    const struct tdm_backend_ops *be = tdm_backend_get(TDM_DEVICE_CUDA);
    bool ok = be && be->device_count() > 0 && be->host_alloc;
    tdm_error_clear();  // "no CUDA device" is not an error here
    return ok ? cuda0 : TDM_CPU;
}

tdm_tensor *tdm_tensor_pin_memory(const tdm_tensor *t) {
    if (tdm_check_tensor("pin_memory", "input", t) != TDM_OK) return NULL;
    if (t->device.type != TDM_DEVICE_CPU) {
        char d[32];
        tdm_error_set(TDM_ERR_DEVICE,
                      "pin_memory: cannot pin a tensor on %s: only cpu tensors can be pinned",
                      tdm_device_str(t->device, d, sizeof d));
        return NULL;
    }
    tdm_tensor *p =
        tdm_tensor_empty_host(t->ndim, t->shape, t->dtype, TDM_HOST_PINNED, tdm_pin_device());
    if (p) memcpy(tdm_data(p), tdm_data_c(t), tdm_tensor_nbytes(t));
    return p;
}

tdm_host_kind tdm_tensor_host_kind(const tdm_tensor *t) {
    return t && t->storage->host_backend ? t->storage->host_kind : TDM_HOST_PAGEABLE;
}

bool tdm_tensor_is_pinned(const tdm_tensor *t) {
    return tdm_tensor_host_kind(t) != TDM_HOST_PAGEABLE;
}

tdm_status tdm_host_memory_stats_get(tdm_device dev, tdm_host_memory_stats *out) {
    if (!out) return tdm_error_set(TDM_ERR_ARG, "host_memory_stats: out is NULL");
    const struct tdm_backend_ops *be = stream_backend("host_memory_stats", dev);
    if (!be) return tdm_last_status();
    if (!be->host_stats) return stream_unsupported("host_memory_stats", be);
    return be->host_stats(dev.index, out);
}

tdm_status tdm_host_memory_empty_cache(tdm_device dev) {
    const struct tdm_backend_ops *be = stream_backend("host_memory_empty_cache", dev);
    if (!be) return tdm_last_status();
    if (!be->host_empty_cache) return stream_unsupported("host_memory_empty_cache", be);
    return be->host_empty_cache(dev.index);
}

// ---- asynchronous copies -----------------------------------------------------------------------

static tdm_status copy_check(const char *op, const tdm_tensor *dst, const tdm_tensor *src) {
    TDM_TRY(tdm_check_tensor(op, "dst", dst));
    TDM_TRY(tdm_check_tensor(op, "src", src));
    if (dst->dtype != src->dtype)
        return tdm_error_set(TDM_ERR_DTYPE, "%s: dst has dtype %s, src %s (no conversion here)", op,
                             tdm_dtype_name(dst->dtype), tdm_dtype_name(src->dtype));
    bool same = dst->ndim == src->ndim;
    for (int i = 0; same && i < dst->ndim; i++) same = dst->shape[i] == src->shape[i];
    if (!same) {
        char a[96], b[96];
        return tdm_error_set(TDM_ERR_SHAPE, "%s: dst has shape %s, src %s", op,
                             tdm_shape_str(dst->ndim, dst->shape, a, sizeof a),
                             tdm_shape_str(src->ndim, src->shape, b, sizeof b));
    }
    return TDM_OK;
}

// The stream's device must be `dev` (the device that runs the copy).
static tdm_status copy_stream_check(const char *op, const tdm_stream *s, tdm_device dev) {
    if (!s || tdm_device_equal(s->device, dev)) return TDM_OK;
    char a[32], b[32];
    return tdm_error_set(TDM_ERR_DEVICE, "%s: the stream is on %s but the copy runs on %s", op,
                         tdm_device_str(s->device, a, sizeof a), tdm_device_str(dev, b, sizeof b));
}

tdm_status tdm_tensor_copy_async(tdm_tensor *dst, const tdm_tensor *src, tdm_stream *s) {
    TDM_TRY(copy_check("copy_async", dst, src));
    tdm_copy_dir dir;
    tdm_device dev;  // the device that runs the copy
    int peer = 0;
    bool dcpu = dst->device.type == TDM_DEVICE_CPU, scpu = src->device.type == TDM_DEVICE_CPU;
    if (dcpu && scpu)
        dir = TDM_COPY_H2H, dev = TDM_CPU;
    else if (scpu)
        dir = TDM_COPY_H2D, dev = dst->device;
    else if (dcpu)
        dir = TDM_COPY_D2H, dev = src->device;
    else
        dir = TDM_COPY_D2D, dev = dst->device, peer = src->device.index;
    TDM_TRY(copy_stream_check("copy_async", s, dev));
    size_t n = tdm_tensor_nbytes(dst);
    if (!n) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be) return tdm_last_status();
    if (!be->copy_async) return stream_unsupported("copy_async", be);
    return be->copy_async(tdm_data(dst), tdm_data_c(src), n, dir, dev.index, peer,
                          stream_handle(s, dev));
}

tdm_status tdm_tensor_copy_sm_async(tdm_tensor *dst, const tdm_tensor *src, tdm_stream *s) {
    TDM_TRY(copy_check("copy_sm_async", dst, src));
    bool dcpu = dst->device.type == TDM_DEVICE_CPU, scpu = src->device.type == TDM_DEVICE_CPU;
    tdm_device dev = !dcpu ? dst->device : !scpu ? src->device : s ? s->device : TDM_CPU;
    char a[32], b[32];
    if (!dcpu && !scpu && !tdm_device_equal(dst->device, src->device))
        return tdm_error_set(TDM_ERR_DEVICE,
                             "copy_sm_async: a copy kernel copies within one device, got %s "
                             "and %s",
                             tdm_device_str(src->device, a, sizeof a),
                             tdm_device_str(dst->device, b, sizeof b));
    TDM_TRY(copy_stream_check("copy_sm_async", s, dev));
    if (dev.type != TDM_DEVICE_CPU) {
        // the host sides must be visible to the device: mapped host memory
        const tdm_tensor *host[2] = {dcpu ? dst : NULL, scpu ? src : NULL};
        for (int i = 0; i < 2; i++)
            if (host[i] && tdm_tensor_host_kind(host[i]) != TDM_HOST_MAPPED)
                return tdm_error_set(TDM_ERR_ARG,
                                     "copy_sm_async: %s is %s host memory; a kernel on %s reads "
                                     "and writes host memory only when it is mapped",
                                     i ? "src" : "dst",
                                     tdm_host_kind_name(tdm_tensor_host_kind(host[i])),
                                     tdm_device_str(dev, a, sizeof a));
    }
    size_t n = tdm_tensor_nbytes(dst);
    if (!n) return TDM_OK;
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be) return tdm_last_status();
    if (!be->copy_sm_async) return stream_unsupported("copy_sm_async", be);
    return be->copy_sm_async(tdm_data(dst), tdm_data_c(src), n, dev.index, stream_handle(s, dev));
}

tdm_tensor *tdm_tensor_to_non_blocking(const tdm_tensor *t, tdm_device dev, tdm_dtype dt) {
    if (tdm_check_tensor("to_non_blocking", "input", t) != TDM_OK) return NULL;
    // A dtype change first, on t's device (what is freed below is safe to free at once: a device
    // block goes back to the pool of the stream the copy runs on, a pageable source is staged).
    tdm_tensor *conv = NULL;
    if (dt != t->dtype) {
        conv = tdm_tensor_empty(t->ndim, t->shape, dt, t->device);
        if (!conv || tdm_tensor_copy_(conv, t) != TDM_OK) {
            tdm_tensor_free(conv);
            return NULL;
        }
    }
    tdm_tensor *out = tdm_tensor_empty(t->ndim, t->shape, dt, dev);
    if (out && tdm_tensor_copy_async(out, conv ? conv : t, NULL) != TDM_OK) {
        tdm_tensor_free(out);
        out = NULL;
    }
    tdm_tensor_free(conv);
    return tdm_record_copy(out, t, "to");
}

// Bytes of src to dst, both on devices of one backend (cuda:i -> cuda:j), on the current stream
// of dst's device: tdm_tensor_copy_ without staging through the host. On one device the copy is
// stream-ordered like any kernel and not waited for (as PyTorch's; a step copies tensors without
// stopping the host); between two devices it is waited for. Unsupported (with no error set) when
// the backend has no copy_async: the caller stages instead.
tdm_status tdm_copy_device_to_device(tdm_tensor *dst, const tdm_tensor *src) {
    const struct tdm_backend_ops *be = tdm_backend_of(dst);
    if (!be->copy_async || !be->stream_synchronize || tdm_backend_of(src) != be)
        return TDM_ERR_UNSUPPORTED;
    void *h = stream_handle(NULL, dst->device);
    TDM_TRY(be->copy_async(tdm_data(dst), tdm_data_c(src), tdm_tensor_nbytes(dst), TDM_COPY_D2D,
                           dst->device.index, src->device.index, h));
    // Same device: ordered before the stream's later work (under graph capture too, where a
    // synchronization would break the capture).
    if (tdm_device_equal(dst->device, src->device)) return TDM_OK;
    return be->stream_synchronize(h, dst->device.index);
}
