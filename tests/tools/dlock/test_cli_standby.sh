# test_cli_standby.sh: `dlock --standby` (run one of three), `dlock leader
# [--watch]` and holder labels, with real processes on a private
# redis-server. Three standbys of one service, lease 1 s: exactly one
# service is told to lead; after kill -9 of the leader's dlock another is
# told within the lease plus slack; after SIGSTOP of the leader (dlock and
# its service) the next one is told no earlier than the UNTIL the frozen
# one last read in its state file, and the frozen one is told to stop when
# it runs again; `dlock leader --watch` prints every change in order;
# `dlock status` shows a lock holder's label from another process. Times
# are CLOCK_MONOTONIC, taken by the processes (standby_service.c).
# DLOCK_STANDBY_URL (set by etcd_run: test_cli_standby_etcd) runs it all on
# that server instead of a private redis-server.
. "$(dirname "$0")/lib.sh"
if [ -n "${DLOCK_STANDBY_URL:-}" ]; then
    export DLOCK_URL=$DLOCK_STANDBY_URL
else
    start_redis
fi
svc=$DLOCK_BUILD_DIR/tests/tools/dlock/standby_service
probe=$DLOCK_BUILD_DIR/tests/lib/partition/lease_probe
log=$T_DIR/svc.log
lease=1000
slack=1500
# etcd grants at least its minimum lease TTL (2 s with default ticks) and
# expires leases up to a second late
case $DLOCK_URL in etcd*) slack=3000 ;; esac
: >"$log"

# 1. Labels: a lock holder is named in status, from another process.
bg "$DLOCK_BIN" --label "batch@web3" labelled -- sleep 30
wait_until 5 sh -c "'$DLOCK_BIN' status labelled | grep -q 'label:      batch@web3'"
pass "status names the holder's --label"
kill "$BG_PID"
bg "$DLOCK_BIN" defaultlabel -- sleep 30
wait_until 5 sh -c "'$DLOCK_BIN' status --json defaultlabel | grep -q '\"label\":\"$(hostname):[0-9]*:sleep\"'"
pass "the default label is host:pid:command"
kill "$BG_PID"
run_rc "$DLOCK_BIN" --standby --lease 1s svc -- true 2>"$T_DIR/err"
expect_eq "$RC" 64 "--standby with --lease is refused"
run_rc "$DLOCK_BIN" status --watch svc 2>"$T_DIR/err"
expect_eq "$RC" 64 "--watch outside 'leader' is refused"
run_rc "$DLOCK_BIN" leader 2>"$T_DIR/err"
expect_eq "$RC" 64 "leader without NAME -> 64"
expect_match "$(cat "$T_DIR/err")" "no election NAME given" "the error says what is missing"
run_rc "$DLOCK_BIN" leader svc
expect_eq "$RC" 1 "no leader yet: exit 1"

# 2. Three standbys and a watcher.
declare -A DPID
for h in h1 h2 h3; do
    bg "$DLOCK_BIN" --watchdog-lease 1s --label "$h" --standby svc -- "$svc" "$log" "$h"
    DPID[$h]=$BG_PID
done
"$DLOCK_BIN" leader --watch svc >"$T_DIR/watch.out" 2>"$T_DIR/watch.err" &
watch_pid=$!
T_PIDS+=("$watch_pid")
leads() { grep -c ' lead ' "$log"; }
has_leads() { [ "$(leads)" -ge "$1" ]; }
wait_until 5 has_leads 1
sleep 0.5
expect_eq "$(leads)" 1 "exactly one of three services is told to lead"
leader=$(awk '$2 == "lead" { print $1 }' "$log" | tail -n 1)
expect_match "$("$DLOCK_BIN" leader svc)" "^leader [0-9]+ $leader\$" "dlock leader names it by its label"
# the state file says so too
sf=$(awk -v h="$leader" '$1 == h && $2 == "state" { print $3 }' "$log")
expect_match "$(cat "$sf")" "^leader [0-9]+ [0-9]+\$" "its state file says leader TERM UNTIL"

# 3. kill -9 of the leader's dlock: another is told to lead within the lease + slack.
t_kill=$("$probe" now)
kill -9 "${DPID[$leader]}"
wait_until 5 has_leads 2
second=$(awk '$2 == "lead" { print $1 }' "$log" | tail -n 1)
t2=$(awk '$2 == "lead" { print $3 }' "$log" | tail -n 1)
[ "$second" != "$leader" ] || fail "the killed leader led again"
expect_range $((t2 - t_kill)) 0 $((lease + slack)) "kill -9: a standby leads within the lease plus slack (ms after the kill)"

# 4. SIGSTOP of the leader (dlock and its service): the next leader is
# told no earlier than the UNTIL in the frozen leader's state file.
spid=$(awk -v h="$second" '$1 == h && $2 == "state" { print $4 }' "$log")
sf=$(awk -v h="$second" '$1 == h && $2 == "state" { print $3 }' "$log")
sleep 0.4
kill -STOP "${DPID[$second]}" "$spid"
until_ms=$(awk '{ print $3 }' "$sf")
wait_until 5 has_leads 3
third=$(awk '$2 == "lead" { print $1 }' "$log" | tail -n 1)
t3=$(awk '$2 == "lead" { print $3 }' "$log" | tail -n 1)
[ "$third" != "$second" ] || fail "the stopped leader led again"
[ "$t3" -ge "$until_ms" ] || fail "SIGSTOP: $third was told to lead at $t3, before the frozen leader's UNTIL $until_ms"
pass "SIGSTOP: the next leader was told $((t3 - until_ms)) ms after the frozen one's UNTIL"
kill -CONT "$spid" "${DPID[$second]}"
wait_until 5 grep -q "^$second stop " "$log"
pass "the frozen leader's service is told to stop when it runs again"
sleep 0.3
expect_eq "$(leads)" 3 "no second leader meanwhile"

# 5. --watch printed every change, in order, with "no leader" between leaders.
sleep 0.3
kill -TERM "$watch_pid"
wait "$watch_pid" 2>/dev/null
got=$(awk '{ print ($1 == "leader") ? $3 : "-" }' "$T_DIR/watch.out" | tr '\n' ' ')
expect_eq "$got" "- $leader - $second - $third " "leader --watch: every change in order"
terms=$(awk '$1 == "leader" { print $2 }' "$T_DIR/watch.out")
[ "$(echo "$terms" | sort -n | uniq)" = "$terms" ] || fail "terms did not grow: $terms"
pass "terms grow"

# 6. The service exits: its dlock resigns and exits with its status.
for h in h1 h2 h3; do kill -TERM "${DPID[$h]}" 2>/dev/null; done
for h in h1 h2 h3; do
    [ "$h" = "$leader" ] && continue
    wait_rc "${DPID[$h]}"
    expect_eq "$RC" 0 "$h: SIGTERM reaches the service, dlock exits with its status"
done
run_rc "$DLOCK_BIN" leader svc
expect_eq "$RC" 1 "no leader after the services exited"
