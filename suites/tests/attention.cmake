# attention.cmake — TDM_DTYPE_BOOL and scaled_dot_product_attention beyond the golden cases
# (test_attention.c): the bool dtype (creation, copies, casts, safetensors, refusals), SDPA's
# argument errors, its semantics checked against itself (is_causal = a tril mask, bool = additive
# 0/-inf, the default scale, a fully masked row gives zeros, broadcasting, dropout from a
# generator), autograd and autocast; on cuda:0 (label gpu, exit 77 with one line without one) the
# bool copy paths, cpu = cuda, dropout under graph capture (replay k = eager step k), device errors,
# the fused attention (no (B,L,S) buffer in the memory statistics, = the plain path, bit-reproducible).
tdm_test_executable(attention)
foreach(t bool errors semantics autograd)
  add_test(NAME attention.${t} COMMAND test_attention ${t} ${TEST_TMP})
endforeach()
foreach(t gpu_bool gpu_match gpu_graph gpu_errors gpu_fused)
  add_test(NAME attention.${t} COMMAND test_attention ${t} ${TEST_TMP})
  set_tests_properties(attention.${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()

# Launches per training step (bench train --profile, kernels/cuda_check.h's count): a 12-layer
# GPT (GPT-2 124M's op structure at tiny widths) in bf16 makes fewer launches with the fused
# attention than on the plain path (a count, never a time). exit 77 without a device.
set(LAUNCH_GPT "$<TARGET_FILE:bench> train --device cuda:0 --model gpt:L12-H2-D32-T16-V67 --batch 2 --steps 4 --opt adamw --lr 1e-3 --amp bf16")
add_test(NAME gpu.attention.fused_fewer_launches
         COMMAND sh -c "out=$($<TARGET_FILE:bench> conform --device cuda:0 --cases 0 2>&1); case \"$out\" in *'no CUDA device'*|*'no CUDA backend'*) echo \"SKIP: $out\"; exit 77;; esac; per() { env TANDEM_ATTN=$1 ${LAUNCH_GPT} --profile ${TEST_TMP}/launches-$1.json | sed -n 's/^device launches per step: \\([0-9.]*\\).*/\\1/p'; }; a=$(per conformance); b=$(per heuristic); echo \"launches per step: plain attention $a, fused $b\"; [ -n \"$a\" ] && [ -n \"$b\" ] && awk -v a=$a -v b=$b 'BEGIN { exit !(b > 0 && b < a) }'")
set_tests_properties(gpu.attention.fused_fewer_launches PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

# The attention golden cases on cuda:0 on the plain path too (TANDEM_ATTN=conformance): the
# default run (gpu.golden.cuda0) takes the fused path for f16/bf16/f32 without mask or dropout.
file(GLOB SDPA_CASES ${CASES_DIR}/scaled_dot_product_attention-*.safetensors)
string(JOIN " " SDPA_CASES_SH ${SDPA_CASES})
add_test(NAME gpu.golden.cuda0.attn_conformance
         COMMAND sh -c "out=$($<TARGET_FILE:bench> replay --device cuda:0 --quiet ${CASES_DIR}/relu-f32-odd.safetensors 2>&1); case \"$out\" in *'no CUDA device'*|*'no CUDA backend'*) echo \"SKIP: $out\"; exit 77;; esac; exec env TANDEM_ATTN=conformance $<TARGET_FILE:bench> replay --device cuda:0 --quiet ${SDPA_CASES_SH}")
set_tests_properties(gpu.golden.cuda0.attn_conformance PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# The residual add fused with the next layer_norm (tdm_add_layer_norm, a GPT block's): exactly
# add then layer_norm, values and gradients; on cuda:0 (label gpu) in one launch.
tdm_test_executable(add_layer_norm)
add_test(NAME add_layer_norm.cpu COMMAND test_add_layer_norm cpu)
add_test(NAME add_layer_norm.gpu COMMAND test_add_layer_norm gpu)
set_tests_properties(add_layer_norm.gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# The transformer MLP (tdm_linear_gelu_linear: linear, tanh GELU, linear) against float64 within
# its rounding-error bound, forward and gradients: the three ops on the cpu; on cuda:0 fused
# (cuBLASLt's GELU_AUX_BIAS and DGELU epilogues, and the fallback for a hidden width that is no
# multiple of 8) and with fusions off, two launches fewer fused.
tdm_test_executable(linear_gelu)
add_test(NAME linear_gelu.cpu COMMAND test_linear_gelu cpu)
add_test(NAME linear_gelu.gpu COMMAND test_linear_gelu gpu)
set_tests_properties(linear_gelu.gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
