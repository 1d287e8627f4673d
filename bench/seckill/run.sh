#!/bin/bash
# bench/seckill/run.sh: the flash-sale measurements (its section of
# docs/BENCHMARKS.md, written by make bench), every ratio against a limit measured in the same round on
# the same private redis-server: redis-benchmark EVALSHA of purchase.lua
# (-c 50, -c 50 -P 16), seckill-bench --mode compare (engine level), the
# HTTP ceiling (GET /ping) vs purchases through seckilld, and seckilld's RSS
# with 10 000 idle keep-alive connections. Prints CSV (per round, then
# medians). Everything it starts is stopped by PID; never port 6379.
# Env: ROUNDS (3) DURATION (3 s) CONNS (128) RB_N (100000) RB_NP (300000)
#      IDLE_CONNS (10000) BUILD_DIR (build-rel; configure it RelWithDebInfo)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib.sh
. bench/seckill/bench_lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CONNS=${CONNS:-128}
RB_N=${RB_N:-100000}
RB_NP=${RB_NP:-300000}
IDLE=${IDLE_CONNS:-10000}
command -v redis-benchmark >/dev/null || { echo "run.sh: redis-benchmark not installed" >&2; exit 2; }
sb_setup seckill-bench tools/seckill-bench/seckill-bench tools/seckilld/seckilld
bench="$BUILD/tools/seckill-bench/seckill-bench"
seckilld="$BUILD/tools/seckilld/seckilld"
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge $((IDLE + 200)) ] || { echo "run.sh: fd limit $(ulimit -n) < $IDLE + 200" >&2; exit 2; }

dl_start_redis "$work"
RURL="redis://127.0.0.1:$REDIS_PORT"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
SHA=$(rcli SCRIPT LOAD "$(cat src/seckill/lua/purchase.lua)")
TOKEN=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
out="$work/rows.csv"

# start_seckilld LOG [args...]: sets SK_PORT, SK_PID.
start_seckilld() {
    local log=$1; shift
    SK_PORT=$(dl_free_port)
    "$seckilld" --port "$SK_PORT" --bind 127.0.0.1 --redis-url "$RURL" --admin-token "$TOKEN" \
        --log-level warn "$@" >"$log" 2>&1 &
    SK_PID=$!
    dl_track "$SK_PID"
    dl_wait_http "http://127.0.0.1:$SK_PORT/healthz" 100 || { echo "run.sh: seckilld did not start" >&2; cat "$log" >&2; exit 1; }
}

row() { echo "$*" | tee -a "$out"; }

# evalsha ROUND NAME N [extra redis-benchmark args]: EVALSHA purchase.lua, one
# purchase a call, a new random user and order id each; ample stock.
evalsha() {
    local r=$1 name=$2 n=$3 c line accepted errors; shift 3
    c="rb$r$name"
    # runid: purchase.lua's barrier check (meta.runid must be ARGV[8]); ARGV[9] K = 1 bucket;
    # the purchase: no Idempotency-Key, no rate limits (flags 0: no key of its own)
    rcli HSET "{c:$c}:meta" per_user_limit 1 starts_at_ms 0 ends_at_ms 99999999999999 stock 1000000000 \
        runid bench >/dev/null
    rcli SET "{c:$c}:stock" 1000000000 >/dev/null
    rcli CONFIG RESETSTAT >/dev/null
    line=$(redis-benchmark -p "$REDIS_PORT" -n "$n" -c 50 -r 100000000 --csv "$@" EVALSHA "$SHA" 5 \
        "{c:$c}:meta" "{c:$c}:stock" "{c:$c}:buyers" "{c:$c}:orders" "{c:$c}:order_status" \
        1 0 1000 0 1000 86400000 120000 bench 1 __rand_int__ u__rand_int__ 1 0 | tail -1)
    accepted=$(rcli XLEN "{c:$c}:orders")
    errors=$(rcli INFO errorstats | grep -c errorstat_ || true)
    if [ "$errors" != 0 ] || [ "$accepted" -lt $((n * 99 / 100)) ]; then
        echo "run.sh: EVALSHA run $name accepted $accepted of $n ($errors error kinds)" >&2
        exit 1
    fi
    # "cmd","rps","avg","min","p50","p95","p99","max" (ms)
    echo "$line" | awk -F'","' -v r="$r" -v m="evalsha_$name" '{gsub(/"/, "", $8);
        printf "%s,%s,%.0f,decisions/s,%.0f,%.0f,,\n", r, m, $2, $5 * 1000, $7 * 1000}' | tee -a "$out"
    rcli UNLINK "{c:$c}:meta" "{c:$c}:stock" "{c:$c}:buyers" "{c:$c}:orders" "{c:$c}:order_status" >/dev/null
}

echo "round,measure,value,unit,p50_us,p99_us,oversold,duplicates" | tee "$out"
for r in $(seq 1 "$ROUNDS"); do
    evalsha "$r" c50 "$RB_N"
    evalsha "$r" c50_P16 "$RB_NP" -P 16

    # engine level: the four strategies
    "$bench" --mode compare --redis-url "$RURL" --duration "$DURATION" --csv >"$work/cmp.csv" 2>"$work/cmp.err" ||
        { echo "run.sh: compare failed (exit $?)" >&2; cat "$work/cmp.err" "$work/cmp.csv" >&2; exit 1; }
    # strategy,decisions_per_s,p50_us,p99_us,oversold,duplicates,...
    tail -n +2 "$work/cmp.csv" | awk -F, -v r="$r" '{printf "%s,engine_%s,%s,decisions/s,%s,%s,%s,%s\n", r, $1, $2, $3, $4, $5, $6}' | tee -a "$out"
    # tp_errors ($8), ok_errors ($14): failed commands / lock waits; say so, do not hide them
    tail -n +2 "$work/cmp.csv" | awk -F, '$8 + $14 > 0 { print "run.sh: " $1 " had " $8 + $14 " errors" > "/dev/stderr" }'

    evalsha "$r" c50_after "$RB_N" # the limit again, after the engine runs (noise)

    # HTTP: the ceiling (GET /ping, no Redis work) and purchases, same generator,
    # in the order ping buy buy ping (each DURATION/2), so load from others on
    # this machine hits both alike; each is the mean of its two slices.
    start_seckilld "$work/seckilld-$r.log"
    url="http://127.0.0.1:$SK_PORT"
    half=$(awk -v d="$DURATION" 'BEGIN { printf "%.2f", d / 2 }')
    : >"$work/http.csv"
    for kind in ping buy buy ping; do
        args=(--url "$url" --mode "$kind" --duration "${half}s" --warmup 0.3s --connections "$CONNS" --csv)
        [ "$kind" = buy ] && args+=(--campaign "hb$r-$$" --stock 1000000000 --limit 1)
        if [ "$kind" = buy ] && ! grep -q '^buy' "$work/http.csv"; then args+=(--create --admin-token "$TOKEN"); fi
        "$bench" "${args[@]}" | tail -1 >>"$work/http.csv" || { echo "run.sh: $kind run failed" >&2; exit 1; }
    done
    # mode,requests,responses,conn_errors,elapsed_s,req_per_s,accepted,oversold,over_limit,idem,p50,p90,p99,...
    for kind in ping buy; do
        grep "^$kind," "$work/http.csv" | awk -F, -v r="$r" -v k="$kind" '{ n++; v += $6; p50 += $11; p99 += $13;
            ov += $8; dup += $9; ce += $4 } END { if (ce) print "run.sh: " ce " connection errors (" k ")" > "/dev/stderr";
            printf "%s,http_%s,%.0f,%s,%.0f,%.0f,%s,%s\n", r, k, v / n, k == "ping" ? "req/s" : "decisions/s",
            p50 / n, p99 / n, k == "buy" ? ov : "", k == "buy" ? dup : "" }' | tee -a "$out"
    done
    rcli UNLINK "{c:hb$r-$$}:orders" "{c:hb$r-$$}:buyers" >/dev/null
    dl_stop "$SK_PID"

    # RSS with IDLE idle keep-alive connections (idle timeout raised so they stay)
    start_seckilld "$work/seckilld-idle-$r.log" --max-connections $((IDLE + 100)) --idle-timeout-ms 600000 \
        --max-connections-per-address 0
    /usr/bin/python3 bench/seckill/idle_conns.py 127.0.0.1 "$SK_PORT" "$IDLE" "$SK_PID" >"$work/idle.csv" ||
        { echo "run.sh: idle connections test failed" >&2; cat "$work/idle.csv" >&2; exit 1; }
    tail -1 "$work/idle.csv" | awk -F, -v r="$r" '{printf "%s,rss_%s_idle,%s,MiB,,,,\n%s,rss_0_idle,%.1f,MiB,,,,\n",
        r, $1, $4, r, $2 / 1024}' | tee -a "$out"
    dl_stop "$SK_PID"
done

echo
echo "# medians over $ROUNDS rounds; ratios are per round (same round), then the median"
/usr/bin/python3 - "$out" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(r["measure"], []).append(r)
med = lambda xs: statistics.median(xs) if xs else float("nan")
print("measure,median,unit,p50_us,p99_us,oversold_max,duplicates_max,runs")
for m, rs in by.items():
    num = lambda k: [float(x[k]) for x in rs if x[k] not in ("", None)]
    print("%s,%.1f,%s,%s,%s,%s,%s,%d" % (m, med(num("value")), rs[0]["unit"],
          "%.0f" % med(num("p50_us")) if num("p50_us") else "",
          "%.0f" % med(num("p99_us")) if num("p99_us") else "",
          "%.0f" % max(num("oversold")) if num("oversold") else "",
          "%.0f" % max(num("duplicates")) if num("duplicates") else "", len(rs)))
# the -c 50 limit of a round: mean of its runs before and after the engine runs
c50 = {}
for m in ("evalsha_c50", "evalsha_c50_after"):
    for x in by.get(m, []):
        c50.setdefault(x["round"], []).append(float(x["value"]))
by["evalsha_c50_mean"] = [{"round": k, "value": sum(v) / len(v), "unit": "decisions/s", "p50_us": "",
                           "p99_us": "", "oversold": "", "duplicates": ""} for k, v in c50.items()]
print("evalsha_c50_mean,%.1f,decisions/s,,,,,%d" % (med([x["value"] for x in by["evalsha_c50_mean"]]), len(c50)))
def ratio(a, b):
    va = {x["round"]: float(x["value"]) for x in by.get(a, [])}
    vb = {x["round"]: float(x["value"]) for x in by.get(b, [])}
    return [va[k] / vb[k] for k in va if k in vb and vb[k] > 0]
print("target,per_round,median,goal,met")
summary = []
for name, a, b, goal in [("engine_coalesced_vs_evalsha_c50", "engine_lua-coalesced", "evalsha_c50_mean", 2.0),
                         ("engine_single_vs_evalsha_c50", "engine_lua-single", "evalsha_c50_mean", None),
                         ("engine_coalesced_vs_evalsha_c50_P16", "engine_lua-coalesced", "evalsha_c50_P16", None),
                         ("http_buy_vs_http_ping", "http_buy", "http_ping", 0.8)]:
    rs = ratio(a, b)
    m = med(rs)
    print("%s,%s,%.2f,%s,%s" % (name, " ".join("%.2f" % x for x in rs), m,
          ">= %.1f" % goal if goal else "-", ("yes" if m >= goal else "no") if goal else "-"))
    # the headline figures for the report's summary table (scripts/bench_summary.py)
    summary.append("SUMMARY name=%s value=%.0f unit=%s ref=%s ref_value=%.0f ratio=%.2f" % (
        a, med([float(x["value"]) for x in by.get(a, [])]), by[a][0]["unit"] if by.get(a) else "-", b,
        med([float(x["value"]) for x in by.get(b, [])]), m))
for s in ("engine_lua-single", "engine_lua-coalesced"):
    bad = [x for x in by.get(s, []) if float(x["oversold"] or 0) > 0]
    print("%s_zero_oversold,%s,,0,%s" % (s, " ".join(x["oversold"] for x in by.get(s, [])), "no" if bad else "yes"))
rss = [float(x["value"]) for m, rs in by.items() if m.startswith("rss_") and m != "rss_0_idle" for x in rs]
print("seckilld_rss_idle_conns,%s,%.1f,<= 64 MiB,%s" % (" ".join("%.1f" % x for x in rss), med(rss),
      "yes" if rss and med(rss) <= 64 else "no"))
print("\n".join(summary))
if rss:
    print("SUMMARY name=seckilld_rss_idle_conns value=%.1f unit=MiB ref=rss_0_idle ref_value=%.1f ratio=%.2f" % (
        med(rss), med([float(x["value"]) for x in by.get("rss_0_idle", [])]),
        med(rss) / med([float(x["value"]) for x in by.get("rss_0_idle", [])])))
EOF
