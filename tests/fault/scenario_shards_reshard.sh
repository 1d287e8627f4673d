#!/bin/bash
# Sharded scenario (d): a live reshard of one bucket mid-sale. K = 3
# buckets on the 3 masters of a 3+3 Cluster, stock 1 200, 3 000 buyers
# at 250 buyers/s through 3 seckilld, 2 persisters, replica acknowledgements on; once a
# quarter is sold, bucket 1's slot (its stock, buyers, journal, gate,
# stream and consumer group) is moved by hand to bucket 0's master
# (SETSLOT IMPORTING / MIGRATING, MIGRATE in batches, SETSLOT NODE). Its
# purchases and transfers meet ASK / TRYAGAIN / MOVED and the barrier on
# the new master; buyers see at most retries (no final 5xx, no connection
# error); exactly the stock is sold and persisted, every bucket ends
# empty with no journal entry, reconcile clean, 0 broken promises.
SCENARIO=shards-reshard
. "$(dirname "$0")/sale_lib.sh"
. "$(dirname "$0")/scenario_cluster_lib.sh"
. "$(dirname "$0")/scenario_shards_lib.sh"
STOCK=${FAULT_STOCK:-1200}
BUYERS=${FAULT_BUYERS:-3000}
RATE=${FAULT_RATE:-250}
cl_sale_setup h
SECKILLD_EXTRA="--replica-acks 1 --replica-ack-timeout-ms 500"
start_services
start_sale
sh_wait_accepted_at_least $((STOCK / 4)) 30 || { say "the sale did not start selling"; exit 1; }
st=$(sh_state)
tag1=$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["buckets"][1]["tag"])' "$st")
from=$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["buckets"][1]["master"])' "$st")
to=$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["buckets"][0]["master"])' "$st")
slot=$(cl_slot "{$tag1}:stock")
[ "$from" != "$to" ] || { say "buckets 0 and 1 already share master $to: $st"; exit 1; }
say "$(sh_field "$st" sold) sold; moving bucket 1 {$tag1} (slot $slot) from $from to $to"
t0=$(date +%s%N)
cl_move_slot "$slot" "$from" "$to" "${MOVE_BATCH:-200}" || { say "slot migration failed"; exit 1; }
say "slot $slot moved in ${MOVE_MS} ms ($MOVE_KEYS keys); bucket 1 now on $(cl_master_of "{$tag1}:stock")"
[ "$(cl_master_of "{$tag1}:stock")" = "$to" ] || { say "FAILED: bucket 1 not on $to"; exit 1; }
s0=$(sh_field "$(sh_state)" sold)
# the move must end mid-sale, or "selling again" below proves nothing
[ "$s0" -lt "$STOCK" ] || { say "FAILED: the stock sold out before the move ended (not a mid-sale move; lower FAULT_RATE)"; exit 1; }
sh_wait_sold_at_least $((s0 + 1)) 30 || { say "FAILED: nothing sold after the move"; exit 1; }
RECOVER_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
say "selling again ${RECOVER_MS} ms after the migration began"
finish_sale --redis-url "$REDIS_URL"
sh_report_transfers
"$PY" - "$work/bench.json" <<'PY' || exit 1
import json, sys
b = json.load(open(sys.argv[1]))
fivexx = sum(n for s, n in b["status"].items() if s.startswith("5"))
print("[shards-reshard] retried %d requests; final 5xx %d, connection errors %d"
      % (b["retried"], fivexx, b["connection_errors"]))
if fivexx or b["connection_errors"]:
    sys.exit("FAILED: buyers saw more than retries")
PY
sh_check_final
