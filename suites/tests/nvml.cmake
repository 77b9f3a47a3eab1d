# nvml.cmake — how the CUDA backend reads a GPU's temperature through NVML
# (kernels/cuda_backend.cu, NVML opened at run time): nvmlDeviceGetTemperatureV, whose struct and
# version it fills as NVML wants, and the deprecated nvmlDeviceGetTemperature only from a driver
# without the V form. On the emulated device (label emu), `bench env --json` against a stand-in
# libnvidia-ml.so.1 (fake_nvml.c) found first on LD_LIBRARY_PATH: 61 C from the V form when the
# library has it, 17 C from the old one when it has only that. Then bench check's error counters
# and Xid events through the same stand-in, with faults planted by the environment, and the
# sustained load's telemetry with a planted thermal throttle.
if(TDM_CUDA_EMU)
  foreach(kind v old)
    add_library(fake_nvml_${kind} SHARED fake_nvml.c)
    set_target_properties(fake_nvml_${kind} PROPERTIES OUTPUT_NAME nvidia-ml SOVERSION 1
                          LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_${kind})
    add_dependencies(bench fake_nvml_${kind})
  endforeach()
  target_compile_definitions(fake_nvml_v PRIVATE FAKE_NVML_V)
  add_test(NAME emu.nvml.temperature_v COMMAND sh -c
    "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v $<TARGET_FILE:bench> env --json")
  add_test(NAME emu.nvml.temperature_old_driver COMMAND sh -c
    "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_old $<TARGET_FILE:bench> env --json")
  set_tests_properties(emu.nvml.temperature_v PROPERTIES LABELS emu
                       PASS_REGULAR_EXPRESSION "\"temperature_c\":[ \t]*61[,\n]")
  set_tests_properties(emu.nvml.temperature_old_driver PROPERTIES LABELS emu
                       PASS_REGULAR_EXPRESSION "\"temperature_c\":[ \t]*17[,\n]")
  # bench env shows the error counters since boot that bench check takes deltas of (the stand-in:
  # 3 PCIe replays, 2 NVLinks up); without NVML, no counters line
  add_test(NAME emu.nvml.env_counters COMMAND sh -c
    "out=$(LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v $<TARGET_FILE:bench> env); echo \"$out\"; echo \"$out\" | grep -E '^gpu 0 counters: +since boot: PCIe replays 3, corrected ECC 0, NVLink 2 links up: CRC 0, replay 0, recovery 0$' && LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v $<TARGET_FILE:bench> env --json | grep -E '\"pcie_replay_count\":[[:space:]]*3,' && ! $<TARGET_FILE:bench> env | grep -E '^gpu [0-9]+ counters'")
  set_tests_properties(emu.nvml.env_counters PROPERTIES LABELS emu)
endif()

# The run's error counters and Xid events end to end (bench check --level 1, docs/CHECK.md "Error
# counters and fault codes"): the stand-in NVML plants an Xid, a PCIe replay counter and an NVLink
# CRC counter that grow, corrected ECC errors; each is judged with its code on cuda:0 (a planted
# fault is a fault, on the emulated device too), and the same run without plants passes them.
if(TDM_CUDA_EMU)
  add_test(NAME emu.nvml.check_level1_planted_faults COMMAND sh -c
    "out=$(LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v FAKE_NVML_XID=79 FAKE_NVML_PCIE_REPLAY_GROWTH=5 FAKE_NVML_NVLINK_CRC_GROWTH=3 FAKE_NVML_ECC_CORRECTED_GROWTH=2 $<TARGET_FILE:bench> check --level 1 --device cuda:0 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^cuda:0 +nvml.xid +Xid 79 .* FAIL +TDM-F060' && echo \"$out\" | grep -E '^cuda:0 +nvml.pcie_replay +\\+5 \\(3 -> 8\\) .* WARN +TDM-F032' && echo \"$out\" | grep -E '^cuda:0 +nvml.nvlink +2 links: CRC \\+3, .* WARN +TDM-F070' && echo \"$out\" | grep -E '^cuda:0 +nvml.ecc_delta +uncorrected \\+0, corrected \\+2 .* WARN +TDM-F057' && echo \"$out\" | grep -E '^FAIL: 1 check failed: cuda:0 nvml.xid$'")
  add_test(NAME emu.nvml.check_level1_no_fault COMMAND sh -c
    "out=$(LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v $<TARGET_FILE:bench> check --level 1 --device cuda:0 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 3 ] || { echo \"exit $rc, want 3\"; exit 1; }; [ $(echo \"$out\" | grep -cE '^cuda:0 +nvml.(xid|pcie_replay|nvlink|ecc_delta) .*  PASS ') -eq 4 ] && ! echo \"$out\" | grep -E 'TDM-F'")
  set_tests_properties(emu.nvml.check_level1_planted_faults emu.nvml.check_level1_no_fault
                       PROPERTIES LABELS emu TIMEOUT 300)
endif()

# The sustained load's telemetry end to end (bench check --level 3, docs/CHECK.md "Sustained and
# pulsed load"): through the stand-in NVML, tdm_device_telemetry_read's readings go into the series
# (the instantaneous 300 W of NVML_FI_DEV_POWER_INSTANT, not the 250 W average, its source said;
# each phase's mean power from the energy counter, 250 W; the violation times per phase; the
# calibration after an untimed warm-up, its window at least window_s of GPU time; 1593 MHz memory
# clock), and a hw thermal slowdown planted from the 8th read of the
# clocks-event reasons on (FAKE_NVML_THROTTLE_AFTER) shows in the recorded series — none at first,
# 0x40 and the SM clock at 1005 MHz after — and is judged a FAIL naming it (a stand-in's planted
# fault is a fault on the emulated device too, as for the error counters).
if(TDM_CUDA_EMU)
  set(NVML_L3 ${TEST_TMP}/nvml-level3-throttle)
  add_test(NAME emu.nvml.check_level3_thermal_throttle COMMAND sh -c
    "rm -rf ${NVML_L3}; out=$(LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v FAKE_NVML_THROTTLE_AFTER=8 $<TARGET_FILE:bench> check --level 3 --duration 2 --device cuda:0 --out ${NVML_L3} 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^cuda:0 +sustained.throttle +hw thermal .* FAIL +TDM-F105 +hw thermal in [0-9]+ % of the samples \\(from t = [0-9.]+ s\\)' && echo \"$out\" | grep -E '^cuda:0 +sustained.power .* EMULATED' && echo \"$out\" | grep -E '^FAIL: 1 check failed: cuda:0 sustained.throttle$' || exit 1; python3 -c \"import json,sys; s=json.load(open(sys.argv[1]))['check']['gpus'][0]['series']['sustained.load']; r=s['throttle_reasons']; assert r[0] == 0 and r[-1] == 64 and r == sorted(r), r; assert s['power_source'] == 'instant' and all(p == 300 for p in s['power_w']) and all(m == 1593 for m in s['mem_clock_mhz']), s; ph=s['phases']; assert sorted(ph) == ['calibrate','power','stress'], ph; assert all(abs(ph[k]['mean_power_w'] - 250) < 12.5 and ph[k]['violation_s']['thermal'] == 0 and ph[k]['violation_s']['power'] == 0 for k in ph), ph; c=s['calibration']; assert c['warmup_s'] > 0 and c['seconds'] >= s['window_s'], (c, s['window_s']); assert s['sm_clock_mhz'][0] == 1410 and s['sm_clock_mhz'][-1] == 1005, s['sm_clock_mhz']; assert s['nvml'] == '', s['nvml']; print(r)\" ${NVML_L3}/status.json")
  set_tests_properties(emu.nvml.check_level3_thermal_throttle PROPERTIES LABELS emu TIMEOUT 300)
  # hw slowdown and a reason bit NVML defined later (0x200) sampled, with no thermal, board-limit or
  # reliability violation time: kept in the series, named, and not a fault (NVML: hw slowdown may be
  # reported during a P-state or clock change); the recorded figures read back (not refused)
  set(NVML_L3S ${TEST_TMP}/nvml-level3-slowdown)
  add_test(NAME emu.nvml.check_level3_slowdown_attributed COMMAND sh -c
    "rm -rf ${NVML_L3S}; out=$(LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v FAKE_NVML_THROTTLE_AFTER=8 FAKE_NVML_THROTTLE=0x208 FAKE_NVML_NO_INSTANT=1 $<TARGET_FILE:bench> check --level 3 --duration 2 --device cuda:0 --out ${NVML_L3S} 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 3 ] || { echo \"exit $rc, want 3\"; exit 1; }; echo \"$out\" | grep -E '^cuda:0 +sustained.throttle +none .* PASS +.*hw slowdown in [0-9]+ % of the samples .*a P-state or clock change, not a fault.*unknown 0x200' || exit 1; python3 -c \"import json,sys; s=json.load(open(sys.argv[1]))['check']['gpus'][0]['series']['sustained.load']; assert s['power_source'] == 'average' and all(p == 250 for p in s['power_w']), s; assert s['throttle_reasons'][-1] == 0x208, s['throttle_reasons']\" ${NVML_L3S}/status.json || exit 1; python3 -c \"import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['check']))\" ${NVML_L3S}/status.json > ${NVML_L3S}/figures.json && $<TARGET_FILE:bench> check --from-figures ${NVML_L3S}/figures.json > /dev/null; rc=$?; [ $rc -eq 3 ] || { echo \"--from-figures: exit $rc, want 3\"; exit 1; }")
  set_tests_properties(emu.nvml.check_level3_slowdown_attributed PROPERTIES LABELS emu TIMEOUT 300)
  # the memory test judged with NVML's counters read around it: an uncorrected ECC error counted
  # during the test FAILs it though no word read wrong (ECC hid it); none: a pass
  add_test(NAME emu.nvml.memtest_ecc_during_test_fails COMMAND sh -c
    "out=$(LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v FAKE_NVML_ECC_UNCORRECTED_GROWTH=1 $<TARGET_FILE:bench> check --memtest --device cuda:0 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] || { echo \"exit $rc, want 1\"; exit 1; }; echo \"$out\" | grep -E '^cuda:0 +memory.test +0 errors in .* FAIL .*NVML counted during the test: uncorrected ECC errors \\+1' || exit 1; out=$(LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_v $<TARGET_FILE:bench> check --memtest --device cuda:0 --json 2>&1); rc=$?; [ $rc -eq 0 ] || { echo \"$out\"; echo \"clean: exit $rc, want 0\"; exit 1; }; echo \"$out\" | python3 -c \"import json,sys; e=json.load(sys.stdin)['gpus'][0]; n=e['nvml']; assert n['start']['ecc_uncorrected_volatile'] == 0 and n['end']['remapped_rows_pending'] == 0 and n['why'] == '', n; assert e['evictions'] == e['verify_steps'] > 0, e\"")
  set_tests_properties(emu.nvml.memtest_ecc_during_test_fails PROPERTIES LABELS emu TIMEOUT 300
                       ENVIRONMENT "TANDEM_EMU_MEM=2M")
endif()
