# gpu-sanitize: a target, not a test (so never part of ctest's normal run): the gpu-labelled tests
# and `bench conform --device cuda:0` under compute-sanitizer memcheck and racecheck, logs in
# <build>/gpu-sanitize/. Fails with one clear line without compute-sanitizer, CUDA backend or GPU.
if(TDM_CUDA)
  set(TDM_SANITIZE_CUDA_BIN ${CUDAToolkit_BIN_DIR})
else()
  set(TDM_SANITIZE_CUDA_BIN /usr/local/cuda/bin)
endif()
add_custom_target(gpu-sanitize
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_sanitize.sh $<TARGET_FILE:bench> ${CMAKE_BINARY_DIR}
          ${CMAKE_BINARY_DIR}/gpu-sanitize ${TDM_SANITIZE_CUDA_BIN} ${TDM_CUDA}
  DEPENDS bench
  USES_TERMINAL
  COMMENT "compute-sanitizer memcheck + racecheck over the gpu tests and bench conform on cuda:0")
