#!/bin/bash
# Sharded scenario (c): kill -9 of the seckilld doing a transfer, between
# its take (units out of the source bucket, in the source's journal) and
# its give. K = 3 buckets on the 3+3 Cluster, stock 600, 3 000 buyers
# through 3 seckilld, 2 persisters. Every seckilld runs with
# SECKILLD_TEST_XFER_PAUSE_MS (each transfer waits that long after its
# take): the window is deterministic, and the first instance whose
# /metrics counts a transfer is inside it when it is killed (the other
# instances' own transfers just finish late). The units of the killed
# mover are then in no bucket; the survivors' recovery (journal entries
# older than 3 s, every second) gives them once and finishes the entry.
# Checked: in transit > 0 right after the kill, recovered by a survivor,
# journals empty, Σ bucket stock + in transit + sold == stock, exactly the
# stock sold in Redis and in the database, 0 broken promises, reconcile
# clean. (The survivors keep their pause: the sale's tail is slower, and
# the last journal entries go when the last paused transfers end.)
SCENARIO=shards-transfer-crash
. "$(dirname "$0")/sale_lib.sh"
. "$(dirname "$0")/scenario_cluster_lib.sh"
. "$(dirname "$0")/scenario_shards_lib.sh"
STOCK=${FAULT_STOCK:-600}
BUYERS=${FAULT_BUYERS:-3000}
RATE=${FAULT_RATE:-500}
PAUSE_MS=${FAULT_XFER_PAUSE_MS:-1000}
cl_sale_setup x
SECKILLD_EXTRA="--replica-acks 1 --replica-ack-timeout-ms 500"
export SECKILLD_TEST_XFER_PAUSE_MS=$PAUSE_MS
start_services
unset SECKILLD_TEST_XFER_PAUSE_MS
start_sale
victim=""
for _ in $(seq 1 600); do
    for i in "${!SECKILLD_URLS[@]}"; do
        [ "$(sh_metric "${SECKILLD_URLS[$i]}" seckill_transfers_total)" = 0 ] || { victim=$i; break 2; }
    done
    sleep 0.02
done
[ -n "$victim" ] || { say "no transfer started: $(sh_state)"; exit 1; }
t0=$(date +%s%N)
kill -9 "${SECKILLD_PIDS[$victim]}"
say "seckilld ${SECKILLD_URLS[$victim]} took units for a transfer (pause $PAUSE_MS ms before its give): killed -9"
st=$(sh_state)
say "right after the kill: $st"
[ "$(sh_field "$st" in_transit)" -gt 0 ] || { say "FAILED: nothing in transit after the kill: the units taken are in no journal (lost), or the kill missed the window"; exit 1; }
unset 'SECKILLD_URLS[victim]'
SECKILLD_URLS=("${SECKILLD_URLS[@]}")
xids=$(sh_field "$st" xids)
sh_wait_xids_gone "$xids" 30 || { say "FAILED: journal entries not recovered: $(sh_state)"; exit 1; }
RECOVER_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
recovered=0
for u in "${SECKILLD_URLS[@]}"; do recovered=$((recovered + $(sh_metric "$u" seckill_transfers_recovered_total))); done
say "the journal entries of the kill ($xids) finished ${RECOVER_MS} ms after it; entries recovered by the survivors: $recovered"
[ "$recovered" -ge 1 ] || { say "FAILED: no survivor recovered the killed mover's entry"; exit 1; }
finish_sale --redis-url "$REDIS_URL"
sh_report_transfers
sh_check_final
