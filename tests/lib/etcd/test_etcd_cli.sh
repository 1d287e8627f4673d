# test_etcd_cli.sh: the dlock CLI, unchanged, on an etcd URL (run by
# etcd_run, which sets DLOCK_URL to a private etcd): DLOCK_FENCE is the lock
# key's revision and grows; exclusion, -n and -w; `dlock status` shows
# holder, lease TTL and revision; `release --force` makes the holder's
# watchdog notice the loss (exit 75); a bad etcd URL is exit 78 and an
# unreachable one 69; --reentrant is 64; status says layout etcd; torture
# asks for a Redis --store-url. Helpers from tests/tools/dlock/lib.sh (no Redis started).
. "$(dirname "$0")/../../tools/dlock/lib.sh"
case "${DLOCK_URL:-}" in etcd://*) ;; *) fail "run me with etcd_run 1 DLOCK_URL bash $0" ;; esac

# 1. DLOCK_FENCE is the revision; a later holder's is greater.
f1=$("$DLOCK_BIN" job -c 'echo $DLOCK_FENCE')
f2=$("$DLOCK_BIN" job -c 'echo $DLOCK_FENCE')
expect_match "$f1" '^[1-9][0-9]*$' "DLOCK_FENCE is a revision"
[ "$f2" -gt "$f1" ] || fail "fence did not grow: $f1 then $f2"
pass "fences grow ($f1 < $f2)"

# 2. Exclusion: -n refuses while held, -w waits for the holder.
bg "$DLOCK_BIN" --watchdog-lease 3 job -- sh -c "echo \$DLOCK_FENCE > $T_DIR/fence; exec sleep 1.5"
p=$BG_PID
wait_until 5 test -s "$T_DIR/fence"
run_rc "$DLOCK_BIN" -n job -c true
expect_eq "$RC" 1 "-n while held -> 1"

# 3. status while held: holder (the lease id), ttl, revision = the holder's fence.
out=$("$DLOCK_BIN" status job)
expect_match "$out" "held" "status says held"
expect_match "$out" "holder: +[0-9a-f]{16}" "holder is the lease id"
expect_match "$out" "ttl: +[0-9]" "status shows the lease TTL"
expect_match "$out" "last fence: $(cat "$T_DIR/fence")\$" "status shows the holder's revision"
json=$("$DLOCK_BIN" status --json job)
expect_match "$json" "\"last_fence\":$(cat "$T_DIR/fence")" "status --json has the revision"
t0=$(now_ms)
run_rc "$DLOCK_BIN" -w 10 job -c 'echo $DLOCK_FENCE'
el=$(($(now_ms) - t0))
expect_eq "$RC" 0 "-w waits for the holder"
expect_range "$el" 500 5000 "served when the holder exited (ms)"
wait_rc "$p"
expect_eq "$RC" 0 "the holder's command finished"
out=$("$DLOCK_BIN" status job)
expect_match "$out" "free" "status says free afterwards"

# 4. release --force: the holder's next keepalive finds its lease revoked.
rm -f "$T_DIR/pid"
bg "$DLOCK_BIN" --watchdog-lease 1 forced -- sh -c "echo \$\$ > $T_DIR/pid; exec sleep 30"
p=$BG_PID
wait_until 5 test -s "$T_DIR/pid"
out=$("$DLOCK_BIN" release --force forced)
expect_match "$out" "^removed lock 'forced'" "release --force says what it removed"
wait_rc "$p"
expect_eq "$RC" 75 "the holder is told it lost the lock -> 75"

# 5. Bad and unreachable etcd URLs.
run_rc "$DLOCK_BIN" --url 'etcd://h:1,,h:2' job -c true
expect_eq "$RC" 78 "malformed etcd URL -> 78"
run_rc "$DLOCK_BIN" --url "etcd://127.0.0.1:$(dl_free_port)" job -c true
expect_eq "$RC" 69 "unreachable etcd -> 69"
run_rc "$DLOCK_BIN" --reentrant job -c true
expect_eq "$RC" 64 "a kind etcd does not offer -> 64 (docs/cli.md: a lock kind the backend lacks)"

# 6. status names no Redis layout on etcd.
bg "$DLOCK_BIN" layout -- sh -c "echo \$\$ > $T_DIR/lpid; exec sleep 30"
p=$BG_PID
wait_until 5 test -s "$T_DIR/lpid"
out=$("$DLOCK_BIN" status layout)
expect_match "$out" "layout: +etcd" "status on etcd says layout etcd"
printf '%s' "$out" | grep -q simple && fail "status on etcd says simple: $out"
json=$("$DLOCK_BIN" status --json layout)
expect_match "$json" '"layout":"etcd"' "status --json on etcd says layout etcd"
kill -TERM "$p"
wait_rc "$p"

# 7. torture on etcd: the fenced counter needs a Redis, so --store-url is
#    required (a run with one is tests/fault/test_lock_nemesis.sh via the
#    etcd_lock_nemesis test); without it a clear usage error, nothing runs.
run_rc "$DLOCK_BIN" torture --prefix t: --duration 1 2>"$T_DIR/err"
expect_eq "$RC" 64 "torture on etcd without --store-url -> 64"
expect_match "$(cat "$T_DIR/err")" "--url is etcd: give --store-url" "the error names --store-url"
