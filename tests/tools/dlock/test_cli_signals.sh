# test_cli_signals.sh: SIGTERM/SIGINT/SIGHUP sent to dlock reach COMMAND
# (its whole process group); the lock stays held until COMMAND exited and
# is released after; a signal while waiting for the lock stops the wait
# (128+N) without running COMMAND.
. "$(dirname "$0")/lib.sh"
start_redis

# COMMAND traps the signal, notes it, lingers 0.4 s, exits 3.
for sig in TERM INT HUP; do
    rm -f "$T_DIR/ready" "$T_DIR/got"
    bg "${DEFSIG[@]}" "$DLOCK_BIN" sig -- sh -c "
        trap 'echo $sig > $T_DIR/got; sleep 0.4; exit 3' $sig
        touch $T_DIR/ready
        while :; do sleep 0.05; done"
    p=$BG_PID
    wait_until 5 test -e "$T_DIR/ready"
    kill -"$sig" "$p"
    wait_until 5 test -s "$T_DIR/got"
    expect_eq "$(rcli exists sig)" 1 "SIG$sig: lock still held while COMMAND handles it"
    wait_rc "$p"
    expect_eq "$RC" 3 "SIG$sig forwarded; COMMAND's exit status returned"
    expect_eq "$(cat "$T_DIR/got")" "$sig" "COMMAND got SIG$sig"
    expect_eq "$(rcli exists sig)" 0 "SIG$sig: lock released after COMMAND exited"
done

# A grandchild in COMMAND's process group gets the signal too.
rm -f "$T_DIR/ready"
bg "${DEFSIG[@]}" "$DLOCK_BIN" sig -c "
    sh -c 'echo \$\$ > $T_DIR/grandchild; exec sleep 30' &
    touch $T_DIR/ready; wait"
p=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
wait_until 5 test -s "$T_DIR/grandchild"
kill -TERM "$p"
wait_rc "$p"
expect_eq "$RC" 143 "SIGTERM to dlock: shell COMMAND killed -> 143"
gc=$(cat "$T_DIR/grandchild")
wait_until 5 sh -c "! kill -0 $gc 2>/dev/null"
pass "grandchild in COMMAND's group was signalled too"

# Interrupting a wait: no COMMAND, exit 128+2, holder untouched. The
# waiter's -v line shows its handlers are in place and it is acquiring.
rm -f "$T_DIR/ready"
bg "$DLOCK_BIN" busy -- sh -c "touch $T_DIR/ready; while [ ! -e $T_DIR/release ]; do sleep 0.02; done"
holder=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
bg "${DEFSIG[@]}" "$DLOCK_BIN" -v busy -- touch "$T_DIR/waiter-ran" 2> "$T_DIR/waiter.err"
w=$BG_PID
wait_until 10 grep -q "acquiring lock 'busy'" "$T_DIR/waiter.err"
sleep 0.2
t0=$(now_ms)
kill -INT "$w"
wait_rc "$w"
el=$(($(now_ms) - t0))
expect_eq "$RC" 130 "SIGINT while waiting for the lock -> 130"
expect_range "$el" 0 2000 "wait interrupted promptly (ms)"
expect_match "$(cat "$T_DIR/waiter.err")" "interrupted by signal 2" "dlock itself handled the SIGINT"
[ ! -e "$T_DIR/waiter-ran" ] || fail "COMMAND ran after the wait was interrupted"
expect_eq "$(rcli exists busy)" 1 "holder still holds the lock"
kill -TERM "$holder"
wait_rc "$holder"
expect_eq "$RC" 143 "holder's COMMAND terminated by forwarded SIGTERM"

# A signal ignored on entry (nohup) stays ignored for COMMAND.
rm -f "$T_DIR/ready"
bg nohup "$DLOCK_BIN" nohup -- sh -c "touch $T_DIR/ready; while [ ! -e $T_DIR/hup-sent ]; do sleep 0.02; done; sleep 0.2; exit 4" > /dev/null 2>&1
p=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
kill -HUP "$p"
touch "$T_DIR/hup-sent"
wait_rc "$p"
expect_eq "$RC" 4 "SIGHUP ignored under nohup: COMMAND ran to its end"

# dlock killed with SIGKILL: COMMAND gets SIGTERM (PR_SET_PDEATHSIG).
rm -f "$T_DIR/pid"
bg "$DLOCK_BIN" orphan -- sh -c "echo \$\$ > $T_DIR/pid; exec sleep 30"
p=$BG_PID
wait_until 5 test -s "$T_DIR/pid"
kill -KILL "$p"
wait_rc "$p"
child=$(cat "$T_DIR/pid")
wait_until 3 sh -c "! kill -0 $child 2>/dev/null"
pass "COMMAND terminated when dlock was killed with SIGKILL"

# On a terminal (script(1) gives a pty), COMMAND gets the terminal: it is
# the foreground group, reads its input, and ^C reaches it directly.
out=$(printf 'hello\n' | timeout 10 script -qec "$DLOCK_BIN tty -- sh -c 'ps -o pgid=,tpgid= -p \$\$; read line; echo got:\$line'" /dev/null | tr -d '\r')
set -- $(printf '%s\n' "$out" | grep -v hello | head -1)
expect_eq "${1:-x}" "${2:-y}" "COMMAND is the terminal's foreground group"
expect_match "$out" "got:hello" "COMMAND read from the terminal"
out=$( (sleep 0.5; printf '\003') | timeout 10 script -qec "$DLOCK_BIN tty -- sh -c 'trap \"echo INT; exit 7\" INT; while :; do sleep 0.05; done'; echo dlock-rc=\$?" /dev/null | tr -d '\r')
expect_match "$out" "dlock-rc=7" "^C on the terminal reached COMMAND; its status returned"
