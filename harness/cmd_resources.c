/* cmd_resources.c — `bench resources DIR`: what the real compiler gives each kernel, from ptxas's
 * reports that the CUDA build keeps beside its objects (kernels/ptxas_report.sh: <object>.ptxas
 * in build/CMakeFiles/tandem.dir/kernels): per kernel instantiation and GPU architecture its
 * registers, stack frame, spill stores and loads and static shared memory, and the theoretical
 * occupancy at 128, 256 and 512 threads a block as the CUDA occupancy calculator computes it for
 * an A100 (sm_80) and an H100 (sm_90). --budget FILE (kernels/ptxas_budgets.json) holds kernels
 * to a most spill bytes; exit 1 when one is past it or matches no kernel (docs/EMULATION.md
 * "Resources"). */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "harness/fileio.h"
#include "harness/json_strict.h"

// libstdc++'s demangler (bench links it: the Google Benchmark shim is C++).
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

typedef struct {
    char *mangled, *name;  // name: demangled, "void " left out
    int arch;              // 80, 90
    long regs, stack, spill_st, spill_ld, smem;
} kernel_res;

typedef struct {
    kernel_res *v;
    int n, cap;
} res_list;

// The occupancy calculator's per-SM limits of an architecture.
typedef struct {
    int arch;
    const char *gpu;
    long regs, smem, smem_reserved, threads, blocks;
} sm_limits;

static const sm_limits limits[] = {{80, "A100", 65536, 167936, 1024, 2048, 32},
                                   {90, "H100", 65536, 233472, 1024, 2048, 32}};

// Warps a block of `threads` keeps resident per SM (of 64): the least of what registers (allocated
// per warp in units of 256), shared memory, threads and blocks allow; 0 when one block does not
// fit.
static int occupancy_warps(const kernel_res *k, const sm_limits *l, int threads) {
    const long warps = (threads + 31) / 32;
    const long per_warp = (k->regs * 32 + 255) / 256 * 256;
    long blocks = l->blocks;
    if (per_warp > 0) blocks = fmin(blocks, (double)(l->regs / per_warp / warps));
    if (k->smem > 0) blocks = fmin(blocks, (double)(l->smem / (k->smem + l->smem_reserved)));
    blocks = fmin(blocks, (double)(l->threads / (warps * 32)));
    return (int)(blocks * warps);
}

static kernel_res *res_add(res_list *l, const char *mangled, int arch) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        kernel_res *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        l->v = v, l->cap = cap;
    }
    kernel_res *k = &l->v[l->n];
    memset(k, 0, sizeof *k);
    k->mangled = strdup(mangled);
    int st = 0;
    char *d = __cxa_demangle(mangled, NULL, NULL, &st);
    const char *nm = st == 0 && d ? d : mangled;
    if (!strncmp(nm, "void ", 5)) nm += 5;
    k->name = strdup(nm);
    free(d);
    k->arch = arch;
    if (!k->mangled || !k->name) return NULL;
    l->n++;
    return k;
}

// One .ptxas file: "Compiling entry function 'M' for 'sm_XX'", then its "Function properties for
// M" and the stack/spill line, then "Used R registers, ... S bytes smem".
static int parse_file(const char *path, res_list *l) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096], props[2048] = "";
    kernel_res *cur = NULL;
    bool oom = false;
    while (!oom && fgets(line, sizeof line, f)) {
        char name[2048];
        int arch;
        long a, b, c;
        const char *p;
        if (sscanf(line, "ptxas info : Compiling entry function '%2047[^']' for 'sm_%d'", name,
                   &arch) == 2) {
            cur = res_add(l, name, arch);
            oom = cur == NULL;
            props[0] = '\0';
        } else if (sscanf(line, "ptxas info : Function properties for %2047s", name) == 1) {
            snprintf(props, sizeof props, "%s", name);
        } else if (sscanf(line,
                          " %ld bytes stack frame, %ld bytes spill stores, %ld bytes spill loads",
                          &a, &b, &c) == 3) {
            if (cur && !strcmp(props, cur->mangled))
                cur->stack = a, cur->spill_st = b, cur->spill_ld = c;
        } else if (cur && sscanf(line, "ptxas info : Used %ld registers", &a) == 1) {
            cur->regs = a;
            if ((p = strstr(line, " bytes smem")) != NULL) {
                while (p > line && p[-1] >= '0' && p[-1] <= '9') p--;
                cur->smem = strtol(p, NULL, 10);
            }
            cur = NULL;  // its report is over
        }
    }
    const bool bad = ferror(f) || oom;
    fclose(f);
    return bad ? -1 : 0;
}

static int cmp_res(const void *a, const void *b) {
    const kernel_res *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->arch - y->arch;
}

// --budget: {"format": "tandem-ptxas-budgets/1", "kernels": [{"match": PREFIX, "max_spill_bytes":
// N}]}: every instantiation whose name starts with PREFIX, on every architecture, spills at most
// N bytes (stores + loads); a PREFIX matching nothing fails too. The whole file is checked
// (bench_json_load_valid) before any report is read.
static bool valid_budget(const cJSON *b, const char *name, char *err, size_t len) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(b, "format");
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(b, "kernels");
    if (!cJSON_IsObject(b) || !cJSON_IsString(fmt) ||
        strcmp(fmt->valuestring, "tandem-ptxas-budgets/1"))
        return bench_err(err, len, "%s: format is not \"tandem-ptxas-budgets/1\"", name);
    if (!cJSON_IsArray(ks)) return bench_err(err, len, "%s: no \"kernels\" array", name);
    int i = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, ks) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(k, "match");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(k, "max_spill_bytes");
        if (!cJSON_IsString(m) || !m->valuestring[0] || !cJSON_IsNumber(mx) ||
            !isfinite(mx->valuedouble) || mx->valuedouble < 0)
            return bench_err(err, len,
                             "%s: kernels[%d]: needs \"match\" (a name prefix) and "
                             "\"max_spill_bytes\" (a number >= 0)",
                             name, i);
        i++;
    }
    return true;
}

// Each entry of the budget b (validated) against the report: a line each; 0, or 1 when one is
// past its limit or matches nothing.
static int check_budget(const cJSON *b, const char *path, const res_list *l) {
    int failed = 0, i = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(b, "kernels")) {
        const char *m = cJSON_GetObjectItemCaseSensitive(k, "match")->valuestring;
        const double mx = cJSON_GetObjectItemCaseSensitive(k, "max_spill_bytes")->valuedouble;
        int matched = 0, past = 0;
        for (int j = 0; j < l->n; j++) {
            const kernel_res *r = &l->v[j];
            if (strncmp(r->name, m, strlen(m))) continue;
            matched++;
            if ((double)(r->spill_st + r->spill_ld) > mx) {
                printf(
                    "BUDGET FAIL %s (sm_%d): %ld bytes spilled (%ld stored, %ld loaded) > %.0f\n",
                    r->name, r->arch, r->spill_st + r->spill_ld, r->spill_st, r->spill_ld, mx);
                past++;
            }
        }
        if (!matched) {
            printf("BUDGET FAIL %s: no kernel of the report matches\n", m);
            past++;
        } else if (!past) {
            printf("BUDGET ok   %s (%d instantiation%s x architecture)\n", m, matched,
                   matched == 1 ? "" : "s");
        }
        failed += past > 0;
        i++;
    }
    printf("budget %s: %d entr%s, %d past %s limit\n", path, i, i == 1 ? "y" : "ies", failed,
           failed == 1 ? "its" : "their");
    return failed ? 1 : 0;
}

int bench_resources(int argc, char **argv) {
    static const struct option opts[] = {
        {"budget", required_argument, 0, 'b'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *budget = NULL;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'b') {
            budget = optarg;
        } else if (c == 'h') {
            printf(
                "usage: bench resources [--budget FILE] DIR\n"
                "ptxas's report of every kernel the CUDA build compiled (DIR: the objects'\n"
                "folder, build/CMakeFiles/tandem.dir/kernels, whose .ptxas files\n"
                "kernels/ptxas_report.sh keeps): registers, stack, spills, shared memory per\n"
                "architecture, occupancy at 128/256/512 threads a block on an A100 and an\n"
                "H100; --budget FILE: most spill bytes per kernel, exit 1 past it\n");
            return 0;
        } else {
            return bench_bad("resources", "usage: bench resources [--budget FILE] DIR");
        }
    }
    if (optind != argc - 1) return bench_bad("resources", "expected one folder of .ptxas reports");
    const char *dir = argv[optind];
    char berr[700];
    cJSON *bud =
        budget ? bench_json_load_valid(budget, 1u << 20, valid_budget, berr, sizeof berr) : NULL;
    if (budget && !bud) return bench_bad("resources", "--budget %s", berr);
    DIR *d = opendir(dir);
    if (!d) {
        cJSON_Delete(bud);
        return bench_bad("resources", "%s: %s", dir, strerror(errno));
    }
    res_list l = {0};
    int files = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".ptxas")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (parse_file(path, &l) != 0) {
            fprintf(stderr, "bench resources: %s: cannot read it\n", path);
            rc = 2;
            break;
        }
        files++;
    }
    closedir(d);
    if (rc == 0 && (files == 0 || l.n == 0))
        rc = bench_bad("resources",
                       "%s: no ptxas report (.ptxas) with a kernel: a CUDA build "
                       "(nvcc) writes them beside its objects",
                       dir);
    if (rc == 0) {
        qsort(l.v, (size_t)l.n, sizeof *l.v, cmp_res);
        printf(
            "ptxas's report of %d kernel instantiation%s x architecture (%d file%s in %s);\n"
            "occupancy: resident warps of 64 per SM at 128 / 256 / 512 threads a block\n\n",
            l.n, l.n == 1 ? "" : "s", files, files == 1 ? "" : "s", dir);
        printf("%-64s %5s %5s %6s %6s %6s  %-14s\n", "kernel", "arch", "regs", "stack", "spill",
               "smem", "occupancy");
        for (int i = 0; i < l.n; i++) {
            const kernel_res *k = &l.v[i];
            const sm_limits *lim = k->arch >= 90 ? &limits[1] : &limits[0];
            printf("%-64.64s %5d %5ld %6ld %6ld %6ld  %2d/%2d/%2d %s\n", k->name, k->arch, k->regs,
                   k->stack, k->spill_st + k->spill_ld, k->smem, occupancy_warps(k, lim, 128),
                   occupancy_warps(k, lim, 256), occupancy_warps(k, lim, 512), lim->gpu);
        }
        if (bud) rc = check_budget(bud, budget, &l);
    }
    for (int i = 0; i < l.n; i++) free(l.v[i].mangled), free(l.v[i].name);
    free(l.v);
    cJSON_Delete(bud);
    return rc;
}
