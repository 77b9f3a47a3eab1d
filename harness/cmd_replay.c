/* cmd_replay.c — `bench replay FILE... [--device D] [--write-actual DIR]`: runs each case file
 * forward (and backward when it has grad_output.0) and compares every output and gradient with
 * the expected values within the op's rounding-error bound. Exit 0 all pass, 1 any mismatch,
 * 2 bad input (a file that cannot be read or run, a bad argument). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "case.h"
#include "core/files_impl.h"   // tdm_file_check_target

static void replay_usage(FILE *f) {
    fprintf(f,
            "usage: bench replay FILE... [--device cpu|cuda:N] [--write-actual DIR] [--quiet]\n"
            "  Runs each tandem case file (docs/CASE_FORMAT.md) and compares with its expected\n"
            "  values within the bounds of docs/CONFORMANCE.md. Prints one line per case:\n"
            "  PASS|FAIL, the file, op, dtype, the worst element (tensor[index] actual expected),\n"
            "  its bound and error/bound ratio. --write-actual writes the actual results, under\n"
            "  the same tensor names, to DIR/<file name> (refused when that is a case given, or\n"
            "  when two cases share a file name). --quiet prints failures and the summary.\n"
            "  Exit: 0 all pass, 1 a mismatch, 2 bad input.\n");
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

int bench_replay(int argc, char **argv) {
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"write-actual", required_argument, 0, 'w'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *devname = "cpu", *actual_dir = NULL;
    bool quiet = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:w:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'd': devname = optarg; break;
        case 'w': actual_dir = optarg; break;
        case 'q': quiet = true; break;
        case 'h': replay_usage(stdout); return 0;
        default: replay_usage(stderr); return 2;
        }
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
            if (!rep.pass || !quiet) {
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
            if (actual_dir && write_actual(actual_dir, path, &r) != 0) n_bad++;
        }
        tdm_case_result_free(&r);
        tdm_case_free(cs);
    }
    printf("replay on %s: %d passed, %d failed, %d bad input\n", devname, n_pass, n_fail, n_bad);
    return n_bad ? 2 : n_fail ? 1 : 0;
}
