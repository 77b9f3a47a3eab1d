/* nn.c — modules, as torch.nn: construction and PyTorch's default initialisation, forward (each
 * module is a call to the public ops, which record themselves for autograd), train/eval, moving to
 * a device, the state dict with PyTorch's names, safetensors save/load, and the activation
 * checkpointing of a Sequential (torch.utils.checkpoint.checkpoint_sequential, reentrant form).
 * The model grammar (bench train --model) is in nn_spec.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/random_impl.h"
#include "core/tensor_impl.h"
#include "tandem/tandem.h"

// ---- the module struct ---------------------------------------------------------------------

typedef enum {
    MOD_LINEAR,
    MOD_CONV2D,
    MOD_RELU,
    MOD_GELU,
    MOD_MAX_POOL2D,
    MOD_AVG_POOL2D,
    MOD_FLATTEN,
    MOD_DROPOUT,
    MOD_BATCH_NORM2D,
    MOD_LAYER_NORM,
    MOD_EMBEDDING,
    MOD_SEQUENTIAL,
    MOD_GPT,              // nanoGPT's GPT, Block and CausalSelfAttention (the GPT section below)
    MOD_GPT_BLOCK,
    MOD_SELF_ATTENTION,
} module_kind;

static const char *kind_name(module_kind k) {
    static const char *names[] = {"Linear",  "Conv2d",      "ReLU",      "GELU",
                                  "MaxPool2d", "AvgPool2d", "Flatten",   "Dropout",
                                  "BatchNorm2d", "LayerNorm", "Embedding", "Sequential",
                                  "GPT", "Block", "CausalSelfAttention"};
    return names[k];
}

// How a state entry is (re)drawn by tdm_module_init.
typedef enum { INIT_UNIFORM, INIT_NORMAL, INIT_ONES, INIT_ZEROS } init_kind;

// One entry of a state dict: its name, where its tensor lives (a slot of the leaf module that
// owns it, so a Sequential's entries follow tensors replaced in place), and how it is drawn.
typedef struct {
    char *name;
    tdm_tensor **slot;
    bool is_param;   // false for buffers (running stats)
    init_kind init;
    double bound;    // INIT_UNIFORM: U(-bound, bound); INIT_NORMAL: N(0, bound^2)
} state_entry;

// A leaf's own tensors: weight, bias, running_mean, running_var, num_batches_tracked.
enum { OWN_WEIGHT, OWN_BIAS, OWN_RUNNING_MEAN, OWN_RUNNING_VAR, OWN_NUM_BATCHES, OWN_MAX };

struct tdm_module {
    module_kind kind;
    bool training;
    tdm_tensor *own[OWN_MAX];   // this module's tensors (NULL where it has none)
    state_entry *state;         // the whole subtree's state dict, in PyTorch's order
    int n_state;

    // Settings, by kind.
    int64_t in, out;            // Linear: features; Conv2d: channels; Embedding: (V, D)
    int kernel;                 // Conv2d
    tdm_conv2d_params conv;     // Conv2d
    tdm_pool2d_params pool;     // MaxPool2d, AvgPool2d
    bool approximate_tanh;      // GELU
    double p;                   // Dropout
    tdm_philox_stream rng;      // Dropout: its stream; offset: the next call's mask
    double eps, momentum;       // BatchNorm2d, LayerNorm
    int norm_ndim;              // LayerNorm
    int64_t norm_shape[TDM_MAX_DIMS];

    int n_children;             // Sequential, GPT, Block, CausalSelfAttention
    tdm_module **children;
    int segments;               // activation checkpointing: 0 or 1 = off

    int64_t n_head;             // CausalSelfAttention
    tdm_generator *gen;         // CausalSelfAttention: attn_dropout's stream (SDPA's dropout_p)
    int64_t block_size;         // GPT: the longest sequence (wpe's rows)
    tdm_tensor *pos;            // GPT: positions 0..T-1 (int64) on the model's device, cached
};

// ---- construction helpers --------------------------------------------------------------------

static tdm_module *module_new(module_kind kind) {
    tdm_module *m = calloc(1, sizeof *m);
    if (!m) {
        tdm_error_set(TDM_ERR_OOM, "nn.%s: out of host memory", kind_name(kind));
        return NULL;
    }
    m->kind = kind;
    m->training = true;
    return m;
}

static tdm_status entry_add(tdm_module *m, const char *name, tdm_tensor **slot, bool is_param,
                            init_kind init, double bound) {
    state_entry *s = realloc(m->state, (size_t)(m->n_state + 1) * sizeof *s);
    if (!s) return tdm_error_set(TDM_ERR_OOM, "nn: out of host memory");
    m->state = s;
    char *copy = malloc(strlen(name) + 1);
    if (!copy) return tdm_error_set(TDM_ERR_OOM, "nn: out of host memory");
    strcpy(copy, name);
    s[m->n_state++] = (state_entry){copy, slot, is_param, init, bound};
    return TDM_OK;
}

// Creates own[which] (f32, cpu, zeros; i64 for num_batches_tracked) and its state entry.
// Parameters become leaves that require grad.
static tdm_status own_add(tdm_module *m, int which, const char *name, int ndim,
                          const int64_t *shape, bool is_param, init_kind init, double bound) {
    tdm_dtype dt = which == OWN_NUM_BATCHES ? TDM_DTYPE_I64 : TDM_DTYPE_F32;
    m->own[which] = tdm_tensor_zeros(ndim, shape, dt, TDM_CPU);
    if (!m->own[which]) return tdm_last_status();
    if (is_param) tdm_tensor_set_requires_grad(m->own[which], true);
    return entry_add(m, name, &m->own[which], is_param, init, bound);
}

// Finishes a leaf constructor: draws the parameters with seed 0, or frees m on failure.
static tdm_module *module_ready(tdm_module *m, tdm_status s) {
    if (s == TDM_OK) s = tdm_module_init(m, 0);
    if (s != TDM_OK) {
        tdm_module_free(m);
        return NULL;
    }
    return m;
}

// Tied parameters (GPT's lm_head.weight is transformer.wte.weight): one tensor under several
// state entries. The index of the first entry holding entry i's tensor (i itself when none
// before does): parameters, init, moves and saves count the tensor once, there.
static int entry_first(const tdm_module *m, int i) {
    for (int j = 0; j < i; j++)
        if (*m->state[j].slot == *m->state[i].slot) return j;
    return i;
}

static bool positive(const char *what, const char *arg, int64_t v) {
    if (v > 0) return true;
    tdm_error_set(TDM_ERR_ARG, "nn.%s: %s must be positive, got %lld", what, arg, (long long)v);
    return false;
}

// ---- constructors --------------------------------------------------------------------------

tdm_module *tdm_nn_linear(int64_t in_features, int64_t out_features, bool bias) {
    if (!positive("Linear", "in_features", in_features) ||
        !positive("Linear", "out_features", out_features))
        return NULL;
    tdm_module *m = module_new(MOD_LINEAR);
    if (!m) return NULL;
    m->in = in_features;
    m->out = out_features;
    // kaiming_uniform_(a=sqrt(5)) = U(±1/sqrt(fan_in)); the bias: U(±1/sqrt(fan_in)).
    double bound = 1.0 / sqrt((double)in_features);
    int64_t ws[2] = {out_features, in_features};
    tdm_status s = own_add(m, OWN_WEIGHT, "weight", 2, ws, true, INIT_UNIFORM, bound);
    if (s == TDM_OK && bias)
        s = own_add(m, OWN_BIAS, "bias", 1, &out_features, true, INIT_UNIFORM, bound);
    return module_ready(m, s);
}

tdm_module *tdm_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                          const tdm_conv2d_params *p, bool bias) {
    tdm_conv2d_params cp = p ? *p : TDM_CONV2D_DEFAULT;
    if (!positive("Conv2d", "in_channels", in_channels) ||
        !positive("Conv2d", "out_channels", out_channels) ||
        !positive("Conv2d", "kernel_size", kernel_size) ||
        !positive("Conv2d", "groups", cp.groups))
        return NULL;
    for (int i = 0; i < 2; i++) {
        if (cp.stride[i] < 1 || cp.dilation[i] < 1 || cp.padding[i] < 0) {
            tdm_error_set(TDM_ERR_ARG, "nn.Conv2d: stride (%d, %d) and dilation (%d, %d) must be "
                          "positive, padding (%d, %d) non-negative",
                          cp.stride[0], cp.stride[1], cp.dilation[0], cp.dilation[1],
                          cp.padding[0], cp.padding[1]);
            return NULL;
        }
    }
    if (cp.layout != TDM_CONV_LAYOUT_NCHW) {   // state dicts and the other layers are NCHW
        tdm_error_set(TDM_ERR_UNSUPPORTED, "nn.Conv2d: only the NCHW layout is supported by "
                      "modules (call tdm_conv2d with NHWC tensors for channels-last)");
        return NULL;
    }
    if (in_channels % cp.groups || out_channels % cp.groups) {
        tdm_error_set(TDM_ERR_ARG, "nn.Conv2d: in_channels %lld and out_channels %lld must be "
                      "divisible by groups %d", (long long)in_channels, (long long)out_channels,
                      cp.groups);
        return NULL;
    }
    tdm_module *m = module_new(MOD_CONV2D);
    if (!m) return NULL;
    m->in = in_channels;
    m->out = out_channels;
    m->kernel = kernel_size;
    m->conv = cp;
    int64_t cin = in_channels / cp.groups;
    double bound = 1.0 / sqrt((double)(cin * kernel_size * kernel_size));   // fan_in
    int64_t ws[4] = {out_channels, cin, kernel_size, kernel_size};
    tdm_status s = own_add(m, OWN_WEIGHT, "weight", 4, ws, true, INIT_UNIFORM, bound);
    if (s == TDM_OK && bias)
        s = own_add(m, OWN_BIAS, "bias", 1, &out_channels, true, INIT_UNIFORM, bound);
    return module_ready(m, s);
}

tdm_module *tdm_nn_relu(void) { return module_new(MOD_RELU); }

tdm_module *tdm_nn_gelu(bool approximate_tanh) {
    tdm_module *m = module_new(MOD_GELU);
    if (m) m->approximate_tanh = approximate_tanh;
    return m;
}

static tdm_module *pool_new(module_kind kind, const tdm_pool2d_params *p) {
    const char *name = kind_name(kind);
    if (!p) {
        tdm_error_set(TDM_ERR_ARG, "nn.%s: params are required", name);
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (p->kernel_size[i] < 1 || p->stride[i] < 1 || p->dilation[i] < 1 ||
            p->padding[i] < 0 || p->padding[i] > p->kernel_size[i] / 2) {
            tdm_error_set(TDM_ERR_ARG, "nn.%s: kernel_size (%d, %d), stride (%d, %d) and dilation "
                          "(%d, %d) must be positive, padding (%d, %d) at most half the kernel",
                          name, p->kernel_size[0], p->kernel_size[1], p->stride[0], p->stride[1],
                          p->dilation[0], p->dilation[1], p->padding[0], p->padding[1]);
            return NULL;
        }
    }
    tdm_module *m = module_new(kind);
    if (m) m->pool = *p;
    return m;
}

tdm_module *tdm_nn_max_pool2d(const tdm_pool2d_params *p) { return pool_new(MOD_MAX_POOL2D, p); }
tdm_module *tdm_nn_avg_pool2d(const tdm_pool2d_params *p) { return pool_new(MOD_AVG_POOL2D, p); }
tdm_module *tdm_nn_flatten(void) { return module_new(MOD_FLATTEN); }

tdm_module *tdm_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) {
        tdm_error_set(TDM_ERR_ARG, "nn.Dropout: probability has to be between 0 and 1, got %g", p);
        return NULL;
    }
    tdm_module *m = module_new(MOD_DROPOUT);
    if (!m) return NULL;
    m->p = p;
    return module_ready(m, TDM_OK);   // seeds its stream
}

tdm_module *tdm_nn_batch_norm2d(int64_t channels, double eps, double momentum) {
    if (!positive("BatchNorm2d", "channels", channels)) return NULL;
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1)) {
        tdm_error_set(TDM_ERR_ARG, "nn.BatchNorm2d: eps %g must be positive and momentum %g "
                      "within [0, 1]", eps, momentum);
        return NULL;
    }
    tdm_module *m = module_new(MOD_BATCH_NORM2D);
    if (!m) return NULL;
    m->in = m->out = channels;
    m->eps = eps;
    m->momentum = momentum;
    tdm_status s = own_add(m, OWN_WEIGHT, "weight", 1, &channels, true, INIT_ONES, 0);
    if (s == TDM_OK) s = own_add(m, OWN_BIAS, "bias", 1, &channels, true, INIT_ZEROS, 0);
    if (s == TDM_OK)
        s = own_add(m, OWN_RUNNING_MEAN, "running_mean", 1, &channels, false, INIT_ZEROS, 0);
    if (s == TDM_OK)
        s = own_add(m, OWN_RUNNING_VAR, "running_var", 1, &channels, false, INIT_ONES, 0);
    if (s == TDM_OK)   // an i64 scalar, shape ()
        s = own_add(m, OWN_NUM_BATCHES, "num_batches_tracked", 0, NULL, false, INIT_ZEROS, 0);
    return module_ready(m, s);
}

tdm_module *tdm_nn_layer_norm(int ndim, const int64_t *normalized_shape, double eps) {
    if (ndim < 1 || ndim > TDM_MAX_DIMS || !normalized_shape) {
        tdm_error_set(TDM_ERR_ARG, "nn.LayerNorm: normalized_shape must have 1 to %d dims, got %d",
                      TDM_MAX_DIMS, ndim);
        return NULL;
    }
    for (int i = 0; i < ndim; i++)
        if (!positive("LayerNorm", "every normalized_shape dim", normalized_shape[i])) return NULL;
    if (!(eps > 0)) {
        tdm_error_set(TDM_ERR_ARG, "nn.LayerNorm: eps %g must be positive", eps);
        return NULL;
    }
    tdm_module *m = module_new(MOD_LAYER_NORM);
    if (!m) return NULL;
    m->eps = eps;
    m->norm_ndim = ndim;
    memcpy(m->norm_shape, normalized_shape, (size_t)ndim * sizeof *normalized_shape);
    tdm_status s = own_add(m, OWN_WEIGHT, "weight", ndim, normalized_shape, true, INIT_ONES, 0);
    if (s == TDM_OK) s = own_add(m, OWN_BIAS, "bias", ndim, normalized_shape, true, INIT_ZEROS, 0);
    return module_ready(m, s);
}

tdm_module *tdm_nn_embedding(int64_t num_embeddings, int64_t dim) {
    if (!positive("Embedding", "num_embeddings", num_embeddings) ||
        !positive("Embedding", "embedding_dim", dim))
        return NULL;
    tdm_module *m = module_new(MOD_EMBEDDING);
    if (!m) return NULL;
    m->in = num_embeddings;
    m->out = dim;
    int64_t ws[2] = {num_embeddings, dim};
    return module_ready(m, own_add(m, OWN_WEIGHT, "weight", 2, ws, true, INIT_NORMAL, 1));
}

// A container (Sequential, and GPT's modules) owns its n children (also on failure); its state
// dict is theirs, each name prefixed by the child's name (names[i], or its index i when names is
// NULL: a Sequential's "0.weight"). `draw`: redraw the weights with seed 0 from the whole
// container's state order (as tdm_module_init(m, 0) would); GPT's inner containers leave that to
// the model, which draws once.
static tdm_module *container_new(module_kind kind, int n, tdm_module *const *children,
                                 const char *const *names, bool draw) {
    if (n < 0 || (n > 0 && !children)) {
        tdm_error_set(TDM_ERR_ARG, "nn.%s: %d children%s", kind_name(kind), n,
                      children ? "" : " (NULL)");
        return NULL;
    }
    tdm_module *m = NULL;
    tdm_status s = TDM_OK;
    for (int i = 0; s == TDM_OK && i < n; i++)
        if (!children[i])
            s = tdm_error_set(TDM_ERR_ARG, "nn.%s: child %d is NULL", kind_name(kind), i);
    if (s == TDM_OK && !(m = module_new(kind))) s = tdm_last_status();
    if (s == TDM_OK && n && !(m->children = calloc((size_t)n, sizeof *m->children)))
        s = tdm_error_set(TDM_ERR_OOM, "nn.%s: out of host memory", kind_name(kind));
    if (s != TDM_OK) {   // it owns the children also on failure
        for (int i = 0; i < n; i++) tdm_module_free(children[i]);
        tdm_module_free(m);
        return NULL;
    }
    for (int i = 0; i < n; i++) m->children[m->n_children++] = children[i];
    for (int i = 0; s == TDM_OK && i < n; i++) {
        const tdm_module *c = children[i];
        for (int j = 0; s == TDM_OK && j < c->n_state; j++) {
            const state_entry *e = &c->state[j];
            char name[512];
            int len = names ? snprintf(name, sizeof name, "%s.%s", names[i], e->name)
                            : snprintf(name, sizeof name, "%d.%s", i, e->name);
            if (len >= (int)sizeof name)
                s = tdm_error_set(TDM_ERR_ARG, "nn.%s: state name too long", kind_name(kind));
            else
                s = entry_add(m, name, e->slot, e->is_param, e->init, e->bound);
        }
    }
    if (!draw && s == TDM_OK) return m;
    return module_ready(m, s);
}

tdm_module *tdm_nn_sequential(int n, tdm_module *const *children) {
    return container_new(MOD_SEQUENTIAL, n, children, NULL, true);
}

// ---- init -----------------------------------------------------------------------------------

// Draws one entry in double on the host, rounds it once into the tensor (any device). The
// uniform U(-b, b) is u * 2b - b with u from the counter-based stream (seed, offset), as
// PyTorch's uniform_ computes u * (to - from) + from.
static tdm_status entry_draw(const state_entry *e, uint64_t seed, uint64_t offset) {
    tdm_tensor *t = *e->slot;
    tdm_tensor *v = NULL;
    if (e->init == INIT_UNIFORM)
        v = tdm_tensor_rand(t->ndim, t->shape, TDM_DTYPE_F64, TDM_CPU, seed, offset);
    else if (e->init == INIT_NORMAL)
        v = tdm_tensor_randn(t->ndim, t->shape, TDM_DTYPE_F64, TDM_CPU, seed, offset);
    else
        v = tdm_tensor_zeros(t->ndim, t->shape, TDM_DTYPE_F64, TDM_CPU);
    if (!v) return tdm_last_status();
    double *d = tdm_data(v);
    for (int64_t i = 0; i < v->numel; i++) {
        if (e->init == INIT_UNIFORM) d[i] = d[i] * (2 * e->bound) - e->bound;
        else if (e->init == INIT_NORMAL) d[i] *= e->bound;
        else if (e->init == INIT_ONES) d[i] = 1;
    }
    tdm_status s = tdm_tensor_copy_(t, v);
    tdm_tensor_free(v);
    return s;
}

// Dropout streams: module j (pre-order index in the tree) starts at offset (j + 1) << 32, above
// the parameters' offsets (their state index), so no two draws share a stream. A
// CausalSelfAttention's attn_dropout (a generator: SDPA's) is seeded likewise.
static tdm_status dropout_seed(tdm_module *m, uint64_t seed, uint64_t *index) {
    uint64_t j = (*index)++;
    if (m->kind == MOD_DROPOUT) {
        m->rng.seed = seed;
        m->rng.offset = (j + 1) << 32;
    }
    if (m->kind == MOD_SELF_ATTENTION) {
        tdm_generator_free(m->gen);
        if (!(m->gen = tdm_generator_new(seed, (j + 1) << 32))) return tdm_last_status();
    }
    for (int i = 0; i < m->n_children; i++) TDM_TRY(dropout_seed(m->children[i], seed, index));
    return TDM_OK;
}

tdm_status tdm_module_init(tdm_module *m, uint64_t seed) {
    if (!m) return tdm_error_set(TDM_ERR_ARG, "module_init: module is NULL");
    bool grad = tdm_grad_set_enabled(false);
    tdm_status s = TDM_OK;
    for (int i = 0; s == TDM_OK && i < m->n_state; i++)
        if (entry_first(m, i) == i) s = entry_draw(&m->state[i], seed, (uint64_t)i);
    tdm_grad_set_enabled(grad);
    uint64_t index = 0;
    if (s == TDM_OK) s = dropout_seed(m, seed, &index);
    return s;
}

tdm_status tdm_module_init_copy(tdm_module *m, const tdm_module *src, uint64_t seed) {
    if (!m || !src) return tdm_error_set(TDM_ERR_ARG, "module_init_copy: module is NULL");
    bool same = m->n_state == src->n_state;
    for (int i = 0; same && i < m->n_state; i++) {
        const tdm_tensor *a = *m->state[i].slot, *b = *src->state[i].slot;
        same = !strcmp(m->state[i].name, src->state[i].name) && a->dtype == b->dtype &&
               a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape);
    }
    if (!same)
        return tdm_error_set(TDM_ERR_ARG, "module_init_copy: the two modules' state dicts differ "
                                          "(not the same structure)");
    bool grad = tdm_grad_set_enabled(false);
    tdm_status s = TDM_OK;
    for (int i = 0; s == TDM_OK && i < m->n_state; i++)
        if (entry_first(m, i) == i) s = tdm_tensor_copy_(*m->state[i].slot, *src->state[i].slot);
    tdm_grad_set_enabled(grad);
    uint64_t index = 0;
    if (s == TDM_OK) s = dropout_seed(m, seed, &index);
    return s;
}

void tdm_module_rng_advance(tdm_module *m, uint64_t forwards) {
    if (!m) return;
    if (m->kind == MOD_DROPOUT) m->rng.offset += forwards;   // one draw per training call
    if (m->kind == MOD_SELF_ATTENTION && m->gen && m->p > 0)   // SDPA draws only when p > 0
        tdm_generator_set_offset(m->gen, tdm_generator_offset(m->gen) + forwards);
    for (int i = 0; i < m->n_children; i++) tdm_module_rng_advance(m->children[i], forwards);
}

// ---- forward --------------------------------------------------------------------------------

static tdm_tensor *module_forward(tdm_module *m, const tdm_tensor *x, bool recompute);
static tdm_tensor *gpt_forward(tdm_module *m, const tdm_tensor *idx, bool recompute);
static tdm_tensor *block_forward(tdm_module *m, const tdm_tensor *x, bool recompute);
static tdm_tensor *attention_forward(tdm_module *m, const tdm_tensor *x, bool recompute);

static tdm_status num_batches_add1(tdm_tensor *t) {
    const struct tdm_backend_ops *be = tdm_backend_of(t);
    if (be->counter_add) return be->counter_add(t, 1);   // on the device, no host wait
    int64_t v;
    TDM_TRY(tdm_tensor_to_host(t, &v, sizeof v));
    v++;
    return tdm_backend_of(t)->copy_from_host(tdm_data(t), &v, sizeof v, t->device.index);
}

// BatchNorm2d: batch statistics in training (running stats updated, num_batches_tracked + 1),
// the running statistics in eval. A checkpoint's recomputation (recompute) normalises with the
// same batch statistics but skips the running-stat update, which the first forward already made.
static tdm_tensor *batch_norm_forward(tdm_module *m, const tdm_tensor *x, bool recompute) {
    if (tdm_check_tensor("nn.BatchNorm2d", "input", x) != TDM_OK) return NULL;
    if (x->ndim != 4) {
        tdm_error_set(TDM_ERR_SHAPE, "nn.BatchNorm2d: expected 4D input (got %dD input)", x->ndim);
        return NULL;
    }
    bool update = m->training && !recompute;
    tdm_tensor *rm = m->training && recompute ? NULL : m->own[OWN_RUNNING_MEAN];
    tdm_tensor *rv = m->training && recompute ? NULL : m->own[OWN_RUNNING_VAR];
    tdm_tensor *y = tdm_batch_norm(x, rm, rv, m->own[OWN_WEIGHT], m->own[OWN_BIAS], m->training,
                                   m->momentum, m->eps, NULL, NULL);
    if (y && update && num_batches_add1(m->own[OWN_NUM_BATCHES]) != TDM_OK) {
        tdm_tensor_free(y);
        return NULL;
    }
    return y;
}

// Flatten(start_dim=1): (N, ...) -> (N, prod(...)).
static tdm_tensor *flatten_forward(const tdm_tensor *x) {
    if (tdm_check_tensor("nn.Flatten", "input", x) != TDM_OK) return NULL;
    if (x->ndim < 2) {
        tdm_error_set(TDM_ERR_SHAPE, "nn.Flatten: expected an input of at least 2 dims (N, ...), "
                      "got %d", x->ndim);
        return NULL;
    }
    int64_t shape[2] = {x->shape[0], 1};
    for (int i = 1; i < x->ndim; i++) shape[1] *= x->shape[i];
    return tdm_tensor_reshape(x, 2, shape);
}

// Children lo..hi-1 of a Sequential, one after the other.
static tdm_tensor *run_range(tdm_module *m, int lo, int hi, const tdm_tensor *x, bool recompute) {
    tdm_tensor *h = tdm_tensor_retain((tdm_tensor *)x);
    for (int i = lo; h && i < hi; i++) {
        tdm_tensor *next = module_forward(m->children[i], h, recompute);
        if (!next) {   // say which module failed
            char msg[768];
            snprintf(msg, sizeof msg, "%s", tdm_last_error());
            tdm_error_set(tdm_last_status(), "Sequential module %d (%s): %s", i,
                          kind_name(m->children[i]->kind), msg);
        }
        tdm_tensor_free(h);
        h = next;
    }
    return h;
}

static tdm_tensor *checkpoint_range(tdm_module *m, int lo, int hi, const tdm_tensor *x);

// torch.utils.checkpoint.checkpoint_sequential: segments of n / segments modules; all but the
// last run checkpointed, the last (with the remainder) normally, its activations being the
// first that backward needs. A recomputation runs plainly.
static tdm_tensor *sequential_forward(tdm_module *m, const tdm_tensor *x, bool recompute) {
    int n = m->n_children;
    int segments = m->segments < n ? m->segments : n;
    if (segments <= 1 || recompute) return run_range(m, 0, n, x, recompute);
    int size = n / segments;
    tdm_tensor *h = tdm_tensor_retain((tdm_tensor *)x);
    int lo = 0;
    for (; h && lo < size * (segments - 1); lo += size) {
        tdm_tensor *next = checkpoint_range(m, lo, lo + size, h);
        tdm_tensor_free(h);
        h = next;
    }
    if (!h) return NULL;
    tdm_tensor *y = run_range(m, lo, n, h, false);
    tdm_tensor_free(h);
    return y;
}

static tdm_tensor *module_forward(tdm_module *m, const tdm_tensor *x, bool recompute) {
    switch (m->kind) {
    case MOD_LINEAR: return tdm_linear(x, m->own[OWN_WEIGHT], m->own[OWN_BIAS]);
    case MOD_CONV2D: return tdm_conv2d(x, m->own[OWN_WEIGHT], m->own[OWN_BIAS], &m->conv);
    case MOD_RELU: return tdm_relu(x);
    case MOD_GELU: return tdm_gelu(x, m->approximate_tanh);
    case MOD_MAX_POOL2D: return tdm_max_pool2d(x, &m->pool);
    case MOD_AVG_POOL2D: return tdm_avg_pool2d(x, &m->pool);
    case MOD_FLATTEN: return flatten_forward(x);
    case MOD_DROPOUT: {
        // Each training call draws a fresh mask: the next offset of the module's stream (also
        // under graph capture, where each replay draws the next: core/random.c).
        return tdm_stream_dropout(&m->rng, x, m->p, m->training);
    }
    case MOD_BATCH_NORM2D: return batch_norm_forward(m, x, recompute);
    case MOD_LAYER_NORM:
        return tdm_layer_norm(x, m->norm_ndim, m->own[OWN_WEIGHT], m->own[OWN_BIAS], m->eps, NULL,
                              NULL);
    case MOD_EMBEDDING: return tdm_embedding(x, m->own[OWN_WEIGHT], TDM_EMBEDDING_NO_PADDING);
    case MOD_SEQUENTIAL: return sequential_forward(m, x, recompute);
    case MOD_GPT: return gpt_forward(m, x, recompute);
    case MOD_GPT_BLOCK: return block_forward(m, x, recompute);
    case MOD_SELF_ATTENTION: return attention_forward(m, x, recompute);
    }
    tdm_error_set(TDM_ERR_ARG, "module_forward: unknown module kind %d", (int)m->kind);
    return NULL;
}

tdm_tensor *tdm_module_forward(tdm_module *m, const tdm_tensor *x) {
    if (!m) {
        tdm_error_set(TDM_ERR_ARG, "module_forward: module is NULL");
        return NULL;
    }
    if (tdm_check_tensor("module_forward", "input", x) != TDM_OK) return NULL;
    return module_forward(m, x, false);
}

// ---- GPT (nanoGPT's model.py) ------------------------------------------------------------------
//
// GPT-2 as nanoGPT writes it: token and position embeddings, pre-LN blocks
//     x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
// with causal self-attention through scaled_dot_product_attention and an MLP with GELU, then ln_f
// and an lm_head without bias whose weight *is* transformer.wte.weight (weight tying: one tensor,
// its gradient the sum of both uses'). The modules are containers whose children carry nanoGPT's
// attribute names, so the state dict has nanoGPT's names; transformer.h is a Sequential of the
// blocks (activation checkpointing runs on it: one block a segment at most).

static bool ends_with(const char *s, const char *suffix);

enum { GPT_WTE, GPT_WPE, GPT_DROP, GPT_H, GPT_LN_F, GPT_LM_HEAD, GPT_N };
enum { BLK_LN_1, BLK_ATTN, BLK_LN_2, BLK_MLP, BLK_N };
enum { ATT_C_ATTN, ATT_C_PROJ, ATT_RESID_DROPOUT, ATT_N };

// Frees the n modules when one of them failed (its error stands); true when all were made.
static bool made(int n, tdm_module **ms) {
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && ms[i];
    if (!ok)
        for (int i = 0; i < n; i++) tdm_module_free(ms[i]);
    return ok;
}

static tdm_module *gpt_attention(const tdm_gpt_config *c) {
    tdm_module *kids[ATT_N] = {tdm_nn_linear(c->n_embd, 3 * c->n_embd, true),
                               tdm_nn_linear(c->n_embd, c->n_embd, true),
                               tdm_nn_dropout(c->dropout)};
    static const char *const names[ATT_N] = {"c_attn", "c_proj", "resid_dropout"};
    tdm_module *m = made(ATT_N, kids) ? container_new(MOD_SELF_ATTENTION, ATT_N, kids, names,
                                                      false)
                                      : NULL;
    if (m) {
        m->n_head = c->n_head;
        m->p = c->dropout;   // attn_dropout: SDPA's dropout_p, drawn from m->gen
    }
    return m;
}

static tdm_module *gpt_block(const tdm_gpt_config *c) {
    int64_t d = c->n_embd;
    tdm_module *mlp[4] = {tdm_nn_linear(d, 4 * d, true), tdm_nn_gelu(c->gelu_tanh),
                          tdm_nn_linear(4 * d, d, true), tdm_nn_dropout(c->dropout)};
    static const char *const mlp_names[4] = {"c_fc", "gelu", "c_proj", "dropout"};
    tdm_module *kids[BLK_N] = {tdm_nn_layer_norm(1, &d, 1e-5), gpt_attention(c),
                               tdm_nn_layer_norm(1, &d, 1e-5),
                               made(4, mlp) ? container_new(MOD_SEQUENTIAL, 4, mlp, mlp_names,
                                                            false)
                                            : NULL};
    static const char *const names[BLK_N] = {"ln_1", "attn", "ln_2", "mlp"};
    return made(BLK_N, kids) ? container_new(MOD_GPT_BLOCK, BLK_N, kids, names, false) : NULL;
}

tdm_module *tdm_nn_gpt(const tdm_gpt_config *c) {
    if (!c) {
        tdm_error_set(TDM_ERR_ARG, "nn.GPT: config is NULL");
        return NULL;
    }
    if (!positive("GPT", "n_layer", c->n_layer) || !positive("GPT", "n_head", c->n_head) ||
        !positive("GPT", "n_embd", c->n_embd) || !positive("GPT", "block_size", c->block_size) ||
        !positive("GPT", "vocab_size", c->vocab_size))
        return NULL;
    if (c->n_embd % c->n_head || c->n_layer > 1 << 20) {
        tdm_error_set(TDM_ERR_ARG, "nn.GPT: n_embd %lld must be a multiple of n_head %lld (and "
                      "n_layer %lld at most 2^20)", (long long)c->n_embd, (long long)c->n_head,
                      (long long)c->n_layer);
        return NULL;
    }
    if (!(c->dropout >= 0 && c->dropout < 1)) {
        tdm_error_set(TDM_ERR_ARG, "nn.GPT: dropout must be in [0, 1), got %g", c->dropout);
        return NULL;
    }
    int n_layer = (int)c->n_layer;
    tdm_module **blocks = calloc((size_t)n_layer, sizeof *blocks);
    if (!blocks) {
        tdm_error_set(TDM_ERR_OOM, "nn.GPT: out of host memory");
        return NULL;
    }
    for (int i = 0; i < n_layer; i++) blocks[i] = gpt_block(c);
    tdm_module *kids[GPT_N] = {
        tdm_nn_embedding(c->vocab_size, c->n_embd), tdm_nn_embedding(c->block_size, c->n_embd),
        tdm_nn_dropout(c->dropout),
        made(n_layer, blocks) ? container_new(MOD_SEQUENTIAL, n_layer, blocks, NULL, false) : NULL,
        tdm_nn_layer_norm(1, &c->n_embd, 1e-5), tdm_nn_linear(c->n_embd, c->vocab_size, false)};
    free(blocks);
    if (!made(GPT_N, kids)) return NULL;
    // Tying: lm_head's weight becomes wte's tensor (nanoGPT: wte.weight = lm_head.weight).
    tdm_module *wte = kids[GPT_WTE], *head = kids[GPT_LM_HEAD];
    tdm_tensor_free(head->own[OWN_WEIGHT]);
    head->own[OWN_WEIGHT] = tdm_tensor_retain(wte->own[OWN_WEIGHT]);
    static const char *const names[GPT_N] = {"transformer.wte", "transformer.wpe",
                                             "transformer.drop", "transformer.h",
                                             "transformer.ln_f", "lm_head"};
    tdm_module *m = container_new(MOD_GPT, GPT_N, kids, names, false);
    if (!m) return NULL;
    m->block_size = c->block_size;
    // nanoGPT's _init_weights: Linear and Embedding weights N(0, 0.02), the residual projections
    // (c_proj.weight) N(0, 0.02/sqrt(2 n_layer)), Linear biases 0; LayerNorms keep 1 and 0.
    for (int i = 0; i < m->n_state; i++) {
        state_entry *e = &m->state[i];
        if (e->init != INIT_UNIFORM && e->init != INIT_NORMAL) continue;   // a LayerNorm's
        if (ends_with(e->name, ".bias")) {
            e->init = INIT_ZEROS;
        } else {
            e->init = INIT_NORMAL;
            e->bound = ends_with(e->name, "c_proj.weight") ? 0.02 / sqrt(2.0 * (double)n_layer)
                                                           : 0.02;
        }
    }
    return module_ready(m, TDM_OK);
}

tdm_tensor *tdm_gpt_loss(const tdm_tensor *logits, const tdm_tensor *targets) {
    if (tdm_check_tensor("gpt_loss", "logits", logits) != TDM_OK ||
        tdm_check_tensor("gpt_loss", "targets", targets) != TDM_OK)
        return NULL;
    const int64_t *s = logits->shape, *t = targets->shape;
    if (logits->ndim != 3 || targets->ndim != 2 || s[0] != t[0] || s[1] != t[1]) {
        char a[96], b[96];
        tdm_error_set(TDM_ERR_SHAPE, "gpt_loss: logits %s and targets %s: expected (B,T,V) and "
                      "(B,T)", tdm_shape_str(logits->ndim, s, a, sizeof a),
                      tdm_shape_str(targets->ndim, t, b, sizeof b));
        return NULL;
    }
    int64_t rows[2] = {s[0] * s[1], s[2]}, n = rows[0];
    tdm_tensor *lv = tdm_tensor_reshape(logits, 2, rows);          // (B*T,V)
    tdm_tensor *yv = lv ? tdm_tensor_reshape(targets, 1, &n) : NULL;   // (B*T)
    tdm_tensor *loss = yv ? tdm_cross_entropy(lv, yv, TDM_REDUCTION_MEAN, 0.0, -1) : NULL;
    tdm_tensor_free(yv);
    tdm_tensor_free(lv);
    return loss;
}

static void gpt_positions_drop(tdm_module *m) {
    tdm_tensor_free(m->pos);
    m->pos = NULL;
}

// The positions 0..t-1 (int64) on dev: made once per length and device (a host copy), so that a
// step captured in a CUDA graph after an eager one reads them without copying.
static const tdm_tensor *gpt_positions(tdm_module *m, int64_t t, tdm_device dev) {
    if (m->pos && m->pos->shape[0] == t && tdm_device_equal(m->pos->device, dev)) return m->pos;
    gpt_positions_drop(m);
    int64_t *p = malloc((size_t)t * sizeof *p);
    if (!p) {
        tdm_error_set(TDM_ERR_OOM, "nn.GPT: out of host memory");
        return NULL;
    }
    for (int64_t i = 0; i < t; i++) p[i] = i;
    m->pos = tdm_tensor_from_host(1, &t, TDM_DTYPE_I64, dev, p);
    free(p);
    return m->pos;
}

// idx (B,T) int64 token indices -> logits (B,T,V).
static tdm_tensor *gpt_forward(tdm_module *m, const tdm_tensor *idx, bool recompute) {
    if (idx->ndim != 2 || idx->dtype != TDM_DTYPE_I64) {
        char b[96];
        tdm_error_set(TDM_ERR_SHAPE, "nn.GPT: expected token indices (B,T) int64, got %s %s",
                      tdm_shape_str(idx->ndim, idx->shape, b, sizeof b),
                      tdm_dtype_name(idx->dtype));
        return NULL;
    }
    int64_t t = idx->shape[1];
    if (t > m->block_size || t < 1) {
        tdm_error_set(TDM_ERR_SHAPE, "nn.GPT: cannot forward a sequence of length %lld, block "
                      "size is only %lld", (long long)t, (long long)m->block_size);
        return NULL;
    }
    tdm_module **c = m->children;
    const tdm_tensor *pos = gpt_positions(m, t, idx->device);   // (T)
    if (!pos) return NULL;
    tdm_tensor *tok = module_forward(c[GPT_WTE], idx, recompute);              // (B,T,C)
    tdm_tensor *pe = tok ? module_forward(c[GPT_WPE], pos, recompute) : NULL;   // (T,C)
    tdm_tensor *x = pe ? tdm_add(tok, pe, 1.0) : NULL;                          // (B,T,C)
    tdm_tensor_free(tok);
    tdm_tensor_free(pe);
    for (int i = GPT_DROP; x && i <= GPT_LM_HEAD; i++) {   // drop, h, ln_f, lm_head
        tdm_tensor *next = module_forward(c[i], x, recompute);
        tdm_tensor_free(x);
        x = next;
    }
    return x;   // (B,T,V)
}

// x (B,T,C) -> c_fc (B,T,4C) -> GELU -> c_proj (B,T,C) -> dropout. With the tanh GELU (GPT-2's)
// the first three are one op, tdm_linear_gelu_linear (the backend's cuBLASLt epilogues where it
// has them; the three ops otherwise).
static tdm_tensor *mlp_forward(tdm_module *m, const tdm_tensor *x, bool recompute) {
    tdm_module **c = m->children;   // c_fc, gelu, c_proj, dropout
    if (!c[1]->approximate_tanh) return module_forward(m, x, recompute);
    tdm_tensor *y = tdm_linear_gelu_linear(x, c[0]->own[OWN_WEIGHT], c[0]->own[OWN_BIAS],
                                           c[2]->own[OWN_WEIGHT], c[2]->own[OWN_BIAS]);
    tdm_tensor *out = y ? module_forward(c[3], y, recompute) : NULL;
    tdm_tensor_free(y);
    return out;
}

// x (B,T,C) -> h = x + attn(ln_1(x)), then h + mlp(ln_2(h)); the first residual add and ln_2
// are one op (tdm_add_layer_norm: one pass where the backend fuses them, the same values).
static tdm_tensor *block_forward(tdm_module *m, const tdm_tensor *x, bool recompute) {
    tdm_module **c = m->children;
    const tdm_module *ln2 = c[BLK_LN_2];
    tdm_tensor *a = module_forward(c[BLK_LN_1], x, recompute);
    tdm_tensor *b = a ? module_forward(c[BLK_ATTN], a, recompute) : NULL;
    tdm_tensor *h = NULL;
    tdm_tensor *n = b ? tdm_add_layer_norm(x, b, ln2->norm_ndim, ln2->own[OWN_WEIGHT],
                                           ln2->own[OWN_BIAS], ln2->eps, &h)
                      : NULL;
    tdm_tensor *f = n ? mlp_forward(c[BLK_MLP], n, recompute) : NULL;
    tdm_tensor *out = f ? tdm_add(h, f, 1.0) : NULL;
    tdm_tensor *all[5] = {a, b, h, n, f};
    for (int i = 0; i < 5; i++) tdm_tensor_free(all[i]);
    return out;
}

// x (B,T,C) -> c_attn -> q, k, v (B,nh,T,hs) -> causal SDPA -> (B,T,C) -> c_proj -> dropout.
// attn_dropout is SDPA's dropout_p (training only), drawn from the module's generator.
static tdm_tensor *attention_forward(tdm_module *m, const tdm_tensor *x, bool recompute) {
    if (x->ndim != 3) {
        char b[96];
        tdm_error_set(TDM_ERR_SHAPE, "nn.CausalSelfAttention: expected (B,T,C), got %s",
                      tdm_shape_str(x->ndim, x->shape, b, sizeof b));
        return NULL;
    }
    int64_t B = x->shape[0], T = x->shape[1], C = x->shape[2], nh = m->n_head;
    int64_t heads[4] = {B, T, nh, C / nh}, flat[3] = {B, T, C};
    tdm_module **c = m->children;
    tdm_tensor *qkv = module_forward(c[ATT_C_ATTN], x, recompute);   // (B,T,3C)
    tdm_tensor *part[3] = {NULL, NULL, NULL}, *hv[3] = {NULL, NULL, NULL};
    bool ok = qkv && tdm_tensor_split(qkv, C, 2, part, 3) == 3;      // q, k, v (B,T,C)
    for (int i = 0; ok && i < 3; i++) {
        tdm_tensor *v = tdm_tensor_view(part[i], 4, heads);           // (B,T,nh,hs)
        hv[i] = v ? tdm_tensor_transpose(v, 1, 2) : NULL;              // (B,nh,T,hs)
        tdm_tensor_free(v);
        ok = hv[i] != NULL;
    }
    double p = m->training ? m->p : 0.0;
    tdm_tensor *y = ok ? tdm_scaled_dot_product_attention(hv[0], hv[1], hv[2], NULL, p, true,
                                                          TDM_SDPA_SCALE_DEFAULT, m->gen)
                       : NULL;                                         // (B,nh,T,hs)
    tdm_tensor_free(qkv);
    for (int i = 0; i < 3; i++) {
        tdm_tensor_free(part[i]);
        tdm_tensor_free(hv[i]);
    }
    tdm_tensor *yt = y ? tdm_tensor_transpose(y, 1, 2) : NULL;         // (B,T,nh,hs)
    tdm_tensor *yc = yt ? tdm_tensor_view(yt, 3, flat) : NULL;         // (B,T,C)
    tdm_tensor_free(y);
    tdm_tensor_free(yt);
    tdm_tensor *h = yc ? module_forward(c[ATT_C_PROJ], yc, recompute) : NULL;
    tdm_tensor_free(yc);
    tdm_tensor *out = h ? module_forward(c[ATT_RESID_DROPOUT], h, recompute) : NULL;
    tdm_tensor_free(h);
    return out;   // (B,T,C)
}

// ---- activation checkpointing -----------------------------------------------------------------
//
// A checkpointed segment runs with grad mode off, so none of its activations are kept; its output
// gets a custom autograd node holding only the segment's input. The node's backward re-runs the
// segment with grad mode on from a detached copy of the input (requiring grad when the input
// did), backpropagates the incoming gradient through it with a nested tdm_backward (parameter
// gradients accumulate directly into the leaves, as in PyTorch's reentrant checkpoint), and hands
// the input's gradient on. The recomputation reproduces the forward exactly: dropout modules
// replay the stream offsets they had at forward, the autocast state is the forward's, and
// BatchNorm normalises with the same batch statistics while skipping the running-stat update.

typedef struct {
    tdm_module *seq;
    int lo, hi;
    tdm_tensor *input;
    tdm_autocast_state autocast;
    int n_dropout;
    tdm_module **dropout;   // the segment's dropout modules ...
    uint64_t *offset;       // ... and their offsets at forward
} checkpoint_ctx;

static void checkpoint_ctx_free(void *ctx) {
    checkpoint_ctx *c = ctx;
    if (!c) return;
    tdm_tensor_free(c->input);
    free(c->dropout);
    free(c->offset);
    free(c);
}

// The offset of a module's random stream: a Dropout's, or a CausalSelfAttention's generator.
static bool has_stream(const tdm_module *m) {
    return m->kind == MOD_DROPOUT || (m->kind == MOD_SELF_ATTENTION && m->gen);
}
static uint64_t stream_offset(const tdm_module *m) {
    return m->kind == MOD_DROPOUT ? m->rng.offset : tdm_generator_offset(m->gen);
}
static void stream_offset_set(tdm_module *m, uint64_t offset) {
    if (m->kind == MOD_DROPOUT) m->rng.offset = offset;
    else tdm_generator_set_offset(m->gen, offset);
}

// Appends m's modules with a random stream (recursively) to c (or only counts them when
// c->dropout is NULL).
static void dropouts_collect(tdm_module *m, checkpoint_ctx *c) {
    if (has_stream(m)) {
        if (c->dropout) {
            c->dropout[c->n_dropout] = m;
            c->offset[c->n_dropout] = stream_offset(m);
        }
        c->n_dropout++;
    }
    for (int i = 0; i < m->n_children; i++) dropouts_collect(m->children[i], c);
}

// The parameters of children lo..hi-1 that require grad, into out (when not NULL); the count.
static int range_grad_params(const tdm_module *m, int lo, int hi, tdm_tensor **out) {
    int n = 0;
    for (int i = lo; i < hi; i++) {
        const tdm_module *c = m->children[i];
        for (int j = 0; j < c->n_state; j++) {
            tdm_tensor *t = *c->state[j].slot;
            if (!c->state[j].is_param || !tdm_tensor_requires_grad(t)) continue;
            if (out) out[n] = t;
            n++;
        }
    }
    return n;
}

static tdm_status checkpoint_backward(void *ctx, const tdm_tensor *grad_output,
                                      tdm_tensor **grad_inputs) {
    checkpoint_ctx *c = ctx;
    grad_inputs[0] = NULL;   // and none for the parameters (grad_inputs[1...])
    bool input_grad = tdm_tensor_requires_grad(c->input);
    tdm_tensor *x = tdm_tensor_detach(c->input);
    uint64_t *now = malloc((size_t)(c->n_dropout ? c->n_dropout : 1) * sizeof *now);
    if (!x || !now) {
        tdm_tensor_free(x);
        free(now);
        return x ? tdm_error_set(TDM_ERR_OOM, "checkpoint: out of host memory")
                 : tdm_last_status();
    }
    if (input_grad) tdm_tensor_set_requires_grad(x, true);
    for (int i = 0; i < c->n_dropout; i++) {   // replay the forward's masks
        now[i] = stream_offset(c->dropout[i]);
        stream_offset_set(c->dropout[i], c->offset[i]);
    }
    tdm_autocast_state autocast = tdm_autocast_get();
    tdm_autocast_exit(c->autocast);   // sets the forward's autocast state
    bool grad = tdm_grad_set_enabled(true);

    tdm_tensor *y = run_range(c->seq, c->lo, c->hi, x, true);
    tdm_status s = y ? tdm_backward(y, grad_output) : tdm_last_status();

    tdm_grad_set_enabled(grad);
    tdm_autocast_exit(autocast);
    for (int i = 0; i < c->n_dropout; i++) stream_offset_set(c->dropout[i], now[i]);
    if (s == TDM_OK && input_grad) {
        tdm_tensor *g = tdm_tensor_grad(x);
        grad_inputs[0] = g ? tdm_tensor_retain(g) : NULL;
    }
    tdm_tensor_free(y);
    tdm_tensor_free(x);
    free(now);
    return s;
}

// The node's inputs are the segment's input and its parameters: the parameters make the node
// exist when the input does not require grad (the first segment's input, usually), and its
// backward gives them no gradient through the node (NULL): the nested backward has already
// accumulated theirs, and fired their hooks, once.
static tdm_tensor *checkpoint_range(tdm_module *m, int lo, int hi, const tdm_tensor *x) {
    int n_params = range_grad_params(m, lo, hi, NULL);
    // Nothing to recompute for: run it plainly (then it records nothing anyway).
    if (!tdm_grad_enabled() || (!tdm_tensor_requires_grad(x) && n_params == 0))
        return run_range(m, lo, hi, x, false);
    checkpoint_ctx *c = calloc(1, sizeof *c);
    tdm_tensor **inputs = malloc((size_t)(1 + n_params) * sizeof *inputs);
    if (!c || !inputs) {
        free(c);
        free(inputs);
        tdm_error_set(TDM_ERR_OOM, "checkpoint: out of host memory");
        return NULL;
    }
    inputs[0] = (tdm_tensor *)x;
    range_grad_params(m, lo, hi, inputs + 1);
    *c = (checkpoint_ctx){.seq = m, .lo = lo, .hi = hi, .autocast = tdm_autocast_get()};
    for (int i = lo; i < hi; i++) dropouts_collect(m->children[i], c);
    int n = c->n_dropout;
    c->n_dropout = 0;
    c->dropout = malloc((size_t)(n ? n : 1) * sizeof *c->dropout);
    c->offset = malloc((size_t)(n ? n : 1) * sizeof *c->offset);
    if (!c->dropout || !c->offset) {
        checkpoint_ctx_free(c);
        free(inputs);
        tdm_error_set(TDM_ERR_OOM, "checkpoint: out of host memory");
        return NULL;
    }
    for (int i = lo; i < hi; i++) dropouts_collect(m->children[i], c);
    c->input = tdm_tensor_retain((tdm_tensor *)x);

    bool grad = tdm_grad_set_enabled(false);
    tdm_tensor *y = run_range(m, lo, hi, x, false);
    tdm_grad_set_enabled(grad);
    if (y == x) {   // a segment that hands its input on (an empty Sequential): a new tensor
        int64_t shape[TDM_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        tdm_tensor_free(y);
        grad = tdm_grad_set_enabled(false);
        y = tdm_tensor_reshape(x, x->ndim, shape);
        tdm_grad_set_enabled(grad);
    }
    if (!y) {
        checkpoint_ctx_free(c);
        free(inputs);
        return NULL;
    }
    tdm_tensor *out = tdm_autograd_custom("checkpoint", inputs, 1 + n_params, y,
                                          checkpoint_backward, c, checkpoint_ctx_free);
    free(inputs);
    if (!out) tdm_tensor_free(y);   // c was freed by tdm_autograd_custom
    return out;
}

tdm_status tdm_sequential_set_checkpoint_segments(tdm_module *seq, int segments) {
    if (seq && seq->kind == MOD_GPT) seq = seq->children[GPT_H];   // its blocks, transformer.h
    if (!seq || seq->kind != MOD_SEQUENTIAL)
        return tdm_error_set(TDM_ERR_ARG, "sequential_set_checkpoint_segments: %s is not a "
                             "Sequential", seq ? kind_name(seq->kind) : "NULL");
    if (segments < 0)
        return tdm_error_set(TDM_ERR_ARG, "sequential_set_checkpoint_segments: %d segments",
                             segments);
    seq->segments = segments;
    return TDM_OK;
}

// ---- train/eval, devices, free --------------------------------------------------------------

void tdm_module_train(tdm_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) tdm_module_train(m->children[i], training);
}

// Moves every state tensor in place: the tensor objects stay (optimizers and callers keep valid
// pointers; parameters stay leaves), their storage is replaced, as PyTorch's module.to() swaps
// param.data. Gradients move along. All copies are made first: on failure nothing has moved.
tdm_status tdm_module_to(tdm_module *m, tdm_device dev) {
    if (!m) return tdm_error_set(TDM_ERR_ARG, "module_to: module is NULL");
    if (!tdm_device_available(dev)) return tdm_last_status();
    int n = m->n_state;
    tdm_tensor **moved = calloc((size_t)(n ? n : 1), sizeof *moved);
    tdm_tensor **grads = calloc((size_t)(n ? n : 1), sizeof *grads);
    tdm_status s = moved && grads ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "module_to: out of memory");
    bool grad_mode = tdm_grad_set_enabled(false);
    for (int i = 0; s == TDM_OK && i < n; i++) {
        tdm_tensor *t = *m->state[i].slot;
        if (tdm_device_equal(t->device, dev) || entry_first(m, i) != i) continue;   // tied: once
        moved[i] = tdm_tensor_to(t, dev, t->dtype);
        tdm_tensor *g = tdm_tensor_grad(t);
        if (g) grads[i] = tdm_tensor_to(g, dev, g->dtype);
        if (!moved[i] || (g && !grads[i])) s = tdm_last_status();
    }
    for (int i = 0; s == TDM_OK && i < n; i++) {
        if (!moved[i]) continue;
        tdm_tensor *t = *m->state[i].slot;
        tdm_storage *old = t->storage;
        tdm_device old_dev = t->device;
        t->storage = moved[i]->storage;
        t->device = dev;
        moved[i]->storage = old;   // freed with moved[i] below
        moved[i]->device = old_dev;
        if (grads[i]) tdm_tensor_set_grad(t, grads[i]);
    }
    tdm_grad_set_enabled(grad_mode);
    for (int i = 0; moved && grads && i < n; i++) {
        tdm_tensor_free(moved[i]);
        tdm_tensor_free(grads[i]);
    }
    free(moved);
    free(grads);
    if (s == TDM_OK) gpt_positions_drop(m);   // made again on the new device
    return s;
}

void tdm_module_free(tdm_module *m) {
    if (!m) return;
    for (int i = 0; i < m->n_children; i++) tdm_module_free(m->children[i]);
    free(m->children);
    for (int i = 0; i < OWN_MAX; i++) tdm_tensor_free(m->own[i]);
    for (int i = 0; i < m->n_state; i++) free(m->state[i].name);
    free(m->state);
    if (m->kind == MOD_DROPOUT) tdm_stream_release(&m->rng);   // graphs advancing it refuse now
    tdm_generator_free(m->gen);
    tdm_tensor_free(m->pos);
    free(m);
}

// ---- parameters and state ---------------------------------------------------------------------

int tdm_module_parameters(tdm_module *m, tdm_tensor **out, int cap) {
    if (!m) return 0;
    int n = 0;
    for (int i = 0; i < m->n_state; i++) {
        if (!m->state[i].is_param || entry_first(m, i) != i) continue;   // a tied one: once
        if (out && n < cap) out[n] = *m->state[i].slot;
        n++;
    }
    return n;
}

int tdm_module_state(tdm_module *m, const char **names, tdm_tensor **tensors, int cap) {
    if (!m) return 0;
    for (int i = 0; i < m->n_state && i < cap; i++) {
        if (names) names[i] = m->state[i].name;
        if (tensors) tensors[i] = *m->state[i].slot;
    }
    return m->n_state;
}

// The name a tied tensor is saved under: the first of its names in sorted order, as
// safetensors.torch.save_model keeps ("lm_head.weight" over "transformer.wte.weight").
static int entry_kept(const tdm_module *m, int i) {
    int keep = i;
    for (int j = 0; j < m->n_state; j++)
        if (*m->state[j].slot == *m->state[i].slot && strcmp(m->state[j].name,
                                                              m->state[keep].name) < 0)
            keep = j;
    return keep;
}

// What safetensors.torch.save_model writes: the state dict with each tied tensor once (under
// entry_kept's name; each other name a metadata entry naming the kept one), and
// {"format": "pt"}; then the n_extra tensors; the data by decreasing element size.
tdm_status tdm_module_save_with(tdm_module *m, const char *path, int n_extra,
                                const char *const *extra_names,
                                const tdm_tensor *const *extra) {
    if (!m || !path || n_extra < 0 || (n_extra && (!extra_names || !extra)))
        return tdm_error_set(TDM_ERR_ARG, "module_save: module and path are required");
    int n = m->n_state, cap = n + n_extra + 1;
    const char **names = malloc((size_t)cap * sizeof *names);
    const tdm_tensor **tensors = malloc((size_t)cap * sizeof *tensors);
    const char **meta = malloc((size_t)(2 * cap) * sizeof *meta);
    tdm_status s = TDM_OK;
    if (!names || !tensors || !meta) {
        s = tdm_error_set(TDM_ERR_OOM, "module_save: out of host memory");
    } else {
        int k = 0, n_meta = 1;
        meta[0] = "format";
        meta[1] = "pt";
        for (int i = 0; i < n; i++) {
            int keep = entry_kept(m, i);
            if (keep != i) {   // a tied name: said in the metadata
                meta[2 * n_meta] = m->state[i].name;
                meta[2 * n_meta++ + 1] = m->state[keep].name;
                continue;
            }
            names[k] = m->state[i].name;
            tensors[k++] = *m->state[i].slot;
        }
        for (int i = 0; i < n_extra; i++) {
            names[k] = extra_names[i];
            tensors[k++] = extra[i];
        }
        // By decreasing element size, keeping the order within a size (as the safetensors
        // writer lays data out): every tensor is then aligned to its element size.
        for (int i = 1; i < k; i++)
            for (int j = i; j > 0 && tdm_dtype_size(tensors[j]->dtype) >
                                         tdm_dtype_size(tensors[j - 1]->dtype); j--) {
                const char *tn = names[j];
                const tdm_tensor *tt = tensors[j];
                names[j] = names[j - 1];
                tensors[j] = tensors[j - 1];
                names[j - 1] = tn;
                tensors[j - 1] = tt;
            }
        s = tdm_safetensors_save(path, k, names, tensors, n_meta, meta);
    }
    free(names);
    free(tensors);
    free(meta);
    return s;
}

tdm_status tdm_module_save(tdm_module *m, const char *path) {
    return tdm_module_save_with(m, path, 0, NULL, NULL);
}

static bool shape_equal(const tdm_tensor *a, const tdm_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

// Entry i is missing from the file: fine when it is tied to an entry that is there (a state dict
// written by safetensors' save_model keeps one name of a tied tensor); else the error.
static tdm_status tied_present(const tdm_module *m, const tdm_safetensors *st, const char *prefix,
                               int i, const char *path) {
    const char *other = NULL;
    for (int j = 0; j < m->n_state; j++) {
        if (j == i || *m->state[j].slot != *m->state[i].slot) continue;
        char name[768];
        snprintf(name, sizeof name, "%s%s", prefix, m->state[j].name);
        if (tdm_safetensors_has(st, name)) return TDM_OK;
        other = m->state[j].name;
    }
    if (other)
        return tdm_error_set(TDM_ERR_FORMAT, "module_load %s: missing entry '%s%s' (or '%s%s': "
                             "the two are tied, one tensor)", path, prefix, m->state[i].name,
                             prefix, other);
    return tdm_error_set(TDM_ERR_FORMAT, "module_load %s: missing entry '%s%s'", path, prefix,
                         m->state[i].name);
}

// A file holding both names of a tied tensor must hold one value: they are one parameter.
static tdm_status tied_equal(const tdm_tensor *a, const tdm_tensor *b, const char *path,
                             const char *prefix, const char *na, const char *nb) {
    size_t bytes = tdm_tensor_nbytes(a);
    unsigned char *ha = malloc(bytes ? bytes : 1), *hb = malloc(bytes ? bytes : 1);
    tdm_status s = ha && hb ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "module_load: out of memory");
    if (s == TDM_OK) s = tdm_tensor_to_host(a, ha, bytes);
    if (s == TDM_OK) s = tdm_tensor_to_host(b, hb, bytes);
    if (s == TDM_OK && memcmp(ha, hb, bytes))
        s = tdm_error_set(TDM_ERR_FORMAT, "module_load %s: '%s%s' and '%s%s' are tied (one "
                          "tensor) but differ in the file", path, prefix, na, prefix, nb);
    free(ha);
    free(hb);
    return s;
}

// Every entry is read, checked and converted first; only then are they copied in, so a failed
// load leaves the module as it was. A missing num_batches_tracked is tolerated even when strict,
// keeping the module's value, as PyTorch's BatchNorm does for state dicts without it.
tdm_status tdm_module_load(tdm_module *m, const char *path, const char *prefix, bool strict) {
    if (!m || !path) return tdm_error_set(TDM_ERR_ARG, "module_load: module and path are required");
    if (!prefix) prefix = "";
    tdm_safetensors *st = tdm_safetensors_open(path);
    if (!st) return tdm_last_status();
    int n = m->n_state;
    tdm_tensor **staged = calloc((size_t)(n ? n : 1), sizeof *staged);
    tdm_status s = staged ? TDM_OK : tdm_error_set(TDM_ERR_OOM, "module_load: out of memory");
    for (int i = 0; s == TDM_OK && i < n; i++) {
        tdm_tensor *t = *m->state[i].slot;
        char name[768];
        if (snprintf(name, sizeof name, "%s%s", prefix, m->state[i].name) >= (int)sizeof name) {
            s = tdm_error_set(TDM_ERR_ARG, "module_load: prefix too long");
            break;
        }
        if (!tdm_safetensors_has(st, name)) {
            if (strict && !ends_with(m->state[i].name, "num_batches_tracked"))
                s = tied_present(m, st, prefix, i, path);
            continue;
        }
        tdm_tensor *f = tdm_safetensors_get(st, name, t->device);
        if (!f) {
            s = tdm_last_status();
            break;
        }
        if (!shape_equal(f, t)) {
            char a[96], b[96];
            s = tdm_error_set(TDM_ERR_SHAPE, "module_load %s: size mismatch for '%s': shape %s in "
                              "the file, %s in the module", path, name,
                              tdm_shape_str(f->ndim, f->shape, a, sizeof a),
                              tdm_shape_str(t->ndim, t->shape, b, sizeof b));
        } else if (f->dtype != t->dtype) {
            staged[i] = tdm_tensor_to(f, t->device, t->dtype);
            if (!staged[i]) s = tdm_last_status();
        } else {
            staged[i] = tdm_tensor_retain(f);
        }
        tdm_tensor_free(f);
    }
    tdm_safetensors_close(st);
    for (int i = 0; s == TDM_OK && i < n; i++)   // both names of a tied tensor: equal
        for (int j = 0; s == TDM_OK && staged[i] && j < i; j++)
            if (staged[j] && *m->state[j].slot == *m->state[i].slot)
                s = tied_equal(staged[j], staged[i], path, prefix, m->state[j].name,
                               m->state[i].name);
    bool grad = tdm_grad_set_enabled(false);
    for (int i = 0; s == TDM_OK && i < n; i++)
        if (staged[i]) s = tdm_tensor_copy_(*m->state[i].slot, staged[i]);
    tdm_grad_set_enabled(grad);
    for (int i = 0; staged && i < n; i++) tdm_tensor_free(staged[i]);
    free(staged);
    return s;
}
