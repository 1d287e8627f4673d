#!/bin/bash
# test_compare_smoke.sh: seckill-bench --mode compare --smoke on a private
# redis-server completes, reports all four strategies, and the Lua ones
# (lua-single, lua-coalesced) oversold nothing and gave nobody two units.
# Also: compare mode without --redis-url is refused with exit 2.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?} build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
bench="$build/tools/seckill-bench/seckill-bench"
[ -x "$bench" ] || { echo "FAIL: $bench not built"; exit 1; }
work=$(mktemp -d /tmp/dlock-cmp-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/out.csv" "$work/err" 2>/dev/null; exit 1; }

set +e
"$bench" --mode compare >/dev/null 2>"$work/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "compare without --redis-url exited $rc, want 2"
grep -q -- "--redis-url" "$work/err" || fail "no clear error for a missing --redis-url"

dl_start_redis "$work"
set +e
"$bench" --mode compare --smoke --csv --redis-url "redis://127.0.0.1:$REDIS_PORT" >"$work/out.csv" 2>"$work/err"
rc=$?
set -e
[ $rc -eq 0 ] || fail "compare --smoke exited $rc"
# strategy,decisions_per_s,p50_us,p99_us,oversold,duplicates,tp_decisions,tp_errors,
# tp_soldout_local,ok_attempts,ok_accepted,ok_stock,ok_stock_left,ok_errors,...
for s in pessimistic optimistic lua-single lua-coalesced; do
    line=$(grep "^$s," "$work/out.csv") || fail "no row for $s"
    IFS=, read -r _ dps _ _ over dup tpd _ _ att acc stock left errs _ <<<"$line"
    [ "$tpd" -gt 0 ] || fail "$s made no decisions in the throughput phase"
    [ "$att" -gt "$stock" ] || fail "$s: correctness phase has no contention ($att attempts, stock $stock)"
    case $s in lua-*)
        [ "$over" -eq 0 ] || fail "$s oversold $over"
        [ "$dup" -eq 0 ] || fail "$s gave $dup users more than the limit"
        [ "$errs" -eq 0 ] || fail "$s had $errs errors"
        [ "$acc" -eq "$stock" ] || fail "$s accepted $acc, want the whole stock $stock"
        [ "$left" -eq 0 ] || fail "$s left $left units in Redis";;
    esac
done
echo "PASS"
cat "$work/out.csv"
