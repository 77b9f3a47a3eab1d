# bytes.cmake — one byte-counting convention per metric (issue 32; docs/RESULTS_FORMAT.md "Bytes
# and GB/s"): a copy within one memory counts the bytes read + written (GB/s), a copy across the
# link the bytes that cross it (link_GB/s); the reductions report GB/s; the PyTorch peer's
# transfer rows count the same. bytes_convention.sh says how. Seconds.
set(PEER_PYTHON /usr/bin/python3 CACHE FILEPATH "the python with torch the peer tests use")
add_test(NAME bytes.one_convention_per_metric COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/bytes_convention.sh
  $<TARGET_FILE:bench> ${TEST_TMP}/bytes ${PEER_PYTHON} ${PROJECT_SOURCE_DIR}/suites/peers/torch_peer.py)
set_tests_properties(bytes.one_convention_per_metric PROPERTIES TIMEOUT 300)
