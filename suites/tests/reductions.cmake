# reductions.cmake — the `reductions` suite (suites/bench/reductions.c): `bench list` shows it and
# its six benchmarks; a cpu run skips it with its reason; on cuda:0 (label gpu, exit 77 with one
# line without a device; on the emulated device its figures are labelled EMULATED) a quick run
# times and checks every benchmark and the report has its ratio rows.
add_test(NAME reductions.list COMMAND sh -c
  "out=$($<TARGET_FILE:bench> list --suite reductions) || exit 1; echo \"$out\"; for b in copy_d2d bias_grad_nchw bias_grad_nhwc batch_norm2d_fwd batch_norm2d_bwd batch_norm1d_fwd; do echo \"$out\" | grep -q \"$b\" || exit 1; done")
add_test(NAME reductions.cpu_skips COMMAND sh -c
  "$<TARGET_FILE:bench> run --device cpu --quick --suite reductions --out ${TEST_TMP}/run-reductions-cpu 2>&1 | grep -q 'skipping suite reductions'")
add_test(NAME gpu.bench.reductions_quick COMMAND sh -c
  "out=$($<TARGET_FILE:bench> conform --device cuda:0 --cases 0 2>&1); case \"$out\" in *'no CUDA device'*|*'no CUDA backend'*) echo \"SKIP: $(echo \"$out\" | head -n1)\"; exit 77;; esac; d=${TEST_TMP}/run-reductions-cuda0; rm -rf $d; $<TARGET_FILE:bench> run --device cuda:0 --quick --suite reductions --repetitions 1 --min-time 0.001 --out $d || exit 1; $<TARGET_FILE:bench> report $d >/dev/null || exit 1; grep -q 'fwd / copy' $d/report.md")
set_tests_properties(gpu.bench.reductions_quick PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
