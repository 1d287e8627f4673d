#!/bin/bash
# lease_partition_cli.sh MODE LEASE_S: the dlock CLI's COMMAND must be gone
# before anyone else's COMMAND can run under the same lock (docs/cli.md).
# MODE redis / etcd: the first `dlock -u PROXY --watchdog-lease LEASE_S NAME
# -- COMMAND` reaches the server through the freezing proxy
# (lease_partition_lib.sh), which is then frozen; a second `dlock -u DIRECT
# -w 60 NAME -- COMMAND` waits for the lock. Pass: the first COMMAND had
# exited (its SIGTERM trap recorded it) before the second COMMAND started,
# within lease + 1 s of the cut, and the first dlock exited 75.
# MODE etcd_revoke: the first dlock's etcd lease is revoked behind its back
# (the v3 HTTP gateway's /v3/lease/revoke, as `etcdctl lease revoke` does;
# Debian's etcd-server ships no etcdctl): COMMAND must be stopped within
# lease + 1 s, dlock exits 75, and none of its messages names Redis.
# COMMANDs record CLOCK_MONOTONIC ms with `lease_probe now` (the clock of
# every process here). etcd modes re-run the script under etcd_run.
mode=${1:-redis}
lease_s=${2:-3}
SCENARIO=lease_partition_cli_${mode}_${lease_s}s
case $mode in
etcd | etcd_revoke)
    if [ -z "${LP_ETCD_URL:-}" ]; then
        build=${DLOCK_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/build}
        exec "$build/tests/lib/etcd/etcd_run" 1 LP_ETCD_URL bash "$0" "$@"
    fi ;;
redis) ;;
*) echo "usage: $0 redis|etcd|etcd_revoke [LEASE_S]" >&2; exit 2 ;;
esac
. "$(dirname "$0")/lease_partition_lib.sh"
dlock="$bin/dlock/dlock"
lease_ms=$((lease_s * 1000))
name=lp:cli

if [ "$mode" = redis ]; then
    dl_start_redis "$work"
    direct="redis://127.0.0.1:$REDIS_PORT"
else
    direct=$LP_ETCD_URL
fi
first_url=$direct
if [ "$mode" != etcd_revoke ]; then
    ep=${direct#*://}
    ep=${ep%%[,/]*}
    lp_start_proxy "${ep%:*}" "${ep##*:}"
    first_url="${direct%%://*}://127.0.0.1:$PROXY_PORT"
fi

# The first holder: COMMAND records its start, and its exit when SIGTERM
# arrives (dlock signals COMMAND's process group: the sleep goes too).
rec1="$work/first.rec"
"$dlock" -u "$first_url" --watchdog-lease "${lease_s}s" "$name" -- sh -c \
    "echo start \$('$probe' now) >>'$rec1'; trap 'echo exit \$('$probe' now) >>\"$rec1\"; exit 143' TERM; sleep 600 & wait" \
    >"$work/first.out" 2>"$work/first.err" &
first_pid=$!
dl_track "$first_pid"
end=$(( $(date +%s) + 20 ))
until grep -q '^start ' "$rec1" 2>/dev/null; do
    [ "$(date +%s)" -lt "$end" ] || { say "the first COMMAND never started"; cat "$work/first.err"; exit 1; }
    sleep 0.05
done
say "first dlock on $first_url holds $name, lease ${lease_s} s"
sleep 0.5

if [ "$mode" = etcd_revoke ]; then
    holder=$("$dlock" status -u "$direct" "$name" | awk '/holder:/ { print $2; exit }')
    [ -n "$holder" ] || { say "no holder in dlock status"; exit 1; }
    ep=${direct#etcd://}
    ep=${ep%%[,/]*}
    cut=$(lp_now)
    curl -s -X POST "http://$ep/v3/lease/revoke" -d "{\"ID\":\"$((16#$holder))\"}" >"$work/revoke.out"
    say "revoked lease $holder at $cut: $(cat "$work/revoke.out")"
else
    cut=$(lp_now)
    kill -STOP "$PROXY_PID"
    say "cut at $cut"
    rec2="$work/second.rec"
    "$dlock" -u "$direct" -w 60s "$name" -- sh -c "echo start \$('$probe' now) >>'$rec2'" \
        >"$work/second.out" 2>"$work/second.err" &
    dl_track $!
fi

# Watch until the first dlock ended (and the second COMMAND ran), or
# lease + 1 s + LP_OBSERVE_MS after the cut.
end=$((cut + lease_ms + 1000 + LP_OBSERVE_MS))
while [ "$(lp_now)" -lt "$end" ]; do
    if ! kill -0 "$first_pid" 2>/dev/null; then
        [ "$mode" = etcd_revoke ] || grep -q '^start ' "$rec2" 2>/dev/null && break
    fi
    sleep 0.05
done
watched=$(( $(lp_now) - cut ))
# The first dlock's own exit may come later (it tries to release through
# the cut, bounded by its timeouts): its status is waited for up to 20 s.
end=$(( $(date +%s) + 20 ))
while kill -0 "$first_pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 0.05; done
rc1="still running $(( ($(lp_now) - cut) / 1000 )) s after the cut"
kill -0 "$first_pid" 2>/dev/null || { rc1=0; wait "$first_pid" || rc1=$?; }
exited=$(( $(lp_now) - cut ))
e1=$(awk '$1 == "exit" { print $2; exit }' "$rec1")
rel() { [ -n "$1" ] && echo "+$(($1 - cut)) ms" || echo "not within +$watched ms"; }
fail=0
line="first COMMAND exited $(rel "$e1"), first dlock exit status $rc1 (seen by +$exited ms)"
if [ "$mode" = etcd_revoke ]; then
    if [ -z "$e1" ] || [ $((e1 - cut)) -gt $((lease_ms + 1000)) ]; then fail=1; fi
    if grep -qi redis "$work/first.err" "$work/first.out"; then
        say "FAIL: a message names Redis on an etcd URL:"; grep -i redis "$work/first.err" "$work/first.out"; fail=1
    fi
    s2=
else
    s2=$(awk '$1 == "start" { print $2; exit }' "$rec2" 2>/dev/null)
    line="$line, second COMMAND started $(rel "$s2")"
    [ -z "$e1" ] || [ -z "$s2" ] || line="$line, gap $((s2 - e1)) ms"
    if [ -z "$s2" ]; then
        say "FAIL: the second COMMAND never started (the server did not expire the lock?)"; fail=1
    elif [ -z "$e1" ] || [ "$e1" -ge "$s2" ]; then
        say "FAIL: both COMMANDs ran at once"; fail=1
    elif [ $((e1 - cut)) -gt $((lease_ms + 1000)) ]; then
        say "FAIL: the first COMMAND stopped later than lease + 1 s after the cut"; fail=1
    fi
fi
[ "$rc1" = 75 ] || { say "FAIL: the first dlock's exit status is $rc1, not 75 (lock lost)"; fail=1; }
say "$line"
lp_summary "$SCENARIO" "{\"scenario\":\"$SCENARIO\",\"kind\":\"lease\",\"lease_ms\":$lease_ms,\"command\":{\"stop_ms\":$([ -n "$e1" ] && echo $((e1 - cut)) || echo null),\"other_ms\":$([ -n "$s2" ] && echo $((s2 - cut)) || echo null)},\"pass\":$([ $fail = 0 ] && echo true || echo false)}"
if [ $fail != 0 ]; then
    say "first dlock's messages:"; cat "$work/first.err"
    exit 1
fi
say "PASS"
