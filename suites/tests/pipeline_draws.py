"""pipeline_draws.py — checks a pipeline suite's JSON (Google Benchmark's) for issue 32 item 2:
the file parses as strict JSON (no NaN: a counter 0 in every repetition gives Google Benchmark's
cv aggregate one), and every timed repetition's dataset_draws is 1 (each dataset drawn once per
process and kept; a call that draws its own counts up).
usage: pipeline_draws.py PIPELINE.json"""
import json
import sys


def no_constants(c):
    sys.exit("%s holds %s: not JSON" % (sys.argv[1], c))


runs = json.load(open(sys.argv[1]), parse_constant=no_constants)["benchmarks"]
draws = [b.get("dataset_draws") for b in runs if b.get("run_type") == "iteration"]
print("%d repetitions, dataset_draws %s" % (len(draws), sorted(set(map(str, draws)))))
if len(draws) < 6 or any(d != 1 for d in draws):
    sys.exit("FAIL: a dataset was drawn again (dataset_draws other than 1)")
