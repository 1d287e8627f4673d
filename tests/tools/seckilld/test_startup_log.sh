#!/bin/bash
# test_startup_log.sh: seckilld's start-up lines are events. With two event
# loops each loop logs its own "loop N: listening on ..." and "loop N: redis
# run id ..." line at start, and none of them is folded into a summary
# (not later, not at exit), which an operator would read as a reconnect or
# a restart at the summary's time.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-startlog-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; echo "--- log" >&2; cat "$work/seckilld.log" >&2; exit 1; }

dl_start_redis "$work"
port=$(dl_free_port)
"${DL_PDEATHSIG[@]}" "$build/tools/seckilld/seckilld" --threads 2 --bind 127.0.0.1 --port "$port" \
    --redis-url "redis://127.0.0.1:$REDIS_PORT" --log-level info >"$work/seckilld.log" 2>&1 &
pid=$!
dl_track "$pid"
dl_wait_http "http://127.0.0.1:$port/healthz" || fail "seckilld not healthy"
for i in $(seq 1 50); do
    [ "$(grep -c 'listening on' "$work/seckilld.log")" -ge 2 ] && break
    sleep 0.1
done
log=$work/seckilld.log
for n in 1 2; do
    grep -Eq "info: loop $n: listening on 127\.0\.0\.1:$port " "$log" || fail "no 'loop $n: listening on' line"
    grep -Eq "info: loop $n: redis run id [0-9a-f]+" "$log" || fail "no 'loop $n: redis run id' line"
done
echo "ok   each loop logs its own start-up lines, saying which loop"
dl_stop "$pid"
grep -q 'more like this\|repeated' "$log" && fail "a start-up line was folded into a summary"
[ "$(grep -c 'listening on' "$log")" = 2 ] || fail "not exactly one 'listening on' line per loop"
grep -Eq 'info: loop [12]: stopping' "$log" || fail "the stop lines do not say which loop"
echo "ok   nothing folded into a summary, at exit either"
