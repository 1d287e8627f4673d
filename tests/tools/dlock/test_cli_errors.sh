# test_cli_errors.sh: bad options (64), a malformed URL (78), an unreachable
# server (69), a refused password (77): each one clear "dlock:" line on
# stderr, nothing run, no crash; --help and --version work.
. "$(dirname "$0")/lib.sh"

# expect_fail CODE WHAT dlock-args...: exit CODE, stderr starts "dlock: ",
# at most 2 lines (message + hint), COMMAND never ran.
expect_fail() {
    local code=$1 what=$2
    shift 2
    rm -f "$T_DIR/ran"
    run_rc "$DLOCK_BIN" "$@" 2> "$T_DIR/err" > "$T_DIR/out"
    expect_eq "$RC" "$code" "$what"
    head -1 "$T_DIR/err" | grep -q '^dlock: ' || fail "$what: stderr is '$(cat "$T_DIR/err")'"
    [ "$(wc -l < "$T_DIR/err")" -le 2 ] || fail "$what: more than 2 stderr lines: $(cat "$T_DIR/err")"
    [ ! -e "$T_DIR/ran" ] || fail "$what: COMMAND ran"
}
T="touch $T_DIR/ran"

expect_fail 64 "no arguments"
expect_fail 64 "unknown option" --bogus x -- $T
expect_fail 64 "unknown short option" -q x -- $T
expect_fail 64 "unknown short option in a cluster" -nq x -- $T
expect_fail 64 "missing COMMAND" x
expect_fail 64 "missing COMMAND after --" x --
expect_fail 64 "-w without value" -w
expect_fail 64 "-w not a number" -w abc x -- $T
expect_fail 64 "-w negative" -w -1 x -- $T
expect_fail 64 "-w nan" -w nan x -- $T
expect_fail 64 "-w inf" -w inf x -- $T
expect_fail 64 "-w 1e3 (exponent)" -w 1e3 x -- $T
expect_fail 64 "-w too large" -w 99999999999 x -- $T
expect_fail 64 "-w finer than 1 ms" -w 0.0001 x -- $T
expect_fail 64 "-w unknown unit" -w 5d x -- $T
expect_fail 64 "--lease 0ms" --lease 0ms x -- $T
expect_fail 64 "--watchdog-lease below 300ms" --watchdog-lease 299ms x -- $T
expect_fail 64 "-E 256" -E 256 x -- $T
expect_fail 64 "-E junk" -E 1x x -- $T
expect_fail 64 "--lease 0" --lease 0 x -- $T
expect_fail 64 "--on-lost bad" --on-lost=maybe x -- $T
expect_fail 64 "--semaphore 0" --semaphore 0 x -- $T
expect_fail 64 "--read with --write" --read --write x -- $T
expect_fail 64 "--reentrant with --fair" --reentrant --fair x -- $T
expect_fail 64 "empty NAME" "" -- $T
expect_fail 64 "release without --force" release x
expect_fail 64 "status without NAME" status
expect_fail 64 "status with extra argument" status x y
expect_fail 64 "--json outside status" --json x -- $T
expect_fail 64 "-c with COMMAND too" x -c "$T" extra

# expect_msg LINE WHAT: the first stderr line of the last expect_fail, exactly.
expect_msg() { expect_eq "$(head -1 "$T_DIR/err")" "$1" "$2: message"; }

# Each message says what to do: examples inside the range, the
# conflicting leases refused, every URL scheme listed.
expect_fail 64 "--watchdog-lease 200ms" --watchdog-lease 200ms x -- $T
expect_msg "dlock: invalid --watchdog-lease '200ms': expected a duration from 300ms to 720h \
(e.g. 1.5s, 2m, 1h; a bare number is seconds)" "--watchdog-lease 200ms"
expect_fail 64 "--lease with --watchdog-lease" --lease 10s --watchdog-lease 3s x -- $T
expect_msg "dlock: --lease (fixed, never renewed) and --watchdog-lease (renewed) exclude each other: \
give one of them" "--lease with --watchdog-lease"
expect_fail 78 "URL scheme unknown" -u http://127.0.0.1:1 x -- $T
expect_msg "dlock: bad URL 'http://127.0.0.1:1': unknown scheme (expected redis://, unix://, \
redis-sentinel://, redis-cluster://, etcd:// or etcds://)" "URL scheme unknown"
# options before a subcommand are the subcommand's (not a lock named status)
port=$(dl_free_port)
expect_fail 69 "options before status" -u "redis://127.0.0.1:$port" status x
expect_msg "dlock: cannot connect to Redis at redis://127.0.0.1:$port: connect: Connection refused" \
    "options before status"
expect_fail 64 "release before --force" -u "redis://127.0.0.1:$port" release x
expect_msg "dlock: 'release' removes the lock whoever holds it: confirm with --force" "release before --force"
expect_fail 69 "unreachable etcd" -u "etcd://127.0.0.1:$port" x -- $T
expect_msg "dlock: cannot connect to etcd at etcd://127.0.0.1:$port: http://127.0.0.1:$port: \
Couldn't connect to server" "unreachable etcd"

# Bad URLs: rejected before any connection.
expect_fail 78 "URL with a bad scheme" --url http://127.0.0.1:1 x -- $T
expect_fail 78 "URL with a bad port" --url redis://127.0.0.1:99999 x -- $T
DLOCK_URL=redis://127.0.0.1:notaport expect_fail 78 "bad DLOCK_URL" x -- $T
expect_fail 78 "bad URL for status" status --url 'redis://:x@' x

# Unreachable: a port nobody listens on.
port=$(dl_free_port)
t0=$(now_ms)
expect_fail 69 "unreachable server" --url "redis://127.0.0.1:$port" x -- $T
expect_range "$(($(now_ms) - t0))" 0 5000 "unreachable reported quickly (ms)"
expect_match "$(cat "$T_DIR/err")" "127.0.0.1:$port" "message names the server"
expect_fail 69 "unreachable for status" status --url "redis://127.0.0.1:$port" x

# A server with a password.
REDIS_PASS=s3cret-pw
start_redis --requirepass "$REDIS_PASS"
expect_fail 77 "wrong password" --url "redis://:wrong-pw@127.0.0.1:$REDIS_PORT" x -- $T
if grep -q wrong-pw "$T_DIR/err"; then fail "the password appears in the message"; fi
pass "password not echoed"
expect_fail 77 "no password" --url "redis://127.0.0.1:$REDIS_PORT" x -- $T
run_rc "$DLOCK_BIN" --url "redis://:$REDIS_PASS@127.0.0.1:$REDIS_PORT" x -- true
expect_eq "$RC" 0 "right password"

# A server that does not answer (CLIENT PAUSE) is "unreachable" too, within
# the command timeout (a third of --watchdog-lease, here 0.3 s), not a hang.
rcli client pause 2000 all > /dev/null
t0=$(now_ms)
expect_fail 69 "server not answering" --watchdog-lease 0.9 \
    --url "redis://:$REDIS_PASS@127.0.0.1:$REDIS_PORT" x -- $T
expect_range "$(($(now_ms) - t0))" 0 1900 "no answer reported before the pause ended (ms)"
expect_match "$(cat "$T_DIR/err")" "127.0.0.1:$REDIS_PORT" "message names the server"
rcli client unpause > /dev/null # (itself waits for the pause to end)

# --wait-replicas: out of range, on etcd, and on a server with no replica
# (nothing held afterwards: the acquisition is given back).
expect_fail 64 "--wait-replicas 65" --wait-replicas 65 x -- $T
expect_fail 64 "--wait-replicas on etcd" -u etcd://127.0.0.1:1 --wait-replicas 1 x -- $T
expect_msg "dlock: --wait-replicas is for Redis: etcd acknowledges every write on a majority of its members \
already; leave it out" "--wait-replicas on etcd"
expect_fail 69 "--wait-replicas 1 without a replica" --wait-replicas 1 \
    --url "redis://:$REDIS_PASS@127.0.0.1:$REDIS_PORT" wr -- $T
expect_match "$(cat "$T_DIR/err")" "replicas" "the message says replicas were missing"
expect_eq "$("$DLOCK_BIN" -u "redis://:$REDIS_PASS@127.0.0.1:$REDIS_PORT" status wr | head -1)" \
    "lock 'wr': free" "nothing held after a refused --wait-replicas"
# ... and with a replica attached, the same command runs (held and renewed
# with the replica's acknowledgement)
master_port=$REDIS_PORT master_pid=$REDIS_PID
rcli config set repl-diskless-sync-delay 0 > /dev/null # the replica syncs at once, not in 5 s
start_redis --requirepass "$REDIS_PASS" --masterauth "$REDIS_PASS" --replicaof 127.0.0.1 "$master_port"
REDIS_PORT=$master_port REDIS_PID=$master_pid
# ready when a write of ours is acknowledged by the replica: a WAIT on a
# connection that wrote nothing counts a replica that is still waiting to
# send its first REPLCONF ACK (after a diskless sync the master streams to
# it only from then on, which may take up to a second)
for i in $(seq 1 100); do
    [ "$(printf 'SET dlock:test:replicated 1\nWAIT 1 100\n' | rcli | tail -1)" = 1 ] && break
    sleep 0.05
done
run_rc "$DLOCK_BIN" --wait-replicas 1 --watchdog-lease 3s --url "redis://:$REDIS_PASS@127.0.0.1:$REDIS_PORT" \
    wr -- sleep 1.5
expect_eq "$RC" 0 "--wait-replicas 1 with a replica: COMMAND ran through renewals"

# Options before and after a subcommand; a lock named status behind "--".
U="redis://:$REDIS_PASS@127.0.0.1:$REDIS_PORT"
expect_eq "$("$DLOCK_BIN" -u "$U" status x | head -1)" "lock 'x': free" "options before status"
expect_eq "$("$DLOCK_BIN" status -u "$U" x | head -1)" "lock 'x': free" "options after status"
run_rc "$DLOCK_BIN" -u "$U" -- status -- sh -c 'echo "$DLOCK_NAME" > "$1"' sh "$T_DIR/name"
expect_eq "$RC:$(cat "$T_DIR/name")" "0:status" "'dlock -- status -- COMMAND' locks 'status'"
run_rc "$DLOCK_BIN" release -u "$U" --force release
expect_eq "$RC" 0 "'release --force release' reads a lock named release"

# A bare duration still reads as seconds but is deprecated: one warning
# line; with a unit (or 0), none.
run_rc "$DLOCK_BIN" -u "$U" -w 5 x -- true 2> "$T_DIR/err"
expect_eq "$RC:$(cat "$T_DIR/err")" "0:dlock: warning: --wait 5: a bare number is seconds here but \
milliseconds in other programs of dlock; write 5s (bare numbers are deprecated and will be refused \
in 2.0)" "bare -w 5 warns"
run_rc "$DLOCK_BIN" -u "$U" -w 5s --lease 2.5s x -- true 2> "$T_DIR/err"
expect_eq "$RC:$(cat "$T_DIR/err")" "0:" "-w 5s: no warning"
run_rc "$DLOCK_BIN" -u "$U" -w 0 x -- true 2> "$T_DIR/err"
expect_eq "$RC:$(cat "$T_DIR/err")" "0:" "-w 0: no warning"

# A name past the library's limit is refused cleanly.
long=$(head -c 2000 /dev/zero | tr '\0' n)
expect_fail 64 "2000-byte NAME" --url "redis://:$REDIS_PASS@127.0.0.1:$REDIS_PORT" "$long" -- $T

run_rc "$DLOCK_BIN" --help > "$T_DIR/out"
expect_eq "$RC" 0 "--help exits 0"
expect_match "$(cat "$T_DIR/out")" "Usage:" "--help prints usage"
# --help names every long option dlock accepts (the table in tools/dlock/options.c).
opts=$(grep -oE '(\.name = |DUR\(|TRIGGER\(|FLAG\()"[a-z-]+"' "$DLOCK_SOURCE_DIR/tools/dlock/options.c" | grep -oE '"[a-z-]+"' | tr -d '"')
[ -n "$opts" ] || fail "no options found in tools/dlock/options.c"
for opt in $opts; do
    grep -q -- "--$opt" "$T_DIR/out" || fail "--help does not list --$opt"
done
pass "--help lists every option"
expect_eq "$("$DLOCK_BIN" --version)" "dlock 1.1.0" "--version"
