/* autograd.h — PyTorch's eager autograd, in C. A tensor that requires grad (a leaf: a parameter)
 * or that was computed from one while grad mode is on remembers the op that produced it (its
 * grad_fn); tdm_backward(loss) runs the recorded backward functions in reverse topological order
 * and accumulates gradients into the leaves' .grad, until they are cleared. Every op of ops.h
 * records itself, as do tdm_tensor_reshape, the views of tensor.h (view, transpose, narrow, ...)
 * and tdm_tensor_to (dtype casts, e.g. under autocast).
 *
 * Ownership: a tensor owns a reference to its grad_fn, a node owns references to the tensors it
 * saved, never to its own outputs (no cycles): freeing the loss frees the graph.
 * Not tracked: in-place modification of a tensor saved for backward (PyTorch's version counter);
 * tandem's only in-place ops are optimizer steps and running statistics, outside any graph. */
#ifndef TANDEM_AUTOGRAD_H
#define TANDEM_AUTOGRAD_H

#include "tandem/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

void tdm_tensor_set_requires_grad(tdm_tensor *t, bool requires_grad);   // leaves only
bool tdm_tensor_requires_grad(const tdm_tensor *t);
bool tdm_tensor_is_leaf(const tdm_tensor *t);
// The accumulated gradient (borrowed), or NULL before any backward reached it / after clearing.
tdm_tensor *tdm_tensor_grad(const tdm_tensor *t);
// Replaces the gradient (takes a new reference to `grad`; NULL clears, like zero_grad(set_to_none)).
tdm_status tdm_tensor_set_grad(tdm_tensor *t, tdm_tensor *grad);
// A tensor sharing t's storage, without history and not requiring grad.
tdm_tensor *tdm_tensor_detach(const tdm_tensor *t);
// The name of the op that produced t ("linear", ...), or NULL for a leaf.
const char *tdm_tensor_grad_fn_name(const tdm_tensor *t);

// Backpropagates from `root`: grad_output NULL means 1 (root must then have one element).
// Gradients accumulate (+=) into every leaf that requires grad. The graph stays usable for a
// second backward as long as its tensors live. Backward functions run with grad mode off (they
// record nothing); autocast is left as it is. Reentrant: a custom node may run a backward.
tdm_status tdm_backward(tdm_tensor *root, const tdm_tensor *grad_output);

// Grad mode, per thread (default on). Off: ops record nothing (inference, no_grad).
bool tdm_grad_enabled(void);
bool tdm_grad_set_enabled(bool enabled);   // returns the previous mode, to restore a scope

// Called once per backward for a leaf when its gradient for that backward is complete (after
// the last contribution was accumulated): data-parallel training all-reduces buckets from here.
typedef void (*tdm_grad_hook)(tdm_tensor *leaf, void *ctx);
void tdm_tensor_set_grad_hook(tdm_tensor *leaf, tdm_grad_hook hook, void *ctx);

// A custom node (activation checkpointing uses it): `output` gets a grad_fn named `name` whose
// backward is `backward(ctx, grad_output, grad_inputs)`, filling grad_inputs[i] (new references,
// or NULL for no gradient) for inputs[i]; the engine routes them like any op's. The node keeps
// references to the inputs and owns ctx (ctx_free(ctx) when the node dies). Returns `output`, or
// NULL (and ctx_free(ctx) called) on failure. As for any op, no node is made when grad mode is
// off or no input requires grad (ctx_free(ctx) is then called at once). Like every backward,
// `backward` runs with grad mode off: enable it inside to record (a recomputing checkpoint
// does), and restore the autocast state of the forward if it recomputes one.
tdm_tensor *tdm_autograd_custom(const char *name, tdm_tensor *const *inputs, int n_inputs,
                                tdm_tensor *output,
                                tdm_status (*backward)(void *ctx, const tdm_tensor *grad_output,
                                                       tdm_tensor **grad_inputs),
                                void *ctx, void (*ctx_free)(void *ctx));

#ifdef __cplusplus
}
#endif

#endif
