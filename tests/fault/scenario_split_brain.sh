#!/bin/bash
# Promise scenario 5, split brain: the Redis master and one seckilld
# instance (A) share a network namespace; the replica, the 3 sentinels, the
# two other instances and the 2 persisters are on the host, reaching the
# master over one veth pair; buyers reach A over a second veth pair. Mid-sale
# the master's veth is cut: the master and A are on their own, A still
# reaches the master (inside the namespace) but not the sentinels, so it
# keeps deciding there. The sentinels promote the replica, the host
# instances follow, and after the heal Sentinel turns the old master into a
# replica of the new one: everything it decided while cut off is gone.
# A promise made there would be broken, so none may be: WAIT 1 fails (the
# replica is gone) and A answers 202, and once the replica has been silent
# for min-replicas-max-lag seconds the old master refuses writes
# (min-replicas-to-write 1: NOREPLICAS, A answers 503). Pass: A answers no
# 201 between the cut and the heal, and sale_check.py finds 0 broken
# promises, 0 oversold, 0 lost.
# SPLIT_BRAIN_UNSAFE=1 runs the same partition misconfigured: the old master
# on appendfsync always with min-replicas-to-write 0 and A on
# --replica-acks 0 (so "fsynced" counts as safe): A then promises on the
# isolated master and the checker must count the broken promises (the run
# fails). Needs root and `ip netns`; where namespaces cannot be made the
# scenario says so and is skipped (dl_skip).
SCENARIO=split_brain
. "$(dirname "$0")/sale_lib.sh"
# the sale stops from the cut until the old master rejoins (20-30 s, see
# below): buyers retry long enough (backoff up to 2 s) to outlast it, so
# the sale still sells its stock (the checker's liveness floor)
FAULT_RETRIES=${FAULT_RETRIES:-40}
UNSAFE=${SPLIT_BRAIN_UNSAFE:-0}
MAX_LAG=${SPLIT_BRAIN_MAX_LAG:-2} # s; the cut lasts well beyond it
CUT_MIN_S=${SPLIT_BRAIN_CUT_S:-6}
# The namespace: the master's link to the host (A, cut) and the buyers' link to instance A (B, kept).
dl_netns_two_links ds 215 216

# wait_redis HOST PORT [netns]: until it answers PING.
wait_redis() {
    local pre=()
    [ -n "${3:-}" ] && pre=(ip netns exec "$3")
    for _ in $(seq 1 100); do
        [ "$("${pre[@]}" redis-cli -h "$1" -p "$2" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    say "redis $1:$2 did not start"
    exit 1
}

# The master, in the namespace: its replicas must acknowledge (WAIT), and
# it refuses writes once no replica acked for MAX_LAG s.
REDIS_PORT=$(dl_free_port)
min_replicas=(--min-replicas-to-write 1 --min-replicas-max-lag "$MAX_LAG")
durability=()
if [ "$UNSAFE" = 1 ]; then
    min_replicas=(--min-replicas-to-write 0)
    durability=(--appendonly yes --appendfsync always)
fi
ip netns exec "$ns" redis-server --port "$REDIS_PORT" --bind "$ns_ip" 127.0.0.1 --dir "$work" --save '' \
    --protected-mode no "${min_replicas[@]}" "${durability[@]}" >"$work/redis-master.log" 2>&1 &
MASTER_PID=$!
dl_track "$MASTER_PID"
wait_redis "$ns_ip" "$REDIS_PORT"
# The replica, on the host: the master sees it (and Sentinel finds it) at
# host_ip, which both sides can reach once the link is back. The same
# min-replicas settings (roles swap at a failover), so once promoted it too
# refuses writes until it has a replica again: with one replica the sale
# stops until the heal (the price of min-replicas-to-write, docs/ops).
REPLICA_PORT=$(dl_free_port)
redis-server --port "$REPLICA_PORT" --bind 127.0.0.1 "$host_ip" --dir "$work" --save '' --appendonly no \
    --protected-mode no --replicaof "$ns_ip" "$REDIS_PORT" "${min_replicas[@]}" >"$work/replica.log" 2>&1 &
REPLICA_PID=$!
dl_track "$REPLICA_PID"
for _ in $(seq 1 200); do
    info=$(redis-cli -p "$REPLICA_PORT" info replication 2>/dev/null || true)
    case $info in *master_link_status:up*) break ;; esac
    sleep 0.05
done
case $info in *master_link_status:up*) ;; *) say "replica never linked"; exit 1 ;; esac
# Three sentinels on the host, reachable from A (host_ip) until the cut.
SENTINEL_PORTS=""
for i in 1 2 3; do
    p=$(dl_free_port)
    printf 'port %s\nbind 127.0.0.1 %s\ndir %s\nprotected-mode no\nsentinel monitor mymaster %s %s 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n' \
        "$p" "$host_ip" "$work" "$ns_ip" "$REDIS_PORT" >"$work/sentinel-$p.conf"
    redis-sentinel "$work/sentinel-$p.conf" >"$work/sentinel-$p.log" 2>&1 &
    dl_track $!
    SENTINEL_PORTS="$SENTINEL_PORTS $p"
done
for p in $SENTINEL_PORTS; do wait_redis 127.0.0.1 "$p"; done
hosts=$(for p in $SENTINEL_PORTS; do printf '127.0.0.1:%s,' "$p"; done)
REDIS_URL="redis-sentinel://${hosts%,}/mymaster"
DATABASE_URL="sqlite://$work/orders.db"
SECKILLD_COUNT=2 start_services # B, C + 2 persisters

# A: in the namespace, the sentinels by their host_ip address
a_hosts=$(for p in $SENTINEL_PORTS; do printf '%s:%s,' "$host_ip" "$p"; done)
a_acks=()
[ "$UNSAFE" = 1 ] && a_acks=(--replica-acks 0)
a_port=$(dl_free_port)
ip netns exec "$ns" "$bin/seckilld/seckilld" --port "$a_port" --bind "$ns_cip" --admin-token "$TOKEN" \
    --redis-url "redis-sentinel://${a_hosts%,}/mymaster" "${a_acks[@]}" >"$work/seckilld-A.log" 2>&1 &
dl_track $!
A_URL="http://$ns_cip:$a_port"
dl_wait_http "$A_URL/healthz" 150 || { say "instance A not healthy"; cat "$work/seckilld-A.log"; exit 1; }
SECKILLD_URLS=("$A_URL" "${SECKILLD_URLS[@]}")

# role of the old master (master / slave), "?" when it does not answer
old_role() {
    local r
    r=$(ip netns exec "$ns" redis-cli -p "$REDIS_PORT" role 2>/dev/null) || r="?"
    echo "${r%%$'\n'*}"
}

# purchase answers of A by status, from its /metrics: "201 202 503 C",
# C the replays told 201 on the database's confirmation alone (an order
# the database held before the cut: a kept promise, not a new decision)
a_answers() {
    curl -s "$A_URL/metrics" | awk '/^seckill_http_requests_total\{route="purchase"/ {
        for (s = 201; s <= 503; s++) if (index($0, "status=\"" s "\"")) n[s] += $2 }
        $1 == "seckill_answers_confirmed_total" { c = $2 }
        END { printf "%d %d %d %d\n", n[201], n[202], n[503], c }'
}

start_sale
sleep 0.8
say "cutting the master (and A, in its namespace) off from the sentinels, the replica and the host instances"
ip link set "$hv" down
t_cut=$(date +%s%N)
sleep 0.3 # every batch decided before the cut has had its WAIT answered
read -r a201_0 a202_0 a503_0 ac_0 < <(a_answers)
first=${SENTINEL_PORTS# }
first=${first%% *}
promoted=0
for _ in $(seq 1 300); do
    [ "$(dl_sentinel_master "$first" mymaster)" = "$host_ip:$REPLICA_PORT" ] && { promoted=1; break; }
    sleep 0.1
done
[ "$promoted" = 1 ] || { say "the sentinels did not promote the replica"; exit 1; }
say "sentinels promoted $host_ip:$REPLICA_PORT $(( ($(date +%s%N) - t_cut) / 1000000 )) ms after the cut"
while [ $(( ($(date +%s%N) - t_cut) / 1000000000 )) -lt "$CUT_MIN_S" ]; do sleep 0.1; done
read -r a201_1 a202_1 a503_1 _ < <(a_answers)
say "healing the link after $(( ($(date +%s%N) - t_cut) / 1000000 )) ms; while cut off A answered" \
    "201: $((a201_1 - a201_0)), 202: $((a202_1 - a202_0)), 503: $((a503_1 - a503_0)) (old master's role: $(old_role))"
ip link set "$hv" up
t_heal=$(date +%s%N)
# Until Sentinel turns it into a replica (and kills its clients), A stays
# on the old master, which still has no replica: still no 201 allowed.
for _ in $(seq 1 400); do
    role=$(old_role)
    [ "$role" = slave ] && break
    sleep 0.1
done
read -r a201_2 a202_2 a503_2 ac_2 < <(a_answers)
say "old master's role after the heal: $role ($(( ($(date +%s%N) - t_heal) / 1000000 )) ms); from the cut" \
    "until then A answered 201: $((a201_2 - a201_0)), 202: $((a202_2 - a202_0)), 503: $((a503_2 - a503_0))"
for u in "${SECKILLD_URLS[@]}"; do
    wait_healthy_ms "$u" 30 >/dev/null || { say "instance $u did not recover"; exit 1; }
done
RECOVER_MS=$(( ($(date +%s%N) - t_heal) / 1000000 ))
say "every instance healthy on the new master ${RECOVER_MS} ms after the heal"
rc=0
finish_sale --redis-url "redis://$host_ip:$REPLICA_PORT" || rc=$?
if [ "$role" != slave ]; then
    say "FAILED: the old master was not turned into a replica"
    rc=1
fi
a201_new=$(( (a201_2 - a201_0) - (ac_2 - ac_0) ))
if [ "$UNSAFE" != 1 ] && [ "$a201_new" -ne 0 ]; then
    say "FAILED: the instance on the cut-off master answered $a201_new purchase(s) 201 (besides $((ac_2 - ac_0)) replays confirmed by the database)"
    rc=1
fi
exit $rc
