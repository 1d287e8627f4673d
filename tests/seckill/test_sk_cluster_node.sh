#!/bin/bash
# test_sk_cluster_node.sh: seckilld, seckill-persist and the admin tool on
# a one-node Redis Cluster (cluster-enabled, all 16384 slots, one cluster
# replica) through a plain redis:// URL. The node enforces the Cluster's
# rules (CROSSSLOT, script keys in KEYS), so this is where a script or a
# command mixing slots fails: the worker lease with its fence, the
# persister's reads of several campaign streams, dead letters. Also: the
# scripts compare their own node's run id (the engine passes none on a
# Cluster), the barrier uses the campaign node's run id, and WAIT follows
# the script's reply (every answer 201 with the cluster replica).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
bin="$build/tools"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-sk-cnode-XXXXXX")
trap 'dl_cleanup; [ -n "${DLOCK_TEST_KEEP:-}" ] || rm -rf "$work"' EXIT
. "$src/tests/fault/scenario_cluster_lib.sh"
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "== $f" >&2; tail -n 15 "$f" >&2; done; exit 1; }
TOKEN=node-admin
STOCK=30

P=$(cl_free_port)
R=$(cl_free_port)
cl_start_node "$P"
cl_start_node "$R"
CL_PORTS="$P $R"
for p in $P $R; do
    for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
redis-cli -p "$P" cluster addslotsrange 0 16383 >/dev/null
redis-cli -p "$R" cluster meet 127.0.0.1 "$P" >/dev/null
cl_wait_ok 20 || fail "one-node cluster not ok"
for _ in $(seq 1 100); do
    redis-cli -p "$R" cluster replicate "$(cl_node_id "$P")" >/dev/null 2>&1 && break
    sleep 0.1
done
for _ in $(seq 1 200); do # the replica synced (WAIT 1 can be answered)
    case "$(redis-cli -p "$R" info replication)" in *master_link_status:up*) break ;; esac
    sleep 0.05
done
export REDIS_URL="redis://127.0.0.1:$P" DATABASE_URL="sqlite://$work/orders.db"

port=$(dl_free_port)
url="http://127.0.0.1:$port"
"$bin/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" --replica-acks 1 \
    --replica-ack-timeout-ms 500 >"$work/seckilld.log" 2>&1 &
dl_track $!
dl_wait_http "$url/healthz" 100 || fail "seckilld not healthy (worker lease on a Cluster node?)"
"$bin/seckill-persist/seckill-persist" --block 200ms >"$work/persist.log" 2>&1 &
dl_track $!

camps=(n1 n2 n3)
for c in "${camps[@]}"; do
    "$bin/seckill-bench/seckill-bench" --url "$url" --campaign "$c" --create --admin-token "$TOKEN" \
        --stock "$STOCK" --limit 1 --buyers 90 --scalpers 2 --scalper-burst 10 --bad 5 --retries 5 \
        --json-out "$work/bench-$c.json" >"$work/bench-$c.log" 2>&1 || fail "sale of $c: $(tail -3 "$work/bench-$c.log")"
    "$PY" -c 'import json, sys; b = json.load(open(sys.argv[1]))
assert b["accepted_qty"] == int(sys.argv[2]) == b["told_201"], b' "$work/bench-$c.json" "$STOCK" ||
        fail "$c: not exactly $STOCK sold, all 201"
done
echo "three campaigns (three slots) sold exactly $STOCK each, every answer 201 (WAIT after the reply)"
"$bin/seckill/seckill" reconcile --wait 20s >"$work/reconcile.txt" 2>&1 || fail "reconcile: $(cat "$work/reconcile.txt")"
[ "$(grep -c ': consistent' "$work/reconcile.txt")" = 3 ] || fail "reconcile: $(cat "$work/reconcile.txt")"
echo "the persister read the three streams (three slots) one command each: reconcile clean"

# a poisoned entry is dead-lettered (one script, one slot)
redis-cli -p "$P" xadd "{c:n1}:orders" '*' order_id nope campaign n1 >/dev/null
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$P" xlen "{c:n1}:orders:dead")" = 1 ] && break
    sleep 0.05
done
[ "$(redis-cli -p "$P" xlen "{c:n1}:orders:dead")" = 1 ] || fail "malformed entry not dead-lettered"
echo "malformed entry dead-lettered"

# a change of master as the scripts see it: the barrier opens on this node's run id
"$bin/seckill-bench/seckill-bench" --url "$url" --campaign n4 --create --admin-token "$TOKEN" --stock 5 --limit 1 \
    --buyers 0 --scalpers 0 --bad 0 >/dev/null || fail "create n4"
rid=$(redis-cli -p "$P" info server | tr -d '\r' | sed -n 's/^run_id://p')
[ "$(redis-cli -p "$P" hget "{c:n4}:meta" runid)" = "$rid" ] || fail "heat did not write the node's run id"
redis-cli -p "$P" hset "{c:n4}:meta" runid 0000000000000000000000000000000000000000 >/dev/null
buy() {
    curl -s -o /dev/null -w '%{http_code}' -X POST -H "X-User-Id: $1" -H "Idempotency-Key: $1" \
        "$url/v1/campaigns/n4/purchase" -d '{"quantity":1}'
}
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$P" hget "{c:n4}:meta" runid)" = "$rid" ] && break
    sleep 0.05
done
[ "$(redis-cli -p "$P" hget "{c:n4}:meta" runid)" = "$rid" ] || fail "barrier did not open on the node's run id"
code=$(buy late-buyer)
[ "$code" = 201 ] || fail "purchase after the barrier answered $code"
echo "barrier opened on the campaign node's run id; the campaign sells again (201)"
m=$(curl -s -H "Authorization: Bearer $TOKEN" "$url/metrics") # node addresses: admin scrapes only
case "$m" in *"seckill_redis_node_calls_total{node=\"127.0.0.1:$P\"}"*) ;; *) fail "no per-node calls" ;; esac
echo "PASS"
