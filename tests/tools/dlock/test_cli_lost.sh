# test_cli_lost.sh: when the lock is lost while COMMAND runs (Redis stopped
# with SIGSTOP, a fixed --lease running out, or an admin's release
# --force), dlock stops COMMAND (SIGTERM, then SIGKILL a margin before the
# lock's validity ends) and exits 75; --on-lost=ignore lets it finish; a
# --kill-grace that cannot fit under the lease is refused.
. "$(dirname "$0")/lib.sh"
start_redis

# 0. A grace that cannot end before the lock's validity does is refused.
run_rc "$DLOCK_BIN" --watchdog-lease 1 --kill-grace 2 toolong -- true 2> "$T_DIR/err"
expect_eq "$RC" 64 "--kill-grace longer than a third of the lease -> usage error"
expect_match "$(cat "$T_DIR/err")" "does not fit under the 1s lease.*at most --kill-grace 233ms .a third of" \
    "the error says the most that fits"
run_rc "$DLOCK_BIN" --lease 1 --kill-grace 0.45 toolong -- true 2> "$T_DIR/err"
expect_eq "$RC" 64 "--kill-grace longer than half a fixed lease -> usage error"
expect_match "$(cat "$T_DIR/err")" "at most --kill-grace 400ms .half" "a fixed lease fits half"

# 0b. A healthy server: renewals keep COMMAND running past several leases
# (the watchdog renews a third of the lease after its last send; a
# renewal up to a sixth late used to bring validity under the SIGTERM
# point of a fitted grace, and COMMAND was stopped on a healthy server)
for i in 1 2 3; do
    run_rc "$DLOCK_BIN" --watchdog-lease 1 healthy -- sleep 2.5
    expect_eq "$RC" 0 "a 1 s watchdog lease on a healthy server, run $i: COMMAND runs to its end"
done

# 1. Redis frozen under a 1 s watchdog lease: COMMAND gets SIGTERM, exit 75.
rm -f "$T_DIR/pid"
bg "$DLOCK_BIN" --watchdog-lease 1 --kill-grace 0.2 frozen -- sh -c "echo \$\$ > $T_DIR/pid; exec sleep 30"
p=$BG_PID
wait_until 5 test -s "$T_DIR/pid"
child=$(cat "$T_DIR/pid")
sleep 0.5
kill -STOP "$REDIS_PID"
t0=$(now_ms)
wait_rc "$p"
el=$(($(now_ms) - t0))
kill -CONT "$REDIS_PID"
expect_eq "$RC" 75 "lock lost (Redis stopped) -> exit 75"
expect_range "$el" 100 3000 "stopped within the lease plus slack (ms)"
kill -0 "$child" 2>/dev/null && fail "COMMAND (pid $child) still running after the loss"
pass "COMMAND was stopped"

# 2. A fixed --lease about to run out while COMMAND runs counts as lost:
# SIGTERM at lease - grace (fitted: 300 ms) - margin (100 ms).
t0=$(now_ms)
run_rc "$DLOCK_BIN" --lease 0.8 leased -- sleep 30 2> "$T_DIR/err"
el=$(($(now_ms) - t0))
expect_eq "$RC" 75 "--lease ran out while COMMAND ran -> 75"
expect_range "$el" 300 4000 "stopped before the end of the lease (ms)"
expect_match "$(cat "$T_DIR/err")" "lost" "a clear message names the loss"

# 3. COMMAND ignoring SIGTERM is killed after --kill-grace: SIGTERM at
# 1 s - 0.3 - 0.1 = 0.6 s, SIGKILL at 0.9 s.
t0=$(now_ms)
run_rc "$DLOCK_BIN" --lease 1 --kill-grace 0.3 stubborn -- sh -c "trap '' TERM; while :; do sleep 0.05; done" 2> "$T_DIR/err"
el=$(($(now_ms) - t0))
expect_eq "$RC" 75 "stubborn COMMAND: still exit 75"
expect_range "$el" 850 4500 "SIGKILL came after the grace (ms)"
expect_match "$(cat "$T_DIR/err")" "SIGKILL" "message says SIGKILL was sent"

# 4. --on-lost=kill kills at once.
t0=$(now_ms)
run_rc "$DLOCK_BIN" --lease 0.5 --on-lost=kill --kill-grace 10 hard -- sh -c "trap '' TERM; while :; do sleep 0.05; done" 2> /dev/null
el=$(($(now_ms) - t0))
expect_eq "$RC" 75 "--on-lost=kill -> 75"
expect_range "$el" 300 4000 "killed without waiting for the grace period (ms)"

# 5. --on-lost=ignore: COMMAND finishes; its status is returned; warned.
run_rc "$DLOCK_BIN" --lease 0.3 --on-lost=ignore soft -- sh -c "sleep 0.8; exit 6" 2> "$T_DIR/err"
expect_eq "$RC" 6 "--on-lost=ignore returns COMMAND's status"
expect_match "$(cat "$T_DIR/err")" "lost" "--on-lost=ignore still warns"

# 6. An admin's `release --force` while COMMAND runs: the watchdog notices.
rm -f "$T_DIR/pid"
bg "$DLOCK_BIN" --watchdog-lease 1 forced -- sh -c "echo \$\$ > $T_DIR/pid; exec sleep 30"
p=$BG_PID
wait_until 5 test -s "$T_DIR/pid"
out=$("$DLOCK_BIN" release --force forced)
expect_match "$out" "^removed lock 'forced'" "release --force says what it removed"
wait_rc "$p"
expect_eq "$RC" 75 "holder of a force-released lock stops COMMAND -> 75"
