#!/bin/bash
# test_file_circles.sh: no two files of src/common call each other's
# functions (directly or round a longer circle), checked on this build's
# objects; and the check itself fails on a probe pair that does.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?} build=${DLOCK_BUILD_DIR:?}
check=$src/scripts/check-circles.sh

"$check" "$build" src/common

tmp=$(mktemp -d /tmp/dlock-circles-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/probe/CMakeFiles/probe.dir" "$tmp/c"
printf 'int probe_b(int);\nint probe_a(int n) { return n ? probe_b(n - 1) : 0; }\n' >"$tmp/c/ping.c"
printf 'int probe_a(int);\nint probe_b(int n) { return n ? probe_a(n - 1) : 1; }\n' >"$tmp/c/pong.c"
printf 'int probe_a(int);\nint probe_c(void) { return probe_a(3); }\n' >"$tmp/c/user.c"
for f in ping pong user; do cc -c "$tmp/c/$f.c" -o "$tmp/src/probe/CMakeFiles/probe.dir/$f.c.o"; done
if "$check" "$tmp" src/probe 2>"$tmp/err"; then
    echo "FAIL: the check passed a ping <-> pong circle" >&2
    exit 1
fi
grep -q "ping <-> pong" "$tmp/err" || { echo "FAIL: circle not named:" >&2; cat "$tmp/err" >&2; exit 1; }
if grep -q "user" "$tmp/err"; then
    echo "FAIL: a one-way caller was reported as a circle" >&2
    exit 1
fi
if "$check" "$tmp" src/nothing 2>/dev/null; then
    echo "FAIL: a directory without objects passed" >&2
    exit 1
fi
echo "ok: no circle in src/common; the probe circle is found"
