# nvml.cmake — how the CUDA backend reads a GPU's temperature through NVML
# (kernels/cuda_backend.cu, NVML opened at run time): nvmlDeviceGetTemperatureV, whose struct and
# version it fills as NVML wants, and the deprecated nvmlDeviceGetTemperature only from a driver
# without the V form. On the emulated device (label emu), `bench env --json` against a stand-in
# libnvidia-ml.so.1 (fake_nvml.c) found first on LD_LIBRARY_PATH: 61 C from the V form when the
# library has it, 17 C from the old one when it has only that.
if(TDM_CUDA_EMU)
  foreach(kind v old)
    add_library(fake_nvml_${kind} SHARED fake_nvml.c)
    set_target_properties(fake_nvml_${kind} PROPERTIES OUTPUT_NAME nvidia-ml SOVERSION 1
                          LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_${kind})
    add_dependencies(bench fake_nvml_${kind})
  endforeach()
  target_compile_definitions(fake_nvml_v PRIVATE FAKE_NVML_V)
  add_test(NAME emu.nvml.temperature_v COMMAND sh -c
    "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v $<TARGET_FILE:bench> env --json")
  add_test(NAME emu.nvml.temperature_old_driver COMMAND sh -c
    "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_old $<TARGET_FILE:bench> env --json")
  set_tests_properties(emu.nvml.temperature_v PROPERTIES LABELS emu
                       PASS_REGULAR_EXPRESSION "\"temperature_c\":[ \t]*61[,\n]")
  set_tests_properties(emu.nvml.temperature_old_driver PROPERTIES LABELS emu
                       PASS_REGULAR_EXPRESSION "\"temperature_c\":[ \t]*17[,\n]")
endif()
