# libs.cmake — the CUDA backend's library layer (kernels/blas.cu: cuBLASLt; kernels/conv_cudnn.cu:
# cuDNN): its plan-cache keys and the algorithm-choice API on the CPU, `bench list` showing the
# cudnn suite; and on cuda:0 (label gpu, exit 77 = SKIP without a device) the golden and random
# cases of linear/matmul/conv2d in each convolution algorithm mode and with TF32 on and off (the
# TANDEM_* environment defaults of tandem/backends.h; bounds widen for TF32, docs/CONFORMANCE.md).
tdm_test_executable(plan_cache)
add_test(NAME plan.keys COMMAND test_plan_cache keys)
add_test(NAME plan.algo_api COMMAND test_plan_cache algo_api)
add_test(NAME plan.env COMMAND test_plan_cache env)
set_tests_properties(plan.env PROPERTIES ENVIRONMENT
                     "TANDEM_TF32_MATMUL=1;TANDEM_TF32_CONV=0;TANDEM_CONV_ALGO=benchmark")

# the benchmarks are registered in CUDA builds only (the suite times with CUDA events)
if(TDM_CUDA)
  set(LIST_CUDNN_BENCHMARKS "&& echo \"$out\" | grep -q 'conv_resnet50_layer1_expand1x1_bwd_filter_bf16_nchw' && echo \"$out\" | grep -q 'conv_smallcnn_conv2_bwd_data_tf32_nchw' && echo \"$out\" | grep -q 'conv_resnet18_conv1_fwd_bf16_nhwc'")
endif()
add_test(NAME bench.list_cudnn
         COMMAND sh -c "out=$($<TARGET_FILE:bench> list) || exit 1; echo \"$out\" | grep -q '^cudnn \\[cuda\\]' ${LIST_CUDNN_BENCHMARKS}")
add_test(NAME bench.run_cpu_skips_cudnn
         COMMAND sh -c "$<TARGET_FILE:bench> run --device cpu --quick --suite cudnn --out ${TEST_TMP}/run-cudnn 2>&1 | grep -q 'skipping suite cudnn'")

string(JOIN " " LIBS_CASES ${CASES_linear} ${CASES_matmul} ${CASES_conv2d})   # for sh -c
set(LIBS_SKIP "case \"$out\" in *'no CUDA device'*|*'no CUDA backend'*) echo \"SKIP: $(echo \"$out\" | head -n1)\"; exit 77;; esac")
foreach(variant "tf32_off:TANDEM_TF32_MATMUL=0 TANDEM_TF32_CONV=0"
                "direct:TANDEM_CONV_ALGO=direct"
                "tf32_on:TANDEM_TF32_MATMUL=1 TANDEM_TF32_CONV=1"
                "heuristic:TANDEM_CONV_ALGO=heuristic"
                "benchmark:TANDEM_CONV_ALGO=benchmark"
                "deterministic:TANDEM_CONV_ALGO=deterministic")
  string(REGEX REPLACE ":.*" "" name ${variant})
  string(REGEX REPLACE "^[^:]*:" "" envs ${variant})
  add_test(NAME gpu.golden.cuda0.libs_${name}
           COMMAND sh -c "out=$(env ${envs} $<TARGET_FILE:bench> replay --device cuda:0 --quiet ${CASES_DIR}/matmul-f32-mm.safetensors 2>&1); rc=$?; ${LIBS_SKIP}; echo \"$out\"; [ $rc -eq 0 ] || exit 1; exec env ${envs} $<TARGET_FILE:bench> replay --device cuda:0 --quiet ${LIBS_CASES}")
  add_test(NAME gpu.conform.cuda0.libs_${name}
           COMMAND sh -c "out=$($<TARGET_FILE:bench> conform --device cuda:0 --cases 0 2>&1); ${LIBS_SKIP}; exec env ${envs} $<TARGET_FILE:bench> conform --device cuda:0 --ops linear,matmul,conv2d --dtypes f32,f16,bf16 --cases 3 --seed 2 --quiet --failures ${TEST_TMP}/conform-libs-${name}")
  set_tests_properties(gpu.golden.cuda0.libs_${name} gpu.conform.cuda0.libs_${name}
                       PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

# The suite itself on cuda:0, quick: every instance runs its search, times, verifies 4 points.
# On the emulated device (about 0.1 GFLOP/s under the sanitizers) one layer's instances only:
# each pass in each mode, f32 and fp16, both layouts, the benchmark search once.
set(CUDNN_QUICK_ARGS "")
if(TDM_CUDA_EMU)
  set(CUDNN_QUICK_ARGS "--repetitions 1 --min-time 0.001 --filter 'conv_smallcnn_conv1_(fwd_f32_nchw|(fwd|bwd_data|bwd_filter)_(f32|fp16)_(nchw|nhwc)/mode:[02])'")
endif()
add_test(NAME gpu.bench.cudnn_quick
         COMMAND sh -c "out=$($<TARGET_FILE:bench> conform --device cuda:0 --cases 0 2>&1); ${LIBS_SKIP}; rm -rf ${TEST_TMP}/run-cudnn-cuda0; exec $<TARGET_FILE:bench> run --device cuda:0 --quick --suite cudnn ${CUDNN_QUICK_ARGS} --out ${TEST_TMP}/run-cudnn-cuda0")
set_tests_properties(gpu.bench.cudnn_quick PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

# Reduction launch plans (kernels/reduce_plan.h, plain C): the bias-gradient and batch-norm shapes
# of issue 14 launch at least two blocks per SM of an A100 and an H100.
tdm_test_executable(reduce_plan)
add_test(NAME unit.reduce_plan COMMAND test_reduce_plan)

# Which convolution engine runs (test_conv_engines.c, cuda:0; label gpu, exit 77 without a
# device): heuristic and deterministic modes never take a Winograd or FFT engine; the direct mode
# runs tandem's own kernels (f64 NHWC grouped dilated, f32, f16) within the direct-summation
# bound; and on the emulated device with no cuDNN engine at all (TANDEM_EMU_CUDNN_ENGINES=none)
# every pass falls back to the direct kernels instead of failing "unsupported", the golden conv2d
# cases included.
tdm_test_executable(conv_engines)
foreach(m covered direct)
  add_test(NAME gpu.conv_engines.${m} COMMAND test_conv_engines ${m})
  set_tests_properties(gpu.conv_engines.${m} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()
if(TDM_CUDA_EMU)
  add_test(NAME emu.conv_engines.fallback COMMAND test_conv_engines fallback)
  string(JOIN " " CONV_CASES_SH ${CASES_conv2d})
  add_test(NAME emu.golden.conv2d_no_cudnn_engine
           COMMAND sh -c "exec $<TARGET_FILE:bench> replay --device cuda:0 --quiet ${CONV_CASES_SH}")
  set_tests_properties(emu.conv_engines.fallback emu.golden.conv2d_no_cudnn_engine PROPERTIES
                       LABELS emu ENVIRONMENT "TANDEM_EMU_CUDNN_ENGINES=none" TIMEOUT 600)
endif()
