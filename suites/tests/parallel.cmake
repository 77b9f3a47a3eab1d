# parallel.cmake — data parallel's all-reduce paths (test_parallel.c): overlap on/off on the cpu;
# NCCL across every GPU (one rank each) and the host path on a GPU machine; on two GPUs,
# accumulating backwards before one sync (with and without tdm_dp_no_sync) and releasing or
# growing the allocator's cache while an all-reduce is queued, both with the emulated NCCL's
# collectives held back (TANDEM_EMU_NCCL_DELAY_MS: a missing stream order then shows every time;
# a real NCCL ignores it). Label nccl: these make NCCL communicators, which need the caching
# allocator (the emu-nocache test preset runs without it, and leaves them out).
tdm_test_executable(parallel)
add_test(NAME parallel.overlap_cpu COMMAND test_parallel)
add_test(NAME parallel.gpu.nccl COMMAND test_parallel gpu)
add_test(NAME parallel.gpu.accumulate COMMAND test_parallel accumulate)
add_test(NAME parallel.gpu.memory_under_allreduce COMMAND test_parallel memory)
set_tests_properties(parallel.gpu.nccl parallel.gpu.accumulate parallel.gpu.memory_under_allreduce
                     PROPERTIES LABELS "gpu;nccl" SKIP_RETURN_CODE 77)
set_tests_properties(parallel.gpu.accumulate parallel.gpu.memory_under_allreduce PROPERTIES
                     ENVIRONMENT "TANDEM_EMU_NCCL_DELAY_MS=300" TIMEOUT 300)
# Copies between two emulated devices are never staged through the host (peer access enabled):
# the emulator counts those made without it.
if(TDM_CUDA_EMU)
  target_compile_definitions(test_parallel PRIVATE TDM_TEST_EMU)
  add_test(NAME emu.parallel.peer_copies_direct COMMAND test_parallel peer)
  set_tests_properties(emu.parallel.peer_copies_direct PROPERTIES LABELS emu
                       ENVIRONMENT "TANDEM_EMU_DEVICES=2" SKIP_RETURN_CODE 77)
endif()
# The scaling suite's all-reduce check on three ranks (three emulated devices; every GPU of a real
# node): NCCL's ncclAvg pre-multiplies by float(1/3) and sums in ring order, so the mean is judged
# within tdm_dp_mean_bound_f32, not as sum/3 rounded once (which the emulated NCCL, computing as
# NCCL does, fails for some elements).
set(SC3 ${TEST_TMP}/scaling3)
add_test(NAME gpu.scaling.allreduce_three_ranks COMMAND sh -c
  "rm -rf ${SC3}; out=$($<TARGET_FILE:bench> run --device cuda:0 --suite scaling --filter allreduce --quick --repetitions 1 --out ${SC3} 2>&1); rc=$?; echo \"$out\"; case \"$out\" in *'no CUDA'*|*'CUDA backend'*) echo 'SKIP: no CUDA device'; exit 77;; esac; [ $rc -eq 0 ] && grep -q '^scaling,allreduce,bytes:65536,65536,busbw_GB/s' ${SC3}/scaling.csv")
set_tests_properties(gpu.scaling.allreduce_three_ranks PROPERTIES LABELS "gpu;nccl"
                     ENVIRONMENT "TANDEM_EMU_DEVICES=3" SKIP_RETURN_CODE 77 TIMEOUT 120)
