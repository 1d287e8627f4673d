#!/bin/bash
# test_outcome_unknown.sh: a purchase seckill-bench wrote that got no
# complete answer is "outcome unknown" (it may have been decided), not a
# plain connection error: (1) seckilld hangs (SIGSTOP) and every request
# times out (--timeout); (2) seckilld is killed with -9 while the requests
# are in flight (the connection is reset). Real seckilld and Redis.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-bench-unknown-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work" --appendonly yes --appendfsync always
bench="$build/tools/seckill-bench/seckill-bench"
start_seckilld() {
    port=$(dl_free_port)
    "$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token t0k \
        --redis-url "redis://127.0.0.1:$REDIS_PORT" >>"$work/seckilld.log" 2>&1 &
    pid=$!
    dl_track "$pid"
    dl_wait_http "http://127.0.0.1:$port/healthz"
}
unknowns() { # JSON -> "outcome_unknown connection_errors responses"
    "$PY" -c 'import json,sys; b=json.load(open(sys.argv[1]))
print(b["errors"].get("outcome_unknown", 0), b["connection_errors"], b["responses"])' "$1"
}
start_seckilld
"$bench" --url "http://127.0.0.1:$port" --campaign u1 --create --admin-token t0k --stock 100 --limit 1 \
    --buyers 0 --scalpers 0 --bad 0 >/dev/null
sale=(--url "http://127.0.0.1:$port" --campaign u1 --stock 100 --buyers 5 --scalpers 0 --bad 0 --connections 5
      --retries 0)

kill -STOP "$pid"
rc=0
"$bench" "${sale[@]}" --timeout 1s --json-out "$work/timeout.json" >"$work/timeout.out" 2>&1 || rc=$?
kill -CONT "$pid"
[ "$rc" -le 1 ] || { cat "$work/timeout.out"; echo "FAIL: seckill-bench exit $rc" >&2; exit 1; }
read -r u c r < <(unknowns "$work/timeout.json")
[ "$u" = 5 ] && [ "$c" = 5 ] && [ "$r" = 0 ] ||
    { echo "FAIL: timed out: want 5 outcome_unknown of 5 unanswered, got $u of $c ($r answers)" >&2; exit 1; }
echo "ok: 5 purchases that timed out are outcome_unknown"

kill -STOP "$pid"
"$bench" "${sale[@]}" --timeout 0 --json-out "$work/reset.json" >"$work/reset.out" 2>&1 &
bpid=$!
dl_track "$bpid"
for _ in $(seq 1 100); do # until the 5 requests are written to the stopped server
    [ "$(ss -Htn state established "( sport = :$port )" | awk '$1 > 0' | wc -l)" -ge 5 ] && break
    sleep 0.05
done
kill -9 "$pid"
rc=0
wait "$bpid" || rc=$?
[ "$rc" -le 1 ] || { cat "$work/reset.out"; echo "FAIL: seckill-bench exit $rc" >&2; exit 1; }
read -r u c r < <(unknowns "$work/reset.json")
[ "$u" = 5 ] && [ "$c" = 5 ] ||
    { cat "$work/reset.out"; echo "FAIL: reset: want 5 outcome_unknown of 5 unanswered, got $u of $c" >&2; exit 1; }
echo "ok: 5 purchases whose connection was reset are outcome_unknown"
