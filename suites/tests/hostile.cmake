# hostile.cmake — issue 15's defects, one test each: inputs a hostile but realistic user gives
# `bench` (crafted case files by test_hostile, a FIFO, output paths nobody can write, models
# with nothing to train), and what bench must answer: a clear message and exit 2 for bad input,
# a FAIL that names the tensor, never a crash, a hang, a sanitizer report or a file overwritten.
# expect.sh RC REGEX [--not REGEX] -- CMD... checks the exit status and the output of one command.
tdm_test_executable(hostile)
set(H ${TEST_TMP}/hostile15)
set(B $<TARGET_FILE:bench>)
set(EXPECT sh ${CMAKE_CURRENT_SOURCE_DIR}/expect.sh)
set(TRAIN_SMALL --steps 2 --opt sgd --lr 0.1)
string(JOIN " " TRAIN_SMALL_SH ${TRAIN_SMALL})   # the same inside sh -c "..."

add_test(NAME hostile.craft COMMAND test_hostile ${H} ${CASES_DIR}/mul-f32-bcast.safetensors)
set_tests_properties(hostile.craft PROPERTIES FIXTURES_SETUP hostile15)

# 2. An error that gets context added on its way up arrives whole (tdm_error_set reading the
#    buffer it writes garbled it: "step 0: step 0: tropy: target 10 ...").
add_test(NAME hostile.train_error_message_whole COMMAND ${EXPECT} 1
         "^bench train: step 0: cross_entropy: target 10 out of bounds" --not "step 0: step 0" --
         ${B} train --model mlp:4-2 --data ${H}/labels_out_of_range.safetensors --batch 2 ${TRAIN_SMALL})
# 3. A mis-shaped expected tensor is named with both shapes, not hidden behind another's ratio.
add_test(NAME hostile.replay_misshaped_output_named COMMAND ${EXPECT} 1
         "^FAIL .* mul f32: output.0: the op gave shape \\(3, 4, 5\\), the case expects \\(60\\)" --
         ${B} replay ${H}/misshaped_output.safetensors)
# 4. A zero-size tensor with huge other dims overflowed its strides (UBSan) and passed.
add_test(NAME hostile.replay_zero_size_huge_dims_exit_2 COMMAND ${EXPECT} 2
         "tensor 'input.0': tensor: shape \\(0, 1099511627776, 1099511627776\\) too large" --
         ${B} replay ${H}/zero_size_huge_dims.safetensors)
# 5. --write-actual never replaces a case being replayed, and two cases of one file name from
#    different folders do not write over each other's actuals: refused before anything runs.
add_test(NAME hostile.replay_write_actual_keeps_the_case COMMAND ${EXPECT} 2
         "the actual results of .*/a/mul-f32-bcast.safetensors would replace the case" -- sh -c
         "rm -rf ${H}/wa && mkdir -p ${H}/wa/a && cp ${CASES_DIR}/mul-f32-bcast.safetensors ${H}/wa/a/ && ${B} replay ${H}/wa/a/mul-f32-bcast.safetensors --write-actual ${H}/wa/a; rc=$?; cmp ${CASES_DIR}/mul-f32-bcast.safetensors ${H}/wa/a/mul-f32-bcast.safetensors || { echo 'the case file was replaced'; exit 3; }; exit $rc")
add_test(NAME hostile.replay_write_actual_same_names_exit_2 COMMAND ${EXPECT} 2
         "/a/relu-f32-odd.safetensors and .*/b/relu-f32-odd.safetensors would both write" -- sh -c
         "rm -rf ${H}/wn && mkdir -p ${H}/wn/a ${H}/wn/b ${H}/wn/out && cp ${CASES_DIR}/relu-f32-odd.safetensors ${H}/wn/a/ && cp ${CASES_DIR}/relu-f32-odd.safetensors ${H}/wn/b/ && exec ${B} replay ${H}/wn/a/relu-f32-odd.safetensors ${H}/wn/b/relu-f32-odd.safetensors --write-actual ${H}/wn/out")
# 6. A FIFO is not a case file: refused at once (fopen waited for a writer forever).
add_test(NAME hostile.replay_fifo_exit_2 COMMAND ${EXPECT} 2 "fifo.safetensors: not a regular file" --
         sh -c "rm -f ${H}/fifo.safetensors && mkfifo ${H}/fifo.safetensors && exec timeout 20 ${B} replay ${H}/fifo.safetensors")
# 7. safetensors' tensors tile the data exactly: two tensors over the same bytes are bad input.
add_test(NAME hostile.replay_overlapping_offsets_exit_2 COMMAND ${EXPECT} 2
         "tensor 'output.0': data_offsets \\[0, 4\\] overlap 'input.0'" --
         ${B} replay ${H}/overlapping_offsets.safetensors)
# 8. Every integer attr is range-checked before it becomes an int ("stride": 5000000000 was
#    converted with undefined behaviour and reported as -2147483648).
add_test(NAME hostile.replay_int_attr_over_int_max_exit_2 COMMAND ${EXPECT} 2
         "max_pool2d: attr 'stride' must be an integer of at most 1e9" --not "-2147483648" --
         ${B} replay ${H}/int_attr_over_int_max.safetensors)
# 9. A model with no parameters is refused up front, before minutes of synthetic labels.
add_test(NAME hostile.train_no_parameters_exit_2 COMMAND ${EXPECT} 2
         "--model cnn:3x32x32/flat: has no parameters to train" -- sh -c
         "${B} train --model cnn:1x2x2/flat ${TRAIN_SMALL_SH}; [ $? -eq 2 ] || exit 9; exec timeout 20 ${B} train --model cnn:3x32x32/flat ${TRAIN_SMALL_SH}")
# 10. Output paths are checked before training, not found unwritable after it.
add_test(NAME hostile.train_unwritable_outputs_exit_2 COMMAND ${EXPECT} 2
         "--profile /proc/x.json: cannot write" -- sh -c
         "${B} train --model mlp:4-2 ${TRAIN_SMALL_SH} --dump /nonexistent/x.safetensors; [ $? -eq 2 ] || exit 9; exec ${B} train --model mlp:4-2 ${TRAIN_SMALL_SH} --profile /proc/x.json")
# 11. Allocations a case file or a command line decides are checked against the cap (1 TiB on
#     one allocation) and the machine's memory before they are made (ASan aborted on them).
add_test(NAME hostile.replay_scratch_over_cap_exit_2 COMMAND ${EXPECT} 2
         "reference backend scratch: 274877906944 x 8 bytes are over tandem's cap" --
         ${B} replay ${H}/batch_norm_scratch_over_cap.safetensors)
add_test(NAME hostile.replay_output_over_memory_exit_2 COMMAND ${EXPECT} 2
         "tensor: 549755813888 bytes .* more than this machine's memory" --
         ${B} replay ${H}/add_output_over_memory.safetensors)
# Found by io.fuzz_replay_end_to_end below: a channels_last conv2d case with a 5-D input.
add_test(NAME hostile.replay_channels_last_rank_exit_2 COMMAND ${EXPECT} 2
         "conv2d: memory_format 'channels_last' takes 3-D or 4-D tensors, got a 5-D one" --
         ${B} replay ${H}/conv2d_channels_last_5d.safetensors)
add_test(NAME hostile.train_batch_over_cap_exit_2 COMMAND ${EXPECT} 2
         "--batch: 2147483647 x 4096 bytes are over tandem's cap" --
         ${B} train --model mlp:1024-2 --batch 2147483647 ${TRAIN_SMALL})

set_tests_properties(hostile.train_error_message_whole hostile.replay_misshaped_output_named
  hostile.replay_zero_size_huge_dims_exit_2 hostile.replay_overlapping_offsets_exit_2
  hostile.replay_int_attr_over_int_max_exit_2 hostile.replay_scratch_over_cap_exit_2
  hostile.replay_output_over_memory_exit_2 hostile.replay_fifo_exit_2
  hostile.replay_channels_last_rank_exit_2 PROPERTIES FIXTURES_REQUIRED hostile15)
set_tests_properties(hostile.replay_fifo_exit_2 hostile.train_no_parameters_exit_2 PROPERTIES TIMEOUT 60)

# The fuzzing that found them, kept: seeded mutations of every golden case file (bytes, numbers
# in the header, and valid files with hostile shapes and attrs) replayed end to end by
# `bench replay --write-actual`, 16 files a run: exit 0, 1 or 2 only; no signal, no hang, no
# sanitizer report; a failing batch is kept under fuzz-replay/failed-*. Bounded (3200 mutants,
# seed 15; another seed: test_fuzz --replay BENCH DIR N SEED CASES...); under the ASan build
# it is what finds memory errors.
add_test(NAME io.fuzz_replay_end_to_end
         COMMAND test_fuzz --replay ${B} ${TEST_TMP}/fuzz-replay 3200 15 ${GOLDEN_CASES})
set_tests_properties(io.fuzz_replay_end_to_end PROPERTIES TIMEOUT 900)
