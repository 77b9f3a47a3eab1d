# train_gpu.cmake — `bench train` features on cuda:0 beyond the golden trajectories (train.cmake):
# data-parallel ranks, one GPU each. Label gpu; each skips (77) with one line where it cannot run.
# (After train.cmake: uses its B, T, TRAIN_MLP and GPU_SKIP.)

# Two thread ranks on cuda:0 and cuda:1 (NCCL's all-reduce, or the host path without NCCL) train as
# one rank does, within train.cmake's 2e-5 for runs that differ only in how a step's gradient is
# summed. Needs two GPUs (on the emulated device: TANDEM_EMU_DEVICES=2, as the emu test presets set).
add_test(NAME gpu.train.ranks_equal_one_rank COMMAND sh -c
  "${GPU_SKIP}; out=$(${B} ${TRAIN_MLP} --device cuda:0 --ranks 2 --dump ${T}/gr2 2>&1); rc=$?; case \"$out\" in *'needs one GPU per rank'*) echo \"SKIP: $out\" | head -1; exit 77;; esac; echo \"$out\"; [ $rc -eq 0 ] || exit 1; ${B} ${TRAIN_MLP} --device cuda:0 --dump ${T}/gr1 >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/gr1 ${T}/gr2 2e-5")
# More ranks than GPUs is bad input, said before any rank starts (it hung: rank 0 waited at the
# group's barrier for a rank that could not build its model on a missing cuda:1).
add_test(NAME gpu.train.ranks_past_the_gpus_exit_2 COMMAND sh -c
  "${GPU_SKIP}; out=$(${B} train --model mlp:4-2 --batch 64 --steps 1 --opt sgd --lr 0.1 --device cuda:0 --ranks 64 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'needs one GPU per rank, cuda:0 to cuda:63'")
set_tests_properties(gpu.train.ranks_equal_one_rank gpu.train.ranks_past_the_gpus_exit_2 PROPERTIES
                     LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 120)
