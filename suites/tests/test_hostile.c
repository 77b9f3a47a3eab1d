/* test_hostile.c — writes the hostile inputs of issue 15 for the CLI tests of hostile.cmake: each
 * file is one defect `bench` once mishandled (a crash under ASan/UBSan, a wrong verdict, a garbled
 * message), and the test that replays or trains on it says what `bench` must do instead.
 * usage: test_hostile OUTDIR CASE_FILE
 *   CASE_FILE: a golden case with two differentiable inputs (mul-f32-bcast), the base of
 *   misshaped_output.safetensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "case.h"
#include "check.h"
#include "random.h"
#include "write_st.h"

#define META(op, attrs) "\"__metadata__\":{\"format\":\"tandem-case/1\",\"op\":\"" op "\"" attrs "}"
#define TENS(name, dt, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_hostile OUTDIR CASE_FILE\n");
        return 2;
    }
    const char *dir = argv[1];
    mkdir(dir, 0755);

    // Defect 7: two tensors over the same bytes. safetensors requires the tensors to tile the
    // data exactly; the reader accepted it and the case passed.
    write_st(dir, "overlapping_offsets.safetensors",
             "{" META("relu", "") "," TENS("input.0", "F32", "[1]", 0, 4) ","
             TENS("output.0", "F32", "[1]", 0, 4) "}", NULL, 4);

    // Defect 4: a zero-size tensor whose other dims are huge: its strides overflowed (UBSan), and
    // the release build passed the case (worst output.0[-1]).
    write_st(dir, "zero_size_huge_dims.safetensors",
             "{" META("relu", "") "," TENS("input.0", "F32", "[0,1099511627776,1099511627776]", 0, 0)
             "," TENS("output.0", "F32", "[0,1099511627776,1099511627776]", 0, 0) "}", NULL, 0);

    // Defect 8: one integer attr above INT_MAX was converted to int unchecked (-2147483648).
    write_st(dir, "int_attr_over_int_max.safetensors",
             "{" META("max_pool2d", ",\"attrs\":\"{\\\"kernel_size\\\":2,\\\"stride\\\":5000000000}\"")
             "," TENS("input.0", "F32", "[1,1,4,4]", 0, 64) "," TENS("output.0", "F32", "[1,1,2,2]", 64, 80)
             "}", NULL, 80);

    // Defect 11: batch_norm of (0, 2^38) in f16 holds no data, but the reference's per-channel
    // scratch asked for 2 TiB per statistic (ASan: allocation-size-too-big, abort).
    write_st(dir, "batch_norm_scratch_over_cap.safetensors",
             "{" META("batch_norm", ",\"attrs\":\"{\\\"training\\\":true}\"") ","
             TENS("input.0", "F16", "[0,274877906944]", 0, 0) ","
             TENS("output.0", "F16", "[0,274877906944]", 0, 0) "}", NULL, 0);

    // Defect 11: a 4 MiB case whose broadcast add makes a 512 GiB output: under the cap, over any
    // ordinary machine's memory (ASan: out-of-memory, abort; elsewhere it may overcommit).
    write_st(dir, "add_output_over_memory.safetensors",
             "{" META("add", "") "," TENS("input.0", "F64", "[262144,1]", 0, 2097152) ","
             TENS("input.1", "F64", "[1,262144]", 2097152, 4194304) ","
             TENS("output.0", "F64", "[1]", 4194304, 4194312) "}", NULL, 4194312);

    // Found by io.fuzz_replay_end_to_end: conv2d in channels_last with a 5-D input; the permute
    // to NHWC read past its 4-entry permutation (ASan: global-buffer-overflow).
    write_st(dir, "conv2d_channels_last_5d.safetensors",
             "{" META("conv2d", ",\"attrs\":\"{\\\"memory_format\\\":\\\"channels_last\\\"}\"") ","
             TENS("input.0", "F32", "[1,1,1,2,2]", 0, 16) "," TENS("input.1", "F32", "[1,1,1,1]", 16, 20)
             "," TENS("output.0", "F32", "[1]", 20, 24) "}", NULL, 24);

    // Defect 2: training data with a label out of range, for a message that must arrive whole
    // ("step 0: cross_entropy: target 10 out of bounds ...", not "step 0: step 0: tropy: ...").
    {
        unsigned char data[48] = {0};
        data[40] = 10;   // y = [0, 10], int64 little-endian
        write_st(dir, "labels_out_of_range.safetensors",
                 "{" TENS("x", "F32", "[2,4]", 0, 32) "," TENS("y", "I64", "[2]", 32, 48) "}", data,
                 sizeof data);
    }

    // Defect 3: a real case whose output.0 has the wrong shape (flattened): the replay must name
    // output.0, not the worst of the other tensors (grad_input.1).
    tdm_case *c = tdm_case_load(argv[2]);
    CHECK_MSG(c, "%s: %s", argv[2], tdm_last_error());
    if (c) {
        int64_t n = tdm_tensor_numel(c->output[0]);
        tdm_tensor *flat = tdm_tensor_reshape(c->output[0], 1, &n);
        CHECK_MSG(flat && tdm_tensor_ndim(c->output[0]) != 1, "%s: output.0 must not be 1-D", argv[2]);
        tdm_tensor_free(c->output[0]);
        c->output[0] = flat;
        char path[1200];
        snprintf(path, sizeof path, "%s/misshaped_output.safetensors", dir);
        CHECK_MSG(tdm_random_case_save(c, path, 0, 0) == TDM_OK, "%s", tdm_last_error());
        tdm_case_free(c);
    }
    CHECK_DONE("test_hostile");
}
