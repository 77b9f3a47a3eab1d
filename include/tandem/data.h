/* data.h — a data loader over an in-memory dataset, as torch.utils.data.DataLoader: batches of
 * (x, y) rows, a seeded shuffle per epoch (Fisher-Yates from the counter-based generator, so the
 * order is the same everywhere), drop_last, and worker threads that assemble the next batches
 * ahead of the consumer (a bounded queue of `prefetch` batches per worker). Batches come in
 * order, whatever the number of workers.
 *
 * Batch i of an epoch holds rows perm[i*B .. min((i+1)*B, N)) of x and y (B = batch_size); the
 * last, partial batch is dropped when drop_last. perm is 0..N-1 without shuffle; with shuffle it
 * is 0..N-1 permuted by Fisher-Yates over the Philox uniform stream (seed, offset = epoch) of
 * docs/CASE_FORMAT.md, bits(m) = tdm_philox_bits(seed, epoch, m) (32 bits):
 *     for k = 0 .. N-2:  i = N-1-k
 *                        r = bits(2k) << 32 | bits(2k+1)      (64 bits)
 *                        j = floor(r * (i+1) / 2^64)          (exact 128-bit product; 0 <= j <= i)
 *                        swap perm[i], perm[j]
 * In Python: bits = philox_uniform_bits(2*(N-1), seed, epoch) (suites/golden/gen_cases.py). */
#ifndef TANDEM_DATA_H
#define TANDEM_DATA_H

#include "tandem/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_loader tdm_loader;

typedef struct {
    int64_t batch_size;
    bool shuffle;
    bool drop_last;
    uint64_t seed;        // the shuffle of epoch e uses (seed, e)
    int workers;          // 0: batches are assembled by the caller's thread, on demand
    int prefetch;         // batches in flight per worker (default 2 when 0)
    tdm_device device;    // where batches are delivered (cpu; cuda:N with the CUDA backend)
    // DataLoader(pin_memory=True): batches are assembled in pinned host memory (tandem/stream.h:
    // for `device` when it is a CUDA device, else as tdm_tensor_pin_memory pins); delivered to a
    // CUDA device, they are copied without blocking on the consumer's current stream.
    bool pin_memory;
} tdm_loader_params;

// x (N, ...) of a floating dtype, or of i64/i32 token ids, and y (N) or (N, ...) of i64 or i32
// labels or targets (a GPT's (N, T) next tokens), both on the cpu; the loader keeps references to
// both. Batches keep their dtypes and every dim after the first.
tdm_loader *tdm_loader_new(tdm_tensor *x, tdm_tensor *y, const tdm_loader_params *p);
// Starts epoch `epoch` (0-based): reshuffles and (re)starts the workers.
tdm_status tdm_loader_start_epoch(tdm_loader *l, int64_t epoch);
// The next batch of this epoch (new references), or false at its end (then *x = *y = NULL);
// false with tdm_last_status() != TDM_OK on an error. Starts epoch 0 when no epoch was started.
bool tdm_loader_next(tdm_loader *l, tdm_tensor **x, tdm_tensor **y);
int64_t tdm_loader_num_batches(const tdm_loader *l);
void tdm_loader_free(tdm_loader *l);   // stops and joins the workers

#ifdef __cplusplus
}
#endif

#endif
