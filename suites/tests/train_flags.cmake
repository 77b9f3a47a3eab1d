# train_flags.cmake — `bench train --clip-grad-norm / --lr-schedule / --weight-decay-matrices-only`
# (issue 23; test_train_flags.c): the dumps equal the same training written with the API bit for
# bit (cpu; cuda:0, label gpu, also with --graph: the clipping captured, the lr written before
# each replay), each flag changes the result, and malformed values exit 2 with a message.
tdm_test_executable(train_flags)
set(TF_GOLD ${PROJECT_SOURCE_DIR}/suites/golden/train/mlp-sgd-off.safetensors)
set(TF_DIR ${TEST_TMP}/train_flags)
file(MAKE_DIRECTORY ${TF_DIR})
add_test(NAME train.flags_match_api_loop
         COMMAND test_train_flags $<TARGET_FILE:bench> ${TF_GOLD} ${TF_DIR} cpu)
add_test(NAME gpu.train.flags_match_api_loop
         COMMAND test_train_flags $<TARGET_FILE:bench> ${TF_GOLD} ${TF_DIR} cuda:0)
# (graph in the name: emu-nocache leaves it out, capture needs the caching allocator)
add_test(NAME gpu.graph.train_flags_match_api_loop
         COMMAND test_train_flags $<TARGET_FILE:bench> ${TF_GOLD} ${TF_DIR} cuda:0 graph)
set_tests_properties(gpu.train.flags_match_api_loop gpu.graph.train_flags_match_api_loop
                     PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
add_test(NAME train.flags_bad_arguments_exit_2 COMMAND sh -c
  "for args in '--clip-grad-norm -1' '--clip-grad-norm x' '--lr-schedule cosine:5:2:0.1' '--lr-schedule cosine:1:2' '--lr-schedule linear:1:2:0' '--lr-schedule cosine:-1:2:0' '--lr-schedule cosine:1:2:-0.5'; do out=$($<TARGET_FILE:bench> train --model mlp:20-5 --batch 4 --steps 1 --opt sgd --lr 0.1 $args 2>&1); rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $args\"; exit 1; }; echo \"$out\" | grep -q -- \"$(echo $args | cut -d' ' -f1)\" || { echo \"no message naming the flag for: $args: $out\"; exit 1; }; done")
# With data parallel and micro-batches the clipping sees the averaged / accumulated gradients
# (after the all-reduce): 4 ranks and 4 micro-batches stay within train.cmake's 2e-5 of one rank.
set(TF_RUN "train --model mlp:20-64-32-5 --batch 16 --steps 8 --opt adamw --lr 0.01 --weight-decay 0.1 --clip-grad-norm 0.5 --lr-schedule cosine:2:6:0.001 --weight-decay-matrices-only --init ${TF_GOLD} --data ${TF_GOLD}")
add_test(NAME train.flags_ranks_accumulate_equal_one_rank COMMAND sh -c
  "$<TARGET_FILE:bench> ${TF_RUN} --dump ${TF_DIR}/r1 >/dev/null && $<TARGET_FILE:bench> ${TF_RUN} --ranks 4 --dump ${TF_DIR}/r4 >/dev/null && $<TARGET_FILE:bench> ${TF_RUN} --accumulate 4 --dump ${TF_DIR}/a4 >/dev/null && $<TARGET_FILE:test_dump_compare> ${TF_DIR}/r1 ${TF_DIR}/r4 2e-5 && $<TARGET_FILE:test_dump_compare> ${TF_DIR}/r1 ${TF_DIR}/a4 2e-5")
