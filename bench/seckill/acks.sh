#!/bin/bash
# bench/seckill/acks.sh: what a 201 costs (its section of
# docs/BENCHMARKS.md). A private master + one replica on loopback; engine level
# (seckill-bench --mode compare --strategies lua-coalesced, no HTTP), acks
# on (--replica-acks 1: WAIT 1 behind every batch, answers 201) against
# acks off (--replica-acks 0: no WAIT; this AOF-less master then answers
# every acceptance 202), interleaved on/off in every round so load from
# elsewhere hits both alike: 128 purchases in flight (throughput), then 1
# in flight (the latency of one decision). Prints CSV rows, then medians
# and the per-round cost. Everything it starts is stopped by PID.
# Env: ROUNDS (5) DURATION (2 s) BUILD_DIR (build-rel)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh
. bench/seckill/bench_lib.sh
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-2}
sb_setup seckill-acks tools/seckill-bench/seckill-bench
bench="$BUILD/tools/seckill-bench/seckill-bench"
dl_start_redis "$work"
dl_start_replica "$work" "$REDIS_PORT"
out="$work/rows.csv"
echo "round,acks,inflight,decisions_per_s,p50_us,p99_us,pending" | tee "$out"
# one ROUND ACKS INFLIGHT USERS: one compare run, one CSV row
one() {
    "$bench" --mode compare --redis-url "redis://127.0.0.1:$REDIS_PORT" --strategies lua-coalesced \
        --replica-acks "$2" --inflight "$3" --users "$4" --duration "$DURATION" --csv >"$work/cmp.csv" 2>"$work/cmp.err" ||
        { echo "acks.sh: compare failed" >&2; cat "$work/cmp.err" "$work/cmp.csv" >&2; exit 1; }
    # strategy,decisions_per_s,p50_us,p99_us,...,tp_pending (17th)
    tail -1 "$work/cmp.csv" | awk -F, -v r="$1" -v a="$2" -v i="$3" \
        '{ printf "%s,%s,%s,%s,%s,%s,%s\n", r, a ? "on" : "off", i, $2, $3, $4, $17 }' | tee -a "$out"
}
for r in $(seq 1 "$ROUNDS"); do
    for a in 1 0; do one "$r" "$a" 128 200; done
    for a in 0 1; do one "$r" "$a" 1 50; done
done
echo
echo "# medians over $ROUNDS rounds (redis $(redis-server --version | awk '{print $3}' | sed 's/v=//'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
/usr/bin/python3 - "$out" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = statistics.median
print("acks,inflight,decisions_per_s,p50_us,p99_us,pending_per_run,runs")
summary = []
for i in ("128", "1"):
    for a in ("on", "off"):
        rs = [r for r in rows if r["acks"] == a and r["inflight"] == i]
        print("%s,%s,%.0f,%.0f,%.0f,%.0f,%d" % (a, i, med(float(r["decisions_per_s"]) for r in rs),
              med(float(r["p50_us"]) for r in rs), med(float(r["p99_us"]) for r in rs),
              med(float(r["pending"]) for r in rs), len(rs)))
    on = {r["round"]: float(r["decisions_per_s"]) for r in rows if r["acks"] == "on" and r["inflight"] == i}
    off = {r["round"]: float(r["decisions_per_s"]) for r in rows if r["acks"] == "off" and r["inflight"] == i}
    cost = [1 - on[k] / off[k] for k in on if off.get(k)]
    print("cost_inflight_%s,per_round %s,median %.1f %%" % (i, " ".join("%.1f%%" % (c * 100) for c in cost),
          med(cost) * 100))
    # the headline figures for the report's summary table (scripts/bench_summary.py)
    summary.append("SUMMARY name=acks_on_inflight_%s value=%.0f unit=decisions/s ref=acks_off ref_value=%.0f "
                   "ratio=%.3f" % (i, med(on.values()), med(off.values()), med(on[k] / off[k] for k in on if off.get(k))))
print("\n".join(summary))
EOF
