/* test_report.c — `bench plot` and `bench report` end to end, through the bench program:
 *   test_report plot    BENCH WORK DIR  every metric of every suite of DIR has a PNG and an SVG
 *   test_report report  BENCH WORK DIR  report.html's <img>s and links and report.md's images
 *                                       exist; every figure and benchmark is in the report
 *   test_report side    BENCH WORK DIR  two runs (copies of DIR, one 20% faster) side by side
 *   test_report bad     BENCH WORK      missing / empty / malformed results: exit 2, a message
 *   test_report hostile BENCH WORK      markup in the results is escaped; --embed; no gnuplot
 *   test_report emulated BENCH WORK DIR a run on the emulated CUDA device (DIR, a CPU run marked
 *                                       so by test_emulated mark): report.html and report.md open
 *                                       with the banner, every caption and the plots' titles say
 *                                       emulated
 *   test_report inject  BENCH WORK PLOTS hostile names (quotes, system(), backquotes, pipes,
 *                                       backslashes, bytes that are not UTF-8) in every suite's
 *                                       CSV (bench list's, and one per PLOTS/<suite>.gp), the
 *                                       context and the directories' names: bench plot and report
 *                                       draw every figure, showing the names, and run nothing
 *   test_report checks  BENCH WORK      bench check's verdict table in the report: status.json's
 *                                       names, GPUs, figures and notes escaped; 300 checks and 70
 *                                       GPUs, every check shown
 * WORK is a scratch directory of the test's own.
 * The expected file names are derived here from the CSVs by docs' rule (bench plot --help):
 * <suite>-<metric>.{png,svg}, "/" spelled "_per_", other characters outside [A-Za-z0-9._-] "_",
 * "-bars" added to the bar chart of a metric that also has lines; a row is on a line when its
 * benchmark has the metric at two numeric x values or more, else it is a bar. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "harness/fileio.h"
#include "harness/json_strict.h"

static const char *bench, *work;

/* snprintf (through a va_list: the tests' paths are short, truncation is not checked). */
static int fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *buf, size_t len, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, len, f, ap);
    va_end(ap);
    return n;
}

// ---------------------------------------------------------------------------------------------
// files and commands

static bool spit(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static char last_err[8192];  // the stderr of the last command

/* Runs a shell command (printf-style), stdout to the test's log, stderr kept in last_err. */
static int sh(const char *cmdfmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *cmdfmt, ...) {
    char cmd[8192], full[9000], errpath[4096];
    va_list ap;
    va_start(ap, cmdfmt);
    vsnprintf(cmd, sizeof cmd, cmdfmt, ap);
    va_end(ap);
    fmt(errpath, sizeof errpath, "%s/.stderr", work);
    fmt(full, sizeof full, "%s 2>'%s'", cmd, errpath);
    printf("$ %s\n", cmd);
    fflush(stdout);
    int st = system(full);
    char *err = bench_read_file(errpath, NULL);
    fmt(last_err, sizeof last_err, "%s", err ? err : "");
    free(err);
    if (*last_err) printf("%s", last_err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (long)sb.st_size : -1;
}

static void check_png(const char *path) {
    size_t n;
    unsigned char *p = (unsigned char *)bench_read_file(path, &n);
    CHECK_MSG(p != NULL, "%s missing", path);
    if (!p) return;
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    CHECK_MSG(n > 100 && !memcmp(p, sig, 8) && !memcmp(p + 12, "IHDR", 4), "%s: not a PNG", path);
    if (n > 24) {
        unsigned w = (unsigned)p[16] << 24 | p[17] << 16 | p[18] << 8 | p[19];
        unsigned h = (unsigned)p[20] << 24 | p[21] << 16 | p[22] << 8 | p[23];
        CHECK_MSG(w >= 200 && h >= 200, "%s: %ux%u pixels", path, w, h);
    }
    free(p);
}

/* The root element after the prolog (<?xml?>, <!DOCTYPE>, comments) is <svg, closed at the end. */
static void check_svg(const char *path) {
    size_t n;
    char *p = bench_read_file(path, &n);
    CHECK_MSG(p != NULL, "%s missing", path);
    if (!p) return;
    const char *s = p;
    for (;;) {
        while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t') s++;
        if (!strncmp(s, "<?", 2) && strstr(s, "?>"))
            s = strstr(s, "?>") + 2;
        else if (!strncmp(s, "<!--", 4) && strstr(s, "-->"))
            s = strstr(s, "-->") + 3;
        else if (!strncmp(s, "<!", 2) && strchr(s, '>'))
            s = strchr(s, '>') + 1;
        else
            break;
    }
    CHECK_MSG(!strncmp(s, "<svg", 4) && (s[4] == ' ' || s[4] == '\n' || s[4] == '>'),
              "%s: the root element is not <svg>", path);
    size_t l = n;
    while (l && (p[l - 1] == '\n' || p[l - 1] == ' ' || p[l - 1] == '\r')) l--;
    CHECK_MSG(l >= 6 && !strncmp(p + l - 6, "</svg>", 6), "%s: does not end with </svg>", path);
    CHECK_MSG(strstr(p, "<path") || strstr(p, "<rect") || strstr(p, "<polyline"),
              "%s: draws nothing", path);
    free(p);
}

// ---------------------------------------------------------------------------------------------
// what a results directory should give: figure names from its CSVs

typedef struct {
    char name[256];  // ops-GB_per_s
    char metric[64];
    bool bars;
} expect;

typedef struct {
    expect e[256];
    int n;
    char benchmarks[256][64];
    int n_benchmarks;
} expected;

static void slug(char *out, size_t len, const char *s) {
    size_t k = 0;
    for (; *s && k + 6 < len; s++) {
        if (*s == '/')
            k += (size_t)fmt(out + k, len - k, "_per_");
        else if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                 *s == '-' || *s == '.' || *s == '_')
            out[k++] = *s;
        else
            out[k++] = '_';
    }
    out[k] = '\0';
}

static int col(char *header, const char *name) {
    int i = 0;
    for (char *h = header; h; i++) {
        char *c = strchr(h, ',');
        size_t l = c ? (size_t)(c - h) : strcspn(h, "\r\n");
        if (l == strlen(name) && !strncmp(h, name, l)) return i;
        h = c ? c + 1 : NULL;
    }
    return -1;
}

static void field(const char *line, int i, char *out, size_t len) {
    for (; i > 0 && line; i--) line = strchr(line, ',') ? strchr(line, ',') + 1 : NULL;
    size_t l = line ? strcspn(line, ",\r\n") : 0;
    fmt(out, len, "%.*s", (int)l, line ? line : "");
}

static void expected_of(const char *dir, expected *x) {
    memset(x, 0, sizeof *x);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "%s: %s", dir, strerror(errno));
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".csv") || strstr(de->d_name, ".samples.csv") ||
            de->d_name[0] == '.')
            continue;
        char suite[128], path[4096];
        fmt(suite, sizeof suite, "%.*s", (int)(l - 4), de->d_name);
        fmt(path, sizeof path, "%s/%s", dir, de->d_name);
        char *text = bench_read_file(path, NULL);
        if (!text) continue;
        char *line = text, *next = strchr(line, '\n');
        int cm = col(line, "metric"), cx = col(line, "x"), cb = col(line, "benchmark"),
            cmed = col(line, "median");
        CHECK_MSG(cm >= 0 && cx >= 0 && cb >= 0 && cmed >= 0, "%s: header lacks a column", path);
        // the rows' metric, benchmark and x; a row is on a line when its benchmark has the
        // metric at two x values or more, else it is a bar
        struct {
            char m[64], b[64];
            bool has_x;
            double x;
        } *rows = calloc(4096, sizeof *rows);
        int nr = 0;
        char metrics[64][64];
        bool with_x[64] = {0}, without_x[64] = {0};
        int nm = 0;
        for (line = next ? next + 1 : NULL; line && *line && rows; line = next ? next + 1 : NULL) {
            next = strchr(line, '\n');
            char xs[64], med[64], *end;
            field(line, cm, rows[nr].m, sizeof rows[nr].m);
            field(line, cx, xs, sizeof xs);
            field(line, cb, rows[nr].b, sizeof rows[nr].b);
            field(line, cmed, med, sizeof med);
            if (!*rows[nr].m || !*med) continue;
            rows[nr].x = strtod(xs, &end);
            rows[nr].has_x = *xs && !*end;
            int q = 0;
            while (q < x->n_benchmarks && strcmp(x->benchmarks[q], rows[nr].b)) q++;
            if (q == x->n_benchmarks && q < 256)
                fmt(x->benchmarks[x->n_benchmarks++], 64, "%s", rows[nr].b);
            if (nr < 4095) nr++;
        }
        for (int i = 0; i < nr; i++) {
            int k = 0;
            while (k < nm && strcmp(metrics[k], rows[i].m)) k++;
            if (k == nm && nm < 64) fmt(metrics[nm++], 64, "%s", rows[i].m);
            bool line_row = false;
            for (int j = 0; j < nr && rows[i].has_x; j++)
                line_row |= rows[j].has_x && rows[j].x != rows[i].x &&
                            !strcmp(rows[j].m, rows[i].m) && !strcmp(rows[j].b, rows[i].b);
            if (k < 64) {
                if (line_row)
                    with_x[k] = true;
                else
                    without_x[k] = true;
            }
        }
        free(rows);
        for (int k = 0; k < nm && x->n < 250; k++) {
            char s1[128], s2[128];
            slug(s1, sizeof s1, suite);
            slug(s2, sizeof s2, metrics[k]);
            if (with_x[k]) {
                fmt(x->e[x->n].name, sizeof x->e[x->n].name, "%s-%s", s1, s2);
                fmt(x->e[x->n].metric, sizeof x->e[x->n].metric, "%s", metrics[k]);
                x->e[x->n++].bars = false;
            }
            if (without_x[k]) {
                fmt(x->e[x->n].name, sizeof x->e[x->n].name, "%s-%s%s", s1, s2,
                    with_x[k] ? "-bars" : "");
                fmt(x->e[x->n].metric, sizeof x->e[x->n].metric, "%s", metrics[k]);
                x->e[x->n++].bars = true;
            }
        }
        free(text);
    }
    closedir(d);
    CHECK_MSG(x->n > 0, "%s: no metrics in its CSVs", dir);
}

static void check_figures(const char *plots, const expected *x) {
    for (int i = 0; i < x->n; i++) {
        char p[4096];
        fmt(p, sizeof p, "%s/%s.png", plots, x->e[i].name);
        check_png(p);
        fmt(p, sizeof p, "%s/%s.svg", plots, x->e[i].name);
        check_svg(p);
    }
    printf("%d figures (PNG + SVG) checked in %s\n", x->n, plots);
}

// ---------------------------------------------------------------------------------------------
// the modes

static int mode_plot(const char *dir) {
    expected x;
    expected_of(dir, &x);
    char plots[4096];
    fmt(plots, sizeof plots, "%s/plots", dir);
    CHECK(sh("rm -rf '%s' && '%s' plot '%s'", plots, bench, dir) == 0);  // no stale figures
    check_figures(plots, &x);
    // the plotted data says what it is: the .dat beside each figure has a row per point
    for (int i = 0; i < x.n; i++) {
        char p[4096];
        fmt(p, sizeof p, "%s/%s.dat", plots, x.e[i].name);
        CHECK_MSG(file_size(p) > 0, "%s missing", p);
    }
    return 0;
}

/* Every src="..." / href="..." in the HTML whose value starts with PREFIX: relative, inside DIR,
 * an existing non-empty file. Returns how many. */
static int check_refs(const char *dir, const char *html, const char *attr, const char *prefix) {
    int n = 0;
    char pat[32];
    fmt(pat, sizeof pat, "%s=\"", attr);
    for (const char *s = strstr(html, pat); s; s = strstr(s + 1, pat)) {
        const char *v = s + strlen(pat), *end = strchr(v, '"');
        if (!end || strncmp(v, prefix, strlen(prefix))) continue;
        char ref[1024], path[4096];
        fmt(ref, sizeof ref, "%.*s", (int)(end - v), v);
        CHECK_MSG(ref[0] != '/' && !strstr(ref, ".."), "%s=\"%s\": not inside the directory", attr,
                  ref);
        fmt(path, sizeof path, "%s/%s", dir, ref);
        CHECK_MSG(file_size(path) > 0, "report.html refers to %s, which is missing or empty", ref);
        if (strstr(ref, ".png")) check_png(path);
        if (strstr(ref, ".svg")) check_svg(path);
        n++;
    }
    return n;
}

static int mode_report(const char *dir) {
    expected x;
    expected_of(dir, &x);
    // without plots: report draws them first
    CHECK(sh("rm -rf '%s/plots' '%s/report.html' '%s/report.md' && '%s' report '%s'", dir, dir, dir,
             bench, dir) == 0);
    char path[4096];
    fmt(path, sizeof path, "%s/report.html", dir);
    char *html = bench_read_file(path, NULL);
    CHECK_MSG(html != NULL, "%s missing", path);
    fmt(path, sizeof path, "%s/report.md", dir);
    char *md = bench_read_file(path, NULL);
    CHECK_MSG(md != NULL, "%s missing", path);
    if (!html || !md) {
        free(html);
        free(md);
        return 0;
    }
    CHECK(!strncmp(html, "<!DOCTYPE html>", 15) && strstr(html, "</html>"));
    CHECK_MSG(strstr(html, "<style>") && !strstr(html, "<link") && !strstr(html, "<script"),
              "report.html is not self-contained (inline CSS, no links, no scripts)");
    int imgs = check_refs(dir, html, "src", "");
    int links = check_refs(dir, html, "href", "plots/");
    printf("report.html: %d images, %d links to plots, all present\n", imgs, links);
    CHECK_MSG(imgs == x.n, "report.html shows %d images for %d figures", imgs, x.n);
    for (int i = 0; i < x.n; i++) {
        char ref[512];
        fmt(ref, sizeof ref, "src=\"plots/%s.svg\"", x.e[i].name);
        CHECK_MSG(strstr(html, ref), "report.html lacks %s", ref);
        fmt(ref, sizeof ref, "](plots/%s.png)", x.e[i].name);
        CHECK_MSG(strstr(md, ref), "report.md lacks %s", ref);
    }
    // report.md's images exist too
    int md_imgs = 0;
    for (const char *s = strstr(md, "](plots/"); s; s = strstr(s + 1, "](plots/")) {
        char ref[1024], p[4096];
        size_t l = strcspn(s + 2, ")");
        fmt(ref, sizeof ref, "%.*s", (int)l, s + 2);
        fmt(p, sizeof p, "%s/%s", dir, ref);
        CHECK_MSG(file_size(p) > 0, "report.md refers to %s, which is missing", ref);
        md_imgs++;
    }
    CHECK_MSG(md_imgs == x.n, "report.md shows %d images for %d figures", md_imgs, x.n);
    // the tables: every benchmark, with context and status sections
    for (int i = 0; i < x.n_benchmarks; i++) {
        char cell[128];
        fmt(cell, sizeof cell, "<td>%s</td>", x.benchmarks[i]);
        CHECK_MSG(strstr(html, cell), "report.html has no row for %s", x.benchmarks[i]);
        CHECK_MSG(strstr(md, x.benchmarks[i]) || strchr(x.benchmarks[i], '_'),
                  "report.md has no row for %s", x.benchmarks[i]);
    }
    CHECK(strstr(html, "id=\"run\"") && strstr(html, "id=\"machine\"") &&
          strstr(html, "id=\"status\""));
    CHECK(strstr(md, "## Run") && strstr(md, "## Machine") &&
          strstr(md, "## Skipped and unfinished"));
    CHECK_MSG(!strstr(html, "Emulated CUDA device") && !strstr(md, "Emulated CUDA device") &&
                  !strstr(html, "(emulated") && !strstr(md, "(emulated"),
              "a run on a real device is called emulated");
    free(html);
    free(md);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// a run on the emulated CUDA device

static const char emu_banner[] =
    "Emulated CUDA device on the CPU: these timings measure the emulator, not a GPU; they prove "
    "only that the benchmarks run and verify";

/* Every piece of TEXT from OPEN to CLOSE contains WANT; returns how many pieces there are. */
static int each_has(const char *text, const char *open, const char *close, const char *want,
                    const char *what) {
    int n = 0;
    for (const char *s = strstr(text, open); s; s = strstr(s + 1, open)) {
        const char *e = strstr(s + strlen(open), close);
        size_t l = e ? (size_t)(e - s) : strlen(s);
        char piece[2048];
        fmt(piece, sizeof piece, "%.*s", (int)(l < 2047 ? l : 2047), s);
        CHECK_MSG(strstr(piece, want), "%s without \"%s\": %s", what, want, piece);
        n++;
    }
    return n;
}

static int mode_emulated(const char *dir) {
    char emu[4096], path[4096];
    fmt(emu, sizeof emu, "%s/emu", work);
    CHECK(sh("rm -rf '%s' && cp -r '%s' '%s' && rm -rf '%s/plots'", emu, dir, emu, emu) == 0);
    expected x;
    expected_of(emu, &x);
    CHECK(sh("'%s' report '%s'", bench, emu) == 0);
    fmt(path, sizeof path, "%s/report.html", emu);
    char *html = bench_read_file(path, NULL);
    fmt(path, sizeof path, "%s/report.md", emu);
    char *md = bench_read_file(path, NULL);
    CHECK(html && md);
    if (html && md) {
        // the banner at the top: right under the heading, before the run's sections
        const char *h1 = strstr(html, "</h1>"), *banner = strstr(html, emu_banner);
        CHECK_MSG(h1 && banner && banner > h1 && banner < strstr(html, "<p>") &&
                      banner < strstr(html, "id=\"run\""),
                  "report.html: no banner at the top");
        CHECK_MSG(strstr(html, "<div class=\"banner emulated\">"), "report.html: banner style");
        const char *l2 = strchr(md, '\n');
        CHECK_MSG(!strncmp(md, "# tandem bench report: ", 23) && l2 && strstr(md, emu_banner) &&
                      strstr(md, emu_banner) < strstr(md, "## Run") &&
                      !strncmp(l2, "\n\n> **Emulated CUDA device", 26),
                  "report.md: no banner under the title");
        CHECK_MSG(strstr(html, "<title>tandem bench report: ") &&
                      strstr(strstr(html, "<title>"), "(emulated)</title>"),
                  "report.html: the title does not say emulated");
        // every figure's caption and alt text, every table's note, the machine
        int caps = each_has(html, "<figcaption>", "</figcaption>", "(emulated", "a figure caption");
        int alts = each_has(html, "alt=\"", "\"", "(emulated", "an image's alt text");
        int md_alts = each_has(md, "![", "](", "(emulated", "a Markdown image");
        CHECK_MSG(caps == x.n && alts == x.n && md_alts == x.n,
                  "%d figures: %d captions, %d alt texts, %d in report.md", x.n, caps, alts,
                  md_alts);
        int suites = 0;
        for (const char *s = strstr(html, "<h2 id=\"suite-"); s; s = strstr(s + 1, "<h2 id=\"suite-"))
            suites++;
        CHECK_MSG(suites > 0 && each_has(html, "CV: the coefficient", "</p>", "Emulated: timings",
                                         "a table note") == suites,
                  "report.html: not every table's note says emulated");
        CHECK_MSG(each_has(md, "CV: the coefficient", "\n\n", "Emulated: timings", "a table note") ==
                      suites,
                  "report.md: not every table's note says emulated");
        const char *mach = strstr(html, "id=\"machine\"");
        CHECK_MSG(mach && strstr(mach, "EMULATED on the CPU (suites/emu): not a GPU") &&
                      strstr(mach, "EMULATED on the CPU") < strstr(mach, "<table"),
                  "report.html: the machine section does not say the GPU is emulated");
        CHECK_MSG(strstr(strstr(md, "## Machine") ? strstr(md, "## Machine") : md,
                         "EMULATED on the CPU"),
                  "report.md: the machine section does not say the GPU is emulated");
    }
    free(html);
    free(md);
    // the plots report drew, and bench plot's own: every title says (emulated), as the data do
    CHECK(x.n > 0);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) CHECK(sh("rm -rf '%s/plots' && '%s' plot '%s'", emu, bench, emu) == 0);
        for (int i = 0; i < x.n; i++) {
            fmt(path, sizeof path, "%s/plots/%s.svg", emu, x.e[i].name);
            char *svg = bench_read_file(path, NULL);
            CHECK_MSG(svg && strstr(svg, "(emulated)"), "%s: the title does not say (emulated)",
                      path);
            free(svg);
            fmt(path, sizeof path, "%s/plots/%s.dat", emu, x.e[i].name);
            char *dat = bench_read_file(path, NULL);
            CHECK_MSG(dat && strstr(dat, "# (emulated)"), "%s: not marked emulated", path);
            free(dat);
        }
    }
    fmt(path, sizeof path, "%s/plots", emu);
    check_figures(path, &x);
    return 0;
}

/* Copies DIR's CSVs and JSONs to DEST with every median (and min, max) times SCALE. */
static void copy_scaled(const char *dir, const char *dest, double scale) {
    CHECK(
        sh("rm -rf '%s' && mkdir -p '%s' && cp '%s'/*.csv '%s'/ && (cp '%s'/*.json '%s'/ || true)",
           dest, dest, dir, dest, dir, dest) == 0);
    DIR *d = opendir(dest);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".csv") || strstr(de->d_name, ".samples.csv"))
            continue;
        char path[4096];
        fmt(path, sizeof path, "%s/%s", dest, de->d_name);
        char *text = bench_read_file(path, NULL);
        if (!text) continue;
        int cols[3] = {col(text, "median"), col(text, "min"), col(text, "max")};
        size_t cap = 2 * strlen(text) + 1024, at = 0;
        char *out = malloc(cap);
        const char *line = text;
        for (int row = 0; line && *line && out; row++) {
            const char *nl = strchr(line, '\n');
            size_t ll = nl ? (size_t)(nl - line) : strlen(line);
            int fi = 0;
            for (const char *f = line; f < line + ll; fi++) {
                const char *c = memchr(f, ',', (size_t)(line + ll - f));
                size_t fl = c ? (size_t)(c - f) : (size_t)(line + ll - f);
                bool num = row > 0 && (fi == cols[0] || fi == cols[1] || fi == cols[2]) && fl;
                if (num)
                    at += (size_t)fmt(out + at, cap - at, "%.9g", strtod(f, NULL) * scale);
                else
                    at += (size_t)fmt(out + at, cap - at, "%.*s", (int)fl, f);
                if (c) out[at++] = ',';
                f = c ? c + 1 : line + ll;
            }
            out[at++] = '\n';
            out[at] = '\0';
            line = nl ? nl + 1 : NULL;
        }
        CHECK(out && spit(path, out));
        free(out);
        free(text);
    }
    closedir(d);
}

/* DIR and a copy 20% faster, side by side: every figure, each with the series of both runs. */
static void side_of(const char *dir, const char *tag) {
    char a[4096], b[4096], out[4096];
    fmt(a, sizeof a, "%s/%s/before", work, tag);
    fmt(b, sizeof b, "%s/%s/after", work, tag);
    fmt(out, sizeof out, "%s/%s/side", work, tag);
    copy_scaled(dir, a, 1.0);
    copy_scaled(dir, b, 1.2);
    CHECK(sh("rm -rf '%s'", out) == 0);
    CHECK(sh("'%s' plot '%s' '%s'", bench, a, b) == 2);
    CHECK_MSG(strstr(last_err, "--out"),
              "several directories without --out: the message names --out");
    CHECK(sh("'%s' plot '%s' '%s' --out '%s'", bench, a, b, out) == 0);
    expected x;
    expected_of(a, &x);
    check_figures(out, &x);
    for (int i = 0; i < x.n; i++) {
        char p[4096];
        fmt(p, sizeof p, "%s/%s.dat", out, x.e[i].name);
        char *dat = bench_read_file(p, NULL);
        CHECK_MSG(dat && strstr(dat, "before") && strstr(dat, "after"),
                  "%s: not both runs (before, after)", p);
        if (dat && !x.e[i].bars) {  // lines: as many series of "after" as of "before"
            int na = 0, nb = 0;
            for (const char *s = strstr(dat, "# series"); s; s = strstr(s + 1, "# series")) {
                const char *eol = strchr(s, '\n');
                size_t l = eol ? (size_t)(eol - s) : strlen(s);
                char line[512];
                fmt(line, sizeof line, "%.*s", (int)l, s);
                na += strstr(line, "- before") != NULL;
                nb += strstr(line, "- after") != NULL;
            }
            CHECK_MSG(na > 0 && na == nb, "%s: %d series of before, %d of after", p, na, nb);
        }
        free(dat);
    }
}

/* A sweep over sizes, as a full (not --quick) run makes: lines, log x, several series. */
static void make_sweep(const char *p) {
    char q[4096], csv[8192];
    CHECK(sh("rm -rf '%s' && mkdir -p '%s'", p, p) == 0);
    size_t at = (size_t)fmt(csv, sizeof csv,
                            "suite,benchmark,param,x,metric,unit,median,mean,"
                            "stddev,cv,min,max,repetitions\n");
    for (int n = 64; n <= 1024; n *= 4) {
        double t = 2.0 * n * n * n / 10.0;  // ns at 10 GFLOP/s
        at += (size_t)fmt(csv + at, sizeof csv - at,
                          "ops,matmul,n:%d,%d,time,ns,%g,%g,%g,0.01,%g,%g,5\n"
                          "ops,matmul,n:%d,%d,GFLOP/s,GFLOP/s,10,10,0.1,0.01,9.8,10.1,5\n",
                          n, n, t, t, t / 100, t * 0.99, t * 1.02, n, n);
    }
    for (int n = 1024; n <= 1048576; n *= 32)
        at += (size_t)fmt(csv + at, sizeof csv - at,
                          "ops,add,n:%d/dtype:f32,%d,GB/s,GB/s,%g,%g,0.2,0.02,%g,%g,5\n"
                          "ops,add,n:%d/dtype:bf16,%d,GB/s,GB/s,%g,%g,0.2,0.02,%g,%g,5\n",
                          n, n, 5.0 + n / 1e5, 5.0 + n / 1e5, 4.9 + n / 1e5, 5.1 + n / 1e5, n, n,
                          4.0 + n / 1e5, 4.0 + n / 1e5, 3.9 + n / 1e5, 4.1 + n / 1e5);
    at += (size_t)fmt(csv + at, sizeof csv - at,
                      "ops,train_step,model:mlp,,samples/s,samples/s,12000,12000,100,0.01,11800,"
                      "12100,5\n");
    fmt(q, sizeof q, "%s/ops.csv", p);
    CHECK(spit(q, csv));
    fmt(q, sizeof q, "%s/context.json", p);
    CHECK(spit(q, "{\"format\":\"tandem-results/1\",\"device\":\"cpu\"}"));
}

static int mode_side(const char *dir) {
    side_of(dir, "run");
    char sweep[4096], p[4096];
    fmt(sweep, sizeof sweep, "%s/sweep", work);
    make_sweep(sweep);
    side_of(sweep, "sweep");
    // the sweep's lines: matmul, and add per dtype (the x part of the param taken out)
    fmt(p, sizeof p, "%s/sweep/side/ops-GB_per_s.dat", work);
    char *dat = bench_read_file(p, NULL);
    CHECK_MSG(dat && strstr(dat, "# series 1: add dtype:f32 - before") &&
                  strstr(dat, "# series 4: add dtype:bf16 - after"),
              "%s: not a series per dtype and run", p);
    free(dat);
    return 0;
}

static int mode_bad(void) {
    char p[4096], q[4096];
    fmt(p, sizeof p, "%s/no_such_dir", work);
    CHECK(sh("rm -rf '%s'", p) == 0);
    for (int r = 0; r < 2; r++) {
        const char *cmd = r ? "report" : "plot";
        CHECK(sh("'%s' %s '%s'", bench, cmd, p) == 2);
        CHECK_MSG(strstr(last_err, "no_such_dir") && strstr(last_err, "No such file"),
                  "bench %s on a missing directory: unclear message", cmd);
    }
    fmt(p, sizeof p, "%s/empty_dir", work);
    CHECK(sh("rm -rf '%s' && mkdir -p '%s' && echo '{}' > '%s/context.json'", p, p, p) == 0);
    for (int r = 0; r < 2; r++) {
        const char *cmd = r ? "report" : "plot";
        CHECK(sh("'%s' %s '%s'", bench, cmd, p) == 2);
        CHECK_MSG(strstr(last_err, "empty_dir") && strstr(last_err, "no results"),
                  "bench %s on a directory without results: unclear message", cmd);
    }
    fmt(q, sizeof q, "%s/report.html", p);
    CHECK_MSG(file_size(q) < 0, "a report was written for a directory without results");
    // malformed: a header without the columns, a short row, a non-number, a bad context.json
    static const char *const bad_files[][2] = {
        {"ops.csv", "name,value\nmatmul,3\n"},
        {"ops.csv", "suite,benchmark,param,x,metric,unit,median\nops,add,n:1,1,GB/s,GB/s\n"},
        {"ops.csv", "suite,benchmark,param,x,metric,unit,median\nops,add,n:1,1,GB/s,GB/s,fast\n"},
        {"context.json", "{\"device\": \"cpu\", "},
    };
    static const char *const why[] = {"column in the header", ":2: 6 fields", "not a number",
                                      "context.json"};
    for (int k = 0; k < 4; k++) {
        fmt(p, sizeof p, "%s/malformed%d", work, k);
        CHECK(sh("rm -rf '%s' && mkdir -p '%s'", p, p) == 0);
        fmt(q, sizeof q, "%s/ops.csv", p);
        spit(q, "suite,benchmark,param,x,metric,unit,median\nops,add,n:1,1,GB/s,GB/s,3\n");
        fmt(q, sizeof q, "%s/%s", p, bad_files[k][0]);
        CHECK(spit(q, bad_files[k][1]));
        CHECK(sh("'%s' plot '%s'", bench, p) == 2);
        CHECK_MSG(strstr(last_err, why[k]), "malformed case %d: the message lacks \"%s\"", k,
                  why[k]);
        CHECK(sh("'%s' report '%s'", bench, p) == 2);
    }
    // a file for a directory, bad options, no arguments
    CHECK(sh("'%s' plot '%s'", bench, q) == 2);
    CHECK_MSG(strstr(last_err, "not a directory"), "a file given as a directory: unclear message");
    CHECK(sh("'%s' plot", bench) == 2);
    CHECK(sh("'%s' report", bench) == 2);
    CHECK(sh("'%s' plot --bogus '%s'", bench, work) == 2);
    CHECK(sh("'%s' report '%s' '%s'", bench, work, work) == 2);
    CHECK(sh("'%s' plot --help | grep -q 'usage: bench plot'", bench) == 0);
    CHECK(sh("'%s' report --help | grep -q 'usage: bench report'", bench) == 0);
    return 0;
}

/* A results directory whose names and context carry markup and Markdown. */
static void make_hostile(const char *p) {
    char q[4096];
    CHECK(sh("rm -rf '%s' && mkdir -p '%s'", p, p) == 0);
    fmt(q, sizeof q, "%s/evil.csv", p);
    CHECK(spit(q,
               "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\n"
               "evil,<script>alert(1)</script>,n:8,8,GB/s,GB/s,1.5,1.5,0.1,0.07,1.4,1.6,3\n"
               "evil,<script>alert(1)</script>,n:64,64,GB/s,GB/s,2.5,2.5,0.1,0.04,2.4,2.6,3\n"
               "evil,a|b*c_d,it's \"q\",,items/s,items/s,7,7,0,0,7,7,3\n"
               "evil,x&y,n:8,8,time,ns,100,100,1,0.01,99,101,3\n"));
    fmt(q, sizeof q, "%s/context.json", p);
    CHECK(spit(q,
               "{\"format\":\"tandem-results/1\",\"device\":\"cpu\",\"command\":[\"bench\","
               "\"run\"],\"started\":\"<b>now</b>\",\"env\":{\"host\":\"<img src=x "
               "onerror=alert(1)>\",\"gpus\":[{\"name\":\"A&B\"}]}}"));
    fmt(q, sizeof q, "%s/status.json", p);
    CHECK(spit(q,
               "{\"complete\":false,\"finished\":[],\"unfinished\":[\"evil/<i>x</i>\"],"
               "\"skipped\":[{\"suite\":\"<u>gpu</u>\",\"reason\":\"no CUDA device\"}]}"));
}

static int mode_hostile(void) {
    char p[4096], q[4096];
    fmt(p, sizeof p, "%s/hostile", work);
    make_hostile(p);
    CHECK(sh("'%s' report '%s'", bench, p) == 0);
    fmt(q, sizeof q, "%s/report.html", p);
    char *html = bench_read_file(q, NULL);
    CHECK(html != NULL);
    if (html) {
        CHECK_MSG(!strstr(html, "<script") && !strstr(html, "<img src=x") && !strstr(html, "<b>") &&
                      !strstr(html, "<u>") && !strstr(html, "<i>"),
                  "markup from the results reached report.html unescaped");
        CHECK(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;") && strstr(html, "A&amp;B") &&
              strstr(html, "x&amp;y") && strstr(html, "it&#39;s &quot;q&quot;"));
        CHECK_MSG(strstr(html, "This run did not complete"), "the incomplete run is not flagged");
        CHECK(strstr(html, "no CUDA device") && strstr(html, "&lt;u&gt;gpu&lt;/u&gt;"));
        CHECK(check_refs(p, html, "src", "") == 3);  // GB/s and time lines, items/s bars
    }
    free(html);
    fmt(q, sizeof q, "%s/report.md", p);
    char *md = bench_read_file(q, NULL);
    CHECK(md != NULL);
    if (md) {
        bool bare = false;  // a '<' without its backslash
        for (const char *c = strchr(md, '<'); c; c = strchr(c + 1, '<'))
            bare |= c == md || c[-1] != '\\';
        CHECK_MSG(strstr(md, "a\\|b\\*c\\_d") && strstr(md, "\\<script\\>") && !bare,
                  "report.md does not escape Markdown and markup");
        CHECK(strstr(md, "**This run did not complete"));
    }
    free(md);
    // --embed: one file, the PNGs inline
    CHECK(sh("'%s' report --embed '%s'", bench, p) == 0);
    fmt(q, sizeof q, "%s/report.html", p);
    html = bench_read_file(q, NULL);
    CHECK(html && strstr(html, "src=\"data:image/png;base64,iVBORw0KGgo") &&
          !strstr(html, "src=\"plots/"));
    free(html);
    // no gnuplot: plot fails with a clear message (exit 1); report is written without plots
    CHECK(sh("GNUPLOT=/nonexistent/gnuplot '%s' plot '%s'", bench, p) == 1);
    CHECK_MSG(strstr(last_err, "gnuplot not found"), "no gnuplot: unclear message");
    CHECK(sh("rm -rf '%s/plots' && GNUPLOT=/nonexistent/gnuplot '%s' report '%s'", p, bench, p) ==
          0);
    html = bench_read_file(q, NULL);
    CHECK(html && strstr(html, "No plots") && !strstr(html, "<img"));
    free(html);
    // a failing gnuplot: its exit status is checked and its message shown
    CHECK(sh("GNUPLOT=/bin/false '%s' plot '%s'", bench, p) == 1);
    CHECK_MSG(strstr(last_err, "gnuplot failed"), "a failing gnuplot: unclear message");
    fmt(q, sizeof q, "%s/plots/evil-GB_per_s.png", p);
    CHECK_MSG(file_size(q) < 0, "a failed figure left a file behind");
    // --no-plots
    CHECK(sh("'%s' report --no-plots '%s'", bench, p) == 0);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// issue 21: hostile names in a results directory never reach gnuplot as code (test_report inject)

/* Names an attacker puts in a CSV, context.json or a directory's name: each would run
 * `touch PWNED` (or break the figure) if gnuplot parsed it as code or took it for a file name. */
static const char *const evil[] = {
    "x'.system('touch PWNED').'",       // out of a single-quoted string: eval, -e
    "x\".system(\"touch PWNED\").\"",   // out of a double-quoted one
    "`touch PWNED`",                    // backquote substitution
    "y\\",                              // a backslash: escapes a data file's closing quote
    "@evil |touch PWNED <b>&amp; #c",   // a macro, a pipe, markup, a comment
    "tab\there\rcr \xc3\xa9 \xff\xfe",  // control characters, UTF-8, bytes that are not UTF-8
};
#define N_EVIL (int)(sizeof evil / sizeof *evil)
/* What each looks like in an SVG gnuplot wrote: < and & as entities, control characters as
 * spaces, bytes that are not UTF-8 as '?'. */
static const char *const evil_svg[N_EVIL] = {
    "x'.system('touch PWNED').'",
    "x\".system(\"touch PWNED\").\"",
    "`touch PWNED`",
    "y\\",
    "@evil |touch PWNED &lt;b>&amp;amp; #c",
    "tab here cr \xc3\xa9 ??",
};
// the words the suites' own scripts style by (plots/scaling.gp, amp.gp, cpu-vs-gpu.gp)
static const char *const evil_prefix[N_EVIL] = {"predicted_", "", "", "mlp_10000_", "nvlink_", ""};
static const char *const evil_suffix[N_EVIL] = {"", "_fp16", "_cuda", "", "", "_bf16"};

/* S in single quotes for sh, ' as '\''. */
static const char *shq(char *buf, size_t len, const char *s) {
    size_t k = 0;
    buf[k++] = '\'';
    for (; *s && k + 6 < len; s++) {
        if (*s == '\'')
            k += (size_t)fmt(buf + k, len - k, "'\\''");
        else
            buf[k++] = *s;
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

/* S as a JSON string's contents. */
static const char *json_esc(char *buf, size_t len, const char *s) {
    size_t k = 0;
    for (; *s && k + 8 < len; s++) {
        if (*s == '"' || *s == '\\')
            k += (size_t)fmt(buf + k, len - k, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            k += (size_t)fmt(buf + k, len - k, "\\u%04x", (unsigned char)*s);
        else
            buf[k++] = *s;
    }
    buf[k] = '\0';
    return buf;
}

/* The paths under DIR (recursively) whose name contains PWNED: what a command run by gnuplot
 * left. Returns how many, printing each. */
static int find_pwned(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[4096];
        fmt(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (!strncmp(de->d_name, "PWNED", 5)) {
            printf("found %s\n", p);
            n++;
        }
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) n += find_pwned(p);
    }
    closedir(d);
    return n;
}

/* The suites to plant a CSV for: every suite bench list names, every plots/<name>.gp (lines.gp
 * and bars.gp as suites too: a CSV may be called so), and a suite with a hostile name. */
static int evil_suites(const char *plots_dir, char suites[][64], int max) {
    int n = 0;
    char path[4096];
    fmt(path, sizeof path, "%s/.list", work);
    CHECK(sh("'%s' list > '%s'", bench, path) == 0);
    char *list = bench_read_file(path, NULL);
    for (char *l = list; l && *l && n < max; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (*l != ' ' && *l != '\n') fmt(suites[n++], 64, "%.*s", (int)strcspn(l, " \n:"), l);
    free(list);
    DIR *d = opendir(plots_dir);
    CHECK_MSG(d != NULL, "%s: %s", plots_dir, strerror(errno));
    struct dirent *de;
    while (d && (de = readdir(d)) && n < max - 1) {
        size_t l = strlen(de->d_name);
        if (l < 4 || strcmp(de->d_name + l - 3, ".gp")) continue;
        bool seen = false;
        for (int i = 0; i < n; i++)
            seen |= !strncmp(suites[i], de->d_name, l - 3) && !suites[i][l - 3];
        if (!seen) fmt(suites[n++], 64, "%.*s", (int)(l - 3), de->d_name);
    }
    if (d) closedir(d);
    fmt(suites[n++], 64, "%s", evil[0]);
    return n;
}

/* A results directory DIR whose every CSV (one per suite) names its benchmarks, params, metrics
 * and units with evil[], and whose context.json names the device and the machine so. Three
 * figures per suite: time and the metric evil[0]/s as lines, the metric evil[2] as bars. */
static void make_evil(const char *dir, char suites[][64], int n_suites) {
    CHECK_MSG(mkdir(dir, 0777) == 0, "mkdir %s: %s", dir, strerror(errno));
    for (int s = 0; s < n_suites; s++) {
        char path[4096], csv[16384];
        size_t at = (size_t)fmt(csv, sizeof csv,
                                "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,"
                                "max,repetitions\n");
        for (int i = 0; i < N_EVIL; i++) {
            char b[256];
            fmt(b, sizeof b, "%s%s%s", evil_prefix[i], evil[i], evil_suffix[i]);
            for (int x = 8; x <= 64; x *= 8)
                at += (size_t)fmt(csv + at, sizeof csv - at,
                                  "%s,%s,n:%d,%d,time,ns,%d,%d,1,0.01,%d,%d,9\n"
                                  "%s,%s,n:%d,%d,%s/s,%s,%d,%d,1,0.01,%d,%d,9\n",
                                  suites[s], b, x, x, 100 * x + i, 100 * x + i, 99 * x, 101 * x + i,
                                  suites[s], b, x, x, evil[0], evil[1], 10 + i, 10 + i, 9, 11 + i);
            at += (size_t)fmt(csv + at, sizeof csv - at, "%s,%s,%s,,%s,%s,%d,%d,0,0,%d,%d,9\n",
                              suites[s], b, evil[i], evil[2], evil[4], 5 + i, 5 + i, 5 + i, 5 + i);
        }
        fmt(path, sizeof path, "%s/%s.csv", dir, suites[s]);
        CHECK_MSG(spit(path, csv), "%s: cannot write", path);
    }
    char path[4096], j0[256], j1[256], j4[256];
    fmt(path, sizeof path, "%s/context.json", dir);
    char ctx[2048];
    fmt(ctx, sizeof ctx,
        "{\"format\":\"tandem-results/1\",\"device\":\"%s\",\"emulated\":false,\"env\":{\"host\":"
        "\"%s\",\"gpus\":[{\"name\":\"%s\"}]}}",
        json_esc(j0, sizeof j0, evil[0]), json_esc(j1, sizeof j1, evil[1]),
        json_esc(j4, sizeof j4, evil[4]));
    CHECK(spit(path, ctx));
}

/* The figures in PLOTS: every .png and .svg valid, one of each per .dat; the SVGs UTF-8; their
 * text in ALL (malloc'd, the caller frees). Returns the number of figures. */
static int evil_figures(const char *plots, char **all) {
    int n_png = 0, n_svg = 0, n_dat = 0;
    size_t len = 0;
    *all = NULL;
    DIR *d = opendir(plots);
    CHECK_MSG(d != NULL, "%s: %s", plots, strerror(errno));
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        char p[4096];
        fmt(p, sizeof p, "%s/%s", plots, de->d_name);
        if (l > 4 && !strcmp(de->d_name + l - 4, ".png")) {
            check_png(p);
            n_png++;
        } else if (l > 4 && !strcmp(de->d_name + l - 4, ".dat")) {
            n_dat++;
        } else if (l > 4 && !strcmp(de->d_name + l - 4, ".svg")) {
            check_svg(p);
            n_svg++;
            size_t k;
            char *svg = bench_read_file(p, &k);
            // an SVG that is not UTF-8 does not display
            CHECK_MSG(svg && bench_utf8_invalid_at(svg, k) == k, "%s: not UTF-8", p);
            char *grown = svg ? realloc(*all, len + k + 1) : NULL;
            if (grown) {
                memcpy(grown + len, svg, k + 1);
                len += k;
                *all = grown;
            }
            free(svg);
        } else if (de->d_name[0] != '.') {
            CHECK_MSG(false, "%s: left behind in the plots' directory", p);
        }
    }
    if (d) closedir(d);
    CHECK_MSG(n_png == n_dat && n_svg == n_dat, "%s: %d .dat, %d .png, %d .svg", plots, n_dat,
              n_png, n_svg);
    return n_dat;
}

static int mode_inject(const char *plots_dir) {
    char suites[64][64], cwd[4096];
    int n_suites = evil_suites(plots_dir, suites, 64);
    CHECK_MSG(n_suites >= 12, "%d suites: bench list or %s gave too few", n_suites, plots_dir);
    // the results directories, by names that are code too, given to bench relative to cwd
    static const char *const dirs[] = {"r'.system('touch PWNED').'", "|touch PWNED;",
                                       "<touch PWNED;", "nl\nx `touch PWNED`"};
    fmt(cwd, sizeof cwd, "%s/cwd", work);
    CHECK(sh("rm -rf '%s' && mkdir -p '%s'", cwd, cwd) == 0);
    char q[3][4096], p[4096];
    // every suite in the first directory; in the others (their names are the point) two: scaling
    // (its script styles by name) and the suite with a hostile name
    char few[2][64];
    fmt(few[0], sizeof few[0], "scaling");
    fmt(few[1], sizeof few[1], "%s", evil[0]);
    for (int k = 0; k < 4; k++) {
        int ns = k ? 2 : n_suites;
        fmt(p, sizeof p, "%s/%s", cwd, dirs[k]);
        make_evil(p, k ? few : suites, ns);
        CHECK_MSG(sh("cd %s && '%s' plot %s", shq(q[0], sizeof q[0], cwd), bench,
                     shq(q[1], sizeof q[1], dirs[k])) == 0,
                  "bench plot on hostile names (directory %d) did not draw", k);
        fmt(p, sizeof p, "%s/%s/plots", cwd, dirs[k]);
        char *svg;
        int n = evil_figures(p, &svg);
        CHECK_MSG(n == 3 * ns, "%s: %d figures, want 3 for each of %d suites", p, n, ns);
        // the names are drawn as they are (as text, escaped by gnuplot's SVG terminal)
        for (int i = 0; i < N_EVIL; i++)
            CHECK_MSG(svg && strstr(svg, evil_svg[i]), "no figure shows the name \"%s\"", evil[i]);
        char want[512];
        fmt(want, sizeof want, "predicted_%s (PREDICTION)", evil[0]);
        CHECK_MSG(svg && strstr(svg, want), "scaling.gp: no \"%s\" in the figures", want);
        CHECK_MSG(svg && strstr(svg, "dashed lines are predictions"), "scaling.gp did not run");
        free(svg);
    }
    // side by side (two of the small ones), into a directory that is a command too; then bench
    // report, which draws the missing figures first
    char q3[4096];
    CHECK(sh("cd %s && '%s' plot --out %s %s %s", shq(q[0], sizeof q[0], cwd), bench,
             shq(q[1], sizeof q[1], "<touch PWNED; side"), shq(q[2], sizeof q[2], dirs[1]),
             shq(q3, sizeof q3, dirs[2])) == 0);
    char *svg;
    fmt(p, sizeof p, "%s/<touch PWNED; side", cwd);
    CHECK(evil_figures(p, &svg) == 3 * 2);
    free(svg);
    CHECK(sh("cd %s && rm -rf %s/plots && '%s' report %s", shq(q[0], sizeof q[0], cwd),
             shq(q[1], sizeof q[1], dirs[1]), bench, shq(q[2], sizeof q[2], dirs[1])) == 0);
    char rdir[4096];
    fmt(rdir, sizeof rdir, "%s/%s", cwd, dirs[1]);
    fmt(p, sizeof p, "%s/report.html", rdir);
    char *html = bench_read_file(p, NULL);
    CHECK_MSG(html && !strstr(html, "No plots"), "bench report did not draw the figures");
    if (html) {
        int imgs = check_refs(rdir, html, "src", "plots/");
        CHECK_MSG(imgs == 3 * 2, "report.html shows %d figures, want %d", imgs, 3 * 2);
    }
    free(html);
    // more series than one command-line argument (128 KiB) has room for the titles of, and a
    // metric whose file name would pass the file system's 255 bytes (twice: spelled alike once
    // cut)
    enum { N_LONG = 300, LONG = 600 };
    char *csv = malloc((size_t)N_LONG * 2 * (LONG + 64) + 4096), metric[320];
    CHECK(csv != NULL);
    if (csv) {
        memset(metric, 'm', 300);
        metric[300] = '\0';
        size_t at = (size_t)fmt(csv, 4096, "suite,benchmark,param,x,metric,unit,median\n");
        for (int x = 8; x <= 64; x *= 8) {
            for (int k = 0; k < N_LONG; k++)
                at += (size_t)sprintf(csv + at, "ops,%03d%0*d,n:%d,%d,time,ns,%d\n", k, LONG, 0, x,
                                      x, x + k);
            at += (size_t)sprintf(csv + at, "ops,a,n:%d,%d,%s,x,%d\n", x, x, metric, x);
            at += (size_t)sprintf(csv + at, "ops,a,n:%d,%d,%s/s,x,%d\n", x, x, metric, x);
        }
        fmt(p, sizeof p, "%s/long", cwd);
        CHECK(mkdir(p, 0777) == 0);
        fmt(p, sizeof p, "%s/long/ops.csv", cwd);
        CHECK(spit(p, csv));
        fmt(p, sizeof p, "%s/long", cwd);
        CHECK_MSG(sh("'%s' plot --quiet '%s'", bench, p) == 0, "bench plot on long names failed");
        fmt(p, sizeof p, "%s/long/plots", cwd);
        CHECK(evil_figures(p, &svg) == 3);
        free(svg);
        char want[LONG + 64];  // (a key this long does not fit: the .dat says what was drawn)
        fmt(want, sizeof want, "# series %d: %03d%0*d\n", N_LONG, N_LONG - 1, LONG, 0);
        fmt(p, sizeof p, "%s/long/plots/ops-time.dat", cwd);
        char *dat = bench_read_file(p, NULL);
        CHECK_MSG(dat && strstr(dat, want), "%s: not %d series", p, N_LONG);
        free(dat);
    }
    free(csv);
    int pwned = find_pwned(work);
    CHECK_MSG(pwned == 0, "%d PWNED file(s): a name from the results ran as a command", pwned);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// issue 21: bench check's verdict table in the report (test_report checks): every field from
// status.json escaped, every check shown

#define N_CHECKS 300  // more than the 256 the table once stopped at, without saying so
#define N_GPUS 70     // more than the 64 whose checks it once read

static int mode_checks(void) {
    char dir[4096], path[4096];
    fmt(dir, sizeof dir, "%s/checks", work);
    CHECK(sh("rm -rf '%s' && mkdir -p '%s'", dir, dir) == 0);
    fmt(path, sizeof path, "%s/ops.csv", dir);
    CHECK(spit(path,
               "suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,"
               "repetitions\nops,add,n:8,8,GB/s,GB/s,1.5,1.5,0.1,0.07,1.4,1.6,9\n"));
    // status.json's "check": host checks named check.000 .. check.299, hostile ones, and GPUs
    // whose names, models, verdicts, figures, units and notes carry markup and Markdown
    size_t cap = 1 << 20, at = 0;
    char *st = malloc(cap);
    CHECK(st != NULL);
    if (!st) return 0;
    at += (size_t)fmt(st + at, cap - at,
                      "{\"complete\":true,\"finished\":[],\"check\":{\"summary\":{\"line\":"
                      "\"FAIL: <b>1</b> [x](http://evil)\"},\"host\":{\"checks\":["
                      "{\"check\":\"[click](http://evil)\",\"verdict\":\"FAIL\",\"measured\":"
                      "\"<i>fast</i>\",\"note\":\"<script>alert(1)</script>\"},"
                      "{\"check\":\"<img src=x onerror=alert(1)>\",\"verdict\":\"<u>WARN</u>\","
                      "\"measured\":2,\"unit\":\"]u[\"}");
    for (int i = 0; i < N_CHECKS; i++)
        at += (size_t)fmt(st + at, cap - at,
                          ",{\"check\":\"check.%03d\",\"verdict\":\"PASS\",\"measured\":%d,"
                          "\"unit\":\"GB/s\",\"note\":\"n\"}",
                          i, i);
    at += (size_t)fmt(st + at, cap - at, "]},\"gpus\":[");
    for (int g = 0; g < N_GPUS; g++)
        at += (size_t)fmt(st + at, cap - at,
                          "%s{\"device\":\"<b>cuda:%d</b>\",\"model\":\"[A100](http://evil)\","
                          "\"checks\":[{\"check\":\"%s\",\"verdict\":\"PASS\",\"measured\":1}]}",
                          g ? "," : "", g, g == N_GPUS - 1 ? "only.on.the.last.gpu" : "check.000");
    at += (size_t)fmt(st + at, cap - at, "]}}");
    fmt(path, sizeof path, "%s/status.json", dir);
    CHECK(spit(path, st));
    free(st);
    CHECK(sh("'%s' report --no-plots '%s'", bench, dir) == 0);
    fmt(path, sizeof path, "%s/report.html", dir);
    char *html = bench_read_file(path, NULL);
    fmt(path, sizeof path, "%s/report.md", dir);
    char *md = bench_read_file(path, NULL);
    CHECK(html && md);
    if (!html || !md) {
        free(html);
        free(md);
        return 0;
    }
    // escaped: no markup, no link from status.json in either document
    CHECK_MSG(!strstr(html, "<img src=x") && !strstr(html, "<script>alert") &&
                  !strstr(html, "<b>cuda") && !strstr(html, "<i>fast") &&
                  !strstr(html, "<u>WARN") && !strstr(html, "<b>1</b>"),
              "report.html: markup from status.json's check section unescaped");
    CHECK(strstr(html, "&lt;img src=x onerror=alert(1)&gt;") && strstr(html, "&lt;b&gt;cuda:0") &&
          strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;") && strstr(html, "&lt;i&gt;fast"));
    // in the verdict table's section (the suites' own sections link to their pages)
    const char *table = strstr(md, "## bench check: verdict"), *end = NULL;
    if (table) end = strstr(table, "\n## ");
    CHECK_MSG(table && end, "report.md: no verdict section");
    bool bare = false;  // a '<', '>', '[' or ']' without its backslash
    for (const char *c = table; c && c < end; c++)
        if (strchr("<>[]", *c)) bare |= c[-1] != '\\';
    CHECK_MSG(!bare, "report.md: <, >, [ or ] from status.json without a backslash");
    CHECK(strstr(md, "\\[click\\](http://evil)") &&
          strstr(md, "\\<img src=x onerror=alert(1)\\>") && strstr(md, "\\<b\\>cuda:0\\</b\\>") &&
          strstr(md, "\\<i\\>fast\\</i\\>") && strstr(md, "\\]u\\["));
    // every check has its row, the last GPU's own one too; the table says how many
    int missing = 0;
    for (int i = 0; i < N_CHECKS; i++) {
        char row[128];
        fmt(row, sizeof row, "<tr><td style=\"text-align:left\">check.%03d</td>", i);
        bool in_html = strstr(html, row) != NULL;
        fmt(row, sizeof row, "\n| check.%03d |", i);
        missing += !in_html || !strstr(md, row);
    }
    CHECK_MSG(missing == 0, "%d of %d checks have no row in report.html or report.md", missing,
              N_CHECKS);
    CHECK_MSG(
        strstr(html, ">only.on.the.last.gpu</td>") && strstr(md, "\n| only.on.the.last.gpu |"),
        "the check of GPU %d has no row", N_GPUS);
    char total[64];
    fmt(total, sizeof total, "%d checks.", N_CHECKS + 3);
    CHECK_MSG(strstr(html, total) && strstr(md, total), "the table does not say \"%s\"", total);
    free(html);
    free(md);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr,
                "usage: test_report plot|report|side|bad|hostile|emulated|inject|checks BENCH "
                "WORK [DIR]\n");
        return 2;
    }
    const char *mode = argv[1], *dir = argc > 4 ? argv[4] : NULL;
    bench = argv[2];
    work = argv[3];
    char mk[4200];
    fmt(mk, sizeof mk, "mkdir -p '%s'", work);
    if (system(mk) != 0) return 2;
    bool needs_dir = strcmp(mode, "bad") && strcmp(mode, "hostile") && strcmp(mode, "checks");
    if (needs_dir != (dir != NULL)) {
        fprintf(stderr, "test_report %s: %s a results directory\n", mode,
                needs_dir ? "needs" : "takes no");
        return 2;
    }
    if (!strcmp(mode, "plot"))
        mode_plot(dir);
    else if (!strcmp(mode, "report"))
        mode_report(dir);
    else if (!strcmp(mode, "side"))
        mode_side(dir);
    else if (!strcmp(mode, "bad"))
        mode_bad();
    else if (!strcmp(mode, "hostile"))
        mode_hostile();
    else if (!strcmp(mode, "emulated"))
        mode_emulated(dir);
    else if (!strcmp(mode, "inject"))
        mode_inject(dir);
    else if (!strcmp(mode, "checks"))
        mode_checks();
    else {
        fprintf(stderr, "test_report: unknown mode %s\n", mode);
        return 2;
    }
    CHECK_DONE(mode);
}
