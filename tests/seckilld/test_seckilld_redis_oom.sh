#!/bin/bash
# test_seckilld_redis_oom.sh: a real redis-server with
# maxmemory 1mb and noeviction, filled past it. Under a burst of purchases
# seckilld answers every one 503, /healthz answers 503 with "redis refuses
# writes" and the server's OOM text as the reason, and the log stays short
# however many calls fail: the repeated "redis error: OOM ..." line is
# printed once and then counted ("(N more like this since HH:MM:SS)", by
# the program's log limiter). After CONFIG SET maxmemory 0, /healthz is ok
# again and purchases succeed.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-oom-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
log=$work/seckilld.log
fail() { echo "FAIL: $*" >&2; tail -n 40 "$log" >&2 || true; exit 1; }

dl_start_redis "$work" --maxmemory-policy noeviction
rc() { redis-cli -p "$REDIS_PORT" "$@"; }
port=$(dl_free_port)
base=http://127.0.0.1:$port
"$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token t0k \
    --redis-url "redis://127.0.0.1:$REDIS_PORT" >"$log" 2>&1 &
pid=$!
dl_track "$pid"
dl_wait_http "$base/healthz" || fail "seckilld not healthy"
now_ms=$(($(date +%s) * 1000))
code=$(curl -s -o "$work/create.out" -w '%{http_code}' -X POST "$base/v1/campaigns" -H 'Authorization: Bearer t0k' \
    -d "{\"id\":\"oom\",\"stock\":1000000,\"per_user_limit\":1000,\"starts_at\":$((now_ms - 1000)),\"ends_at\":$((now_ms + 3600000))}")
[ "$code" = 201 ] || fail "create: $code $(cat "$work/create.out")"

# An idle server already uses about 1 MB, so the limit comes after the
# campaign; then the server is filled past it (DEBUG POPULATE ignores it).
rc CONFIG SET maxmemory 1mb >/dev/null
rc DEBUG POPULATE 20000 fill 32 >/dev/null
[ "$(rc SET probe 1)" != OK ] || fail "the server still accepts writes after the fill"

"$PY" - "$port" <<'PY' || fail "burst"
import http.client, json, sys, threading
port = int(sys.argv[1])
codes, lock = {}, threading.Lock()
def buyer(t):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(500):
        c.request("POST", "/v1/campaigns/oom/purchase", body=b'{"quantity":1}',
                  headers={"X-User-Id": "u%d-%d" % (t, i), "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        with lock:
            codes[r.status] = codes.get(r.status, 0) + 1
ts = [threading.Thread(target=buyer, args=(t,)) for t in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("4000 purchases while Redis is out of memory:", codes)
assert codes == {503: 4000}, codes
PY

health=$(curl -s -H "Authorization: Bearer t0k" -w ' %{http_code}' "$base/healthz")
echo "/healthz: $health"
case "$health" in
*'"redis":"refusing writes"'*'"reason":"redis refuses writes: OOM command not allowed'*' 503') ;;
*) fail "/healthz does not say that Redis refuses writes: $health" ;;
esac
errors=$(curl -s "$base/metrics" | awk '$1 == "seckill_redis_errors_total" {print $2}')
[ "${errors:-0}" -ge 100 ] || fail "only ${errors:-0} failed Redis calls: the burst did not reach Redis"

rc CONFIG SET maxmemory 0 >/dev/null
ok=0
for _ in $(seq 1 50); do
    case "$(curl -s "$base/healthz")" in *'"status":"ok"'*) ok=1; break ;; esac
    sleep 0.1
done
[ $ok = 1 ] || fail "/healthz not ok 5 s after maxmemory 0: $(curl -s "$base/healthz")"
code=$(curl -s -o "$work/buy.out" -w '%{http_code}' -X POST "$base/v1/campaigns/oom/purchase" -H 'X-User-Id: after')
case "$code" in 201 | 202) ;; *) fail "purchase after the recovery: $code $(cat "$work/buy.out")" ;; esac

kill -TERM "$pid" # the limiter passes on what it still counts
st=0
wait "$pid" || st=$?
[ "$st" = 0 ] || fail "seckilld exited $st on SIGTERM"
! grep -q Sanitizer "$log" || fail "sanitizer report"
lines=$(wc -l <"$log")
echo "$errors failed Redis calls, $lines log lines:"
cat "$log"
[ "$lines" -lt 50 ] || fail "$lines log lines for $errors failed calls"
grep -Eq 'warn: redis error: OOM command not allowed.* \([0-9]+ more like this since [0-9]{2}:[0-9]{2}:[0-9]{2}' "$log" ||
    fail "no count line for the repeated OOM errors"
grep -q 'redis accepts writes again' "$log" || fail "the recovery is not logged"
echo PASS
