#!/bin/bash
# Sharded scenario (a): one campaign over K = 3 buckets, one per master of
# a 3-master + 3-replica Cluster; stock 300, 3 000 distinct buyers (plus
# scalpers and malformed requests) through 3 seckilld instances, 2
# persisters, replica acknowledgements on. Bucket 0 is hot: 95 % of the
# buyers are homed there (seckill-bench --hot 3:95), so buckets 1 and 2
# have about 50 buyers each for their 100 units and about 200 units must
# be moved into bucket 0 while its buyers wait. A unit left in bucket 1 or
# 2 while bucket 0's buyers are told sold_out stays unsold and fails the
# run. Exactly 300 units are told 201 and persisted, every bucket ends at
# 0 with no journal entry, reconcile (buckets + in transit) is clean, 0
# broken promises, oversold, lost or duplicates.
SCENARIO=shards
. "$(dirname "$0")/sale_lib.sh"
. "$(dirname "$0")/scenario_cluster_lib.sh"
. "$(dirname "$0")/scenario_shards_lib.sh"
STOCK=${FAULT_STOCK:-300}
BUYERS=${FAULT_BUYERS:-3000}
RATE=${FAULT_RATE:-600}
BENCH_EXTRA="--hot 3:${FAULT_HOT_PCT:-95}"
cl_sale_setup s
SECKILLD_EXTRA="--replica-acks 1 --replica-ack-timeout-ms 500"
start_services
start_sale
say "buckets: $(sh_state)"
finish_sale --redis-url "$REDIS_URL"
sh_report_transfers
told=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["told_201"])' "$work/bench.json")
told_ok=1
[ "$told" = "$STOCK" ] || { say "FAILED: told 201 $told orders, stock $STOCK"; told_ok=0; }
sh_check_final
[ $told_ok = 1 ]
