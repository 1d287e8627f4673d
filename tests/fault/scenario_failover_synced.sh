#!/bin/bash
# Promise scenario 1: master + one fully synced replica + 3 sentinels; the
# persisters lag (SIGSTOPped as the sale starts), the sale sells out, and
# the master is killed with -9 right after. Sentinel promotes the replica.
# Every buyer answered 201 must keep the item: no database-path sale of a
# unit Redis already sold, no resale on the new master.
# The master runs as docs/ops recommends (min-replicas-to-write 1): with a
# healthy replica it changes nothing here; the replica, promoted with no
# replica of its own, has no such setting, or it could not sell at all.
SCENARIO=failover-synced
. "$(dirname "$0")/sale_lib.sh"
start_sentinel_redis --min-replicas-to-write 1 --min-replicas-max-lag 10
STOCK=${FAULT_STOCK:-300}
start_services
start_sale
say "SIGSTOP the persisters (the pipeline lags)"
for p in "${PERSIST_PIDS[@]}"; do kill -STOP "$p"; done
wait_sold_out "$REDIS_PORT" 20 || { say "the sale did not sell out"; exit 1; }
say "sold out; kill -9 master $REDIS_PORT"
kill -9 "$MASTER_PID"
sleep 1
for p in "${PERSIST_PIDS[@]}"; do kill -CONT "$p"; done
say "persisters resumed"
wait_promoted "$REPLICA_PORT"
ms=$(wait_healthy_ms "${SECKILLD_URLS[1]}" 30) || { say "service did not recover"; exit 1; }
RECOVER_MS=$ms
say "service healthy on the new master ${ms} ms later"
finish_sale --redis-url "redis://127.0.0.1:$REPLICA_PORT"
