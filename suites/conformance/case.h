/* case.h — conformance cases: a case file (docs/CASE_FORMAT.md) loaded into tensors, the table
 * that maps each op name to the code that runs it, and the comparison against the expected values
 * within the rounding-error bounds of docs/CONFORMANCE.md. */
#ifndef TANDEM_CASE_H
#define TANDEM_CASE_H

#include <cjson/cJSON.h>

#include "tandem/tandem.h"

#define TDM_CASE_MAX 8   // input.0 .. input.7, output.0 .. output.7, ...

typedef struct {
    char path[512];
    char op[64];
    cJSON *attrs;                        // the attrs object (empty object when absent)
    tdm_dtype dtype;                     // dtype of the first floating input
    tdm_tensor *input[TDM_CASE_MAX];     // NULL where absent (on the cpu, as stored)
    tdm_tensor *grad_output[TDM_CASE_MAX];
    tdm_tensor *output[TDM_CASE_MAX];    // expected
    tdm_tensor *grad_input[TDM_CASE_MAX];
} tdm_case;

// What running a case produced: outputs and gradients on the device it ran on, NULL where the
// op has no such output. Freed with tdm_case_result_free.
typedef struct {
    tdm_tensor *output[TDM_CASE_MAX];
    tdm_tensor *grad_input[TDM_CASE_MAX];
} tdm_case_result;

// Runs an op forward with in[] (the case's inputs already on the target device, NULL where
// absent) and c->attrs; when grad_output is non-NULL also backward, filling grad_input[K] for
// every floating, differentiable input K that is present.
typedef tdm_status (*tdm_case_run_fn)(const tdm_case *c, tdm_tensor *const *in,
                                      const tdm_tensor *grad_output, tdm_case_result *r);

typedef struct {
    const char *op;
    tdm_case_run_fn run;
    const char *attrs;   // the attrs it accepts, space separated: "stride padding dilation groups"
} tdm_case_op;

// The case format's size rule for the ops whose work is not bounded by the tensors of the file:
// their intermediate that no tensor holds (scaled_dot_product_attention's weights (batch, L, S),
// linear_gelu_linear's hidden activations (rows, hidden)), from the inputs' logical sizes, has at
// most TDM_CASE_MAX_INTERMEDIATE elements (tdm_case_load checks it). TDM_OK, or a format error
// naming the file and the sizes.
tdm_status tdm_case_size_sdpa(const tdm_case *c);                 // case_attention.c
tdm_status tdm_case_size_linear_gelu_linear(const tdm_case *c);   // case_linalg.c

// A case's intermediate that no tensor of the file holds has at most this many elements (the
// golden and generated cases' largest is some thousands): tensors with no data (a dim of 0) pass
// the tensors' size rule, so a few hundred bytes could otherwise ask for gigabytes of scratch or
// hours of work (docs/CASE_FORMAT.md).
#define TDM_CASE_MAX_INTERMEDIATE ((int64_t)1 << 24)
// TDM_OK when the intermediate `what` of shape (ndim, shape) holds at most
// TDM_CASE_MAX_INTERMEDIATE elements; else a format error naming c's file, what and the shape.
tdm_status tdm_case_check_intermediate(const tdm_case *c, const char *what, int ndim,
                                       const int64_t *shape);

// Each group of ops defines a table ending in {NULL}; case_ops.c joins them.
extern const tdm_case_op tdm_case_ops_linalg[];     // linear matmul linear_gelu_linear conv2d
                                                    // max_pool2d avg_pool2d
extern const tdm_case_op tdm_case_ops_pointwise[];  // relu gelu tanh sigmoid add mul dropout sum
                                                    // mean softmax log_softmax cross_entropy mse_loss
extern const tdm_case_op tdm_case_ops_misc[];       // layer_norm batch_norm embedding sgd_step
                                                    // adam_step adamw_step clip_grad_norm_
extern const tdm_case_op tdm_case_ops_attention[];  // scaled_dot_product_attention
extern const tdm_case_op tdm_case_ops_view[];       // view reshape transpose narrow split chunk
                                                    // cat stack sub rsub div rdiv
// add, sub, rsub, mul, div, rdiv with `other` a number (case_view.c; add and mul hand their
// cases with a number `other` to it).
tdm_status tdm_case_run_scalar(const tdm_case *c, tdm_tensor *const *in, const tdm_tensor *go,
                               tdm_case_result *r);
const tdm_case_op *tdm_case_op_find(const char *op);   // NULL + error when unknown

// ---- attrs: each returns TDM_OK (with the default when absent) or a format error naming the
// attr and what was expected. PyTorch accepts an int where a pair is expected; so do these. ----
tdm_status tdm_attr_int(const tdm_case *c, const char *name, int64_t def, int64_t *out);
tdm_status tdm_attr_double(const tdm_case *c, const char *name, double def, double *out);
tdm_status tdm_attr_bool(const tdm_case *c, const char *name, bool def, bool *out);
// `out` must hold 64 bytes; the default is used when absent or null.
tdm_status tdm_attr_string(const tdm_case *c, const char *name, const char *def, char *out);
// A pair: [a, b] or a single int a (-> a, a). `def` used when absent, null or [].
tdm_status tdm_attr_pair(const tdm_case *c, const char *name, const int def[2], int out[2]);
// A list of ints (or one int). *n = 0 when absent or null. At most `cap` entries.
tdm_status tdm_attr_int_list(const tdm_case *c, const char *name, int cap, int *out, int *n);
bool tdm_attr_present(const tdm_case *c, const char *name);   // present and not null

// ---- loading, running, comparing ----
// Loads and validates a case file; on failure returns NULL with a one-line message.
tdm_case *tdm_case_load(const char *path);
void tdm_case_free(tdm_case *c);
void tdm_case_result_free(tdm_case_result *r);

// Runs the case on `dev` (forward, and backward when it has grad_output.0).
tdm_status tdm_case_run(const tdm_case *c, tdm_device dev, tdm_case_result *r);

// The comparison of one actual tensor with its expected one.
typedef struct {
    char name[32];          // "output.0", "grad_input.1"
    int64_t worst_index;    // the element with the largest error / bound ratio
    double actual, expected, bound, ratio;
    int64_t n_fail;         // elements over their bound (NaN/inf mismatches included)
    bool missing;           // expected but not produced, or of the wrong shape
    char why[256];          // when missing: which, e.g. "the op gave shape (6), the case expects (2, 3)"
} tdm_case_check;

typedef struct {
    tdm_case_check check[2 * TDM_CASE_MAX];
    int n;
    bool pass;
    double worst_ratio;
} tdm_case_report;

tdm_status tdm_case_compare(const tdm_case *c, const tdm_case_result *r, tdm_device dev,
                            tdm_case_report *rep);
// The check a report line names: a missing or mis-shaped tensor before any other (its ratio is
// 0, so a later tensor's small error must not stand for it), else the largest ratio.
const tdm_case_check *tdm_case_report_worst(const tdm_case_report *rep);

#endif
