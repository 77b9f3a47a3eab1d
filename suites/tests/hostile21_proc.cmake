# hostile21_proc.cmake — issue 21's process and state defects, one test each: `bench check`'s
# children die with it and its temporary folder goes; optimizer state that loads but cannot be
# used is refused; the emulated runtime's stream workers end before the process does (no leak at
# exit); numeric TANDEM_* values are parsed strictly; `bench train` refuses non-finite --init
# weights (exit 2) and a run whose loss is no longer finite (exit 1).
set(H21P ${TEST_TMP}/hostile21_proc)
file(MAKE_DIRECTORY ${H21P})
set(B $<TARGET_FILE:bench>)
set(EXPECT sh ${CMAKE_CURRENT_SOURCE_DIR}/expect.sh)

if(TDM_CUDA_EMU)
  # 9. A stream worker still running a kernel when the process exited held its access scope
  #    where LeakSanitizer did not look (the fiber's stack): "Direct leak of 1 byte ...
  #    worker_main". The runtime now ends and waits for its workers at exit. 50 runs, each must
  #    exit 0 with no sanitizer report.
  add_test(NAME emu.hostile21.proc.train_exit_no_leak_50_runs COMMAND sh -c "
    i=0
    while [ $i -lt 50 ]; do
      i=$((i+1))
      ${B} train --device cuda:0 --model mlp:8-4 --steps 2 --opt adam --batch 16 \
        >${H21P}/leak.log 2>&1 || { echo \"run $i of 50 failed:\"; cat ${H21P}/leak.log; exit 1; }
      if grep -q Sanitizer ${H21P}/leak.log; then cat ${H21P}/leak.log; exit 1; fi
    done
    echo '50 of 50 runs clean'")
  set_tests_properties(emu.hostile21.proc.train_exit_no_leak_50_runs PROPERTIES LABELS emu TIMEOUT 300
    PASS_REGULAR_EXPRESSION "50 of 50 runs clean"
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1")
endif()

# 7. `bench check`'s children (replay, conform, train) die with it: killed by SIGTERM, SIGINT or
#    SIGHUP it kills its running child, removes its temporary folder and ends by that signal;
#    killed by SIGKILL, its child dies too (PR_SET_PDEATHSIG). The first child, the host's
#    replay, runs on every build; test_check_signals freezes it so that it cannot finish first.
tdm_test_executable(check_signals)
foreach(sig TERM INT HUP KILL)
  add_test(NAME hostile21.proc.check_sig${sig}_kills_children COMMAND test_check_signals ${B}
           ${PROJECT_SOURCE_DIR}/suites/check/expectations.json ${H21P}/sig${sig} ${sig})
  set_tests_properties(hostile21.proc.check_sig${sig}_kills_children PROPERTIES TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "ok: SIG${sig}: the child is gone")
endforeach()

# 10a. `bench train --init` refuses weights that are not finite (exit 2, the tensor named, as it
#      is named in the file): NaN, -inf, a finite f64 that is inf as the model's f32, a golden
#      training file's init.* entry; the same weights made finite train (exit 0).
tdm_test_executable(hostile21_proc)
add_test(NAME hostile21.proc.craft COMMAND test_hostile21_proc ${H21P})
set_tests_properties(hostile21.proc.craft PROPERTIES FIXTURES_SETUP hostile21_proc)
set(H21P_INIT
  "init_nan_weight|tensor '0.weight' holds nan at element 5 \\(as f32\\)"
  "init_inf_bias|tensor '0.bias' holds -inf at element 1 \\(as f32\\)"
  "init_f64_overflow|tensor '0.weight' holds inf at element 2 \\(as f32\\)"
  "init_golden_nan|tensor 'init.0.weight' holds nan at element 0 \\(as f32\\)")
foreach(entry ${H21P_INIT})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 file)
  list(GET parts 1 re)
  add_test(NAME hostile21.proc.train_${file}_exit_2 COMMAND ${EXPECT} 2
           "^bench train: --init .*/${file}.safetensors: ${re}: the weights must be finite" --
           ${B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1 --init ${H21P}/${file}.safetensors)
  set_tests_properties(hostile21.proc.train_${file}_exit_2 PROPERTIES FIXTURES_REQUIRED hostile21_proc)
endforeach()
add_test(NAME hostile21.proc.train_init_finite_exit_0 COMMAND ${EXPECT} 0 "^trained mlp:4-2 for 2 steps" --
         ${B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1 --init ${H21P}/init_ok.safetensors)
set_tests_properties(hostile21.proc.train_init_finite_exit_0 PROPERTIES FIXTURES_REQUIRED hostile21_proc)

# 10b. A run whose loss stops being finite ends at that step with exit 1, says so, and writes no
#      --dump (it printed "loss nan" and exited 0, its dump a trajectory of NaNs).
add_test(NAME hostile21.proc.train_diverged_exit_1 COMMAND ${EXPECT} 1
         "^bench train: step 1: the loss is nan: training diverged" --not "^trained" -- sh -c
         "rm -f ${H21P}/diverged.safetensors; ${B} train --model mlp:4-2 --steps 4 --opt sgd --lr 1e300 --dump ${H21P}/diverged.safetensors; rc=$?; if [ -e ${H21P}/diverged.safetensors ]; then echo 'a dump was written'; exit 9; fi; exit $rc")

# 10c. Numbers in the environment are parsed strictly, in C (core/env_impl.h: the parser's cases
#      in test_hostile21_proc) and in the emulated device's C++ (below): "12abc", "", a sign, an
#      overflow or a value out of range is ignored with one line naming it, and the default used.
#      An MPI launcher's OMPI_COMM_WORLD_SIZE=2abc was read as 2 (a launch by mpirun).
add_test(NAME hostile21.proc.env_parse_strict COMMAND test_hostile21_proc --parse)
add_test(NAME hostile21.proc.env_mpi_size_garbage_ignored COMMAND ${EXPECT} 0
         "^tandem: ignoring OMPI_COMM_WORLD_SIZE=2abc: not a whole number from 1 to [0-9]+; using 1$" --
         env OMPI_COMM_WORLD_SIZE=2abc ${B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1)
add_test(NAME hostile21.proc.env_switch_garbage_ignored COMMAND ${EXPECT} 0
         "^tandem: ignoring TANDEM_NVTX=yes: expected 0 or 1; using 0$" --
         env TANDEM_NVTX=yes ${B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1)
if(TDM_CUDA_EMU)
  # TANDEM_EMU_MEM=17179869185G wrapped (x 2^30) to 1 GiB; TANDEM_EMU_DEVICES=2abc gave 2 devices.
  add_test(NAME emu.hostile21.proc.env_emu_values_strict
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/emu_env_strict.sh ${B})
  set_tests_properties(emu.hostile21.proc.env_emu_values_strict PROPERTIES LABELS emu TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "every malformed value refused")
endif()
