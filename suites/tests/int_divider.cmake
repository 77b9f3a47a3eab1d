# int_divider.cmake — the 32-bit index arithmetic of the CUDA backend's reductions and batch norm
# (kernels/int_divider.h: division by multiplication, chosen on the host when every index fits)
# against plain division on the CPU, at its edges (near 2^31, odd divisors, divisor 1), over
# exhaustive small ranges and random large ones; runs in every build.
tdm_test_executable(int_divider)
add_test(NAME unit.int_divider COMMAND test_int_divider)

# On cuda:0 (label gpu, exit 77 without a device): the golden cases of every op whose kernels use
# it (sum, mean, batch_norm; add, mul and linear through their reduced gradients) also on the
# 64-bit path, which only tensors of 2^31 elements and more take otherwise (TANDEM_CUDA_INDEX64=1).
string(JOIN " " INDEX_CASES ${CASES_sum} ${CASES_mean} ${CASES_batch_norm} ${CASES_add}
       ${CASES_mul} ${CASES_linear})
add_test(NAME gpu.golden.cuda0.index64
         COMMAND sh -c "out=$($<TARGET_FILE:bench> replay --device cuda:0 --quiet ${CASES_DIR}/relu-f32-odd.safetensors 2>&1); rc=$?; case \"$out\" in *'no CUDA device'*|*'no CUDA backend'*) echo \"SKIP: $out\"; exit 77;; esac; echo \"$out\"; [ $rc -eq 0 ] || exit 1; exec env TANDEM_CUDA_INDEX64=1 $<TARGET_FILE:bench> replay --device cuda:0 --quiet ${INDEX_CASES}")
set_tests_properties(gpu.golden.cuda0.index64 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
