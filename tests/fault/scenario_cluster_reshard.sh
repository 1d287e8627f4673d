#!/bin/bash
# Cluster scenario (a): a live reshard mid-sale. 3 masters + 3 replicas,
# 3 seckilld instances and 2 persisters on a redis-cluster:// URL, a sale
# of stock 1 000 (replica acknowledgements on); once a third is sold the
# campaign's slot is moved by hand to another master (SETSLOT IMPORTING /
# MIGRATING, MIGRATE in batches, SETSLOT NODE: what `redis-cli --cluster
# reshard` does per slot), stream and consumer group with it. Buyers see
# at most retries (TRYAGAIN inside the router, 503 during the barrier on
# the new master); the sale sells exactly the stock, every 201 is
# persisted, reconcile is clean, 0 broken promises.
SCENARIO=cluster-reshard
. "$(dirname "$0")/sale_lib.sh"
. "$(dirname "$0")/scenario_cluster_lib.sh"
STOCK=${FAULT_STOCK:-1000}
BUYERS=${FAULT_BUYERS:-3000}
RATE=${FAULT_RATE:-400}
cl_sale_setup r
SECKILLD_EXTRA="--replica-acks 1 --replica-ack-timeout-ms 500"
start_services
start_sale
cl_wait_sold_at_least $((STOCK / 4)) 30 || { say "the sale did not start selling"; exit 1; }
to=$(echo "$CL_MASTERS" | cut -d' ' -f2)
say "$(( STOCK - $(cl_stock "$CAMPAIGN") )) sold; moving slot $CAMP_SLOT from $CAMP_MASTER to $to"
t0=$(date +%s%N)
cl_move_slot "$CAMP_SLOT" "$CAMP_MASTER" "$to" "${MOVE_BATCH:-200}" || { say "slot migration failed"; exit 1; }
say "slot $CAMP_SLOT moved in ${MOVE_MS} ms ($MOVE_KEYS keys); now on $(cl_master_of "{c:$CAMPAIGN}:meta")"
ms=$(cl_wait_selling_ms 30) || { say "the campaign did not sell again on $to"; exit 1; }
RECOVER_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
say "selling again on $to ${RECOVER_MS} ms after the migration started (${ms} ms after it ended)"
cl_wait_sold_out 60 || { say "the sale did not sell out after the reshard"; exit 1; }
[ "$(cl_master_of "{c:$CAMPAIGN}:meta")" = "$to" ] || { say "slot not on $to"; exit 1; }
finish_sale --redis-url "redis://127.0.0.1:$to"
