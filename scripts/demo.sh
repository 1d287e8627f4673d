#!/bin/bash
# README command 1: the flash-sale demo. Installs what is missing, builds,
# then on private servers: a Redis master with one replica and three
# Sentinels (or $REDIS_URL), so a 201 waits for the replica's
# acknowledgement (docs/design/promise.md); a SQLite file
# (or $DATABASE_URL), 3 seckilld instances and 2 persisters; a campaign of
# $DEMO_STOCK items, limit 1 per user; $DEMO_BUYERS buyers, $DEMO_SCALPERS
# scalpers firing $DEMO_BURST requests each with repeated Idempotency-Keys,
# and malformed requests. Then it drains the pipeline, reconciles, prints a
# report, writes an HTML report, and exits non-zero if any invariant failed.
# Everything it starts is stopped by PID on exit, also on Ctrl-C.
# DEMO_SKIP_BUILD=1 BUILD_DIR=dir uses an existing build (the CI test does).
# DEMO_FAILOVER=1 (make demo-failover): the buyers arrive over a few
# seconds and the master is killed with -9 mid-sale; Sentinel promotes the
# replica and the same report must say "broken promises 0".
# DEMO_CLUSTER=1 (make demo-cluster): the same sale on a private Redis
# Cluster, 3 masters + 3 replicas, through a redis-cluster:// URL; a 201
# waits for the campaign's slot master's replica (WAIT 1).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/lib.sh

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
trap 'dl_cleanup; rm -rf "$work"' EXIT
trap 'echo; echo "demo: interrupted, stopping everything"; exit 130' INT TERM

check_url=()
seckilld_extra=()
CAMPAIGN="demo-$(date +%s)"
if [ "$CLUSTER" = 1 ]; then
    [ "$FAILOVER" = 1 ] && { echo "demo: DEMO_CLUSTER and DEMO_FAILOVER: use tests/fault/scenario_cluster_failover.sh" >&2; exit 2; }
    src=$root
    . tests/fault/scenario_cluster_lib.sh
    cl_start
    seckilld_extra=(--replica-acks 1)
    check_url=(--redis-url "redis://127.0.0.1:$(cl_master_of "{c:$CAMPAIGN}:meta")")
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
    check_url=(--redis-url "redis://127.0.0.1:$REPLICA_PORT")
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
[ "$FAILOVER" = 1 ] && pace=(--rate "${DEMO_RATE:-3000}" --retries 40)
set +e
"$bin/seckill-bench/seckill-bench" "${args[@]}" --campaign "$CAMPAIGN" --create --admin-token "$TOKEN" \
    --stock "$STOCK" --limit 1 --buyers "$BUYERS" --scalpers "$SCALPERS" --scalper-burst "$BURST" \
    --bad "$BAD" --connections "$CONNS" "${pace[@]}" --json-out "$OUT/bench.json" \
    --orders-out "$OUT/orders.txt" &
bench_pid=$!
if [ "$FAILOVER" = 1 ]; then
    sleep 1
    echo "demo: kill -9 the Redis master (pid $MASTER_PID) mid-sale"
    kill -9 "$MASTER_PID"
    first=${SENTINEL_PORTS# }
    for _ in $(seq 1 300); do
        [ "$(dl_sentinel_master "${first%% *}" demo)" = "127.0.0.1:$REPLICA_PORT" ] && break
        sleep 0.1
    done
    echo "demo: Sentinel promoted the replica 127.0.0.1:$REPLICA_PORT"
fi
wait "$bench_pid"
bench_rc=$?
set -e
[ $bench_rc -le 1 ] || { echo "demo: load generator failed (exit $bench_rc)" >&2; exit 1; }

echo "demo: waiting for the order pipeline to drain"
rec_rc=1
for _ in $(seq 1 150); do
    if "$bin/seckill/seckill" reconcile --campaign "$CAMPAIGN" --json >"$OUT/reconcile.json" 2>"$work/reconcile.err"; then
        rec_rc=0
        break
    fi
    sleep 0.2
done
"$bin/seckill/seckill" reconcile --campaign "$CAMPAIGN" >"$OUT/reconcile.txt" 2>&1 || true

set +e
"$PY" scripts/sale_check.py --bench "$OUT/bench.json" --orders "$OUT/orders.txt" \
    --reconcile "$OUT/reconcile.json" --reconcile-rc "$rec_rc" --database-url "$DATABASE_URL" \
    --campaign "$CAMPAIGN" --stock "$STOCK" --html "$OUT/report.html" "${check_url[@]}"
report_rc=$?
set -e
echo "demo: HTML report: $OUT/report.html"
if [ $bench_rc -ne 0 ] || [ $report_rc -ne 0 ]; then
    echo "demo: FAILED: an invariant did not hold (see above)" >&2
    exit 1
fi
echo "demo: all invariants held"
