#!/bin/bash
# Fault 6: a seckilld instance is paused (SIGSTOP) past its order-id
# worker-id lease (worker-lease-ms 2 s) for 4 s while a new instance starts
# and - every other worker id being occupied - takes the paused one's id;
# then it is resumed. Pass: the resumed instance issues no id until it holds
# a new lease (it answers 503 meanwhile), no order id is issued twice across
# the instances, and the sale's usual checks (scripts/sale_check.py).
SCENARIO=lease-pause
. "$(dirname "$0")/sale_lib.sh"
dl_start_redis "$work" --appendonly yes --appendfsync always # fsync before reply: 201 is a promise
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
DATABASE_URL="sqlite://$work/orders.db"
# one loop per instance (--threads 1): one worker id each, as the scenario counts them
SECKILLD_EXTRA="--worker-lease-ms 2000 --threads 1"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
fail() { say "FAIL: $*"; exit 1; }
start_services
# the late instance's port is a target from the start (refused until it runs)
late_port=$(dl_free_port)
SECKILLD_URLS+=("http://127.0.0.1:$late_port")
paused=${SECKILLD_URLS[0]}
wid=$(curl -s -H "Authorization: Bearer $TOKEN" "$paused/metrics" | awk '$1 == "seckill_worker_id" {print $2}')
[ -n "$wid" ] && [ "$wid" -ge 0 ] || fail "no worker id on $paused"
start_sale
sleep 1
# every worker id but the paused instance's is taken: the late one must get it
rcli EVAL "for n = 0, 1023 do if n ~= tonumber(ARGV[1]) then redis.call('SET', 'seckill:worker:' .. n, 'scenario:0', 'PX', 60000, 'NX') end end return 1" 0 "$wid" >/dev/null
say "SIGSTOP seckilld $paused (pid ${SECKILLD_PIDS[0]}, worker id $wid) for 4 s"
kill -STOP "${SECKILLD_PIDS[0]}"
"$bin/seckilld/seckilld" --port "$late_port" --bind 127.0.0.1 --admin-token "$TOKEN" $SECKILLD_EXTRA \
    >"$work/seckilld-late.log" 2>&1 &
dl_track $!
worker_of() { curl -s -H "Authorization: Bearer $TOKEN" "$1/metrics" | awk '$1 == "seckill_worker_id" {print $2}' || true; }
lwid=-1
for _ in $(seq 1 100); do # the paused lease expires within 2 s
    lwid=$(worker_of "http://127.0.0.1:$late_port")
    [ -n "$lwid" ] && [ "$lwid" -ge 0 ] && break
    sleep 0.05
done
[ "$lwid" = "$wid" ] || fail "the late instance took worker id $lwid, not the paused one's $wid"
sleep 3
kill -CONT "${SECKILLD_PIDS[0]}"
say "SIGCONT $paused; the late instance holds worker id $lwid"
sleep 0.5
code=$(curl -s -o "$work/resumed.json" -w '%{http_code}' -X POST "$paused/v1/campaigns/$CAMPAIGN/purchase" \
    -H 'X-User-Id: lease-probe')
[ "$code" = 503 ] || fail "the resumed instance answered $code before holding a new lease: $(cat "$work/resumed.json")"
t0=$(date +%s%N)
rcli EVAL "for _, k in ipairs(redis.call('KEYS', 'seckill:worker:*')) do if redis.call('GET', k) == 'scenario:0' then redis.call('DEL', k) end end return 1" 0 >/dev/null
RECOVER_MS=$(wait_healthy_ms "$paused" 10) || fail "the resumed instance did not take a new lease"
nwid=$(worker_of "$paused")
say "resumed instance leased worker id $nwid after ${RECOVER_MS} ms ($(( ($(date +%s%N) - t0) / 1000000 )) ms after ids were freed)"
[ "$nwid" != "$wid" ] || fail "the resumed instance kept worker id $wid"
grep -Eq 'worker lease not renewed|lease \(fence [0-9]+\) is no longer ours' "$work/seckilld-1.log" || fail "the resumed instance did not say it lost its lease"
finish_sale
dups=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["order_id_collisions"])' "$work/bench.json")
[ "$dups" = 0 ] || fail "$dups order ids told to more than one buyer"
say "no order id told to two buyers ($(wc -l <"$work/orders.txt") orders told)"
echo PASS
