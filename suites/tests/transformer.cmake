# transformer.cmake — the transformer suite (suites/bench/transformer.c, docs/suites/transformer.md):
# a quick run on the cpu (the tiny GPT, attention at T = 16 and 32; seconds) checked by
# test_transformer (rows, counters, the mode and fused-path labels), drawn by bench plot
# (plots/transformer.gp), its report section; a recorded skip of the unfused calls over the
# scores budget; and (label gpu) the same on cuda:0, where the fused call's peak memory must be
# below the unfused one's (on the emulated device in CI: about 15 s under the sanitizers).
tdm_test_executable(transformer)
target_sources(test_transformer PRIVATE ${PROJECT_SOURCE_DIR}/harness/fileio.c)
target_link_libraries(test_transformer PRIVATE cjson_dep)
set(TFM_TMP ${TEST_TMP}/transformer)
file(MAKE_DIRECTORY ${TFM_TMP})
set(TFM_RUN "$<TARGET_FILE:bench> run --quick --repetitions 1 --min-time 0.001 --suite transformer")

add_test(NAME transformer.cpu_quick_run COMMAND sh -c
  "d=${TFM_TMP}/cpu; rm -rf $d; out=$(${TFM_RUN} --device cpu --out $d 2>&1); rc=$?; echo \"$out\"; [ $rc = 0 ] && echo \"$out\" | grep -q 'results in .*: 24 finished, 0 failed, 0 unfinished'")
set_tests_properties(transformer.cpu_quick_run PROPERTIES FIXTURES_SETUP transformer_cpu_run TIMEOUT 120)
add_test(NAME transformer.cpu_results COMMAND test_transformer results ${TFM_TMP}/cpu cpu)
add_test(NAME transformer.plot COMMAND test_transformer plot $<TARGET_FILE:bench> ${TFM_TMP}/plots ${TFM_TMP}/cpu)
# bench report: the suite's page summary and its ratio rows (heuristic / conformance, fused /
# unfused attention, bf16 / f32)
add_test(NAME transformer.report COMMAND sh -c
  "$<TARGET_FILE:bench> report --no-plots ${TFM_TMP}/cpu >/dev/null && md=${TFM_TMP}/cpu/report.md && grep -q 'GPT-2 training as it is measured on A100' $md && grep -q 'heuristic / conformance (gpt.*tiny, bf16)' $md && grep -q 'fused / unfused (fwdbwd bf16 d16)' $md && grep -q 'bf16 / f32 (gpt.*tiny, heuristic)' $md")
set_tests_properties(transformer.cpu_results transformer.plot transformer.report PROPERTIES
  FIXTURES_REQUIRED transformer_cpu_run RESOURCE_LOCK transformer_cpu_run TIMEOUT 120)
# An unfused call over the scores budget is not run and is recorded as skipped, with the reason
# (on the cpu nothing is fused: a budget of 10000 bytes skips T = 32, whose scores take 16384)
add_test(NAME transformer.skip_recorded COMMAND sh -c
  "d=${TFM_TMP}/skip; rm -rf $d; out=$(TANDEM_BENCH_SCORES_BUDGET=10000 ${TFM_RUN} --device cpu --filter attn_fwd_bf16 --out $d 2>&1); rc=$?; echo \"$out\"; [ $rc = 0 ] && echo \"$out\" | grep -q '2 finished, 0 failed, 0 unfinished, 0 suites skipped, 2 benchmarks skipped' && grep -q '\"benchmark\":[[:space:]]*\"attn_fwd_bf16_d16_conformance/T:32\"' $d/status.json && grep -q 'over the suite.s budget' $d/status.json && TANDEM_BENCH_SCORES_BUDGET=10000 $<TARGET_FILE:bench> list --suite transformer | grep -q '(skipped attn_fwdbwd_f16_d16_conformance/T:32: unfused'")
set_tests_properties(transformer.skip_recorded PROPERTIES TIMEOUT 120)

# cuda:0 (exit 77 without a device): the same run and checks, and fused below unfused in memory
set(TFM_GPU_SKIP "out=$($<TARGET_FILE:bench> train --device cuda:0 --model mlp:4 --steps 1 --batch 2 --opt sgd --lr 0.1 2>&1) || case \"$out\" in *'no CUDA'*|*'CUDA backend'*) echo \"SKIP: $out\" | head -1; exit 77;; esac")
add_test(NAME gpu.bench.transformer_quick COMMAND sh -c
  "${TFM_GPU_SKIP}; d=${TFM_TMP}/cuda0; rm -rf $d; out=$(${TFM_RUN} --device cuda:0 --out $d 2>&1); rc=$?; echo \"$out\"; [ $rc = 0 ] && echo \"$out\" | grep -q 'results in .*: [0-9]* finished, 0 failed, 0 unfinished' && $<TARGET_FILE:test_transformer> results $d cuda")
set_tests_properties(gpu.bench.transformer_quick PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
