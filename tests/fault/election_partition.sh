#!/bin/bash
# election_partition.sh TOPOLOGY LEASE_S: run one of three, the leader cut
# off from a live server. Three `dlock --standby` processes (lease LEASE_S)
# run the same singleton service (tests/tools/dlock/standby_service.c);
# the first leads and reaches the server through the freezing proxy, the
# other two directly; then the proxy is frozen (lease_partition_lib.sh).
# TOPOLOGY: redis (a private redis-server), etcd (the script re-runs
# itself under etcd_run for a private etcd). Pass: the old leader's
# service was told to stop (SIGUSR2) before a new leader's service was
# told to lead (SIGUSR1), within lease + 1 s of the cut, and no third
# leader appeared. Times are CLOCK_MONOTONIC, taken by the services when
# the signals arrived. Exit 0 pass, 1 fail.
topo=${1:-redis}
lease_s=${2:-3}
SCENARIO=lease_partition_election_${topo}_${lease_s}s
if [ "$topo" = etcd ] && [ -z "${LP_ETCD_URL:-}" ]; then
    build=${DLOCK_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/build}
    exec "$build/tests/lib/etcd/etcd_run" 1 LP_ETCD_URL bash "$0" "$@"
fi
. "$(dirname "$0")/lease_partition_lib.sh"
lease_ms=$((lease_s * 1000))
dlock_bin=$build/tools/dlock/dlock
svc=$build/tests/tools/dlock/standby_service
[ -x "$svc" ] || { echo "FAIL: $svc not built" >&2; exit 1; }

case $topo in
redis)
    dl_start_redis "$work"
    lp_start_proxy 127.0.0.1 "$REDIS_PORT"
    leader_url="redis://127.0.0.1:$PROXY_PORT"
    other_url="redis://127.0.0.1:$REDIS_PORT" ;;
etcd)
    ep=${LP_ETCD_URL#etcd://}
    ep=${ep%%[,/]*}
    lp_start_proxy "${ep%:*}" "${ep##*:}"
    leader_url="etcd://127.0.0.1:$PROXY_PORT"
    other_url=$LP_ETCD_URL ;;
*)
    echo "usage: $0 redis|etcd [LEASE_S]" >&2
    exit 2 ;;
esac
log=$work/svc.log
: >"$log"
standby() { # ID URL
    "$dlock_bin" -v --url "$2" --watchdog-lease "${lease_s}s" --label "$1" --standby svc -- "$svc" "$log" "$1" \
        >>"$work/$1.err" 2>&1 &
    dl_track $!
}
at() { awk -v h="$1" -v e="$2" '$1 == h && $2 == e { print $3; exit }' "$log"; }
leads() { awk '$2 == "lead"' "$log" | wc -l; }

standby h1 "$leader_url"
lp_wait_lines "$log" lead 1 10 || { say "h1 never led"; cat "$work/h1.err"; exit 1; }
standby h2 "$other_url"
standby h3 "$other_url"
sleep 1 # both campaign, a renewal of h1 went through
[ "$(leads)" = 1 ] || { say "FAIL: more than one leader before the cut"; cat "$log"; exit 1; }
cut=$(lp_cut)
say "cut at $cut (h1 through the proxy, lease ${lease_s} s)"
end=$((cut + lease_ms + 1000 + LP_OBSERVE_MS))
while [ "$(lp_now)" -lt "$end" ]; do
    [ -n "$(at h1 stop)" ] && [ "$(leads)" -ge 2 ] && break
    sleep 0.05
done
sleep 0.5 # a third leader would show now
s=$(at h1 stop)
new=$(awk '$2 == "lead" && $1 != "h1" { print $1; exit }' "$log")
a=$([ -n "$new" ] && at "$new" lead)
rel() { [ -n "$1" ] && echo "+$(($1 - cut)) ms" || echo "never"; }
line="old leader told to stop $(rel "$s"), new leader ($new) told to lead $(rel "$a")"
verdict=ok
if [ -z "$a" ]; then
    verdict="FAIL (no standby took over)"
elif [ -z "$s" ] || [ "$s" -ge "$a" ]; then
    verdict="FAIL (both believed they led)"
elif [ $((s - cut)) -gt $((lease_ms + 1000)) ]; then
    verdict="FAIL (told to stop later than lease + 1 s after the cut)"
elif [ "$(leads)" != 2 ]; then
    verdict="FAIL ($(leads) leaders in all)"
fi
say "$line: $verdict"
lp_summary "$SCENARIO" "{\"scenario\":\"$SCENARIO\",\"kind\":\"lease\",\"lease_ms\":$lease_ms,\"leader\":{\"stop_ms\":$([ -n "$s" ] && echo $((s - cut)) || echo null),\"other_ms\":$([ -n "$a" ] && echo $((a - cut)) || echo null)},\"pass\":$([ "$verdict" = ok ] && echo true || echo false)}"
if [ "$verdict" != ok ]; then
    cat "$log"; tail -n 5 "$work"/h*.err
    exit 1
fi
say "PASS: the cut-off leader was told to stop before anyone else was told to lead"
