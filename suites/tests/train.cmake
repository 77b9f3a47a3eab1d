# train.cmake — `bench train` against PyTorch's golden training trajectories, one test per file.
tdm_test_executable(train_golden)
target_sources(test_train_golden PRIVATE ${PROJECT_SOURCE_DIR}/harness/check/check_train.c)   # the rule
file(GLOB GOLDEN_TRAIN CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/suites/golden/train/*.safetensors)
file(MAKE_DIRECTORY ${TEST_TMP}/train)
foreach(f ${GOLDEN_TRAIN})
  get_filename_component(name ${f} NAME_WE)
  add_test(NAME train.golden.${name}
           COMMAND test_train_golden $<TARGET_FILE:bench> ${f} ${TEST_TMP}/train)
endforeach()

# Training features through `bench train`, on the golden MLP/CNN data, compared dump to dump.
# Tolerance 2e-5 (relative to the largest element of each tensor) for runs that differ only in
# how a step's gradient is summed (micro-batches, ranks): each of the 8 steps perturbs the
# weights by a few f32 roundings (K * 2^-24 ~ 3e-7 for K = 4 parts), and the golden files show
# such perturbations growing at most ~10x over a run of this length (PyTorch's own f32 vs f64).
# Checkpointing recomputes the same ops in the same order: bit-identical (tolerance 0).
tdm_test_executable(dump_compare)
set(MLP_GOLD ${PROJECT_SOURCE_DIR}/suites/golden/train/mlp-sgd-off.safetensors)
set(CNN_GOLD ${PROJECT_SOURCE_DIR}/suites/golden/train/cnn-sgd-off.safetensors)
set(TRAIN_MLP "train --model mlp:20-64-32-5 --batch 16 --steps 8 --opt sgd --lr 0.1 --momentum 0.9 --init ${MLP_GOLD} --data ${MLP_GOLD}")
set(TRAIN_CNN "train --model cnn:3x8x8/c8k3p1-bn-relu-mp2-c8k3p1-bn-relu-ap2-flat-fc5 --batch 8 --steps 6 --opt adam --lr 0.01 --init ${CNN_GOLD} --data ${CNN_GOLD}")
set(B $<TARGET_FILE:bench>)
set(T ${TEST_TMP}/train)
add_test(NAME train.accumulate_equals_big_batch COMMAND sh -c
  "${B} ${TRAIN_MLP} --dump ${T}/acc1 >/dev/null && ${B} ${TRAIN_MLP} --accumulate 4 --dump ${T}/acc4 >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/acc1 ${T}/acc4 2e-5")
add_test(NAME train.ranks_equal_one_rank COMMAND sh -c
  "${B} ${TRAIN_MLP} --dump ${T}/r1 >/dev/null && ${B} ${TRAIN_MLP} --ranks 4 --dump ${T}/r4 >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/r1 ${T}/r4 2e-5")
add_test(NAME train.checkpointing_changes_nothing COMMAND sh -c
  "${B} ${TRAIN_CNN} --dump ${T}/ck0 >/dev/null && ${B} ${TRAIN_CNN} --checkpoint-segments 3 --dump ${T}/ck3 >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/ck0 ${T}/ck3 0")
add_test(NAME train.synthetic_loss_falls COMMAND sh -c
  "${B} train --model mlp:32-64-10 --batch 32 --steps 60 --opt adam --lr 0.01 --seed 3 --dump ${T}/syn | grep -E 'loss [0-9.]+ -> [0-9.]+' && $<TARGET_FILE:test_loss_falls> ${T}/syn 0.5")
add_test(NAME train.bad_arguments_exit_2 COMMAND sh -c
  "for args in '--model mlp:10 --batch 4 --steps 1 --opt sgd --lr 0.1' '--model cnn:3x8x8/c8q3 --batch 4 --steps 1 --opt sgd --lr 0.1' '--model mlp:10-5 --batch 0 --steps 1 --opt sgd --lr 0.1' '--model mlp:7-5 --batch 4 --steps 1 --opt sgd --lr 0.1 --data ${MLP_GOLD}' '--model mlp:20-5 --batch 4 --steps 1 --opt rmsprop --lr 0.1' '--model mlp:20-5 --batch 6 --steps 1 --opt sgd --lr 0.1 --ranks 4' '--model mlp:20-5 --batch 4 --steps 1 --opt sgd --lr 0.1 --amsgrad'; do ${B} train $args; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $args\"; exit 1; }; done")
set_tests_properties(train.bad_arguments_exit_2 PROPERTIES PASS_REGULAR_EXPRESSION "x has 20 features per sample but the model takes 7")
tdm_test_executable(loss_falls)

tdm_test_executable(training)
add_test(NAME train.scaler_and_resume COMMAND test_training ${TEST_TMP})

# Data parallel across processes: mpirun -np 2 gives bit-identical results to 2 thread ranks
# (both sum the ranks' gradients in rank order). Skipped, visibly, in a build without MPI.
if(TDM_MPI AND MPIEXEC_EXECUTABLE)
  add_test(NAME train.mpi_ranks_equal_thread_ranks COMMAND sh -c
    "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; ${MPIEXEC_EXECUTABLE} --oversubscribe -np 2 ${B} ${TRAIN_MLP} --dump ${T}/mpi2 && ${B} ${TRAIN_MLP} --ranks 2 --dump ${T}/thr2 >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/mpi2 ${T}/thr2 0")
  set_tests_properties(train.mpi_ranks_equal_thread_ranks PROPERTIES TIMEOUT 120)
else()
  add_test(NAME train.mpi_ranks_equal_thread_ranks COMMAND sh -c "echo 'SKIP: built without MPI (install libopenmpi-dev openmpi-bin)'; exit 77")
  set_tests_properties(train.mpi_ranks_equal_thread_ranks PROPERTIES SKIP_RETURN_CODE 77)
endif()

# --data with f64 features and int32 labels trains exactly as the same values in f32 / int64.
add_test(NAME train.data_dtypes_widened COMMAND sh -c
  "$<TARGET_FILE:test_training> --write-data ${T} && ${B} train --model mlp:6-8-3 --batch 16 --steps 4 --opt sgd --lr 0.1 --data ${T}/data_f32_i64.safetensors --dump ${T}/dt1 >/dev/null && ${B} train --model mlp:6-8-3 --batch 16 --steps 4 --opt sgd --lr 0.1 --data ${T}/data_f64_i32.safetensors --dump ${T}/dt2 >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/dt1 ${T}/dt2 0")

# fp16 with the gradient scaler, on the reference: each f32 golden file's trajectory trained with
# --amp fp16, against PyTorch's fp16 autocast + GradScaler run (emulated in f32 by gen_train.py)
# within test_train_golden's rule, u = 2^-11.
foreach(f ${GOLDEN_TRAIN})
  get_filename_component(name ${f} NAME_WE)
  if(name MATCHES "-off$")
    add_test(NAME train.golden_fp16.${name}
             COMMAND test_train_golden $<TARGET_FILE:bench> ${f} ${TEST_TMP}/train cpu --amp fp16)
  endif()
endforeach()

# GPU: every golden trajectory trained on cuda:0 is held to the same bounds against the exact
# trajectory as the reference: strict f32 (TF32 off); again with TF32 on for the f32 ones, against
# PyTorch's own TF32 runs (u = 2^-10); and in fp16 with the scaler for the f32 ones, as on the cpu
# above. The fp16 runs on cuda:0 and on the cpu are not compared with each other: the only bound on
# their difference that can be derived is the sum of their two bounds here, which these tests imply
# (cnn-adam: they differ by 0.03 relative after 20 steps, 0.5 in the ill_conditioned biases).
# Deterministic convolutions give bit-identical runs. Each skips (77) with one line when there is
# no CUDA device.
foreach(f ${GOLDEN_TRAIN})
  get_filename_component(name ${f} NAME_WE)
  add_test(NAME gpu.train.${name}
           COMMAND test_train_golden $<TARGET_FILE:bench> ${f} ${TEST_TMP}/train cuda:0 --tf32 off)
  set_tests_properties(gpu.train.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  if(name MATCHES "-off$")
    add_test(NAME gpu.train_tf32.${name}
             COMMAND test_train_golden $<TARGET_FILE:bench> ${f} ${TEST_TMP}/train cuda:0 --tf32 on)
    add_test(NAME gpu.train_fp16.${name}
             COMMAND test_train_golden $<TARGET_FILE:bench> ${f} ${TEST_TMP}/train cuda:0 --amp fp16)
    set_tests_properties(gpu.train_tf32.${name} gpu.train_fp16.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  endif()
endforeach()
set(GPU_SKIP "out=$(${B} train --device cuda:0 --model mlp:4 --steps 1 --batch 2 --opt sgd --lr 0.1 2>&1) || case \"$out\" in *'no CUDA'*|*'CUDA backend'*) echo \"SKIP: $out\" | head -1; exit 77;; esac")
add_test(NAME gpu.train.deterministic_bitwise COMMAND sh -c
  "${GPU_SKIP}; for r in 1 2; do ${B} ${TRAIN_CNN} --device cuda:0 --deterministic --dump ${T}/det$r >/dev/null || exit 1; done; $<TARGET_FILE:test_dump_compare> ${T}/det1 ${T}/det2 0")
set_tests_properties(gpu.train.deterministic_bitwise PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# The optimizers' maximize and amsgrad (test_optim.c): trajectories against hand computation,
# max_exp_avg_sq through save/load, the op's errors; on the cpu and (label gpu) on cuda:0.
tdm_test_executable(optim)
add_test(NAME optim.cpu COMMAND test_optim ${TEST_TMP} cpu)
add_test(NAME gpu.optim.cuda0 COMMAND test_optim ${TEST_TMP} cuda:0)
set_tests_properties(gpu.optim.cuda0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# Adam with fused = true and with f32 master weights (test_optim_fused.c): fused == unfused bit for
# bit over mixed dtypes, two groups, amsgrad, maximize, parameters without gradients; master
# weights == an f32 run rounded to bf16 each step, and through save/load. On the emulated device
# (it counts launches) a fused step is one kernel launch.
tdm_test_executable(optim_fused)
add_test(NAME optim_fused.cpu COMMAND test_optim_fused ${TEST_TMP} cpu)
add_test(NAME gpu.optim_fused.cuda0 COMMAND test_optim_fused ${TEST_TMP} cuda:0)
set_tests_properties(gpu.optim_fused.cuda0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
if(TDM_CUDA_EMU)
  target_compile_definitions(test_optim_fused PRIVATE TDM_TEST_EMU)
endif()
add_test(NAME gpu.optim_fused.graph_cuda0 COMMAND test_optim_fused ${TEST_TMP} cuda:0 graph)
set_tests_properties(gpu.optim_fused.graph_cuda0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# `bench train --fused-adam`: nanoGPT's GPT with AdamW over two groups (weight decay on the
# matrices), amsgrad and clipping gives the unfused run's losses and parameters bit for bit, on
# the cpu and on cuda:0 (eager, and captured with --graph); with --opt sgd it is refused (exit 2).
set(TRAIN_FUSED "train --model gpt:L2-H2-D32-T16-V67 --batch 4 --steps 5 --opt adamw --lr 1e-2 --weight-decay 0.1 --weight-decay-matrices-only --amsgrad --clip-grad-norm 1.0 --seed 3")
add_test(NAME train.fused_adam_equals_unfused COMMAND sh -c
  "${B} ${TRAIN_FUSED} --dump ${T}/fa_unfused >/dev/null && out=$(${B} ${TRAIN_FUSED} --fused-adam --dump ${T}/fa_fused) && echo \"$out\" | grep -q '(adamw fused, lr' && $<TARGET_FILE:test_dump_compare> ${T}/fa_unfused ${T}/fa_fused 0")
add_test(NAME train.fused_adam_refused_sgd COMMAND sh -c
  "out=$(${B} train --model mlp:4-2 --steps 1 --opt sgd --lr 0.1 --fused-adam 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q -- '--fused-adam needs --opt adam or adamw'")
add_test(NAME gpu.train.fused_adam_equals_unfused COMMAND sh -c
  "${GPU_SKIP}; ${B} ${TRAIN_FUSED} --device cuda:0 --dump ${T}/fa_unfused_cuda >/dev/null && ${B} ${TRAIN_FUSED} --device cuda:0 --fused-adam --dump ${T}/fa_fused_cuda >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/fa_unfused_cuda ${T}/fa_fused_cuda 0")
add_test(NAME gpu.train.fused_adam_graph COMMAND sh -c
  "${GPU_SKIP}; ${B} ${TRAIN_FUSED} --device cuda:0 --dump ${T}/fa_eager_cuda >/dev/null && ${B} ${TRAIN_FUSED} --device cuda:0 --fused-adam --graph --dump ${T}/fa_graph_cuda >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/fa_eager_cuda ${T}/fa_graph_cuda 0")
set_tests_properties(gpu.train.fused_adam_equals_unfused gpu.train.fused_adam_graph PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
