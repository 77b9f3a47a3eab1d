# graph.cmake — CUDA graph capture (test_graph.c, `bench train --graph`): on the cpu the API and
# the CLI refuse clearly (exit 2 for the CLI, before any work); on cuda:0 (label gpu, exit 77 with
# one line without a device) a replay after refilling the static input equals the eager result,
# unsafe calls fail the capture, the private pool's memory all comes back, and `bench train
# --graph` gives the eager run's losses and final parameters bit for bit (same kernels in the same
# order on the same addresses' alignment: nothing in a replay differs from eager execution) — with
# SGD + momentum, Adam, AdamW and dropout, whose per-step state (momentum initialized, step count,
# Philox offsets) is read on the device and advanced before each replay. test_graph's gpu_sgd_momentum,
# gpu_adam, gpu_adamw, gpu_sgd_maximize, gpu_adam_amsgrad, gpu_adamw_amsgrad (amsgrad + maximize;
# each captured before any eager step) and gpu_random (generators: rand, randn, dropout forward
# and backward) compare replays with eager steps bit for bit; gpu_groups_clip_adamw and
# gpu_groups_clip_sgd (issue 23) capture clip_grad_norm_ with the step of a two-group optimizer
# whose lrs change between the replays.
tdm_test_executable(graph)
add_test(NAME graph.cpu_refuses COMMAND test_graph cpu_refuses)
foreach(t gpu_replay gpu_memory gpu_pinned gpu_sgd_momentum gpu_adam gpu_adamw gpu_sgd_maximize
          gpu_adam_amsgrad gpu_adamw_amsgrad gpu_random gpu_groups_clip_adamw gpu_groups_clip_sgd)
  add_test(NAME graph.${t} COMMAND test_graph ${t})
  set_tests_properties(graph.${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()

set(GB $<TARGET_FILE:bench>)
set(GT ${TEST_TMP}/graph)
file(MAKE_DIRECTORY ${GT})
set(GTRAIN "train --model mlp:64-128-10 --batch 32 --steps 8 --opt sgd --lr 0.1 --momentum 0.9 --seed 3")
# exit 2 and one line saying why, for each combination a captured step cannot hold
add_test(NAME graph.train_refuses_cpu COMMAND sh -c
  "out=$(${GB} ${GTRAIN} --graph --device cpu 2>&1); rc=$?; echo \"$out\"; test $rc -eq 2 && echo \"$out\" | grep -q 'bench train: --graph needs a CUDA device'")
add_test(NAME graph.train_refuses_combinations COMMAND sh -c
  "for extra in '--accumulate 2' '--ranks 2' '--amp fp16'; do out=$(${GB} ${GTRAIN} --graph --device cuda:0 $extra 2>&1); rc=$?; echo \"$extra: $out\"; test $rc -eq 2 || exit 1; echo \"$out\" | grep -q -- '--graph ' || exit 1; done")
set(GSKIP "out=$(${GB} train --device cuda:0 --model mlp:4 --steps 1 --batch 2 --opt sgd --lr 0.1 2>&1) || case \"$out\" in *'no CUDA'*|*'CUDA backend'*) echo \"SKIP: $out\" | head -1; exit 77;; esac")
add_test(NAME gpu.graph.train_matches_eager COMMAND sh -c
  "${GSKIP}; ${GB} ${GTRAIN} --device cuda:0 --dump ${GT}/eager >/dev/null && ${GB} ${GTRAIN} --device cuda:0 --graph --dump ${GT}/graph >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/eager ${GT}/graph 0")
# Adam and AdamW (step count on the device; AdamW also with --amsgrad --maximize), and dropout
# (offsets on the device), captured = eager
set(GADAM "train --model mlp:64-128-10 --batch 32 --steps 8 --lr 0.01 --seed 3")
set(GDROP "train --model cnn:1x4x4/flat-do0.5-fc8-relu-do0.25-fc3 --batch 4 --steps 8 --opt sgd --lr 0.1 --momentum 0.9 --seed 5")
foreach(v adam adamw amsgrad dropout)
  if(v STREQUAL "dropout")
    set(cmd "${GDROP}")
  elseif(v STREQUAL "amsgrad")   # AMSGrad's max_exp_avg_sq and maximize through --graph too
    set(cmd "${GADAM} --opt adamw --amsgrad --maximize")
  else()
    set(cmd "${GADAM} --opt ${v}")
  endif()
  add_test(NAME gpu.graph.train_matches_eager_${v} COMMAND sh -c
    "${GSKIP}; ${GB} ${cmd} --device cuda:0 --dump ${GT}/eager_${v} >/dev/null && ${GB} ${cmd} --device cuda:0 --graph --dump ${GT}/graph_${v} >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/eager_${v} ${GT}/graph_${v} 0")
  set_tests_properties(gpu.graph.train_matches_eager_${v} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()
set_tests_properties(gpu.graph.train_matches_eager PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
# The graphs suite: listed with both benchmarks; on the cpu skipped with its reason.
add_test(NAME graph.suite_list_and_cpu_skip COMMAND sh -c
  "out=$(${GB} list --suite graphs) || exit 1; echo \"$out\" | grep -q 'mlp_step_eager samples/s' && echo \"$out\" | grep -q 'mlp_step_graph samples/s' || exit 1; out=$(${GB} run --device cpu --suite graphs --quick --out ${GT}/run 2>&1); echo \"$out\"; echo \"$out\" | grep -q 'skipping suite graphs: runs on cuda, not on cpu'")
