/* cmd_conform.c — `bench conform`: randomized conformance. For each op with a generator
 * (suites/conformance/random.c) and each dtype, builds random cases in memory, takes the expected
 * values from the CPU reference in f64, runs the case in the dtype on --device and compares within
 * the bounds of docs/CONFORMANCE.md — with core's debug mode on (new tensors poisoned with NaN,
 * guard regions checked on free). A failing case is written as a case file that `bench replay`
 * reproduces. Exit 0 all pass, 1 a failure or guard violation, 2 bad arguments. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "case.h"
#include "exact.h"
#include "random.h"

static void conform_usage(FILE *f) {
    fprintf(f,
            "usage: bench conform [--device cpu|cuda:N] [--seed S] [--cases N] [--ops a,b,...]\n"
            "                     [--dtypes f32,f16,bf16] [--failures DIR] [--quiet]\n"
            "  Random cases per op and dtype (shapes with sizes 1, 7, 13, 33, 129, 257; random\n"
            "  attrs), expected values from the CPU reference in f64, compared within the bounds\n"
            "  of docs/CONFORMANCE.md, with NaN-poisoned allocations and guard regions. A failing\n"
            "  case is written to DIR (default: a new temporary folder, $TMPDIR/tandem-conform-XXXXXX,\n"
            "  named in the output) for `bench replay`.\n"
            "  Ops: %s\n"
            "  and the slots checked bitwise against the reference: %s\n"
            "  --plant-error (for testing this command): every case's expected output.0[0] is\n"
            "  moved by 1 + 4|e|, far over any bound, so every case must fail and be written.\n"
            "  Exit: 0 all pass, 1 a failure or guard violation, 2 bad arguments.\n",
            tdm_random_ops(), tdm_exact_ops());
}

static bool in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',' || p[-1] == ' ') && (p[n] == ',' || p[n] == ' ' || !p[n]))
            return true;
    return false;
}

static int parse_dtypes(const char *s, tdm_dtype *out, int *n) {
    static const struct { const char *name; tdm_dtype dt; } known[] = {
        {"f32", TDM_DTYPE_F32}, {"f16", TDM_DTYPE_F16}, {"bf16", TDM_DTYPE_BF16}, {"f64", TDM_DTYPE_F64}};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < 4 && strcmp(known[k].name, t)) k++;
        if (k == 4 || *n >= 4) {
            fprintf(stderr, "bench conform: unknown dtype '%s' (f32, f16, bf16, f64)\n", t);
            return 2;
        }
        out[(*n)++] = known[k].dt;
    }
    return *n ? 0 : 2;
}

static bool parse_u64(const char *s, uint64_t *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return false;
    *v = x;
    return true;
}

// Where failing cases go: --failures DIR, else a fresh temporary folder made at the first failure
// ($TMPDIR or /tmp, tandem-conform-XXXXXX), never the working directory (a checkout). NULL with
// errno when it cannot be made.
static const char *failure_dir(const char *given) {
    static char made[1024];
    if (given) return given;
    if (!made[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(made, sizeof made, "%s/tandem-conform-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(made)) {
            made[0] = 0;
            return NULL;
        }
    }
    return made;
}

// Prints the case's line; on failure writes the case file and names it.
static bool report_case(const tdm_case *c, const tdm_case_report *rep, const char *fail_dir,
                        uint64_t seed, int64_t index, bool quiet) {
    const tdm_case_check *w = tdm_case_report_worst(rep);
    char file[1024] = "";
    if (!rep->pass && !(fail_dir = failure_dir(fail_dir))) {
        fprintf(stderr, "bench conform: no folder for the failing case: %s\n", strerror(errno));
        snprintf(file, sizeof file, "(not written)");
    } else if (!rep->pass) {
        mkdir(fail_dir, 0777);
        snprintf(file, sizeof file, "%s/%s.safetensors", fail_dir, c->path);
        if (tdm_random_case_save(c, file, seed, index) != TDM_OK) {
            fprintf(stderr, "bench conform: writing %s: %s\n", file, tdm_last_error());
            snprintf(file, sizeof file, "(not written)");
        }
    }
    if (rep->pass && quiet) return true;
    char *attrs = cJSON_PrintUnformatted(c->attrs);
    if (w->missing)
        printf("FAIL %s %s %s: %s: %s", c->path, c->op, tdm_dtype_name(c->dtype), w->name, w->why);
    else
        printf("%s %s %s %s worst %s[%lld] actual %.9g expected %.9g bound %.3g ratio %.3g",
               rep->pass ? "PASS" : "FAIL", c->path, c->op, tdm_dtype_name(c->dtype), w->name,
               (long long)w->worst_index, w->actual, w->expected, w->bound, w->ratio);
    printf(" attrs %s\n", attrs ? attrs : "{}");
    free(attrs);
    for (int k = 0; !rep->pass && k < rep->n; k++) {
        const tdm_case_check *ck = &rep->check[k];
        if (ck->missing && ck != w) printf("     %s: %s\n", ck->name, ck->why);
        else if (ck->n_fail && !ck->missing)
            printf("     %s: %lld element(s) over the bound\n", ck->name, (long long)ck->n_fail);
    }
    if (!rep->pass) printf("     case file: %s  (bench replay %s --device ...)\n", file, file);
    return rep->pass;
}

int bench_conform(int argc, char **argv) {
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"seed", required_argument, 0, 's'},
                                         {"cases", required_argument, 0, 'n'},
                                         {"ops", required_argument, 0, 'o'},
                                         {"dtypes", required_argument, 0, 't'},
                                         {"failures", required_argument, 0, 'f'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"plant-error", no_argument, 0, 'p'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *devname = "cpu", *ops = NULL, *fail_dir = NULL;   // a temporary folder
    const char *dtypes_s = "f32,f16,bf16";
    uint64_t seed = 0, n_cases = 10;
    bool quiet = false, plant = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:s:n:o:t:f:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'd': devname = optarg; break;
        case 's':
            if (!parse_u64(optarg, &seed)) {
                fprintf(stderr, "bench conform: --seed %s: expected a non-negative integer\n", optarg);
                return 2;
            }
            break;
        case 'n':
            if (!parse_u64(optarg, &n_cases) || n_cases > 1000000) {
                fprintf(stderr, "bench conform: --cases %s: expected an integer 1..1000000\n", optarg);
                return 2;
            }
            break;
        case 'o': ops = optarg; break;
        case 't': dtypes_s = optarg; break;
        case 'f': fail_dir = optarg; break;
        case 'q': quiet = true; break;
        case 'p': plant = true; break;
        case 'h': conform_usage(stdout); return 0;
        default: conform_usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bench conform: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    tdm_dtype dtypes[4];
    int n_dt;
    if (parse_dtypes(dtypes_s, dtypes, &n_dt)) return 2;
    if (ops) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", ops);
        int named = 0;
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            named++;
            if (!tdm_random_has(t) && !tdm_exact_has(t)) {
                fprintf(stderr, "bench conform: no generator for op '%s' (ops: %s %s)\n", t,
                        tdm_random_ops(), tdm_exact_ops());
                return 2;
            }
        }
        if (!named) {   // "--ops ," or "--ops ''": nothing would be tested, and it would pass
            fprintf(stderr, "bench conform: --ops '%s': names no op (ops: %s %s)\n", ops,
                    tdm_random_ops(), tdm_exact_ops());
            return 2;
        }
    }
    tdm_device dev;
    if (tdm_device_parse(devname, &dev) != TDM_OK || !tdm_device_available(dev)) {
        fprintf(stderr, "bench conform: %s\n", tdm_last_error());
        return 2;
    }
    struct stat sb;
    if (fail_dir && !fail_dir[0]) {   // "" would put the case files in "/"
        fprintf(stderr, "bench conform: --failures '': give a directory\n");
        return 2;
    }
    if (fail_dir && stat(fail_dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "bench conform: --failures %s: not a directory\n", fail_dir);
        return 2;
    }
    // --cases 0 tests nothing: refused, after the device (scripts probe a GPU with it and read
    // only whether the device was refused)
    if (n_cases == 0) {
        fprintf(stderr, "bench conform: --cases 0: tests nothing (device %s is available); give "
                        "1 or more\n", devname);
        return 2;
    }
    bool old_poison = tdm_debug_poison(), old_guards = tdm_debug_guards();
    tdm_debug_set_poison(true);
    tdm_debug_set_guards(true);
    int64_t guards_before = tdm_debug_guard_violations();
    int n_pass = 0, n_fail = 0, n_err = 0;
    char all_ops[512];
    snprintf(all_ops, sizeof all_ops, "%s", tdm_random_ops());
    for (char *save = NULL, *op = strtok_r(all_ops, " ", &save); op; op = strtok_r(NULL, " ", &save)) {
        if (ops && !in_list(ops, op)) continue;
        for (int d = 0; d < n_dt; d++) {
            for (uint64_t i = 0; i < n_cases; i++) {
                tdm_error_clear();
                tdm_case *cs = tdm_random_case(op, dtypes[d], seed, (int64_t)i);
                if (!cs) {
                    printf("ERROR %s %s case %llu: %s\n", op, tdm_dtype_name(dtypes[d]),
                           (unsigned long long)i, tdm_last_error());
                    n_err++;
                    continue;
                }
                if (plant && tdm_tensor_numel(cs->output[0]) > 0) {
                    double *e = tdm_tensor_data(cs->output[0]);   // F64 on the cpu
                    e[0] += 1.0 + 4.0 * (e[0] < 0 ? -e[0] : e[0]);
                }
                tdm_case_result r;
                tdm_case_report rep;
                if (tdm_case_run(cs, dev, &r) != TDM_OK ||
                    tdm_case_compare(cs, &r, dev, &rep) != TDM_OK) {
                    // The op failed on the device: keep the case so that replay shows it too.
                    char *attrs = cJSON_PrintUnformatted(cs->attrs), file[1024];
                    printf("ERROR %s %s attrs %s: %s\n", cs->path, op, attrs ? attrs : "{}",
                           tdm_last_error());
                    free(attrs);
                    const char *dir = failure_dir(fail_dir);
                    if (dir) mkdir(dir, 0777);
                    if (dir && snprintf(file, sizeof file, "%s/%s.safetensors", dir, cs->path) >=
                                   (int)sizeof file) {
                        errno = ENAMETOOLONG;
                        dir = NULL;
                    }
                    if (dir && tdm_random_case_save(cs, file, seed, (int64_t)i) == TDM_OK)
                        printf("     case file: %s\n", file);
                    else
                        fprintf(stderr, "bench conform: the case file could not be written: %s\n",
                                dir ? tdm_last_error() : strerror(errno));
                    n_err++;
                } else if (report_case(cs, &rep, fail_dir, seed, (int64_t)i, quiet)) {
                    n_pass++;
                } else {
                    n_fail++;
                }
                tdm_case_result_free(&r);
                tdm_case_free(cs);
            }
        }
    }
    // The slots that are not case ops (cast, rand, randn, amp_unscale): bitwise, once per run.
    char exact_ops[128];
    snprintf(exact_ops, sizeof exact_ops, "%s", tdm_exact_ops());
    for (char *save = NULL, *op = strtok_r(exact_ops, " ", &save); op && n_cases > 0;
         op = strtok_r(NULL, " ", &save))
        if (!ops || in_list(ops, op)) tdm_exact_check(op, dev, seed, quiet, &n_pass, &n_fail, &n_err);
    int64_t guard_bad = tdm_debug_guard_violations() - guards_before;
    tdm_debug_set_poison(old_poison);
    tdm_debug_set_guards(old_guards);
    if (guard_bad) printf("GUARD %lld violation(s); last: %s\n", (long long)guard_bad,
                          tdm_debug_last_violation());
    printf("conform on %s (seed %llu): %d passed, %d failed, %d errors, %lld guard violations\n",
           devname, (unsigned long long)seed, n_pass, n_fail, n_err, (long long)guard_bad);
    return n_fail || n_err || guard_bad ? 1 : 0;
}
