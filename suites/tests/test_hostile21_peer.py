"""test_hostile21_peer.py — issue 21 item 2 for the PyTorch peer's writer (torch_peer.write_atomic,
which writes DIR/peer-torch/*): a target that is a link or a FIFO is refused and stays as it was,
a link planted under the temp file's name is not written through. Needs no torch (the module
imports it only to run). usage: python3 test_hostile21_peer.py PEERS_DIR DIR"""
import os
import shutil
import stat
import sys

sys.path.insert(0, sys.argv[1])
import torch_peer  # noqa: E402

d = sys.argv[2]
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
victim = os.path.join(d, "victim")
with open(victim, "w") as f:
    f.write("keep")
os.symlink(victim, os.path.join(d, "link.json"))
os.mkfifo(os.path.join(d, "fifo.json"))
failures = []
for name in ("link.json", "fifo.json"):
    try:
        torch_peer.write_atomic(os.path.join(d, name), "new")
        failures.append("%s: written" % name)
    except OSError as e:
        print("refused: %s" % e)
        if "not a regular file" not in str(e):
            failures.append("%s: %s" % (name, e))
if not os.path.islink(os.path.join(d, "link.json")):
    failures.append("link.json was replaced")
if not stat.S_ISFIFO(os.lstat(os.path.join(d, "fifo.json")).st_mode):
    failures.append("fifo.json was replaced")
out = os.path.join(d, "out.json")
os.symlink(victim, "%s.tmp.%d" % (out, os.getpid()))
torch_peer.write_atomic(out, "new")
with open(out) as f:
    if f.read() != "new" or os.path.islink(out):
        failures.append("out.json is not the new text")
with open(victim) as f:
    if f.read() != "keep":
        failures.append("the victim was written through a link")
for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
