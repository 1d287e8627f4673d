#!/usr/bin/env bash
# run_bench.sh: reproducible dlock-bench session: starts a private
# redis-server (free port, temp dir, `save ''`), runs dlock-bench and the
# redis-py peer RUNS times each, prints every row and the per-scenario
# medians, and stops the server by its PID.
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
rows="$dir/rows.csv"
for i in $(seq "$runs"); do
  "$bench" --url "redis://127.0.0.1:$port" --csv --duration-ms "$dur" "$@" | tee -a "$dir/raw.txt" | grep -v '^scenario' | grep -v '^#' >>"$rows"
  /usr/bin/python3 "$src/bench/peers/redis_py_lock.py" --port "$port" --duration-ms "$dur" | tee -a "$dir/raw.txt" >>"$rows"
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
PY
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
