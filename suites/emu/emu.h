/* emu.h — the emulated CUDA device's internal interface: what its parts (runtime.cc: memory,
 * streams, events, graphs; exec.cc: kernels as fibers; cublaslt.cc, cudnn.cc, nccl.cc: the vendor
 * libraries) call in one another. Test-only: built with -DTDM_CUDA_EMU=ON, never in place of the
 * real backend on a machine with a GPU. docs/EMULATION.md says what it proves and what it cannot.
 *
 * Model. Each emulated device has its own arena of "device memory" (one big mmap'd range; each
 * allocation has red zones poisoned for ASan and freed blocks are quarantined, so out-of-bounds
 * and use-after-free are reported). While no device work runs anywhere, the arenas are
 * PROT_NONE: host code that reads or writes device memory faults, as on a GPU, and the SIGSEGV
 * handler names the allocation. Each stream has a worker thread that runs its work items in order
 * (kernel launches, copies, memsets, library calls, event records, host waits); events order
 * streams as CUDA's do. TANDEM_EMU_SYNC=1 runs every work item on the calling thread instead.
 *
 * Switches (environment, read once): TANDEM_EMU_DEVICES (default 1, at most 8), TANDEM_EMU_SYNC,
 * TANDEM_EMU_ORDER=forward|reverse|random[:seed] (the order threads of a block run between
 * barriers), TANDEM_EMU_THREADS (OS threads that run blocks; default: the CPUs), TANDEM_EMU_MEM (bytes
 * of memory per device, default 4 GiB: the props are an A100's otherwise), TANDEM_EMU_ABORT=1
 * (abort at the first fault report instead of making the error sticky). */
#ifndef TANDEM_EMU_H
#define TANDEM_EMU_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include <functional>

namespace tdm_emu {

// ---- runtime.cc ----------------------------------------------------------------------------

int device_count();
int current_device();   // the calling host thread's (cudaSetDevice)
const cudaDeviceProp &device_props(int device);

// Runs `fn` in stream order on `stream` (0 / cudaStreamLegacy / cudaStreamPerThread as CUDA
// means them) of `stream`'s device, or, while `stream` captures, records it as a graph node
// (fn is then called once per cudaGraphLaunch). `what` names the work in reports ("kernel
// k_reduce_rows<float>", "cublasLtMatmul"). fn runs inside a device-access scope (the arenas are
// readable while it runs). Returns cudaSuccess, or the error a GPU would give (invalid stream, a
// capture invalidated by this call, a sticky error).
cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> fn);

// The device a stream belongs to (-1: not a live stream).
int stream_device(cudaStream_t stream);

// Device memory: whether [p, p+n) lies in one live allocation, and on which device.
bool device_range(const void *p, size_t n, int *device);
// Host memory the runtime knows (cudaHostAlloc / cudaMallocHost / cudaHostRegister).
bool pinned_range(const void *p, size_t n);

// Checks that a library call's operand [p, p+n) is device memory of `device` (a fault report
// naming `what` otherwise; returns false then).
bool check_device_range(const void *p, size_t n, int device, const char *what);

// A fault: printed on stderr ("tandem emu: <message>"), then the error is sticky: every later
// runtime call returns `err` (as after an illegal address on a GPU), or the process aborts with
// TANDEM_EMU_ABORT=1. Safe to call from any thread, kernels included.
void fault(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The calling host thread's last error (cudaGetLastError / cudaPeekAtLastError), for launch
// configuration errors and the like, which are not sticky.
void set_last_error(cudaError_t err);

// A device-access scope: the arenas stay readable while one exists on any thread. Work items
// run inside one; a library's host-side code that must read device memory (none should) opens
// one explicitly.
struct access_scope {
    access_scope();
    ~access_scope();
    access_scope(const access_scope &) = delete;
    access_scope &operator=(const access_scope &) = delete;
};

// ---- exec.cc -------------------------------------------------------------------------------

// Grid execution for a launch (called from a work item): every block once, blocks spread over
// the OS threads, the threads of a block as fibers. `body` runs one CUDA thread (it reads the
// thread's indices through cuda_emu.h's threadIdx & co). Validation of the configuration
// happens at launch (launch_check), not here.
void run_grid(const char *kernel, dim3 grid, dim3 block, size_t dynamic_smem,
              const std::function<void()> &body);

// The configuration checks a GPU makes at launch (threads per block, grid and block dims,
// dynamic shared memory past 48 KiB without cudaFuncSetAttribute): cudaSuccess or the error,
// with a message naming the kernel on stderr.
cudaError_t launch_check(const char *kernel, const void *func, dim3 grid, dim3 block,
                         size_t dynamic_smem);

// cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, n) records n here.
void set_max_dynamic_smem(const void *func, int bytes);

}   // namespace tdm_emu

#endif
