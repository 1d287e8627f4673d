#!/bin/bash
# Fault 1: one of three seckilld instances hangs (SIGSTOP, so requests pile
# up in flight on it) and is then killed with -9 mid-sale. Buyers whose
# connection dies retry on another instance with the same Idempotency-Key.
# Pass: 0 oversold, 0 duplicates, 0 lost orders, reconciliation clean.
SCENARIO=kill-seckilld
. "$(dirname "$0")/sale_lib.sh"
dl_start_redis "$work" --appendonly yes --appendfsync always  # fsync before reply: 201 is a promise
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
start_services
start_sale
sleep 1.2
say "SIGSTOP seckilld ${SECKILLD_URLS[0]} (pid ${SECKILLD_PIDS[0]}), kill -9 300 ms later"
kill -STOP "${SECKILLD_PIDS[0]}"
sleep 0.3
kill -9 "${SECKILLD_PIDS[0]}"
finish_sale
