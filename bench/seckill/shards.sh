#!/bin/bash
# bench/seckill/shards.sh: one hot campaign over K buckets on a 3-master
# Redis Cluster (its section of docs/BENCHMARKS.md).
# A benchmark, not a test. Each round, for every K (KS, default 1 3 6):
#   tp    seckill-bench --mode buy through one seckilld (HTTP, unique buyers,
#         ample stock, DURATION s): decisions/s, and per master the Redis
#         time spent in EVALSHA (INFO commandstats usec) and the process CPU
#         (INFO cpu used_cpu_sys + used_cpu_user) per decision, and each
#         master's share of the whole cluster's EVALSHA time;
#   sale  a finite stock (SALE_STOCK) bought by twice as many buyers until
#         sold out: transfers (takes) and every transfer.lua call as a
#         share of all script calls (seckilld /metrics against EVALSHA
#         calls on the masters), stranded waits.
# A fresh seckilld (no database, --replica-acks 0) serves each phase. Then
# the ceiling of one node in the same round: redis-benchmark EVALSHA
# of purchase.lua (one purchase a call, -c 50 and -c 50 -P 16) on one of
# the masters, keys in its own slot. Prints CSV rows and the medians; every
# server it starts is stopped by PID (never port 6379).
# Env: ROUNDS (3) DURATION (4 s) KS ("1 3 6") CONNS (64) SALE_STOCK (20000)
#      SECKILLD_WORKERS (0: one process) RB_N (100000) BUILD_DIR (build-rel)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh
. bench/seckill/bench_lib.sh
. tests/support/cluster.sh
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
KS=${KS:-1 3 6}
CONNS=${CONNS:-64}
SALE_STOCK=${SALE_STOCK:-20000}
RB_N=${RB_N:-100000}
command -v redis-benchmark >/dev/null || { echo "shards.sh: redis-benchmark not installed" >&2; exit 2; }
sb_setup seckill-shards tools/seckill-bench/seckill-bench tools/seckilld/seckilld
bench="$BUILD/tools/seckill-bench/seckill-bench"
TOKEN=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')

cluster_start "$work/clu" 3 0
MASTERS=$(for p in $CLUSTER_PORTS; do [ "$(cluster__cli "$p" role | head -1)" = master ] && echo "$p"; done | tr '\n' ' ')
MASTERS=${MASTERS% }
workers=()
[ "${SECKILLD_WORKERS:-0}" -gt 0 ] && workers=(--workers "$SECKILLD_WORKERS")
# start_seckilld / stop_seckilld: a fresh seckilld for every phase, so its
# counters and its recovery scans (every second, every bucket of every
# sharded campaign it knows) belong to that phase's campaign only.
start_seckilld() {
    SK_PORT=$(dl_free_port)
    "$BUILD/tools/seckilld/seckilld" --port "$SK_PORT" --bind 127.0.0.1 --redis-url "$CLUSTER_URL" \
        --admin-token "$TOKEN" --replica-acks 0 --log-level warn "${workers[@]}" >>"$work/seckilld.log" 2>&1 &
    SK_PID=$!
    dl_track "$SK_PID"
    URL="http://127.0.0.1:$SK_PORT"
    dl_wait_http "$URL/healthz" 100 || { echo "shards.sh: seckilld did not start" >&2; cat "$work/seckilld.log" >&2; exit 1; }
}
stop_seckilld() {
    kill "$SK_PID"
    wait "$SK_PID" 2>/dev/null || true
}

info() { cluster__cli "$1" info "$2" | tr -d '\r'; }
# cpu_ms PORT: the server's CPU time so far (user + sys), ms
cpu_ms() { info "$1" cpu | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.0f", s * 1000 }'; }
# evalsha PORT: "calls usec" of EVALSHA since the last RESETSTAT
evalsha_stats() {
    info "$1" commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),usec=\([0-9]*\),.*/\1 \2/p' | grep . || echo "0 0"
}
metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m { print $2; f = 1 } END { if (!f) print 0 }'; }

out="$work/rows.csv"
echo "round,k,phase,master,decisions,decisions_per_s,evalsha_calls,evalsha_usec,cpu_ms,xfer_calls,takes,batch_mean,stranded_waits" | tee "$out"

# phase ROUND K tp|sale: one measurement, one CSV row per master.
phase() {
    local r=$1 k=$2 kind=$3 id p calls usec
    id="s$r-k$k-$kind-$$"
    local stock=1000000000
    [ "$kind" = sale ] && stock=$SALE_STOCK
    start_seckilld
    "$bench" --url "$URL" --campaign "$id" --create --admin-token "$TOKEN" --stock "$stock" --limit 1 \
        --shards "$k" --buyers 0 --scalpers 0 --bad 0 >/dev/null
    declare -A c0
    for p in $MASTERS; do cluster__cli "$p" config resetstat >/dev/null; c0[$p]=$(cpu_ms "$p"); done
    local x0 t0 bs0 bc0 w0
    x0=$(metric seckill_transfer_script_calls_total); t0=$(metric seckill_transfers_total)
    bs0=$(metric seckill_purchase_batch_size_sum); bc0=$(metric seckill_purchase_batch_size_count)
    w0=$(metric seckill_stranded_wait_seconds_count)
    if [ "$kind" = tp ]; then
        "$bench" --url "$URL" --campaign "$id" --mode buy --duration "$DURATION" --connections "$CONNS" \
            --json-out "$work/b.json" >/dev/null
    else
        "$bench" --url "$URL" --campaign "$id" --mode sale --stock "$stock" --buyers $((2 * stock)) --scalpers 0 \
            --bad 0 --connections "$CONNS" --json-out "$work/b.json" >/dev/null ||
            { echo "shards.sh: the sale of $id broke an invariant" >&2; exit 1; }
    fi
    local dec dps xc tk bm sw
    read -r dec dps < <("$PY" -c 'import json, sys; b = json.load(open(sys.argv[1])); print(b["responses"], b["requests_per_s"])' "$work/b.json")
    xc=$(( $(metric seckill_transfer_script_calls_total) - x0 )); tk=$(( $(metric seckill_transfers_total) - t0 ))
    bm=$(awk -v s="$(( $(metric seckill_purchase_batch_size_sum) - bs0 ))" -v c="$(( $(metric seckill_purchase_batch_size_count) - bc0 ))" \
        'BEGIN { printf "%.2f", c ? s / c : 0 }')
    sw=$(( $(metric seckill_stranded_wait_seconds_count) - w0 ))
    for p in $MASTERS; do
        read -r calls usec < <(evalsha_stats "$p")
        echo "$r,$k,$kind,$p,$dec,$dps,$calls,$usec,$(( $(cpu_ms "$p") - ${c0[$p]} )),$xc,$tk,$bm,$sw" | tee -a "$out"
    done
    stop_seckilld
}

# ceiling ROUND: EVALSHA purchase.lua straight at the first master (its own slot).
SHA=$(cluster__cli "${MASTERS%% *}" script load "$(cat src/seckill/lua/purchase.lua)")
ceiling() {
    local r=$1 p=${MASTERS%% *} c n line name
    for name in c50 c50_P16; do
        c=""
        for n in $(seq 0 999); do # a campaign id whose slot the first master serves
            case "$(cluster__cli "$p" get "{c:rb$r$name$n}:meta" 2>&1)" in MOVED*) ;; *) c="rb$r$name$n"; break ;; esac
        done
        cluster__cli "$p" hset "{c:$c}:meta" per_user_limit 1 starts_at_ms 0 ends_at_ms 99999999999999 \
            stock 1000000000 runid bench >/dev/null
        cluster__cli "$p" set "{c:$c}:stock" 1000000000 >/dev/null
        local extra=()
        [ "$name" = c50_P16 ] && extra=(-P 16)
        line=$(redis-benchmark -p "$p" -n "$RB_N" -c 50 -r 100000000 --csv "${extra[@]}" EVALSHA "$SHA" 5 \
            "{c:$c}:meta" "{c:$c}:stock" "{c:$c}:buyers" "{c:$c}:orders" "{c:$c}:order_status" \
            1 0 1000 0 1000 86400000 120000 bench 1 __rand_int__ u__rand_int__ 1 0 | tail -1)
        [ "$(cluster__cli "$p" xlen "{c:$c}:orders")" -ge $((RB_N * 99 / 100)) ] ||
            { echo "shards.sh: EVALSHA ceiling run $name did not accept its purchases" >&2; exit 1; }
        echo "$line" | awk -F'","' -v r="$r" -v m="$name" -v p="$p" '{ printf "%s,1,ceiling_%s,%s,,%.0f,,,,,,,\n", r, m, p, $2 }' |
            tee -a "$out"
        cluster__cli "$p" unlink "{c:$c}:meta" "{c:$c}:stock" "{c:$c}:buyers" "{c:$c}:orders" "{c:$c}:order_status" >/dev/null
    done
}

for r in $(seq 1 "$ROUNDS"); do
    for k in $KS; do
        phase "$r" "$k" tp
        phase "$r" "$k" sale
    done
    ceiling "$r"
done
echo
echo "# medians over $ROUNDS rounds ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)); masters $MASTERS"
"$PY" - "$out" <<'EOF'
import csv, statistics, sys
med = statistics.median
rows = list(csv.DictReader(open(sys.argv[1])))
ceil = {}
for r in rows:
    if r["phase"].startswith("ceiling_"):
        ceil.setdefault(r["phase"][8:], []).append(float(r["decisions_per_s"]))
groups = {}
for r in rows:
    if not r["phase"].startswith("ceiling_"):
        groups.setdefault((int(r["k"]), r["phase"]), {}).setdefault(r["round"], []).append(r)
print("k,phase,decisions_per_s,evalsha_us_per_decision_total,cpu_us_per_decision_total,"
      "shares_evalsha_sorted,cpu_us_per_decision_sorted,batch_mean,takes_pct_of_script_calls,"
      "xfer_calls_pct_of_script_calls,stranded_waits")
hot = {}
for (k, ph), by_round in sorted(groups.items()):
    dps, us, cpu, shares, cpus, bm, tk, xc, sw = [], [], [], [], [], [], [], [], []
    for rr in by_round.values():
        dec = float(rr[0]["decisions"]) or 1
        tot_us = sum(float(x["evalsha_usec"]) for x in rr)
        tot_calls = sum(float(x["evalsha_calls"]) for x in rr) or 1
        dps.append(float(rr[0]["decisions_per_s"]))
        us.append(tot_us / dec)
        cpu.append(sum(float(x["cpu_ms"]) for x in rr) * 1000 / dec)
        shares.append(sorted((float(x["evalsha_usec"]) / (tot_us or 1) for x in rr), reverse=True))
        cpus.append(sorted((float(x["cpu_ms"]) * 1000 / dec for x in rr), reverse=True))
        bm.append(float(rr[0]["batch_mean"]))
        tk.append(100 * float(rr[0]["takes"]) / tot_calls)
        xc.append(100 * float(rr[0]["xfer_calls"]) / tot_calls)
        sw.append(float(rr[0]["stranded_waits"]))
    col = lambda v: " ".join("%.3f" % med(x[i] for x in v) for i in range(len(v[0])))
    print("%d,%s,%.0f,%.2f,%.2f,%s,%s,%.2f,%.3f,%.2f,%.0f" % (k, ph, med(dps), med(us), med(cpu), col(shares),
          " ".join("%.2f" % med(x[i] for x in cpus) for i in range(len(cpus[0]))), med(bm), med(tk), med(xc), med(sw)))
    if ph == "tp":
        hot[k] = (med(x[0] for x in cpus), med(cpu), med(x[0] for x in shares))
for name, v in sorted(ceil.items()):
    print("ceiling_%s (one master, redis-benchmark EVALSHA purchase.lua),%.0f decisions/s (rounds: %s)"
          % (name, med(v), " ".join("%.0f" % x for x in v)))
# A master saturates at one core: the cluster then decides 1e6 / (its
# busiest master's CPU us per decision) per second. Projection for N
# masters with K = N buckets spread evenly: N x 1e6 / (all masters' CPU us
# per decision at that K), at the batch sizes this run had.
for k, (top_us, tot_us, share) in sorted(hot.items()):
    print("K = %d on 3 masters (tp): busiest master %.2f CPU us per decision (share of EVALSHA time %.2f), "
          "all masters %.2f -> saturates at ~%.0f decisions/s; N masters with K = N at this cost: N x %.0f"
          % (k, top_us, share, tot_us, 1e6 / top_us, 1e6 / tot_us))
# the headline figures for the report's summary table (scripts/bench_summary.py):
# K buckets against K = 1 in the same rounds, and the projected saturation
dps_by = {key: {rd: float(rr[0]["decisions_per_s"]) for rd, rr in by_round.items()}
          for key, by_round in groups.items()}
for (k, ph), v in sorted(dps_by.items()):
    base = dps_by.get((1, ph))
    if k != 1 and base:
        r = [v[rd] / base[rd] for rd in v if base.get(rd)]
        print("SUMMARY name=shards_%d_%s value=%.0f unit=decisions/s ref=shards_1_%s ref_value=%.0f ratio=%.2f"
              % (k, ph, med(v.values()), ph, med(base.values()), med(r)))
for k, (top_us, tot_us, share) in sorted(hot.items()):
    if k != 1 and 1 in hot:
        print("SUMMARY name=shards_%d_saturation value=%.0f unit=decisions/s ref=shards_1_saturation ref_value=%.0f "
              "ratio=%.2f" % (k, 1e6 / top_us, 1e6 / hot[1][0], hot[1][0] / top_us))
EOF
