#!/usr/bin/env python3
"""peer_work_match.py TANDEM_LIST.json PEER_LIST.json — a row's name means the same work on both
sides (docs/PEERS.md): compares `bench list --json` with the PyTorch peer's `--list --json`, row
by row, for every row id both sides have. Each row's "work" (what one timed iteration does:
op or model, dtype, shapes, batch, products or steps per iteration, FLOP/bytes/samples counted)
must be equal: the same keys, the same strings, numbers equal to 1e-12 relative. A row that
describes its work on one side only is a mismatch too; rows that describe it on neither side are
counted and named. Standard library only (no torch). Exit: 0 all equal, 1 a mismatch, 2 bad input.
"""
import json
import sys


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


def main(argv):
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
    tandem, peer = rows(docs[0]), rows(docs[1])
    common = [i for i in tandem if i in peer]
    bad, neither = [], []
    for i in common:
        t, p = tandem[i], peer[i]
        if t is None and p is None:
            neither.append(i)
        elif t is None or p is None:
            bad.append("%s: work described by %s only" % (i, "the peer" if t is None else "tandem"))
        else:
            d = diff(t, p)
            if d:
                bad.append("%s: %s (tandem against the peer)" % (i, d))
    for m in bad:
        print("MISMATCH " + m)
    print("%s: %d rows on both sides, %d compared, %d mismatched, %d described by neither%s" % (
        docs[0].get("device", "?") + (" --quick" if docs[0].get("quick") else ""), len(common),
        len(common) - len(neither), len(bad), len(neither),
        (" (" + ", ".join(neither[:8]) + (", ..." if len(neither) > 8 else "") + ")")
        if neither else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
