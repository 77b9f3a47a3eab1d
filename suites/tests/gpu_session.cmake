# gpu_session.cmake — the GPU session's scripts (.ci/gpu-session's header: first, perf, pack,
# rehearse) without a GPU. No label: the emu presets (gpu|emu) leave them out. Each skips (77)
# where nvidia-smi sees a GPU (its stages would run for real).
# `first` against this build (gpu_session_first.sh: a whole run, a task held past its limit, a run
# killed mid-stage).
add_test(NAME ci.gpu_session_first
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_session_first.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR} ${TEST_TMP}/gpu-session)
set_tests_properties(ci.gpu_session_first PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)
# `perf` against this build and planted results (gpu_session_perf.sh: its plan and the earlier run
# it compares with, a whole run, tandem/PyTorch per row in summary.json's details).
add_test(NAME ci.gpu_session_perf
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_session_perf.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR} ${TEST_TMP}/gpu-session-perf)
set_tests_properties(ci.gpu_session_perf PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# From a clone alone, on any machine: no script reads outside the repository (pack once copied the
# anchor from ../shared/) or names a path of the machine it was written on.
add_test(NAME ci.gpu_session_portable
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_session_portable.sh ${PROJECT_SOURCE_DIR})
# results/README.md's table is what .ci/results-table.py gives from the recorded results.
add_test(NAME ci.results_table
         COMMAND python3 ${PROJECT_SOURCE_DIR}/.ci/results-table.py --results ${PROJECT_SOURCE_DIR}/results
                 --check ${PROJECT_SOURCE_DIR}/results/README.md)
# The scripts of those calls, through shellcheck (warnings and errors) where it is installed.
add_test(NAME ci.gpu_session_shellcheck COMMAND sh -c
  "command -v shellcheck >/dev/null || { echo 'SKIP: no shellcheck'; exit 77; }; cd ${PROJECT_SOURCE_DIR} && shellcheck -s bash -x -S warning .ci/gpu-session .ci/gpu-first.sh .ci/gpu-rehearse.sh && shellcheck -S warning suites/tests/gpu_session_first.sh suites/tests/gpu_session_perf.sh suites/tests/gpu_session_portable.sh suites/tests/replay_output.sh")
set_tests_properties(ci.gpu_session_shellcheck PROPERTIES SKIP_RETURN_CODE 77)
