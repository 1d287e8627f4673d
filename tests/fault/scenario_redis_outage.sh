#!/bin/bash
# Promise scenario 4: a standalone Redis (appendfsync always) stops
# answering for 10 s mid-sale (SIGSTOP, then SIGCONT: same server, same run
# id). The instances switch to the database path, which sells only the
# campaign's reserve and answers 202 (the per-user limit is final only once
# the orders Redis decided before the outage are persisted); then they
# switch back. Every 201 kept, every 202 confirmed or lost, nothing sold
# twice.
SCENARIO=redis-outage
. "$(dirname "$0")/sale_lib.sh"
dl_start_redis "$work" --appendonly yes --appendfsync always
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
BUYERS=${FAULT_BUYERS:-14000}
# keyless buyers exercise the database path (it refuses keyed purchases);
# keyed ones retry through the outage
BENCH_EXTRA="--keyless 30"
DB_RESERVE=150
FAULT_RETRIES=60
start_services
start_sale
sleep 1.0
say "SIGSTOP redis-server (pid $REDIS_PID) for 10 s"
kill -STOP "$REDIS_PID"
sleep 10
kill -CONT "$REDIS_PID"
ms=$(wait_healthy_ms "${SECKILLD_URLS[0]}" 30) || { say "service did not recover"; exit 1; }
RECOVER_MS=$ms
say "Redis back; instances decide on Redis again after ${ms} ms"
finish_sale --redis-url "$REDIS_URL"
