# test_cli_wait.sh: `-w SECONDS` gives up after about that long with the
# conflict code, and gets the lock when the holder finishes in time.
. "$(dirname "$0")/lib.sh"
start_redis

# The holder runs until the test creates $T_DIR/go (no timing races).
bg "$DLOCK_BIN" slow -- sh -c "touch $T_DIR/holding; while [ ! -e $T_DIR/go ]; do sleep 0.02; done"
holder=$BG_PID
wait_until 5 test -e "$T_DIR/holding"

t0=$(now_ms)
run_rc "$DLOCK_BIN" -w 0.5 slow -- touch "$T_DIR/ran"
el=$(($(now_ms) - t0))
expect_eq "$RC" 1 "-w 0.5 on a held lock exits with the conflict code"
expect_range "$el" 450 1500 "-w 0.5 gave up after ~0.5 s (ms)"
[ ! -e "$T_DIR/ran" ] || fail "COMMAND ran after -w timed out"

t0=$(now_ms)
run_rc "$DLOCK_BIN" -w 0.3 -E 9 slow -- true
el=$(($(now_ms) - t0))
expect_eq "$RC" 9 "-w 0.3 -E 9"
expect_range "$el" 250 1300 "-w 0.3 gave up after ~0.3 s (ms)"

t0=$(now_ms)
run_rc "$DLOCK_BIN" -w 300ms slow -- true
el=$(($(now_ms) - t0))
expect_eq "$RC" 1 "-w 300ms (a unit suffix) on a held lock"
expect_range "$el" 250 1300 "-w 300ms gave up after ~0.3 s (ms)"

# Holder ends ~1 s from now; -w 10 gets the lock soon after, not at 10 s.
( sleep 1; touch "$T_DIR/go" ) &
t0=$(now_ms)
run_rc "$DLOCK_BIN" -w 10 slow -- touch "$T_DIR/ran2"
el=$(($(now_ms) - t0))
expect_eq "$RC" 0 "-w 10 acquires once the holder is done"
[ -e "$T_DIR/ran2" ] || fail "COMMAND did not run"
expect_range "$el" 800 6000 "waited for the holder only (ms)"
wait_rc "$holder"
expect_eq "$RC" 0 "holder exit status"
