/* nn.h — modules, as torch.nn: Linear, Conv2d, ReLU, GELU, MaxPool2d, AvgPool2d, Flatten, Dropout,
 * BatchNorm2d, LayerNorm, Embedding and Sequential; a model grammar for the command line; state
 * dicts with PyTorch's names saved and loaded as safetensors; activation checkpointing.
 *
 * Ownership: a constructor returns a module the caller frees with tdm_module_free; a Sequential
 * takes ownership of its children. Parameters are leaves that require grad; their gradients are
 * read with tdm_tensor_grad. Initialisation follows PyTorch's defaults (kaiming_uniform(a=√5) for
 * weights, U(±1/√fan_in) for biases, N(0,1) for embeddings, ones/zeros for norms), drawn from the
 * counter-based generator: the same seed gives the same weights on every backend (not PyTorch's
 * numbers: load PyTorch's with tdm_module_load to start from them). */
#ifndef TANDEM_NN_H
#define TANDEM_NN_H

#include "tandem/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_module tdm_module;

// ---- constructors (f32 parameters on the cpu; NULL + error on bad sizes) -------------------
tdm_module *tdm_nn_linear(int64_t in_features, int64_t out_features, bool bias);
tdm_module *tdm_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                          const tdm_conv2d_params *p, bool bias);
tdm_module *tdm_nn_relu(void);
tdm_module *tdm_nn_gelu(bool approximate_tanh);
tdm_module *tdm_nn_max_pool2d(const tdm_pool2d_params *p);
tdm_module *tdm_nn_avg_pool2d(const tdm_pool2d_params *p);
tdm_module *tdm_nn_flatten(void);   // (N, ...) -> (N, prod)
tdm_module *tdm_nn_dropout(double p);
tdm_module *tdm_nn_batch_norm2d(int64_t channels, double eps, double momentum);
tdm_module *tdm_nn_layer_norm(int ndim, const int64_t *normalized_shape, double eps);
tdm_module *tdm_nn_embedding(int64_t num_embeddings, int64_t dim);
// Takes ownership of the n children (also on failure), and redraws their parameters as
// tdm_module_init(seq, 0) does, so a model's initial weights depend only on its structure and seed.
tdm_module *tdm_nn_sequential(int n, tdm_module *const *children);

// The model grammar (bench train --model), as an equivalent nn.Sequential:
//   mlp:D0-D1-...-Dk   Linear(D0,D1), ReLU, ..., Linear(Dk-1,Dk) (no ReLU after the last)
//   cnn:CxHxW/TOK-TOK-...  with TOK one of
//     cO[kK][sS][pP]  Conv2d(in, O, K=3, stride S=1, padding P=0, bias)
//     bn              BatchNorm2d(channels)        relu | gelu     activations
//     mpK[sS] apK[sS] MaxPool2d / AvgPool2d(K, stride S=K)
//     flat            Flatten                      fcN             Linear(in, N)
//     doP             Dropout(P)
// On a grammar error: NULL, and tdm_last_error() says which token and why.
tdm_module *tdm_nn_from_spec(const char *spec);
// The input shape a spec expects, without the batch dim (mlp: (D0); cnn: (C,H,W)).
tdm_status tdm_nn_spec_input_shape(const char *spec, int *ndim, int64_t *shape);

// ---- use ---------------------------------------------------------------------------------
// Re-draws every parameter (entry i of the state dict from the stream (seed, i)), resets the
// buffers (running stats, num_batches_tracked) and restarts the dropout streams.
tdm_status tdm_module_init(tdm_module *m, uint64_t seed);
tdm_tensor *tdm_module_forward(tdm_module *m, const tdm_tensor *x);
void tdm_module_train(tdm_module *m, bool training);         // recursive; modules start in training
tdm_status tdm_module_to(tdm_module *m, tdm_device dev);     // moves parameters and buffers
void tdm_module_free(tdm_module *m);

// ---- parameters and state ----------------------------------------------------------------------
// Parameters in state_dict order (borrowed); returns the count (may exceed cap: call again).
int tdm_module_parameters(tdm_module *m, tdm_tensor **out, int cap);
// Every state entry (parameters and buffers: BatchNorm's running_mean, running_var and the i64
// num_batches_tracked) with PyTorch's state_dict names ("0.weight", "3.running_var"). Borrowed.
int tdm_module_state(tdm_module *m, const char **names, tdm_tensor **tensors, int cap);
// Saves the state dict as safetensors (atomic): safetensors.torch.load_file + load_state_dict
// loads it into the equivalent PyTorch model.
tdm_status tdm_module_save(tdm_module *m, const char *path);
// Loads a state dict (by name, converting dtype, onto the module's device). `prefix` is prepended
// to every name looked up (e.g. "init." for a golden training file; "" for a plain state dict).
// strict: every state entry must be present (but num_batches_tracked, which PyTorch's BatchNorm
// also lets a state dict omit: the module's value stays); extra file entries are ignored.
// Every entry is checked (presence, shape) before any is copied: a failed load changes nothing.
tdm_status tdm_module_load(tdm_module *m, const char *path, const char *prefix, bool strict);

// ---- activation checkpointing -------------------------------------------------------------------
// Splits a Sequential into `segments` contiguous segments whose activations are not kept: each
// segment's forward runs without recording, and its backward recomputes the segment with
// recording on (dropout draws the same mask again). 0 or 1 turns it off. Same gradients, less
// peak memory. As torch.utils.checkpoint.checkpoint_sequential: segments of n / segments modules,
// all but the last checkpointed (the last, with the remainder, runs normally: backward needs its
// activations first); segments > n counts as n. BatchNorm's running statistics are updated once
// (the recomputation skips the update).
tdm_status tdm_sequential_set_checkpoint_segments(tdm_module *seq, int segments);

#ifdef __cplusplus
}
#endif

#endif
