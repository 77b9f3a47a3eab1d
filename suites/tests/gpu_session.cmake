# gpu_session.cmake — `.ci/gpu-session first`, the one call a lent GPU machine gets (.ci/gpu-session's
# header), without a GPU: its stages, time limits, summary.json and archive, against this build
# (gpu_session_first.sh: a whole run, a task held past its limit, a run killed mid-stage). No label:
# the emu presets (gpu|emu) leave it out. Skips (77) where nvidia-smi sees a GPU.
add_test(NAME ci.gpu_session_first
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_session_first.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR} ${TEST_TMP}/gpu-session)
set_tests_properties(ci.gpu_session_first PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)
# The scripts of that call, through shellcheck (warnings and errors) where it is installed.
add_test(NAME ci.gpu_session_shellcheck COMMAND sh -c
  "command -v shellcheck >/dev/null || { echo 'SKIP: no shellcheck'; exit 77; }; cd ${PROJECT_SOURCE_DIR} && shellcheck -s bash -x -S warning .ci/gpu-session .ci/gpu-first.sh .ci/gpu-rehearse.sh && shellcheck -S warning suites/tests/gpu_session_first.sh")
set_tests_properties(ci.gpu_session_shellcheck PROPERTIES SKIP_RETURN_CODE 77)
