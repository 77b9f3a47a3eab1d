# async_checks.cmake — index checks without host synchronization (test_async_checks.c): on cuda:0
# (label gpu, exit 77 with one line without a device) bad embedding indices (also with D = 0 and
# in the backward) and a bad cross_entropy target surface at the next host wait, once, naming op,
# value and bound; on the emulated device (label emu: it counts host waits) a whole training step
# (clip_grad_norm_ included) makes no host wait before its loss is read, and a kernel publishes the device's error record only
# after its fields (the host reads it right after the claim through the emulator's atomic hook).
tdm_test_executable(async_checks)
add_test(NAME gpu.async_checks.errors COMMAND test_async_checks errors)
set_tests_properties(gpu.async_checks.errors PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
if(TDM_CUDA_EMU)
  target_compile_definitions(test_async_checks PRIVATE TDM_TEST_EMU)
  add_test(NAME emu.async_checks.no_waits COMMAND test_async_checks no_waits)
  add_test(NAME emu.async_checks.record_published_last
           COMMAND test_async_checks record_published_last)
  set_tests_properties(emu.async_checks.no_waits emu.async_checks.record_published_last
                       PROPERTIES LABELS emu)
endif()
