/* graph.h — CUDA graphs: capture the work of a region (a whole training step) once and replay it
 * with one launch, as torch.cuda.graph / torch.cuda.CUDAGraph (PyTorch's "reduce-overhead"), for
 * small models whose steps are bound by kernel launches rather than by the kernels.
 *
 * Capture. tdm_graph_capture_begin makes a fresh side stream the calling thread's current stream
 * on dev and starts capturing it (cudaStreamCaptureModeThreadLocal: a call on this thread that
 * could synchronize or otherwise break the capture fails, other threads — data loader workers —
 * are not affected). Every op called on this thread until tdm_graph_capture_end is recorded, not
 * run: its outputs hold no values until the first replay. tdm_graph_capture_end ends the capture,
 * restores the previous current stream and returns the executable graph. Work queued before
 * begin is finished first (the device is synchronized).
 *
 * Replay. tdm_graph_replay launches the recorded work on the calling thread's current stream,
 * with the very addresses of the capture: inputs are "static" tensors made before the capture,
 * refilled by copies (tdm_tensor_copy) before each replay; outputs are the tensors the captured
 * ops returned (keep them), overwritten by each replay.
 *
 * Memory. Tensors allocated during the capture come from a private pool of the graph (PyTorch's
 * graph pools), never shared with allocations outside it, even after they are freed: replays
 * write into them. The pool is given back when the graph is freed (blocks still held by live
 * tensors, a graph's outputs, once those are freed and the cache is emptied).
 *
 * What cannot be captured fails with a message naming the op (the capture is then ended and
 * unusable: call tdm_graph_capture_end, which reports it, and start again):
 * - copies between host and device (they synchronize): tdm_tensor_from_host / tdm_tensor_to /
 *   reading a value. Make constants before the capture. tdm_backward(loss, NULL) seeds from a
 *   device copy of a 1 made by the first backward on that device and dtype: run one eager
 *   backward first (as the warm-up steps do).
 * - random draws with an explicit (seed, offset): tdm_tensor_rand/randn, tdm_dropout (every replay
 *   would draw the same numbers). Draws from a tdm_generator and nn's Dropout modules are
 *   captured: each replay draws what the next eager step would (tensor.h).
 * - the gradient scaler's step (it reads found_inf on the host to decide whether to step).
 * Copies between tensors of the capturing device are recorded (stream-ordered, as outside a
 * capture). cross_entropy targets and embedding indices are checked under capture too: a replay
 * that meets a bad one records it on the device, reported at the next host wait.
 * Optimizer steps (SGD with momentum, Adam, AdamW) are captured with their per-step state on the
 * device (PyTorch's capturable optimizers): each replay advances the step count and the momentum
 * state as an eager step does and computes what it computes, bit for bit, also when the capture
 * comes before any eager step. The optimizers and generators a graph advances must outlive its
 * replays (a replay after one is freed fails). Eager warm-up steps are still wise (they fill the
 * allocator's cache and the matmul plan caches).
 *
 * On the cpu every call fails with TDM_ERR_UNSUPPORTED: graph capture needs a CUDA device. */
#ifndef TANDEM_GRAPH_H
#define TANDEM_GRAPH_H

#include "tandem/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_graph tdm_graph;

// Starts capturing this thread's work on dev (one capture per thread and device at a time).
tdm_status tdm_graph_capture_begin(tdm_device dev);
// Ends the capture of this thread on dev: *out = the graph (NULL on failure, with the reason:
// the op that broke the capture). The previous current stream is restored either way.
tdm_status tdm_graph_capture_end(tdm_device dev, tdm_graph **out);
// Runs the captured work on the calling thread's current stream of the graph's device
// (asynchronous, as any launch).
tdm_status tdm_graph_replay(tdm_graph *g);
// Waits for the graph's replays, frees it and gives its private memory pool back. NULL is fine.
void tdm_graph_free(tdm_graph *g);
// Is the calling thread capturing on dev? (torch.cuda.is_current_stream_capturing)
bool tdm_graph_is_capturing(tdm_device dev);

#ifdef __cplusplus
}
#endif

#endif
