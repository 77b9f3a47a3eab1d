# parallel.cmake — data parallel's all-reduce paths (test_parallel.c): overlap on/off on the cpu;
# NCCL across every GPU (one rank each) and the host path on a GPU machine.
tdm_test_executable(parallel)
add_test(NAME parallel.overlap_cpu COMMAND test_parallel)
add_test(NAME parallel.gpu.nccl COMMAND test_parallel gpu)
set_tests_properties(parallel.gpu.nccl PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
