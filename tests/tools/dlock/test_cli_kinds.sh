# test_cli_kinds.sh: --semaphore N lets at most N COMMANDs run at once;
# --read shares, --write excludes; --fair serves waiters first come, first
# served; a kind without a lost-lock callback (semaphore, write) still
# stops COMMAND with 75 when its keys vanish.
. "$(dirname "$0")/lib.sh"
start_redis

# Semaphore 2, five jobs: each notes how many run with it (INCR), lingers.
job="n=\$(redis-cli -p $REDIS_PORT incr running); echo \$n >> $T_DIR/seen; sleep 0.4; redis-cli -p $REDIS_PORT decr running > /dev/null"
pids=()
for i in 1 2 3 4 5; do bg "$DLOCK_BIN" --semaphore 2 sem -c "$job"; pids+=("$BG_PID"); done
for p in "${pids[@]}"; do wait_rc "$p"; expect_eq "$RC" 0 "semaphore job exit status"; done
expect_eq "$(wc -l < "$T_DIR/seen")" 5 "all five semaphore jobs ran"
expect_eq "$(sort -n "$T_DIR/seen" | tail -1)" 2 "never more than 2 at once"

rm -f "$T_DIR/ready"
gate="while [ ! -e $T_DIR/sem-go ]; do sleep 0.02; done"
bg "$DLOCK_BIN" --semaphore 2 sem2 -- sh -c "touch $T_DIR/ready; $gate"
a=$BG_PID
bg "$DLOCK_BIN" --semaphore 2 sem2 -- sh -c "$gate"
b=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
wait_until 5 sh -c "\"$DLOCK_BIN\" status --semaphore 2 sem2 | grep -q '0 of 2 permits free'"
pass "status --semaphore shows no free permit"
run_rc "$DLOCK_BIN" -n --semaphore 2 sem2 -- true
expect_eq "$RC" 1 "third holder of a 2-semaphore with -n -> conflict"
run_rc "$DLOCK_BIN" -n --semaphore 3 sem2 -- true 2> "$T_DIR/err"
expect_eq "$RC" 64 "a different N for a semaphore in use -> 64"
# the N in use and how to fix it or reset it
expect_eq "$(cat "$T_DIR/err")" "dlock: semaphore 'sem2' is in use with N = 2, not 3: give --semaphore 2 \
(every user of a name gives the same N); to change N, stop its holders, then delete the keys \
'{sem2}:sem', '{sem2}:sem:exp' and '{sem2}:sem:cnt'" "message names the N in use and the reset"
touch "$T_DIR/sem-go"
wait_rc "$a"; expect_eq "$RC" 0 "first semaphore holder"
wait_rc "$b"; expect_eq "$RC" 0 "second semaphore holder"

# Read-write: two readers overlap (each waits for the other); a writer
# cannot join; a held writer keeps readers out.
bg "$DLOCK_BIN" -w 20 --read rw -- sh -c "touch $T_DIR/r1; while [ ! -e $T_DIR/r2 ]; do sleep 0.02; done"
r1=$BG_PID
run_rc "$DLOCK_BIN" -w 10 --read rw -- sh -c "touch $T_DIR/r2; while [ ! -e $T_DIR/r1 ]; do sleep 0.02; done; $DLOCK_BIN -n --write rw -- true; echo \$? > $T_DIR/w"
expect_eq "$RC" 0 "second reader ran while the first held the read side"
wait_rc "$r1"
expect_eq "$RC" 0 "first reader finished once the second had joined"
expect_eq "$(cat "$T_DIR/w")" 1 "writer -n while readers hold -> conflict"
rm -f "$T_DIR/ready"
bg "$DLOCK_BIN" --write rw -- sh -c "touch $T_DIR/ready; while [ ! -e $T_DIR/w-go ]; do sleep 0.02; done"
w=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
run_rc "$DLOCK_BIN" -n --read rw -- true
expect_eq "$RC" 1 "reader -n while a writer holds -> conflict"
touch "$T_DIR/w-go"
wait_rc "$w"
expect_eq "$RC" 0 "writer finished"

# Fair: three waiters queue behind a holder and run in arrival order.
rm -f "$T_DIR/ready" "$T_DIR/order"
bg "$DLOCK_BIN" --fair fair -- sh -c "touch $T_DIR/ready; while [ ! -e $T_DIR/go ]; do sleep 0.02; done"
h=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
ws=()
i=0
for n in first second third; do
    bg "$DLOCK_BIN" --fair fair -- sh -c "echo $n >> $T_DIR/order"
    ws+=("$BG_PID")
    i=$((i + 1))
    # queued (behind the library: its queue list) before the next one starts
    wait_until 10 sh -c "[ \"\$(redis-cli -p $REDIS_PORT llen '{fair}:fair:q')\" -ge $i ]"
done
touch "$T_DIR/go"
wait_rc "$h"
for p in "${ws[@]}"; do wait_rc "$p"; expect_eq "$RC" 0 "fair waiter exit status"; done
expect_eq "$(tr '\n' ' ' < "$T_DIR/order")" "first second third " "fair lock served in arrival order"

# Lost without a callback: the keys vanish, the watchdog notices.
for kind in "--semaphore 2" "--write"; do
    rm -f "$T_DIR/pid"
    bg "$DLOCK_BIN" --watchdog-lease 1 $kind lostk -- sh -c "echo \$\$ > $T_DIR/pid; exec sleep 30"
    p=$BG_PID
    wait_until 5 test -s "$T_DIR/pid"
    rcli flushall > /dev/null
    wait_rc "$p"
    expect_eq "$RC" 75 "$kind: keys deleted under a running COMMAND -> 75"
done
