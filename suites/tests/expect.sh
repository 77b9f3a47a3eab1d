#!/bin/sh
# expect.sh RC REGEX [--not REGEX2] -- COMMAND [ARG...]: runs COMMAND, prints its output (stdout
# and stderr together), and passes when it exits with status RC, its output matches the extended
# regular expression REGEX and, with --not, does not match REGEX2. A crash or a sanitizer report
# (exit 1 under ASan/UBSan, or a signal) fails any test that expects 0 or 2.
rc_want=$1 re=$2
shift 2
not=
if [ "$1" = --not ]; then not=$2; shift 2; fi
[ "$1" = -- ] && shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$rc_want" ]; then echo "expect.sh: exit status $rc, expected $rc_want"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq -e "$re"; then echo "expect.sh: no line matches: $re"; exit 1; fi
if [ -n "$not" ] && printf '%s\n' "$out" | grep -Eq -e "$not"; then
  echo "expect.sh: a line matches what must not appear: $not"; exit 1
fi
exit 0
