# hostile36.cmake — issue 36 item 2: the findings of the hostile-input attack on the newest
# surfaces that are not bench check's judge. One test each, every one seconds long: a case file
# with an input width of 0 (a read past a bound's scratch under ASan), a few-hundred-byte
# attention case that asked for gigabytes or hours, a results directory named twice in a fleet,
# an llm.c token file that is a FIFO, bench train's and bench conform's arguments that were
# accepted and did nothing or the wrong thing, and a long series that gnuplot took minutes to draw.
# test_hostile36 writes the crafted case files; expect.sh RC REGEX [--not REGEX] -- CMD...
tdm_test_executable(hostile36)
set(H36 ${TEST_TMP}/hostile36)
set(H36_B $<TARGET_FILE:bench>)
set(H36_EXPECT sh ${CMAKE_CURRENT_SOURCE_DIR}/expect.sh)

add_test(NAME hostile36.craft COMMAND sh -c "mkdir -p ${H36}/cases && exec $<TARGET_FILE:test_hostile36> ${H36}/cases")
set_tests_properties(hostile36.craft PROPERTIES FIXTURES_SETUP hostile36_cases)

# 1. linear_gelu_linear with an input width of 0 (x (2,0), w1 (5,0)): the bound took the rows
#    from x's numel over its width and read the output's rows past its scratch (ASan: a
#    heap-buffer-overflow; the release build's verdict was heap garbage). Forward and backward
#    pass: y = b2, gb1 and gb2 from the two rows.
add_test(NAME hostile36.replay_lgl_zero_width COMMAND ${H36_EXPECT} 0 "2 passed, 0 failed, 0 bad input"
         -- ${H36_B} replay ${H36}/cases/lgl_zero_width.safetensors
         ${H36}/cases/lgl_zero_width_grad.safetensors)
set_tests_properties(hostile36.replay_lgl_zero_width PROPERTIES FIXTURES_REQUIRED hostile36_cases)

# 4. Attention over tensors with no data: the attention weights (batch, L, S) that no tensor of
#    the file holds are bounded by the case format (docs/CASE_FORMAT.md): refused at once, exit 2
#    (1e9 keys reached 15 GB; L = S = 200,000 ran past a minute). A small one still runs.
add_test(NAME hostile36.replay_sdpa_no_data_bounded COMMAND ${H36_EXPECT} 2
         "sdpa_no_data_huge_keys.safetensors: .*attention weights \\(1, 1, 1000000000\\).* over a case's limit"
         -- sh -c "out=$(timeout 20 ${H36_B} replay ${H36}/cases/sdpa_no_data_huge_keys.safetensors 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || exit $rc; timeout 20 ${H36_B} replay ${H36}/cases/sdpa_no_data_long.safetensors 2>&1 | grep 'attention weights (1, 200000, 200000).* over a case' || exit 3; exit 2")
set_tests_properties(hostile36.replay_sdpa_no_data_bounded PROPERTIES FIXTURES_REQUIRED hostile36_cases
                     TIMEOUT 60)
add_test(NAME hostile36.replay_sdpa_no_data_small_runs COMMAND ${H36_EXPECT} 0 "1 passed, 0 failed"
         -- ${H36_B} replay ${H36}/cases/sdpa_no_data_small.safetensors)
set_tests_properties(hostile36.replay_sdpa_no_data_small_runs PROPERTIES FIXTURES_REQUIRED hostile36_cases)

# 2. bench compare --fleet names each run once: a directory named twice, through a link, or a
#    copy (the same host and start time, the same context.json, status.json and samples) is
#    refused (exit 2, both named) instead of counted as two nodes that outvote a third; a run of
#    its own on the same host in the same second (other samples) still counts.
add_test(NAME hostile36.fleet_same_run_twice_refused COMMAND sh -c
  "D=${H36}/fleet; rm -rf $D && mkdir -p $D || exit 1; mk() { mkdir -p $D/$1 && printf '{\"format\":\"tandem-results/1\",\"device\":\"cpu\",\"started\":\"%s\",\"env\":{\"host\":\"%s\"}}' $3 $2 > $D/$1/context.json && { echo suite,benchmark,param,x,metric,unit,repetition,value; for r in 1 2 3; do echo t,copy,,,time,ns,$r,$4; done; } > $D/$1/t.samples.csv; }; mk good good 2024-01-01T00:00:00Z 100 && mk bad bad 2024-01-01T00:00:00Z 300 && mk other bad 2024-01-01T00:00:00Z 301 && ln -s bad $D/link && cp -r $D/bad $D/copy || exit 1; t() { want=$1; shift; out=$(timeout 30 ${H36_B} compare --fleet \"$@\" 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q \"$want\" || { echo \"exit $rc, want 2 and: $want\"; exit 1; }; }; t 'bad and .*bad are the same directory' $D/good $D/bad $D/bad; t 'bad and .*link are the same directory' $D/good $D/bad $D/link; t 'bad and .*copy are one run (a copy: the same host bad and start time 2024-01-01T00:00:00Z' $D/good $D/bad $D/copy; out=$(timeout 30 ${H36_B} compare --fleet $D/good $D/bad $D/other 2>&1); rc=$?; echo \"$out\"; [ $rc -ne 2 ] || { echo 'a run of its own was refused'; exit 1; }")

# 3. An llm.c token file that is a FIFO: refused at once (exit 2, named), as every reader does;
#    fopen waited for a writer forever.
add_test(NAME hostile36.train_data_fifo_exit_2 COMMAND ${H36_EXPECT} 2 "fifo.bin: not a regular file \\(a FIFO\\)"
         -- sh -c "rm -f ${H36}/fifo.bin && mkdir -p ${H36} && mkfifo ${H36}/fifo.bin && exec timeout 20 ${H36_B} train --model gpt:L1-H1-D8-T4-V16 --batch 2 --steps 1 --opt sgd --lr 0.1 --data ${H36}/fifo.bin")

# 5. bench train and bench conform arguments: a warmup of INT64_MAX overflowed (UBSan) into a
#    negative lr; --dump '' was found after training (exit 1); --init with a name the model does
#    not have loaded the rest silently (PyTorch's strict load refuses: named, exit 2; --init-partial
#    loads); a gpt: size too large said "not a positive integer"; bench conform --ops , and
#    --cases 0 tested nothing and passed.
set(H36_TRAIN "${H36_B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1")
add_test(NAME hostile36.train_lr_schedule_huge_warmup COMMAND ${H36_EXPECT} 0 "."
         --not "runtime error|lr -" -- ${H36_B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1
         --lr-schedule cosine:9223372036854775807:9223372036854775807:0)
add_test(NAME hostile36.train_dump_empty_exit_2 COMMAND ${H36_EXPECT} 2 "--dump '': expected the path of a file"
         --not "step 1" -- ${H36_B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1 --dump "")
add_test(NAME hostile36.train_init_unknown_names COMMAND sh -c
  "D=${H36}/init; rm -rf $D && mkdir -p $D || exit 1; out=$(${H36_TRAIN} --init ${H36}/cases/init_unknown_name.safetensors 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q \"1 name the model does not have: '0.wieght'\" || { echo \"unknown name: exit $rc, want 2 naming it\"; exit 1; }; ${H36_TRAIN} --init ${H36}/cases/init_unknown_name.safetensors --init-partial >/dev/null || { echo '--init-partial refused'; exit 1; }; ${H36_TRAIN} --dump $D/w.safetensors >/dev/null && ${H36_TRAIN} --init $D/w.safetensors >/dev/null || { echo 'a dump (its loss and lr records) no longer resumes'; exit 1; }")
set_tests_properties(hostile36.train_init_unknown_names PROPERTIES FIXTURES_REQUIRED hostile36_cases)
add_test(NAME hostile36.gpt_size_too_large_said COMMAND ${H36_EXPECT} 2 "token 'D99999999999': too large: at most 2147483647"
         -- ${H36_B} train --model gpt:L1-H1-D99999999999-T4-V16 --steps 1 --opt sgd --lr 0.1)
add_test(NAME hostile36.conform_nothing_to_test_exit_2 COMMAND sh -c
  "for a in '--ops ,' '--cases 0' '--ops ,,'; do out=$(timeout 60 ${H36_B} conform $a 2>&1); rc=$?; echo \"$a: $out\" | tail -3; [ $rc -eq 2 ] || { echo \"bench conform $a: exit $rc, want 2\"; exit 1; }; done")

# 6. A 200,000-sample series (a day of bench check's 2 Hz load) plots in seconds: thinned to the
#    lowest and highest of each x bucket for drawing (the dip kept), the CSV keeps every sample
#    (gnuplot took 111 s; bench report ran past 300 s under ASan, the rows grown 64 at a time).
add_test(NAME hostile36.plot_long_series_thinned COMMAND sh -c
  "command -v gnuplot >/dev/null || { echo 'SKIP: no gnuplot'; exit 77; }; D=${H36}/series; rm -rf $D && mkdir -p $D/r || exit 1; awk 'BEGIN{print \"suite,benchmark,param,x,metric,unit,median,mean,stddev,cv,min,max,repetitions\"; for(i=0;i<200000;i++){t=i*0.5; v=(i==123457)?500:1400+(i%7); printf \"sustained,cuda:0,t_s:%.3f,%.3f,sm_clock,MHz,%g,%g,0,0,%g,%g,1\\n\",t,t,v,v,v,v}}' > $D/r/sustained.csv || exit 1; s=$(date +%s); timeout 60 ${H36_B} plot $D/r || exit 1; e=$(( $(date +%s) - s )); echo \"plotted in $e s\"; [ $e -le 20 ] || { echo 'too slow'; exit 1; }; f=$D/r/plots/sustained-sm_clock.dat; grep -q 'thinned for drawing: 200000 samples to' $f && [ $(grep -c '^[0-9]' $f) -le 4000 ] && grep -q ' 500 500 500$' $f && [ $(wc -l < $D/r/sustained.csv) -eq 200001 ]")
set_tests_properties(hostile36.plot_long_series_thinned PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
