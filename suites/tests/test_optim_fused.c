/* test_optim_fused.c — Adam/AdamW with fused = true (every parameter in one backend call: one
 * kernel launch on cuda) and with f32 master weights for f16/bf16 parameters:
 *   fused      fused and unfused optimizers over the same parameters (f32, bf16, f16, f64, an
 *              empty one, one that never has a gradient and one that misses a step; two groups of
 *              their own lr / weight decay; AdamW + amsgrad, Adam's L2 + maximize, AdamW) agree
 *              bit for bit after every step, parameters and saved state (the files' bytes);
 *   launches   (the emulated device only: it counts launches) a fused step is one kernel launch,
 *              an unfused one a launch per parameter stepped;
 *   master     a bf16 parameter with master weights (fused and not) follows an f32 parameter
 *              stepped alone with the same gradients, rounded to bf16 after each step (and its
 *              exp_avg / exp_avg_sq are that f32 run's, bit for bit); the plain bf16 run, whose
 *              updates fall below half an ulp, differs; an f32 parameter gets no master;
 *   master_io  save / load with master weights: a run saved after 3 steps and resumed in a new
 *              optimizer equals the uninterrupted run bit for bit; a file saved without master
 *              weights loads with the master made from the parameter;
 *   graph      (cuda:0, argument `graph`) fused and unfused steps with master weights captured
 *              in a CUDA graph equal eager steps bit for bit, replay after replay.
 * usage: test_optim_fused TMPDIR cpu|cuda:0 [graph]   (cuda:0 without a device: exit 77) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tandem/tandem.h"
#include "tensor_eq.h"

#ifdef TDM_TEST_EMU
unsigned long long tdm_emu_kernel_launches(void);   // suites/emu/exec.cc
#endif

static tdm_device dev;
static const char *dir;

// ---- parameters and gradients -------------------------------------------------------------

#define NPARAM 7
#define STEPS 5

typedef struct {
    int64_t n;       // elements (1-d)
    tdm_dtype dt;
    int group;
    bool grad;       // has a gradient at all
    int skip_step;   // no gradient at this step (-1: none)
} pspec;

static const pspec SPECS[NPARAM] = {
    {37, TDM_DTYPE_F32, 0, true, -1},  {65, TDM_DTYPE_BF16, 0, true, -1},
    {21, TDM_DTYPE_F16, 1, true, 2},   {17, TDM_DTYPE_F32, 1, false, -1},
    {5, TDM_DTYPE_F64, 0, true, -1},   {0, TDM_DTYPE_F32, 1, true, -1},
    {300, TDM_DTYPE_BF16, 1, true, 3},
};

static double init_at(int p, int64_t j) { return sin(0.7 * (double)j + p) * (1.0 + 0.1 * p); }

// Step k's gradient: large first, then smaller with sign changes (AMSGrad's maximum stays above).
static double grad_at(int p, int k, int64_t j) {
    return (k == 0 ? 1.5 : 0.2) * cos(1.3 * (double)j - 0.5 * k + p) + 0.01 * (double)(j % 7);
}

// A tensor of n elements of dt on dev from f(p, j) (rounded once to dt).
static tdm_tensor *make(int64_t n, tdm_dtype dt, double (*f)(int, int64_t), int p) {
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t j = 0; j < n; j++) v[j] = f(p, j);
    tdm_tensor *h = tdm_tensor_from_host(1, &n, TDM_DTYPE_F64, TDM_CPU, v);
    tdm_tensor *t = h ? tdm_tensor_to(h, dev, dt) : NULL;
    tdm_tensor_free(h);
    free(v);
    CHECK_MSG(t, "make: %s", tdm_last_error());
    return t;
}

static int grad_k;   // make's step for grad_at
static double grad_fn(int p, int64_t j) { return grad_at(p, grad_k, j); }

// Sets params[i]'s gradient for step k as specs says (none where it has none), in its dtype.
static void set_grads(tdm_tensor **params, int n, int k, const pspec *specs) {
    for (int i = 0; i < n; i++) {
        if (!specs[i].grad || specs[i].skip_step == k) {
            tdm_tensor_set_grad(params[i], NULL);
            continue;
        }
        grad_k = k;
        tdm_tensor *g = make(specs[i].n, tdm_tensor_dtype(params[i]), grad_fn, i);
        CHECK_MSG(g && tdm_tensor_set_grad(params[i], g) == TDM_OK, "%s", tdm_last_error());
        tdm_tensor_free(g);
    }
}

// Every parameter that has a gradient gets step k's (no skipped steps: a captured step steps
// the parameters that had one at the capture).
static void spec_grads(tdm_tensor **params, int k) {
    pspec all[NPARAM];
    memcpy(all, SPECS, sizeof all);
    for (int i = 0; i < NPARAM; i++) all[i].skip_step = -1;
    set_grads(params, NPARAM, k, all);
}

static void make_params(tdm_tensor **params) {
    for (int i = 0; i < NPARAM; i++) params[i] = make(SPECS[i].n, SPECS[i].dt, init_at, i);
}

static tdm_optimizer *two_groups(tdm_tensor **params, const tdm_adam_params *p) {
    tdm_tensor *g0[NPARAM], *g1[NPARAM];
    int n0 = 0, n1 = 0;
    for (int i = 0; i < NPARAM; i++) {
        if (SPECS[i].group == 0) g0[n0++] = params[i];
        else g1[n1++] = params[i];
    }
    const tdm_param_group g[2] = {{.params = g0, .n = n0, .lr = 1e-2, .weight_decay = 0.1},
                                  {.params = g1, .n = n1, .lr = 3e-3, .weight_decay = 0.0}};
    tdm_optimizer *o = tdm_optim_adam_groups(g, 2, p);
    CHECK_MSG(o, "%s", tdm_last_error());
    return o;
}

// The whole file at path (malloc'd; *n its size), NULL when unreadable.
static char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*n + 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

// o and p saved to files a and b: the same bytes (state, step counts, groups).
static bool same_state(const tdm_optimizer *o, const tdm_optimizer *p, const char *tag) {
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/fused_%s_%s_a.safetensors", dir, tag, dev.type == TDM_DEVICE_CPU ? "cpu" : "cuda0");
    snprintf(b, sizeof b, "%s/fused_%s_%s_b.safetensors", dir, tag, dev.type == TDM_DEVICE_CPU ? "cpu" : "cuda0");
    if (tdm_optimizer_save(o, a) != TDM_OK || tdm_optimizer_save(p, b) != TDM_OK) {
        fprintf(stderr, "save: %s\n", tdm_last_error());
        return false;
    }
    long na = 0, nb = 0;
    char *da = slurp(a, &na), *db = slurp(b, &nb);
    const bool same = da && db && na == nb && memcmp(da, db, (size_t)na) == 0;
    free(da);
    free(db);
    return same;
}

// ---- fused == unfused ----------------------------------------------------------------------

static void test_fused(void) {
    const struct {
        const char *name;
        bool adamw, amsgrad, maximize;
    } cases[3] = {{"adamw_amsgrad", true, true, false},
                  {"adam_l2_maximize", false, false, true},
                  {"adamw", true, false, false}};
    for (int c = 0; c < 3; c++) {
        tdm_adam_params p = tdm_adam_defaults(cases[c].adamw);
        p.amsgrad = cases[c].amsgrad;
        p.maximize = cases[c].maximize;
        p.beta2 = 0.99;   // bias corrections that differ from step to step visibly
        tdm_tensor *a[NPARAM], *b[NPARAM];
        make_params(a);
        make_params(b);
        tdm_optimizer *unfused = two_groups(a, &p);
        p.fused = true;
        tdm_optimizer *fused = two_groups(b, &p);
        if (!unfused || !fused) return;
        for (int k = 0; k < STEPS; k++) {
            set_grads(a, NPARAM, k, SPECS);
            set_grads(b, NPARAM, k, SPECS);
            if (k == 3) {   // an lr change between steps reaches both
                tdm_optimizer_set_group_lr(unfused, 1, 5e-3);
                tdm_optimizer_set_group_lr(fused, 1, 5e-3);
            }
#ifdef TDM_TEST_EMU
            const unsigned long long l0 = tdm_emu_kernel_launches();
#endif
            CHECK_MSG(tdm_optimizer_step(unfused) == TDM_OK, "%s", tdm_last_error());
#ifdef TDM_TEST_EMU
            const unsigned long long l1 = tdm_emu_kernel_launches();
#endif
            CHECK_MSG(tdm_optimizer_step(fused) == TDM_OK, "%s", tdm_last_error());
#ifdef TDM_TEST_EMU
            const unsigned long long l2 = tdm_emu_kernel_launches();
            if (k >= 1 && dev.type == TDM_DEVICE_CUDA) {   // step 0 also makes the state
                int stepped = 0;
                for (int i = 0; i < NPARAM; i++)
                    stepped += SPECS[i].grad && SPECS[i].skip_step != k && SPECS[i].n > 0;
                CHECK_MSG(l2 - l1 == 1, "%s step %d: the fused step made %llu kernel launches, "
                          "want 1", cases[c].name, k, l2 - l1);
                CHECK_MSG(l1 - l0 == (unsigned long long)stepped, "%s step %d: the unfused step "
                          "made %llu kernel launches, want %d", cases[c].name, k, l1 - l0, stepped);
            }
#endif
            for (int i = 0; i < NPARAM; i++)
                CHECK_MSG(tensors_identical(a[i], b[i]), "%s step %d: parameter %d (%s) differs "
                          "between the fused and the unfused step", cases[c].name, k, i,
                          tdm_dtype_name(SPECS[i].dt));
        }
        CHECK_MSG(same_state(unfused, fused, cases[c].name), "%s: the fused optimizer's saved "
                  "state differs from the unfused one's", cases[c].name);
        // The parameter without a gradient never moved; the others did.
        tdm_tensor *q[NPARAM];
        make_params(q);
        for (int i = 0; i < NPARAM; i++)
            CHECK_MSG(tensors_identical(q[i], b[i]) == (!SPECS[i].grad || SPECS[i].n == 0),
                      "%s: parameter %d %s", cases[c].name, i,
                      SPECS[i].grad ? "did not move" : "moved without a gradient");
        for (int i = 0; i < NPARAM; i++) {
            tdm_tensor_free(a[i]);
            tdm_tensor_free(b[i]);
            tdm_tensor_free(q[i]);
        }
        tdm_optimizer_free(unfused);
        tdm_optimizer_free(fused);
    }
}

// ---- master weights -----------------------------------------------------------------------

#define NM 40

static double master_init(int p, int64_t j) { return 1.0 + 0.25 * sin((double)j + p); }

// One parameter of dt, stepped STEPS_M times by AdamW (lr 1e-3: below half a bf16 ulp of 1) with
// gradients rounded to bf16 (cast to dt), master weights and fused as given; after step k its
// values (as f64) in traj[k * NM ...]; returns the optimizer (the caller frees it and *param).
#define STEPS_M 8
static tdm_optimizer *master_run(tdm_dtype dt, bool master, bool fused, double *traj,
                                 tdm_tensor **param) {
    tdm_tensor *p = make(NM, TDM_DTYPE_BF16, master_init, 0);   // bf16 values, then dt
    tdm_tensor *x = p ? tdm_tensor_to(p, dev, dt) : NULL;
    tdm_tensor_free(p);
    tdm_adam_params ap = tdm_adam_defaults(true);
    ap.lr = 1e-3;
    ap.master_weights = master;
    ap.fused = fused;
    tdm_optimizer *o = x ? tdm_optim_adam(&x, 1, &ap) : NULL;
    CHECK_MSG(o, "%s", tdm_last_error());
    for (int k = 0; o && k < STEPS_M; k++) {
        grad_k = k;
        tdm_tensor *g16 = make(NM, TDM_DTYPE_BF16, grad_fn, 0);
        tdm_tensor *g = g16 ? tdm_tensor_to(g16, dev, dt) : NULL;
        CHECK_MSG(g && tdm_tensor_set_grad(x, g) == TDM_OK, "%s", tdm_last_error());
        CHECK_MSG(tdm_optimizer_step(o) == TDM_OK, "%s", tdm_last_error());
        CHECK(tdm_tensor_to_host_f64(x, traj + (size_t)k * NM) == TDM_OK);
        tdm_tensor_free(g16);
        tdm_tensor_free(g);
    }
    *param = x;
    return o;
}

static bool state_eq(const char *fa, const char *fb, const char *name) {
    tdm_safetensors *a = tdm_safetensors_open(fa), *b = tdm_safetensors_open(fb);
    tdm_tensor *ta = a ? tdm_safetensors_get(a, name, TDM_CPU) : NULL;
    tdm_tensor *tb = b ? tdm_safetensors_get(b, name, TDM_CPU) : NULL;
    const bool same = tensors_identical(ta, tb);
    tdm_tensor_free(ta);
    tdm_tensor_free(tb);
    tdm_safetensors_close(a);
    tdm_safetensors_close(b);
    return same;
}

static void test_master(void) {
    const char *tag = dev.type == TDM_DEVICE_CPU ? "cpu" : "cuda0";
    double f32[STEPS_M * NM], plain[STEPS_M * NM];
    tdm_tensor *pf = NULL, *pp = NULL;
    tdm_optimizer *of = master_run(TDM_DTYPE_F32, false, false, f32, &pf);
    tdm_optimizer *op = master_run(TDM_DTYPE_BF16, false, false, plain, &pp);
    char ff[512];
    snprintf(ff, sizeof ff, "%s/master_f32_%s.safetensors", dir, tag);
    CHECK_MSG(of && tdm_optimizer_save(of, ff) == TDM_OK, "%s", tdm_last_error());
    for (int fused = 0; fused < 2; fused++) {
        double mw[STEPS_M * NM];
        tdm_tensor *pm = NULL;
        tdm_optimizer *om = master_run(TDM_DTYPE_BF16, true, fused, mw, &pm);
        bool same = true, differs = false;
        int at = -1;
        double at_want = 0;
        for (int k = 0; k < STEPS_M * NM; k++) {
            // the f32 run's value rounded to bf16 (f32 -> bf16, nearest even)
            const float v = (float)f32[k];
            tdm_tensor *h = tdm_tensor_from_host(0, NULL, TDM_DTYPE_F32, TDM_CPU, &v);
            tdm_tensor *r = h ? tdm_tensor_to(h, TDM_CPU, TDM_DTYPE_BF16) : NULL;
            double want = NAN;
            CHECK(r && tdm_tensor_to_host_f64(r, &want) == TDM_OK);
            tdm_tensor_free(h);
            tdm_tensor_free(r);
            if (memcmp(&mw[k], &want, sizeof want) && same) {
                same = false;
                at = k;
                at_want = want;
            }
            differs = differs || mw[k] != plain[k];
        }
        CHECK_MSG(same, "master weights (%s): step %d element %d is %.9g, the f32 run rounded "
                  "to bf16 %.9g", fused ? "fused" : "unfused", at / NM, at % NM,
                  mw[at < 0 ? 0 : at], at_want);
        CHECK_MSG(differs, "master weights (%s): the bf16 trajectory equals the one without them "
                  "(the test's updates should fall below half an ulp)", fused ? "fused" : "unfused");
        char fm[512];
        snprintf(fm, sizeof fm, "%s/master_bf16_%s_%d.safetensors", dir, tag, fused);
        CHECK_MSG(om && tdm_optimizer_save(om, fm) == TDM_OK, "%s", tdm_last_error());
        const char *keys[3] = {"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step"};
        for (int k = 0; k < 3; k++)
            CHECK_MSG(state_eq(fm, ff, keys[k]), "master weights (%s): %s is not the f32 run's",
                      fused ? "fused" : "unfused", keys[k]);
        tdm_safetensors *st = tdm_safetensors_open(fm);
        tdm_tensor *master = st ? tdm_safetensors_get(st, "state.0.master_param", TDM_CPU) : NULL;
        tdm_tensor *want = tdm_tensor_from_host(1, (int64_t[]){NM}, TDM_DTYPE_F64, TDM_CPU,
                                                f32 + (STEPS_M - 1) * NM);
        tdm_tensor *want32 = want ? tdm_tensor_to(want, TDM_CPU, TDM_DTYPE_F32) : NULL;
        CHECK_MSG(master && tdm_tensor_dtype(master) == TDM_DTYPE_F32 &&
                  tensors_identical(master, want32),
                  "master weights (%s): state.0.master_param is not the f32 run's parameter",
                  fused ? "fused" : "unfused");
        tdm_tensor_free(master);
        tdm_tensor_free(want);
        tdm_tensor_free(want32);
        tdm_safetensors_close(st);
        tdm_optimizer_free(om);
        tdm_tensor_free(pm);
    }
    // An f32 parameter has no master: its state is the plain f32 run's.
    double mf[STEPS_M * NM];
    tdm_tensor *pmf = NULL;
    tdm_optimizer *omf = master_run(TDM_DTYPE_F32, true, true, mf, &pmf);
    CHECK_MSG(!memcmp(mf, f32, sizeof mf), "master weights changed an f32 parameter's steps");
    char fmf[512];
    snprintf(fmf, sizeof fmf, "%s/master_f32mw_%s.safetensors", dir, tag);
    CHECK_MSG(omf && tdm_optimizer_save(omf, fmf) == TDM_OK, "%s", tdm_last_error());
    tdm_safetensors *st = tdm_safetensors_open(fmf);
    CHECK_MSG(st && !tdm_safetensors_has(st, "state.0.master_param"),
              "an f32 parameter got master weights");
    tdm_safetensors_close(st);
    tdm_optimizer_free(omf);
    tdm_tensor_free(pmf);
    tdm_optimizer_free(of);
    tdm_optimizer_free(op);
    tdm_tensor_free(pf);
    tdm_tensor_free(pp);
}

// ---- master weights through save / load ---------------------------------------------------

// Steps k0..k1-1 of the mixed parameters with optimizer o.
static void steps(tdm_optimizer *o, tdm_tensor **params, int k0, int k1) {
    for (int k = k0; k < k1; k++) {
        set_grads(params, NPARAM, k, SPECS);
        CHECK_MSG(tdm_optimizer_step(o) == TDM_OK, "step %d: %s", k, tdm_last_error());
    }
}

static void test_master_io(void) {
    const char *tag = dev.type == TDM_DEVICE_CPU ? "cpu" : "cuda0";
    for (int fused = 0; fused < 2; fused++) {
        tdm_adam_params p = tdm_adam_defaults(true);
        p.amsgrad = true;
        p.master_weights = true;
        p.fused = fused;
        tdm_tensor *a[NPARAM], *b[NPARAM];
        make_params(a);
        tdm_optimizer *oa = two_groups(a, &p);   // uninterrupted: 6 steps
        if (!oa) return;
        steps(oa, a, 0, 3);
        char half[512];
        snprintf(half, sizeof half, "%s/master_io_%s_%d.safetensors", dir, tag, fused);
        CHECK_MSG(tdm_optimizer_save(oa, half) == TDM_OK, "%s", tdm_last_error());
        tdm_safetensors *st = tdm_safetensors_open(half);
        CHECK_MSG(st && tdm_safetensors_has(st, "state.1.master_param") &&
                  !tdm_safetensors_has(st, "state.0.master_param"),
                  "the file holds master weights for the bf16 parameter only");
        tdm_safetensors_close(st);
        // The resumed run: the parameters' values after 3 steps, a new optimizer, the file.
        for (int i = 0; i < NPARAM; i++) b[i] = tdm_tensor_to(a[i], dev, SPECS[i].dt);
        tdm_optimizer *ob = two_groups(b, &p);
        if (!ob) return;
        CHECK_MSG(tdm_optimizer_load(ob, half) == TDM_OK, "%s", tdm_last_error());
        steps(oa, a, 3, 6);
        steps(ob, b, 3, 6);
        for (int i = 0; i < NPARAM; i++)
            CHECK_MSG(tensors_identical(a[i], b[i]), "master weights (%s) through save/load: "
                      "parameter %d differs from the uninterrupted run", fused ? "fused" : "unfused", i);
        CHECK_MSG(same_state(oa, ob, fused ? "io_fused" : "io"), "master weights (%s) through "
                  "save/load: the state differs from the uninterrupted run's",
                  fused ? "fused" : "unfused");
        // A file saved without master weights: the master is made from the parameter at load.
        p.master_weights = false;
        tdm_optimizer *oc = two_groups(b, &p);
        steps(oc, b, 6, 7);
        char plain[512];
        snprintf(plain, sizeof plain, "%s/master_plain_%s_%d.safetensors", dir, tag, fused);
        CHECK_MSG(tdm_optimizer_save(oc, plain) == TDM_OK, "%s", tdm_last_error());
        p.master_weights = true;
        tdm_optimizer *od = two_groups(b, &p);
        CHECK_MSG(tdm_optimizer_load(od, plain) == TDM_OK, "%s", tdm_last_error());
        char again[512];
        snprintf(again, sizeof again, "%s/master_again_%s_%d.safetensors", dir, tag, fused);
        CHECK_MSG(tdm_optimizer_save(od, again) == TDM_OK, "%s", tdm_last_error());
        st = tdm_safetensors_open(again);
        tdm_tensor *m = st ? tdm_safetensors_get(st, "state.1.master_param", TDM_CPU) : NULL;
        tdm_tensor *want = tdm_tensor_to(b[1], TDM_CPU, TDM_DTYPE_F32);
        CHECK_MSG(tensors_identical(m, want), "a file without master weights: the master is not "
                  "the parameter's value");
        tdm_tensor_free(m);
        tdm_tensor_free(want);
        tdm_safetensors_close(st);
        steps(od, b, 7, 8);   // and it steps
        for (int i = 0; i < NPARAM; i++) {
            tdm_tensor_free(a[i]);
            tdm_tensor_free(b[i]);
        }
        tdm_optimizer_free(oa);
        tdm_optimizer_free(ob);
        tdm_optimizer_free(oc);
        tdm_optimizer_free(od);
    }
}

// ---- captured in a CUDA graph ----------------------------------------------------------------
// The mixed parameters (bf16 ones with master weights), fused and not: the step captured before
// any eager step (state and masters made during the capture: fresh, read as zeros and as the
// parameter by the first replay), replayed 4 times, an eager step on both sides, 2 more replays;
// the captured side equals an eager optimizer's parameters bit for bit after each. A captured
// fused step is the kernel plus the writes of its table (under capture they travel as kernel
// arguments); under the emulator the replays themselves launch nothing from the host.
static void test_graph(void) {
    for (int fused = 0; fused < 2; fused++) {
        tdm_adam_params p = tdm_adam_defaults(true);
        p.amsgrad = p.maximize = true;
        p.beta2 = 0.9;
        p.master_weights = true;
        p.fused = fused;
        tdm_tensor *pc[NPARAM], *pe[NPARAM], *gc[NPARAM];
        make_params(pc);
        make_params(pe);
        for (int i = 0; i < NPARAM; i++) {   // static gradients for the captured side (all)
            gc[i] = tdm_tensor_zeros(1, &SPECS[i].n, SPECS[i].dt, dev);
            CHECK(gc[i] && (!SPECS[i].grad || tdm_tensor_set_grad(pc[i], gc[i]) == TDM_OK));
        }
        tdm_optimizer *oc = two_groups(pc, &p), *oe = two_groups(pe, &p);
        if (!oc || !oe) return;
        tdm_graph *g = NULL;
        CHECK(tdm_graph_capture_begin(dev) == TDM_OK);
        CHECK_MSG(tdm_optimizer_step(oc) == TDM_OK, "%s", tdm_last_error());
        CHECK_MSG(tdm_graph_capture_end(dev, &g) == TDM_OK, "%s", tdm_last_error());
        for (int k = 0; k < 7 && g; k++) {
            const bool eager_both = k == 4;
            for (int i = 0; i < NPARAM; i++) {
                if (!SPECS[i].grad) continue;
                grad_k = k;
                tdm_tensor *h = make(SPECS[i].n, SPECS[i].dt, grad_fn, i);
                CHECK(h && tdm_tensor_copy_(gc[i], h) == TDM_OK);
                tdm_tensor_free(h);
            }
            spec_grads(pe, k);
            CHECK_MSG(tdm_optimizer_step(oe) == TDM_OK, "%s", tdm_last_error());
            CHECK_MSG((eager_both ? tdm_optimizer_step(oc) : tdm_graph_replay(g)) == TDM_OK, "%s",
                      tdm_last_error());
            for (int i = 0; i < NPARAM; i++)
                CHECK_MSG(tensors_identical(pc[i], pe[i]), "graph (%s): step %d (%s): parameter "
                          "%d differs from the eager step's", fused ? "fused" : "unfused", k,
                          eager_both ? "eager" : "replay", i);
        }
        tdm_graph_free(g);
        tdm_optimizer_free(oc);
        tdm_optimizer_free(oe);
        for (int i = 0; i < NPARAM; i++) {
            tdm_tensor_free(pc[i]);
            tdm_tensor_free(pe[i]);
            tdm_tensor_free(gc[i]);
        }
    }
}

int main(int argc, char **argv) {
    const bool graph = argc == 4 && !strcmp(argv[3], "graph");
    if ((argc != 3 && !graph) || (strcmp(argv[2], "cpu") && strcmp(argv[2], "cuda:0"))) {
        fprintf(stderr, "usage: test_optim_fused TMPDIR cpu|cuda:0 [graph]\n");
        return 2;
    }
    dir = argv[1];
    dev = strcmp(argv[2], "cpu") ? (tdm_device){TDM_DEVICE_CUDA, 0} : TDM_CPU;
    if (dev.type == TDM_DEVICE_CUDA && !tdm_device_available(dev)) {
        printf("SKIP optim_fused.cuda0: %s\n", tdm_last_error());
        return 77;
    }
    if (graph) {   // its own test: captures need the caching allocator
        if (dev.type == TDM_DEVICE_CUDA) test_graph();
        CHECK_DONE("optim_fused.graph_cuda0");
    }
    test_fused();
    test_master();
    test_master_io();
    CHECK_DONE(dev.type == TDM_DEVICE_CPU ? "optim_fused.cpu" : "optim_fused.cuda0");
}
