#!/bin/bash
# test_abi_layout.sh: scripts/abi_layout.py, the member-by-member half of
# the ABI check, on the committed baseline and crafted copies of it: the
# baseline against itself passes; an option struct grown at its end (the
# change abidiff files under harmless), a member moved, a type gone from
# the public headers and an enumerator renumbered each fail, named; a new
# enumerator passes.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
base=$src/abi/libdlock.abi
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-abilayout-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { python3 "$src/scripts/abi_layout.py" "$base" "$1" >"$work/out" 2>&1; }
craft() { # NAME PYTHON-EXPRESSION-ON-s: a copy of the baseline, edited
    python3 - "$base" "$work/$1.abi" "$2" <<'PY'
import sys
s = open(sys.argv[1]).read()
t = eval(sys.argv[3])
assert t != s, "the edit changed nothing"
open(sys.argv[2], "w").write(t)
PY
}
check "$base" || fail "the baseline against itself: $(cat "$work/out")"
grep -q ', 0 changed' "$work/out" || fail "no comparison made: $(cat "$work/out")"

# dlock_lock_options grown by one 64-bit member at its end
craft grown "s.replace(\"<class-decl name='dlock_lock_options' size-in-bits='320'\", \"<class-decl name='dlock_lock_options' size-in-bits='384'\", 1)"
if check "$work/grown.abi"; then fail "a grown option struct passed: $(cat "$work/out")"; fi
grep -q 'dlock_lock_options: size 384 bits, was 320' "$work/out" || fail "grown: $(cat "$work/out")"

# a member of dlock_lock_status at another offset
craft moved "s.replace(\"<data-member access='public' layout-offset-in-bits='32'>\\n        <var-decl name='kind'\", \"<data-member access='public' layout-offset-in-bits='64'>\\n        <var-decl name='kind'\", 1)"
if check "$work/moved.abi"; then fail "a moved member passed: $(cat "$work/out")"; fi
grep -q 'dlock_lock_status: members' "$work/out" || fail "moved: $(cat "$work/out")"

# a public struct no longer in the public headers
craft gone "s.replace(\"name='dlock_ratelimit_result' size-in-bits\", \"name='dlock_ratelimit_result_v2' size-in-bits\", 1)"
if check "$work/gone.abi"; then fail "a type gone passed: $(cat "$work/out")"; fi
grep -q 'dlock_ratelimit_result: gone' "$work/out" || fail "gone: $(cat "$work/out")"

# an enumerator renumbered, then one added
first=$(grep -o "<enumerator name='DLOCK_LOCK_[A-Z]*' value='[0-9]*'/>" "$base" | head -n 1)
[ -n "$first" ] || fail "no dlock_lock_kind enumerator in the baseline"
name=$(echo "$first" | sed "s/.*name='\([A-Z_]*\)'.*/\1/")
craft renum "s.replace(\"$first\", \"<enumerator name='$name' value='7'/>\", 1)"
if check "$work/renum.abi"; then fail "a renumbered enumerator passed: $(cat "$work/out")"; fi
grep -q "enum dlock_lock_kind: $name was" "$work/out" || fail "renum: $(cat "$work/out")"
craft added "s.replace(\"$first\", \"$first<enumerator name='DLOCK_LOCK_NEW' value='99'/>\", 1)"
python3 "$src/scripts/abi_layout.py" "$work/added.abi" "$base" >"$work/out" 2>&1 && fail "an enumerator removed passed"
check "$work/added.abi" || fail "a new enumerator is not a break: $(cat "$work/out")"
echo "ok: abi_layout.py passes the baseline and a new enumerator, fails each crafted break by name"
