#!/bin/bash
# Fault 2: kill -9 a persister mid-batch, start a new one. Entries pending
# on the dead consumer are reclaimed; order_id as primary key makes any
# redelivery a no-op. Pass: every accepted order in the database exactly
# once, 0 oversold, reconciliation clean.
SCENARIO=kill-persister
. "$(dirname "$0")/sale_lib.sh"
dl_start_redis "$work" --appendonly yes --appendfsync always  # fsync before reply: 201 is a promise
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
start_services
start_sale
for victim in 0 1; do
    sleep 0.8
    say "kill -9 persister pid ${PERSIST_PIDS[$victim]}, starting a new one"
    kill -9 "${PERSIST_PIDS[$victim]}"
    start_persister
done
finish_sale
