# pipeline_data.cmake — the pipeline suite draws each dataset once per process (issue 32 item 2):
# Google Benchmark calls each benchmark function many times (warm-up, sizing, 3 repetitions), and
# the counter dataset_drawn (pipeline.json) is 1 only in the call that drew it: at most one draw
# per dataset shape (the MLP's and the GPT's) over all the calls of all the benchmarks, so at most
# 2 of the recorded repetitions (before the fix, every one).
set(PD_DIR ${TEST_TMP}/pipeline-data)
add_test(NAME pipeline.dataset_drawn_once COMMAND sh -c
  "rm -rf ${PD_DIR} && $<TARGET_FILE:bench> run --device cpu --quick --suite pipeline --filter 'load_sync|load_prefetch' --repetitions 3 --min-time 0.01 --out ${PD_DIR} >/dev/null || exit 1; calls=$(grep -c '\"dataset_drawn\"' ${PD_DIR}/pipeline.json); drawn=$(grep -c '\"dataset_drawn\": 1' ${PD_DIR}/pipeline.json); echo \"$calls entries, $drawn of them drew a dataset\"; [ $calls -ge 6 ] && [ $drawn -le 2 ]")
set_tests_properties(pipeline.dataset_drawn_once PROPERTIES TIMEOUT 300)
