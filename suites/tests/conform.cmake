# conform.cmake — core's debug mode (test_debug.c) and `bench conform`, the randomized
# conformance suite (harness/cmd_conform.c, suites/conformance/random.c).
tdm_test_executable(debug)
add_test(NAME debug.poison COMMAND test_debug poison)
add_test(NAME debug.guards COMMAND test_debug guards)
add_test(NAME debug.random_case_replays COMMAND test_debug random ${TEST_TMP})

# Every op with a generator, f32/f16/bf16, 3 cases each, against the reference in f64.
add_test(NAME conform.cpu COMMAND bench conform --device cpu --cases 3 --seed 1 --quiet
                                  --failures ${TEST_TMP}/conform-cpu)
set_tests_properties(conform.cpu PROPERTIES TIMEOUT 120)

# A planted error (every expected output.0[0] moved far over its bound): conform exits 1 and
# writes the case file, and `bench replay` of that file reports FAIL and exits 1.
set(PLANT_DIR ${TEST_TMP}/conform-planted)
add_test(NAME conform.planted_failure_replays
         COMMAND sh -c "rm -rf ${PLANT_DIR}; $<TARGET_FILE:bench> conform --ops relu,matmul --dtypes f16 --cases 1 --seed 1 --plant-error --failures ${PLANT_DIR}; rc=$?; [ $rc -eq 1 ] || { echo \"conform exit $rc, expected 1\"; exit 1; }; for f in ${PLANT_DIR}/relu-f16-s1-i0.safetensors ${PLANT_DIR}/matmul-f16-s1-i0.safetensors; do out=$($<TARGET_FILE:bench> replay $f); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"replay $f exit $rc, expected 1\"; exit 1; }; echo \"$out\" | grep -q 'FAIL .*over its bound' || exit 1; done")

# Bad arguments exit 2.
add_test(NAME conform.bad_args
         COMMAND sh -c "for a in '--ops nope' '--dtypes f8' '--cases x' '--device tpu'; do $<TARGET_FILE:bench> conform $a; [ $? -eq 2 ] || exit 1; done")

# GPU: cuda:0 against the reference. Skips (exit 77) with one line when there is no CUDA device.
add_test(NAME gpu.conform.cuda0
         COMMAND sh -c "out=$($<TARGET_FILE:bench> conform --device cuda:0 --cases 0 2>&1); case \"$out\" in *'no CUDA device'*|*'no CUDA backend'*) echo \"SKIP: $(echo \"$out\" | head -n1)\"; exit 77;; esac; exec $<TARGET_FILE:bench> conform --device cuda:0 --cases 3 --seed 1 --dtypes f32,f16,bf16,f64 --quiet --failures ${TEST_TMP}/conform-cuda0")
set_tests_properties(gpu.conform.cuda0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
# Without --failures, a failing case goes to a new temporary folder named in the output
# ($TMPDIR/tandem-conform-XXXXXX), never into the working directory (it was ./conform-failures,
# and 30 such files got committed to the repository once).
set(CONF_TMP ${TEST_TMP}/conform-default-dir)
add_test(NAME conform.failures_default_to_a_temp_dir COMMAND sh -c
  "rm -rf ${CONF_TMP} && mkdir -p ${CONF_TMP}/tmp ${CONF_TMP}/cwd && cd ${CONF_TMP}/cwd && out=$(TMPDIR=${CONF_TMP}/tmp $<TARGET_FILE:bench> conform --ops relu --dtypes f16 --cases 1 --seed 1 --plant-error); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || exit 1; [ -z \"$(ls -A ${CONF_TMP}/cwd)\" ] || { echo 'wrote into the working directory'; exit 1; }; ls ${CONF_TMP}/tmp/tandem-conform-*/relu-f16-s1-i0.safetensors && echo \"$out\" | grep -q \"case file: ${CONF_TMP}/tmp/tandem-conform-\"")
