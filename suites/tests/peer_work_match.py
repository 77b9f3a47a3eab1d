#!/usr/bin/env python3
"""peer_work_match.py TANDEM_LIST.json PEER_LIST.json | --self-test — a row's name means the same work on both
sides (docs/PEERS.md): compares `bench list --json` with the PyTorch peer's `--list --json`, row
by row, for every row id both sides have. Each row's "work" (what one timed iteration does:
op or model, dtype, shapes, batch, products or steps per iteration, FLOP/bytes/samples counted)
must be equal: the same keys, the same strings, numbers equal to 1e-12 relative. A row that
describes its work on one side only is a mismatch too, and so is a row both sides have that
neither describes (unless NEITHER_EXEMPT names it, with the reason): a row compared by name alone
could mean different work. Standard library only (no torch). Exit: 0 all equal, 1 a mismatch, 2
bad input.
"""
import json
import re
import sys

# Rows both sides may have without a work description, each with the reason (regular expressions
# over the row id). Every suite the peer ports describes its rows today: none.
NEITHER_EXEMPT = []   # [(re.compile(r"^suite/row/"), "why its work cannot be described"), ...]


def rows(doc):
    """{id: work} of a tandem-list/1 document."""
    out = {}
    for s in doc.get("suites", []):
        for b in s.get("benchmarks", []):
            out[b["id"]] = b.get("work")
    return out


def diff(a, b, path=""):
    """The first difference between two work descriptions, or None."""
    if isinstance(a, bool) or isinstance(b, bool):
        return None if a is b else "%s: %r against %r" % (path or "work", a, b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b)):
            return None
        return "%s: %r against %r" % (path or "work", a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s.%s: only in %s" % (path or "work", k, "tandem" if k in a else "the peer")
            d = diff(a[k], b[k], "%s.%s" % (path or "work", k))
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return "%s: %r against %r" % (path or "work", a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, "%s[%d]" % (path or "work", i))
            if d:
                return d
        return None
    return None if a == b else "%s: %r against %r" % (path or "work", a, b)


def self_test():
    """--self-test: the check fails on each planted mismatch and passes the unplanted pair."""
    import copy
    w = {"op": "train_step", "model": "mlp:4-2", "batch": 8, "per_iteration": 1, "samples": 8}
    doc = {"device": "cpu", "suites": [{"name": "s", "benchmarks": [
        {"id": "s/a/n:1", "work": w}, {"id": "s/b/n:1", "work": dict(w, batch=4)}]}]}
    plants = {
        "none": lambda t, p: None,
        "neither": lambda t, p: [b.update(work=None) for d in (t, p)
                                 for b in d["suites"][0]["benchmarks"][:1]],
        "tandem only": lambda t, p: p["suites"][0]["benchmarks"][0].update(work=None),
        "peer only": lambda t, p: t["suites"][0]["benchmarks"][1].update(work=None),
        "number": lambda t, p: p["suites"][0]["benchmarks"][1]["work"].update(batch=5),
        "key": lambda t, p: p["suites"][0]["benchmarks"][0]["work"].update(dtype="f32"),
    }
    failures = 0
    for name, plant in plants.items():
        t, p = copy.deepcopy(doc), copy.deepcopy(doc)
        plant(t, p)
        got = check(t, p, quiet=True)
        want = 0 if name == "none" else 1
        print("plant %-12s exit %d (expected %d)" % (name, got, want))
        failures += got != want
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 3:
        sys.stderr.write("usage: peer_work_match.py TANDEM_LIST.json PEER_LIST.json\n")
        return 2
    try:
        docs = []
        for p in argv[1:]:
            with open(p, encoding="utf-8") as f:
                docs.append(json.load(f))
    except (OSError, ValueError) as ex:
        sys.stderr.write("peer_work_match: %s\n" % ex)
        return 2
    return check(docs[0], docs[1])


def check(tandem_doc, peer_doc, quiet=False):
    docs = [tandem_doc, peer_doc]
    tandem, peer = rows(docs[0]), rows(docs[1])
    common = [i for i in tandem if i in peer]
    bad, neither = [], []
    for i in common:
        t, p = tandem[i], peer[i]
        if t is None and p is None:
            neither.append(i)
            if not any(rx.search(i) for rx, _ in NEITHER_EXEMPT):
                bad.append("%s: work described by neither side (a row's name alone does not say "
                           "it is the same work)" % i)
        elif t is None or p is None:
            bad.append("%s: work described by %s only" % (i, "the peer" if t is None else "tandem"))
        else:
            d = diff(t, p)
            if d:
                bad.append("%s: %s (tandem against the peer)" % (i, d))
    if quiet:
        return 1 if bad else 0
    for m in bad:
        print("MISMATCH " + m)
    print("%s: %d rows on both sides, %d compared, %d mismatched, %d described by neither%s" % (
        docs[0].get("device", "?") + (" --quick" if docs[0].get("quick") else ""), len(common),
        len(common) - len(neither), len(bad), len(neither),
        (" (" + ", ".join(neither[:8]) + (", ..." if len(neither) > 8 else "") + ")")
        if neither else ""))
    return 1 if bad else 0


assert all(isinstance(rx, re.Pattern) and why for rx, why in NEITHER_EXEMPT)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
