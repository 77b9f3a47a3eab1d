# memtest.cmake — the device memory test (tandem/memtest.h, kernels/k_memtest.cu, docs/CHECK.md
# "Memory test"): its parameters and the cpu's clear refusal (memtest.api, any build); on cuda:0
# (label gpu, exit 77 without a device) a clean run over >= 90 % of the free memory that gives the
# memory back; on the emulated device (label emu) a stuck bit planted with TANDEM_EMU_FLIP_BIT
# (stuck at 0, and at 1 on cuda:1) found by every pattern at exactly its address and bit; and
# `bench check --memtest`: exit 0 clean, exit 1 with the stuck cell's address and bit in its
# output, exit 3 without a GPU, exit 2 for options it does not take. The emulated devices get
# 4 MiB each (TANDEM_EMU_MEM) so that the 148 sweeps over 95 % of it stay within seconds under
# the sanitizers.
tdm_test_executable(memtest)
add_test(NAME memtest.api COMMAND test_memtest api)
add_test(NAME gpu.memtest.clean COMMAND test_memtest clean)
set_tests_properties(gpu.memtest.clean PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     ENVIRONMENT "TANDEM_EMU_MEM=4M")

# the L2 evicted before every reading step (twice the L2: 80 MiB of the emulated A100's 256 MiB)
add_test(NAME gpu.memtest.l2_evicted COMMAND test_memtest evict)
set_tests_properties(gpu.memtest.l2_evicted PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     ENVIRONMENT "TANDEM_EMU_MEM=256M")

set(MEMTEST_BENCH "$<TARGET_FILE:bench> check --memtest")
add_test(NAME gpu.check.memtest_clean_exit_0 COMMAND sh -c
  "out=$(${MEMTEST_BENCH} --device cuda:0 2>&1); rc=$?; echo \"$out\"; case \"$out\" in *'bench check: no GPU'*) echo 'SKIP: no CUDA device'; exit 77;; esac; [ $rc -eq 0 ] || { echo \"exit $rc, want 0\"; exit 1; }; echo \"$out\" | grep -E '^cuda:0 +memory.test +0 errors in .* PASS' || exit 1; if echo \"$out\" | grep -q 'Emulated CUDA device'; then echo \"$out\" | grep -E '^cuda:0 +memory.test .* s  EMULATED' || exit 1; fi")
set_tests_properties(gpu.check.memtest_clean_exit_0 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     ENVIRONMENT "TANDEM_EMU_MEM=4M")
# (cuda:99: where a device is present, bad input at once, not a test of every device)
add_test(NAME check.memtest_no_gpu_exit_3 COMMAND sh -c
  "out=$(${MEMTEST_BENCH} --device cuda:99 2>&1); rc=$?; echo \"$out\"; case \"$out\" in *'bench check: no GPU'*) ;; *) echo 'SKIP: a CUDA device is present'; exit 77;; esac; [ $rc -eq 3 ] && echo \"$out\" | grep -q '^NO GPU: the memory test needs a CUDA device'")
set_tests_properties(check.memtest_no_gpu_exit_3 PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME check.memtest_bad_arguments_exit_2 COMMAND sh -c
  "for a in '--quick' '--device tpu:0' '--out /tmp/x' 'extra' '--seed x'; do ${MEMTEST_BENCH} $a; rc=$?; [ $rc -eq 2 ] || { echo \"exit $rc for: $a\"; exit 1; }; done")

if(TDM_CUDA_EMU)
  target_compile_definitions(test_memtest PRIVATE TDM_TEST_EMU)
  # 3 MiB + 1234 bytes into the device's address range: inside the tested memory (its first
  # MiB is the arena's unused lead)
  add_test(NAME emu.memtest.stuck_at_0 COMMAND test_memtest stuck)
  set_tests_properties(emu.memtest.stuck_at_0 PROPERTIES LABELS emu
                       ENVIRONMENT "TANDEM_EMU_MEM=4M;TANDEM_EMU_FLIP_BIT=3146962:5")
  # a bad region (256 KiB overwritten once the stuck cell is found): bounded atomics per bad word
  add_test(NAME emu.memtest.bad_region_bounded_atomics COMMAND test_memtest region)
  set_tests_properties(emu.memtest.bad_region_bounded_atomics PROPERTIES LABELS emu
                       ENVIRONMENT "TANDEM_EMU_MEM=4M;TANDEM_EMU_FLIP_BIT=3146962:5")
  add_test(NAME emu.memtest.stuck_at_1_cuda1 COMMAND test_memtest stuck)
  set_tests_properties(emu.memtest.stuck_at_1_cuda1 PROPERTIES LABELS emu
                       ENVIRONMENT "TANDEM_EMU_MEM=4M;TANDEM_EMU_DEVICES=2;TANDEM_EMU_FLIP_BIT=2621447:0:1;TANDEM_EMU_FLIP_DEVICE=1")
  # bench check --memtest over both devices: cuda:0 passes, cuda:1 fails naming the byte the
  # emulator says it planted (its line on stderr) and the bit; exit 1
  add_test(NAME emu.check.memtest_stuck_bit_exit_1 COMMAND sh -c
    "out=$(${MEMTEST_BENCH} 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; at=$(echo \"$out\" | sed -n 's/^tandem emu: TANDEM_EMU_FLIP_BIT: bit 3 of the byte at \\(0x[0-9a-f]*\\) (emulated cuda:1 .*/\\1/p'); [ -n \"$at\" ] || { echo 'no planted address'; exit 1; }; echo \"$out\" | grep -E '^cuda:0 +memory.test .* PASS' && echo \"$out\" | grep -E '^cuda:1 +memory.test .* FAIL' && echo \"$out\" | grep -E \"^cuda:1 +failing address .*: bit 3 of the byte at $at\\$\" && ! echo \"$out\" | grep -E '^cuda:0 +failing' && echo \"$out\" | grep -q '^FAIL: the memory test failed on 1 of 2 GPUs'")
  set_tests_properties(emu.check.memtest_stuck_bit_exit_1 PROPERTIES LABELS emu
                       ENVIRONMENT "TANDEM_EMU_MEM=4M;TANDEM_EMU_DEVICES=2;TANDEM_EMU_FLIP_BIT=3146962:3;TANDEM_EMU_FLIP_DEVICE=1")
  # level 4 runs the memory test on every GPU: a stuck bit 48 MiB into cuda:0's 64 MiB (away from
  # what level 2's own measurements use) FAILs memory.test with its code, and the check exits 1
  add_test(NAME emu.check.level4_memtest_stuck_bit_fail COMMAND sh -c
    "out=$($<TARGET_FILE:bench> check --level 4 --duration 2 --device cuda:0 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^cuda:0 +memory.test +[1-9][0-9]* errors? in .* FAIL +TDM-F058 ' && echo \"$out\" | grep -E '^FAIL: .*cuda:0 memory.test'")
  set_tests_properties(emu.check.level4_memtest_stuck_bit_fail PROPERTIES LABELS emu TIMEOUT 600
                       ENVIRONMENT "TANDEM_EMU_MEM=64M;TANDEM_EMU_FLIP_BIT=50331771:5;TANDEM_EMU_FLIP_DEVICE=0")
  # a malformed switch is ignored with one line naming it, as every TANDEM_EMU_* (no bit stuck)
  add_test(NAME emu.memtest.flip_bit_malformed_ignored COMMAND sh -c
    "for v in 12abc 5:8 5 5:1:2 -5:1 :3 99G:1; do out=$(TANDEM_EMU_FLIP_BIT=$v ${MEMTEST_BENCH} --device cuda:99 2>&1); echo \"$out\"; echo \"$out\" | grep -q \"^tandem emu: ignoring TANDEM_EMU_FLIP_BIT\" || { echo \"$v: not refused\"; exit 1; }; ! echo \"$out\" | grep -q 'is stuck at' || exit 1; done")
  set_tests_properties(emu.memtest.flip_bit_malformed_ignored PROPERTIES LABELS emu)
endif()
