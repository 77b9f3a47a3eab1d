# report.cmake — `bench plot` and `bench report` (test_report.c): on a real `bench run --device cpu
# --quick --suite ops` (the quick_cpu_run fixture) every metric of every suite gets a PNG and an
# SVG, report.html shows every figure it lists and each exists, two runs go side by side; and on
# hand-made directories: a sweep over sizes (lines), bad input exits 2 with a message, markup in
# results is escaped, a missing or failing gnuplot is reported; a run on the emulated CUDA device
# (emulated.cmake's emulated_run fixture) gets the banner, and emulated in every caption and title.
set(QUICK_RUN ${TEST_TMP}/quick_run)
if(NOT TEST harness.quick_cpu_run)
  add_test(NAME harness.quick_cpu_run COMMAND sh -c
    "rm -rf ${QUICK_RUN} && $<TARGET_FILE:bench> run --device cpu --quick --suite ops --out ${QUICK_RUN}")
  set_tests_properties(harness.quick_cpu_run PROPERTIES FIXTURES_SETUP quick_cpu_run TIMEOUT 300)
endif()

tdm_test_executable(report)
target_sources(test_report PRIVATE ${PROJECT_SOURCE_DIR}/harness/fileio.c
                                   ${PROJECT_SOURCE_DIR}/harness/json_strict.c)
set(RPT ${TEST_TMP}/report)
set(RPT_BENCH $<TARGET_FILE:bench>)
add_test(NAME report.plot_quick_run COMMAND test_report plot ${RPT_BENCH} ${RPT}/plot ${QUICK_RUN})
add_test(NAME report.report_quick_run COMMAND test_report report ${RPT_BENCH} ${RPT}/report ${QUICK_RUN})
add_test(NAME report.side_by_side COMMAND test_report side ${RPT_BENCH} ${RPT}/side ${QUICK_RUN})
# plot and report both write DIR/plots: one at a time.
set_tests_properties(report.plot_quick_run report.report_quick_run report.side_by_side PROPERTIES
  FIXTURES_REQUIRED quick_cpu_run RESOURCE_LOCK quick_run TIMEOUT 120)
add_test(NAME report.bad_input_exits_2 COMMAND test_report bad ${RPT_BENCH} ${RPT}/bad)
add_test(NAME report.escaping_and_no_gnuplot COMMAND test_report hostile ${RPT_BENCH} ${RPT}/hostile)
set_tests_properties(report.bad_input_exits_2 report.escaping_and_no_gnuplot PROPERTIES
  TIMEOUT 120)
add_test(NAME report.emulated_banner COMMAND test_report emulated ${RPT_BENCH} ${RPT}/emulated
  ${TEST_TMP}/emulated/emu)
set_tests_properties(report.emulated_banner PROPERTIES FIXTURES_REQUIRED emulated_run TIMEOUT 120)

# Google Benchmark's build type (issue 32): when the suite JSON's context says the library is a
# debug build (Debian's libbenchmark), report.md and report.html say what that means for the
# figures beside the machine's context; with a release library they say nothing of it.
add_test(NAME report.gbench_build_type_explained COMMAND sh -c
  "d=${TEST_TMP}/gbench_build; rm -rf $d && cp -r ${QUICK_RUN} $d && rm -f $d/report.* && $<TARGET_FILE:bench> report --no-plots $d >/dev/null || exit 1; if grep -q '\"library_build_type\": \"debug\"' $d/ops.json; then grep -q 'built as a debug library.*per iteration' $d/report.md && grep -q 'id=\"gbench-debug\"' $d/report.html || { echo 'debug library not explained'; exit 1; }; sed -i 's/\"library_build_type\": \"debug\"/\"library_build_type\": \"release\"/' $d/ops.json; $<TARGET_FILE:bench> report --no-plots $d >/dev/null || exit 1; fi; ! grep -q 'built as a debug library' $d/report.md || { echo 'a release library explained as debug'; exit 1; }")
set_tests_properties(report.gbench_build_type_explained PROPERTIES FIXTURES_REQUIRED quick_cpu_run)
