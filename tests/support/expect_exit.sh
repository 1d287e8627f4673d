#!/bin/bash
# expect_exit.sh CODE REGEX COMMAND [ARGS...]: runs COMMAND and passes only if
# it exits with exactly CODE and its stderr matches the extended REGEX (a
# refused option must be refused for the stated reason, not for any reason).
set -u
[ $# -ge 3 ] || { echo "usage: expect_exit.sh CODE REGEX COMMAND [ARGS...]" >&2; exit 2; }
want=$1 re=$2
shift 2
err=$("$@" 2>&1 >/dev/null)
got=$?
if [ "$got" != "$want" ]; then
    echo "FAIL: $* exited $got, want $want; stderr: $err"
    exit 1
fi
if ! grep -Eq -- "$re" <<<"$err"; then
    echo "FAIL: $* exited $got but its stderr does not match /$re/: $err"
    exit 1
fi
echo "ok: exit $got, stderr: $err"
