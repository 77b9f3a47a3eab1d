# hostile21_files.cmake — issue 21 (items 2, 3, 5, 10): the files bench writes and reads when a
# results directory, a path or a data root is hostile. Every file bench writes (dumps, profiles,
# results, reports, plots, logs, failing cases, actuals) refuses a target that exists and is not a
# regular file (a link, a FIFO, a device: exit 2 naming the path, before work where the path is
# known up front), and no link is followed; bench check's setup errors (logs/ not a directory of
# its own, unwritable or holding a link; no golden cases) are bad input, exit 2 before anything
# runs; every reader refuses a FIFO at once, a device (a link to /dev/zero) and a directory ("is
# a directory"); mkdir -p of "" fails cleanly. test_hostile21_files.c: the primitives themselves.
# Real /dev files are never touched: a link to /dev/null or /dev/zero stands for a device.
tdm_test_executable(hostile21_files)
target_sources(test_hostile21_files PRIVATE ${PROJECT_SOURCE_DIR}/harness/fileio.c)
set(H21F ${TEST_TMP}/hostile21_files)
set(H21F_B $<TARGET_FILE:bench>)
set(H21F_TRAIN "${H21F_B} train --model mlp:4-2 --steps 2 --opt sgd --lr 0.1")
set(H21F_EXPECT ${PROJECT_SOURCE_DIR}/suites/check/expectations.json)
set(H21F_FIG ${CMAKE_CURRENT_SOURCE_DIR}/check/healthy-2xa100.json)
# a results directory with each kind of file: context.json, status.json, transfer.csv,
# transfer.samples.csv (a quick transfer run, a few seconds)
set(H21F_RUN ${H21F}/run)

add_test(NAME hostile21.files.fileio_unit COMMAND test_hostile21_files ${H21F}/unit)
add_test(NAME hostile21.files.run_fixture COMMAND sh -c
  "rm -rf ${H21F_RUN} && ${H21F_B} run --device cpu --quick --suite transfer --repetitions 1 --min-time 0.01 --out ${H21F_RUN} >/dev/null")
set_tests_properties(hostile21.files.run_fixture PROPERTIES FIXTURES_SETUP hostile21_files_run TIMEOUT 120)

# ---- 2. writing through links and special files ------------------------------------------------

# --dump and --profile to a link, a FIFO, a link to /dev/null, a directory: exit 2 before
# training, the path as it was (the atomic writer renamed a regular file over each).
add_test(NAME hostile21.files.train_outputs_refuse_links_fifos_devices COMMAND sh -c
  "D=${H21F}/dump; rm -rf $D && mkdir -p $D/dir && echo keep > $D/victim && ln -s victim $D/link && mkfifo $D/fifo && ln -s /dev/null $D/null || exit 1; for f in dump profile; do for p in link fifo null dir; do out=$(timeout 30 ${H21F_TRAIN} --$f $D/$p 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"--$f $p: exit $rc, want 2\"; exit 1; }; echo \"$out\" | grep -Eq -e \"--$f $D/$p: (not a regular file \\(a symbolic link\\)|not a regular file \\(a FIFO\\)|is a directory)\" || { echo \"--$f $p: no clear message\"; exit 1; }; done; done; [ -L $D/link ] && [ -p $D/fifo ] && [ -L $D/null ] && [ \"$(cat $D/victim)\" = keep ] || { echo 'a path was replaced or written through'; exit 1; }")

# bench check --out: a link planted in logs/ (to a file that must keep its content) and a FIFO
# there are refused before anything runs; the log was opened through the link and truncated it.
add_test(NAME hostile21.files.check_out_link_in_logs_refused COMMAND sh -c
  "D=${H21F}/checklogs; rm -rf $D && mkdir -p $D/a/logs $D/b/logs && echo keep > $D/victim && ln -s $D/victim $D/a/logs/reference.golden.cpu.log && mkfifo $D/b/logs/reference.golden.cpu.log || exit 1; out=$(timeout 120 ${H21F_B} check --quick --expect ${H21F_EXPECT} --out $D/a 2>&1); rc=$?; echo \"$out\"; [ \"$(cat $D/victim)\" = keep ] || { echo 'the link target was truncated'; exit 1; }; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'a/logs/reference.golden.cpu.log: not a regular file (a symbolic link)' || exit 1; out=$(timeout 60 ${H21F_B} check --quick --expect ${H21F_EXPECT} --out $D/b 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'b/logs/reference.golden.cpu.log: not a regular file (a FIFO)' && [ ! -e $D/a/status.json ] && [ ! -e $D/b/status.json ]")
set_tests_properties(hostile21.files.check_out_link_in_logs_refused PROPERTIES TIMEOUT 300)
# ... and a results file of --out that is a link, before anything runs
add_test(NAME hostile21.files.check_out_result_link_refused COMMAND sh -c
  "D=${H21F}/checkout; rm -rf $D && mkdir -p $D/out && echo keep > $D/victim && ln -s $D/victim $D/out/report.md || exit 1; out=$(timeout 120 ${H21F_B} check --quick --expect ${H21F_EXPECT} --out $D/out 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'report.md: not a regular file (a symbolic link)' && [ -L $D/out/report.md ] && [ \"$(cat $D/victim)\" = keep ] && [ ! -e $D/out/logs ]")
set_tests_properties(hostile21.files.check_out_result_link_refused PROPERTIES TIMEOUT 300)

# bench run --out an existing directory holding a link where a results file goes, or a FIFO where
# Google Benchmark's scratch file goes (its stream waited on it forever): exit 2, nothing run.
add_test(NAME hostile21.files.run_out_links_refused COMMAND sh -c
  "D=${H21F}/runout; rm -rf $D && mkdir -p $D/a $D/b && echo keep > $D/victim && ln -s $D/victim $D/a/transfer.csv && mkfifo $D/b/.transfer.gbench.json.tmp || exit 1; for d in a b; do out=$(timeout 60 ${H21F_B} run --device cpu --quick --suite transfer --repetitions 1 --min-time 0.01 --out $D/$d 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -Eq 'not a regular file \\((a symbolic link|a FIFO)\\) \\(nothing was run\\)' && [ ! -e $D/$d/status.json ] || { echo \"$d: exit $rc\"; exit 1; }; done; [ -L $D/a/transfer.csv ] && [ \"$(cat $D/victim)\" = keep ] && [ -p $D/b/.transfer.gbench.json.tmp ]")
set_tests_properties(hostile21.files.run_out_links_refused PROPERTIES TIMEOUT 180)

# bench report and bench plot into a results directory with a link where report.md or a figure
# goes: refused (exit 2), the link and its target as they were.
add_test(NAME hostile21.files.report_plot_links_refused COMMAND sh -c
  "D=${H21F}/docs; rm -rf $D && mkdir -p $D && cp -r ${H21F_RUN} $D/r && mkdir $D/r/plots && echo keep > $D/victim && ln -s $D/victim $D/r/report.md && ln -s $D/victim $D/r/plots/transfer-time.png || exit 1; out=$(timeout 60 ${H21F_B} report --no-plots $D/r 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'report.md: not a regular file (a symbolic link)' || exit 1; out=$(timeout 120 ${H21F_B} plot $D/r 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'transfer-time.png: not a regular file (a symbolic link)' && [ -L $D/r/report.md ] && [ -L $D/r/plots/transfer-time.png ] && [ \"$(cat $D/victim)\" = keep ]")
set_tests_properties(hostile21.files.report_plot_links_refused PROPERTIES FIXTURES_REQUIRED hostile21_files_run
                     TIMEOUT 180)

# A results directory whose plots/ is a link (to a folder elsewhere): bench plot and bench report
# refuse it (exit 2) and nothing is drawn where it points (the figures went there before).
add_test(NAME hostile21.files.plots_dir_link_refused COMMAND sh -c
  "D=${H21F}/plotslink; rm -rf $D && mkdir -p $D/elsewhere && cp -r ${H21F_RUN} $D/r && ln -s $D/elsewhere $D/r/plots || exit 1; for c in plot report; do out=$(timeout 120 ${H21F_B} $c $D/r 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'r/plots: not a directory (a symbolic link)' || { echo \"bench $c: exit $rc, want 2 and the link named\"; exit 1; }; done; [ -z \"$(ls -A $D/elsewhere)\" ] || { echo 'figures were written through the link:'; ls $D/elsewhere; exit 1; }")
set_tests_properties(hostile21.files.plots_dir_link_refused PROPERTIES FIXTURES_REQUIRED hostile21_files_run
                     TIMEOUT 300)

# bench conform's failing case and bench replay's actuals: a link under the file's name is not
# replaced (conform says the case was not written; replay exits 2 before running).
add_test(NAME hostile21.files.conform_replay_links_refused COMMAND sh -c
  "D=${H21F}/cases; rm -rf $D && mkdir -p $D/fail $D/act && echo keep > $D/victim && ln -s $D/victim $D/fail/relu-f16-s1-i0.safetensors && ln -s $D/victim $D/act/relu-f32-odd.safetensors || exit 1; out=$(timeout 60 ${H21F_B} conform --ops relu --dtypes f16 --cases 1 --seed 1 --plant-error --failures $D/fail 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 1 ] && echo \"$out\" | grep -q 'relu-f16-s1-i0.safetensors: cannot write: not a regular file (a symbolic link)' || exit 1; out=$(timeout 60 ${H21F_B} replay ${CASES_DIR}/relu-f32-odd.safetensors --write-actual $D/act 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'act/relu-f32-odd.safetensors: not a regular file (a symbolic link)' && [ -L $D/fail/relu-f16-s1-i0.safetensors ] && [ -L $D/act/relu-f32-odd.safetensors ] && [ \"$(cat $D/victim)\" = keep ]")

# The PyTorch peer's writer (DIR/peer-torch/*, python): the same refusals (test_hostile21_peer.py).
add_test(NAME hostile21.files.peer_writer_refuses_links COMMAND python3
         ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile21_peer.py ${PROJECT_SOURCE_DIR}/suites/peers
         ${H21F}/peer)

# ---- 3. setup errors are not node failures -----------------------------------------------------

# logs a file, logs a link to a directory, no golden cases (a wrong data root, an empty cases
# folder), no folder for the temporary logs: exit 2 at once with what is wrong (every child run
# failed with an empty reason, exit 1).
add_test(NAME hostile21.files.check_setup_errors_exit_2 COMMAND sh -c
  "D=${H21F}/setup; rm -rf $D && mkdir -p $D/file $D/link $D/root/suites/golden/cases && echo x > $D/file/logs && ln -s $D $D/link/logs || exit 1; t() { want=$1; shift; out=$(timeout 120 \"$@\" 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"exit $rc, want 2: $*\"; exit 1; }; echo \"$out\" | grep -q \"$want\" || { echo \"no line says: $want\"; exit 1; }; }; C=\"${H21F_B} check --quick --expect ${H21F_EXPECT}\"; t 'logs: not a directory' $C --out $D/file; t 'logs: a symbolic link, not a directory of its own' $C --out $D/link; t 'golden cases (suites/golden/cases) were not found' env TANDEM_DOCS_ROOT=$D/none $C; t 'cases holds no case file' env TANDEM_DOCS_ROOT=$D/root $C; t 'cannot make a folder for the runs' env TMPDIR=$D/none $C; [ ! -e $D/file/status.json ] && [ ! -e $D/link/status.json ]")
set_tests_properties(hostile21.files.check_setup_errors_exit_2 PROPERTIES TIMEOUT 300)
# an unwritable logs/ (chmod: root writes anyway, so as root bench runs as nobody, through
# util-linux's setpriv, with the folders made nobody's; skipped only where neither is possible)
add_test(NAME hostile21.files.check_unwritable_logs_exit_2 COMMAND sh -c
  "D=${H21F}/rologs; chmod -R u+w $D 2>/dev/null; rm -rf $D && mkdir -p $D/out/logs || exit 1; as=''; if [ $(id -u) -eq 0 ]; then command -v setpriv >/dev/null || { echo 'SKIP: root writes into a read-only folder and setpriv is missing'; exit 77; }; chown -R 65534:65534 $D || exit 1; as='setpriv --reuid=65534 --regid=65534 --clear-groups'; fi; chmod 555 $D/out/logs || exit 1; out=$(timeout 120 $as ${H21F_B} check --quick --expect ${H21F_EXPECT} --out $D/out 2>&1); rc=$?; echo \"$out\"; chmod 755 $D/out/logs; [ $rc -eq 2 ] && echo \"$out\" | grep -q 'logs: cannot write there'")
set_tests_properties(hostile21.files.check_unwritable_logs_exit_2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# ---- 5 and 10. bounded reads everywhere; a directory "is a directory" --------------------------

# bench compare, report and plot with each file of a results directory a FIFO, a link to
# /dev/zero or a directory: exit 2 at once naming the file (a FIFO blocked them forever, /dev/zero
# grew memory until allocation failed, a directory was an "Input/output error").
add_test(NAME hostile21.files.results_readers_refuse_special_files COMMAND sh -c
  "D=${H21F}/readers; rm -rf $D && mkdir -p $D || exit 1; for f in context.json status.json transfer.csv transfer.samples.csv; do for k in fifo zero dir; do rm -rf $D/h && cp -r ${H21F_RUN} $D/h && rm $D/h/$f || exit 1; case $k in fifo) mkfifo $D/h/$f; want='not a regular file [(]a FIFO[)]';; zero) ln -s /dev/zero $D/h/$f; want='not a regular file [(]a device[)]';; dir) mkdir $D/h/$f; want='is a directory';; esac; for c in \"compare ${H21F_RUN} $D/h\" \"report --no-plots $D/h\" \"plot $D/h --out $D/p\"; do out=$(timeout 20 ${H21F_B} $c 2>&1); rc=$?; [ $rc -eq 2 ] && echo \"$out\" | grep -Eq \"h/$f: (cannot read: )?$want\" || { echo \"$out\"; echo \"bench $c with $f a $k: exit $rc, want 2 and: $want\"; exit 1; }; done; done; done; echo 'every reader refused every special file'")
set_tests_properties(hostile21.files.results_readers_refuse_special_files PROPERTIES
                     FIXTURES_REQUIRED hostile21_files_run TIMEOUT 300)

# bench check --expect, --from-figures and --write-expect (a status.json), bench train --data and
# --init: the same three.
add_test(NAME hostile21.files.check_train_readers_refuse_special_files COMMAND sh -c
  "D=${H21F}/inputs; rm -rf $D && mkdir -p $D/fifo $D/zero $D/dir/status.json && mkfifo $D/fifo.json $D/fifo/status.json && ln -s /dev/zero $D/zero.json && ln -s /dev/zero $D/zero/status.json && mkdir $D/dir.json || exit 1; for k in fifo zero dir; do case $k in fifo) want='not a regular file [(]a FIFO[)]';; zero) want='not a regular file [(]a device[)]';; dir) want='is a directory';; esac; for c in \"check --expect $D/$k.json --from-figures ${H21F_FIG}\" \"check --from-figures $D/$k.json\" \"check --write-expect $D/$k\" \"train --model mlp:4-2 --steps 1 --opt sgd --lr 0.1 --data $D/$k.json\" \"train --model mlp:4-2 --steps 1 --opt sgd --lr 0.1 --init $D/$k.json\"; do out=$(timeout 20 ${H21F_B} $c 2>&1); rc=$?; [ $rc -eq 2 ] && echo \"$out\" | grep -Eq \"$D/$k(.json|/status.json): (cannot read: )?$want\" || { echo \"$out\"; echo \"bench $c: exit $rc, want 2 and: $want\"; exit 1; }; done; done; echo 'every reader refused every special file'")
set_tests_properties(hostile21.files.check_train_readers_refuse_special_files PROPERTIES TIMEOUT 300)

# mkdir -p of "" read past the string (test_hostile21_files above: ASan); through the commands: "" as
# an output directory is refused with exit 2, and nothing is written to "/".
add_test(NAME hostile21.files.empty_output_dir_exit_2 COMMAND sh -c
  "for c in \"run --device cpu --quick --suite transfer --out\" \"plot ${H21F_RUN} --out\" \"check --quick --expect ${H21F_EXPECT} --out\" \"conform --ops relu --dtypes f16 --cases 0 --failures\"; do out=$(timeout 60 ${H21F_B} $c '' 2>&1); rc=$?; echo \"$out\"; [ $rc -eq 2 ] || { echo \"bench $c '': exit $rc, want 2\"; exit 1; }; done")
set_tests_properties(hostile21.files.empty_output_dir_exit_2 PROPERTIES FIXTURES_REQUIRED hostile21_files_run
                     TIMEOUT 180)
