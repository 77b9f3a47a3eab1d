# pipeline_data.cmake — the pipeline suite draws each dataset once per process (issue 32 item 2):
# Google Benchmark calls each benchmark function many times (warm-up, sizing, 3 repetitions), and
# the counter dataset_draws (pipeline.json) is how many times the process has drawn a dataset of
# the row's shape: 1 in every repetition when each is drawn once and kept (it counts up when each
# call draws its own); and pipeline.json is strict JSON (pipeline_draws.py).
set(PD_DIR ${TEST_TMP}/pipeline-data)
add_test(NAME pipeline.dataset_drawn_once COMMAND sh -c
  "rm -rf ${PD_DIR} && $<TARGET_FILE:bench> run --device cpu --quick --suite pipeline --filter 'load_sync|load_prefetch' --repetitions 3 --min-time 0.01 --out ${PD_DIR} >/dev/null && /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/pipeline_draws.py ${PD_DIR}/pipeline.json")
set_tests_properties(pipeline.dataset_drawn_once PROPERTIES TIMEOUT 300)
