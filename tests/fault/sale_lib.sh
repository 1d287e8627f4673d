# sale_lib.sh: a live flash sale for the fault scenarios. Starts Redis
# (standalone, or master + replica + 3 sentinels), 3 seckilld instances and
# 2 persisters on free loopback ports, runs seckill-bench in the background
# (open loop, retries with the same Idempotency-Key), lets the scenario
# inject its fault, then drains the pipeline and runs scripts/sale_check.py.
# Everything is stopped by PID (scripts/lib.sh). Source after setting
# SCENARIO; DLOCK_SOURCE_DIR and DLOCK_BUILD_DIR come from CTest or make.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
bin="$build/tools"
work=$(mktemp -d /tmp/dlock-fault-XXXXXX)
trap 'dl_cleanup; [ -n "${DLOCK_TEST_KEEP:-}" ] || rm -rf "$work"' EXIT
BUYERS=${FAULT_BUYERS:-4000}
RATE=${FAULT_RATE:-1000}
STOCK=${FAULT_STOCK:-1500}
TOKEN=fault-admin
CAMPAIGN="f$(date +%s%N | tail -c 9)"
SECKILLD_PIDS=()
SECKILLD_URLS=()
PERSIST_PIDS=()

say() { echo "[$SCENARIO $(date +%T.%3N)] $*"; }

start_services() { # uses REDIS_URL, DATABASE_URL, SECKILLD_EXTRA (more seckilld flags), SECKILLD_COUNT (3)
    export REDIS_URL DATABASE_URL
    for i in $(seq 1 "${SECKILLD_COUNT:-3}"); do
        port=$(dl_free_port)
        # shellcheck disable=SC2086 # SECKILLD_EXTRA is a list of flags
        "$bin/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" ${SECKILLD_EXTRA:-} \
            >"$work/seckilld-$i.log" 2>&1 &
        dl_track $!
        SECKILLD_PIDS+=($!)
        SECKILLD_URLS+=("http://127.0.0.1:$port")
    done
    for i in 1 2; do start_persister; done
    for u in "${SECKILLD_URLS[@]}"; do
        dl_wait_http "$u/healthz" 150 || { say "seckilld $u not healthy"; cat "$work"/seckilld-*.log; exit 1; }
    done
}

start_persister() {
    "$bin/seckill-persist/seckill-persist" --claim-idle 2s --block 200ms \
        >>"$work/persist-${#PERSIST_PIDS[@]}.log" 2>&1 &
    # (a replacement persister discovers campaigns within its 2 s scan)
    dl_track $!
    PERSIST_PIDS+=($!)
}

# Creates the campaign (SHARDS buckets, default 1) and waits until every
# persister consumes its stream(s), so a fault hits a pipeline that is
# really moving orders.
create_campaign() {
    "$bin/seckill-bench/seckill-bench" --url "${SECKILLD_URLS[0]}" --campaign "$CAMPAIGN" --create \
        --admin-token "$TOKEN" --stock "$STOCK" --limit 1 --db-reserve "${DB_RESERVE:-0}" \
        --shards "${SHARDS:-1}" --buyers 0 --scalpers 0 --bad 0 >/dev/null
    for _ in $(seq 1 100); do
        n=$( (grep -l -e "consuming {c:$CAMPAIGN}" -e "campaign $CAMPAIGN: consuming the streams" \
            "$work"/persist-*.log 2>/dev/null || true) | wc -l)
        [ "$n" -ge "${#PERSIST_PIDS[@]}" ] && return 0
        sleep 0.1
    done
    say "persisters did not pick up campaign $CAMPAIGN"
    exit 1
}

start_sale() { # background; sets BENCH_PID
    create_campaign
    args=()
    for u in "${SECKILLD_URLS[@]}"; do args+=(--url "$u"); done
    "$bin/seckill-bench/seckill-bench" "${args[@]}" --campaign "$CAMPAIGN" \
        --stock "$STOCK" --limit 1 --buyers "$BUYERS" --scalpers 5 \
        --scalper-burst 40 --bad 40 --connections 64 --rate "$RATE" --retries "${FAULT_RETRIES:-20}" ${BENCH_EXTRA:-} \
        --json-out "$work/bench.json" --orders-out "$work/orders.txt" >"$work/bench.out" 2>&1 &
    BENCH_PID=$!
    dl_track "$BENCH_PID"
    say "sale started: $BUYERS buyers at $RATE req/s, stock $STOCK"
}

# finish_sale [sale_check args...]: waits for the load, drains, checks.
# The checker always gets the scenario's REDIS_URL (redis://, or the
# Sentinels or the Cluster, which name the current master) for its
# lost-orders check; a scenario may name the current master itself
# (a later --redis-url wins).
finish_sale() {
    set +e
    wait "$BENCH_PID"
    bench_rc=$?
    set -e
    cat "$work/bench.out"
    [ "$bench_rc" -le 1 ] || { say "load generator failed ($bench_rc)"; exit 1; }
    local t0 rec_rc=1
    t0=$(date +%s%N)
    # Done when reconciliation is clean, or (when Redis lost writes and it
    # cannot be) when the stream is drained: nothing pending, no lag.
    for _ in $(seq 1 300); do
        if "$bin/seckill/seckill" reconcile --campaign "$CAMPAIGN" --json >"$work/reconcile.json" 2>/dev/null; then
            rec_rc=0
            break
        fi
        "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]["redis"]
sys.exit(0 if r["pending"] == 0 and r["lag"] == 0 else 1)' "$work/reconcile.json" 2>/dev/null && break
        sleep 0.1
    done
    DRAIN_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
    "$bin/seckill/seckill" reconcile --campaign "$CAMPAIGN" || true
    say "pipeline drained/reconciled after ${DRAIN_MS} ms (reconcile exit $rec_rc)"
    "$PY" "$src/scripts/sale_check.py" --bench "$work/bench.json" --orders "$work/orders.txt" \
        --reconcile "$work/reconcile.json" --reconcile-rc "$rec_rc" --database-url "$DATABASE_URL" \
        --campaign "$CAMPAIGN" --stock "$STOCK" --scenario "$SCENARIO" \
        --redis-url "$REDIS_URL" --recover-ms "${RECOVER_MS:-0}" ${FAULT_RESULTS:+--summary-json "$FAULT_RESULTS"} "$@"
}

# wait_healthy_ms URL budget_s: prints the ms it took until /healthz said
# "status":"ok", i.e. the instance decides on Redis again (a degraded
# instance answers 200 too, but with "status":"degraded").
wait_healthy_ms() {
    local t0 end=$(( $(date +%s) + $2 ))
    t0=$(date +%s%N)
    until curl -s "$1/healthz" | grep -q '"status":"ok"'; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
    echo $(( ($(date +%s%N) - t0) / 1000000 ))
}

# wait_sold_out PORT budget_s: until the campaign's Redis stock is 0.
wait_sold_out() {
    local end=$(( $(date +%s) + $2 ))
    until [ "$(redis-cli -p "$1" get "{c:$CAMPAIGN}:stock" 2>/dev/null)" = 0 ]; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.05
    done
}

# wait_promoted PORT: until the first sentinel names 127.0.0.1:PORT master.
wait_promoted() {
    local first t0
    first=${SENTINEL_PORTS# }
    first=${first%% *}
    t0=$(date +%s%N)
    for _ in $(seq 1 300); do
        [ "$(dl_sentinel_master "$first" mymaster)" = "127.0.0.1:$1" ] && break
        sleep 0.1
    done
    say "sentinels promoted 127.0.0.1:$1 after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}

# restart_redis [redis-server args...]: starts redis-server again on
# REDIS_PORT in $work (its AOF, if any); sets REDIS_PID.
restart_redis() {
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$work" --save '' \
        --protected-mode no "$@" >>"$work/redis-restart.log" 2>&1 &
    REDIS_PID=$!
    dl_track "$REDIS_PID"
}

# start_sentinel_redis [master args...]: a master (with those
# redis-server arguments, e.g. min-replicas-to-write), one replica and three
# Sentinels (name mymaster); sets MASTER_PID, REDIS_PORT, REPLICA_PORT/PID,
# SENTINEL_PORTS, REDIS_URL (the sentinel URL) and DATABASE_URL (a SQLite
# file in $work).
start_sentinel_redis() {
    dl_start_redis "$work" "$@"
    MASTER_PID=$REDIS_PID
    dl_start_replica "$work" "$REDIS_PORT"
    dl_start_sentinels "$work" "$REDIS_PORT" mymaster
    local hosts
    hosts=$(for p in $SENTINEL_PORTS; do printf '127.0.0.1:%s,' "$p"; done)
    REDIS_URL="redis-sentinel://${hosts%,}/mymaster"
    DATABASE_URL="sqlite://$work/orders.db"
}

# dl_netns_two_links TAG NET_A NET_B: a network namespace "$TAG$$" with two
# veth pairs to the host: link A (host $host_ip, namespace $ns_ip, on
# 10.NET_A.x.0/30; host end $hv) and link B ($host_cip / $ns_cip on
# 10.NET_B.x.0/30; host end $hc). Sets ns hv nv hc nc and the four
# addresses, and extends the EXIT trap to remove them. Where the
# environment cannot make them (no root, no CAP_NET_ADMIN, no veth) it says
# so and skips (dl_skip): the scenario is skipped, never faked.
dl_netns_two_links() {
    local tag=$1 net=$((RANDOM % 250))
    ns="${tag}ns$$" hv="${tag}h$$" nv="${tag}n$$" hc="${tag}c$$" nc="${tag}k$$"
    host_ip="10.$2.$net.1" ns_ip="10.$2.$net.2"
    host_cip="10.$3.$net.1" ns_cip="10.$3.$net.2"
    trap 'dl_cleanup; ip netns del "$ns" 2>/dev/null || true; ip link del "$hv" 2>/dev/null || true; ip link del "$hc" 2>/dev/null || true; [ -n "${DLOCK_TEST_KEEP:-}" ] || rm -rf "$work"' EXIT
    if ! dl_netns_make 2>"$work/netns.err"; then
        dl_skip "this environment cannot create network namespaces with veth pairs: $(head -n 1 "$work/netns.err")"
    fi
}

dl_netns_make() {
    ip netns add "$ns" &&
    ip link add "$hv" type veth peer name "$nv" &&
    ip link set "$nv" netns "$ns" &&
    ip addr add "$host_ip/30" dev "$hv" &&
    ip link set "$hv" up &&
    ip netns exec "$ns" ip addr add "$ns_ip/30" dev "$nv" &&
    ip netns exec "$ns" ip link set "$nv" up &&
    ip link add "$hc" type veth peer name "$nc" &&
    ip link set "$nc" netns "$ns" &&
    ip addr add "$host_cip/30" dev "$hc" &&
    ip link set "$hc" up &&
    ip netns exec "$ns" ip addr add "$ns_cip/30" dev "$nc" &&
    ip netns exec "$ns" ip link set "$nc" up &&
    ip netns exec "$ns" ip link set lo up
}
