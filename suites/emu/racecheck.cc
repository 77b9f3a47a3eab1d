/* racecheck.cc — shared-memory races that a thread order can hide, found whatever the order
 * (docs/EMULATION.md "Racecheck"), as compute-sanitizer's racecheck finds them on a GPU. On with
 * TANDEM_EMU_RACECHECK=1 (or tdm_emu_racecheck_enable in a test).
 *
 * Why. The scheduler (exec.cc) advances the warps of a block in step at every warp operation, so
 * a kernel that refills a shared buffer without the __syncthreads that ends the reads of it
 * passes whenever those last reads are warp-collective (ldmatrix, mma): every warp has read
 * before any writes. On a GPU warps are independent and the refill can overwrite what a slower
 * warp has yet to read.
 *
 * The rule. Between two __syncthreads of a block (an epoch), two accesses to the same byte of
 * shared memory by threads of different warps, at least one of them a write, are a hazard: a
 * read then a write (WAR), a write then a read (RAW), two writes (WAW). Nothing orders them but
 * the barrier. Accesses within one warp are not checked (its lanes are ordered by the warp's own
 * synchronization, which is not modelled here), nor are atomics (they do not race).
 *
 * How. The loads and stores are the ones counters.cc sees (AddressSanitizer's calls from the
 * kernels' code); ldmatrix's rows are reads of their lanes (tensor_core.cc). Each byte of shared
 * memory has a cell: the last epoch and thread that wrote it, the last epoch it was read in and
 * by which thread, and a second reader of another warp in that epoch. A cell belongs to the block
 * that last touched it (a serial per OS thread), so nothing is cleared between blocks. The first
 * hazard of a launch is a fault (fault(): the error sticky, or an abort with TANDEM_EMU_ABORT=1)
 * naming the kernel, the block, the address and both threads.
 *
 * Cost: a cell of 16 bytes per byte of shared memory per OS thread, and a lookup per shared
 * access of a checked kernel. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <memory>
#include <vector>

#include "cuda_emu.h"
#include "runtime_internal.h"

namespace tdm_emu {

namespace {

struct cell {
    uint32_t block;     // the block serial that last touched it (others: untouched)
    uint32_t w_epoch;   // last write's epoch (0: none in this block)
    uint32_t r_epoch;   // last read's epoch
    uint16_t w_thread;  // the writer
    uint16_t r_thread;  // a reader in r_epoch
    uint16_t r_other;   // a reader of another warp than r_thread's in r_epoch (0xffff: none)
    uint16_t pad;
};

struct race_block {
    const char *kernel;
    uint3 block, dim;
    uint32_t serial, epoch;
    std::atomic<bool> *reported;  // the launch's: one report per launch
    std::vector<cell> cells;      // per byte of shared memory (shared_index)
};

std::atomic<bool> g_on{env_flag("TANDEM_EMU_RACECHECK", false)};
__thread race_block *tl_race;
__thread uint32_t tl_serial;

uint3 coords(unsigned t, uint3 dim) {
    return uint3{t % dim.x, (t / dim.x) % dim.y, t / (dim.x * dim.y)};
}

void report(race_block &b, const char *kind, const void *p, unsigned first, bool first_wrote,
            unsigned second, bool second_wrote) {
    if (b.reported->exchange(true)) return;
    const uint3 a = coords(first, b.dim), c = coords(second, b.dim);
    fault(cudaErrorLaunchFailure,
          "racecheck: kernel %s, block (%u,%u,%u): %s hazard on shared memory at %p: thread "
          "(%u,%u,%u) (warp %u) %s it and thread (%u,%u,%u) (warp %u) %s it with no "
          "__syncthreads between (epoch %u of the block)",
          b.kernel, b.block.x, b.block.y, b.block.z, kind, p, a.x, a.y, a.z, first / 32,
          first_wrote ? "wrote" : "read", c.x, c.y, c.z, second / 32,
          second_wrote ? "writes" : "reads", b.epoch);
}

}  // namespace

bool racecheck_on() {
    return g_on.load(std::memory_order_relaxed);
}

void racecheck_block_begin(const char *kernel, uint3 block, uint3 dim,
                           std::atomic<bool> *reported) {
    static thread_local std::unique_ptr<race_block> owner;  // freed as the OS thread ends
    if (!owner) owner.reset(new race_block);
    race_block *mine = owner.get();
    mine->kernel = kernel;
    mine->block = block;
    mine->dim = dim;
    mine->serial = ++tl_serial;
    if (mine->serial == 0) {  // wrapped: forget every cell
        std::fill(mine->cells.begin(), mine->cells.end(), cell{});
        mine->serial = tl_serial = 1;
    }
    mine->epoch = 1;
    mine->reported = reported;
    const size_t total = shared_total();
    if (mine->cells.size() < total) mine->cells.resize(total, cell{});
    tl_race = mine;
    tl_watch |= 2;
}

void racecheck_block_end() {
    tl_race = nullptr;
    tl_watch &= ~2;
}

void racecheck_barrier() {
    if (tl_race) tl_race->epoch++;
}

void racecheck_access(const void *p, size_t n, bool store, int thread) {
    race_block *b = tl_race;
    if (!b || thread < 0) return;
    const long base = shared_index(p);
    if (base < 0) return;
    const unsigned t = (unsigned)thread, w = t / 32;
    for (size_t i = 0; i < n && (size_t)base + i < b->cells.size(); i++) {
        cell &c = b->cells[(size_t)base + i];
        if (c.block != b->serial) c = cell{b->serial, 0, 0, 0, 0, 0xffff, 0};
        const bool wrote_now = c.w_epoch == b->epoch;
        if (store) {
            if (wrote_now && c.w_thread / 32u != w)
                report(*b, "write-after-write", (const char *)p + i, c.w_thread, true, t, true);
            if (c.r_epoch == b->epoch) {
                if (c.r_thread / 32u != w)
                    report(*b, "write-after-read", (const char *)p + i, c.r_thread, false, t, true);
                else if (c.r_other != 0xffff)
                    report(*b, "write-after-read", (const char *)p + i, c.r_other, false, t, true);
            }
            c.w_epoch = b->epoch;
            c.w_thread = (uint16_t)t;
        } else {
            if (wrote_now && c.w_thread / 32u != w)
                report(*b, "read-after-write", (const char *)p + i, c.w_thread, true, t, false);
            if (c.r_epoch != b->epoch) {
                c.r_epoch = b->epoch;
                c.r_thread = (uint16_t)t;
                c.r_other = 0xffff;
            } else if (c.r_thread / 32u != w && c.r_other == 0xffff) {
                c.r_other = (uint16_t)t;
            }
        }
    }
}

}  // namespace tdm_emu

// For tests (not a CUDA API): racecheck on (1) or off (0) for the launches that start after it.
extern "C" void tdm_emu_racecheck_enable(int on) {
    tdm_emu::g_on.store(on != 0);
}
