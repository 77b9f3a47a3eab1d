# transfer_verify.cmake — the transfer suite (suites/bench/transfer.c) checks copies in ordinary
# memory: a write-combined destination (d2h_pinned_wc) is copied through the device before the
# CPU reads it, since CPU reads of write-combined memory are uncached (tens of seconds per GiB on
# a GPU machine). On the emulated device (label emu), which counts host reads of write-combined
# memory and says so on stderr, the pinned_wc benchmarks and the bidir ones (pageable: the d2h
# from a second host thread) run and verify without such a read.
if(TDM_CUDA_EMU)
  set(TV_DIR ${TEST_TMP}/transfer-verify)
  add_test(NAME emu.transfer.no_write_combined_reads COMMAND sh -c
    "rm -rf ${TV_DIR} && $<TARGET_FILE:bench> run --device cuda:0 --quick --suite transfer --filter 'pinned_wc|bidir' --repetitions 1 --min-time 0.01 --out ${TV_DIR} 2>&1 && $<TARGET_FILE:test_run> ${TV_DIR} complete 1")
  set_tests_properties(emu.transfer.no_write_combined_reads PROPERTIES LABELS emu TIMEOUT 600
    FAIL_REGULAR_EXPRESSION "read write-combined"
    PASS_REGULAR_EXPRESSION "d2h_pinned_wc.*bidir_pageable_async.*a valid complete run")
endif()
