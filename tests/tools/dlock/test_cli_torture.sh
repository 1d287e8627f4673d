#!/bin/bash
# test_cli_torture.sh: `dlock torture` against a private redis-server and a
# Sentinel set: it refuses to run without --prefix or on a used prefix,
# passes a safe set-up (fencing on), catches an unsafe one (pauses longer
# than the lease, storage ignoring tokens: exit 2, lost updates / token
# order reported), writes its history and JSON, works through
# redis-sentinel://, stops cleanly on SIGINT, and leaves no key behind
# while never touching a key outside its prefix.
. "$(dirname "$0")/lib.sh"
trap 'dl_cleanup; t_cleanup' EXIT   # the sentinels are scripts/lib.sh's
start_redis

# Keys that are not torture's: their names and values must survive.
rcli set app:config 42 >/dev/null
rcli rpush tort:list a b >/dev/null   # shares a prefix start with "tort:x:", not the prefix
rcli set 'torture*glob' 1 >/dev/null
snapshot() { for k in $(rcli --scan | sort); do printf '%s=%s\n' "$k" "$(rcli dump "$k" | od -An -tx1 | tr -d ' \n')"; done; }
before=$(snapshot)

run_rc "$DLOCK_BIN" torture --duration 1s
expect_eq "$RC" 64 "no --prefix: usage error"
run_rc "$DLOCK_BIN" torture --prefix app: --duration 1s
expect_eq "$RC" 4 "a prefix with keys is refused"
expect_eq "$(rcli get app:config)" 42 "the refused run touched nothing"

short=(--duration 3s --lease 300ms --pause 750ms --pause-every 400ms)
run_rc "$DLOCK_BIN" torture --prefix 'tort:x:' "${short[@]}" --history "$T_DIR/safe.history" >"$T_DIR/safe.out"
cat "$T_DIR/safe.out"
expect_eq "$RC" 0 "fencing on, pauses past the lease: SAFE"
expect_match "$(cat "$T_DIR/safe.out")" 'verdict: SAFE' "the verdict is printed"
expect_match "$(cat "$T_DIR/safe.out")" 'writes refused: [1-9]' "stale holders' writes were refused"
expect_match "$(grep -c '^hold ' "$T_DIR/safe.history")" '^[1-9][0-9]*$' "history has holdings"
expect_match "$(grep -c '^pause ' "$T_DIR/safe.history")" '^[1-9][0-9]*$' "history has pauses"

run_rc "$DLOCK_BIN" torture --prefix 'tort:x:' "${short[@]}" --no-fence --json >"$T_DIR/unsafe.json"
cat "$T_DIR/unsafe.json"
expect_eq "$RC" 2 "lease shorter than the pause, no fencing: UNSAFE"
caught=$("$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))
print(v["verdict"], "caught" if v["lost_updates"] > 0 or v["tokens_out_of_order"] > 0 or v["overlaps"] > 0 else "missed")' \
    "$T_DIR/unsafe.json")
expect_eq "$caught" "UNSAFE caught" "the JSON verdict names the violation"

expect_eq "$(snapshot)" "$before" "keys outside the prefix unchanged, none left under it"

# Through Sentinel: the master is found by name.
dl_start_sentinels "$T_DIR" "$REDIS_PORT" tmaster || fail "sentinels did not start"
first=$(echo $SENTINEL_PORTS | cut -d' ' -f1)
second=$(echo $SENTINEL_PORTS | cut -d' ' -f2)
run_rc "$DLOCK_BIN" torture --url "redis-sentinel://127.0.0.1:$first,127.0.0.1:$second/tmaster" \
    --prefix 'tort:s:' "${short[@]}"
expect_eq "$RC" 0 "SAFE through redis-sentinel://"

# SIGINT: workers stopped (no process left), keys deleted, 128+2.
"${DEFSIG[@]}" "$DLOCK_BIN" torture --prefix 'tort:i:' --duration 30s --lease 300ms &
tpid=$!
T_PIDS+=("$tpid")
wait_until 5 sh -c "[ \$(pgrep -c -P $tpid) -ge 3 ]"
sleep 0.5
kill -INT "$tpid"
wait_rc "$tpid"
expect_eq "$RC" 130 "SIGINT: exit 128+2"
expect_eq "$(pgrep -c -P "$tpid")" 0 "no worker left"
expect_eq "$(snapshot)" "$before" "keys deleted after SIGINT"
