# attention.cmake — TDM_DTYPE_BOOL and scaled_dot_product_attention beyond the golden cases
# (test_attention.c): the bool dtype (creation, copies, casts, safetensors, refusals), SDPA's
# argument errors, its semantics checked against itself (is_causal = a tril mask, bool = additive
# 0/-inf, the default scale, a fully masked row gives zeros, broadcasting, dropout from a
# generator), autograd and autocast; on cuda:0 (label gpu, exit 77 with one line without one) the
# bool copy paths, cpu = cuda, dropout under graph capture (replay k = eager step k), device errors.
tdm_test_executable(attention)
foreach(t bool errors semantics autograd)
  add_test(NAME attention.${t} COMMAND test_attention ${t} ${TEST_TMP})
endforeach()
foreach(t gpu_bool gpu_match gpu_graph gpu_errors)
  add_test(NAME attention.${t} COMMAND test_attention ${t} ${TEST_TMP})
  set_tests_properties(attention.${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()
