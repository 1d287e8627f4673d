#!/bin/bash
# Sharded scenario (a): one campaign over K = 3 buckets, one per master of
# a 3-master + 3-replica Cluster; stock 300, 3 000 distinct buyers (plus
# scalpers and malformed requests) through 3 seckilld instances, 2
# persisters, replica acknowledgements on. Demand is ten times the stock
# and keeps arriving in every bucket to the end, so a unit stranded in one
# bucket while another bucket's buyers are told sold_out stays unsold and
# fails the run. Exactly 300 units are told 201 and persisted, every
# bucket ends at 0 with no journal entry, reconcile (buckets + in transit)
# is clean, 0 broken promises, oversold, lost or duplicates.
SCENARIO=shards
. "$(dirname "$0")/sale_lib.sh"
. "$(dirname "$0")/scenario_cluster_lib.sh"
. "$(dirname "$0")/scenario_shards_lib.sh"
STOCK=${FAULT_STOCK:-300}
BUYERS=${FAULT_BUYERS:-3000}
RATE=${FAULT_RATE:-600}
cl_sale_setup s
SECKILLD_EXTRA="--replica-acks 1 --replica-ack-timeout-ms 500"
start_services
start_sale
st=$(sh_state)
say "buckets: $st"
sh_wait_sold_out 60 || { say "the sale did not sell out: $(sh_state)"; exit 1; }
finish_sale --redis-url "$REDIS_URL"
sh_report_transfers
told=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["told_201"])' "$work/bench.json")
[ "$told" = "$STOCK" ] || { say "FAILED: told 201 $told orders, stock $STOCK"; exit 1; }
sh_check_final
