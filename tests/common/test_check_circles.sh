#!/bin/bash
# test_check_circles.sh: scripts/check-circles.sh on fixtures compiled here:
# it refuses a pair and a longer circle of files that call each other,
# naming them; it passes one-way calls; --module counts its files as one
# unit (no circle among them) but still refuses a circle between the unit
# and another file, and a module or directory without objects.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
check=$src/scripts/check-circles.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-circles-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/err" ] && cat "$tmp/err" >&2; exit 1; }

# fixture DIR NAME 'C source'...: objects where a CMake build keeps them
fixture() {
    local dir=$1
    shift
    mkdir -p "$tmp/$dir/CMakeFiles/t.dir" "$tmp/c/$dir"
    while [ $# -gt 0 ]; do
        printf '%s\n' "$2" >"$tmp/c/$dir/$1.c"
        cc -c "$tmp/c/$dir/$1.c" -o "$tmp/$dir/CMakeFiles/t.dir/$1.c.o"
        shift 2
    done
}

# A pair that calls each other, and a one-way caller of it.
fixture src/pair \
    ping 'int probe_b(int); int probe_a(int n) { return n ? probe_b(n - 1) : 0; }' \
    pong 'int probe_a(int); int probe_b(int n) { return n ? probe_a(n - 1) : 1; }' \
    user 'int probe_a(int); int probe_c(void) { return probe_a(3); }'
if "$check" "$tmp" src/pair 2>"$tmp/err"; then fail "the check passed a ping <-> pong circle"; fi
grep -q "ping <-> pong" "$tmp/err" || fail "circle not named"
if grep -q "user" "$tmp/err"; then fail "a one-way caller was reported as a circle"; fi

# a -> b -> c -> a: every pair of the circle reaches the other.
fixture src/ring \
    ra 'int rb(void); int ra(void) { return rb(); }' \
    rb 'int rc(void); int rb(void) { return rc(); }' \
    rc 'int ra(void); int rc(void) { return ra() + 1; }'
if "$check" "$tmp" src/ring 2>"$tmp/err"; then fail "the check passed ra -> rb -> rc -> ra"; fi
for p in "ra <-> rb" "ra <-> rc" "rb <-> rc"; do grep -q "$p" "$tmp/err" || fail "$p not named"; done

# Calls that only go down: clean, exit 0.
fixture src/clean \
    top 'int mid(void); int top(void) { return mid(); }' \
    mid 'int low(void); int mid(void) { return low(); }' \
    low 'int low(void) { return 1; }'
"$check" "$tmp" src/clean >"$tmp/out" 2>"$tmp/err" || fail "a clean directory was refused"
grep -q "clean" "$tmp/out" || fail "no verdict printed"

# A module: its files may call each other, the unit may not circle with another file.
fixture src/mod \
    srv 'int conn(int); int srv(int n) { return conn(n); }' \
    conn 'int srv(int); int conn(int n) { return n ? srv(n - 1) : 0; }' \
    app 'int srv(int); int app(void) { return srv(2); }'
"$check" --module src/mod:srv,conn "$tmp" src/mod >"$tmp/out" 2>"$tmp/err" || fail "--module did not make srv+conn one unit"
if "$check" "$tmp" src/mod 2>"$tmp/err"; then fail "without --module, srv <-> conn passed"; fi
if "$check" --module src/other:srv,conn "$tmp" src/mod 2>"$tmp/err"; then fail "a module of another directory applied"; fi
# conn -> hook -> app -> srv: a circle of the unit with two other files.
fixture src/mod \
    conn 'int srv(int); int hook(void); int conn(int n) { return n ? srv(n - 1) : hook(); }' \
    hook 'int app(void); int hook(void) { return app(); }'
if "$check" --module src/mod:srv,conn "$tmp" src/mod 2>"$tmp/err"; then fail "a circle through the module passed"; fi
grep -q "app <-> srv+conn" "$tmp/err" || fail "the unit's circle not named"
grep -q "hook <-> srv+conn" "$tmp/err" || fail "the unit's circle not named"
if "$check" --module src/mod:srv,gone "$tmp" src/mod 2>"$tmp/err"; then fail "a module naming a missing file passed"; fi
grep -q "gone" "$tmp/err" || fail "the missing member not named"

if "$check" "$tmp" src/nothing 2>/dev/null; then fail "a directory without objects passed"; fi

# A reused build keeps the object of a deleted file: with --src it no
# longer counts (a circle it made is gone, a circle it hid is found),
# without --src every object does.
fixture src/stale \
    keep 'int old(void); int keep(void) { return old(); }' \
    old 'int keep(void); int old(void) { return keep(); }'
rm "$tmp/c/src/stale/old.c"
"$check" --src "$tmp/c" "$tmp" src/stale >"$tmp/out" 2>"$tmp/err" || fail "a deleted file's object still counted"
grep -q "old.c is gone" "$tmp/err" || fail "the stale object was not named"
if "$check" "$tmp" src/stale 2>/dev/null; then fail "without --src the stale object was not read"; fi
fixture src/hidden \
    front 'int back(void); int front(void) { return back(); }' \
    back 'int front(void); int back(void) { return front(); }'
fixture src/hidden stale 'int front(void) { return 0; } int back(void) { return 1; }'
rm "$tmp/c/src/hidden/stale.c"
if "$check" --src "$tmp/c" "$tmp" src/hidden 2>"$tmp/err"; then fail "a stale object hid a circle"; fi
grep -q "back <-> front" "$tmp/err" || fail "the hidden circle not named"
echo "ok: circles refused and named, clean code passed, modules one unit, stale objects ignored"
