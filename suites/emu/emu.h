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
 * TANDEM_EMU_ORDER=forward|reverse|random[:seed]|warp (the order threads of a block run between
 * barriers), TANDEM_EMU_THREADS (OS threads that run blocks; default: the CPUs), TANDEM_EMU_MEM (bytes
 * of memory per device, default 4 GiB: the props are an A100's otherwise), TANDEM_EMU_ABORT=1
 * (abort at the first fault report instead of making the error sticky). A malformed value is
 * ignored with one line on stderr and the default used (env_number below). */
#ifndef TANDEM_EMU_H
#define TANDEM_EMU_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include <atomic>
#include <functional>

namespace tdm_emu {

// ---- runtime.cc ----------------------------------------------------------------------------

// The environment, parsed strictly (the C++ twin of core/env_impl.h): a number is decimal digits
// only (no sign, space, base prefix or trailing text; "" is not one), from lo to hi, an overflow
// out of range; env_bytes allows one K, M or G suffix (binary), the product checked against hi,
// never wrapped; a switch is 0 or 1. Unset: def. Malformed: def, with one line on stderr naming
// the variable, its value, what is expected and the value used.
bool parse_number(const char *s, unsigned long long lo, unsigned long long hi,
                  unsigned long long *out);
unsigned long long env_number(const char *name, unsigned long long lo, unsigned long long hi,
                              unsigned long long def);
unsigned long long env_bytes(const char *name, unsigned long long lo, unsigned long long hi,
                             unsigned long long def);
bool env_flag(const char *name, bool def);

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

// A fault: printed on stderr ("tandem emu: <message>"), then the error is sticky on its device:
// every later runtime call on that device returns `err` (as after an illegal address on a GPU,
// whose context error is per device: the other devices keep working), or the process aborts
// with TANDEM_EMU_ABORT=1. fault's device is that of the work item the calling thread runs (a
// kernel's, a copy's, a library call's), else the thread's current device; fault_on names it.
// Safe to call from any thread, kernels included.
void fault(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fault_on(int device, cudaError_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

// ---- nccl.cc -------------------------------------------------------------------------------

// Collectives of `device`'s communicators queued on a stream and not yet completed (running, or
// waiting for their peers); *id and *rank (when not NULL) name the first such communicator's
// unique id number and rank, for a message. cudaFree and cudaMalloc fault while it is not 0.
int collectives_pending(int device, unsigned long long *id, int *rank);

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

// Which thread of the block the calling OS thread runs now (x fastest), -1 outside a kernel.
int current_block_thread();

// ---- counters.cc ---------------------------------------------------------------------------
// What kernels move and issue, counted as Nsight Compute counts it (counters.cc's header comment,
// docs/EMULATION.md "Counters"): on with TANDEM_EMU_COUNTERS=FILE or tdm_emu_counters_enable.

struct mem_counters {      // global loads or stores
    unsigned long long requests = 0, sectors = 0, bytes = 0;   // bytes: as requested
    unsigned long long unique = 0;   // distinct bytes touched, per launch, summed
};
struct shared_counters {   // shared-memory loads or stores, or ldmatrix
    unsigned long long requests = 0, wavefronts = 0, conflicts = 0, max_ways = 0, bytes = 0;
};
struct kernel_counters {
    unsigned long long launches = 0, blocks = 0, threads = 0;
    mem_counters global_ld, global_st;
    shared_counters shared_ld, shared_st, ldmatrix_sh;
    unsigned long long atom_global = 0, atom_shared = 0, mma = 0, ldmatrix = 0;
};
void counters_add(kernel_counters &a, const kernel_counters &b);

bool counters_on();   // read at each launch
// A launch's counters (run_grid): begin before its blocks, end after (folds them into the
// kernel's totals and frees the launch's); between, each block begins and ends on its OS thread.
void *counters_launch_begin(const char *kernel, dim3 grid, dim3 block);
void counters_launch_end(void *launch);
void counters_block_begin(void *launch);
void counters_block_end();
// A completed tensor-core instruction (tensor_core.cc): its operands as tc_complete has them,
// for ldmatrix how many 8x8 matrices it loads, and the warp's first thread in the block.
void counters_tensor_op(int op, const void *const in[32], int matrices, int warp_base);

// What the kernels' instrumented loads and stores go to while a block runs (counters.cc's
// __asan_load/__asan_store): bit 1 the counters, bit 2 racecheck. 0 (the rule): nothing.
extern __thread int tl_watch;

// ---- racecheck.cc --------------------------------------------------------------------------
// Shared-memory hazards between warps with no __syncthreads between (racecheck.cc's header
// comment, docs/EMULATION.md "Racecheck"): on with TANDEM_EMU_RACECHECK=1.
bool racecheck_on();   // read at each launch
void racecheck_block_begin(const char *kernel, uint3 block, uint3 dim,
                           std::atomic<bool> *reported);
void racecheck_block_end();
void racecheck_barrier();   // a __syncthreads of the block completed
// A shared-memory access of `thread` (in the block) while a checked block runs.
void racecheck_access(const void *p, size_t n, bool store, int thread);

// ---- shared_mem.cc -------------------------------------------------------------------------

// Whether p lies in the calling OS thread's shared memory (a __shared__ variable of its block).
bool shared_address(const void *p);
// p's byte in a numbering of all shared memory from 0 to shared_total() - 1 (-1: not shared).
long shared_index(const void *p);
size_t shared_total();

// Fills the calling OS thread's copy of every __shared__ variable (cuda_emu.h) with 0xFF bytes:
// exec.cc calls it at the start of each block, whose shared memory is then garbage as on a GPU.
void poison_shared();

}   // namespace tdm_emu

#endif
