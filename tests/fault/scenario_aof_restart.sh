#!/bin/bash
# Promise scenario 3: a standalone Redis with appendfsync always (so a
# reply means the decision is on disk and the engine may answer 201) is
# killed with -9 right after the sale sells out, while the persisters lag,
# and restarted 3 s later from its AOF. Degraded mode is on (seckilld has a
# database): the database path may sell only its reserve, never a unit
# Redis sold; the restarted server has a new run id, so no campaign sells
# on it before the barrier made it hold every order the database has.
SCENARIO=aof-restart
. "$(dirname "$0")/sale_lib.sh"
dl_start_redis "$work" --appendonly yes --appendfsync always
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
STOCK=${FAULT_STOCK:-300}
start_services
start_sale
for p in "${PERSIST_PIDS[@]}"; do kill -STOP "$p"; done
say "persisters paused"
wait_sold_out "$REDIS_PORT" 20 || { say "the sale did not sell out"; exit 1; }
say "sold out; kill -9 redis-server (pid $REDIS_PID); restart in 3 s from its AOF"
kill -9 "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
sleep 1
for p in "${PERSIST_PIDS[@]}"; do kill -CONT "$p"; done
sleep 2
restart_redis --appendonly yes --appendfsync always
ms=$(wait_healthy_ms "${SECKILLD_URLS[0]}" 30) || { say "service did not recover"; exit 1; }
RECOVER_MS=$ms
say "service healthy again ${ms} ms after the restart"
finish_sale --redis-url "$REDIS_URL"
