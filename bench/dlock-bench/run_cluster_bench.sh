#!/usr/bin/env bash
# run_cluster_bench.sh: the routing cost of a Redis Cluster, same run: a
# private single redis-server and a private 3-master cluster (no replicas,
# so only routing differs; tests/support/cluster.sh), both on free loopback
# ports in a temp dir, then RUNS times, interleaved, dlock-bench's
# uncontended scenarios (one thread, try_lock + unlock cycles, simple and
# reentrant) on each. Prints every row, the per-target medians and the
# median of the same-run ratios cluster / single; stops every server by PID.
# Usage: bench/dlock-bench/run_cluster_bench.sh BUILD_DIR [RUNS=5] [DURATION_MS=2000]
set -euo pipefail
build=${1:?usage: run_cluster_bench.sh BUILD_DIR [RUNS] [DURATION_MS]}
runs=${2:-5}
dur=${3:-2000}
src=$(cd "$(dirname "$0")/../.." && pwd)
bench="$build/bench/dlock-bench/dlock-bench"
dir=$(mktemp -d /tmp/dlock-cbench-XXXXXX)
# shellcheck source=../../scripts/lib.sh
. "$src/scripts/lib.sh"
# shellcheck source=../../tests/support/cluster.sh
. "$src/tests/support/cluster.sh"
trap 'dl_cleanup; rm -rf "$dir"' EXIT
port=$(dl_free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
dl_track $!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
cluster_start "$dir/cluster" 3 0 >/dev/null
echo "# $(date -u +%FT%TZ) $(uname -srm) $(nproc) cpus; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# redis: $(redis-server --version | cut -d' ' -f3); runs=$runs duration_ms=$dur; cluster: 3 masters, 0 replicas"
rows="$dir/rows.csv"
scen=(--scenario uncontended --scenario uncontended_re)
for i in $(seq "$runs"); do
  for target in single cluster; do
    url="redis://127.0.0.1:$port"
    [ "$target" = cluster ] && url=$CLUSTER_URL
    "$bench" --url "$url" --csv --duration-ms "$dur" "${scen[@]}" | grep -v '^scenario' | grep -v '^#' |
      sed "s/^/$target,$i,/" | tee -a "$rows"
  done
done
echo "# medians over $runs runs (target,scenario,ops_per_s,p50_us,p99_us)"
/usr/bin/python3 - "$rows" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
# target, run, scenario, ops_per_s, limit, ratio, p50_us, p99_us
by, per_run = {}, {}
for t, run, sc, ops, _lim, _ratio, p50, p99 in rows:
    by.setdefault((t, sc), []).append((float(ops), float(p50), float(p99)))
    per_run[(t, sc, run)] = float(ops)
for (t, sc), v in sorted(by.items()):
    print("%s,%s,%.0f,%.1f,%.1f" % (t, sc, *[statistics.median(c) for c in zip(*v)]))
for sc in sorted({k[1] for k in by}):
    r = [per_run[("cluster", sc, run)] / per_run[("single", sc, run)]
         for (t, s, run) in per_run if t == "single" and s == sc and ("cluster", sc, run) in per_run]
    print("# %s: cluster / single ops/s, median of same-run ratios %.3f (runs: %s)" %
          (sc, statistics.median(r), " ".join("%.3f" % x for x in r)))
    # the headline figures for the report's summary table (scripts/bench_summary.py)
    print("SUMMARY name=cluster_lock_%s value=%.0f unit=ops/s ref=single_lock_%s ref_value=%.0f ratio=%.3f" %
          (sc, statistics.median(x[0] for x in by[("cluster", sc)]), sc,
           statistics.median(x[0] for x in by[("single", sc)]), statistics.median(r)))
PY
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
