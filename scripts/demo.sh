#!/bin/bash
# README command 1: the flash-sale demo. Installs what is missing, builds,
# then on private servers: a redis-server (or $REDIS_URL), a SQLite file
# (or $DATABASE_URL), 3 seckilld instances and 2 persisters; a campaign of
# $DEMO_STOCK items, limit 1 per user; $DEMO_BUYERS buyers, $DEMO_SCALPERS
# scalpers firing $DEMO_BURST requests each with repeated Idempotency-Keys,
# and malformed requests. Then it drains the pipeline, reconciles, prints a
# report, writes an HTML report, and exits non-zero if any invariant failed.
# Everything it starts is stopped by PID on exit, also on Ctrl-C.
# DEMO_SKIP_BUILD=1 BUILD_DIR=dir uses an existing build (the CI test does).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/lib.sh

BUYERS=${DEMO_BUYERS:-10000}
SCALPERS=${DEMO_SCALPERS:-50}
BURST=${DEMO_BURST:-100}
BAD=${DEMO_BAD:-200}
STOCK=${DEMO_STOCK:-100}
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

if [ -z "${REDIS_URL:-}" ]; then
    dl_start_redis "$work" --appendonly yes --appendfsync always  # fsync before reply: a 201 is a promise
    REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
fi
DATABASE_URL=${DATABASE_URL:-sqlite://$work/orders.db}
export REDIS_URL DATABASE_URL
TOKEN=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
CAMPAIGN="demo-$(date +%s)"
echo "demo: redis $REDIS_URL, database $DATABASE_URL, campaign $CAMPAIGN (stock $STOCK, limit 1)"

urls=()
for i in 1 2 3; do
    port=$(dl_free_port)
    "$bin/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" >"$work/seckilld-$i.log" 2>&1 &
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
set +e
"$bin/seckill-bench/seckill-bench" "${args[@]}" --campaign "$CAMPAIGN" --create --admin-token "$TOKEN" \
    --stock "$STOCK" --limit 1 --buyers "$BUYERS" --scalpers "$SCALPERS" --scalper-burst "$BURST" \
    --bad "$BAD" --connections "$CONNS" --json-out "$OUT/bench.json" --orders-out "$OUT/orders.txt"
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
    --campaign "$CAMPAIGN" --stock "$STOCK" --html "$OUT/report.html"
report_rc=$?
set -e
echo "demo: HTML report: $OUT/report.html"
if [ $bench_rc -ne 0 ] || [ $report_rc -ne 0 ]; then
    echo "demo: FAILED: an invariant did not hold (see above)" >&2
    exit 1
fi
echo "demo: all invariants held"
