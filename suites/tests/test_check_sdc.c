/* test_check_sdc.c — the vote of `bench check`'s silent data corruption checks (harness/
 * check_sdc_judge.c, docs/CHECK.md "Silent data corruption") without a GPU: check_sdc_tally
 * against a brute-force count over seeded random groups and digests (group sizes, each digest's
 * count, the majority: more than half, or none), then the judge on planted nodes whose splits the
 * figures files of sdc_plant.py do not have — 3 of 4 (the odd one FAILs, TDM-F122), 2-2 and
 * 2-2-1 (no majority: every GPU of the model FAILs, TDM-F123), and two models side by side, each
 * voting alone.
 * usage: test_check_sdc */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"          // the tests' CHECK macros (suites/tests/check.h)
#include "harness/check/check.h"  // bench check's parts

static unsigned rng = 20261127;
static unsigned next(void) {  // xorshift32: the same planted votes every run
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static void test_tally_brute_force(void) {
    static const char *const groups[] = {"g0", "g1", "g2", "g3"};
    static const char *const digests[] = {"d0", "d1", "d2"};
    for (int round = 0; round < 500; round++) {
        int m = (int)(next() % 40);
        check_sdc_vote v[40], orig[40];
        for (int i = 0; i < m; i++) {
            v[i] = (check_sdc_vote){
                .group = (char *)groups[next() % 4], .digest = digests[next() % 3], .owner = i};
            orig[i] = v[i];
        }
        check_sdc_tally(v, m);
        for (int i = 0; i < m; i++) {
            const check_sdc_vote *x = &v[i];
            CHECK(!strcmp(x->group, orig[x->owner].group) &&
                  !strcmp(x->digest, orig[x->owner].digest));
            int size = 0, same = 0, count[3] = {0};
            for (int j = 0; j < m; j++) {
                if (strcmp(orig[j].group, x->group)) continue;
                size++;
                same += !strcmp(orig[j].digest, x->digest);
                count[orig[j].digest[1] - '0']++;
            }
            int major = -1;
            for (int d = 0; d < 3; d++)
                if (2 * count[d] > size) major = d;
            CHECK_MSG(x->size == size && x->same == same, "round %d vote %d: size %d/%d same %d/%d",
                      round, i, x->size, size, x->same, same);
            CHECK_MSG(major < 0 ? x->majority == 0 && !x->major
                                : x->majority == count[major] && x->major &&
                                      !strcmp(x->major, digests[major]),
                      "round %d vote %d: majority %d, want %d", round, i, x->majority,
                      major < 0 ? 0 : count[major]);
        }
    }
}

// A judged GPU: its name, and an sdc record with the training fingerprints f32 = DIGEST ('a'..)
// and bf16 (the same, its first digit DIGEST + 8).
static cJSON *gpu(int i, const char *name, char digest) {
    cJSON *g = cJSON_CreateObject();
    char dev[16], d[65];
    snprintf(dev, sizeof dev, "cuda:%d", i);
    memset(d, digest, 64);
    d[64] = '\0';
    cJSON_AddStringToObject(g, "device", dev);
    cJSON_AddStringToObject(g, "name", name);
    cJSON_AddBoolToObject(g, "emulated", false);
    cJSON_AddArrayToObject(g, "checks");
    cJSON *t = cJSON_AddObjectToObject(cJSON_AddObjectToObject(g, "sdc"), "sdc.train");
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "digest", d);
    cJSON_AddStringToObject(f, "build", "tandem 0.1");
    cJSON_AddStringToObject(f, "gpu", name);
    cJSON_AddStringToObject(f, "precision", "f32");
    cJSON_AddStringToObject(f, "model", "gpt:L2-H2-D32-T16-V67");
    cJSON_AddNumberToObject(f, "steps", 50);
    cJSON *fps = cJSON_AddArrayToObject(t, "fingerprints");
    cJSON_AddItemToArray(fps, f);
    // the check trains bf16 too (a record without it is not the check's: not run); its digest
    // another letter's, so that it votes as the f32 one does
    cJSON *b = cJSON_Duplicate(f, true);
    cJSON_ReplaceItemInObject(b, "precision", cJSON_CreateString("bf16"));
    d[0] = (char)(digest + 8);
    cJSON_ReplaceItemInObject(b, "digest", cJSON_CreateString(d));
    cJSON_AddItemToArray(fps, b);
    return g;
}

// The verdict and code of GPU g's sdc.train line ("" when it has none).
static const char *verdict(const cJSON *g, const char **code) {
    const cJSON *c;
    *code = "";
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g, "checks")) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "check")), "sdc.train")) continue;
        const cJSON *k = cJSON_GetObjectItem(c, "code");
        *code = k ? k->valuestring : "";
        return cJSON_GetStringValue(cJSON_GetObjectItem(c, "verdict"));
    }
    return "";
}

// Judges the node of n GPUs with digests DIG[i] and names (NULL: all A100s) and checks that
// each GPU's verdict is WANT[i]: 'P' PASS, 'D' FAIL TDM-F122, 'N' FAIL TDM-F123.
static void node(const char *dig, const char *const *names, const char *want) {
    int n = (int)strlen(dig);
    cJSON *gp[8];
    for (int i = 0; i < n; i++) gp[i] = gpu(i, names ? names[i] : "NVIDIA A100-SXM4-80GB", dig[i]);
    check_sdc_judge(gp, n, 3);
    for (int i = 0; i < n; i++) {
        const char *code, *v = verdict(gp[i], &code);
        bool ok = want[i] == 'P'   ? !strcmp(v, CHECK_PASS)
                  : want[i] == 'D' ? !strcmp(v, CHECK_FAIL) && !strcmp(code, "TDM-F122")
                                   : !strcmp(v, CHECK_FAIL) && !strcmp(code, "TDM-F123");
        CHECK_MSG(ok, "digests %s, GPU %d: %s %s, want %c", dig, i, v, code, want[i]);
        cJSON_Delete(gp[i]);
    }
}

int main(void) {
    test_tally_brute_force();
    node("aaab", NULL, "PPPD");    // 3 of 4: the odd one
    node("aabb", NULL, "NNNN");    // 2-2: no majority
    node("aabbc", NULL, "NNNNN");  // 2-2-1: none has more than half
    node("abc", NULL, "NNN");      // all differ
    node("a", NULL, "P");          // alone: recorded for the fleet
    static const char *const two_models[] = {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3",
                                             "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3",
                                             "NVIDIA A100-SXM4-80GB"};
    node("abaca", two_models, "PNPNP");  // A100s agree (a a a); the H100s (b c) disagree
    CHECK_DONE("test_check_sdc");
}
