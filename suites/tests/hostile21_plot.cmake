# hostile21_plot.cmake — issue 21 ("Hostile results, figures and paths"), the figures and the
# report: a results directory travels (network folders, pull requests), so its names are an
# attacker's.
#  - No name from a results directory (benchmarks, params, metrics, units, the device, the
#    directory's own name) reaches gnuplot as code or as a file name: with names that are
#    gnuplot code (quotes and system(), backquotes, a backslash, '|cmd' and '<cmd' directories,
#    bytes that are not UTF-8) in every suite's CSV and for every plots/*.gp, bench plot and
#    bench report draw every figure, showing the names, and run nothing (test_report inject).
#  - bench check's verdict table in report.html and report.md escapes what status.json holds
#    and shows every check, past the 256 rows and 64 GPUs it once stopped at (test_report checks).
#  - bench run's default repetitions are enough for a U test: 9 or more recorded, and bench
#    compare finds a planted 25% regression between two default runs without saying they are too
#    few (compare.py advises 9).
# test_report is report.cmake's (tdm_test_executable(report)).
set(H21 ${TEST_TMP}/hostile21_plot)
add_test(NAME hostile21.plot_names_never_code COMMAND test_report inject $<TARGET_FILE:bench>
         ${H21}/inject ${PROJECT_SOURCE_DIR}/plots)
add_test(NAME hostile21.report_check_table_escaped_and_whole
         COMMAND test_report checks $<TARGET_FILE:bench> ${H21}/checks)
set_tests_properties(hostile21.plot_names_never_code hostile21.report_check_table_escaped_and_whole
                     PROPERTIES TIMEOUT 300)

# One small benchmark at bench run's defaults (but --min-time, which only shortens each
# repetition): the CSV's repetitions column, the samples and Google Benchmark's JSON (what
# compare.py reads) hold 9 or more per benchmark; with as many samples as the run recorded
# (their values made steady: a busy machine's noise is not the point), a copy 25% slower is a
# REGRESSION to bench compare, which does not call the repetitions too few.
add_test(NAME hostile21.run_default_repetitions_enough_for_utest COMMAND sh -c
  "d=${H21}/reps; rm -rf $d && mkdir -p $d || exit 1
   $<TARGET_FILE:bench> run --device cpu --suite ops --filter 'matmul/n:64' --min-time 0.001 \
     --out $d/base >/dev/null || exit 1
   awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"repetitions\") c = i; next }
            !c || $c + 0 < 9 { print \"repetitions \" $c \" < 9: \" $0; bad = 1 }
            END { exit bad || NR < 2 }' $d/base/ops.csv || exit 1
   n=$(grep -c ',matmul,n:64,64,time,ns,' $d/base/ops.samples.csv)
   echo \"$n samples of matmul/n:64 time\"; [ $n -ge 9 ] || exit 1
   n=$(grep -c '\"run_type\": \"iteration\"' $d/base/ops.json)
   echo \"$n iterations in ops.json\"; [ $n -ge 9 ] || exit 1
   cp -r $d/base $d/slow || exit 1
   s='FNR > 1 { $8 = ($6 == \"ns\") ? f * (1000 + $7) : (100 - $7) / f } 1'
   awk -F, -v OFS=, -v f=1 \"$s\" $d/slow/ops.samples.csv > $d/base/ops.samples.csv || exit 1
   awk -F, -v OFS=, -v f=1.25 \"$s\" $d/base/ops.samples.csv > $d/slow/ops.samples.csv || exit 1
   out=$($<TARGET_FILE:bench> compare $d/base $d/slow); rc=$?; printf '%s\\n' \"$out\"
   [ $rc -eq 1 ] || { echo \"bench compare: exit $rc, want 1 (a regression)\"; exit 1; }
   case \"$out\" in *'cannot reach'*) echo 'too few repetitions for the U test'; exit 1;; esac
   exit 0")
set_tests_properties(hostile21.run_default_repetitions_enough_for_utest PROPERTIES TIMEOUT 120)
