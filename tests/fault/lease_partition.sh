#!/bin/bash
# lease_partition.sh TOPOLOGY LEASE_S: a holder cut off from a live server
# must stop believing it holds each lock object before another client can
# hold it (the validity rule, docs/locks.md). TOPOLOGY: redis (standalone, through the freezing
# proxy), sentinel (master + replica + 3 sentinels, holder in a network
# namespace), cluster (3 masters, namespace), etcd (the etcd lock through
# the proxy; the script re-runs itself under etcd_run for a private etcd).
# One holder process (lease_probe holder, watchdog_timeout_ms = LEASE_S)
# holds a simple lock, a reentrant lock, a read-write lock's write side and
# a 1-permit semaphore (etcd: the lock only) and polls its local held state
# every 5 ms; a waiter process on a direct connection waits for the same
# names; then the holder is cut off (lease_partition_lib.sh). Pass, for
# EVERY object: the holder stopped believing before the waiter acquired,
# and within lease + 1 s of the cut. Times are CLOCK_MONOTONIC, taken in the
# processes. Exit 0 pass, 1 fail, DL_SKIP_CODE skipped (no namespaces).
topo=${1:-redis}
lease_s=${2:-3}
SCENARIO=lease_partition_${topo}_${lease_s}s
if [ "$topo" = etcd ] && [ -z "${LP_ETCD_URL:-}" ]; then
    build=${DLOCK_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/build}
    exec "$build/tests/lib/etcd/etcd_run" 1 LP_ETCD_URL bash "$0" "$@"
fi
. "$(dirname "$0")/lease_partition_lib.sh"
lease_ms=$((lease_s * 1000))
objects=lock,reentrant,rwlock,semaphore

case $topo in
redis)
    dl_start_redis "$work"
    lp_start_proxy 127.0.0.1 "$REDIS_PORT"
    holder_url="redis://127.0.0.1:$PROXY_PORT"
    waiter_url="redis://127.0.0.1:$REDIS_PORT" ;;
etcd)
    objects=lock
    ep=${LP_ETCD_URL#etcd://}
    ep=${ep%%[,/]*}
    lp_start_proxy "${ep%:*}" "${ep##*:}"
    holder_url="etcd://127.0.0.1:$PROXY_PORT"
    waiter_url=$LP_ETCD_URL ;;
sentinel)
    lp_netns
    dl_start_redis "$work" --bind 127.0.0.1 "$host_ip"
    dl_start_replica "$work" "$REDIS_PORT"
    dl_start_sentinels "$work" "$REDIS_PORT" mymaster "$host_ip"
    hosts=$(for p in $SENTINEL_PORTS; do printf '%s:%s,' "$host_ip" "$p"; done)
    holder_url="redis-sentinel://${hosts%,}/mymaster"
    waiter_url=$holder_url ;;
cluster)
    lp_netns
    . "$src/tests/support/cluster.sh"
    CLUSTER_ANNOUNCE_IP=$host_ip cluster_start "$work" 3 0 || { say "cluster did not start"; exit 1; }
    holder_url=$CLUSTER_URL
    waiter_url=$CLUSTER_URL ;;
*)
    echo "usage: $0 redis|sentinel|cluster|etcd [LEASE_S]" >&2
    exit 2 ;;
esac
n=$(echo "$objects" | tr ',' '\n' | wc -l)
say "holder on $holder_url ($LP_CUT_MODE), waiter on $waiter_url, lease ${lease_s} s, objects $objects"

# The holder polls for as long as the script may watch; it is stopped after.
"${LP_PFX[@]}" "$probe" holder "$holder_url" "$lease_ms" "$objects" $((lease_ms + LP_OBSERVE_MS + 60000)) \
    >"$work/holder.out" 2>"$work/holder.err" &
dl_track $!
lp_wait_lines "$work/holder.out" held "$n" 20 || { say "holder did not take every object"; cat "$work/holder.err"; exit 1; }
"$probe" waiter "$waiter_url" "$objects" $((lease_ms + LP_OBSERVE_MS + 60000)) \
    >"$work/waiter.out" 2>"$work/waiter.err" &
dl_track $!
sleep 0.5 # the waiter is waiting on every name
if grep -q ' acquired ' "$work/waiter.out"; then
    say "FAIL: the waiter acquired while the holder was connected"; cat "$work/waiter.out"; exit 1
fi
cut=$(lp_cut)
say "cut at $cut"
# Watch until everything happened, or lease + 1 s + LP_OBSERVE_MS after the cut.
end=$((cut + lease_ms + 1000 + LP_OBSERVE_MS))
while [ "$(lp_now)" -lt "$end" ]; do
    [ "$(grep -c ' stopped_believing ' "$work/holder.out")" -ge "$n" ] &&
        [ "$(grep -c ' acquired ' "$work/waiter.out")" -ge "$n" ] && break
    sleep 0.05
done
sleep 0.1 # lines written at the very end are read too
watched=$(( $(lp_now) - cut ))

fail=0
json="\"scenario\":\"$SCENARIO\",\"kind\":\"lease\",\"lease_ms\":$lease_ms"
rel() { [ -n "$1" ] && echo "+$(($1 - cut)) ms" || echo "not within +$watched ms"; }
for o in ${objects//,/ }; do
    s=$(lp_at "$work/holder.out" "$o" stopped_believing)
    a=$(lp_at "$work/waiter.out" "$o" acquired)
    l=$(lp_at "$work/holder.out" "$o" lost_callback)
    line="$o: holder stopped believing $(rel "$s"), other client acquired $(rel "$a")"
    [ -z "$l" ] || line="$line, lost callback $(rel "$l")"
    if [ -n "$s" ] && [ -n "$a" ]; then line="$line, gap $((a - s)) ms"; fi
    verdict=ok
    if [ -z "$a" ]; then
        verdict="FAIL (the other client never acquired: the server did not expire the hold?)"
    elif [ -z "$s" ] || [ "$s" -ge "$a" ]; then
        verdict="FAIL (both believed they held it)"
    elif [ $((s - cut)) -gt $((lease_ms + 1000)) ]; then
        verdict="FAIL (stopped later than lease + 1 s after the cut)"
    elif [ -z "$l" ] || [ "$l" -ge "$a" ]; then
        verdict="FAIL (no loss callback before the other client acquired)"
    fi
    grep -q "^$o validity_mismatch" "$work/holder.out" && verdict="FAIL (not held, validity still positive)"
    grep -q "^$o held_past_validity" "$work/holder.out" && verdict="FAIL (held past the validity it stated)"
    [ "$verdict" = ok ] || fail=1
    say "$line: $verdict"
    json="$json,\"$o\":{\"stop_ms\":$([ -n "$s" ] && echo $((s - cut)) || echo null),\"other_ms\":$([ -n "$a" ] && echo $((a - cut)) || echo null)}"
done
lp_summary "$SCENARIO" "{$json,\"pass\":$([ $fail = 0 ] && echo true || echo false)}"
if [ $fail != 0 ]; then
    say "holder log (library lines):"; tail -n 20 "$work/holder.err"
    say "FAIL: the cut-off holder did not stop believing in time (objects above)"
    exit 1
fi
say "PASS: every object stopped being believed before anyone else held it"
