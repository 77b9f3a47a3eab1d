# nn.cmake — the modules' tests (test_nn.c): model grammar, init, forward, train/eval, state dict
# save/load, activation checkpointing.
tdm_test_executable(nn)
foreach(area spec init init_copy forward train_eval state checkpoint)
  add_test(NAME nn.${area} COMMAND test_nn ${area} ${TEST_TMP})
endforeach()
