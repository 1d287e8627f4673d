#!/bin/bash
# README command 1: the flash-sale demo. Installs what is missing, builds,
# then on private servers: a Redis master with one replica and three
# Sentinels (or $REDIS_URL), so a 201 waits for the replica's
# acknowledgement (docs/design/promise.md); a SQLite file
# (or $DATABASE_URL), 3 seckilld instances and 2 persisters; a campaign of
# $DEMO_STOCK items, limit 1 per user; $DEMO_BUYERS buyers, $DEMO_SCALPERS
# scalpers firing $DEMO_BURST requests each with repeated Idempotency-Keys,
# and malformed requests. Then it waits for the pipeline to drain (bounded:
# DEMO_DRAIN_S, default 60 s, else it fails saying what is left), reconciles,
# prints a report, writes an HTML report (scripts/sale_report.py: the sale
# over time, with the kill, the promotion, the barrier and the first 201
# after it marked), and exits non-zero if any invariant failed.
# Everything it starts is stopped by PID on exit, also on Ctrl-C.
# DEMO_SKIP_BUILD=1 BUILD_DIR=dir uses an existing build (the CI test does).
# DEMO_FAILOVER=1 (make demo-failover): the buyers arrive over a few
# seconds and the master is killed with -9 mid-sale; Sentinel promotes the
# replica (the old master never returns) and the same report must say
# "broken promises 0", "lost 0", "sold beyond the buyers' answers 0".
# DEMO_CLUSTER=1 (make demo-cluster): the same sale on a private Redis
# Cluster, 3 masters + 3 replicas, through a redis-cluster:// URL; a 201
# waits for the campaign's slot master's replica (WAIT 1).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/lib.sh

# After the kill: until Sentinel names the replica (marks "promoted"), then
# until the campaign's barrier opened on it (its meta names the new
# master's run id: marks "barrier"). Each wait is bounded and fails loudly.
demo_follow_failover() {
    local first=${SENTINEL_PORTS# } runid i
    first=${first%% *}
    for i in $(seq 1 300); do
        [ "$(dl_sentinel_master "$first" demo)" = "127.0.0.1:$REPLICA_PORT" ] && break
        [ "$i" = 300 ] && { echo "demo: FAILED: Sentinel promoted no replica in 30 s" >&2; return 1; }
        sleep 0.1
    done
    mark promoted
    echo "demo: Sentinel promoted the replica 127.0.0.1:$REPLICA_PORT"
    runid=$(redis-cli -p "$REPLICA_PORT" info server | tr -d '\r' | awk -F: '$1 == "run_id" {print $2}')
    for i in $(seq 1 600); do
        [ "$(redis-cli -p "$REPLICA_PORT" hget "{c:$CAMPAIGN}:meta" runid)" = "$runid" ] && break
        [ "$i" = 600 ] && { echo "demo: FAILED: the campaign's barrier did not open on the new master in 30 s" >&2; return 1; }
        sleep 0.05
    done
    mark barrier
    echo "demo: the barrier opened the campaign on the new master"
}

# demo_wait_drained BOUND_S: until the reconciliation is clean with nothing
# pending and the same units sold on two readings 0.5 s apart (no decision
# still on its way); then reconcile.json (what the checker reads) and
# reconcile.txt are that reading. Past the bound it fails, saying what is left.
demo_wait_drained() {
    local t0 prev="" now
    t0=$(date +%s)
    echo "demo: waiting for the order pipeline to drain (at most $1 s)"
    while :; do
        rec_rc=0
        "$bin/seckill/seckill" reconcile --campaign "$CAMPAIGN" --json >"$OUT/reconcile.json" 2>"$work/reconcile.err" ||
            rec_rc=$?
        now=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]["redis"]
print("%d/%d/%d" % (r["bought_units"], r["pending"], r["lag"]))' "$OUT/reconcile.json" 2>/dev/null || echo none)
        if [ "$rec_rc" = 0 ] && [ "$now" = "$prev" ]; then
            "$bin/seckill/seckill" reconcile --campaign "$CAMPAIGN" >"$OUT/reconcile.txt" 2>&1 || true
            echo "demo: drained after $(( $(date +%s) - t0 )) s"
            return 0
        fi
        if [ $(( $(date +%s) - t0 )) -ge "$1" ]; then
            echo "demo: FAILED: the order pipeline did not drain in $1 s (units sold/pending/lag: $now; reconcile exit $rec_rc):" >&2
            "$bin/seckill/seckill" reconcile --campaign "$CAMPAIGN" >&2 || true
            return 1
        fi
        prev=$now
        sleep 0.5
    done
}

BUYERS=${DEMO_BUYERS:-10000}
SCALPERS=${DEMO_SCALPERS:-50}
BURST=${DEMO_BURST:-100}
BAD=${DEMO_BAD:-200}
FAILOVER=${DEMO_FAILOVER:-0}
CLUSTER=${DEMO_CLUSTER:-0}
# with a failover the stock lasts past the kill, so it happens mid-sale
STOCK=${DEMO_STOCK:-$([ "$FAILOVER" = 1 ] && echo 5000 || echo 100)}
CONNS=${DEMO_CONNECTIONS:-192}
OUT=${DEMO_OUT:-$root/out/demo}
BUILD=${BUILD_DIR:-build}

case "$BUILD" in /*) ;; *) BUILD="$root/$BUILD" ;; esac
if [ "${DEMO_SKIP_BUILD:-0}" != 1 ]; then
    ./scripts/setup.sh
    echo "demo: building (cmake, $BUILD)"
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$BUILD" -j "$(nproc)" >/dev/null
fi
bin="$BUILD/tools"
work=$(mktemp -d /tmp/dlock-demo-XXXXXX)
mkdir -p "$OUT"
trap 'dl_cleanup; [ -n "${DEMO_KEEP:-}" ] && echo "demo: logs kept in $work" || rm -rf "$work"' EXIT
events="$OUT/events.txt"
: >"$events"
mark() { echo "$1 $(date +%s%3N)" >>"$events"; }
trap 'echo; echo "demo: interrupted, stopping everything"; exit 130' INT TERM

seckilld_extra=()
CAMPAIGN="demo-$(date +%s)"
if [ "$CLUSTER" = 1 ]; then
    [ "$FAILOVER" = 1 ] && { echo "demo: DEMO_CLUSTER and DEMO_FAILOVER: use tests/fault/scenario_cluster_failover.sh" >&2; exit 2; }
    src=$root
    . tests/fault/scenario_cluster_lib.sh
    cl_start
    seckilld_extra=(--replica-acks 1)
    echo "demo: Redis Cluster, masters $CL_MASTERS (each with one replica); campaign slot $(cl_slot "{c:$CAMPAIGN}:meta")"
elif [ -z "${REDIS_URL:-}" ]; then
    # A master that refuses writes when its replica is gone for 10 s (no
    # promises from a cut-off master), one replica, three Sentinels.
    dl_start_redis "$work" --min-replicas-to-write 1 --min-replicas-max-lag 10
    MASTER_PID=$REDIS_PID
    dl_start_replica "$work" "$REDIS_PORT"
    dl_start_sentinels "$work" "$REDIS_PORT" demo
    sentinels=$(for p in $SENTINEL_PORTS; do printf '127.0.0.1:%s,' "$p"; done)
    REDIS_URL="redis-sentinel://${sentinels%,}/demo"
elif [ "$FAILOVER" = 1 ]; then
    echo "demo: DEMO_FAILOVER needs the demo's own servers (unset REDIS_URL)" >&2
    exit 2
fi
DATABASE_URL=${DATABASE_URL:-sqlite://$work/orders.db}
export REDIS_URL DATABASE_URL
TOKEN=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "demo: redis $REDIS_URL, database $DATABASE_URL, campaign $CAMPAIGN (stock $STOCK, limit 1)"

urls=()
for i in 1 2 3; do
    port=$(dl_free_port)
    "$bin/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" "${seckilld_extra[@]}" \
        >"$work/seckilld-$i.log" 2>&1 &
    dl_track $!
    urls+=("http://127.0.0.1:$port")
done
for i in 1 2; do
    "$bin/seckill-persist/seckill-persist" >"$work/persist-$i.log" 2>&1 &
    dl_track $!
done
for u in "${urls[@]}"; do
    dl_wait_http "$u/healthz" 100 || { echo "demo: $u did not become healthy" >&2; cat "$work"/seckilld-*.log >&2; exit 1; }
done
echo "demo: 3 seckilld instances (${urls[*]}) and 2 persisters are up"

args=()
for u in "${urls[@]}"; do args+=(--url "$u"); done
pace=()
# buyers retry (backoff with jitter, at most 2 s apart) through the failover
# with their keys, long enough to outlast a Sentinel election that has to be
# retried (split votes: the next try comes 2 x failover-timeout = 10 s
# later, so a promotion can take ~13 s after the kill)
[ "$FAILOVER" = 1 ] && pace=(--rate "${DEMO_RATE:-3000}" --retries "${DEMO_RETRIES:-30}" --timeout 5s)
set +e
"$bin/seckill-bench/seckill-bench" "${args[@]}" --campaign "$CAMPAIGN" --create --admin-token "$TOKEN" \
    --stock "$STOCK" --limit 1 --buyers "$BUYERS" --scalpers "$SCALPERS" --scalper-burst "$BURST" \
    --bad "$BAD" --connections "$CONNS" "${pace[@]}" --json-out "$OUT/bench.json" \
    --orders-out "$OUT/orders.txt" &
bench_pid=$!
if [ "$FAILOVER" = 1 ]; then
    sleep "${DEMO_KILL_AFTER:-1}"
    echo "demo: kill -9 the Redis master (pid $MASTER_PID) mid-sale; it does not come back"
    mark kill
    kill -9 "$MASTER_PID"
    demo_follow_failover || { kill "$bench_pid" 2>/dev/null; exit 1; }
fi
wait "$bench_pid"
bench_rc=$?
set -e
[ $bench_rc -le 1 ] || { echo "demo: load generator failed (exit $bench_rc)" >&2; exit 1; }

demo_wait_drained "${DEMO_DRAIN_S:-60}" || exit 1

set +e
"$PY" scripts/sale_check.py --bench "$OUT/bench.json" --orders "$OUT/orders.txt" \
    --reconcile "$OUT/reconcile.json" --reconcile-rc "$rec_rc" --database-url "$DATABASE_URL" \
    --campaign "$CAMPAIGN" --stock "$STOCK" --html "$OUT/report.html" --redis-url "$REDIS_URL" \
    --events "$events"
report_rc=$?
set -e
echo "demo: HTML report: $OUT/report.html"
if [ $bench_rc -ne 0 ] || [ $report_rc -ne 0 ]; then
    echo "demo: FAILED: an invariant did not hold (see above)" >&2
    exit 1
fi
echo "demo: all invariants held"
