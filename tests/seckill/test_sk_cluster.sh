#!/bin/bash
# test_sk_cluster.sh: seckilld, seckill-persist and the seckill admin tool
# on a real Redis Cluster (3 masters + 3 replicas) through a
# redis-cluster:// URL. Three campaigns whose slots live on three different
# masters each sell exactly their stock; the per-node metrics show that all
# three masters decided; the persister consumes every stream; reconcile is
# clean; campaigns, metrics, order and barrier work.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
bin="$build/tools"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-sk-cluster-XXXXXX")
trap 'dl_cleanup; [ -n "${DLOCK_TEST_KEEP:-}" ] || rm -rf "$work"' EXIT
. "$src/tests/fault/scenario_cluster_lib.sh"
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "== $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
TOKEN=cluster-admin
STOCK=40

cl_start || fail "cluster fixture"
export REDIS_URL DATABASE_URL
echo "cluster up: masters $CL_MASTERS, $REDIS_URL"
camps=()
for m in $CL_MASTERS; do camps+=("$(cl_campaign_on "$m" "k$RANDOM")"); done
for i in 0 1 2; do
    echo "campaign ${camps[$i]}: slot $(cl_slot "{c:${camps[$i]}}:meta") on master $(cl_master_of "{c:${camps[$i]}}:meta")"
done

urls=()
for k in 1 2; do
    port=$(dl_free_port)
    "$bin/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" --replica-acks 1 \
        --replica-ack-timeout-ms 500 >"$work/seckilld-$k.log" 2>&1 &
    dl_track $!
    urls+=("http://127.0.0.1:$port")
    dl_wait_http "http://127.0.0.1:$port/healthz" 100 || fail "seckilld $k not healthy"
done
"$bin/seckill-persist/seckill-persist" --block 200ms >"$work/persist.log" 2>&1 &
dl_track $!

for i in 0 1 2; do
    "$bin/seckill-bench/seckill-bench" --url "${urls[0]}" --url "${urls[1]}" --campaign "${camps[$i]}" --create \
        --admin-token "$TOKEN" --stock "$STOCK" --limit 1 --buyers 120 --scalpers 2 --scalper-burst 10 --bad 5 \
        --retries 5 --json-out "$work/bench-$i.json" >"$work/bench-$i.log" 2>&1 ||
        fail "sale of ${camps[$i]}: $(tail -3 "$work/bench-$i.log")"
    "$PY" - "$work/bench-$i.json" "$STOCK" <<'PY' || fail "sale of ${camps[$i]} did not sell exactly its stock"
import json, sys
b = json.load(open(sys.argv[1]))
assert b["accepted_qty"] == int(sys.argv[2]), b["accepted_qty"]
assert b["told_201"] == int(sys.argv[2]), ("every acceptance acknowledged by the slot's replica", b["told_201"])
PY
done
echo "three sales sold exactly $STOCK each, every answer 201"

"$bin/seckill/seckill" reconcile --wait 20s >"$work/reconcile.txt" 2>&1 || fail "reconcile: $(cat "$work/reconcile.txt")"
for c in "${camps[@]}"; do
    grep -q "campaign $c: consistent" "$work/reconcile.txt" || fail "reconcile of $c: $(cat "$work/reconcile.txt")"
    n=$(redis-cli -p "$(cl_master_of "{c:$c}:orders")" xlen "{c:$c}:orders")
    [ "$n" = "$STOCK" ] || fail "stream of $c holds $n entries on its master"
done
echo "reconcile clean: every order of the three campaigns persisted"

list=$("$bin/seckill/seckill" campaigns)
for c in "${camps[@]}"; do
    case "$list" in *"$c"*) ;; *) fail "seckill campaigns does not list $c: $list" ;; esac
done
metrics=$("$bin/seckill/seckill" metrics)
for c in "${camps[@]}"; do
    case "$metrics" in *"campaign=\"$c\""*) ;; *) fail "seckill metrics has nothing on $c" ;; esac
done
"$bin/seckill/seckill" barrier --campaign "${camps[1]}" --wait 10s >"$work/barrier.txt" 2>&1 ||
    fail "seckill barrier: $(cat "$work/barrier.txt")"
echo "admin: campaigns, metrics and barrier work"

# every master decided for its own campaign (the engine's per-node
# counters). An instance runs a loop per CPU and one of them decides the
# purchases: each scrape (a new connection, so any loop may answer) must
# report the process's nodes, the same set every time.
nodes_of() { curl -s -H "Authorization: Bearer $TOKEN" "$1/metrics" | sed -n 's/^seckill_redis_node_calls_total{node="\([^"]*\)"}.*/\1/p' | sort | tr '\n' ' '; }
for u in "${urls[@]}"; do
    first=$(nodes_of "$u")
    for i in 1 2 3 4 5 6 7; do
        again=$(nodes_of "$u")
        [ "$again" = "$first" ] || fail "$u/metrics: nodes differ between scrapes: '$first' then '$again'"
    done
done
m=$(curl -s -H "Authorization: Bearer $TOKEN" "${urls[0]}/metrics")$(curl -s -H "Authorization: Bearer $TOKEN" "${urls[1]}/metrics") # node addresses: admin scrapes only
for p in $CL_MASTERS; do
    line=$(printf '%s\n' "$m" | grep "^seckill_redis_node_calls_total{node=\"127.0.0.1:$p\"}" | head -1 || true)
    [ -n "$line" ] || fail "no calls counted for node 127.0.0.1:$p"
    echo "  $line"
done
echo "PASS"
