# .ci/gpu-rehearse.sh — `.ci/gpu-session rehearse`, sourced by it (ROOT, OUT, CARRY, PREBUILT,
# torch_env and ldd_table come from there): `first` and `perf` end to end without a GPU, as the GPU
# machine will run them (.ci/gpu-session's header: what a runner must give), so that a GPU call is
# not spent finding a missing library or a full $OUT. Run it from a fresh clone before every GPU
# call (with `pack` first): what a clone lacks, the GPU machine lacks too.
#
#   1. PyTorch 2.11's CUDA 13 libraries from PyPI, at the versions its wheel pins (torch 2.11.0:
#      cuda-toolkit[cublas,cudart,...]==13.0.2 -> nvidia-cublas 13.1.0.3, nvidia-cuda-runtime
#      13.0.96; nvidia-cudnn-cu13==9.19.0.56; nvidia-nccl-cu13==2.28.9), downloaded once into .whl/
#      (ignored; 0.95 GB) and unpacked as pip lays them out: site-packages/nvidia/cu13/lib
#      (libcublas.so.13, libcublasLt.so.13, libcudart.so.13), nvidia/cudnn/lib (libcudnn*.so.9),
#      nvidia/nccl/lib (libnccl.so.2);
#   2. a copy of what travels (tracked + untracked-not-ignored files, and .carry/) in
#      $TANDEM_REHEARSE_DIR (default /tmp/tandem-rehearse)/repo: its size against the 64 MiB;
#   3. `first`, then `perf`, there in a mount namespace (unshare -m, as root) where this checkout,
#      the system's Google Benchmark and cJSON, CUDA's and cuDNN's library folders and gnuplot are
#      hidden, with a clean environment (env -i; TANDEM_SITE names the unpacked site-packages): every
#      GPU task must say skipped_no_gpu, and each call's summary.json, session.tar.gz and console.log
#      must come out within a runner's limits (at most 8 files of 16 MiB, two folders deep);
#   4. ldd over bench and every test program in the same namespace: each library from the carry,
#      the pip folders or the C/C++ runtime, nothing missing (libbenchmark, libcjson and libcrypto
#      from the carry: the system's libcrypto stays visible, as ctest and python3 need it); each
#      program started once with LD_BIND_NOW=1 (every symbol bound at load); the newest
#      GLIBC/GLIBCXX versions they need.
# The report goes to gpu-out/rehearse-report.txt. Exit 1 when a check fails.
set -euo pipefail
R=${TANDEM_REHEARSE_DIR:-/tmp/tandem-rehearse}

if [ "${REHEARSE_INSIDE:-}" = 1 ]; then
    # ---- inside the namespace (run from the copy, $R/repo) --------------------------------------
    hide_file() {   # a file (a link's target) as an empty character device
        local t
        t=$(readlink -f "$1")
        if [ -f "$t" ]; then mount --bind /dev/null "$t" && echo "   hidden: $1"; fi
        return 0
    }
    hide_dir() {    # a folder as an empty one
        local t
        t=$(readlink -f "$1")
        if [ -d "$t" ] && [ -n "$(ls -A "$t")" ]; then
            mount -t tmpfs -o size=1m,mode=755 none "$t" && echo "   hidden: $1 ($t)"
        fi
        return 0
    }
    if [ "${REHEARSE_HIDE:-}" = 1 ]; then
        mkdir -p "$R/site"
        mount --bind "$REHEARSE_SITE_SRC" "$R/site"
        for f in /usr/lib/x86_64-linux-gnu/libbenchmark*.so* /usr/lib/x86_64-linux-gnu/libcjson*.so* \
                 /usr/bin/gnuplot; do
            [ -e "$f" ] && hide_file "$f"
        done
        for d in /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
                 "$REHEARSE_SOURCE"; do
            [ -d "$d" ] && hide_dir "$d"
        done
        [ -z "$(ls -A "$REHEARSE_SOURCE")" ] || { echo "rehearse: $REHEARSE_SOURCE is still visible" >&2; exit 1; }
    else
        ln -sfn "$REHEARSE_SITE_SRC" "$R/site"
    fi
    cd "$R/repo"
    clean_env=(env -i PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
               HOME="$HOME" LANG=C.UTF-8 TERM=dumb TANDEM_SITE="$R/site")
    echo "== rehearse: first (no GPU, clean environment)"
    set +e
    "${clean_env[@]}" OUT="$R/out" TANDEM_FIRST_SECONDS="${TANDEM_FIRST_SECONDS:-540}" \
        bash .ci/gpu-session first > "$R/first.out" 2>&1
    echo $? > "$R/first.rc"
    echo "== rehearse: perf (no GPU, clean environment)"
    "${clean_env[@]}" OUT="$R/out-perf" TANDEM_FIRST_SECONDS="${TANDEM_FIRST_SECONDS:-540}" \
        bash .ci/gpu-session perf > "$R/perf.out" 2>&1
    echo $? > "$R/perf.rc"
    echo "== rehearse: ldd and a load trial of each program (LD_BIND_NOW=1)"
    progs=("$PREBUILT/bench" "$PREBUILT"/suites/tests/test_*)
    "${clean_env[@]}" bash .ci/gpu-session ldd "${progs[@]}" > "$R/ldd.txt" 2>&1
    : > "$R/load.txt"
    for p in "${progs[@]}"; do
        LD_BIND_NOW=1 "${clean_env[@]}" timeout 20 bash .ci/gpu-session with-libs "$p" \
            < /dev/null > /dev/null 2> "$R/load.err"
        echo "$? $p" >> "$R/load.txt"
        if grep -q 'error while loading shared libraries\|symbol lookup error\|version .* not found' "$R/load.err"; then
            echo "LOADFAIL $p: $(head -c 300 "$R/load.err")" >> "$R/load.txt"
        fi
    done
    exit 0
fi

# ---- outside: wheels, the copy, the namespace, the report ------------------------------------
die() { echo "rehearse: $*" >&2; exit 1; }
[ -s "$CARRY/prebuilt.tar.xz" ] || die "no .carry/prebuilt.tar.xz: run .ci/gpu-session pack first"
WHL=$ROOT/.whl
wheels=(nvidia-cuda-runtime==13.0.96 nvidia-cublas==13.1.0.3 nvidia-cudnn-cu13==9.19.0.56
        nvidia-nccl-cu13==2.28.9)
platforms=()
for n in 17 18 27 28; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
mkdir -p "$WHL/site"
echo "== rehearse: PyTorch 2.11's CUDA 13 wheels (.whl/)"
for spec in "${wheels[@]}"; do
    name=${spec%%==*} version=${spec#*==}
    stem="${name//-/_}-$version"
    whl=$(compgen -G "$WHL/$stem-*.whl" | head -n 1 || true)
    if [ -z "$whl" ]; then
        python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp "${platforms[@]}" --platform manylinux2014_x86_64 -d "$WHL" "$spec"
        whl=$(compgen -G "$WHL/$stem-*.whl" | head -n 1 || true)
        [ -n "$whl" ] || die "pip download $spec left no $stem-*.whl in .whl/"
    fi
    if [ ! -e "$WHL/site/.$stem" ]; then   # unpacked as pip installs it (modes kept)
        python3 - "$whl" "$WHL/site" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        if info.filename.startswith("nvidia/"):
            path = z.extract(info, sys.argv[2])
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(path, mode)
EOF
        touch "$WHL/site/.$stem"
    fi
    echo "   $spec  $(basename "$whl")  $(du -sh "$whl" | cut -f1)"
done
(cd "$WHL/site" && ls -d nvidia/*/lib | sed 's/^/   site-packages\//')

echo "== rehearse: the copy of what travels ($R/repo)"
rm -rf "$R" && mkdir -p "$R/repo" "$R/out" "$R/out-perf"
git ls-files -co --exclude-standard -z | xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf - | tar -x -C "$R/repo"
[ ! -d shared ] || cp -a shared "$R/repo/"
cp -a "$CARRY" "$R/repo/.carry"
tree_b=$(du -sb --exclude=.carry "$R/repo" | cut -f1)
carry_b=$(du -sb "$R/repo/.carry" | cut -f1)
travel_b=$((tree_b + carry_b))

ns=yes
if ! unshare --mount --propagation private true 2> /dev/null; then
    ns=no
    echo "rehearse: cannot make a mount namespace (unshare -m needs root): nothing is hidden; ldd's" \
         "table still says where each library comes from" >&2
fi
start=$SECONDS
if [ "$ns" = yes ]; then
    REHEARSE_INSIDE=1 REHEARSE_HIDE=1 REHEARSE_SITE_SRC="$WHL/site" REHEARSE_SOURCE="$ROOT" \
        TANDEM_REHEARSE_DIR="$R" unshare --mount --propagation private bash "$R/repo/.ci/gpu-session" rehearse
else
    REHEARSE_INSIDE=1 REHEARSE_SITE_SRC="$WHL/site" TANDEM_REHEARSE_DIR="$R" \
        bash "$R/repo/.ci/gpu-session" rehearse
fi
wall=$((SECONDS - start))

# ---- the report -------------------------------------------------------------------------------
report=$OUT/rehearse-report.txt
fail=0
check() {   # check WHAT CONDITION...
    local what=$1
    shift
    if "$@"; then echo "  ok    $what"; else echo "  FAIL  $what"; fail=1; fi
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
{
echo "gpu-session rehearse: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname -s), commit $(cat "$CARRY/commit")"
echo
echo "what travels: $(mib "$travel_b") of 64 MiB (working tree $(mib "$tree_b"), .carry/ $(mib "$carry_b"))"
(cd "$R/repo/.carry" && du -ab --max-depth=1 . | sort -rn | tail -n +2 | head -n 8 |
    awk '{ printf "   %-28s %8.1f MiB\n", substr($2, 3), $1 / 1048576 }')
sed 's/^/   /' "$R/repo/$PREBUILT/prebuilt.info" 2>/dev/null || true
check "what travels is at most 64 MiB" [ "$travel_b" -le "$MAX_TRAVEL" ]
echo
echo "first and perf: $wall s wall here (2 shared cores; the GPU machine has 16)"
summary_table() {   # summary_table SUMMARY: the call's stages
    python3 - "$1" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"   bench: {s['bench']}; gpu: {s['gpu_state']} ({s['gpu']}); source: {s['source']}")
print(f"   {s['archive']}; elapsed {s['elapsed_s']} s of {s['total_budget_s']}; finished {s['finished']}")
print(f"   {'stage':10} {'task':13} {'budget':>6} {'limit':>6} {'wall':>6}  status          note")
for e in s["stages"]:
    print(f"   {e['stage']:10} {e['task']:13} {e['budget_s']:>6} {e['limit_s']!s:>6} {e['wall_s']!s:>6}  "
          f"{e['status']:15} {e['note'][:90]}")
EOF
}
stages_ok() {   # stages_ok SUMMARY FORMAT TASK...: every stage task there, setup and env passed,
    # every GPU task skipped_no_gpu, finished, the prebuilt used
    python3 - "$@" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
want = set(tuple(t.split("/")) for t in sys.argv[3:])
got = {(e["stage"], e["task"]): e["status"] for e in s["stages"]}
bad = [k for k in want if k not in got] + [k for k in got if k not in want]
gpu = [k for k in want if k[0] not in ("setup", "env") and got.get(k) != "skipped_no_gpu"]
ok = (s["format"] == sys.argv[2] and not bad and not gpu and got[("setup", "setup")] == "passed"
      and got[("env", "env")] == "passed" and s["finished"] and s["bench"].startswith("prebuilt"))
if not ok:
    print("   format:", s["format"], "missing or extra:", bad, "GPU tasks not skipped_no_gpu:", gpu,
          file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}
out_ok() {   # out_ok DIR: at most 8 files, none over 16 MiB, at most 2 folders down, plain names
    local nfiles big deep odd
    nfiles=$(find "$1" -type f | wc -l)
    big=$(find "$1" -type f -size +16M | wc -l)
    deep=$(find "$1" -mindepth 3 -type f | wc -l)
    odd=$(find "$1" -type f -printf '%P\n' | grep -c '[^A-Za-z0-9._/-]' || true)
    test "$nfiles" -le 8 -a "$big" = 0 -a "$deep" = 0 -a "$odd" = 0
}
for call in first perf; do
    o=$R/out; [ "$call" = first ] || o=$R/out-perf
    echo
    echo "$call: exit $(cat "$R/$call.rc")"
    summary_table "$o/summary.json" || true
    if [ "$call" = first ]; then
        check "first: summary.json: every stage, setup and env passed, every GPU task skipped_no_gpu" \
            stages_ok "$o/summary.json" tandem-gpu-first/1 setup/setup env/env numerics/replay \
            numerics/conform numerics/trajectories gpu-tests/gpu_tests check/check bench-run/bench_run \
            anchor/anchor sanitizer/memcheck sanitizer/racecheck sanitizer/synccheck
    else
        check "perf: summary.json: every stage, setup and env passed, every GPU task skipped_no_gpu" \
            stages_ok "$o/summary.json" tandem-gpu-perf/1 setup/setup env/env anchor/anchor \
            bench-perf/bench_perf compare/compare
    fi
    check "$call: exit 0 (nothing failed)" [ "$(cat "$R/$call.rc")" = 0 ]
    echo "   \$OUT (what a runner brings back):"
    (cd "$o" && find . -type f -printf '      %P  %s bytes\n' | sort)
    check "$call: \$OUT: at most 8 files, none over 16 MiB, at most 2 folders down, plain names" out_ok "$o"
    echo "   session.tar.gz holds: $(tar -tzf "$o/session.tar.gz" | grep -E '^\./[^/]+/?$' | tr '\n' ' ')"
done
echo
echo "ldd (programs: $(wc -l < "$R/load.txt" | tr -d ' '); each library once, with where it resolved):"
awk '{ k = $2 " " $3 " " $4; if (!(k in seen)) { seen[k] = 1; printf "   %-28s %-8s %s\n", $2, $3, $4 } }' "$R/ldd.txt" | sort -k2,2 -k1,1
echo "   expected from the driver, not NEEDED by any program (dlopened at run time): libcuda.so.1"
echo "   (the static CUDA runtime), libnvidia-ml.so.1 (bench check's NVML)"
check "ldd: nothing missing, nothing from outside the carry, pip folders and C/C++ runtime" \
    bash -c '! awk "\$3 != \"carry\" && \$3 != \"pip\" && \$3 != \"system\" && \$3 != \"driver\"" "$0" | grep -q .' "$R/ldd.txt"
check "ldd: libbenchmark, libcjson and libcrypto from .carry/ only" \
    bash -c '[ "$(awk "\$2 ~ /^lib(benchmark|cjson|crypto)/ && \$3 != \"carry\"" "$0" | wc -l)" = 0 ]' "$R/ldd.txt"
check "ldd: cuBLAS, cuDNN and NCCL from PyTorch's pip folders only" \
    bash -c '[ "$(awk "\$2 ~ /^lib(cublas|cudnn|nccl)/ && \$3 != \"pip\"" "$0" | wc -l)" = 0 ]' "$R/ldd.txt"
check "each program loads with every symbol bound (LD_BIND_NOW=1)" \
    bash -c '! grep -q "^LOADFAIL" "$0"' "$R/load.txt"
grep '^LOADFAIL' "$R/load.txt" | sed 's/^/   /' || true
glibc=$(objdump -T "$R/repo/$PREBUILT/bench" "$R/repo/$PREBUILT"/suites/tests/test_* \
        "$R/repo/.carry/deps/lib/x86_64-linux-gnu/"lib*.so.* 2>/dev/null |
        grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
glibcxx=$(objdump -T "$R/repo/$PREBUILT/bench" "$R/repo/$PREBUILT"/suites/tests/test_* \
          "$R/repo/.carry/deps/lib/x86_64-linux-gnu/"libbenchmark.so.* 2>/dev/null |
          grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n 1)
echo "   newest versions needed: $glibc (this machine: $(ldd --version | head -n 1 | awk '{print $NF}')), $glibcxx"
echo "   (Ubuntu 22.04 has GLIBC 2.35 and GLIBCXX_3.4.30; 24.04 has 2.39 and 3.4.33)"
echo
if [ "$fail" = 0 ]; then echo "rehearse: every check passed"; else echo "rehearse: a check FAILED (above)"; fi
echo "(consoles: $R/first.out, $R/perf.out; their \$OUT: $R/out, $R/out-perf; ldd: $R/ldd.txt)"
} 2>&1 | tee "$report"
grep -q '^rehearse: every check passed' "$report"
