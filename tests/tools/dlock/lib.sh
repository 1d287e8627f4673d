# lib.sh: fixture for the dlock CLI tests (sourced by tests/tools/dlock/test_*.sh).
# Starts a private redis-server on a free 127.0.0.1 port (never 6379) in a
# temp dir, with PR_SET_PDEATHSIG so it dies with the test even on kill -9
# (where the kernel delivers it),
# and stops it and every process the test started by PID on exit.
set -u
. "${DLOCK_SOURCE_DIR:?set DLOCK_SOURCE_DIR}/scripts/lib.sh"

DLOCK_BIN=${DLOCK_BIN:-${DLOCK_BUILD_DIR:?set DLOCK_BUILD_DIR}/tools/dlock/dlock}
T_DIR=$(mktemp -d /tmp/dlock-cli-XXXXXX)
T_PIDS=()
T_NAME=$(basename "$0" .sh)
REDIS_PORT=
REDIS_PID=
REDIS_URL=

t_cleanup() {
    local p
    for p in "${T_PIDS[@]}"; do
        kill -CONT "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$T_DIR"
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM HUP

fail() {
    echo "FAIL [$T_NAME]: $*" >&2
    if [ -n "$REDIS_PID" ] && [ -f "$T_DIR/redis.log" ]; then
        echo "--- redis log tail" >&2
        tail -5 "$T_DIR/redis.log" >&2
    fi
    exit 1
}
pass() { echo "ok   [$T_NAME] $*"; }

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
    [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
    pass "$3 ($1)"
}
# expect_range VALUE LO HI WHAT (integers)
expect_range() {
    [ "$1" -ge "$2" ] && [ "$1" -le "$3" ] || fail "$4: $1 not in [$2, $3]"
    pass "$4 ($1 in [$2, $3])"
}
# expect_match TEXT REGEX WHAT
expect_match() {
    printf '%s' "$1" | grep -Eq -- "$2" || fail "$3: '$1' does not match /$2/"
    pass "$3"
}

now_ms() { date +%s%3N; }

# wait_until TIMEOUT_S CMD...: polls CMD every 20 ms; fails the test on timeout.
wait_until() {
    local deadline=$(($(now_ms) + $1 * 1000))
    shift
    until "$@"; do
        [ "$(now_ms)" -lt "$deadline" ] || fail "timed out waiting for: $*"
        sleep 0.02
    done
}

# Command prefixes (arrays, so "$@" & forks one process whose PID is the
# program's own: a shell function would put a subshell in between); the
# parent-death one, DL_PDEATHSIG, and dl_free_port come from scripts/lib.sh.
# DEFSIG: run with SIGINT/SIGQUIT/SIGPIPE at their defaults (a
# non-interactive shell starts background jobs with SIGINT/SIGQUIT ignored).
DEFSIG=("$PY" -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE):
    signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')

# start_redis [redis-server options...]: sets REDIS_PORT, REDIS_PID, REDIS_URL.
start_redis() {
    REDIS_PORT=$(dl_free_port)
    "${DL_PDEATHSIG[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$T_DIR" --logfile "$T_DIR/redis.log" "$@" &
    REDIS_PID=$!
    T_PIDS+=("$REDIS_PID")
    REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
    export DLOCK_URL="$REDIS_URL"
    local i
    for i in $(seq 1 250); do
        if redis-cli -p "$REDIS_PORT" --no-auth-warning ${REDIS_PASS:+-a "$REDIS_PASS"} ping \
            2>/dev/null | grep -q PONG; then
            return 0
        fi
        kill -0 "$REDIS_PID" 2>/dev/null || fail "redis-server exited at start"
        sleep 0.02
    done
    fail "redis-server on port $REDIS_PORT did not answer PING"
}

rcli() { redis-cli -p "$REDIS_PORT" --no-auth-warning ${REDIS_PASS:+-a "$REDIS_PASS"} "$@"; }

# bg CMD...: starts CMD in the background, records its PID in BG_PID.
bg() {
    "$@" &
    BG_PID=$!
    T_PIDS+=("$BG_PID")
}

# wait_rc PID: waits for a background job; its exit status goes to RC.
wait_rc() {
    RC=0
    wait "$1" || RC=$?
}

# run_rc CMD...: runs CMD in the foreground; its exit status goes to RC.
run_rc() {
    RC=0
    "$@" || RC=$?
}

[ -x "$DLOCK_BIN" ] || fail "dlock binary not found at $DLOCK_BIN"
