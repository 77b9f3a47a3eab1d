# diskfull.cmake — `bench run` when its files cannot be written (issue 15.1: a full disk was
# reported as a complete run). test_diskfull.c fills the "disk" without root: a limit on the size
# of any file bench writes (RLIMIT_FSIZE, SIGXFSZ ignored: write() fails with EFBIG partway, as
# with ENOSPC on a full disk), on a quick transfer run. Exit 1, status.json complete false with
# write_errors naming each lost file, every file left whole (no truncated JSON over a good
# snapshot), and bench report not saying the run completed. A few seconds each.
tdm_test_executable(diskfull)
target_sources(test_diskfull PRIVATE ${PROJECT_SOURCE_DIR}/harness/fileio.c)
set(DF ${TEST_TMP}/diskfull)
set(DF_BENCH $<TARGET_FILE:bench>)
# every results file but context.json and status.json outgrows the limit (8 KiB)
add_test(NAME diskfull.results_lost_run_fails
         COMMAND test_diskfull ${DF_BENCH} ${DF}/results results)
# only transfer.json outgrows it (32 KiB): the CSVs complete, transfer.json an older whole snapshot
add_test(NAME diskfull.json_lost_snapshot_kept
         COMMAND test_diskfull ${DF_BENCH} ${DF}/json json)
# status.json cannot be written either: said on stderr, exit 1
add_test(NAME diskfull.status_unwritable
         COMMAND test_diskfull ${DF_BENCH} ${DF}/status status)
set_tests_properties(diskfull.results_lost_run_fails diskfull.json_lost_snapshot_kept
  diskfull.status_unwritable PROPERTIES TIMEOUT 180)
