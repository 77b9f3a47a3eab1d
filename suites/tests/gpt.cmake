# gpt.cmake — the GPT model (test_gpt.c): the gpt: grammar, nanoGPT's names and tying, init,
# forward, state dicts in both safetensors forms, checkpointing; step 0 of the golden files
# (suites/golden/gpt, gen_gpt.py) by check_gpt.c's rule (tandem within 4x the worst deviation of
# the file's reference runs at its precision, + N u), on the cpu and (label gpu) on cuda:0.
tdm_test_executable(gpt)
target_sources(test_gpt PRIVATE ${PROJECT_SOURCE_DIR}/harness/check/check_gpt.c)   # the rule
target_link_libraries(test_gpt PRIVATE cjson_dep)
set(GPT_GOLD_DIR ${PROJECT_SOURCE_DIR}/suites/golden/gpt)
foreach(area spec structure init forward state checkpoint)
  add_test(NAME gpt.${area} COMMAND test_gpt ${area} ${TEST_TMP} ${GPT_GOLD_DIR})
endforeach()

# Step 0 (logits, loss, every parameter's gradient) of each golden file, at each precision its
# runs hold: f32 and bf16 autocast and fp16 (loss x 2^16) on the cpu; on cuda:0 also TF32.
file(GLOB GPT_GOLDEN CONFIGURE_DEPENDS ${GPT_GOLD_DIR}/gpt-*.safetensors)
foreach(f ${GPT_GOLDEN})
  get_filename_component(name ${f} NAME_WE)
  set(precs f32)
  if(name STREQUAL "gpt-l2h2d32t16v67")
    set(precs f32 bf16 fp16 tf32)
  endif()
  foreach(p ${precs})
    if(NOT p STREQUAL "tf32")   # TF32 is a GPU's: the reference computes f32 products exactly
      add_test(NAME gpt.step0.${name}.${p} COMMAND test_gpt step0 ${f} cpu ${p} ${TEST_TMP})
    endif()
    add_test(NAME gpu.gpt.step0.${name}.${p} COMMAND test_gpt step0 ${f} cuda:0 ${p} ${TEST_TMP})
    set_tests_properties(gpu.gpt.step0.${name}.${p} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  endforeach()
endforeach()

# ---- bench train --model gpt: ---------------------------------------------------------------------
set(GB $<TARGET_FILE:bench>)
set(GT ${TEST_TMP}/gpt)
file(MAKE_DIRECTORY ${GT})
set(GPT_MAIN ${GPT_GOLD_DIR}/gpt-l2h2d32t16v67.safetensors)
set(TRAIN_GPT "train --model gpt:L2-H2-D32-T16-V67 --batch 4 --opt adamw --lr 1e-2")
# llm.c's .bin and the same tokens as x/y rows (gen_gpt.py's tokens.bin, tokens.safetensors) train
# bit-identically: 20 steps, wrapping after 16 windows of B*T+1 tokens.
add_test(NAME gpt.train.bin_equals_rows COMMAND sh -c
  "${GB} ${TRAIN_GPT} --steps 20 --data ${GPT_GOLD_DIR}/tokens.bin --dump ${GT}/bin >/dev/null && ${GB} ${TRAIN_GPT} --steps 20 --data ${GPT_GOLD_DIR}/tokens.safetensors --dump ${GT}/rows >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/bin ${GT}/rows 0")
# Malformed token files: exit 2, the fault named (gen_gpt.py's .bin files; test_gpt's x/y files).
add_test(NAME gpt.train.bad_token_files_exit_2 COMMAND sh -c
  "$<TARGET_FILE:test_gpt> write-tokens ${GT} || exit 1; while IFS='|' read -r f msg; do out=$(${GB} ${TRAIN_GPT} --steps 1 --data $f 2>&1); rc=$?; [ $rc -eq 2 ] && echo \"$out\" | grep -qF \"$msg\" || { echo \"exit $rc for $f: $out (expected: $msg)\"; exit 1; }; done <<EOT
${GPT_GOLD_DIR}/tokens-bad-magic.bin|bad magic 20240521
${GPT_GOLD_DIR}/tokens-bad-version.bin|bad version 2
${GPT_GOLD_DIR}/tokens-truncated.bin|3024 bytes, but its header says 1025 tokens: 3074 bytes (truncated)
${GPT_GOLD_DIR}/tokens-short-header.bin|truncated: 512 bytes, shorter than an llm.c token file's header
${GPT_GOLD_DIR}/tokens-out-of-vocab.bin|token 67 at position 100 is not below the vocabulary size 67
${GT}/tokens-x-float.safetensors|x is f32: token data must be int64 or int32
${GT}/tokens-y-67.safetensors|y[9] = 67 is not a token of the vocabulary [0, 67) nor -1
${GT}/tokens-y-neg2.safetensors|y[9] = -2 is not a token
${GT}/tokens-x-neg.safetensors|x[9] = -2 is not a token
${GT}/tokens-x-67.safetensors|x[9] = 67 is not a token
${GT}/tokens-t17.safetensors|rows of 17 tokens, longer than the model's block size 16
${GT}/tokens-1d.safetensors|token data needs x and y of one shape (N,T)
EOT")
# Too few tokens for one batch (llm.c asserts B*T+1): 1025 tokens are one batch of 64 x 16 + 1,
# not one of 128.
add_test(NAME gpt.train.bin_too_short_exit_2 COMMAND sh -c
  "${GB} train --model gpt:L1-H2-D8-T16-V67 --batch 64 --steps 1 --opt adamw --data ${GPT_GOLD_DIR}/tokens.bin >/dev/null || exit 1; out=$(${GB} train --model gpt:L1-H2-D8-T16-V67 --batch 128 --steps 1 --opt adamw --data ${GPT_GOLD_DIR}/tokens.bin 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'holds 1025 tokens: a batch of 128 rows of 16 needs 2049'")
# Without --data: the seeded synthetic stream is learnable (the loss falls well below ln 67).
add_test(NAME gpt.train.synthetic_loss_falls COMMAND sh -c
  "${GB} train --model gpt:L1-H2-D32-T16-V67 --batch 8 --steps 60 --opt adamw --lr 1e-2 --seed 3 --dump ${GT}/syn >/dev/null && $<TARGET_FILE:test_loss_falls> ${GT}/syn 0.6")
# Micro-batches and ranks sum a step's gradient in other orders (train.cmake's 2e-5). With SGD:
# Adam would normalise the rounding noise of the key biases' gradient (exactly 0: the golden
# files' ill_conditioned slices) into steps of ~lr. Activation checkpointing (one block a
# segment, dropout replayed) recomputes the same ops: bit-identical.
set(TRAIN_GPT_SGD "train --model gpt:L2-H2-D32-T16-V67 --batch 4 --steps 6 --opt sgd --lr 0.1 --momentum 0.9 --data ${GPT_MAIN} --init ${GPT_MAIN}")
add_test(NAME gpt.train.accumulate_equals_big_batch COMMAND sh -c
  "${GB} ${TRAIN_GPT_SGD} --dump ${GT}/acc1 >/dev/null && ${GB} ${TRAIN_GPT_SGD} --accumulate 2 --dump ${GT}/acc2 >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/acc1 ${GT}/acc2 2e-5")
add_test(NAME gpt.train.ranks_equal_one_rank COMMAND sh -c
  "${GB} ${TRAIN_GPT_SGD} --dump ${GT}/r1 >/dev/null && ${GB} ${TRAIN_GPT_SGD} --ranks 2 --dump ${GT}/r2 >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/r1 ${GT}/r2 2e-5")
add_test(NAME gpt.train.ranks_accumulate_equal_one_rank COMMAND sh -c
  "${GB} ${TRAIN_GPT_SGD} --dump ${GT}/ra1 >/dev/null && ${GB} ${TRAIN_GPT_SGD} --ranks 2 --accumulate 2 --dump ${GT}/ra2 >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/ra1 ${GT}/ra2 2e-5")
add_test(NAME gpt.train.checkpointing_changes_nothing COMMAND sh -c
  "for s in 0 2; do ${GB} train --model gpt:L2-H2-D32-T16-V67-drop0.1 --batch 4 --steps 4 --opt adamw --data ${GPT_MAIN} --checkpoint-segments $s --dump ${GT}/ck$s >/dev/null || exit 1; done; $<TARGET_FILE:test_dump_compare> ${GT}/ck0 ${GT}/ck2 0")

# ---- golden runs: bench train on each file's model, weights, data and nanoGPT's AdamW (groups,
# betas, clipping, the cosine schedule), judged whole by check_gpt.c's rule -----------------------
foreach(f ${GPT_GOLDEN})
  get_filename_component(name ${f} NAME_WE)
  set(precs f32)
  if(name STREQUAL "gpt-l2h2d32t16v67")
    set(precs f32 bf16 fp16 tf32)
  endif()
  foreach(p ${precs})
    if(NOT p STREQUAL "tf32")
      add_test(NAME gpt.golden.${name}.${p} COMMAND test_gpt golden ${GB} ${f} cpu ${p} ${GT})
    endif()
    add_test(NAME gpu.gpt.golden.${name}.${p} COMMAND test_gpt golden ${GB} ${f} cuda:0 ${p} ${GT})
    set_tests_properties(gpu.gpt.golden.${name}.${p} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                         TIMEOUT 600)
  endforeach()
endforeach()
# The rule catches what a run could get wrong (each must fail): Adam's default betas (0.999), a
# schedule one step early, clipping at 0.5 instead of 1, and bf16 autocast judged as f32. Each
# dumps into its own directory: under ctest -j they would overwrite gpt.golden.*.f32's dump and
# each other's while another judges it.
if(EXISTS ${GPT_MAIN})
  set(i 0)
  foreach(wrong "--betas;0.9,0.999" "--lr-schedule;cosine:3:12:0.001" "--clip-grad-norm;0.5" "--amp;bf16")
    math(EXPR i "${i} + 1")
    file(MAKE_DIRECTORY ${GT}/catches${i})
    add_test(NAME gpt.golden_rule_catches.${i} COMMAND test_gpt golden ${GB} ${GPT_MAIN} cpu f32 ${GT}/catches${i} ${wrong})
    set_tests_properties(gpt.golden_rule_catches.${i} PROPERTIES WILL_FAIL TRUE)
  endforeach()
endif()

# ---- bitwise: resume, determinism, CUDA graphs -----------------------------------------------------
# (train.cmake's GPU_SKIP, defined here too: the fragments are read in name order)
set(GPT_GPU_SKIP "out=$(${GB} train --device cuda:0 --model mlp:4 --steps 1 --batch 2 --opt sgd --lr 0.1 2>&1) || case \"$out\" in *'no CUDA'*|*'CUDA backend'*) echo \"SKIP: $out\" | head -1; exit 77;; esac")
# 20 steps straight == 10 steps, --dump with --dump-optimizer, then --init/--init-optimizer
# --start-step 10 for 10 more, bit for bit (dropout in the blocks and the attention, AdamW's
# groups, clipping and the schedule continue where they stopped); on the cpu and on cuda:0.
set(GPT_RESUME "train --model gpt:L2-H2-D32-T16-V67-drop0.1 --batch 4 --opt adamw --lr 1e-2 --weight-decay 0.1 --weight-decay-matrices-only --betas 0.9,0.95 --clip-grad-norm 1.0 --lr-schedule cosine:4:12:1e-3 --data ${GPT_GOLD_DIR}/tokens.bin")
foreach(dev cpu cuda)
  set(pre gpt)
  set(d cpu)
  if(dev STREQUAL "cuda")
    set(pre gpu.gpt)
    set(d cuda:0)
  endif()
  set(skip "")
  if(dev STREQUAL "cuda")
    set(skip "${GPT_GPU_SKIP}; ")
  endif()
  add_test(NAME ${pre}.train.resume_bitwise COMMAND sh -c
    "${skip}${GB} ${GPT_RESUME} --device ${d} --steps 20 --dump ${GT}/${dev}-res20 >/dev/null && ${GB} ${GPT_RESUME} --device ${d} --steps 10 --dump ${GT}/${dev}-res10 --dump-optimizer ${GT}/${dev}-res10.opt >/dev/null && ${GB} ${GPT_RESUME} --device ${d} --steps 10 --init ${GT}/${dev}-res10 --init-optimizer ${GT}/${dev}-res10.opt --start-step 10 --dump ${GT}/${dev}-resb >/dev/null && $<TARGET_FILE:test_gpt> resume-compare ${GT}/${dev}-res20 ${GT}/${dev}-res10 ${GT}/${dev}-resb")
endforeach()
set_tests_properties(gpu.gpt.train.resume_bitwise PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
# The same with --amp fp16 (autocast f16 + the gradient scaler, growth every 3 clean steps: at step
# 10 its scale has grown and backed off and its _growth_tracker is 1): the scaler's state travels
# in the --dump-optimizer file, and the per-step scales of the two halves are the whole run's.
# On the cpu and on cuda:0; a file without the scaler's state is refused for an fp16 resume.
set(GPT_RESUME16 "${GPT_RESUME} --amp fp16 --scaler-growth-interval 3")
foreach(dev cpu cuda)
  set(pre gpt)
  set(d cpu)
  set(skip "")
  if(dev STREQUAL "cuda")
    set(pre gpu.gpt)
    set(d cuda:0)
    set(skip "${GPT_GPU_SKIP}; ")
  endif()
  add_test(NAME ${pre}.train.resume_bitwise_fp16 COMMAND sh -c
    "${skip}${GB} ${GPT_RESUME16} --device ${d} --steps 20 --dump ${GT}/${dev}-r16-20 >/dev/null && ${GB} ${GPT_RESUME16} --device ${d} --steps 10 --dump ${GT}/${dev}-r16-10 --dump-optimizer ${GT}/${dev}-r16-10.opt >/dev/null && ${GB} ${GPT_RESUME16} --device ${d} --steps 10 --init ${GT}/${dev}-r16-10 --init-optimizer ${GT}/${dev}-r16-10.opt --start-step 10 --dump ${GT}/${dev}-r16-b >/dev/null && $<TARGET_FILE:test_gpt> resume-compare ${GT}/${dev}-r16-20 ${GT}/${dev}-r16-10 ${GT}/${dev}-r16-b")
endforeach()
set_tests_properties(gpu.gpt.train.resume_bitwise_fp16 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
add_test(NAME gpt.train.resume_fp16_needs_scaler_state COMMAND sh -c
  "${GB} ${GPT_RESUME} --steps 2 --dump ${GT}/r16n --dump-optimizer ${GT}/r16n.opt >/dev/null || exit 1; out=$(${GB} ${GPT_RESUME16} --steps 2 --init ${GT}/r16n --init-optimizer ${GT}/r16n.opt --start-step 2 2>&1); rc=$?; echo \"$out\"; [ $rc = 2 ] && echo \"$out\" | grep -q 'holds no gradient scaler state'")
# --deterministic twice: the same bits (the embedding's backward is a sorted sum, not atomics:
# on the emulated device the two runs' threads go in opposite orders, where atomics differ).
add_test(NAME gpu.gpt.train.deterministic_bitwise COMMAND sh -c
  "${GPT_GPU_SKIP}; TANDEM_EMU_ORDER=forward ${GB} ${GPT_RESUME} --device cuda:0 --steps 4 --deterministic --dump ${GT}/det1 >/dev/null && TANDEM_EMU_ORDER=reverse ${GB} ${GPT_RESUME} --device cuda:0 --steps 4 --deterministic --dump ${GT}/det2 >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/det1 ${GT}/det2 0")
# A captured step replays as the eager step, bit for bit (f32 and bf16 autocast, dropout drawn
# per replay by the modules' streams and the attention's generator).
foreach(amp off bf16)
  add_test(NAME gpu.gpt.train.graph_equals_eager_${amp} COMMAND sh -c
    "${GPT_GPU_SKIP}; ${GB} ${GPT_RESUME} --device cuda:0 --steps 6 --amp ${amp} --dump ${GT}/ge-${amp} >/dev/null && ${GB} ${GPT_RESUME} --device cuda:0 --steps 6 --amp ${amp} --graph --dump ${GT}/gg-${amp} >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/ge-${amp} ${GT}/gg-${amp} 0")
  set_tests_properties(gpu.gpt.train.graph_equals_eager_${amp} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endforeach()
set_tests_properties(gpu.gpt.train.deterministic_bitwise PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# ---- the nanoGPT round trip, with PyTorch (Debian's, /usr/bin/python3; without it this FAILS as the
# peer tests do): a nanoGPT init written by PyTorch in both safetensors forms (save_model's tied
# one and the plain state_dict) trains identically from either (--init), and the --dump loads
# back into nanoGPT with load_state_dict(strict=True), whose forward gives the loss tandem's gives.
set(GPT_PYTHON /usr/bin/python3 CACHE FILEPATH "the python with torch the nanoGPT round trip uses")
set(RT ${PROJECT_SOURCE_DIR}/suites/golden/nanogpt_roundtrip.py)
add_test(NAME gpt.nanogpt_roundtrip COMMAND sh -c
  "${GPT_PYTHON} ${RT} save --config 2,2,32,16,67 --seed 7 --tied ${GT}/nano-tied --plain ${GT}/nano-plain || exit 1; for f in tied plain; do ${GB} ${TRAIN_GPT} --steps 3 --init ${GT}/nano-$f --data ${GPT_GOLD_DIR}/tokens.safetensors --dump ${GT}/rt-$f >/dev/null || exit 1; done; $<TARGET_FILE:test_dump_compare> ${GT}/rt-tied ${GT}/rt-plain 0 || exit 1; loss=$($<TARGET_FILE:test_gpt> eval ${GT}/rt-tied gpt:L2-H2-D32-T16-V67 ${GPT_GOLD_DIR}/tokens.safetensors 8:16) || exit 1; echo \"tandem's loss $loss\"; ${GPT_PYTHON} ${RT} load ${GT}/rt-tied --config 2,2,32,16,67 --data ${GPT_GOLD_DIR}/tokens.safetensors --rows 8:16 --expect $loss --rtol 1e-5")
set_tests_properties(gpt.nanogpt_roundtrip PROPERTIES TIMEOUT 120)

# Two ranks on cuda:0 and cuda:1 (NCCL, or the host path) with micro-batches train as one rank
# does (train_gpu.cmake's gpu.train.ranks_accumulate_equal_one_rank, on the GPT).
add_test(NAME gpu.gpt.train.ranks_accumulate_equal_one_rank COMMAND sh -c
  "${GPT_GPU_SKIP}; out=$(${GB} ${TRAIN_GPT_SGD} --device cuda:0 --ranks 2 --accumulate 2 --dump ${GT}/gra2 2>&1); rc=$?; case \"$out\" in *'needs one GPU per rank'*) echo \"SKIP: $out\" | head -1; exit 77;; esac; echo \"$out\"; [ $rc -eq 0 ] || exit 1; ${GB} ${TRAIN_GPT_SGD} --device cuda:0 --dump ${GT}/gra1 >/dev/null && $<TARGET_FILE:test_dump_compare> ${GT}/gra1 ${GT}/gra2 2e-5")
set_tests_properties(gpu.gpt.train.ranks_accumulate_equal_one_rank PROPERTIES LABELS "gpu;nccl"
                     SKIP_RETURN_CODE 77 TIMEOUT 300)

# --profile on the GPT: the trace names its ops (attention, layer norm, embedding, the tied head's
# linear), and activation checkpointing (one block a segment) lowers the peak memory that
# bench train reports (the memory statistics), on the cpu and on cuda:0.
set(GPT_BIG "train --model gpt:L4-H2-D64-T16-V67 --batch 8 --steps 2 --opt adamw --data ${GPT_GOLD_DIR}/tokens.safetensors")
add_test(NAME gpt.train.profile COMMAND sh -c
  "${GB} ${GPT_BIG} --steps 3 --profile ${GT}/prof.json > ${GT}/prof.txt || exit 1; cat ${GT}/prof.txt; for op in scaled_dot_product_attention layer_norm embedding linear cross_entropy; do grep -q \"$op\" ${GT}/prof.json || { echo \"$op not in the trace\"; exit 1; }; done")
foreach(dev cpu cuda)
  set(pre gpt)
  set(d cpu)
  set(skip "")
  if(dev STREQUAL "cuda")
    set(pre gpu.gpt)
    set(d cuda:0)
    set(skip "${GPT_GPU_SKIP}; ")
  endif()
  add_test(NAME ${pre}.train.checkpointing_lowers_peak_memory COMMAND sh -c
    "${skip}a=$(${GB} ${GPT_BIG} --device ${d} | sed -n 's/.*peak memory \\([0-9.]*\\) MB.*/\\1/p'); b=$(${GB} ${GPT_BIG} --device ${d} --checkpoint-segments 4 | sed -n 's/.*peak memory \\([0-9.]*\\) MB.*/\\1/p'); echo \"peak $a MB, checkpointed $b MB\"; [ -n \"$a\" ] && [ -n \"$b\" ] && awk -v a=$a -v b=$b 'BEGIN { exit !(b < 0.9 * a) }'")
endforeach()
set_tests_properties(gpu.gpt.train.checkpointing_lowers_peak_memory PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# ---- the suites' GPT benchmarks (amp, graphs, cpu-vs-gpu, scaling, pipeline) -----------------------
# On the cpu: the tiny GPT's amp, cpu-vs-gpu, scaling (1 and 2 thread ranks) and pipeline (token
# rows through the data loader: the last batch checked against the dataset) benchmarks run,
# verify (the loss falls, within 5 % of f32's; identical replicas) and report tokens/s; on cuda:0
# (the tiny GPT on the emulated device, GPT-2 124M's T256 form on a GPU) the same plus the graphs
# pair, and the report has the "graph / eager (gpt)" ratio row.
add_test(NAME gpt.bench.suites_quick COMMAND sh -c
  "d=${GT}/bench-cpu; rm -rf $d; out=$(${GB} run --device cpu --quick --repetitions 1 --min-time 0.001 --suite amp,cpu-vs-gpu,scaling,pipeline --filter gpt --out $d 2>&1); rc=$?; echo \"$out\"; [ $rc = 0 ] || exit 1; echo \"$out\" | grep -q 'results in .*: 15 finished, 0 failed, 0 unfinished' && echo \"$out\" | grep -q 'gpt_load_prefetch/workers:2 .*tokens/s' || exit 1; echo \"$out\" | grep -q 'train_gpt_tiny_bf16.*tokens/s' && echo \"$out\" | grep -q 'dp_weak_gpt_tiny/ranks:2.*tokens/s' && ${GB} report $d > /dev/null && grep -q 'bf16 / f32 (gpt.*tiny)' $d/report.md && grep -q 'overlap / no overlap (weak, gpt.*tiny)' $d/report.md")
add_test(NAME gpu.bench.gpt_quick COMMAND sh -c
  "${GPT_GPU_SKIP}; d=${GT}/bench-cuda0; rm -rf $d; out=$(${GB} run --device cuda:0 --quick --repetitions 1 --min-time 0.001 --suite amp,cpu-vs-gpu,pipeline --filter gpt --out $d 2>&1); rc=$?; echo \"$out\"; [ $rc = 0 ] || exit 1; echo \"$out\" | grep -q 'results in .*: 11 finished, 0 failed, 0 unfinished' || exit 1; ${GB} report $d > /dev/null && grep -q 'pinned / sync.*pageable (gpt)' $d/report.md")
set_tests_properties(gpu.bench.gpt_quick PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
# scaling apart: its ranks all-reduce through NCCL, which needs the caching allocator (label nccl:
# the emu-nocache run leaves it out)
add_test(NAME gpu.bench.gpt_scaling_quick COMMAND sh -c
  "${GPT_GPU_SKIP}; d=${GT}/bench-scaling-cuda0; rm -rf $d; out=$(${GB} run --device cuda:0 --quick --repetitions 1 --min-time 0.001 --suite scaling --filter gpt --out $d 2>&1); rc=$?; echo \"$out\"; [ $rc = 0 ] || exit 1; echo \"$out\" | grep -q 'results in .*: [0-9]* finished, 0 failed, 0 unfinished' && echo \"$out\" | grep -q 'dp_weak_gpt_.*/ranks:1 .*tokens/s' || exit 1")
set_tests_properties(gpu.bench.gpt_scaling_quick PROPERTIES LABELS "gpu;nccl" SKIP_RETURN_CODE 77 TIMEOUT 600)
# the graphs pair apart: a captured step needs the caching allocator (the emu-nocache run leaves
# tests named *graph* out)
add_test(NAME gpu.bench.gpt_graph_quick COMMAND sh -c
  "${GPT_GPU_SKIP}; d=${GT}/bench-graph-cuda0; rm -rf $d; out=$(${GB} run --device cuda:0 --quick --repetitions 1 --min-time 0.001 --suite graphs --filter gpt --out $d 2>&1); rc=$?; echo \"$out\"; [ $rc = 0 ] || exit 1; echo \"$out\" | grep -q 'results in .*: 2 finished, 0 failed, 0 unfinished' || exit 1; ${GB} report $d > /dev/null && grep -q 'graph / eager (gpt)' $d/report.md")
set_tests_properties(gpu.bench.gpt_graph_quick PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

# GPT-2 124M itself on the reference (the oracle, "slowly but correctly"): nanoGPT's gpt2 config
# (12 layers, 12 heads, width 768, context 1024, vocabulary 50257) initialised by PyTorch (seed 7,
# a 498 MB safetensors file), loaded with --init's loader; the reference's eval loss on 2 rows of
# 16 tokens equals nanoGPT's forward within rtol 1e-5 (the round trip's tolerance; the f32 forward
# against the reference's f64 sums). Not in sanitized builds (a forward of 124M parameters there
# takes minutes); the files are removed at the end.
if(NOT TDM_SANITIZE)
  add_test(NAME gpt.reference_gpt2_124m COMMAND sh -c
    "f=${GT}/gpt2-124m; ${GPT_PYTHON} ${RT} save --config 12,12,768,1024,50257 --seed 7 --tied $f || exit 1; loss=$($<TARGET_FILE:test_gpt> eval $f gpt:L12-H12-D768-T1024-V50257 ${GPT_GOLD_DIR}/tokens.safetensors 0:2); rc=$?; [ $rc = 0 ] || { rm -f $f; exit 1; }; echo \"tandem's loss $loss\"; ${GPT_PYTHON} ${RT} load $f --config 12,12,768,1024,50257 --data ${GPT_GOLD_DIR}/tokens.safetensors --rows 0:2 --expect $loss --rtol 1e-5; rc=$?; rm -f $f; exit $rc")
  set_tests_properties(gpt.reference_gpt2_124m PROPERTIES TIMEOUT 600)
endif()
