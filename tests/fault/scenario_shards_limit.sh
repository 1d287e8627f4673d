#!/bin/bash
# Sharded scenario (b): the per-user limit stays exact over K = 3 buckets.
# 1 000 users fire 8 purchases each (8 Idempotency-Keys), the 8 sent back
# to back (seckill-bench --scalper-together) so they are in flight at the
# same time on different connections of 3 seckilld instances; limit 1,
# stock 600 (so both limit_reached and sold_out are answered). Every user
# is decided in one home bucket, so no user is told 201 twice nor holds
# two units in the database; exactly 600 sold, every bucket empty,
# reconcile clean (it also reports a buyer held outside its home bucket).
SCENARIO=shards-limit
. "$(dirname "$0")/sale_lib.sh"
. "$(dirname "$0")/scenario_cluster_lib.sh"
. "$(dirname "$0")/scenario_shards_lib.sh"
STOCK=${FAULT_STOCK:-600}
USERS=${FAULT_USERS:-1000}
TRIES=${FAULT_TRIES:-8}
BUYERS=0
RATE=${FAULT_RATE:-1500}
BENCH_EXTRA="--scalpers $USERS --scalper-burst $TRIES --scalper-together"
cl_sale_setup l
SECKILLD_EXTRA="--replica-acks 1 --replica-ack-timeout-ms 500"
start_services
start_sale
finish_sale --redis-url "$REDIS_URL" --limit 1
sh_report_transfers
"$PY" - "$work/bench.json" "$work/orders.txt" "$STOCK" "$USERS" "$TRIES" <<'PY' || exit 1
import json, sys
b = json.load(open(sys.argv[1]))
users = {}
for line in open(sys.argv[2]):
    f = line.split()
    if f and f[3] == "201":
        users[f[1]] = users.get(f[1], 0) + 1
stock, n, tries = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
over = sum(1 for v in users.values() if v > 1)
lim = b["errors"].get("limit_reached", 0)
print("[shards-limit] %d requests from %d users x %d; %d users told 201 (%d twice or more), limit_reached %d, "
      "sold_out %d" % (b["requests"], n, tries, len(users), over, lim, b["errors"].get("sold_out", 0)))
if b["requests"] < n * tries:
    sys.exit("FAILED: only %d requests sent" % b["requests"])
if over or len(users) != stock:
    sys.exit("FAILED: %d users told 201 (want %d, each once), %d above the limit" % (len(users), stock, over))
if lim == 0:
    sys.exit("FAILED: no attempt was refused by the limit: the attempts did not race")
PY
sh_check_final
