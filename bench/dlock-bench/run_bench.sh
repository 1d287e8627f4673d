#!/usr/bin/env bash
# run_bench.sh: reproducible dlock-bench session: starts a private
# redis-server (free port, temp dir, `save ''`), runs, RUNS times each and
# interleaved, `redis-benchmark -c 1 -t ping` (the 2-round-trip limit of a
# lock cycle: PING rate / 2, mean of PING_INLINE and PING_MBULK),
# dlock-bench and the peers (redis-py Lock; node redlock when node and npm
# are there: its pinned packages, bench/peers/package.json, are installed
# once into ${DLOCK_BENCH_CACHE:-~/.cache/dlock-bench}), prints every row,
# the per-scenario medians and the medians of the same-run ratios, and
# stops the server by its PID. dlock-bench's own limit rows time two
# dlock_fence_guard calls per cycle (one small EVALSHA each, bench.h).
# Usage: bench/dlock-bench/run_bench.sh BUILD_DIR [RUNS=5] [DURATION_MS=2000] [dlock-bench args...]
# (e.g. --scenario uncontended --scenario contended to run only those)
set -euo pipefail
build=${1:?usage: run_bench.sh BUILD_DIR [RUNS] [DURATION_MS]}
runs=${2:-5}
dur=${3:-2000}
shift $(($# < 3 ? $# : 3))
src=$(cd "$(dirname "$0")/../.." && pwd)
bench="$build/bench/dlock-bench/dlock-bench"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d /tmp/dlock-bench-XXXXXX)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
echo "# $(date -u +%FT%TZ) $(uname -srm) $(nproc) cpus; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# redis: $(redis-server --version | cut -d' ' -f3); runs=$runs duration_ms=$dur"
node_modules=
if command -v node >/dev/null && command -v npm >/dev/null; then
  cache=${DLOCK_BENCH_CACHE:-$HOME/.cache/dlock-bench}/node
  mkdir -p "$cache"
  if ! cmp -s "$src/bench/peers/package.json" "$cache/package.json"; then
    cp "$src/bench/peers/package.json" "$cache/package.json"
    (cd "$cache" && npm install --no-audit --no-fund --silent >/dev/null) || echo "# npm install failed: no node peer"
  fi
  [ -d "$cache/node_modules/redlock" ] && node_modules="$cache/node_modules"
fi
ping_limit() { # one CSV row: the 2-RTT limit from redis-benchmark -c 1
  redis-benchmark -p "$port" -c 1 -n 20000 -t ping -q 2>/dev/null | tr '\r' '\n' |
    awk '/requests per second/ {sub(":", "", $1); r[$1] = $2} END {
      l = (r["PING_INLINE"] + r["PING_MBULK"]) / 4
      printf "ping_2rtt_limit,%.0f,%.0f,1.000,0,0\n", l, l }'
}
rows="$dir/rows.csv"
for i in $(seq "$runs"); do
  ping_limit | tee -a "$dir/raw.txt" >>"$rows"
  "$bench" --url "redis://127.0.0.1:$port" --csv --duration-ms "$dur" "$@" | tee -a "$dir/raw.txt" | grep -v '^scenario' | grep -v '^#' >>"$rows"
  /usr/bin/python3 "$src/bench/peers/redis_py_lock.py" --port "$port" --duration-ms "$dur" | tee -a "$dir/raw.txt" >>"$rows"
  if [ -n "$node_modules" ]; then
    NODE_PATH="$node_modules" node "$src/bench/peers/node_redlock.js" --port "$port" --duration-ms "$dur" |
      tee -a "$dir/raw.txt" >>"$rows"
  fi
done
grep '^#' "$dir/raw.txt" || true
echo "# every run"
cat "$rows"
echo "# medians over $runs runs"
echo "scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us"
/usr/bin/python3 - "$rows" <<'PY'
import csv, statistics, sys
by = {}
for row in csv.reader(open(sys.argv[1])):
    by.setdefault(row[0], []).append([float(x) for x in row[1:]])
for name, vals in by.items():
    med = [statistics.median(col) for col in zip(*vals)]
    print("%s,%.0f,%.0f,%.3f,%.1f,%.1f" % (name, *med))
# same-run ratios of the uncontended cycle: to the PING 2-RTT limit and to
# each peer, run by run (rows of one run are adjacent), then their median
n = len(by.get("uncontended", []))
def ratios(other):
    xs = by.get(other, [])
    return [by["uncontended"][i][0] / xs[i][0] for i in range(min(n, len(xs)))]
for other in ("ping_2rtt_limit", "redis_py_uncontended", "node_redlock_uncontended"):
    r = ratios(other)
    if r:
        print("# uncontended / %s: median %.3f (runs: %s)" % (other, statistics.median(r),
              " ".join("%.2f" % x for x in r)))
# the headline figures for the report's summary table (scripts/bench_summary.py)
med = {name: [statistics.median(col) for col in zip(*vals)] for name, vals in by.items()}
for other in ("ping_2rtt_limit", "redis_py_uncontended", "node_redlock_uncontended"):
    r = ratios(other)
    if r:
        print("SUMMARY name=lock_uncontended value=%.0f unit=ops/s ref=%s ref_value=%.0f ratio=%.3f"
              % (med["uncontended"][0], other, med[other][0], statistics.median(r)))
if "contended" in by:
    print("SUMMARY name=lock_contended value=%.0f unit=ops/s ref=fence_guard_limit ref_value=%.0f ratio=%.3f"
          % tuple(med["contended"][:3]))
PY
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
