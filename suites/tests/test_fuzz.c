/* test_fuzz.c — the case reader against malformed and hostile files. First a set of crafted
 * files, each of which must be refused with a one-line error naming the problem; then a seeded
 * mutation loop (byte flips, truncations, forged header lengths, digits changed in the header,
 * numbers in the header replaced by extreme ones, garbage data, and valid files rewritten with
 * hostile shapes and attrs) over real case files: every mutant must either be refused cleanly or
 * load and run without a crash (ASan/UBSan watch this test in CI).
 * usage: test_fuzz OUTDIR ITERATIONS CASE_FILE...   (crafted files are left in OUTDIR/hostile)
 *
 * --replay: the same mutations replayed end to end by the bench program, in batches of
 * REPLAY_BATCH files per `bench replay --quiet --write-actual`: each run must exit 0, 1 or 2 (no
 * signal), within REPLAY_DEADLINE_S seconds (no hang), without a sanitizer report in its output.
 * A failing batch is kept in OUTDIR/failed-<first mutant>/ with its output, for `bench replay`.
 * Both modes lower tandem's allocation cap to 256 MiB (TANDEM_MAX_ALLOC_BYTES, unless set).
 * usage: test_fuzz --replay BENCH OUTDIR MUTANTS SEED CASE_FILE... */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "case.h"
#include "check.h"

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

// A safetensors file from a header string and `ndata` zero bytes of data.
static size_t make_st(unsigned char *buf, const char *header, uint64_t hlen_field, size_t ndata) {
    size_t h = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, 0, ndata);
    return 8 + h + ndata;
}

#define META "\"__metadata__\":{\"format\":\"tandem-case/1\",\"op\":\"relu\"}"
#define TENS(name, dt, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static const struct {
    const char *name, *header, *expect;
    int64_t hlen;   // -1: the true length
    size_t ndata;
} crafted[] = {
    {"bad_json", "{\"__metadata__\":{", "not a JSON object", -1, 0},
    {"not_object", "[1,2,3]", "not a JSON object", -1, 0},
    {"hlen_beyond", "{}", "header length beyond the file", 1ll << 40, 0},
    {"hlen_huge", "{}", "header length beyond the file", -2, 0},
    {"unknown_dtype", "{" META "," TENS("input.0", "F8_E4M3", "[2]", 0, 2) "}", "unsupported dtype", -1, 2},
    {"shape_mismatch", "{" META "," TENS("input.0", "F32", "[3]", 0, 8) "}", "needs a different number", -1, 8},
    {"offsets_beyond", "{" META "," TENS("input.0", "F32", "[4]", 0, 16) "}", "outside the", -1, 8},
    {"huge_shape", "{" META "," TENS("input.0", "F32", "[4294967296,4294967296,16]", 0, 16) "}",
     "needs too many", -1, 16},
    {"negative_dim", "{" META "," TENS("input.0", "F32", "[-4]", 0, 16) "}", "non-negative", -1, 16},
    {"too_many_dims", "{" META "," TENS("input.0", "F32", "[1,1,1,1,1,1,1,1]", 0, 4) "}", "dims", -1, 4},
    {"no_format", "{" TENS("input.0", "F32", "[1]", 0, 4) "}", "not a tandem case", -1, 4},
    {"unknown_op", "{\"__metadata__\":{\"format\":\"tandem-case/1\",\"op\":\"conv3d\"},"
     TENS("input.0", "F32", "[1]", 0, 4) "}", "unknown op 'conv3d'", -1, 4},
    {"unknown_attr", "{\"__metadata__\":{\"format\":\"tandem-case/1\",\"op\":\"relu\","
     "\"attrs\":\"{\\\"bogus\\\":1}\"}," TENS("input.0", "F32", "[1]", 0, 4)
     "," TENS("output.0", "F64", "[1]", 4, 12) "}", "no attr 'bogus'", -1, 12},
    {"bad_attrs_json", "{\"__metadata__\":{\"format\":\"tandem-case/1\",\"op\":\"relu\","
     "\"attrs\":\"{oops\"}," TENS("input.0", "F32", "[1]", 0, 4) "}", "attrs is not a JSON object", -1, 4},
    {"odd_name", "{" META "," TENS("weights", "F32", "[1]", 0, 4) "}", "unexpected tensor 'weights'", -1, 4},
    {"no_output", "{" META "," TENS("input.0", "F32", "[1]", 0, 4) "}", "needs a floating input and output.0", -1, 4},
    {"meta_not_string", "{\"__metadata__\":{\"format\":7}}", "not a string", -1, 0},
    // safetensors' tensors tile the data exactly: no two over the same bytes, no gap, nothing after.
    {"overlapping_offsets", "{" META "," TENS("input.0", "F32", "[1]", 0, 4) ","
     TENS("output.0", "F32", "[1]", 0, 4) "}", "overlap 'input.0'", -1, 4},
    {"gap_in_data", "{" META "," TENS("input.0", "F32", "[1]", 0, 4) ","
     TENS("output.0", "F32", "[1]", 8, 12) "}", "leave bytes [4, 8) unused", -1, 12},
    {"trailing_data", "{" META "," TENS("input.0", "F32", "[1]", 0, 4) ","
     TENS("output.0", "F32", "[1]", 4, 8) "}", "end at byte 8 of the 12-byte data", -1, 12},
    // A zero-size tensor whose other dims are huge (its strides overflowed).
    {"zero_size_huge_dims", "{" META "," TENS("input.0", "F32", "[0,1099511627776,1099511627776]", 0, 0)
     "," TENS("output.0", "F32", "[0]", 0, 0) "}", "too large", -1, 0},
};

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

// Replaces the number at buf[at] (a run of digits, with its minus sign) in the header of a
// safetensors file of n bytes with `with`, moving the data and rewriting the header length.
// Returns the new size (at most cap), or n unchanged when it does not fit.
static size_t replace_number(unsigned char *buf, size_t n, size_t cap, size_t hend, size_t at,
                             const char *with) {
    size_t b = at, e = at;
    while (b > 8 && buf[b - 1] >= '0' && buf[b - 1] <= '9') b--;
    if (b > 8 && buf[b - 1] == '-') b--;
    while (e < hend && buf[e] >= '0' && buf[e] <= '9') e++;
    size_t w = strlen(with), nn = n - (e - b) + w;
    if (nn > cap) return n;
    memmove(buf + b + w, buf + e, n - e);
    memcpy(buf + b, with, w);
    uint64_t hlen = hend - 8 - (e - b) + w;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen >> (8 * i));
    return nn;
}

// ---- structured mutations: valid files with hostile shapes and attrs ------------------------
// Byte-level mutants are nearly all refused by the reader; these are rewritten from the parsed
// header and laid out again (the tensors tile the data, each keeps its old bytes as far as they
// go), so they reach the ops: zero-size tensors with huge other dims, ranks changed, shapes
// swapped between tensors, attrs set to extremes.

#define MAX_MUTANT_DATA (1u << 20)

static const double extreme_dims[] = {0, 1, 2, 3, 7, 1 << 20, 2147483648.0, 274877906944.0,
                                      1099511627776.0};
static const double extreme_attrs[] = {0, -1, 1, 2, 3, 1e9, 2147483648.0, 5e9, 1099511627776.0};

static cJSON *pick_child(cJSON *obj, uint64_t *state, bool skip_metadata) {
    int n = 0;
    for (cJSON *c = obj->child; c; c = c->next) n += !(skip_metadata && !strcmp(c->string, "__metadata__"));
    if (!n) return NULL;
    int k = (int)(xorshift(state) % (uint64_t)n);
    for (cJSON *c = obj->child; c; c = c->next)
        if (!(skip_metadata && !strcmp(c->string, "__metadata__")) && k-- == 0) return c;
    return NULL;
}

static size_t dtype_bytes(const char *dt) {
    return !strcmp(dt, "F64") || !strcmp(dt, "I64") ? 8 : !strcmp(dt, "F32") || !strcmp(dt, "I32") ? 4 : 2;
}

// Lays the tensors of `root` out again over the old data [data, data + ndata) into buf; returns
// the new size, or 0 when the mutant does not fit.
static size_t relayout(cJSON *root, const unsigned char *data, size_t ndata, unsigned char *buf,
                       size_t cap) {
    size_t at = 0;
    unsigned char *body = malloc(MAX_MUTANT_DATA);
    if (!body) return 0;
    for (cJSON *t = root->child; t; t = t->next) {
        if (!strcmp(t->string, "__metadata__")) continue;
        cJSON *dt = cJSON_GetObjectItem(t, "dtype"), *shape = cJSON_GetObjectItem(t, "shape");
        cJSON *offs = cJSON_GetObjectItem(t, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || cJSON_GetArraySize(offs) != 2) goto no;
        double bytes = (double)dtype_bytes(dt->valuestring);
        for (cJSON *d = shape->child; d; d = d->next) bytes *= d->valuedouble;
        if (bytes < 0 || bytes > MAX_MUTANT_DATA - at) goto no;
        double ob = cJSON_GetArrayItem(offs, 0)->valuedouble, oe = cJSON_GetArrayItem(offs, 1)->valuedouble;
        size_t keep = 0;
        if (ob >= 0 && oe >= ob && oe <= (double)ndata) keep = (size_t)(oe - ob) < (size_t)bytes ? (size_t)(oe - ob) : (size_t)bytes;
        if (keep) memcpy(body + at, data + (size_t)ob, keep);
        memset(body + at + keep, 0, (size_t)bytes - keep);
        cJSON_ReplaceItemInArray(offs, 0, cJSON_CreateNumber((double)at));
        cJSON_ReplaceItemInArray(offs, 1, cJSON_CreateNumber((double)at + bytes));
        at += (size_t)bytes;
    }
    char *h = cJSON_PrintUnformatted(root);
    size_t hl = h ? strlen(h) : 0, n = 8 + hl + at;
    if (!h || n > cap) {
        free(h);
        goto no;
    }
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, h, hl);
    memcpy(buf + 8 + hl, body, at);
    free(h);
    free(body);
    return n;
no:
    free(body);
    return 0;
}

// One to three structured changes to the case file in buf[0, n); n unchanged when the header
// does not parse or the mutant would not fit.
static size_t mutate_structured(unsigned char *buf, size_t n, size_t cap, uint64_t *state) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (n < 8 || hlen > n - 8) return n;
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, hlen);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return n;
    }
    for (int k = 0, nk = 1 + (int)(xorshift(state) % 3); k < nk; k++) {
        cJSON *t = pick_child(root, state, true), *shape = t ? cJSON_GetObjectItem(t, "shape") : NULL;
        int nd = cJSON_GetArraySize(shape);
        switch (xorshift(state) % 4) {
        case 0:   // a dim set to an extreme; zero-size when the data would not fit
            if (nd) {
                double v = extreme_dims[xorshift(state) % (sizeof extreme_dims / sizeof *extreme_dims)];
                cJSON_ReplaceItemInArray(shape, (int)(xorshift(state) % (uint64_t)nd), cJSON_CreateNumber(v));
                double numel = 1;
                for (cJSON *d = shape->child; d; d = d->next) numel *= d->valuedouble;
                if (numel * 8 > MAX_MUTANT_DATA / 4)
                    cJSON_ReplaceItemInArray(shape, (int)(xorshift(state) % (uint64_t)nd), cJSON_CreateNumber(0));
            }
            break;
        case 1:   // the rank: a dim of 1 added, or the last dim dropped
            if (shape && (xorshift(state) % 2 || !nd)) cJSON_AddItemToArray(shape, cJSON_CreateNumber(1));
            else if (shape) cJSON_DeleteItemFromArray(shape, nd - 1);
            break;
        case 2: {   // two tensors swap shapes
            cJSON *u = pick_child(root, state, true), *us = u ? cJSON_GetObjectItem(u, "shape") : NULL;
            if (shape && us && u != t) {
                cJSON *a = cJSON_Duplicate(shape, true), *b = cJSON_Duplicate(us, true);
                cJSON_ReplaceItemInObject(t, "shape", b);
                cJSON_ReplaceItemInObject(u, "shape", a);
            }
            break;
        }
        default: {   // an attr (or one entry of a list attr) set to an extreme
            cJSON *meta = cJSON_GetObjectItem(root, "__metadata__");
            cJSON *as = meta ? cJSON_GetObjectItem(meta, "attrs") : NULL;
            cJSON *attrs = cJSON_IsString(as) ? cJSON_Parse(as->valuestring) : NULL;
            cJSON *a = cJSON_IsObject(attrs) ? pick_child(attrs, state, false) : NULL;
            double v = extreme_attrs[xorshift(state) % (sizeof extreme_attrs / sizeof *extreme_attrs)];
            if (a && cJSON_IsArray(a) && cJSON_GetArraySize(a))
                cJSON_ReplaceItemInArray(a, (int)(xorshift(state) % (uint64_t)cJSON_GetArraySize(a)),
                                         cJSON_CreateNumber(v));
            else if (a)
                cJSON_ReplaceItemInObject(attrs, a->string, cJSON_CreateNumber(v));
            char *txt = a ? cJSON_PrintUnformatted(attrs) : NULL;
            if (txt) cJSON_ReplaceItemInObject(meta, "attrs", cJSON_CreateString(txt));
            free(txt);
            cJSON_Delete(attrs);
        }
        }
    }
    static unsigned char out[MAX_MUTANT_DATA + (64u << 10)];
    size_t m = relayout(root, buf + 8 + hlen, n - 8 - (size_t)hlen, out, cap < sizeof out ? cap : sizeof out);
    cJSON_Delete(root);
    if (!m) return n;
    memcpy(buf, out, m);
    return m;
}

// One seeded mutation of the case file in buf[0, n) (buf holds cap bytes); returns the new size.
static size_t mutate(unsigned char *buf, size_t n, size_t cap, uint64_t *state) {
#define RND() xorshift(state)
    // Numbers a hostile file would use: zero dims, just past INT_MAX, 2^38 and 2^40 (tensor and
    // scratch caps), past 2^53, negative.
    static const char *extreme[] = {"0", "2147483648", "5000000000", "274877906944",
                                    "1099511627776", "9007199254740993", "-1"};
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    size_t hend = 8 + (hlen < n - 8 ? hlen : n - 8);
    switch (RND() % 8) {
    case 0:   // flip bytes in the header
        for (int k = 0; k < 1 + (int)(RND() % 4); k++) {
            size_t at = 8 + RND() % (hend - 8);
            buf[at] ^= (unsigned char)(1u << (RND() % 8));
        }
        break;
    case 1:   // truncate
        n = RND() % n;
        break;
    case 2:   // forge the header length
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)RND();
        if (RND() % 2) for (int i = 3; i < 8; i++) buf[i] = 0;
        break;
    case 3:   // change a digit in the header (shapes, offsets, attrs)
        for (int tries = 0; tries < 64; tries++) {
            size_t at = 8 + RND() % (hend - 8);
            if (buf[at] >= '0' && buf[at] <= '9') {
                buf[at] = (unsigned char)('0' + RND() % 10);
                break;
            }
        }
        break;
    case 4:   // garbage in the data (indices, targets, NaN, inf)
        for (int k = 0; k < 16 && n > hend; k++) {
            size_t at = hend + RND() % (n - hend);
            buf[at] = (unsigned char)RND();
        }
        break;
    case 5:   // a number in the header (a dim, an offset, an attr) replaced by an extreme one
        for (int tries = 0; tries < 64; tries++) {
            size_t at = 8 + RND() % (hend - 8);
            if (buf[at] >= '0' && buf[at] <= '9') {
                n = replace_number(buf, n, cap, hend, at, extreme[RND() % (sizeof extreme / sizeof *extreme)]);
                break;
            }
        }
        break;
    case 6:   // valid files with hostile shapes and attrs
        n = mutate_structured(buf, n, cap, state);
        break;
    default:  // a random byte anywhere
    {
        size_t at = RND() % n;
        buf[at] = (unsigned char)RND();
    }
    }
    return n;
#undef RND
}

static long run_mutant(const char *path) {
    tdm_case *c = tdm_case_load(path);
    if (!c) {
        CHECK_MSG(strlen(tdm_last_error()) > 0, "refused without a message: %s", path);
        return 0;
    }
    tdm_case_result r;
    tdm_case_report rep;
    if (tdm_case_run(c, TDM_CPU, &r) == TDM_OK) {
        (void)tdm_case_compare(c, &r, TDM_CPU, &rep);
        tdm_case_result_free(&r);
    } else {
        CHECK_MSG(strlen(tdm_last_error()) > 0, "run failed without a message: %s", path);
    }
    tdm_case_free(c);
    return 1;
}

// ---- --replay: the mutants through `bench replay`, end to end ------------------------------

#define REPLAY_BATCH 16
#define FUZZ_MAX_ALLOC_BYTES "268435456"   // 256 MiB: the golden cases need a few MiB
#define REPLAY_DEADLINE_S 120

static bool read_file(const char *path, unsigned char *buf, size_t cap, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    *n = fread(buf, 1, cap, f);
    fclose(f);
    return *n > 8;
}

// Runs argv (argv[0] a path) with stdout and stderr into `log`; the exit status, or -signal, or
// -1000 when it ran past the deadline (then killed).
static int run_logged(char *const *argv, const char *log) {
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (!f || dup2(fileno(stdout), 2) < 0) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid < 0) return -2000;
    time_t end = time(NULL) + REPLAY_DEADLINE_S;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (time(NULL) > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1000;
        }
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

// A sanitizer's report in the log ("runtime error:" is UBSan's, even when it recovers).
static bool log_has_report(const char *log, char *line, size_t n) {
    FILE *f = fopen(log, "r");
    bool found = false;
    while (f && !found && fgets(line, (int)n, f))
        found = strstr(line, "runtime error:") || strstr(line, "Sanitizer");
    if (f) fclose(f);
    return found;
}

static int fuzz_replay(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: test_fuzz --replay BENCH OUTDIR MUTANTS SEED CASE_FILE...\n");
        return 2;
    }
    // A mutant may ask for any size up to the cap and the machine's memory (a sum over the zero
    // dim of (3, 2^31, 0) makes 2^31 outputs: 16 GiB of scratch, a minute under ASan); a lower cap
    // keeps every run small and quick, and still shows how each refusal is handled.
    setenv("TANDEM_MAX_ALLOC_BYTES", FUZZ_MAX_ALLOC_BYTES, 0);
    const char *bench = argv[2], *dir = argv[3];
    long total = atol(argv[4]);
    uint64_t state = 0x9e3779b97f4a7c15ull ^ (uint64_t)atoll(argv[5]) * 0x2545f4914f6cdd1dull;
    if (!state) state = 1;
    char actual[1200], log[1200], path[REPLAY_BATCH][1200];
    snprintf(actual, sizeof actual, "%s/actual", dir);
    snprintf(log, sizeof log, "%s/replay.log", dir);
    mkdir(dir, 0755);
    mkdir(actual, 0755);
    static unsigned char buf[2 << 20];
    long by_status[3] = {0}, batches = 0;
    for (long first = 0; first < total && !check_failures; first += REPLAY_BATCH, batches++) {
        char *args[6 + REPLAY_BATCH] = {(char *)bench, "replay", "--quiet", "--write-actual", actual};
        int na = 5, m = 0;
        for (long it = first; it < total && m < REPLAY_BATCH; it++, m++) {
            const char *src = argv[6 + it % (argc - 6)];
            size_t n;
            if (!read_file(src, buf, sizeof buf / 2, &n)) {
                CHECK_MSG(0, "cannot read %s", src);
                return 1;
            }
            n = mutate(buf, n, sizeof buf, &state);
            snprintf(path[m], sizeof path[m], "%s/m%02d.safetensors", dir, m);
            write_file(path[m], buf, n);
            args[na++] = path[m];
        }
        args[na] = NULL;
        int rc = run_logged(args, log);
        char line[512] = "";
        bool report = log_has_report(log, line, sizeof line);
        if (rc >= 0 && rc <= 2 && !report) {
            by_status[rc]++;
            continue;
        }
        char keep[1300], cmd[4 * 1300 + 64];
        snprintf(keep, sizeof keep, "%s/failed-%ld", dir, first);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s'/m*.safetensors '%s' '%s'/",
                 keep, keep, dir, log, keep);
        CHECK_MSG(system(cmd) == 0, "cannot keep the batch in %s", keep);
        CHECK_MSG(0, "mutants %ld-%ld: %s%s (kept in %s)", first, first + m - 1,
                  rc == -1000 ? "a hang: killed after the deadline"
                  : rc < 0    ? "killed by a signal"
                  : report    ? "a sanitizer report: "
                              : "an exit status other than 0, 1 or 2",
                  report ? line : "", keep);
    }
    printf("test_fuzz --replay: %ld mutants in %ld runs of bench replay: %ld exited 0, %ld exited "
           "1, %ld exited 2\n", total, batches, by_status[0], by_status[1], by_status[2]);
    CHECK_DONE("test_fuzz --replay");
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--replay")) return fuzz_replay(argc, argv);
    setenv("TANDEM_MAX_ALLOC_BYTES", FUZZ_MAX_ALLOC_BYTES, 0);   // as --replay: small and quick
    if (argc < 4) {
        fprintf(stderr, "usage: test_fuzz OUTDIR ITERATIONS CASE_FILE...\n");
        return 2;
    }
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/hostile", argv[1]);
    mkdir(argv[1], 0755);
    mkdir(dir, 0755);
    static unsigned char buf[1 << 20];
    for (size_t i = 0; i < sizeof crafted / sizeof *crafted; i++) {
        size_t hl = strlen(crafted[i].header);
        uint64_t field = crafted[i].hlen == -1 ? hl : crafted[i].hlen == -2 ? UINT64_MAX : (uint64_t)crafted[i].hlen;
        size_t n = make_st(buf, crafted[i].header, field, crafted[i].ndata);
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, crafted[i].name);
        write_file(path, buf, n);
        tdm_case *c = tdm_case_load(path);
        CHECK_MSG(!c && strstr(tdm_last_error(), crafted[i].expect), "%s: got '%s'", crafted[i].name,
                  c ? "(loaded)" : tdm_last_error());
        tdm_case_free(c);
    }
    // PyTorch's own argument forms load: inplace=False, and an unused argument given as None.
    {
        const char *ok_header = "{\"__metadata__\":{\"format\":\"tandem-case/1\",\"op\":\"relu\","
            "\"attrs\":\"{\\\"inplace\\\":false,\\\"size_average\\\":null}\"},"
            TENS("input.0", "F32", "[1]", 0, 4) "," TENS("output.0", "F64", "[1]", 4, 12) "}";
        size_t n = make_st(buf, ok_header, strlen(ok_header), 12);
        snprintf(path, sizeof path, "%s/../torch_forms.safetensors", dir);
        write_file(path, buf, n);
        tdm_case *c = tdm_case_load(path);
        CHECK_MSG(c, "inplace=false / None attrs refused: %s", tdm_last_error());
        tdm_case_free(c);
    }
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    write_file(path, "", 0);
    CHECK(!tdm_case_load(path) && strstr(tdm_last_error(), "truncated"));
    snprintf(path, sizeof path, "%s/missing.safetensors", argv[1]);
    CHECK(!tdm_case_load(path) && tdm_last_status() == TDM_ERR_IO);

    // The seeded mutation loop.
    long iters = atol(argv[2]), loaded = 0;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    snprintf(path, sizeof path, "%s/mutant.safetensors", argv[1]);
    for (long it = 0; it < iters; it++) {
        const char *src = argv[3 + it % (argc - 3)];
        FILE *f = fopen(src, "rb");
        if (!f) {
            CHECK_MSG(0, "cannot read %s", src);
            break;
        }
        size_t n = fread(buf, 1, sizeof buf - 64, f);   // room for a longer number
        fclose(f);
        n = mutate(buf, n, sizeof buf, &state);
        write_file(path, buf, n);
        loaded += run_mutant(path);
    }
    printf("test_fuzz: %zu crafted files refused, %ld mutants (%ld loaded and ran)\n",
           sizeof crafted / sizeof *crafted + 1, iters, loaded);
    CHECK_DONE("test_fuzz");
}
