/* runtime_copy.cc — the emulated CUDA runtime's copies and memsets: cudaMemcpy, cudaMemcpyAsync,
 * cudaMemcpyPeer(Async), cudaMemset(Async).
 *
 * A copy between two devices runs directly when the device of its stream has peer access to both
 * (cudaDeviceEnablePeerAccess, which the runtime docs make one-way: from the current device to
 * the peer's memory); without it the driver stages it through host memory — correct, but at a
 * fraction of the link's speed. Such staged copies are counted (tdm_emu_staged_peer_copies, not
 * a CUDA API) and the first is named on stderr, so a test can assert that none are made.
 *
 * Each call first checks its pointers as a GPU would: against the kind (cudaMemcpyHostToDevice
 * with a device source is cudaErrorInvalidValue, with a message; cudaMemcpyDefault infers the
 * kind), then the device side's bounds (a range that is not inside one live allocation is a fault:
 * the error becomes sticky, as an illegal address on a GPU). The copy then runs in stream order,
 * with CUDA's host synchronization (docs: "API synchronization behavior"):
 *   cudaMemcpyAsync: from pageable host memory, the bytes are staged at the call (the buffer may be
 *     reused at once); to pageable host memory, and host to host, the call waits for the copy;
 *     with pinned memory nothing waits: reading the destination before a synchronization sees
 *     stale bytes, as on a GPU.
 *   cudaMemcpy (the legacy stream): host to device from pageable memory is staged after the legacy
 *     stream's earlier work; from pinned memory, device to host and host to host wait for the
 *     copy; device to device does not wait.
 *   cudaMemset: asynchronous on the legacy stream (on pinned host memory: waits).
 * Captured copies may not touch pageable host memory (the graph would replay a staging that was
 * done once): cudaErrorStreamCaptureUnsupported. */
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <vector>

#include "runtime_internal.h"

using namespace tdm_emu;
using namespace tdm_emu::rt;

namespace {

enum Space { PAGEABLE, PINNED, DEVICE };

const char *space_name(Space s) {
    return s == DEVICE ? "device memory" : s == PINNED ? "pinned host memory"
                                                       : "pageable host memory";
}

Space space_of(const void *p, size_t n, int *device) {
    *device = arena_device(p);
    if (*device >= 0) return DEVICE;
    return pinned_range(p, n) ? PINNED : PAGEABLE;
}

const char *kind_name(cudaMemcpyKind k) {
    switch (k) {
        case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
        case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
        case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
        case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
        case cudaMemcpyDefault: return "cudaMemcpyDefault";
    }
    return "an unknown kind";
}

// The device side of a copy or memset: [p, p+n) inside one live allocation, else a fault.
cudaError_t check_device_side(const char *api, const char *role, const void *p, size_t n) {
    if (device_range(p, n, nullptr)) return cudaSuccess;
    char why[300];
    describe_range(p, n, why, sizeof why);
    fault(cudaErrorIllegalAddress,
          "%s: the %s range [%p, +%zu bytes) is not inside one live device allocation: %s; a GPU "
          "would fault",
          api, role, p, n, why);
    return cudaErrorIllegalAddress;
}

// A pointer given as one side of `kind`: `want_device` says whether the kind names device memory
// there. Device memory where host memory is named, or pageable memory where device memory is
// named, is refused (pinned memory is mapped: it may stand on either side).
cudaError_t check_side(const char *api, cudaMemcpyKind kind, const char *role, const void *p,
                       Space sp, int device, bool want_device) {
    if (want_device ? sp != PAGEABLE : sp != DEVICE) return cudaSuccess;
    if (sp == DEVICE)
        say("%s(kind %s): the %s %p is device memory of emulated cuda:%d, not host memory", api,
            kind_name(kind), role, p, device);
    else
        say("%s(kind %s): the %s %p is %s, not device memory", api, kind_name(kind), role, p,
            space_name(sp));
    return cudaErrorInvalidValue;
}

std::atomic<unsigned long long> g_staged_peer_copies{0};

// A copy between src_device and dst_device on a stream of stream_device: counted (and the first
// one named) when that device lacks peer access to either side.
void note_peer_copy(const char *api, int stream_device, int src_device, int dst_device,
                    size_t n) {
    if (src_device == dst_device) return;
    if (peer_access(stream_device, src_device) && peer_access(stream_device, dst_device)) return;
    if (g_staged_peer_copies.fetch_add(1) == 0)
        say("%s: cuda:%d to cuda:%d (%zu bytes) on a stream of cuda:%d without peer access "
            "(cudaDeviceEnablePeerAccess): staged through host memory, as a driver does",
            api, src_device, dst_device, n, stream_device);
}

cudaError_t copy(const char *api, void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                 cudaStream_t stream, bool sync_api) {
    config();
    if (cudaError_t e = sticky_error()) return e;
    if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyHostToDevice &&
        kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
        kind != cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection);
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return fail(cudaErrorInvalidValue);
    int dd, sd;
    Space ds = space_of(dst, n, &dd), ss = space_of(src, n, &sd);
    // which side the kind calls device memory (Default: what the pointers are)
    bool src_dev = kind == cudaMemcpyDefault ? ss == DEVICE
                                             : kind == cudaMemcpyDeviceToHost ||
                                                   kind == cudaMemcpyDeviceToDevice;
    bool dst_dev = kind == cudaMemcpyDefault ? ds == DEVICE
                                             : kind == cudaMemcpyHostToDevice ||
                                                   kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault) {
        if (cudaError_t e = check_side(api, kind, "source", src, ss, sd, src_dev)) return fail(e);
        if (cudaError_t e = check_side(api, kind, "destination", dst, ds, dd, dst_dev))
            return fail(e);
    }
    if (ss == DEVICE)
        if (cudaError_t e = check_device_side(api, "source", src, n)) return e;
    if (ds == DEVICE)
        if (cudaError_t e = check_device_side(api, "destination", dst, n)) return e;

    if (sync_api)
        if (cudaError_t e = unsafe_call(api)) return fail(e);
    StreamRef s = stream_of(stream);
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    if (ss == PAGEABLE || ds == PAGEABLE)
        if (cudaError_t e = refuse_in_capture(s, api)) return fail(e);

    if (ss == DEVICE && ds == DEVICE) note_peer_copy(api, stream_device_of(s), sd, dd, n);
    bool staged = !src_dev && ss == PAGEABLE && dst_dev;   // host to device from pageable memory
    bool wait;   // the call returns when the copy is done
    if (sync_api)
        wait = !(dst_dev && (src_dev || staged));
    else
        wait = (!dst_dev && ds == PAGEABLE && src_dev) || (!src_dev && !dst_dev);
    if (staged && sync_api) {
        // cudaMemcpy from pageable memory: the legacy stream's earlier work first
        if (cudaError_t e = legacy_use(stream_device_of(s), api)) return fail(e);
        stream_drain(s);
    }

    char what[160];
    snprintf(what, sizeof what, "%s (%s, %zu bytes)", api, kind_name(kind), n);
    std::function<void()> fn;
    if (staged) {
        auto buf = std::make_shared<std::vector<unsigned char>>((const unsigned char *)src,
                                                                (const unsigned char *)src + n);
        fn = [dst, buf] { memcpy(dst, buf->data(), buf->size()); };
    } else {
        fn = [dst, src, n] { memmove(dst, src, n); };
    }
    uint64_t ticket = 0;
    if (cudaError_t e = stream_enqueue(s, what, std::move(fn), true, &ticket)) return fail(e);
    if (wait && ticket) {
        stream_wait(s, ticket);
        return sticky_error(stream_device_of(s));
    }
    return cudaSuccess;
}

cudaError_t memset_(const char *api, void *p, int value, size_t n, cudaStream_t stream,
                    bool sync_api) {
    config();
    if (cudaError_t e = sticky_error()) return e;
    if (n == 0) return cudaSuccess;
    int d;
    Space sp = space_of(p, n, &d);
    if (sp == PAGEABLE) {
        say("%s: %p is pageable host memory, not device memory", api, p);
        return fail(cudaErrorInvalidValue);
    }
    if (sp == DEVICE)
        if (cudaError_t e = check_device_side(api, "destination", p, n)) return e;
    if (sync_api)
        if (cudaError_t e = unsafe_call(api)) return fail(e);
    StreamRef s = stream_of(stream);
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    char what[120];
    snprintf(what, sizeof what, "%s (%zu bytes)", api, n);
    unsigned char byte = (unsigned char)value;
    uint64_t ticket = 0;
    if (cudaError_t e = stream_enqueue(s, what, [p, byte, n] { memset(p, byte, n); }, true,
                                       &ticket))
        return fail(e);
    if (sync_api && sp == PINNED && ticket) {
        stream_wait(s, ticket);
        return sticky_error(stream_device_of(s));
    }
    return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
    return copy("cudaMemcpy", dst, src, count, kind, cudaStreamLegacy, true);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    return copy("cudaMemcpyAsync", dst, src, count, kind, stream, false);
}

cudaError_t cudaMemset(void *p, int value, size_t count) {
    return memset_("cudaMemset", p, value, count, cudaStreamLegacy, true);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t count, cudaStream_t stream) {
    return memset_("cudaMemsetAsync", p, value, count, stream, false);
}

// dst on dst_device = src on src_device, in the order of `stream` (no peer access needed).
cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device,
                                size_t count, cudaStream_t stream) {
    const char *api = "cudaMemcpyPeerAsync";
    const Config &cfg = config();
    if (cudaError_t e = sticky_error()) return e;
    if (dst_device < 0 || dst_device >= cfg.devices || src_device < 0 ||
        src_device >= cfg.devices)
        return fail(cudaErrorInvalidDevice);
    if (count == 0) return cudaSuccess;
    const struct {
        const char *role;
        const void *p;
        int device;
    } sides[2] = {{"destination", dst, dst_device}, {"source", src, src_device}};
    for (const auto &side : sides) {
        int d = arena_device(side.p);
        if (d < 0) {
            say("%s: the %s %p is not device memory", api, side.role, side.p);
            return fail(cudaErrorInvalidValue);
        }
        if (d != side.device) {
            say("%s: the %s %p is memory of emulated cuda:%d, not of cuda:%d", api, side.role,
                side.p, d, side.device);
            return fail(cudaErrorInvalidValue);
        }
        if (cudaError_t e = check_device_side(api, side.role, side.p, count)) return e;
    }
    StreamRef s = stream_of(stream);
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    char what[120];
    note_peer_copy(api, stream_device_of(s), src_device, dst_device, count);
    snprintf(what, sizeof what, "%s (cuda:%d to cuda:%d, %zu bytes)", api, src_device, dst_device,
             count);
    return fail(stream_enqueue(s, what, [dst, src, count] { memmove(dst, src, count); }, true,
                               nullptr));
}

unsigned long long tdm_emu_staged_peer_copies(void) { return g_staged_peer_copies.load(); }

cudaError_t cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device,
                           size_t count) {
    if (cudaError_t e = unsafe_call("cudaMemcpyPeer")) return fail(e);
    cudaError_t e = cudaMemcpyPeerAsync(dst, dst_device, src, src_device, count, cudaStreamLegacy);
    if (e) return e;
    return cudaStreamSynchronize(cudaStreamLegacy);
}

}  // extern "C"
