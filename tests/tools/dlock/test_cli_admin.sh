# test_cli_admin.sh: `dlock status` (text and --json) reports free/held,
# the holder, the TTL and the last fencing token; `release --force` removes
# a held lock and says what it removed; the reentrant layout is a hash.
. "$(dirname "$0")/lib.sh"
start_redis

out=$("$DLOCK_BIN" status job); expect_match "$out" "^lock 'job': free" "status of a free lock"
out=$("$DLOCK_BIN" release --force job)
expect_match "$out" "free: nothing removed" "release --force of a free lock"

rm -f "$T_DIR/fence"
bg "$DLOCK_BIN" job -- sh -c "echo \$DLOCK_FENCE > $T_DIR/fence; sleep 30"
p=$BG_PID
wait_until 5 test -s "$T_DIR/fence"
fence=$(cat "$T_DIR/fence")
token=$(rcli get job)
out=$("$DLOCK_BIN" status job)
expect_match "$out" "^lock 'job': held" "status of a held lock"
expect_match "$out" "holder: +$token" "status shows the holder's token"
expect_match "$out" "last fence: $fence" "status shows the last fencing token"
"$DLOCK_BIN" status --json job > "$T_DIR/json"
"$PY" - "$T_DIR/json" "$token" "$fence" <<'PY' || fail "status --json: $(cat "$T_DIR/json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["held"] is True, d
assert d["holder"] == sys.argv[2], d
assert d["last_fence"] == int(sys.argv[3]), d
assert 0 < d["ttl_ms"] <= 30000, d
assert d["layout"] == "simple", d
PY
pass "status --json is valid and right"

out=$("$DLOCK_BIN" release --force job)
expect_match "$out" "^removed lock 'job' .*holder $token" "release --force names what it removed"
expect_eq "$(rcli exists job)" 0 "key gone after release --force"
kill -TERM "$p"
wait_rc "$p"

# Reentrant layout (Redisson): a hash whose field is the holder.
rm -f "$T_DIR/ready"
bg "$DLOCK_BIN" --reentrant rjob -- sh -c "touch $T_DIR/ready; sleep 30"
p=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
expect_eq "$(rcli type rjob)" hash "--reentrant keeps a hash"
out=$("$DLOCK_BIN" status rjob)
expect_match "$out" "layout: +reentrant" "status detects the reentrant layout"
expect_match "$out" "hold count: 1" "status shows the hold count"
run_rc "$DLOCK_BIN" -n --reentrant rjob -- true
expect_eq "$RC" 1 "a second reentrant dlock is another owner: conflict"
kill -TERM "$p"
wait_rc "$p"
expect_eq "$RC" 143 "reentrant holder terminated"
expect_eq "$(rcli exists rjob)" 0 "reentrant lock released"

# --prefix changes the key.
"$DLOCK_BIN" --prefix app: pjob -- sh -c "test \"\$(redis-cli -p $REDIS_PORT exists app:pjob)\" = 1" \
    || fail "--prefix: key app:pjob not present while held"
pass "--prefix puts the lock at <prefix><name>"

# Odd names are fine in JSON.
out=$("$DLOCK_BIN" status --json 'we"ird\name')
"$PY" -c 'import json,sys; assert json.loads(sys.argv[1])["name"] == "we\"ird\\name"' "$out" \
    || fail "JSON escaping: $out"
pass "status --json escapes names"
