/* test_hostile36.c — writes the crafted case files of issue 36's hostile-input findings for
 * hostile36.cmake: each is a few hundred bytes that `bench replay` once mishandled (a read past a
 * bound's scratch, a case that asked for gigabytes or hours), and the test that replays it says
 * what bench must do instead.
 * usage: test_hostile36 OUTDIR */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "write_st.h"

#define META(op) "\"__metadata__\":{\"format\":\"tandem-case/1\",\"op\":\"" op "\"}"
#define TENS(name, shape, b, e) \
    "\"" name "\":{\"dtype\":\"F32\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_hostile36 OUTDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    mkdir(dir, 0755);

    // Item 1: linear_gelu_linear with an input width of 0: x (2,0), w1 (5,0), b1 (5) zeros,
    // w2 (3,5) all 0.25, b2 (3) 0.5. P = b1 = 0, H = gelu(0) = 0, so y = b2 = 0.5 everywhere;
    // backward from gy = 1: gb2 = 2 (the two rows), gw2 = gy^T H = 0, GP = (gy w2) gelu'(0) =
    // 0.75 * 0.5, gb1 = the two rows' sum = 0.75; gx (2,0) and gw1 (5,0) hold nothing. The bound
    // took rows from x's numel / width (0) and read the output's 2 rows past its scratch.
    {
        float d[64], *p = d;
        float *b1 = p; p += 5;
        float *w2 = p; p += 15;
        float *b2 = p; p += 3;
        float *y = p; p += 6;
        float *gy = p; p += 6;
        float *gb1 = p; p += 5;
        float *gw2 = p; p += 15;
        float *gb2 = p; p += 3;
        for (int i = 0; i < 5; i++) b1[i] = 0, gb1[i] = 0.75f;
        for (int i = 0; i < 15; i++) w2[i] = 0.25f, gw2[i] = 0;
        for (int i = 0; i < 3; i++) b2[i] = 0.5f, gb2[i] = 2;
        for (int i = 0; i < 6; i++) y[i] = 0.5f, gy[i] = 1;
        CHECK(p - d == 58);
        // offsets in bytes: b1 0-20, w2 20-80, b2 80-92, y 92-116, gy 116-140, gb1 140-160,
        // gw2 160-220, gb2 220-232; the empty tensors at 232
        write_st(dir, "lgl_zero_width.safetensors",
                 "{" META("linear_gelu_linear") "," TENS("input.0", "[2,0]", 0, 0) ","
                 TENS("input.1", "[5,0]", 0, 0) "," TENS("input.2", "[5]", 0, 20) ","
                 TENS("input.3", "[3,5]", 20, 80) "," TENS("input.4", "[3]", 80, 92) ","
                 TENS("output.0", "[2,3]", 92, 116) "}", d, 116);
        write_st(dir, "lgl_zero_width_grad.safetensors",
                 "{" META("linear_gelu_linear") "," TENS("input.0", "[2,0]", 0, 0) ","
                 TENS("input.1", "[5,0]", 0, 0) "," TENS("input.2", "[5]", 0, 20) ","
                 TENS("input.3", "[3,5]", 20, 80) "," TENS("input.4", "[3]", 80, 92) ","
                 TENS("output.0", "[2,3]", 92, 116) "," TENS("grad_output.0", "[2,3]", 116, 140)
                 "," TENS("grad_input.0", "[2,0]", 232, 232) ","
                 TENS("grad_input.1", "[5,0]", 232, 232) "," TENS("grad_input.2", "[5]", 140, 160)
                 "," TENS("grad_input.3", "[3,5]", 160, 220) ","
                 TENS("grad_input.4", "[3]", 220, 232) "}", d, 232);
    }

    // Item 4: attention over tensors with no data. q (1,1,0), k and v (1,1e9,0): nothing to
    // read, but the bound's rows of 1e9 keys reached 15 GB; L = S = 200,000 with E = 0: 4e10
    // weights, past a minute. Both are a few hundred bytes.
    write_st(dir, "sdpa_no_data_huge_keys.safetensors",
             "{" META("scaled_dot_product_attention") "," TENS("input.0", "[1,1,0]", 0, 0) ","
             TENS("input.1", "[1,1000000000,0]", 0, 0) ","
             TENS("input.2", "[1,1000000000,0]", 0, 0) "," TENS("output.0", "[1,1,0]", 0, 0) "}",
             NULL, 0);
    write_st(dir, "sdpa_no_data_long.safetensors",
             "{" META("scaled_dot_product_attention") "," TENS("input.0", "[1,200000,0]", 0, 0)
             "," TENS("input.1", "[1,200000,0]", 0, 0) "," TENS("input.2", "[1,200000,0]", 0, 0)
             "," TENS("output.0", "[1,200000,0]", 0, 0) "}", NULL, 0);
    // ... and a small one of the same kind still runs: q (1,4,0), k (1,3,0), v (1,3,2) = 1 and
    // 2 per row: every score is 0, so each output row is v's mean, (1, 2).
    {
        const float v[6] = {1, 2, 1, 2, 1, 2}, y[8] = {1, 2, 1, 2, 1, 2, 1, 2};
        float d[14];
        memcpy(d, v, sizeof v);
        memcpy(d + 6, y, sizeof y);
        write_st(dir, "sdpa_no_data_small.safetensors",
                 "{" META("scaled_dot_product_attention") "," TENS("input.0", "[1,4,0]", 0, 0)
                 "," TENS("input.1", "[1,3,0]", 0, 0) "," TENS("input.2", "[1,3,2]", 0, 24) ","
                 TENS("output.0", "[1,4,2]", 24, 56) "}", d, sizeof d);
    }
    // Item 5: a state dict for mlp:4-2 with one name the model does not have (a typo): --init
    // loaded the others and ignored it.
    {
        float d[11] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.0f, 0.0f, 1.0f};
        write_st(dir, "init_unknown_name.safetensors",
                 "{" TENS("0.weight", "[2,4]", 0, 32) "," TENS("0.bias", "[2]", 32, 40) ","
                 TENS("0.wieght", "[1]", 40, 44) "}", d, sizeof d);
    }
    return check_failures ? 1 : 0;
}
