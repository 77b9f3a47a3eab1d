/* nn.h — modules, as torch.nn: Linear, Conv2d, ReLU, GELU, MaxPool2d, AvgPool2d, Flatten, Dropout,
 * BatchNorm2d, LayerNorm, Embedding and Sequential, and nanoGPT's GPT-2 (weight tying included); a
 * model grammar for the command line; state dicts with PyTorch's names saved and loaded as
 * safetensors; activation checkpointing.
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

// GPT-2 as nanoGPT's model.py writes it (GPTConfig's fields; bias always true): wte + wpe, n_layer
// pre-LN blocks (ln_1, attn: c_attn Linear(C,3C) -> q, k, v (B,nh,T,C/nh) -> causal
// scaled_dot_product_attention -> c_proj, ln_2, mlp: c_fc Linear(C,4C), GELU, c_proj), ln_f and
// lm_head (no bias) tied to wte: one parameter under two state-dict names, its gradient the sum
// of both uses', listed once by tdm_module_parameters. Dropout (nanoGPT's `dropout`) after the
// embeddings, on the attention weights, after each residual projection and after the MLP.
// Input: token indices (B,T) int64, T <= block_size; output: logits (B,T,vocab_size). Init as
// nanoGPT's _init_weights from the module seed: N(0, 0.02) for Linear and Embedding weights,
// N(0, 0.02/sqrt(2 n_layer)) for the c_proj weights, zero biases, LayerNorms 1 and 0 (eps 1e-5).
// State dict: nanoGPT's names (transformer.wte.weight, transformer.h.0.ln_1.weight, ...,
// transformer.ln_f.bias, lm_head.weight).
typedef struct {
    int64_t n_layer, n_head, n_embd, block_size, vocab_size;
    double dropout;
    bool gelu_tanh;   // GELU(approximate='tanh') (GPT-2's, llm.c's) or the exact erf form
} tdm_gpt_config;
tdm_module *tdm_nn_gpt(const tdm_gpt_config *c);
// nanoGPT's loss: F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1), the
// mean over the targets that are not -1; logits (B,T,V), targets (B,T) integer.
tdm_tensor *tdm_gpt_loss(const tdm_tensor *logits, const tdm_tensor *targets);

// The model grammar (bench train --model), as an equivalent nn.Sequential:
//   mlp:D0-D1-...-Dk   Linear(D0,D1), ReLU, ..., Linear(Dk-1,Dk) (no ReLU after the last)
//   cnn:CxHxW/TOK-TOK-...  with TOK one of
//     cO[kK][sS][pP]  Conv2d(in, O, K=3, stride S=1, padding P=0, bias)
//     bn              BatchNorm2d(channels)        relu | gelu     activations
//     mpK[sS] apK[sS] MaxPool2d / AvgPool2d(K, stride S=K)
//     flat            Flatten                      fcN             Linear(in, N)
//     doP             Dropout(P)
//   gpt:TOK-TOK-...   tdm_nn_gpt, TOK each once, in any order: Ln n_layer, Hn n_head, Dn n_embd,
//                     Tn block_size, Vn vocab_size (all required); dropP dropout (default 0);
//                     erf: the exact GELU (default tanh). e.g. gpt:L2-H2-D32-T16-V67-drop0.1
// On a grammar error: NULL, and tdm_last_error() says which token and why.
tdm_module *tdm_nn_from_spec(const char *spec);
// The input shape a spec expects, without the batch dim (mlp: (D0); cnn: (C,H,W); gpt: (T), of
// int64 token indices).
tdm_status tdm_nn_spec_input_shape(const char *spec, int *ndim, int64_t *shape);
// A gpt: spec's config (TDM_ERR_ARG naming the token on a grammar error, or when not gpt:).
tdm_status tdm_nn_gpt_spec(const char *spec, tdm_gpt_config *c);

// ---- use ---------------------------------------------------------------------------------
// Re-draws every parameter (entry i of the state dict from the stream (seed, i)), resets the
// buffers (running stats, num_batches_tracked) and restarts the dropout streams.
tdm_status tdm_module_init(tdm_module *m, uint64_t seed);
// Leaves m as tdm_module_init(m, seed) would, by copying the state of src, a module of the same
// structure that tdm_module_init(src, seed) initialized (and that has not trained since), instead
// of drawing it again: the draw is in double on the host (the same weights on every device), at
// ~100 ns a parameter; a copy is a memcpy. TDM_ERR_ARG when the state dicts differ.
tdm_status tdm_module_init_copy(tdm_module *m, const tdm_module *src, uint64_t seed);
tdm_tensor *tdm_module_forward(tdm_module *m, const tdm_tensor *x);
// Moves m's random streams (Dropout's; a GPT attention's dropout when its p > 0) on as `forwards`
// training forwards would: a run resumed at step s with K micro-batches a step skips s K, so it
// draws the masks the uninterrupted run draws.
void tdm_module_rng_advance(tdm_module *m, uint64_t forwards);
void tdm_module_train(tdm_module *m, bool training);         // recursive; modules start in training
tdm_status tdm_module_to(tdm_module *m, tdm_device dev);     // moves parameters and buffers
void tdm_module_free(tdm_module *m);

// ---- parameters and state ----------------------------------------------------------------------
// Parameters in state_dict order (borrowed); returns the count (may exceed cap: call again). A
// tied parameter is listed once, where its first name is (PyTorch's named_parameters()).
int tdm_module_parameters(tdm_module *m, tdm_tensor **out, int cap);
// Every state entry (parameters and buffers: BatchNorm's running_mean, running_var and the i64
// num_batches_tracked) with PyTorch's state_dict names ("0.weight", "3.running_var"). Borrowed.
// A tied parameter appears under each of its names (the same tensor), as in state_dict().
int tdm_module_state(tdm_module *m, const char **names, tdm_tensor **tensors, int cap);
// Saves the state dict as safetensors (atomic), as safetensors.torch.save_model does: a tied
// tensor once, under the first of its names in sorted order ("lm_head.weight"), each other name
// a metadata entry naming it ("transformer.wte.weight": "lm_head.weight"); and "format": "pt".
// safetensors.torch.load_model, or load_file + those aliases + load_state_dict, loads it into
// the equivalent PyTorch model.
tdm_status tdm_module_save(tdm_module *m, const char *path);
// The same with n_extra more tensors beside the state (bench train --dump's `loss`).
tdm_status tdm_module_save_with(tdm_module *m, const char *path, int n_extra,
                                const char *const *extra_names, const tdm_tensor *const *extra);
// Loads a state dict (by name, converting dtype, onto the module's device). `prefix` is prepended
// to every name looked up (e.g. "init." for a golden training file; "" for a plain state dict).
// strict: every state entry must be present (but num_batches_tracked, which PyTorch's BatchNorm
// also lets a state dict omit: the module's value stays; and a tied tensor needs one of its
// names, two must hold equal values); extra file entries are ignored.
// Every entry is checked (presence, shape) before any is copied: a failed load changes nothing.
tdm_status tdm_module_load(tdm_module *m, const char *path, const char *prefix, bool strict);

// ---- activation checkpointing -------------------------------------------------------------------
// Splits a Sequential into `segments` contiguous segments whose activations are not kept: each
// segment's forward runs without recording, and its backward recomputes the segment with
// recording on (dropout draws the same mask again). 0 or 1 turns it off. On a GPT it splits
// the blocks (transformer.h): segments = n_layer checkpoints each block but the last. Same gradients, less
// peak memory. As torch.utils.checkpoint.checkpoint_sequential: segments of n / segments modules,
// all but the last checkpointed (the last, with the remainder, runs normally: backward needs its
// activations first); segments > n counts as n. BatchNorm's running statistics are updated once
// (the recomputation skips the update).
tdm_status tdm_sequential_set_checkpoint_segments(tdm_module *seq, int segments);

#ifdef __cplusplus
}
#endif

#endif
