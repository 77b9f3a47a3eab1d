# build.cmake — builds users do (issue 14.5). A Release build (-O3: GCC's flow-sensitive warnings,
# maybe-uninitialized and format-overflow among them, see more there than at the presets' -O2)
# of the CPU code — the library, the conformance library, bench and the tests — builds clean with
# warnings as errors; and a build configured as a user would, without the project's presets, does
# not turn warnings into errors (another compiler or flags may warn where ours do not).
# Each configures a sub-build of this source tree under this folder. Registered in the plain build
# only: a sanitizer or emulator build would repeat the same sub-builds (CI runs them once, in the
# `test` preset). The CUDA 12 build is .ci/build-cuda12's (docs/BUILDING.md), not a test.
if(NOT TDM_SANITIZE AND NOT TDM_CUDA_EMU)
  set(TDM_SUBBUILD_ARGS "-G '${CMAKE_GENERATOR}' -DCMAKE_C_COMPILER='${CMAKE_C_COMPILER}' -DCMAKE_CXX_COMPILER='${CMAKE_CXX_COMPILER}'")

  set(dir ${CMAKE_CURRENT_BINARY_DIR}/build-release)
  add_test(NAME build.release_clean COMMAND sh -c
    "'${CMAKE_COMMAND}' -S '${PROJECT_SOURCE_DIR}' -B '${dir}' ${TDM_SUBBUILD_ARGS} -DCMAKE_BUILD_TYPE=Release -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DTDM_CUDA=OFF > '${dir}.configure.log' 2>&1 || { cat '${dir}.configure.log'; exit 1; }
     '${CMAKE_COMMAND}' --build '${dir}' -j 2 > '${dir}.build.log' 2>&1 && echo 'Release (-O3) build with warnings as errors: clean' && exit 0
     grep -E -B2 -A6 'error|warning' '${dir}.build.log' | head -n 80; echo \"the Release build failed (all of it: ${dir}.build.log)\"; exit 1")
  set_tests_properties(build.release_clean PROPERTIES LABELS build PROCESSORS 2 TIMEOUT 900)

  set(dir ${CMAKE_CURRENT_BINARY_DIR}/build-user)
  add_test(NAME build.user_warnings_not_errors COMMAND sh -c
    "rm -rf '${dir}' && '${CMAKE_COMMAND}' -S '${PROJECT_SOURCE_DIR}' -B '${dir}' ${TDM_SUBBUILD_ARGS} > '${dir}.configure.log' 2>&1 || { cat '${dir}.configure.log'; exit 1; }
     grep -o '[^ \"]*Werror[^ \"]*' '${dir}/compile_commands.json' | sort | uniq -c | grep . && { echo 'a build without the presets turns warnings into errors'; exit 1; }
     echo \"no -Werror in \$(grep -c '\"command\"' '${dir}/compile_commands.json') compile commands\"")
  set_tests_properties(build.user_warnings_not_errors PROPERTIES LABELS build)
endif()
