/* cmd_replay.c — `bench replay FILE... [--device D] [--write-actual DIR] [--verbose|--quiet]`:
 * runs each case file forward (and backward when it has grad_output.0) and compares every output
 * and gradient with the expected values within the op's rounding-error bound. Prints each failure
 * (every case with --verbose), then the worst error/bound ratio per op and dtype (not with
 * --quiet) and a last line with the counts, the wall time and the worst case. Exit 0 all pass,
 * 1 any mismatch, 2 bad input (a file that cannot be read or run, a bad argument). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "case.h"
#include "core/files_impl.h"   // tdm_file_check_target

static void replay_usage(FILE *f) {
    fprintf(f,
            "usage: bench replay FILE... [--device cpu|cuda:N] [--write-actual DIR]\n"
            "                    [--verbose | --quiet]\n"
            "  Runs each tandem case file (docs/CASE_FORMAT.md) and compares with its expected\n"
            "  values within the bounds of docs/CONFORMANCE.md. Prints a line per failing case\n"
            "  (FAIL, or ERROR for a file that cannot be read or run): the file, op, dtype, the\n"
            "  worst element (tensor[index] actual expected), its bound and error/bound ratio;\n"
            "  then the worst ratio per op and dtype, and a last line: passed, failed, bad input,\n"
            "  the wall time and the worst case. --verbose prints the PASS line of every case\n"
            "  too; --quiet leaves out the table (failures and the last line only).\n"
            "  --write-actual writes the actual results, under the same tensor names, to\n"
            "  DIR/<file name> (refused when that is a case given, or when two cases share a\n"
            "  file name). Exit: 0 all pass, 1 a mismatch, 2 bad input.\n");
}

static const char *file_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int write_actual(const char *dir, const char *path, const tdm_case_result *r) {
    char out[4096], names[2 * TDM_CASE_MAX][32];
    const char *np[2 * TDM_CASE_MAX];
    const tdm_tensor *tp[2 * TDM_CASE_MAX];
    int n = 0;
    for (int g = 0; g < 2; g++) {
        for (int k = 0; k < TDM_CASE_MAX; k++) {
            const tdm_tensor *t = g ? r->grad_input[k] : r->output[k];
            if (!t) continue;
            snprintf(names[n], sizeof names[n], "%s.%d", g ? "grad_input" : "output", k);
            np[n] = names[n];
            tp[n++] = t;
        }
    }
    snprintf(out, sizeof out, "%s/%s", dir, file_name(path));
    const char *meta[] = {"format", "tandem-actual/1", "source", path};
    if (tdm_safetensors_save(out, n, np, tp, 2, meta) != TDM_OK) {
        fprintf(stderr, "bench replay: %s\n", tdm_last_error());
        return 2;
    }
    return 0;
}

// --write-actual writes DIR/<the case's file name>: refused before anything runs (exit 2) when
// that file would be one of the cases given (DIR is a case's own folder) or when two different
// cases share a file name (the second's actuals would replace the first's).
static int check_actual_paths(const char *dir, int n, char *const *paths) {
    struct stat *in = calloc((size_t)n + 1, sizeof *in);
    bool *have = calloc((size_t)n + 1, sizeof *have);
    int rc = in && have ? 0 : bench_bad("replay", "out of memory");
    for (int i = 0; !rc && i < n; i++) have[i] = stat(paths[i], &in[i]) == 0;
    for (int i = 0; !rc && i < n; i++) {
        char out[4096];
        struct stat ob;
        snprintf(out, sizeof out, "%s/%s", dir, file_name(paths[i]));
        bool exists = stat(out, &ob) == 0;
        if (tdm_file_check_target(out) != 0) {   // a link, a FIFO, a device: never written through
            rc = bench_bad("replay", "--write-actual %s: %s: %s", dir, out,
                           tdm_file_strerror(errno));
            break;
        }
        for (int j = 0; !rc && j < n; j++) {
            bool same_in = have[i] && have[j] && in[i].st_dev == in[j].st_dev &&
                           in[i].st_ino == in[j].st_ino;
            if (exists && have[j] && ob.st_dev == in[j].st_dev && ob.st_ino == in[j].st_ino)
                rc = bench_bad("replay", "--write-actual %s: the actual results of %s would "
                               "replace the case %s", dir, paths[i], paths[j]);
            else if (j < i && !same_in && !strcmp(file_name(paths[i]), file_name(paths[j])))
                rc = bench_bad("replay", "--write-actual %s: %s and %s would both write %s",
                               dir, paths[j], paths[i], out);
        }
    }
    free(in);
    free(have);
    return rc;
}

// ---- the summary: the worst error/bound ratio per op and dtype -------------------------------

typedef struct {
    char op[64];
    tdm_dtype dtype;
    int cases, failed;
    double worst;   // the largest error/bound ratio of its cases; NaN counts as worst
} replay_pair;

typedef struct {
    replay_pair *v;
    int n, cap;
    double worst;          // over every case compared
    char worst_path[512];  // its file
} replay_table;

static bool worse(double r, double than) { return !(r <= than); }   // NaN is worse than anything

// Adds one compared case; false when out of memory (the table then says less, nothing else).
static bool table_add(replay_table *t, const char *op, tdm_dtype dt, const char *path,
                      double ratio, bool pass) {
    if (t->worst_path[0] == 0 || worse(ratio, t->worst)) {
        t->worst = ratio;
        snprintf(t->worst_path, sizeof t->worst_path, "%s", path);
    }
    replay_pair *e = NULL;
    for (int i = 0; i < t->n && !e; i++)
        if (t->v[i].dtype == dt && !strcmp(t->v[i].op, op)) e = &t->v[i];
    if (!e) {
        if (t->n == t->cap) {
            int cap = t->cap ? 2 * t->cap : 64;
            replay_pair *v = realloc(t->v, (size_t)cap * sizeof *v);
            if (!v) return false;
            t->v = v;
            t->cap = cap;
        }
        e = &t->v[t->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->op, sizeof e->op, "%s", op);
        e->dtype = dt;
        e->worst = ratio;
    }
    e->cases++;
    e->failed += !pass;
    if (worse(ratio, e->worst)) e->worst = ratio;
    return true;
}

static int pair_order(const void *a, const void *b) {
    const replay_pair *x = a, *y = b;
    int c = strcmp(x->op, y->op);
    return c ? c : (int)x->dtype - (int)y->dtype;
}

// One row per op, one column per dtype that has cases: the worst ratio (a case passes at 1 or
// less), "!" after it where a case of that op and dtype failed (its line is above), "-" where
// there is no case.
static void table_print(replay_table *t) {
    if (!t->n) return;
    qsort(t->v, (size_t)t->n, sizeof *t->v, pair_order);
    bool has[TDM_DTYPE_COUNT] = {false};
    int w = 2;
    for (int i = 0; i < t->n; i++) {
        if ((int)t->v[i].dtype >= 0 && t->v[i].dtype < TDM_DTYPE_COUNT) has[t->v[i].dtype] = true;
        int l = (int)strlen(t->v[i].op);
        if (l > w) w = l;
    }
    printf("worst error/bound per op and dtype (a case passes at 1 or less; ! a case failed):\n");
    printf("  %-*s", w, "op");
    for (int d = 0; d < TDM_DTYPE_COUNT; d++)
        if (has[d]) printf(" %9s", tdm_dtype_name((tdm_dtype)d));
    printf("\n");
    for (int i = 0; i < t->n;) {
        const char *op = t->v[i].op;
        printf("  %-*s", w, op);
        for (int d = 0; d < TDM_DTYPE_COUNT; d++) {
            if (!has[d]) continue;
            char cell[32] = "-";
            for (int j = i; j < t->n && !strcmp(t->v[j].op, op); j++)
                if (t->v[j].dtype == (tdm_dtype)d)
                    snprintf(cell, sizeof cell, t->v[j].worst < 1000 ? "%.3f%s" : "%.3g%s",
                             t->v[j].worst, t->v[j].failed ? "!" : "");
            printf(" %9s", cell);
        }
        printf("\n");
        while (i < t->n && !strcmp(t->v[i].op, op)) i++;
    }
}

int bench_replay(int argc, char **argv) {
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"write-actual", required_argument, 0, 'w'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *devname = "cpu", *actual_dir = NULL;
    bool quiet = false, verbose = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:w:qvh", opts, NULL)) != -1) {
        switch (c) {
        case 'd': devname = optarg; break;
        case 'w': actual_dir = optarg; break;
        case 'q': quiet = true; break;
        case 'v': verbose = true; break;
        case 'h': replay_usage(stdout); return 0;
        default: replay_usage(stderr); return 2;
        }
    }
    if (quiet && verbose) {
        fprintf(stderr, "bench replay: --quiet and --verbose: choose one\n");
        replay_usage(stderr);
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "bench replay: no case files given\n");
        replay_usage(stderr);
        return 2;
    }
    tdm_device dev;
    if (tdm_device_parse(devname, &dev) != TDM_OK || !tdm_device_available(dev)) {
        fprintf(stderr, "bench replay: %s\n", tdm_last_error());
        return 2;
    }
    struct stat sb;
    if (actual_dir && (stat(actual_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        fprintf(stderr, "bench replay: --write-actual %s: not a directory\n", actual_dir);
        return 2;
    }
    if (actual_dir && check_actual_paths(actual_dir, argc - optind, argv + optind) != 0) return 2;
    int n_pass = 0, n_fail = 0, n_bad = 0;
    replay_table table = {0};
    double t0 = bench_now_s();
    for (int i = optind; i < argc; i++) {
        const char *path = argv[i];
        tdm_error_clear();
        tdm_case *cs = tdm_case_load(path);
        if (!cs) {
            printf("ERROR %s: %s\n", path, tdm_last_error());
            n_bad++;
            continue;
        }
        tdm_case_result r;
        tdm_case_report rep;
        if (tdm_case_run(cs, dev, &r) != TDM_OK) {
            printf("ERROR %s (%s): %s\n", path, cs->op, tdm_last_error());
            n_bad++;
            tdm_case_free(cs);
            continue;
        }
        if (tdm_case_compare(cs, &r, dev, &rep) != TDM_OK) {
            printf("ERROR %s (%s): %s\n", path, cs->op, tdm_last_error());
            n_bad++;
        } else {
            const tdm_case_check *w = tdm_case_report_worst(&rep);
            if (!rep.pass || verbose) {
                if (w->missing)
                    printf("FAIL %s %s %s: %s: %s\n", path, cs->op, tdm_dtype_name(cs->dtype),
                           w->name, w->why);
                else
                    printf("%s %s %s %s worst %s[%lld] actual %.9g expected %.9g bound %.3g "
                           "ratio %.3g%s\n",
                           rep.pass ? "PASS" : "FAIL", path, cs->op, tdm_dtype_name(cs->dtype),
                           w->name, (long long)w->worst_index, w->actual, w->expected, w->bound,
                           w->ratio, rep.pass ? "" : "  <- over its bound");
                for (int k = 0; !rep.pass && k < rep.n; k++) {
                    const tdm_case_check *ck = &rep.check[k];
                    if (ck->missing && ck != w) printf("     %s: %s\n", ck->name, ck->why);
                    else if (ck->n_fail && !ck->missing)
                        printf("     %s: %lld element(s) over the bound\n", ck->name,
                               (long long)ck->n_fail);
                }
            }
            if (rep.pass) n_pass++;
            else n_fail++;
            // a missing or mis-shaped tensor has no ratio: it counts as the worst
            (void)table_add(&table, cs->op, cs->dtype, path, w->missing ? INFINITY : rep.worst_ratio,
                      rep.pass);
            if (actual_dir && write_actual(actual_dir, path, &r) != 0) n_bad++;
        }
        tdm_case_result_free(&r);
        tdm_case_free(cs);
    }
    if (!quiet) table_print(&table);
    printf("replay on %s: %d passed, %d failed, %d bad input in %.2f s", devname, n_pass, n_fail,
           n_bad, bench_now_s() - t0);
    if (table.worst_path[0])
        printf("; worst ratio %.3g (%s)", table.worst, table.worst_path);
    printf("\n");
    free(table.v);
    return n_bad ? 2 : n_fail ? 1 : 0;
}
