#!/usr/bin/env bash
# run_etcd_bench.sh: Redis vs etcd backend in one session: starts a private
# redis-server and a private single-member etcd (free loopback ports, temp
# dir, stopped by PID), then RUNS times alternately runs dlock-bench's
# uncontended and contended scenarios on each URL, and prints every row and
# the per-backend medians. Each row's limit is measured in the same run
# through the same client: trivial script round trips on Redis, trivial
# write txns through the same HTTP client on etcd (a fence guard, bench.h).
# Usage: bench/dlock-bench/run_etcd_bench.sh BUILD_DIR [RUNS=5] [DURATION_MS=2000] [dlock-bench args...]
set -euo pipefail
build=${1:?usage: run_etcd_bench.sh BUILD_DIR [RUNS] [DURATION_MS]}
runs=${2:-5}
dur=${3:-2000}
shift $(($# < 3 ? $# : 3))
bench="$build/bench/dlock-bench/dlock-bench"
freeport() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rport=$(freeport); cport=$(freeport); pport=$(freeport)
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-etcd-bench-XXXXXX")
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
rpid=$!
etcd --name b --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$cport" \
     --advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
     --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "b=http://127.0.0.1:$pport" \
     --logger zap --log-level warn >"$dir/etcd.log" 2>&1 &
epid=$!
trap 'kill "$rpid" "$epid" 2>/dev/null; wait "$rpid" "$epid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
    redis-cli -p "$rport" ping >/dev/null 2>&1 &&
        curl -s --noproxy '*' -X POST "http://127.0.0.1:$cport/v3/kv/range" -d '{"key":"AA=="}' >/dev/null 2>&1 && break
    sleep 0.1
done
echo "# $(date -u +%FT%TZ) $(uname -srm) $(nproc) cpus; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# redis $(redis-server --version | cut -d' ' -f3); etcd $(etcd --version | head -1 | cut -d' ' -f3), data dir on $(df --output=fstype "$dir" | tail -1); runs=$runs duration_ms=$dur"
rows="$dir/rows.csv"
for i in $(seq "$runs"); do
    for b in redis etcd; do
        if [ $b = redis ]; then url="redis://127.0.0.1:$rport"; else url="etcd://127.0.0.1:$cport"; fi
        "$bench" --url "$url" --csv --duration-ms "$dur" --scenario uncontended --scenario contended "$@" |
            tee -a "$dir/raw.txt" | grep -v '^scenario' | grep -v '^#' | sed "s/^/$b,/" >>"$rows"
    done
done
grep '^#' "$dir/raw.txt" || true
echo "# every run (backend,scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us)"
cat "$rows"
echo "# medians over $runs runs"
echo "backend,scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us"
/usr/bin/python3 - "$rows" <<'PY'
import csv, statistics, sys
by = {}
for row in csv.reader(open(sys.argv[1])):
    by.setdefault((row[0], row[1]), []).append([float(x) for x in row[2:]])
for (b, name), vals in by.items():
    med = [statistics.median(col) for col in zip(*vals)]
    print("%s,%s,%.0f,%.0f,%.3f,%.1f,%.1f" % (b, name, *med))
# the headline figures for the report's summary table (scripts/bench_summary.py)
for (b, name), vals in by.items():
    med = [statistics.median(col) for col in zip(*vals)]
    print("SUMMARY name=%s_lock_%s value=%.0f unit=ops/s ref=%s_fence_guard_limit ref_value=%.0f ratio=%.3f"
          % (b, name, med[0], b, med[1], med[2]))
PY
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
