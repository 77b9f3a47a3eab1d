#!/bin/sh
# gpu_session_portable.sh — the GPU session's scripts work from a clone alone, on any machine:
#   - none reads outside the repository: no path that climbs out of it (../x; `pack` once copied
#     the PyTorch anchor from ../shared/) — the scripts' own `$(dirname "$0")/..` stays inside;
#   - none names an absolute path of the machine it was written on: not the source tree's own
#     path, nor its parent's, nor a home folder (/home/..., /root/...);
#   - what `pack`, `first` and `perf` run from the tree is in it: the PyTorch anchor
#     (suites/peers/torch_gpu_anchor.py, which parses as Python) and the peer.
# usage: gpu_session_portable.sh SOURCE_DIR
src=$(cd "$1" && pwd) || exit 1
cd "$src" || exit 1
files=".ci/gpu-session .ci/gpu-first.sh .ci/gpu-rehearse.sh .ci/gpu-summary.py .ci/gpu_results.py
       .ci/results-table.py suites/peers/torch_gpu_anchor.py results/README.md"
bad=0
for f in $files; do
    [ -f "$f" ] || { echo "FAIL: $f is missing"; bad=1; continue; }
    if grep -nE '(^|[^./A-Za-z0-9_])\.\./' "$f"; then
        echo "FAIL: $f names a path outside the repository (above)"
        bad=1
    fi
    parent=$(dirname "$src")
    for p in "$src" "$parent/" /home/ /root/; do
        [ "$p" != "//" ] || continue
        if grep -nF "$p" "$f"; then
            echo "FAIL: $f names $p, a path of this machine (above)"
            bad=1
        fi
    done
done
grep -q 'suites/peers/torch_gpu_anchor.py' .ci/gpu-first.sh ||
    { echo "FAIL: first/perf do not run the anchor from the tree"; bad=1; }
python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' suites/peers/torch_gpu_anchor.py ||
    { echo "FAIL: suites/peers/torch_gpu_anchor.py does not parse"; bad=1; }
[ "$bad" = 0 ] && echo "the GPU session's scripts read nothing outside the repository and name no path of this machine"
exit $bad
