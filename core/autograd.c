/* autograd.c — the autograd engine: grad mode, graph nodes and their lifetime, the accessors of
 * autograd.h, custom nodes, and tdm_backward, which runs the recorded backward functions from a
 * root in reverse topological order and accumulates the gradients into the leaves.
 *
 * The graph: a tensor computed by a recorded op owns a reference to its node (grad_fn); a node
 * owns references to its inputs (the edges: an input with a grad_fn leads to that node, an input
 * without one is a leaf) and to the extra tensors it saved. Nothing points back at an output, so
 * freeing the last output frees the graph behind it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd_impl.h"

// ----------------------------------------------------------------------------
// grad mode (per thread)

static _Thread_local bool grad_disabled;   // zero-initialized: grad mode starts on

bool tdm_grad_enabled(void) { return !grad_disabled; }

bool tdm_grad_set_enabled(bool enabled) {
    bool previous = !grad_disabled;
    grad_disabled = !enabled;
    return previous;
}

// ----------------------------------------------------------------------------
// nodes

// Nodes die through a per-thread worklist rather than recursively: freeing the loss of a deep
// graph releases one node at a time, whatever the depth.
static _Thread_local tdm_grad_node *release_list;
static _Thread_local bool releasing;

static void node_destroy(tdm_grad_node *n) {
    for (int i = 0; i < n->n_inputs; i++) tdm_tensor_free(n->inputs[i]);
    for (int i = 0; i < TDM_NODE_MAX_SAVED; i++) tdm_tensor_free(n->saved[i]);
    if (n->ctx_free) n->ctx_free(n->ctx);
    free(n->inputs);
    free(n->custom_name);
    free(n);
}

void tdm_grad_node_release(tdm_grad_node *node) {
    if (!node || --node->refcount > 0) return;
    node->next_free = release_list;
    release_list = node;
    if (releasing) return;   // an outer call is draining the list
    releasing = true;
    while (release_list) {
        tdm_grad_node *n = release_list;
        release_list = n->next_free;
        node_destroy(n);   // may push more nodes
    }
    releasing = false;
}

bool tdm_autograd_needed(int n, const tdm_tensor *const *inputs) {
    if (grad_disabled) return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

// A node with room for n inputs, holding references to them (refcount 1, for its output).
static tdm_grad_node *node_new(const char *op, int n, const tdm_tensor *const *inputs) {
    tdm_grad_node *node = calloc(1, sizeof *node);
    tdm_tensor **in = calloc(n > 0 ? (size_t)n : 1, sizeof *in);
    if (!node || !in) {
        free(node);
        free(in);
        tdm_error_set(TDM_ERR_OOM, "%s: out of host memory for the autograd node", op);
        return NULL;
    }
    node->refcount = 1;
    node->n_inputs = n;
    node->inputs = in;
    for (int i = 0; i < n; i++) in[i] = tdm_tensor_retain((tdm_tensor *)inputs[i]);
    return node;
}

tdm_tensor *tdm_autograd_record(tdm_tensor *y, const char *name, tdm_node_backward_fn backward,
                                int n, const tdm_tensor *const *inputs,
                                const tdm_node_params *params, int n_saved,
                                const tdm_tensor *const *saved) {
    if (!y || !tdm_dtype_is_float(y->dtype) || !tdm_autograd_needed(n, inputs)) return y;
    tdm_grad_node *node = node_new(name, n, inputs);
    if (!node) {
        tdm_tensor_free(y);
        return NULL;
    }
    node->name = name;
    node->backward = backward;
    if (params) node->params = *params;
    for (int i = 0; i < n_saved && i < TDM_NODE_MAX_SAVED; i++)
        node->saved[i] = tdm_tensor_retain((tdm_tensor *)saved[i]);
    tdm_grad_node_release(y->grad_fn);   // none expected; never leak one
    y->grad_fn = node;
    y->requires_grad = true;
    return y;
}

// ---- custom nodes ----

static tdm_status custom_backward(tdm_grad_node *n, const tdm_tensor *gy, tdm_tensor **gin) {
    return n->custom_backward(n->ctx, gy, gin);
}

tdm_tensor *tdm_autograd_custom(const char *name, tdm_tensor *const *inputs, int n_inputs,
                                tdm_tensor *output,
                                tdm_status (*backward)(void *ctx, const tdm_tensor *grad_output,
                                                       tdm_tensor **grad_inputs),
                                void *ctx, void (*ctx_free)(void *ctx)) {
    const char *op = "autograd_custom";
    tdm_status s = TDM_OK;
    if (!name || !output || !backward || n_inputs < 0 || (n_inputs > 0 && !inputs))
        s = tdm_error_set(TDM_ERR_ARG, "%s: name, output, backward and the inputs are required",
                          op);
    else if (output->grad_fn)
        s = tdm_error_set(TDM_ERR_ARG, "%s: output already has a grad_fn (%s)", op,
                          output->grad_fn->name);
    else if (output->requires_grad)
        s = tdm_error_set(TDM_ERR_ARG, "%s: output is a leaf that requires grad", op);
    else if (!tdm_dtype_is_float(output->dtype))
        s = tdm_error_set(TDM_ERR_DTYPE, "%s: output has dtype %s; only floating tensors carry "
                          "gradients", op, tdm_dtype_name(output->dtype));
    if (s != TDM_OK) {
        if (ctx_free) ctx_free(ctx);
        return NULL;
    }
    if (!tdm_autograd_needed(n_inputs, (const tdm_tensor *const *)inputs)) {
        if (ctx_free) ctx_free(ctx);   // nothing to differentiate: no node, as for any op
        return output;
    }
    tdm_grad_node *node = node_new(op, n_inputs, (const tdm_tensor *const *)inputs);
    char *copy = node ? malloc(strlen(name) + 1) : NULL;
    if (!copy) {
        if (node) {
            tdm_error_set(TDM_ERR_OOM, "%s: out of host memory", op);
            tdm_grad_node_release(node);
        }
        if (ctx_free) ctx_free(ctx);
        return NULL;
    }
    strcpy(copy, name);
    node->custom_name = copy;
    node->name = copy;
    node->backward = custom_backward;
    node->custom_backward = backward;
    node->ctx = ctx;
    node->ctx_free = ctx_free;
    output->grad_fn = node;
    output->requires_grad = true;
    return output;
}

// ----------------------------------------------------------------------------
// accessors

void tdm_tensor_set_requires_grad(tdm_tensor *t, bool requires_grad) {
    if (!t) return;
    if (t->grad_fn) {
        // PyTorch: a non-leaf's flag may only be left as it is (True).
        if (!requires_grad)
            tdm_error_set(TDM_ERR_ARG,
                          "set_requires_grad: you can only change requires_grad flags of leaf "
                          "tensors (this one was computed by %s; use tdm_tensor_detach)",
                          t->grad_fn->name);
        return;
    }
    if (requires_grad && !tdm_dtype_is_float(t->dtype)) {
        tdm_error_set(TDM_ERR_DTYPE,
                      "set_requires_grad: only tensors of floating point dtype can require "
                      "gradients, got %s",
                      tdm_dtype_name(t->dtype));
        return;
    }
    t->requires_grad = requires_grad;
}

bool tdm_tensor_requires_grad(const tdm_tensor *t) { return t && t->requires_grad; }
bool tdm_tensor_is_leaf(const tdm_tensor *t) { return t && !t->grad_fn; }
tdm_tensor *tdm_tensor_grad(const tdm_tensor *t) { return t ? t->grad : NULL; }

const char *tdm_tensor_grad_fn_name(const tdm_tensor *t) {
    return t && t->grad_fn ? t->grad_fn->name : NULL;
}

static bool same_shape(const tdm_tensor *a, const tdm_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

// g may serve as t's gradient: same shape, dtype and device.
static tdm_status check_grad_like(const char *op, const tdm_tensor *t, const tdm_tensor *g,
                                  const char *what) {
    char a[96], b[96], da[32], db[32];
    if (!same_shape(t, g))
        return tdm_error_set(TDM_ERR_SHAPE, "%s: %s has shape %s, the tensor has shape %s", op,
                             what, tdm_shape_str(g->ndim, g->shape, a, sizeof a),
                             tdm_shape_str(t->ndim, t->shape, b, sizeof b));
    if (g->dtype != t->dtype)
        return tdm_error_set(TDM_ERR_DTYPE, "%s: %s has dtype %s, the tensor has dtype %s", op,
                             what, tdm_dtype_name(g->dtype), tdm_dtype_name(t->dtype));
    if (!tdm_device_equal(g->device, t->device))
        return tdm_error_set(TDM_ERR_DEVICE, "%s: %s is on %s, the tensor on %s", op, what,
                             tdm_device_str(g->device, da, sizeof da),
                             tdm_device_str(t->device, db, sizeof db));
    return TDM_OK;
}

tdm_status tdm_tensor_set_grad(tdm_tensor *t, tdm_tensor *grad) {
    TDM_TRY(tdm_check_tensor("set_grad", "tensor", t));
    if (grad) TDM_TRY(check_grad_like("set_grad", t, grad, "the assigned grad"));
    tdm_tensor_retain(grad);
    tdm_tensor_free(t->grad);
    t->grad = grad;
    return TDM_OK;
}

tdm_tensor *tdm_tensor_detach(const tdm_tensor *t) {
    if (tdm_check_tensor("detach", "input", t) != TDM_OK) return NULL;
    bool grad = tdm_grad_set_enabled(false);   // a view that records nothing
    tdm_tensor *v = tdm_tensor_reshape(t, t->ndim, t->shape);
    tdm_grad_set_enabled(grad);
    return v;
}

void tdm_tensor_set_grad_hook(tdm_tensor *leaf, tdm_grad_hook hook, void *ctx) {
    if (!leaf) return;
    leaf->grad_hook = hook;
    leaf->grad_hook_ctx = hook ? ctx : NULL;
}

// ----------------------------------------------------------------------------
// the engine

// A pointer -> index map (open addressing), local to one backward: the engine keeps no state in
// nodes or tensors, so backward is reentrant (a custom node may run one) and threads running
// backward on separate graphs never meet.
typedef struct {
    const void **keys;
    int *vals;
    size_t cap;   // a power of two, at least twice the entries
    size_t count;
} ptr_map;

static size_t ptr_hash(const void *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static bool ptr_map_grow(ptr_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const void **keys = calloc(cap, sizeof *keys);
    int *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = ptr_hash(m->keys[i], cap);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

// The index stored for p, or -1.
static int ptr_map_get(const ptr_map *m, const void *p) {
    if (!m->cap) return -1;
    for (size_t j = ptr_hash(p, m->cap); m->keys[j]; j = (j + 1) & (m->cap - 1))
        if (m->keys[j] == p) return m->vals[j];
    return -1;
}

static bool ptr_map_put(ptr_map *m, const void *p, int val) {
    if (2 * (m->count + 1) > m->cap && !ptr_map_grow(m)) return false;
    size_t j = ptr_hash(p, m->cap);
    while (m->keys[j] && m->keys[j] != p) j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) m->count++;
    m->keys[j] = p;
    m->vals[j] = val;
    return true;
}

static void ptr_map_free(ptr_map *m) {
    free(m->keys);
    free(m->vals);
}

// A growable array of pointers.
typedef struct {
    void **items;
    int count, cap;
} ptr_vec;

static bool ptr_vec_push(ptr_vec *v, void *p) {
    if (v->count == v->cap) {
        int cap = v->cap ? v->cap * 2 : 64;
        void **items = realloc(v->items, (size_t)cap * sizeof *items);
        if (!items) return false;
        v->items = items;
        v->cap = cap;
    }
    v->items[v->count++] = p;
    return true;
}

// One backward's bookkeeping.
typedef struct {
    ptr_vec nodes;       // every node reachable from the root, in discovery order
    ptr_map node_index;  // node -> index in nodes
    int *deps;           // per node: edges from reachable nodes not yet processed
    tdm_tensor **grads;  // per node: the gradient of its output accumulated so far (owned)
    ptr_vec leaves;      // leaves that require grad, reachable from the root
    ptr_map leaf_index;  // leaf -> index in leaves
    int *leaf_pending;   // per leaf: edges into it not yet processed
    bool *leaf_got;      // per leaf: a gradient arrived in this backward
} engine;

static void engine_free(engine *e) {
    for (int i = 0; e->grads && i < e->nodes.count; i++) tdm_tensor_free(e->grads[i]);
    free(e->nodes.items);
    ptr_map_free(&e->node_index);
    free(e->deps);
    free(e->grads);
    free(e->leaves.items);
    ptr_map_free(&e->leaf_index);
    free(e->leaf_pending);
    free(e->leaf_got);
}

static tdm_status engine_oom(void) {
    return tdm_error_set(TDM_ERR_OOM, "backward: out of host memory for the graph walk");
}

// Collects the nodes reachable from root (an explicit stack, so depth costs no C stack), then
// counts the edges into each node and each leaf.
static tdm_status engine_collect(engine *e, tdm_grad_node *root) {
    ptr_vec stack = {0};
    bool ok = ptr_map_put(&e->node_index, root, 0) && ptr_vec_push(&e->nodes, root) &&
              ptr_vec_push(&stack, root);
    while (ok && stack.count) {
        tdm_grad_node *n = stack.items[--stack.count];
        for (int i = 0; ok && i < n->n_inputs; i++) {
            tdm_tensor *in = n->inputs[i];
            if (!in || !in->grad_fn || ptr_map_get(&e->node_index, in->grad_fn) >= 0) continue;
            ok = ptr_map_put(&e->node_index, in->grad_fn, e->nodes.count) &&
                 ptr_vec_push(&e->nodes, in->grad_fn) && ptr_vec_push(&stack, in->grad_fn);
        }
    }
    free(stack.items);
    if (!ok) return engine_oom();

    int n_nodes = e->nodes.count;
    e->deps = calloc((size_t)n_nodes, sizeof *e->deps);
    e->grads = calloc((size_t)n_nodes, sizeof *e->grads);
    if (!e->deps || !e->grads) return engine_oom();
    for (int k = 0; k < n_nodes; k++) {
        tdm_grad_node *n = e->nodes.items[k];
        for (int i = 0; i < n->n_inputs; i++) {
            tdm_tensor *in = n->inputs[i];
            if (!in || !in->requires_grad) continue;
            if (in->grad_fn) {
                e->deps[ptr_map_get(&e->node_index, in->grad_fn)]++;
                continue;
            }
            int li = ptr_map_get(&e->leaf_index, in);
            if (li < 0) {
                li = e->leaves.count;
                if (!ptr_map_put(&e->leaf_index, in, li) || !ptr_vec_push(&e->leaves, in))
                    return engine_oom();
            }
        }
    }
    e->leaf_pending = calloc((size_t)e->leaves.count + 1, sizeof *e->leaf_pending);
    e->leaf_got = calloc((size_t)e->leaves.count + 1, sizeof *e->leaf_got);
    if (!e->leaf_pending || !e->leaf_got) return engine_oom();
    for (int k = 0; k < n_nodes; k++) {
        tdm_grad_node *n = e->nodes.items[k];
        for (int i = 0; i < n->n_inputs; i++) {
            tdm_tensor *in = n->inputs[i];
            if (in && in->requires_grad && !in->grad_fn)
                e->leaf_pending[ptr_map_get(&e->leaf_index, in)]++;
        }
    }
    return TDM_OK;
}

// *acc += g, as a new tensor (g is consumed). Both have the same shape and dtype.
static tdm_status grad_sum(tdm_tensor **acc, tdm_tensor *g) {
    if (!*acc) {
        *acc = g;
        return TDM_OK;
    }
    tdm_tensor *sum = tdm_add(*acc, g, 1.0);
    tdm_tensor_free(g);
    if (!sum) return tdm_last_status();
    tdm_tensor_free(*acc);
    *acc = sum;
    return TDM_OK;
}

// leaf.grad += g (g consumed). The first gradient is stored as it is when nothing else holds it
// (a copy otherwise); later ones are added into the existing tensor in place, so a gradient that
// the caller holds or set (tdm_tensor_set_grad) keeps its identity, as in PyTorch.
static tdm_status leaf_accumulate(tdm_tensor *leaf, tdm_tensor *g) {
    if (!leaf->grad) {
        if (g->refcount == 1 && g->storage->refcount == 1) {
            leaf->grad = g;
            return TDM_OK;
        }
        leaf->grad = tdm_tensor_clone(g);
        tdm_tensor_free(g);
        return leaf->grad ? TDM_OK : tdm_last_status();
    }
    tdm_tensor *sum = tdm_add(leaf->grad, g, 1.0);
    tdm_tensor_free(g);
    if (!sum) return tdm_last_status();
    tdm_status s = tdm_tensor_copy_(leaf->grad, sum);
    tdm_tensor_free(sum);
    return s;
}

// Hands the gradient g (consumed) for `in`, an input of a node, to its producer or its leaf.
static tdm_status engine_route(engine *e, tdm_tensor *in, tdm_tensor *g) {
    if (in->grad_fn) return grad_sum(&e->grads[ptr_map_get(&e->node_index, in->grad_fn)], g);
    int li = ptr_map_get(&e->leaf_index, in);
    e->leaf_got[li] = true;
    return leaf_accumulate(in, g);
}

// One edge into `in` has been processed: a node whose edges are all done becomes ready (pushed
// on `ready`); a leaf whose edges are all done has its hook called.
static tdm_status engine_edge_done(engine *e, tdm_tensor *in, ptr_vec *ready) {
    if (in->grad_fn) {
        int k = ptr_map_get(&e->node_index, in->grad_fn);
        if (--e->deps[k] == 0 && !ptr_vec_push(ready, in->grad_fn)) return engine_oom();
        return TDM_OK;
    }
    int li = ptr_map_get(&e->leaf_index, in);
    if (--e->leaf_pending[li] == 0 && e->leaf_got[li] && in->grad_hook)
        in->grad_hook(in, in->grad_hook_ctx);
    return TDM_OK;
}

// Runs node k's backward on its accumulated gradient and routes what it returns.
static tdm_status engine_run_node(engine *e, int k) {
    tdm_grad_node *n = e->nodes.items[k];
    tdm_tensor *gy = e->grads[k];
    e->grads[k] = NULL;
    if (!gy) return TDM_OK;   // no gradient reached it (a consumer gave none): nothing flows
    tdm_tensor *stack_gin[8] = {0};
    tdm_tensor **gin = n->n_inputs <= 8 ? stack_gin : calloc((size_t)n->n_inputs, sizeof *gin);
    if (!gin) {
        tdm_tensor_free(gy);
        return engine_oom();
    }
    tdm_status s = n->backward(n, gy, gin);
    if (s != TDM_OK) {   // say which node failed: "backward of linear: linear_backward: ..."
        char msg[768];
        snprintf(msg, sizeof msg, "%s", tdm_last_error());
        tdm_error_set(s, "backward of %s: %s", n->name, msg);
    }
    for (int i = 0; i < n->n_inputs; i++) {
        tdm_tensor *in = n->inputs[i], *g = gin[i];
        gin[i] = NULL;
        if (!g) continue;
        if (s == TDM_OK && in && in->requires_grad) {
            char op[128];
            snprintf(op, sizeof op, "backward of %s, input %d", n->name, i);
            s = check_grad_like(op, in, g, "its gradient");
            if (s == TDM_OK) {
                s = engine_route(e, in, g);
                continue;
            }
        }
        tdm_tensor_free(g);   // not wanted, or after an error
    }
    if (gin != stack_gin) free(gin);
    tdm_tensor_free(gy);
    return s;
}

// A one-element 1 of root's shape, dtype and device. On a device, a copy (on the device, no host
// wait) of a 1 made there once per device and dtype, so a step's backward never synchronizes
// (issue 14: only a result that goes to the host waits) and can be captured once one eager
// backward has made it. Kept for the process's lifetime.
#define ONE_CACHE 64
static struct {
    tdm_device device;
    tdm_dtype dtype;
    tdm_tensor *one;
} one_cache[ONE_CACHE];
static int one_cached;
static pthread_mutex_t one_lock = PTHREAD_MUTEX_INITIALIZER;

static tdm_tensor *device_one(const tdm_tensor *root) {
    tdm_tensor *one = NULL;
    bool owned = false;   // not in the cache (it is full): freed here
    pthread_mutex_lock(&one_lock);
    for (int i = 0; i < one_cached && !one; i++)
        if (tdm_device_equal(one_cache[i].device, root->device) && one_cache[i].dtype == root->dtype)
            one = one_cache[i].one;
    if (!one) {
        const double v = 1.0;
        const int64_t shape[1] = {1};
        tdm_tensor *h = tdm_tensor_from_host(1, shape, TDM_DTYPE_F64, TDM_CPU, &v);
        one = h ? tdm_tensor_to(h, root->device, root->dtype) : NULL;
        tdm_tensor_free(h);
        if (one && one_cached < ONE_CACHE) {
            one_cache[one_cached].device = root->device;
            one_cache[one_cached].dtype = root->dtype;
            one_cache[one_cached++].one = one;
        } else {
            owned = one != NULL;
        }
    }
    pthread_mutex_unlock(&one_lock);
    tdm_tensor *view = one ? tdm_tensor_reshape(one, root->ndim, root->shape) : NULL;
    tdm_tensor *g = view ? tdm_tensor_clone(view) : NULL;   // device to device
    tdm_tensor_free(view);
    if (owned) tdm_tensor_free(one);
    return g;
}

// The gradient that seeds root: ones for a one-element root without grad_output, else
// grad_output (converted to root's dtype and device when they differ, as PyTorch does).
static tdm_tensor *seed_gradient(const tdm_tensor *root, const tdm_tensor *grad_output) {
    char a[96], b[96];
    if (!grad_output) {
        if (root->numel != 1) {
            tdm_error_set(TDM_ERR_SHAPE,
                          "backward: grad can be implicitly created only for scalar outputs "
                          "(root has shape %s); pass grad_output",
                          tdm_shape_str(root->ndim, root->shape, a, sizeof a));
            return NULL;
        }
        if (root->device.type != TDM_DEVICE_CPU) return device_one(root);
        double one = 1.0;
        tdm_tensor *h = tdm_tensor_from_host(root->ndim, root->shape, TDM_DTYPE_F64, TDM_CPU, &one);
        tdm_tensor *g = h ? tdm_tensor_to(h, root->device, root->dtype) : NULL;
        tdm_tensor_free(h);
        return g;
    }
    if (!same_shape(root, grad_output)) {
        tdm_error_set(TDM_ERR_SHAPE,
                      "backward: mismatch in shape: grad_output has a shape of %s and the root "
                      "has a shape of %s",
                      tdm_shape_str(grad_output->ndim, grad_output->shape, a, sizeof a),
                      tdm_shape_str(root->ndim, root->shape, b, sizeof b));
        return NULL;
    }
    if (!tdm_dtype_is_float(grad_output->dtype)) {
        tdm_error_set(TDM_ERR_DTYPE, "backward: grad_output has dtype %s, expected a floating dtype",
                      tdm_dtype_name(grad_output->dtype));
        return NULL;
    }
    if (grad_output->dtype == root->dtype && tdm_device_equal(grad_output->device, root->device))
        return tdm_tensor_retain((tdm_tensor *)grad_output);
    return tdm_tensor_to(grad_output, root->device, root->dtype);
}

tdm_status tdm_backward(tdm_tensor *root, const tdm_tensor *grad_output) {
    TDM_TRY(tdm_check_tensor("backward", "root", root));
    if (!root->requires_grad)
        return tdm_error_set(TDM_ERR_ARG,
                             "backward: the root does not require grad and does not have a "
                             "grad_fn (no input required grad, or grad mode was off when it was "
                             "computed)");
    bool grad_mode = tdm_grad_set_enabled(false);   // backward functions record nothing
    tdm_tensor *seed = seed_gradient(root, grad_output);
    if (!seed) {
        tdm_grad_set_enabled(grad_mode);
        return tdm_last_status();
    }
    tdm_status s = TDM_OK;
    if (!root->grad_fn) {   // a leaf: its gradient is the seed
        s = leaf_accumulate(root, seed);
        if (s == TDM_OK && root->grad_hook) root->grad_hook(root, root->grad_hook_ctx);
        tdm_grad_set_enabled(grad_mode);
        return s;
    }

    engine e = {0};
    ptr_vec ready = {0};
    s = engine_collect(&e, root->grad_fn);
    if (s == TDM_OK) {
        e.grads[0] = seed;   // the root's node has index 0
        seed = NULL;
        if (!ptr_vec_push(&ready, root->grad_fn)) s = engine_oom();
    }
    // Kahn's order: a node runs once every edge into it was processed, so its gradient is
    // complete; leaves are reached the same way and their hooks run when their last edge is done.
    while (s == TDM_OK && ready.count) {
        tdm_grad_node *n = ready.items[--ready.count];
        int k = ptr_map_get(&e.node_index, n);
        s = engine_run_node(&e, k);
        for (int i = 0; s == TDM_OK && i < n->n_inputs; i++)
            if (n->inputs[i] && n->inputs[i]->requires_grad)
                s = engine_edge_done(&e, n->inputs[i], &ready);
    }
    tdm_tensor_free(seed);
    free(ready.items);
    engine_free(&e);
    tdm_grad_set_enabled(grad_mode);
    return s;
}
