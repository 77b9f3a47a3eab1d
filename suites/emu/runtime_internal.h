/* runtime_internal.h — what the emulated CUDA runtime's own files share (not the interface between
 * the emulator's parts: that is emu.h). runtime.cc: the process state (switches, devices and their
 * properties, errors) and device and pinned host memory; runtime_streams.cc: streams and their
 * workers, events, graph capture and graphs; runtime_copy.cc: cudaMemcpy* and cudaMemset*. */
#ifndef TANDEM_EMU_RUNTIME_INTERNAL_H
#define TANDEM_EMU_RUNTIME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <memory>

#include "emu.h"

namespace tdm_emu {
namespace rt {

constexpr int kMaxDevices = 8;

// The switches of emu.h's header comment, read once; the first call also reserves the devices'
// arenas and installs the SIGSEGV/SIGBUS handler.
struct Config {
    int devices;          // TANDEM_EMU_DEVICES
    size_t mem;           // TANDEM_EMU_MEM: bytes per device
    bool sync;            // TANDEM_EMU_SYNC=1: work items run on the calling thread
    bool abort_on_fault;  // TANDEM_EMU_ABORT=1
};
const Config &config();

// ---- errors (runtime.cc) ----

// The sticky error of a fault on `device` (cudaSuccess while there was none): per device, as a
// GPU's context error. Without an argument: the device of the work item the calling thread runs,
// else its current device (context_device).
cudaError_t sticky_error(int device);
cudaError_t sticky_error();
int context_device();
// The device of the stream whose work item the calling thread runs (-1: none); run_item sets it.
extern __thread int tls_work_device;
// Records err as the calling thread's last error (unless cudaSuccess) and returns it.
cudaError_t fail(cudaError_t err);
// "tandem emu: <message>" on stderr: a diagnostic that is not a fault.
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// The name of the work item the calling thread runs (for the fault handler), or NULL. __thread,
// not thread_local: no TLS wrapper function (with one, GCC 12 -O2 + UBSan saw its address as null).
extern __thread const char *tls_work;

// cudaSetDevice without its checks (a stream's worker runs on the stream's device).
void set_current_device(int device);

// ---- device memory (runtime.cc) ----

// The device whose arena holds p, or -1 (not device memory).
int arena_device(const void *p);
// Where the device-memory address p lies, for a message: "inside a 4096-byte allocation on
// emulated cuda:0, offset 16", "in freed memory ...", "12 bytes past the end of ...".
void describe_address(const void *p, char *buf, size_t n);
// Why [p, p+n) (p in an arena) is not one live allocation, for a message.
void describe_range(const void *p, size_t n, char *buf, size_t len);

// Whether `device` may access `peer`'s memory directly (cudaDeviceEnablePeerAccess from it; a
// device always reaches its own): a copy between devices without it is staged through the host.
bool peer_access(int device, int peer);

// TANDEM_EMU_FLIP_BIT's stuck bit (runtime.cc): forces it in `device`'s memory, when it lies in a
// live allocation there; called inside an access scope after each work item of the device.
void stuck_bit_apply(int device);

// ---- streams (runtime_streams.cc) ----

struct Stream;
typedef std::shared_ptr<Stream> StreamRef;

// The stream a handle names (0 and cudaStreamLegacy: the current device's legacy default stream;
// cudaStreamPerThread: the calling thread's), or NULL for a handle that is not a live stream.
StreamRef stream_of(cudaStream_t handle);
int stream_device_of(const StreamRef &s);
bool stream_is_legacy(const StreamRef &s);
// Whether s is capturing (its capture may be invalidated already).
bool stream_capturing(const StreamRef &s);

// Runs fn in stream order on s, or records it into s's capture (the graph runs it at each
// launch). scoped: inside an access_scope (false for host functions, which must not touch device
// memory). *ticket (when not NULL) gets the position to wait for with stream_wait (0 when
// recorded). Errors: an invalidated capture, the legacy stream while a blocking stream of its
// device captures (that capture is invalidated).
cudaError_t stream_enqueue(const StreamRef &s, const char *what, std::function<void()> fn,
                           bool scoped, uint64_t *ticket);
// Waits until s has run its work up to ticket / all its work queued so far (no capture checks).
void stream_wait(const StreamRef &s, uint64_t ticket);
void stream_drain(const StreamRef &s);

// While s captures: the capture is invalidated (api names the call in the note on stderr) and
// cudaErrorStreamCaptureUnsupported is returned; otherwise cudaSuccess.
cudaError_t refuse_in_capture(const StreamRef &s, const char *api);

// A "potentially unsafe" call (cudaMalloc, a synchronization, a synchronous copy...): while the
// calling thread may not make one (its capture mode, cudaThreadExchangeStreamCaptureMode, and the
// captures running), the captures that forbid it are invalidated and
// cudaErrorStreamCaptureUnsupported is returned.
cudaError_t unsafe_call(const char *api);
// Legacy-stream use on `device` while one of its blocking streams captures: those captures are
// invalidated and cudaErrorStreamCaptureImplicit is returned.
cudaError_t legacy_use(int device, const char *api);

// Waits for the work queued so far on every stream of the device (no capture checks).
void device_drain(int device);

}  // namespace rt
}  // namespace tdm_emu

#endif
