#!/bin/bash
# Fault 5: Redis with appendonly yes (fsync everysec) is killed with -9
# mid-sale and restarted on the same port and directory. Up to a second of
# acknowledged writes may be lost by Redis; the service answers 503 while
# it is down and recovers; the database guard keeps the system of record
# at <= stock and <= limit per user, and the checker lists what Redis lost.
SCENARIO=redis-restart
. "$(dirname "$0")/sale_lib.sh"
dl_start_redis "$work" --appendonly yes --appendfsync everysec
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
start_services
start_sale
sleep 1.2
say "kill -9 redis-server (pid $REDIS_PID), restart from its AOF"
kill -9 "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
sleep 0.5
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$work" --save '' --appendonly yes \
    --appendfsync everysec --protected-mode no >>"$work/redis-restart.log" 2>&1 &
REDIS_PID=$!
dl_track "$REDIS_PID"
ms=$(wait_healthy_ms "${SECKILLD_URLS[0]}" 30) || { say "service did not recover"; exit 1; }
RECOVER_MS=$ms
say "service healthy again ${ms} ms after the restart"
finish_sale --redis-url "$REDIS_URL"
