/* random_impl.h — random streams with state inside core (core/random.c): tandem/tensor.h's
 * tdm_generator and nn's Dropout module (core/nn.c) draw through one of these, so that a step
 * captured in a CUDA graph draws fresh numbers at each replay: under capture a draw's offset is
 * `offset + *delta`, delta a device counter that a replay hook (core/graph_impl.h) rewrites
 * before each replay, while the host offset moves on by what one eager step draws. */
#ifndef TANDEM_CORE_RANDOM_IMPL_H
#define TANDEM_CORE_RANDOM_IMPL_H

#include "core/tensor_impl.h"

typedef struct {
    uint64_t seed, offset;   // offset: the next draw's
} tdm_philox_stream;

// tdm_tensor_rand / randn (normal) with st's (seed, offset); offset += 1.
tdm_tensor *tdm_stream_rand(tdm_philox_stream *st, int ndim, const int64_t *shape, tdm_dtype dt,
                            tdm_device dev, bool normal);
// tdm_dropout with st's (seed, offset); training: offset += 1 (also for p == 0).
tdm_tensor *tdm_stream_dropout(tdm_philox_stream *st, const tdm_tensor *x, double p,
                               bool training);
// st is going away: graphs that advance it refuse to replay.
void tdm_stream_release(tdm_philox_stream *st);
// The next draw of g for an op on dev that draws by itself (scaled_dot_product_attention's
// dropout): *seed and *offset the draw's, *delta NULL eagerly and the device counter under
// capture, as tdm_stream_dropout's. Moves nothing: the op moves g's offset on by one once it
// succeeded (tdm_generator_set_offset).
tdm_status tdm_generator_draw(tdm_generator *g, tdm_device dev, uint64_t *seed, uint64_t *offset,
                              const uint64_t **delta);

// core/ops_pointwise.c: dropout and its backward drawing at offset + *delta (device) when delta
// is not NULL (the backend's dropout_dev); the node keeps delta for the backward.
tdm_tensor *tdm_dropout_at(const tdm_tensor *x, double p, bool training, uint64_t seed,
                           uint64_t offset, const uint64_t *delta);
tdm_status tdm_dropout_backward_at(const tdm_tensor *gy, double p, bool training, uint64_t seed,
                                   uint64_t offset, const uint64_t *delta, tdm_tensor **gx);
// core/ops_attention.c: tdm_scaled_dot_product_attention_backward with the forward's dropout
// draw at offset + *delta (device) when delta is not NULL.
// The fused path's backward (core/ops_attention.c): from the forward's output y and its (batch,
// L) f32 log-sum-exp lse, all of gq, gk, gv computed (each pointer NULL when not wanted).
tdm_status tdm_sdpa_fused_backward_at(const tdm_tensor *gy, const tdm_tensor *q,
                                      const tdm_tensor *k, const tdm_tensor *v,
                                      const tdm_tensor *y, const tdm_tensor *lse, bool is_causal,
                                      double scale, tdm_tensor **gq, tdm_tensor **gk,
                                      tdm_tensor **gv);
tdm_status tdm_sdpa_backward_at(const tdm_tensor *gy, const tdm_tensor *q, const tdm_tensor *k,
                                const tdm_tensor *v, const tdm_tensor *attn_mask,
                                double dropout_p, bool is_causal, double scale, uint64_t seed,
                                uint64_t offset, const uint64_t *delta, tdm_tensor **gq,
                                tdm_tensor **gk, tdm_tensor **gv, tdm_tensor **gmask);

#endif
