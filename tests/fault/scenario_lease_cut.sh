#!/bin/bash
# Fault (lease cut): a seckilld instance in its own network namespace reaches Redis
# over one veth pair and serves buyers over another. Mid-sale its Redis link
# is cut (its sockets stay open, no byte moves): its order-id worker lease
# (worker-lease-ms 6 s, worker id W) can be renewed no more. It goes on
# selling the reserve on the database path (degraded mode) with ids of
# worker W while the lease is valid on its own clock, and must stop (503) at
# that validity's end - the send time of its last good renewal + 5/6 of the
# lease - before a late instance, which reaches Redis directly and finds
# every other worker id taken, can take W. Pass, from timestamps taken in
# the processes: the cut-off instance's validity ended (its log, wall ms)
# before the late instance took W (its log, Redis clock); every
# database-path order id of worker W (only the cut-off instance takes that
# path) carries an issue time before that take; the cut-off instance
# answers 503 while W is the late one's; no order id told twice; the sale's
# usual checks. Needs root and `ip netns` (else skipped, never faked).
SCENARIO=lease-cut
. "$(dirname "$0")/sale_lib.sh"
dl_netns_two_links dc 215 216
dl_start_redis "$work" --bind 127.0.0.1 "$host_ip"
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
LEASE_MS=6000
# one loop per instance (--threads 1): one worker id each
SECKILLD_EXTRA="--worker-lease-ms $LEASE_MS --threads 1"
SECKILLD_COUNT=2
# Redis's share sells out after the cut-off instance's lease ends (~6 s),
# so it sells on the database path until then
STOCK=${FAULT_STOCK:-6000}
BUYERS=${FAULT_BUYERS:-9000}
BENCH_EXTRA="--keyless 30" # keyless buyers take the database path (it refuses keyed purchases)
DB_RESERVE=400
FAULT_RETRIES=60
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
fail() { say "FAIL: $*"; exit 1; }
# a broken promise of the lease is reported, and the other checks still run
problems=0
problem() { say "FAIL: $*"; problems=$((problems + 1)); }
worker_of() { curl -s -H "Authorization: Bearer $TOKEN" "$1/metrics" | awk '$1 == "seckill_worker_id" {print $2}' || true; }
start_services
# The cut-off instance: short Redis timeouts, so it is on the database path
# (Redis unanswered 1 s, then 0.5 s not ready) well before its lease ends.
cport=$(dl_free_port)
# shellcheck disable=SC2086 # SECKILLD_EXTRA is a list of flags
ip netns exec "$ns" "$bin/seckilld/seckilld" --port "$cport" --bind "$ns_cip" --admin-token "$TOKEN" \
    --redis-url "redis://$host_ip:$REDIS_PORT" $SECKILLD_EXTRA --redis-timeout-ms 1000 --degraded-after-ms 500 \
    >"$work/seckilld-cut.log" 2>&1 &
dl_track $!
cut="http://$ns_cip:$cport"
dl_wait_http "$cut/healthz" 100 || { say "namespaced seckilld not healthy"; exit 1; }
# the late instance's port is a target from the start (refused until it runs)
late_port=$(dl_free_port)
late="http://127.0.0.1:$late_port"
SECKILLD_URLS=("$cut" "${SECKILLD_URLS[@]}" "$late")
wid=$(worker_of "$cut")
case $wid in '' | *[!0-9]*) fail "no worker id on $cut" ;; esac
# a campaign of its own for the probe: whatever the sale's stock does, a
# database-path purchase there needs an order id
"$bin/seckill-bench/seckill-bench" --url "$cut" --campaign "${CAMPAIGN}p" --create --admin-token "$TOKEN" \
    --stock 10 --limit 1 --db-reserve 5 --buyers 0 --scalpers 0 --bad 0 >/dev/null
start_sale
sleep 1
# every worker id but the cut-off instance's is taken: the late one must wait for it
rcli EVAL "for n = 0, 1023 do if n ~= tonumber(ARGV[1]) then redis.call('SET', 'seckill:worker:' .. n, 'scenario:0', 'PX', 60000, 'NX') end end return 1" 0 "$wid" >/dev/null
# Redis only (no database path): every id of its own is a Redis-path one
# shellcheck disable=SC2086 # SECKILLD_EXTRA is a list of flags
"$bin/seckilld/seckilld" --port "$late_port" --bind 127.0.0.1 --admin-token "$TOKEN" $SECKILLD_EXTRA \
    --database-url '' >"$work/seckilld-late.log" 2>&1 &
dl_track $!
say "cutting $cut (worker id $wid) off from Redis: link down, sockets open"
ip link set "$hv" down
lwid=-1
for _ in $(seq 1 300); do # the lease ends within 5 s of the cut
    lwid=$(worker_of "$late")
    [ "$lwid" = "$wid" ] && break
    sleep 0.05
done
[ "$lwid" = "$wid" ] || fail "the late instance holds worker id '$lwid', not the cut-off one's $wid"
code=$(curl -s -o "$work/cut.json" -w '%{http_code}' -X POST "$cut/v1/campaigns/${CAMPAIGN}p/purchase" \
    -H 'X-User-Id: lease-probe')
[ "$code" = 503 ] || problem "the cut-off instance answered $code while its worker id is another's: $(cat "$work/cut.json")"
ip link set "$hv" up
say "link restored; the late instance holds worker id $wid"
rcli EVAL "for _, k in ipairs(redis.call('KEYS', 'seckill:worker:*')) do if redis.call('GET', k) == 'scenario:0' then redis.call('DEL', k) end end return 1" 0 >/dev/null
RECOVER_MS=$(wait_healthy_ms "$cut" 30) || fail "the cut-off instance did not take a new lease"
say "cut-off instance healthy again after ${RECOVER_MS} ms, worker id $(worker_of "$cut")"
# The two moments, each from the process that lived it.
end_ms=$(sed -n "s/.*worker id $wid: worker lease not renewed .*validity ended at \([0-9]*\) ms.*/\1/p" \
    "$work/seckilld-cut.log" | head -n 1)
take_ms=$(sed -n "s/.*order-id worker id $wid leased (fence [0-9]*) at \([0-9]*\) ms (Redis clock).*/\1/p" \
    "$work/seckilld-late.log" | head -n 1)
[ -n "$take_ms" ] || fail "the late instance never said it took worker id $wid"
if [ -z "$end_ms" ]; then
    problem "the cut-off instance never said its lease ended: $(grep -i lease "$work/seckilld-cut.log" | tr '\n' ' ')"
else
    say "cut-off instance stopped issuing ids of worker $wid at $end_ms; the late instance took it at $take_ms"
    [ "$end_ms" -lt "$take_ms" ] ||
        problem "the cut-off instance issued ids until $((end_ms - take_ms)) ms after worker id $wid was taken"
fi
finish_sale
# Every database-path id of worker W was issued (its ms) before the take;
# some were (else the cut-off instance never acted under the cut lease).
"$PY" - "$work/orders.db" "$CAMPAIGN" "$wid" "$take_ms" <<'PY' || problem "database-path ids of worker $wid: see above"
import sqlite3, sys
db, camp, wid, take = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
epoch = 1767225600000  # src/seckill/engine/orderid.h
ids = [r[0] for r in sqlite3.connect(db).execute(
    "SELECT order_id FROM orders WHERE campaign = ? AND path = 'db'", (camp,))]
mine = [(i >> 22) + epoch for i in ids if (i >> 12) & 1023 == wid]
late = [ms for ms in mine if ms >= take]
last = f"the last issued at take {max(mine) - take:+d} ms" if mine else "none"
print(f"[lease-cut] {len(ids)} database-path orders, {len(mine)} of worker {wid} ({last}); "
      f"{len(late)} issued at or after the take")
if not mine:
    print(f"[lease-cut] no database-path order of worker {wid}: the cut-off instance never sold under the cut lease")
sys.exit(1 if late or not mine else 0)
PY
dups=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["order_id_collisions"])' "$work/bench.json")
[ "$dups" = 0 ] || problem "$dups order ids told to more than one buyer"
[ "$problems" = 0 ] || fail "$problems of the lease's checks failed"
echo PASS
