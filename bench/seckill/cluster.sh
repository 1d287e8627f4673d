#!/bin/bash
# bench/seckill/cluster.sh: what routing through a Redis Cluster costs the
# engine (its section of docs/BENCHMARKS.md). Engine level (seckill-bench
# --mode compare --strategies lua-coalesced, no HTTP, no WAIT), one campaign,
# against three targets in the same run, interleaved in every round so load
# from elsewhere hits all alike:
#   one   a plain redis-server, redis://
#   node  one cluster-enabled redis-server owning every slot, redis:// (the
#         server's own cluster-mode cost, no routing)
#   clu   3 masters, no replicas, redis-cluster:// (the campaign's slot on
#         one of them: the router's cost on top)
# Prints CSV rows, then per-target medians and the per-round ratios to
# `one`. Everything it starts is stopped by PID.
# Env: ROUNDS (5) DURATION (3 s) BUILD_DIR (build-rel)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh
. bench/seckill/bench_lib.sh
. tests/support/cluster.sh
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
sb_setup seckill-cluster tools/seckill-bench/seckill-bench
bench="$BUILD/tools/seckill-bench/seckill-bench"

dl_start_redis "$work"
one="redis://127.0.0.1:$REDIS_PORT"
mkdir -p "$work/node" "$work/clu"
# the bus port chosen free too (by default it is the port + 10000, which
# nobody checked: another process's, or above the range)
dl_start_redis "$work/node" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$(dl_free_port)"
port=$REDIS_PORT
redis-cli -p "$port" cluster addslotsrange 0 16383 >/dev/null
for _ in $(seq 1 100); do
    case "$(redis-cli -p "$port" cluster info)" in *cluster_state:ok*) break ;; esac
    sleep 0.1
done
node="redis://127.0.0.1:$port"
cluster_start "$work/clu" 3 0
clu=$CLUSTER_URL

out="$work/rows.csv"
echo "round,target,decisions_per_s,p50_us,p99_us" | tee "$out"
for r in $(seq 1 "$ROUNDS"); do
    for t in one node clu; do
        "$bench" --mode compare --redis-url "${!t}" --strategies lua-coalesced --replica-acks 0 \
            --duration "$DURATION" --csv >"$work/cmp.csv" 2>"$work/cmp.err" ||
            { echo "cluster.sh: compare on $t failed" >&2; cat "$work/cmp.err" "$work/cmp.csv" >&2; exit 1; }
        tail -1 "$work/cmp.csv" | awk -F, -v r="$r" -v t="$t" '{ printf "%s,%s,%s,%s,%s\n", r, t, $2, $3, $4 }' |
            tee -a "$out"
    done
done
cluster_stop
echo
echo "# medians over $ROUNDS rounds ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
/usr/bin/python3 - "$out" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = statistics.median
by = {}
for r in rows:
    by.setdefault(r["target"], {})[r["round"]] = r
print("target,decisions_per_s,p50_us,p99_us,ratio_to_one_per_round,median_ratio")
summary = []
for t in ("one", "node", "clu"):
    rs = list(by[t].values())
    ratios = [float(by[t][k]["decisions_per_s"]) / float(by["one"][k]["decisions_per_s"]) for k in by[t]]
    print("%s,%.0f,%.0f,%.0f,%s,%.2f" % (t, med(float(r["decisions_per_s"]) for r in rs),
          med(float(r["p50_us"]) for r in rs), med(float(r["p99_us"]) for r in rs),
          " ".join("%.2f" % x for x in ratios), med(ratios)))
    # the headline figures for the report's summary table (scripts/bench_summary.py)
    if t != "one":
        summary.append("SUMMARY name=sale_%s value=%.0f unit=decisions/s ref=sale_one ref_value=%.0f ratio=%.2f" % (
            t, med(float(r["decisions_per_s"]) for r in rs), med(float(r["decisions_per_s"]) for r in by["one"].values()),
            med(ratios)))
print("\n".join(summary))
EOF
