# .ci/gpu-first.sh — `.ci/gpu-session first` and `.ci/gpu-session perf`, sourced by it (ROOT, OUT,
# CARRY, PREBUILT, MODE (first or perf), ARGS (perf's bench run options), torch_env and ldd_table
# come from there). The stages, their budgets, why, and how a runner calls them are in
# .ci/gpu-session's header; results/README.md says what becomes of what comes back.
#
# Layout: everything lands in gpu-out/MODE/ (WORK: logs/, env/, results/, summary.json), and after
# each stage $OUT gets summary.json, session.tar.gz (WORK, at most 15 MiB) and console.log: three
# of the at most eight files a runner must bring back. Each stage's tasks run in the background,
# each with its output in logs/<task>.log and its verdict in state/<task>; every command a task
# runs is under `timeout` at the stage's end. `--plan` prints the plan and runs nothing.
set +e +u
set -o pipefail

# ---- the plan -------------------------------------------------------------------------------
MODE=${MODE:-first}
TOTAL=${TANDEM_FIRST_SECONDS:-540}
scale() {   # a budget at TOTAL's scale; at least 5 s (or all of a shorter one) where TOTAL is short
    local v=$(($1 * TOTAL / 540)) floor=$(($1 < 5 ? $1 : 5))
    [ "$v" -ge "$floor" ] || v=$floor
    echo "$v"
}
scale_raw() { local v=$(($1 * TOTAL / 540)); [ "$v" -ge 1 ] || v=1; echo "$v"; }
# bench-run last: its length is the least predictable (a quick run does not fit its budget on an
# H100: results/README.md), so it gets what the others leave and a cut costs nothing after it
STAGES=(setup env numerics gpu-tests check anchor sanitizer bench-run)
declare -A BUDGET=([setup]=15 [env]=15 [numerics]=110 [gpu-tests]=130 [check]=75 [bench-run]=110
                   [anchor]=35 [sanitizer]=40)
declare -A TASKS=([setup]=setup [env]=env [numerics]="replay conform trajectories"
                  [gpu-tests]=gpu_tests [check]=check [bench-run]=bench_run [anchor]=anchor
                  [sanitizer]="memcheck racecheck synccheck")
if [ "$MODE" = perf ]; then
    # perf: the main job timed. bench run --budget (what the stage's limit leaves, less a margin
    # for writing) with the PyTorch peer interleaved per suite, rows in priority order; the anchor
    # first (PyTorch's own GEMM, copies and training step: the independent check), bench compare
    # last, against the newest earlier run of the same GPU model in results/
    STAGES=(setup env anchor bench-perf compare)
    declare -A BUDGET=([setup]=15 [env]=15 [anchor]=35 [bench-perf]=440 [compare]=25)
    declare -A TASKS=([setup]=setup [env]=env [anchor]=anchor [bench-perf]=bench_perf
                      [compare]=compare)
fi
RESERVE=$(scale_raw 10)      # for the last archive
MIN_STAGE=$(scale_raw 5)     # a stage that would get less is skipped_time
ARCHIVE_CAP=$((15 * 1024 * 1024))
# ctest -L gpu less the tests other stages run (numerics: golden, conform, trajectories; check and
# bench-run: the tests that measure speed, which must have the GPU to themselves) and bench
# check's levels 2 to 4 end to end (level 2 is the check stage's --quick again; 3 and 4 hold loads
# and test 95 % of the memory: minutes on a GPU, `.ci/gpu-session check --level 3` runs them)
TRAJECTORIES='^gpu\.train(_tf32|_fp16)?\.(mlp|cnn)-'
GPU_TESTS_EXCLUDE="^gpu\.golden\.cuda0\$|^gpu\.conform\.cuda0\$|$TRAJECTORIES"
GPU_TESTS_EXCLUDE+="|^gpu\.check\.quick_cuda0\$|^gpu\.check\.level[234]|^gpu\.bench\."
# compute-sanitizer's subsets: tandem's own kernels (the vendor libraries' are not ours to check)
MEMCHECK_OPS="relu gelu tanh sigmoid add mul dropout sum mean softmax log_softmax cross_entropy
              mse_loss layer_norm batch_norm embedding max_pool2d avg_pool2d sgd_step adam_step
              adamw_step"
RACECHECK_OPS="sum,mean,softmax,log_softmax,layer_norm,batch_norm,cross_entropy"

ANCHOR=$ROOT/suites/peers/torch_gpu_anchor.py   # travels with the working tree
BENCH_MARGIN=$(scale_raw 30)   # perf: bench run's budget is its stage's limit less this
EARLIER=${TANDEM_PERF_RESULTS:-$ROOT/results}   # perf: where compare looks for the earlier run
gpu_of_smi() { sed -n '1s/^GPU 0: \(.*\) (UUID.*/\1/p'; }   # nvidia-smi -L's first GPU's name

if [ "${PLAN:-}" = 1 ]; then   # the plan, without running anything
    echo "gpu-session $MODE: ${TOTAL} s in all (${RESERVE} s kept for the last archive); out: \$OUT"
    printf '%-10s %6s  %s\n' stage budget tasks
    for s in "${STAGES[@]}"; do printf '%-10s %6s  %s\n' "$s" "$(scale "${BUDGET[$s]}")" "${TASKS[$s]}"; done
    if [ "$MODE" = perf ]; then
        echo "bench-perf: bench run --device cuda:0 --budget <the stage's limit less ${BENCH_MARGIN} s> --peer torch" \
             "--out gpu-out/perf/results/<host>-cuda0-<UTC>${ARGS[*]:+ ${ARGS[*]}}"
        gpu=${TANDEM_PERF_GPU:-$(nvidia-smi -L 2> /dev/null | gpu_of_smi)}
        if [ -z "$gpu" ]; then
            echo "compare:    no GPU here to name (TANDEM_PERF_GPU=NAME names one): the earlier run is chosen on the GPU machine"
        elif base=$(python3 "$ROOT/.ci/gpu-summary.py" --baseline "$EARLIER" "$gpu"); then
            echo "compare:    bench compare ${base#"$ROOT"/} <the new run> (the newest earlier run on $gpu)"
        else
            echo "compare:    no earlier run on $gpu in ${EARLIER#"$ROOT"/}/: nothing to compare with"
        fi
    fi
    exit 0
fi

WORK=${TANDEM_FIRST_WORK:-$ROOT/gpu-out/$MODE}
LOGS=$WORK/logs RESULTS=$WORK/results STATE=$WORK/state
rm -rf "$WORK" && mkdir -p "$LOGS" "$RESULTS" "$STATE" "$WORK/env"
exec 3>&1 4>&2 > >(tee "$WORK/console.log") 2>&1
TEE_PID=$!
export PYTHONUNBUFFERED=1 TANDEM_DOCS_ROOT=$ROOT

ms_now() {   # milliseconds since the epoch
    local t=${EPOCHREALTIME:-}
    [ -n "$t" ] || t=$(date +%s.%N)
    t=${t/,/.}
    local f=${t#*.}000
    echo $((${t%.*} * 1000 + 10#${f:0:3}))
}
T0=$(ms_now)
secs() {   # milliseconds as seconds with one decimal
    local ms=$1
    [ "$ms" -ge 0 ] || ms=0
    printf '%d.%d' $((ms / 1000)) $(((ms % 1000) / 100))
}
json_str() {   # a JSON string of $1: control characters as spaces, \ and " escaped
    local s=${1//[$'\001'-$'\037']/ }
    s=${s//\\/\\\\}
    printf '"%s"' "${s//\"/\\\"}"
}

# ---- what a task uses -------------------------------------------------------------------------
left_s() { local l=$(((STAGE_END_MS - $(ms_now)) / 1000)); [ "$l" -ge 1 ] || l=1; echo "$l"; }
tmo() { timeout -k "${TMO_GRACE:-5}" "$(left_s)" "$@"; }   # a command, killed at the stage's end
result() {   # result STATUS EXIT NOTE: the task's verdict
    printf '%s\n%s\n%s\n%s\n' "$1" "$2" "$3" "$(secs $(($(ms_now) - TASK_START)))" > "$STATE/$TASK"
}
last_line() { grep -v '^[[:space:]]*$' "$1" | tail -n 1; }
verdict() {  # verdict EXIT LOG: passed, failed, timed_out or skipped_no_gpu for a bench command
    case $1 in 124|137) echo timed_out; return;; esac
    if grep -qE "no CUDA device|no CUDA backend" "$2"; then
        [ "$GPU_STATE" = none ] && echo skipped_no_gpu || echo failed
        return
    fi
    [ "$1" = 0 ] && echo passed || echo failed
}
need_bench() {   # waits for the fallback build (when there is one) up to the stage's end
    if [ "$BENCH_MODE" != fallback ]; then
        [ -x "$BENCH" ] && return 0
        result failed "" "no bench to run"
        return 1
    fi
    while [ ! -s "$STATE/build.rc" ]; do
        if [ $((STAGE_END_MS - $(ms_now))) -le 2000 ]; then
            result timed_out "" "still waiting for the fallback build (logs/build.log)"
            return 1
        fi
        sleep 2
    done
    [ "$(cat "$STATE/build.rc")" = 0 ] && return 0
    result failed "" "the fallback build failed (logs/build.log)"
    return 1
}

# ---- the tasks --------------------------------------------------------------------------------
task_setup() {   # runs in the main shell: what it decides (BENCH, CTEST_DIR, ...) is kept
    COMMIT=$(cat "$CARRY/commit" 2>/dev/null || echo unknown)
    SOURCE="no checksums carried (.carry/source.sha256)"
    if [ -s "$CARRY/source.sha256" ]; then
        local bad n
        bad=$(sha256sum --quiet -c "$CARRY/source.sha256" 2>/dev/null | sed 's/: [A-Z].*//')
        n=$(grep -c . <<< "$bad")
        if [ "$n" = 0 ]; then SOURCE="matches the pack"
        else SOURCE="$n files differ from the pack: $(head -n 5 <<< "$bad" | tr '\n' ' ')"; fi
    fi
    echo "commit $COMMIT; source $SOURCE"
    local libs_note=""
    torch_env || libs_note="; no PyTorch CUDA libraries found"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    local why=""
    if [ -n "${TANDEM_FIRST_BUILD:-}" ]; then
        BUILD_DIR=$(cd "$TANDEM_FIRST_BUILD" && pwd) BENCH_MODE=given
    elif [ -s "$CARRY/prebuilt.tar.xz" ]; then
        rm -rf "${ROOT:?}/$PREBUILT"
        if command -v xz > /dev/null; then
            tmo xz -dc "$CARRY/prebuilt.tar.xz" | tar -x -C "$ROOT"
        else
            tmo python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
                "$CARRY/prebuilt.tar.xz" "$ROOT"
        fi || why="cannot unpack .carry/prebuilt.tar.xz"
        BUILD_DIR=$ROOT/$PREBUILT BENCH_MODE=prebuilt
        if [ -z "$why" ]; then
            cat "$BUILD_DIR/prebuilt.info"
            # CTest's files name the folder it was built in: name this checkout instead
            local from from_re to
            from=$(sed -n 's/^from_root=//p' "$BUILD_DIR/prebuilt.info")
            from_re=$(printf '%s' "$from" | sed 's/[]#.*^$[\\]/\\&/g')
            to=$(printf '%s' "$ROOT" | sed 's/[#&\\]/\\&/g')
            find "$BUILD_DIR" -name CTestTestfile.cmake -exec sed -i "s#$from_re\([/\"]\)#$to\1#g" {} +
        fi
    else
        BENCH_MODE=none why="no .carry/prebuilt.tar.xz (run .ci/gpu-session pack here first)"
    fi
    BENCH=$BUILD_DIR/bench CTEST_DIR=$BUILD_DIR
    if [ -z "$why" ]; then
        local progs=("$BENCH")   # the prebuilt's test programs too: they travelled with it
        [ "$BENCH_MODE" != prebuilt ] || progs+=("$BUILD_DIR"/suites/tests/test_*)
        ldd_table "${progs[@]}" > "$LOGS/ldd.txt" 2>&1
        local missing
        missing=$(awk '$3 == "missing" { print $2 }' "$LOGS/ldd.txt" | sort -u | tr '\n' ' ')
        [ -z "$missing" ] || why="ldd: not found: $missing"
    fi
    local cuobjdump   # the fat binary's machine code: sm_80 and sm_90 (no cuobjdump here to see it)
    cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
    [ -z "$why" ] && [ -x "$cuobjdump" ] &&
        echo "cubins in bench: $("$cuobjdump" --list-elf "$BENCH" 2>&1 |
            sed -n 's/.*\.\(sm_[0-9a-z]*\)\.cubin$/\1/p' | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
    if [ -z "$why" ]; then   # a load trial with every symbol bound now, not at its first call
        LD_BIND_NOW=1 tmo "$BENCH" env --json > "$LOGS/env.json" 2> "$LOGS/load-trial.err" ||
            why="LD_BIND_NOW=1 bench env: exit $?: $(head -c 300 "$LOGS/load-trial.err")"
    fi
    if [ -n "$why" ] && [ "$BENCH_MODE" != given ]; then
        echo "the prebuilt cannot run ($why): building build-gpu/ here in the background"
        (OUT=$STATE bash .ci/gpu-session build > "$LOGS/build.log" 2>&1; echo $? > "$STATE/build.rc") &
        BUILD_PID=$! BENCH_MODE=fallback BUILD_DIR=$ROOT/build-gpu
        BENCH=$BUILD_DIR/bench CTEST_DIR=$BUILD_DIR
        result failed 1 "prebuilt: $why; building build-gpu/ on the machine instead (logs/build.log)$libs_note"
    elif [ -n "$why" ]; then
        result failed 1 "$BUILD_DIR: $why$libs_note"
    else
        result passed 0 "bench $BENCH_MODE (${BENCH#"$ROOT"/}) loads; commit $COMMIT; source $SOURCE$libs_note"
    fi
}

task_env() {   # what matters first: the GPU, bench's view of it; then versions of the tools
    local e=$WORK/env t p cs
    tmo nvidia-smi -L > "$e/nvidia-smi-L.txt" 2>&1
    # nvidia-smi's word first (so that a fallback build still running leaves it known), then
    # whether bench sees the GPU too
    local gpu desc probe rc=0
    if grep -q '^GPU 0' "$e/nvidia-smi-L.txt"; then
        gpu=present desc=$(head -n 1 "$e/nvidia-smi-L.txt")
    else
        command -v nvidia-smi > /dev/null && desc=$(head -n 1 "$e/nvidia-smi-L.txt") || desc="not found"
        gpu=none desc="no GPU (nvidia-smi -L: $desc)"
    fi
    printf '%s\n%s\n' "$gpu" "$desc" > "$STATE/gpu"
    if need_bench; then
        [ -s "$LOGS/env.json" ] || tmo "$BENCH" env --json > "$LOGS/env.json"
        rc=$?
        tmo "$BENCH" env > "$e/bench-env.txt" 2>&1
        if [ "$gpu" = present ]; then
            probe=$(tmo "$BENCH" conform --device cuda:0 --cases 0 2>&1 | head -n 3)
            case "$probe" in *'no CUDA device'*|*'no CUDA backend'*)
                gpu=unseen desc="nvidia-smi: $desc; bench: $(head -n 1 <<< "$probe")"
                printf '%s\n%s\n' "$gpu" "$desc" > "$STATE/gpu";;
            esac
        fi
    else
        rc=none   # need_bench gave the verdict
    fi
    tmo nvidia-smi > "$e/nvidia-smi.txt" 2>&1
    tmo nvidia-smi -q > "$e/nvidia-smi-q.txt" 2>&1
    { uname -a; grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release; echo "cpus $(nproc)"; free -m
      df -h "$ROOT" | tail -n 1; ldd --version 2>&1 | head -n 1; } > "$e/host.txt" 2>&1
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    for t in nvcc "$cs" ncu cmake ctest python3 xz gnuplot; do
        p=$(command -v "$t") || { echo "$t: not found"; continue; }
        echo "$t: $p"
        tmo "$p" --version 2>&1 | grep -v '^$' | tail -n 2 | sed 's/^/    /'
    done > "$e/tools.txt" 2>&1
    tmo python3 - > "$e/torch.json" 2>&1 << 'EOF'
import json, torch
gpu = torch.cuda.is_available()
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version(),
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())) if gpu else None,
                  "gpu": torch.cuda.get_device_name(0) if gpu else None}))
EOF
    if [ "$rc" = 0 ] && [ "$gpu" != unseen ]; then result passed 0 "$desc"
    elif [ "$rc" != none ]; then result failed "$rc" "bench env --json: exit $rc; $desc"; fi
}

task_replay() {
    need_bench || return
    # --verbose: a line per case, which .ci/gpu-summary.py reads for the worst ratio per op
    tmo "$BENCH" replay --device cuda:0 --verbose suites/golden/cases/*.safetensors
    local rc=$?
    result "$(verdict $rc "$LOGS/$TASK.log")" $rc "$(last_line "$LOGS/$TASK.log")"
}

task_conform() {
    need_bench || return
    tmo "$BENCH" conform --device cuda:0 --cases 3 --seed 1 --dtypes f32,f16,bf16,f64 \
        --failures "$RESULTS/conform-failures"
    local rc=$?
    result "$(verdict $rc "$LOGS/$TASK.log")" $rc "$(last_line "$LOGS/$TASK.log")"
}

ctest_run() {   # ctest_run CTEST_ARGS...: the selected tests, -j 8, stopped at the stage's end
    need_bench || return
    command -v ctest > /dev/null || { result failed "" "ctest not found"; return; }
    local log=$LOGS/$TASK.log rc
    if [ "${TANDEM_FIRST_CTEST:-run}" = list ]; then
        tmo ctest --test-dir "$CTEST_DIR" -N "$@"
        rc=$?
        result "$([ "$GPU_STATE" = none ] && echo skipped_no_gpu || echo skipped)" $rc \
            "listed only (TANDEM_FIRST_CTEST=list): $(sed -n 's/^Total Tests: //p' "$log") tests"
        return
    fi
    local stop
    stop=$(date -d "@$((STAGE_END_MS / 1000 - 3))" +%H:%M:%S)
    tmo ctest --test-dir "$CTEST_DIR" -j 8 --timeout 120 --stop-time "$stop" --output-on-failure \
        --output-junit "$LOGS/ctest-$TASK.xml" "$@"
    rc=$?
    # " 3/24 Test #265: gpu.train.cnn-adam-bf16 ......***Skipped   0.05 sec"
    local line='^ *[0-9]+/[0-9]+ Test +#[0-9]+: '
    local pass fail skip tout notrun total names
    pass=$(grep -cE "$line.* Passed +[0-9.]+ sec" "$log")
    fail=$(grep -cE "$line.*\*\*\*(Failed|Exception)" "$log")
    skip=$(grep -cE "$line.*\*\*\*Skipped" "$log")
    tout=$(grep -cE "$line.*\*\*\*Timeout" "$log")
    notrun=$(grep -cE "$line.*\*\*\*Not Run" "$log")
    total=$(ctest --test-dir "$CTEST_DIR" -N "$@" 2> /dev/null | sed -n 's/^Total Tests: //p')
    names=$(grep -E "$line.*\*\*\*(Failed|Exception|Timeout|Not Run)" "$log" |
            sed -E 's/.*#[0-9]+: ([^ ]+) .*/\1/' | head -n 8 | tr '\n' ' ')
    local note="$pass passed, $fail failed, $skip skipped, $tout timed out, $notrun not run"
    [ -z "$total" ] ||
        note="$note, $((total - pass - fail - skip - tout - notrun)) not started (stop time), of $total"
    [ -z "$names" ] || note="$note: $names"
    local status
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=timed_out
    elif [ "$fail" -gt 0 ] || [ "$notrun" -gt 0 ]; then status=failed
    elif [ "$tout" -gt 0 ]; then status=timed_out
    elif [ "${total:-0}" -gt 0 ] && [ "$pass" -eq 0 ] && [ "$skip" -eq "$total" ]; then
        [ "$GPU_STATE" = none ] && status=skipped_no_gpu || status=failed
        note="$note (every test skipped: $(grep -m 1 -E '^SKIP' "$log" | head -c 160))"
    elif [ "$rc" = 0 ] && [ $((pass + skip)) -eq "${total:--1}" ]; then status=passed
    else status=failed; note="$note; ctest exit $rc"; fi
    result $status "$rc" "$note"
}
task_trajectories() { ctest_run -R "$TRAJECTORIES"; }
task_gpu_tests() { ctest_run -L gpu -E "$GPU_TESTS_EXCLUDE"; }

task_check() {
    need_bench || return
    local dir
    dir=$RESULTS/$(hostname -s)-check-$(date -u +%Y%m%dT%H%M%SZ)
    tmo "$BENCH" check --quick --device cuda:0 --out "$dir"
    local rc=$? status
    case $rc in
    0) status=passed;;
    3) [ "$GPU_STATE" = none ] && status=skipped_no_gpu || status=failed;;
    124|137) status=timed_out;;
    *) status=failed;;
    esac
    result $status $rc "$(grep -E '^(PASS|FAIL|WARN|NO GPU|OUTLIER)' "$LOGS/$TASK.log" | tail -n 1)"
}

task_bench_run() {
    need_bench || return
    local dir tdir python stamp others
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    dir=$RESULTS/$(hostname -s)-cuda0-$stamp
    tdir=$RESULTS/$(hostname -s)-cuda0-transformer-$stamp
    echo "$dir" > "$STATE/run_dir"
    python=$(command -v python3 || echo python3)
    local peer=(--peer torch --python "$python" --peer-script "$ROOT/suites/peers/torch_peer.py")
    # The transformer suite first, in its own directory, with up to half of the stage: the
    # figures issue 24's goals are judged by (GPT-2 tokens/s and MFU per attention mode and
    # fusion, attention against PyTorch's SDPA), which the whole quick run, in the suites'
    # order, never reached. Then every other suite that runs on cuda:0 with what is left.
    # SIGTERM 15 s before each part's end (bench run stops after the current benchmark and writes
    # what finished), SIGKILL at it: the stage ends on time.
    local half=$((($(left_s) - 15) / 2))
    [ "$half" -ge 1 ] || half=1
    timeout -k 15 "$half" "$BENCH" run --device cuda:0 --quick --suite transformer --out "$tdir" \
        "${peer[@]}"
    local rc1=$?
    others=$("$BENCH" list --device cuda:0 2>/dev/null |
             sed -n 's/^\([a-z][a-z0-9-]*\) \[[^]]*cuda[^]]*\].*/\1/p' | grep -vx transformer |
             paste -sd, -)
    local term=$(($(left_s) - 15))
    [ "$term" -ge 1 ] || term=1
    timeout -k 15 "$term" "$BENCH" run --device cuda:0 --quick ${others:+--suite "$others"} \
        --out "$dir" "${peer[@]}"
    local rc=$? status
    [ "$rc" != 0 ] || rc=$rc1
    # the anchor (an earlier stage) goes beside the run's figures
    [ ! -f "$RESULTS/torch_gpu_anchor.json" ] || [ ! -d "$dir" ] ||
        mv "$RESULTS/torch_gpu_anchor.json" "$dir/"
    status=$(verdict $rc "$LOGS/$TASK.log")
    local note
    note=$(grep -E '^bench run' "$LOGS/$TASK.log" | tail -n 1)
    [ "$status" != timed_out ] || note="stopped at the limit; status.json says what finished. $note"
    result "$status" $rc "$note"
}

task_bench_perf() {   # perf: the main job within the stage's limit, the peer interleaved
    need_bench || return
    local dir python budget limit a given="" how
    dir=$RESULTS/$(hostname -s)-cuda0-$(date -u +%Y%m%dT%H%M%SZ)
    echo "$dir" > "$STATE/run_dir"
    python=$(command -v python3 || echo python3)
    limit=$(left_s)
    budget=$((limit - BENCH_MARGIN))
    [ "$budget" -ge 1 ] || budget=1
    for a in "${ARGS[@]}"; do case $a in --budget|--budget=*|--quick) given=1;; esac; done
    local opts=() help
    help=$("$BENCH" run --help 2>&1)   # (not piped into grep -q: its early exit fails the pipe)
    if [ -n "$given" ]; then
        how="bench run's own ${ARGS[*]}"
    elif [[ $help == *--budget* ]]; then
        opts=(--budget "${budget}s") how="--budget ${budget}s"
    else   # a bench from before --budget: the quick run, cut at the limit, keeps what finished
        opts=(--quick) how="--quick (this bench has no --budget)"
    fi
    echo "bench run on cuda:0 with $how and the PyTorch peer, within ${limit} s"
    # SIGTERM 15 s before the limit (bench run writes what finished), SIGKILL at it
    timeout -k 15 "$((limit > 16 ? limit - 15 : 1))" "$BENCH" run --device cuda:0 "${opts[@]}" \
        --out "$dir" --peer torch --python "$python" --peer-script "$ROOT/suites/peers/torch_peer.py" \
        "${ARGS[@]}"
    local rc=$? status note
    [ ! -f "$RESULTS/torch_gpu_anchor.json" ] || [ ! -d "$dir" ] ||
        mv "$RESULTS/torch_gpu_anchor.json" "$dir/"
    status=$(verdict $rc "$LOGS/$TASK.log")
    note="$how; $(grep -E '^bench run' "$LOGS/$TASK.log" | tail -n 1)"
    [ "$status" != timed_out ] || note="stopped at the limit; status.json says what finished. $note"
    result "$status" $rc "$note"
}

task_compare() {   # perf: bench compare against the newest earlier run of the same GPU model
    local dir="" gpu base rc
    [ -s "$STATE/run_dir" ] && dir=$(cat "$STATE/run_dir")
    gpu=${TANDEM_PERF_GPU:-}
    [ -n "$gpu" ] || [ ! -f "$dir/context.json" ] ||
        gpu=$(tmo python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
print(next((g["name"] for g in c["env"]["gpus"] if g.get("device") == c["device"]), ""))' "$dir/context.json")
    [ -n "$gpu" ] || gpu=$(gpu_of_smi < "$WORK/env/nvidia-smi-L.txt" 2> /dev/null)
    base=""
    [ -z "$gpu" ] || base=$(tmo python3 "$ROOT/.ci/gpu-summary.py" --baseline "$EARLIER" "$gpu" "$dir")
    echo "$base" > "$STATE/baseline"
    local with="no earlier run on ${gpu:-this GPU} in ${EARLIER#"$ROOT"/}/"
    [ -z "$base" ] || with="the earlier run ${base#"$ROOT"/} ($gpu)"
    if [ "$GPU_STATE" = none ]; then
        result skipped_no_gpu "" "$GPU_DESC; would compare with $with"
        return
    fi
    if [ ! -d "$dir" ]; then
        result skipped "" "bench-perf left no results directory; would compare with $with"
        return
    fi
    if [ -z "$base" ]; then
        result skipped "" "$with: nothing to compare with"
        return
    fi
    need_bench || return
    tmo "$BENCH" compare "$base" "$dir"
    rc=$?
    case $rc in
    0) result passed 0 "against $with: no significant regression";;
    1) result changed 1 "against $with: a significant regression or a suspect change (logs/compare.log)";;
    124|137) result timed_out $rc "against $with";;
    *) result failed $rc "against $with: $(last_line "$LOGS/$TASK.log")";;
    esac
}

task_anchor() {   # PyTorch may see a GPU that bench does not: it runs unless there is none
    [ "$GPU_STATE" != none ] || { result skipped_no_gpu "" "$GPU_DESC"; return; }
    tmo python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    case $? in 0) ;; 3) result failed 3 "torch.cuda.is_available() is False"; return;;
                 *) result skipped "" "python3 has no torch"; return;; esac
    # into results/ until bench-run (perf: bench-perf) moves it beside its figures
    tmo python3 "$ANCHOR" --quick --out "$RESULTS/torch_gpu_anchor.json"
    local rc=$?
    result "$(verdict $rc "$LOGS/$TASK.log")" $rc "$(last_line "$LOGS/$TASK.log")"
}

sanitize() {   # sanitize TOOL COMMAND...: compute-sanitizer --tool TOOL over COMMAND
    local tool=$1 cs rc
    shift
    case $GPU_STATE in
    none) result skipped_no_gpu "" "$GPU_DESC"; return;;
    unseen) result skipped "" "bench does not see the GPU (env): $GPU_DESC"; return;;
    esac
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    [ -x "$cs" ] || { result skipped "" "compute-sanitizer not found"; return; }
    need_bench || return
    tmo "$cs" --tool "$tool" --error-exitcode 86 --log-file "$LOGS/$tool.report.log" "$@"
    rc=$?
    if grep -qs 'Device not supported' "$LOGS/$tool.report.log" "$LOGS/$TASK.log"; then
        result skipped $rc "compute-sanitizer: device not supported here (as on gVisor machines)"
        return
    fi
    local summary
    summary=$(grep -hE 'ERROR SUMMARY' "$LOGS/$tool.report.log" 2>/dev/null | tail -n 1)
    case $rc in
    0) result passed 0 "${summary:-clean}";;
    86) result failed 86 "${summary:-errors found} (logs/$tool.report.log)";;
    124|137) result timed_out $rc "${summary}";;
    *) result failed $rc "exit $rc ${summary}; $(last_line "$LOGS/$TASK.log")";;
    esac
}
task_memcheck() {
    local op f cases=()
    for op in $MEMCHECK_OPS; do   # the first f32 case of each
        for f in suites/golden/cases/"$op"-f32-*.safetensors; do
            [ -f "$f" ] && cases+=("$f")
            break
        done
    done
    sanitize memcheck "$BENCH" replay --device cuda:0 "${cases[@]}"
}
task_racecheck() {
    sanitize racecheck "$BENCH" conform --device cuda:0 --ops "$RACECHECK_OPS" --dtypes f32 \
        --cases 1 --seed 3 --failures "$RESULTS/racecheck-failures"
}
task_synccheck() {
    sanitize synccheck "$BENCH" conform --device cuda:0 --ops "$RACECHECK_OPS" --dtypes f32 \
        --cases 1 --seed 3 --failures "$RESULTS/synccheck-failures"
}

# ---- the summary and the archive --------------------------------------------------------------
declare -A ST_STATUS ST_EXIT ST_NOTE ST_WALL ST_LIMIT
GPU_STATE=unknown GPU_DESC="not yet looked at" COMMIT=unknown SOURCE="" BENCH_MODE=none
BENCH="" CTEST_DIR="" BUILD_PID="" ARCHIVE_NOTE="none yet" FINISHED=false

write_summary() {
    local s t key entries="" sep="" details=null
    for s in "${STAGES[@]}"; do
        for t in ${TASKS[$s]}; do
            key=$s/$t
            entries+="$sep{\"stage\": $(json_str "$s"), \"task\": $(json_str "$t"), "
            entries+="\"budget_s\": $(scale "${BUDGET[$s]}"), \"limit_s\": ${ST_LIMIT[$key]:-null}, "
            entries+="\"wall_s\": ${ST_WALL[$key]:-null}, \"status\": \"${ST_STATUS[$key]:-pending}\", "
            entries+="\"exit\": ${ST_EXIT[$key]:-null}, \"note\": $(json_str "${ST_NOTE[$key]:-}"), "
            entries+="\"log\": \"logs/$t.log\"}"
            sep=$',\n  '
        done
    done
    [ -s "$WORK/details.json" ] && details=$(cat "$WORK/details.json")
    {
        printf '{"format": "tandem-gpu-%s/1",\n "commit": %s,\n "source": %s,\n' \
            "$MODE" "$(json_str "$COMMIT")" "$(json_str "$SOURCE")"
        printf ' "bench": %s,\n "gpu": %s,\n "gpu_state": "%s",\n' \
            "$(json_str "$BENCH_MODE ${BENCH#"$ROOT"/}")" "$(json_str "$GPU_DESC")" "$GPU_STATE"
        printf ' "total_budget_s": %s, "elapsed_s": %s, "finished": %s,\n "archive": %s,\n' \
            "$TOTAL" "$(secs $(($(ms_now) - T0)))" "$FINISHED" "$(json_str "$ARCHIVE_NOTE")"
        printf ' "stages": [\n  %s\n ],\n "details": %s\n}\n' "$entries" "$details"
    } > "$WORK/summary.json.part" && mv -f "$WORK/summary.json.part" "$WORK/summary.json"
    cp "$WORK/summary.json" "$OUT/summary.json.part" && mv -f "$OUT/summary.json.part" "$OUT/summary.json"
}

archive() {   # WORK as $OUT/session.tar.gz, at most ARCHIVE_CAP: the bulkiest files go first
    local f size tier part=$OUT/session.tar.gz.part
    find "$LOGS" -type f -size +4M -print0 2> /dev/null |   # a runaway log: its head and tail
        while IFS= read -r -d '' f; do
            { head -c 1M "$f"; printf '\n[... %s bytes cut ...]\n' "$(stat -c %s "$f")"; tail -c 2M "$f"; } \
                > "$f.cut" && mv -f "$f.cut" "$f"
        done
    for tier in 0 1 2 3; do
        case $tier in
        0) tar -czf "$part" -C "$WORK" --exclude=./state . ;;
        1) tar -czf "$part" -C "$WORK" --exclude=./state --exclude='*.samples.csv' \
               --exclude=profiles --exclude='*.trace.json' . ;;
        2) tar -czf "$part" -C "$WORK" --exclude=./state --exclude='*.samples.csv' \
               --exclude=profiles --exclude='*.trace.json' --exclude='*-failures' . ;;
        3) (cd "$WORK" && find . -path ./state -prune -o -type f \( -path './logs/*' -o -path './env/*' \
               -o -name summary.json -o -name details.json -o -name status.json -o -name context.json \
               -o -name '*.csv' ! -name '*.samples.csv' \) -size -2M -print0 |
               tar -czf "$part" --null -T -) ;;
        esac
        size=$(stat -c %s "$part" 2>/dev/null || echo 0)
        [ "$size" -le "$ARCHIVE_CAP" ] && break
    done
    mv -f "$part" "$OUT/session.tar.gz"
    case $tier in
    0) ARCHIVE_NOTE="session.tar.gz: $size bytes, everything";;
    1) ARCHIVE_NOTE="session.tar.gz: $size bytes, without raw samples and profiles (over 15 MiB)";;
    2) ARCHIVE_NOTE="session.tar.gz: $size bytes, without raw samples, profiles and failing cases (over 15 MiB)";;
    *) ARCHIVE_NOTE="session.tar.gz: $size bytes, logs and summaries only (over 15 MiB otherwise)";;
    esac
    tail -c 2M "$WORK/console.log" > "$OUT/console.log.part" && mv -f "$OUT/console.log.part" "$OUT/console.log"
}

details() {   # from the logs (.ci/gpu-summary.py), embedded in summary.json: first, per test and
    # per op; perf, tandem / PyTorch per row and bench compare's outcome
    command -v python3 > /dev/null || return
    local args=("$LOGS")
    if [ "$MODE" = perf ]; then
        args=(--perf "$LOGS" "$(cat "$STATE/run_dir" 2> /dev/null)")
        [ ! -s "$STATE/baseline" ] || args+=("$(cat "$STATE/baseline")")
    fi
    STAGE_END_MS=$(($(ms_now) + 20000)) tmo python3 "$ROOT/.ci/gpu-summary.py" "${args[@]}" \
        > "$WORK/details.json.part" 2> /dev/null && mv -f "$WORK/details.json.part" "$WORK/details.json"
}

# ---- the stages -------------------------------------------------------------------------------
PLANNED_MS=0
run_stage() {
    local s=$1 t key budget el limit_ms cap_ms limit pids=() start
    budget=$(scale "${BUDGET[$s]}")
    el=$(($(ms_now) - T0))
    limit_ms=$((PLANNED_MS + budget * 1000 - el))   # its budget and what the stages before left
    cap_ms=$(((TOTAL - RESERVE) * 1000 - el))
    [ "$limit_ms" -le "$cap_ms" ] || limit_ms=$cap_ms
    PLANNED_MS=$((PLANNED_MS + budget * 1000))
    limit=$(((limit_ms + 500) / 1000))
    if [ "$limit" -lt "$MIN_STAGE" ]; then
        for t in ${TASKS[$s]}; do
            key=$s/$t
            ST_STATUS[$key]=skipped_time ST_LIMIT[$key]=$((limit < 0 ? 0 : limit)) ST_WALL[$key]=0
            ST_NOTE[$key]="${limit} s left at $(secs "$el") s, under the ${MIN_STAGE} s a stage needs"
        done
        printf '== %-10s skipped: %s s left\n' "$s" "$limit"
        write_summary; archive
        return
    fi
    STAGE_END_MS=$(($(ms_now) + limit_ms))
    for t in ${TASKS[$s]}; do
        ST_STATUS[$s/$t]=running ST_LIMIT[$s/$t]=$limit
    done
    write_summary
    printf '== %-10s budget %3s s, limit %3s s, at %s s\n' "$s" "$budget" "$limit" "$(secs "$el")"
    start=$(ms_now)
    if [ "$s" = setup ]; then
        TASK=setup TASK_START=$start task_setup > "$LOGS/setup.log" 2>&1
    else
        for t in ${TASKS[$s]}; do
            (TASK=$t TASK_START=$(ms_now)
             if [ "${TANDEM_FIRST_HOLD:-}" = "$t" ]; then   # a test of the limits: hold it there
                 tmo sleep 100000
                 result "$( [ $? = 124 ] && echo timed_out || echo failed)" 124 "held by TANDEM_FIRST_HOLD"
             else
                 "task_$t"
             fi) > "$LOGS/$t.log" 2>&1 < /dev/null &
            pids+=($!)
        done
        local alive p
        while :; do   # every command is under timeout; this only guards against a stuck shell
            alive=0
            for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && alive=1; done
            [ "$alive" = 1 ] || break
            if [ "$(ms_now)" -gt $((STAGE_END_MS + 30000)) ]; then
                kill -9 "${pids[@]}" 2> /dev/null
                break
            fi
            sleep 0.2
        done
        wait "${pids[@]}" 2> /dev/null
    fi
    for t in ${TASKS[$s]}; do
        key=$s/$t
        if [ -s "$STATE/$t" ]; then
            { read -r "ST_STATUS[$key]"; read -r "ST_EXIT[$key]"
              IFS= read -r "ST_NOTE[$key]"; read -r "ST_WALL[$key]"; } < "$STATE/$t"
            [[ "${ST_EXIT[$key]}" =~ ^[0-9]+$ ]] || ST_EXIT[$key]=null
        else
            ST_STATUS[$key]=failed ST_EXIT[$key]=null ST_WALL[$key]=$(secs $(($(ms_now) - start)))
            ST_NOTE[$key]="the task left no verdict (killed past its limit?): logs/$t.log"
        fi
        printf '   %-13s %-15s %6s s  %s\n' "$t" "${ST_STATUS[$key]}" "${ST_WALL[$key]}" "${ST_NOTE[$key]:0:150}"
    done
    if [ "$s" = env ] && [ -s "$STATE/gpu" ]; then
        { read -r GPU_STATE; IFS= read -r GPU_DESC; } < "$STATE/gpu"
    fi
    details; write_summary; archive
}

echo "gpu-session $MODE: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname -s), ${TOTAL} s in all; out: $OUT"
for s in "${STAGES[@]}"; do run_stage "$s"; done
FINISHED=true
[ -z "$BUILD_PID" ] || kill "$BUILD_PID" 2> /dev/null
details; write_summary; archive
echo "== done in $(secs $(($(ms_now) - T0))) s; $ARCHIVE_NOTE"
printf '%-10s %-13s %6s %6s %8s  %s\n' stage task budget limit wall status
for s in "${STAGES[@]}"; do
    for t in ${TASKS[$s]}; do
        printf '%-10s %-13s %6s %6s %8s  %s\n' "$s" "$t" "$(scale "${BUDGET[$s]}")" \
            "${ST_LIMIT[$s/$t]:--}" "${ST_WALL[$s/$t]:--}" "${ST_STATUS[$s/$t]}"
    done
done
if [ "$MODE" = perf ] && [ -s "$WORK/details.json" ]; then   # tandem / PyTorch per suite
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1])).get("tandem_per_torch") or {}
for s, e in sorted((d.get("per_suite") or {}).items()):
    b, w = e["best"], e["worst"]
    print("tandem/PyTorch %-12s %4d rows: median %.2f, best %.2f (%s), worst %.2f (%s)"
          % (s, e["rows"], e["median"], b["ratio"], b["row"], w["ratio"], w["row"]))
if not d.get("per_suite"):
    print("tandem/PyTorch: no row on both sides")' "$WORK/details.json"
fi
# the exit status: 0 when every task passed, changed (perf's compare) or skipped for a reason it
# states, 1 otherwise
bad=0
for k in "${!ST_STATUS[@]}"; do
    case ${ST_STATUS[$k]} in failed|timed_out) bad=1;; esac
done
exec 1>&3 2>&4 3>&- 4>&-   # tee's last lines out before this ends
wait "$TEE_PID" 2> /dev/null
exit $bad
