# test_cli_exit.sh: COMMAND's exit status passes through (128+N when killed
# by signal N), 126/127 for a command that cannot run, arguments pass
# untouched, the child sees DLOCK_NAME and DLOCK_FENCE, and fencing tokens
# strictly increase across runs.
. "$(dirname "$0")/lib.sh"
start_redis

run_rc "$DLOCK_BIN" x -- true;                 expect_eq "$RC" 0 "true -> 0"
run_rc "$DLOCK_BIN" x -- sh -c 'exit 42';      expect_eq "$RC" 42 "exit 42 passes through"
run_rc "$DLOCK_BIN" x -c 'exit 5';             expect_eq "$RC" 5 "-c 'exit 5' passes through"
run_rc "$DLOCK_BIN" x -- sh -c 'kill -KILL $$'; expect_eq "$RC" 137 "killed by SIGKILL -> 137"
run_rc "$DLOCK_BIN" x -- sh -c 'kill -USR1 $$'; expect_eq "$RC" 138 "killed by SIGUSR1 -> 138"
run_rc "$DLOCK_BIN" x -- /nonexistent/cmd 2> "$T_DIR/err"
expect_eq "$RC" 127 "missing command -> 127"
expect_match "$(cat "$T_DIR/err")" "command not found" "missing command message"
run_rc "$DLOCK_BIN" x -- "$T_DIR" 2> /dev/null
expect_eq "$RC" 126 "directory as command -> 126"
expect_eq "$(rcli exists x)" 0 "lock released after a failed exec"

out=$("$DLOCK_BIN" x -- printf '%s|' 'a b' -n -- '$HOME')
expect_eq "$out" 'a b|-n|--|$HOME|' "COMMAND's arguments pass untouched"
out=$("$DLOCK_BIN" x -- sh -c 'echo "$DLOCK_NAME"')
expect_eq "$out" "x" "DLOCK_NAME in the child"

prev=0
for i in 1 2 3 4 5; do
    f=$("$DLOCK_BIN" fenced -- sh -c 'echo "$DLOCK_FENCE"')
    expect_match "$f" '^[0-9]+$' "DLOCK_FENCE is a number"
    [ "$f" -gt "$prev" ] || fail "fence $f not greater than previous $prev"
    prev=$f
done
pass "DLOCK_FENCE strictly increased over 5 runs (last $prev)"
f=$("$DLOCK_BIN" --reentrant fenced-r -- sh -c 'echo "$DLOCK_FENCE"')
g=$("$DLOCK_BIN" --reentrant fenced-r -- sh -c 'echo "$DLOCK_FENCE"')
[ "$g" -gt "$f" ] || fail "reentrant fence $g not greater than $f"
pass "reentrant DLOCK_FENCE increased ($f -> $g)"

# COMMAND inherits the descriptors dlock was given, but none of the
# library's Redis sockets.
"$DLOCK_BIN" fds -- sh -c 'echo via-fd7 >&7' 7> "$T_DIR/fd7"
expect_eq "$(cat "$T_DIR/fd7")" "via-fd7" "a descriptor given to dlock reaches COMMAND"
socks=$("$DLOCK_BIN" fds -- sh -c 'ls -l /proc/$$/fd | grep -c socket:' || true)
expect_eq "$socks" 0 "no Redis socket leaks into COMMAND"
