#!/bin/bash
# Fault 4: the Redis master dies mid-sale and Sentinel promotes the replica;
# seckilld instances, persisters and the admin tool follow through their
# redis-sentinel:// URL. To make the worst case of a failover (the
# promoted replica lacks acknowledged writes) happen on demand,
# the replica is paused (SIGSTOP) and its replication link cut on the
# master (CLIENT KILL TYPE replica) 400 ms before the master is killed, so
# the promoted replica misses the decisions the master acknowledged in that
# window: those orders vanish from Redis and their stock is sold again. Pass: the database (the guard and the per-user
# check) stays at <= stock and <= limit per user; every order Redis still
# has is in the database; the orders Redis itself lost are counted and
# listed; extra sales are stored as `rejected` by the guard.
SCENARIO=failover
. "$(dirname "$0")/sale_lib.sh"
start_sentinel_redis
STOCK=${FAULT_STOCK:-1500}
start_services
start_sale
sleep 1.0
say "SIGSTOP replica $REPLICA_PORT, cut its link, 400 ms later kill -9 master $REDIS_PORT"
kill -STOP "$REPLICA_PID"
redis-cli -p "$REDIS_PORT" client kill type replica >/dev/null
sleep 0.4
kill -9 "$MASTER_PID"
kill -CONT "$REPLICA_PID"
first=${SENTINEL_PORTS# }
first=${first%% *}
t0=$(date +%s%N)
for _ in $(seq 1 300); do
    [ "$(dl_sentinel_master "$first" mymaster)" = "127.0.0.1:$REPLICA_PORT" ] && break
    sleep 0.1
done
say "sentinels promoted 127.0.0.1:$REPLICA_PORT after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
ms=$(wait_healthy_ms "${SECKILLD_URLS[1]}" 30) || { say "service did not recover"; exit 1; }
RECOVER_MS=$ms
say "service healthy on the new master ${ms} ms later"
finish_sale --redis-url "redis://127.0.0.1:$REPLICA_PORT"
