# test_cli_exclusion.sh: two `dlock -n` on one name: exactly one runs and
# the other exits with the conflict code (1, or -E N); a waiting dlock runs
# only after the holder finished; the lock is gone after each run.
. "$(dirname "$0")/lib.sh"
start_redis

# Two at once: one runs (and holds until $T_DIR/go), one gets the conflict code.
hold="while [ ! -e $T_DIR/go ]; do sleep 0.02; done"
bg "$DLOCK_BIN" -n job -- sh -c "echo a >> $T_DIR/runs; $hold"
p1=$BG_PID
bg "$DLOCK_BIN" -n job -- sh -c "echo b >> $T_DIR/runs; $hold"
p2=$BG_PID
wait_until 20 sh -c "! kill -0 $p1 2>/dev/null || ! kill -0 $p2 2>/dev/null"
touch "$T_DIR/go"
wait_rc "$p1"; rc1=$RC
wait_rc "$p2"; rc2=$RC
expect_eq "$(wc -l < "$T_DIR/runs")" 1 "exactly one of two concurrent 'dlock -n' ran"
expect_eq "$(echo "$rc1 $rc2" | tr ' ' '\n' | sort | tr '\n' ' ')" "0 1 " "exit codes of the two runs"
expect_eq "$(rcli exists job)" 0 "lock key removed after the run"

# -E sets the conflict code; the command does not run.
bg "$DLOCK_BIN" -n job -- sh -c "touch $T_DIR/holding; while [ ! -e $T_DIR/go2 ]; do sleep 0.02; done; rm $T_DIR/holding"
holder=$BG_PID
wait_until 5 test -e "$T_DIR/holding"
run_rc "$DLOCK_BIN" -n -E 7 job -- touch "$T_DIR/should-not-exist"
expect_eq "$RC" 7 "-n -E 7 on a held lock"
[ ! -e "$T_DIR/should-not-exist" ] || fail "COMMAND ran although the lock was busy"
pass "COMMAND did not run on conflict"
run_rc "$DLOCK_BIN" -n other-name -- true
expect_eq "$RC" 0 "another name is independent"

# A blocking dlock waits, then runs after the holder's COMMAND finished.
( sleep 0.5; touch "$T_DIR/go2" ) &
run_rc "$DLOCK_BIN" job -- sh -c "test ! -e $T_DIR/holding && echo after > $T_DIR/waiter"
wait_rc "$holder"
expect_eq "$RC" 0 "holder exit status"
expect_eq "$(cat "$T_DIR/waiter" 2>/dev/null)" "after" "waiter ran after the holder"
expect_eq "$(rcli exists job)" 0 "lock free at the end"
