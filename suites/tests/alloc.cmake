# alloc.cmake — the CUDA backend's caching allocator, on the CPU over a mock raw allocator
# (test_caching_allocator.c), one test per behaviour; alloc.gpu.cuda0 drives cuda:0's allocator
# through tensors and skips (exit 77) without a device.
tdm_test_executable(caching_allocator)
foreach(t reuse rounding small_share split_merge streams oom_retry oom caching_off stats
          empty_cache random summary bad_free threads public_api
          private_pool pool_oom_no_release)
  add_test(NAME alloc.${t} COMMAND test_caching_allocator ${t})
endforeach()
set_tests_properties(alloc.random alloc.threads PROPERTIES TIMEOUT 60)
add_test(NAME alloc.gpu.cuda0 COMMAND test_caching_allocator gpu)
set_tests_properties(alloc.gpu.cuda0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
