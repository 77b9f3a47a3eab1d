/* test_fuzz.c — the case reader against malformed and hostile files. First a set of crafted
 * files, each of which must be refused with a one-line error naming the problem; then a seeded
 * mutation loop (byte flips, truncations, forged header lengths, digits changed in the header,
 * garbage data) over real case files: every mutant must either be refused cleanly or load and run
 * without a crash (ASan/UBSan watch this test in CI).
 * usage: test_fuzz OUTDIR ITERATIONS CASE_FILE...   (crafted files are left in OUTDIR/hostile) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
};

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
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

int main(int argc, char **argv) {
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
#define RND() xorshift(&state)
    snprintf(path, sizeof path, "%s/mutant.safetensors", argv[1]);
    for (long it = 0; it < iters; it++) {
        const char *src = argv[3 + it % (argc - 3)];
        FILE *f = fopen(src, "rb");
        if (!f) {
            CHECK_MSG(0, "cannot read %s", src);
            break;
        }
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
        size_t hend = 8 + (hlen < n - 8 ? hlen : n - 8);
        switch (RND() % 6) {
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
        default:  // a random byte anywhere
        {
            size_t at = RND() % n;
            buf[at] = (unsigned char)RND();
        }
        }
        write_file(path, buf, n);
        loaded += run_mutant(path);
    }
    printf("test_fuzz: %zu crafted files refused, %ld mutants (%ld loaded and ran)\n",
           sizeof crafted / sizeof *crafted + 1, iters, loaded);
    CHECK_DONE("test_fuzz");
}
