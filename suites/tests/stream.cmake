# stream.cmake — streams, events, pinned host memory, async copies (test_stream.c): the cpu
# meanings and errors, the loader's pin_memory, the caching pinned-host allocator over mocks; on
# cuda:0 (label gpu, exit 77 = SKIP without a device) a pinned round trip and the reuse rule.
tdm_test_executable(stream)
foreach(t streams events pinned copies loader host_allocator)
  add_test(NAME stream.${t} COMMAND test_stream ${t})
endforeach()
set_tests_properties(stream.loader PROPERTIES TIMEOUT 60)
foreach(t gpu_copy gpu_host_reuse)
  add_test(NAME stream.${t} COMMAND test_stream ${t})
  set_tests_properties(stream.${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()
