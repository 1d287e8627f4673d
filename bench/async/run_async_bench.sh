#!/usr/bin/env bash
# run_async_bench.sh: the asynchronous client's figures (dlock/async.h),
# each with its same-run reference, against a private redis-server (free
# port, temp dir, `save ''`, stopped by PID):
#  - loop lag (libevent with EVENT_BASE_FLAG_PRECISE_TIMER, so lateness is
#    not rounded to the kernel tick): a 1 ms timer's lateness at p99 while 1 000 acquires are in
#    flight and Redis is frozen (dl_freeze_proxy, SIGSTOP); reference: the
#    same timer on the same loop with Redis frozen and nothing in flight
#    (the issue's goal: at most 5 ms);
#  - throughput: lock cycles (acquire + unlock scripts) with 64 in flight on
#    one loop thread; references: `redis-benchmark -P 64 -c 1` of the same two
#    scripts (the cycle limit: 1 / (1/acquire rate + 1/release rate); the
#    acquires take fresh names and count on one fence key, as a cycle's
#    steady state does; the releases mostly find no key, a cheaper path
#    than a cycle's, so the limit is on the high side; goal >= 0.7), and
#    the blocking API's
#    one-thread cycle rate (goal >= 10; its ceiling, the pipelined limit
#    over the blocking rate, is printed too: on a machine whose round
#    trip is short that ceiling itself is below 10);
#  - many waiters on one name on one loop: memory per waiter (RSS growth
#    while they wait), acquisitions out of FIFO order, the handoff (the
#    previous holder's unlock sent to the next one's acquire answered) at
#    p99; reference: one round trip (the median uncontended acquire; goal
#    <= 3).
# Each run's figures go to a table; after the runs, their medians are
# printed as `SUMMARY name=... value=... unit=... ref=... ref_value=...
# ratio=...` lines (scripts/bench_summary.py), each ratio the median of the
# run-by-run ratios to the reference measured in the same run.
# Usage: bench/async/run_async_bench.sh BUILD_DIR [RUNS=3] [DURATION_MS=2000] [WAITERS=10000]
set -euo pipefail
build=${1:?usage: run_async_bench.sh BUILD_DIR [RUNS] [DURATION_MS] [WAITERS]}
runs=${2:-3}
dur=${3:-2000}
waiters=${4:-10000}
src=$(cd "$(dirname "$0")/../.." && pwd)
bench="$build/bench/async/dlock-async-bench"
proxy_bin="$build/tests/dl_freeze_proxy"
[ -x "$bench" ] && [ -x "$proxy_bin" ] || { echo "run_async_bench.sh: build $bench and $proxy_bin first" >&2; exit 2; }
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d /tmp/dlock-async-bench-XXXXXX)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
pid=$!
ppid_=
# cleanup: errexit is off in here (a proxy already stopped is no failure),
# and the script's own status is kept
cleanup() {
    local rc=$?
    set +e
    [ -n "$ppid_" ] && { kill -CONT "$ppid_"; kill "$ppid_"; } 2>/dev/null
    kill "$pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$dir"
    exit $rc
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"
echo "# $(date -u +%FT%TZ) $(uname -srm) $(nproc) cpus; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# redis: $(redis-server --version | cut -d' ' -f3); runs=$runs duration_ms=$dur waiters=$waiters"

# rps COMMAND...: requests per second of one redis-benchmark -P 64 -c 1 run
rps() {
    redis-benchmark -p "$port" -c 1 -P 64 -n 200000 -r 1000000 -q "$@" 2>/dev/null | tr '\r' '\n' |
        sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1
}
acq=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$src/src/lib/lua/lock_acquire.lua")")
rel=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$src/src/lib/lua/lock_release.lua")")

rows="$dir/rows"
: >"$rows"
# keep NAME OUTPUT: the RESULT lines of OUTPUT as "run,name,value" rows
keep() { echo "$2" | sed -n "s/^RESULT \([a-z0-9_]*\)=\(.*\)/$run,\1,\2/p" >>"$rows"; }
for run in $(seq 1 "$runs"); do
    echo "## run $run"
    "$proxy_bin" 127.0.0.1 "$port" >"$dir/proxy.port" &
    ppid_=$!
    for _ in $(seq 100); do [ -s "$dir/proxy.port" ] && break; sleep 0.02; done
    out=$("$bench" --url "redis://127.0.0.1:$(cat "$dir/proxy.port")" --scenario lag --acquires 1000 --freeze-pid "$ppid_")
    echo "$out"; keep lag "$out"
    kill -CONT "$ppid_"; kill "$ppid_"; wait "$ppid_" 2>/dev/null || true
    a=$(rps EVALSHA "$acq" 2 "bench:ref:__rand_int__" "bench:ref:fence" tok 10000 3600000)
    r=$(rps EVALSHA "$rel" 1 "bench:ref:__rand_int__" tok "dlock_lock__channel:bench" PUBLISH)
    limit=$(/usr/bin/python3 -c "print('%.0f' % (1 / (1 / $a + 1 / $r)))")
    echo "reference: redis-benchmark -P 64 -c 1: acquire script $a/s, release script $r/s: cycle limit $limit/s"
    echo "$run,pipelined_limit,$limit" >>"$rows"
    out=$("$bench" --url "$url" --scenario throughput --inflight 64 --duration-ms "$dur")
    echo "$out"; keep tp "$out"
    out=$("$bench" --url "$url" --scenario blocking --duration-ms "$dur")
    echo "$out"; keep blk "$out"
    out=$("$bench" --url "$url" --scenario waiters --waiters "$waiters")
    echo "$out"; keep w "$out"
done
/usr/bin/python3 - "$rows" "$waiters" <<'PY'
import csv, statistics, sys
runs = {}
for run, name, val in csv.reader(open(sys.argv[1])):
    runs.setdefault(run, {})[name] = float(val)
def med(name):
    return statistics.median(r[name] for r in runs.values())
def line(name, val, unit, ref, rname, fmt="%.0f"):
    ratio = statistics.median(r[val] / r[rname] for r in runs.values() if r.get(rname))
    print(("SUMMARY name=%s value=" + fmt + " unit=%s ref=%s ref_value=" + fmt + " ratio=%.3f")
          % (name, med(val), unit, ref, med(rname), ratio))
print("# medians of %d runs: waiter memory %.0f bytes each (%s waiters), %.0f acquisitions out of FIFO order, "
      "handoff p50 %.0f us; one round trip p50 %.0f us, p99 %.0f us" % (
          len(runs), med("waiter_bytes"), sys.argv[2], med("waiters_out_of_order"), med("handoff_p50_us"),
          med("round_trip_us"), med("round_trip_p99_us")))
line("async_loop_lag_p99_1000_in_flight", "lag_in_flight_p99_ms", "ms", "same_loop_idle_redis_frozen",
     "lag_idle_p99_ms", "%.3f")
line("async_lock_cycles_64_in_flight", "async_cycles_per_s", "cycles/s", "redis-benchmark_P64_c1_same_scripts",
     "pipelined_limit")
line("async_lock_cycles_64_in_flight", "async_cycles_per_s", "cycles/s", "blocking_api_one_thread",
     "blocking_cycles_per_s")
# the ceiling of the ratio above: no client of this server can run more
# cycles than the pipelined limit, so when a round trip is short (a busy
# machine keeps its CPUs awake) the blocking rate comes within 10x of it
line("pipelined_limit_same_scripts", "pipelined_limit", "cycles/s", "blocking_api_one_thread",
     "blocking_cycles_per_s")
line("async_handoff_p99_%s_waiters" % sys.argv[2], "handoff_p99_us", "us", "one_round_trip", "round_trip_us")
PY
