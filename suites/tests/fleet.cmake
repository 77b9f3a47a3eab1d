# fleet.cmake — bench check in a fleet's tools (issue 36 item 3; docs/CHECK.md "Fleet tools"):
# the Prometheus textfile (harness/check/check_prometheus.c) read back by Prometheus's own text-format
# parser (prometheus_client, Debian's python3-prometheus-client: skipped without it), and the
# Slurm prolog / health check example (suites/check/slurm/) with a stand-in scontrol and bench.
# Python with prometheus_client: the one on PATH, else the system's (Debian installs it there)
add_test(NAME check.prometheus_textfile_parses COMMAND sh -c
  "for py in python3 /usr/bin/python3; do $py -c 'import prometheus_client' 2>/dev/null && exec $py ${CMAKE_CURRENT_SOURCE_DIR}/prometheus_parse.py $<TARGET_FILE:bench> ${PROJECT_SOURCE_DIR}/suites/check/expectations.json ${CMAKE_CURRENT_SOURCE_DIR}/check ${TEST_TMP}/prometheus; done; echo 'SKIP: prometheus_client is not installed (Debian: python3-prometheus-client)'; exit 77")
set_tests_properties(check.prometheus_textfile_parses PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME check.prometheus_bad_arguments_exit_2 COMMAND sh -c
  "for a in '--format prometheus --json' '--format prometheus --write-baseline x' '--prometheus x.prom --memtest' '--prometheus' '--format xml --from-figures ${CMAKE_CURRENT_SOURCE_DIR}/check/level1-healthy.json'; do $<TARGET_FILE:bench> check $a; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $a\"; exit 1; }; done; $<TARGET_FILE:bench> check --from-figures ${CMAKE_CURRENT_SOURCE_DIR}/check/level1-healthy.json --prometheus ${TEST_TMP}/no/such/dir/x.prom; rc=$?; [ $rc -eq 1 ] || { echo \"an unwritable textfile: exit $rc, want 1\"; exit 1; }")
add_test(NAME check.slurm_example_drains_and_leaves COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/slurm_check.sh
  $<TARGET_FILE:bench> ${PROJECT_SOURCE_DIR}/suites/check/expectations.json ${CMAKE_CURRENT_SOURCE_DIR}/check
  ${PROJECT_SOURCE_DIR}/suites/check/slurm/tandem-slurm-check.sh ${TEST_TMP}/slurm)
