#!/bin/sh
# emu_env_strict.sh — the emulated device's environment values are parsed strictly (issue 21):
# each malformed value is ignored with one line naming it, and the default is used
# (TANDEM_EMU_MEM=17179869185G wrapped to 1 GiB; TANDEM_EMU_DEVICES=2abc gave 2 devices).
# usage: emu_env_strict.sh BENCH
bench=$1
fail() { echo "FAIL: $*"; exit 1; }

for v in 17179869185G 99999999999999999999 12abc '' -1 0 1T 2GB ' 2G'; do
    out=$(TANDEM_EMU_MEM=$v "$bench" env 2>&1) || fail "TANDEM_EMU_MEM='$v': bench env failed: $out"
    echo "$out" | grep -qF "tandem emu: ignoring TANDEM_EMU_MEM=$v: not a size" &&
        echo "$out" | grep -qE '^gpu 0 memory: +4.0 GiB' || fail "TANDEM_EMU_MEM='$v': $out"
done
TANDEM_EMU_MEM=2G "$bench" env 2>&1 | grep -qE '^gpu 0 memory: +2.0 GiB' || fail "TANDEM_EMU_MEM=2G"

for v in 2abc '' 9 0 ' 2' +2 0x2; do
    out=$(TANDEM_EMU_DEVICES=$v "$bench" env 2>&1) || fail "TANDEM_EMU_DEVICES='$v': $out"
    want="tandem emu: ignoring TANDEM_EMU_DEVICES=$v: not a whole number from 1 to 8; using 1"
    echo "$out" | grep -qF "$want" &&
        echo "$out" | grep -q 'the 1 CUDA device below' || fail "TANDEM_EMU_DEVICES='$v': $out"
done

# the switches read when work runs: a one-step training run still succeeds, each value named
out=$(TANDEM_EMU_THREADS=4x TANDEM_EMU_SYNC=yes TANDEM_EMU_ORDER=random:12x \
      TANDEM_CACHING_ALLOCATOR=no "$bench" train --device cuda:0 --model mlp:4-2 --steps 1 \
      --opt sgd --lr 0.1 2>&1) || fail "bench train: $out"
echo "$out"
for n in 'tandem emu: ignoring TANDEM_EMU_THREADS=4x: not a whole number from 1 to 256' \
         'tandem emu: ignoring TANDEM_EMU_SYNC=yes: expected 0 or 1; using 0' \
         'tandem emu: ignoring TANDEM_EMU_ORDER=random:12x: expected forward' \
         'tandem: ignoring TANDEM_CACHING_ALLOCATOR=no: expected 0 or 1; using 1'; do
    echo "$out" | grep -qF "$n" || fail "not said: $n"
done
echo 'every malformed value refused'
