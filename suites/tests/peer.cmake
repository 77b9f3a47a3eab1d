# peer.cmake — the PyTorch peer (docs/PEERS.md) end to end on the CPU: the script alone in quick mode
# against tandem's quick ops run, `bench run --peer torch` with its report, and a python without
# torch. They use Debian's PyTorch at /usr/bin/python3 (python3-torch, in .ci/deps): without it
# they FAIL, they do not skip. A few seconds in all; under ASan only bench is instrumented (the
# peer is python), so they run there too.
set(PEER_PYTHON /usr/bin/python3 CACHE FILEPATH "the python with torch the peer tests use")
set(PEER_SCRIPT ${PROJECT_SOURCE_DIR}/suites/peers/torch_peer.py)
set(PEER_TEST ${CMAKE_CURRENT_SOURCE_DIR}/test_peer.sh)
set(QUICK_RUN ${TEST_TMP}/quick_run)
if(NOT TEST harness.quick_cpu_run)
  add_test(NAME harness.quick_cpu_run COMMAND sh -c
    "rm -rf ${QUICK_RUN} && $<TARGET_FILE:bench> run --device cpu --quick --suite ops --out ${QUICK_RUN}")
  set_tests_properties(harness.quick_cpu_run PROPERTIES FIXTURES_SETUP quick_cpu_run TIMEOUT 300)
endif()
# test_run (run.cmake's) checks a results directory against docs/RESULTS_FORMAT.md.
add_test(NAME peer.script_quick_cpu COMMAND sh ${PEER_TEST} script $<TARGET_FILE:bench>
         $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/script ${QUICK_RUN})
set_tests_properties(peer.script_quick_cpu PROPERTIES FIXTURES_REQUIRED quick_cpu_run TIMEOUT 120)
add_test(NAME peer.bench_run_peer_torch COMMAND sh ${PEER_TEST} run $<TARGET_FILE:bench>
         $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/run)
add_test(NAME peer.python_without_torch COMMAND sh ${PEER_TEST} no_torch $<TARGET_FILE:bench>
         $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/no_torch)
set_tests_properties(peer.bench_run_peer_torch peer.python_without_torch PROPERTIES TIMEOUT 120)
# The cudnn suite's ids in tandem and the peer (tandem registers them in CUDA builds only).
if(TDM_CUDA)
  add_test(NAME peer.cudnn_names COMMAND sh ${PEER_TEST} cudnn_names $<TARGET_FILE:bench>
           $<TARGET_FILE:test_run> ${PEER_PYTHON} ${PEER_SCRIPT} ${TEST_TMP}/peer/cudnn_names)
  set_tests_properties(peer.cudnn_names PROPERTIES TIMEOUT 60)
endif()
