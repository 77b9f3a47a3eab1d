/* train_tokens.h — `bench train`'s token data for language models (gpt: specs): a safetensors
 * file with x and y (N,T) integer, llm.c's .bin token files, or a seeded synthetic stream, served
 * as (B,T) int64 batches of inputs and targets. */
#ifndef TANDEM_TRAIN_TOKENS_H
#define TANDEM_TRAIN_TOKENS_H

#include <stdint.h>

#include "tandem/tandem.h"

#define BENCH_LLMC_MAGIC 20240520  // llm.c's token files (dev/data/data_common.py), version 1
#define BENCH_LLMC_HEADER 256      // int32 words before the uint16 tokens

typedef struct {
    int64_t T;        // tokens per row (the sequence length)
    int64_t rows;     // rows before the data wrap around
    int64_t *x, *y;   // a safetensors file's x and y, (rows, T) each (targets -1: ignored)
    int32_t *stream;  // or a token stream (.bin, synthetic): row r is tokens [rT, rT+T) and its
    int64_t n_tok;    // targets [rT+1, rT+T+1), as llm.c's dataloader cuts (B,T+1) windows
} bench_tokens;

// --data PATH for a model of `vocab` tokens and `block_size` positions trained on batches of
// `batch` rows. PATH ending in .bin is an llm.c token file (header of 256 int32: magic 20240520,
// version 1, the token count; then uint16 tokens): rows of T = block_size; step i reads window
// i mod W of B*T+1 tokens, W = (tokens - 1) / (B*T), as llm.c's DataLoader without shuffling.
// Anything else is safetensors with x and y (N,T) int64 or int32, T <= block_size: step i takes
// rows [iB, (i+1)B) modulo N. Malformed files (a bad magic or version, a size that is not the
// header's, too few tokens, a token >= vocab, a target neither a token nor -1) are TDM_ERR_FORMAT
// with a message naming the file and the fault.
tdm_status bench_tokens_load(const char *path, int64_t vocab, int64_t block_size, int64_t batch,
                             bench_tokens *d);
// Without --data: a seeded stream in which each token is followed by its image under a random
// permutation of the vocabulary 3 times in 4, else by a uniform one (learnable: the loss falls
// from ln V towards the stream's entropy); rows of T = block_size.
tdm_status bench_tokens_synthetic(uint64_t seed, int64_t vocab, int64_t block_size, int64_t batch,
                                  bench_tokens *d);
// Rows [start, start + n) modulo d->rows as xb, yb (n,T) int64 on dev.
tdm_status bench_tokens_batch(const bench_tokens *d, int64_t start, int64_t n, tdm_device dev,
                              tdm_tensor **xb, tdm_tensor **yb);
void bench_tokens_free(bench_tokens *d);

#endif
