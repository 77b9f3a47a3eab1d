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
# Micro-batches on two ranks train as on one: --accumulate 4 keeps the all-reduce (no_sync for the
# first three micro-batches) from running while the next micro-batch adds into the gradients. The
# emulated NCCL holds each collective back 300 ms (TANDEM_EMU_NCCL_DELAY_MS; a real NCCL ignores
# it), so an all-reduce not ordered before the next backward would still write the gradients
# after it: one micro-batch's contribution would vanish, every time.
add_test(NAME gpu.train.ranks_accumulate_equal_one_rank COMMAND sh -c
  "${GPU_SKIP}; out=$(${B} ${TRAIN_MLP} --device cuda:0 --ranks 2 --accumulate 4 --dump ${T}/gra2 2>&1); rc=$?; case \"$out\" in *'needs one GPU per rank'*) echo \"SKIP: $out\" | head -1; exit 77;; esac; echo \"$out\"; [ $rc -eq 0 ] || exit 1; ${B} ${TRAIN_MLP} --device cuda:0 --accumulate 4 --dump ${T}/gra1 >/dev/null && $<TARGET_FILE:test_dump_compare> ${T}/gra1 ${T}/gra2 2e-5")
set_tests_properties(gpu.train.ranks_accumulate_equal_one_rank PROPERTIES
                     ENVIRONMENT "TANDEM_EMU_NCCL_DELAY_MS=300")
# NCCL needs the caching allocator: with TANDEM_CACHING_ALLOCATOR=0 every free is a cudaFree,
# which synchronizes the device behind an all-reduce waiting for the other ranks. Refused on every
# rank with the reason (no rank waits for another), while TANDEM_DP_COMM=host still trains. A
# build without NCCL never refuses: skipped there (bench env says "NCCL not linked").
add_test(NAME gpu.train.ranks_nocache_refused COMMAND sh -c
  "${GPU_SKIP}; out=$(TANDEM_CACHING_ALLOCATOR=0 ${B} ${TRAIN_MLP} --device cuda:0 --ranks 2 --steps 1 2>&1); rc=$?; echo \"$out\"; case \"$out\" in *'needs one GPU per rank'*) echo 'SKIP: one GPU'; exit 77;; esac; if [ $rc -eq 0 ]; then ${B} env 2>/dev/null | grep -q 'NCCL not linked' && { echo 'SKIP: no NCCL in this build'; exit 77; }; echo 'trained without the caching allocator'; exit 1; fi; echo \"$out\" | grep -q 'rank 0: .*needs the caching allocator' && echo \"$out\" | grep -q 'TANDEM_DP_COMM=host' || exit 1; TANDEM_CACHING_ALLOCATOR=0 TANDEM_DP_COMM=host ${B} ${TRAIN_MLP} --device cuda:0 --ranks 2 --steps 1 >/dev/null")
set_tests_properties(gpu.train.ranks_accumulate_equal_one_rank PROPERTIES LABELS "gpu;nccl")
set_tests_properties(gpu.train.ranks_nocache_refused PROPERTIES LABELS gpu)
set_tests_properties(gpu.train.ranks_accumulate_equal_one_rank gpu.train.ranks_nocache_refused
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
set_tests_properties(gpu.train.ranks_equal_one_rank PROPERTIES LABELS "gpu;nccl")
