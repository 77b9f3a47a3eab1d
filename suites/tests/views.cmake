# views.cmake — the views and joins (view, transpose, contiguous, narrow, split, chunk, cat,
# stack) and the ops with a Python number (add/sub/rsub/mul/div/rdiv _scalar), test_views.c:
# values, shapes and PyTorch's type promotion on the cpu and on cuda:0, every error message,
# gradients through each; on cuda:0 (label gpu, exit 77 without one) a captured step of them
# replays bit for bit as eager, and on the emulated device (label emu: it counts host waits) a
# forward and backward of them makes no host wait.
tdm_test_executable(views)
add_test(NAME views.values COMMAND test_views values cpu)
add_test(NAME views.errors COMMAND test_views errors)
add_test(NAME views.autograd COMMAND test_views autograd cpu)
foreach(t values autograd)
  add_test(NAME gpu.views.${t} COMMAND test_views ${t} cuda:0)
endforeach()
# "graph" in its name: the emu-nocache preset leaves it out (capture needs the caching allocator)
add_test(NAME gpu.views.graph_capture COMMAND test_views capture)
set_tests_properties(gpu.views.values gpu.views.autograd gpu.views.graph_capture
                     PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
if(TDM_CUDA_EMU)
  target_compile_definitions(test_views PRIVATE TDM_TEST_EMU)
  add_test(NAME emu.views.no_waits COMMAND test_views no_waits)
  set_tests_properties(emu.views.no_waits PROPERTIES LABELS emu)
endif()
