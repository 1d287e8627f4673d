#!/bin/bash
# test_examples.sh: the event-loop examples (examples/) build and do what
# they say, against their own redis-server (stopped by PID):
# - two evhttp_user_lock servers (libevent): concurrent requests for one
#   user id, spread over both processes, never overlap (their journal's
#   start/end intervals are disjoint and fences grow in start order), while
#   another user's requests are served meanwhile;
# - uv_ratelimit (libuv): every job runs, and no faster than the limit
#   (10 jobs at 5 per second, burst 5: the last starts >= ~1 s after the first).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-examples-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL [test_examples]: $*" >&2; exit 1; }
dl_need_tool curl curl

dl_start_redis "$work"
url="redis://127.0.0.1:$REDIS_PORT"

# --- evhttp_user_lock: two processes, one user's requests serialized ---
ports=()
for i in 1 2; do
    p=$(dl_free_port)
    "$build/examples/evhttp_user_lock" --redis "$url" --port "$p" --work-ms 150 \
        --journal "$work/journal" >"$work/http$i.log" 2>&1 &
    dl_track $!
    ports+=("$p")
done
for p in "${ports[@]}"; do
    ok=
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$p/" && { ok=1; break; }
        sleep 0.05
    done
    [ -n "$ok" ] || fail "evhttp_user_lock on port $p did not start ($(cat "$work"/http*.log))"
done
pids=()
for n in 1 2 3 4 5 6; do
    p=${ports[$((n % 2))]}
    curl -s -o "$work/r7.$n" -w '%{http_code}' "http://127.0.0.1:$p/work?user=7" >"$work/c7.$n" &
    pids+=($!)
    curl -s -o "$work/r8.$n" -w '%{http_code}' "http://127.0.0.1:$p/work?user=8" >"$work/c8.$n" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || fail "a request failed"; done
for f in "$work"/c*; do [ "$(cat "$f")" = 200 ] || fail "$f: HTTP $(cat "$f"): $(cat "${f/\/c/\/r}")"; done
"$PY" - "$work/journal" <<'PY' || fail "journal check"
import sys
holds = {}
for line in open(sys.argv[1]):
    user, what, ms, fence = line.split()
    holds.setdefault(user, []).append((int(ms), what, int(fence)))
for user in ("7", "8"):
    ev = sorted(holds.get(user, []), key=lambda e: (e[0], e[1] == "start"))
    starts = [e for e in ev if e[1] == "start"]
    assert len(starts) == 6, (user, len(starts))
    depth = 0
    for ms, what, fence in ev:
        depth += 1 if what == "start" else -1
        assert depth in (0, 1), "user %s: two holds overlap at %d ms" % (user, ms)
    fences = [f for _, _, f in starts]
    assert fences == sorted(fences) and len(set(fences)) == 6, (user, fences)
print("journal: 6 holds per user, none overlapping, fences increasing")
PY
for p in "${ports[@]}"; do curl -s -o /dev/null "http://127.0.0.1:$p/quit" || fail "/quit on $p"; done

# --- uv_ratelimit: every job runs, paced by the shared limiter ---
if [ -x "$build/examples/uv_ratelimit" ]; then
    "$build/examples/uv_ratelimit" --redis "$url" --jobs 10 --rate 5 --period-ms 1000 >"$work/uv.out" 2>&1 ||
        fail "uv_ratelimit: $(cat "$work/uv.out")"
    summary=$(grep '^SUMMARY' "$work/uv.out") || fail "no SUMMARY: $(cat "$work/uv.out")"
    elapsed=$(echo "$summary" | sed 's/.*elapsed_ms=\([0-9]*\).*/\1/')
    echo "$summary" | grep -q 'jobs=10 ' || fail "not every job ran: $summary"
    # 5 at once, then one per 200 ms: the 10th near 1000 ms (server clock; slack for rounding)
    [ "$elapsed" -ge 800 ] || fail "10 jobs in $elapsed ms: the limit was not applied"
    echo "uv_ratelimit: $summary"
elif [ "${CI:-}" = true ]; then
    fail "uv_ratelimit was not built (libuv missing) in CI"
fi
echo "PASS [test_examples]"
