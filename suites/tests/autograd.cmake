# autograd.cmake — the autograd engine and autocast (test_autograd.c), one test per feature.
tdm_test_executable(autograd)
foreach(t gradcheck ops accumulate reuse nograd hooks autocast lifetime microbatch)
  add_test(NAME autograd.${t} COMMAND test_autograd ${t})
endforeach()
