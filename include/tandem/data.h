/* data.h — a data loader over an in-memory dataset, as torch.utils.data.DataLoader: batches of
 * (x, y) rows, a seeded shuffle per epoch (Fisher-Yates from the counter-based generator, so the
 * order is the same everywhere), drop_last, and worker threads that assemble the next batches
 * ahead of the consumer (a bounded queue of `prefetch` batches per worker). Batches come in
 * order, whatever the number of workers. */
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
} tdm_loader_params;

// x (N, ...) and y (N) on the cpu; the loader keeps references to both.
tdm_loader *tdm_loader_new(tdm_tensor *x, tdm_tensor *y, const tdm_loader_params *p);
// Starts epoch `epoch` (0-based): reshuffles and (re)starts the workers.
tdm_status tdm_loader_start_epoch(tdm_loader *l, int64_t epoch);
// The next batch of this epoch (new references), or false at its end (then *x = *y = NULL);
// false with tdm_last_status() != TDM_OK on an error.
bool tdm_loader_next(tdm_loader *l, tdm_tensor **x, tdm_tensor **y);
int64_t tdm_loader_num_batches(const tdm_loader *l);
void tdm_loader_free(tdm_loader *l);   // stops and joins the workers

#ifdef __cplusplus
}
#endif

#endif
