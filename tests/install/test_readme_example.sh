#!/bin/bash
# The README's "libdlock in 30 lines" is a program, not a sketch: this test
# cuts the C block out of README.md, compiles it against the built library
# with -Wall -Werror, and runs it against a private redis-server; it must
# print a fencing token and exit 0, and exit 1 on an unreachable URL.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-readme-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
awk '/^## libdlock in/ { on = 1 } on && /^```c$/ { grab = 1; next } grab && /^```$/ { exit } grab' \
    "$src/README.md" >"$work/example.c"
[ -s "$work/example.c" ] || { echo "no C block under '## libdlock in' in README.md" >&2; exit 1; }
libdir=$(dirname "$(find "$build/src/lib" -name 'libdlock.so' | head -n 1)")
cc -std=c11 -Wall -Wextra -Werror -I"$src/include" -o "$work/example" "$work/example.c" \
    -L"$libdir" -ldlock -Wl,-rpath,"$libdir"
dl_start_redis "$work"
out=$("$work/example" "redis://127.0.0.1:$REDIS_PORT")
echo "$out"
echo "$out" | grep -Eq '^fence [0-9]+$' || { echo "the example printed no fencing token" >&2; exit 1; }
if "$work/example" "redis://127.0.0.1:1" 2>"$work/err"; then
    echo "the example succeeded against a closed port" >&2
    exit 1
fi
grep -q '^dlock: ' "$work/err" || { echo "no error line for an unreachable server" >&2; exit 1; }
echo "README example: compiled, ran, fenced"
