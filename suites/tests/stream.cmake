# stream.cmake — streams, events, pinned host memory, async copies (test_stream.c): the cpu
# meanings and errors, the loader's pin_memory, the caching pinned-host allocator over mocks; on
# cuda:0 (label gpu, exit 77 = SKIP without a device) a pinned round trip and the reuse rule.
tdm_test_executable(stream)
foreach(t streams events pinned copies loader host_allocator)
  add_test(NAME stream.${t} COMMAND test_stream ${t})
endforeach()
set_tests_properties(stream.loader PROPERTIES TIMEOUT 60)
foreach(t gpu_copy gpu_host_reuse gpu_loader)
  add_test(NAME stream.${t} COMMAND test_stream ${t})
  set_tests_properties(stream.${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()

# The transfer and pipeline suites on the cpu, filtered to a few sizes: CSV rows with GB/s and
# samples/s, busy_share in the JSON, the results directory as docs/RESULTS_FORMAT.md says.
set(TP ${TEST_TMP}/transfer_pipeline)
add_test(NAME run.transfer_pipeline_cpu COMMAND sh -c
  "rm -rf ${TP} && $<TARGET_FILE:bench> run --device cpu --quick --suite transfer,pipeline --filter 'bytes:(1024|4194304)/|workers:[02]' --out ${TP} >/dev/null && $<TARGET_FILE:test_run> ${TP} complete 3 && grep -q '^transfer,h2d_pinned,bytes:4194304,4194304,GB/s,GB/s,' ${TP}/transfer.csv && grep -q '^transfer,d2d,bytes:1024,1024,GB/s,GB/s,' ${TP}/transfer.csv && grep -q '^pipeline,load_prefetch,workers:2,2,samples/s,samples/s,' ${TP}/pipeline.csv && grep -q '\"busy_share\"' ${TP}/pipeline.json")
set_tests_properties(run.transfer_pipeline_cpu PROPERTIES TIMEOUT 120)
# bench list: the cpu forms (no pinned pipeline, no async transfer on the cpu)
add_test(NAME run.list_transfer_pipeline COMMAND sh -c
  "out=$($<TARGET_FILE:bench> list --suite transfer,pipeline) || exit 1; echo \"$out\" | grep -Eq 'h2d_pinned +GB/s' && echo \"$out\" | grep -q 'load_prefetch samples/s' && ! echo \"$out\" | grep -q 'load_pinned' && ! echo \"$out\" | grep -q '_async'")
