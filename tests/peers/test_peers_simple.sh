#!/bin/bash
# test_peers_simple.sh: dlock's simple lock (the dlock CLI) against the two
# peers whose layout it claims, on one key of a private redis-server:
# redis-py's Lock (Debian's python3-redis) and node `redlock` 5.0.0-beta.2
# over ioredis 5.4.1 (installed with npm by this test into a cache dir).
# For each peer, both ways:
#   A  the peer holds: `dlock -n` is refused; once released, dlock gets it
#   B  dlock holds: the peer is refused; once released, the peer gets it
#   C  dlock's lease ran out and the peer took the key: dlock's release is
#      refused (token mismatch), the peer still owns and releases its lock
#   D  the peer's lease ran out and dlock took the key: the peer's release
#      is refused, dlock still owns and releases its lock
# npm must reach the registry unless the cache already holds the pinned
# versions (DLOCK_PEERS_NODE_DIR, default <build>/peers-node): an
# unreachable registry fails this test, it never skips the node peer.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
here="$src/tests/peers"
. "$src/scripts/lib.sh"
DLOCK_BIN=${DLOCK_BIN:-$build/tools/dlock/dlock}
NODE_PKGS="redlock@5.0.0-beta.2 ioredis@5.4.1"
NODE_DIR=${DLOCK_PEERS_NODE_DIR:-$build/peers-node}
t=$(mktemp -d "${TMPDIR:-/tmp}/dlock-peers-XXXXXX")
trap 'dl_cleanup; rm -rf "$t"' EXIT
fail() { echo "FAIL [peers]: $*" >&2; exit 1; }
ok() { echo "ok   [peers] $*"; }

# --- the node peer's packages, pinned, installed once into the cache ---------
command -v node >/dev/null || fail "node not found (Debian package nodejs)"
if [ "$(cat "$NODE_DIR/.installed" 2>/dev/null)" != "$NODE_PKGS" ]; then
    command -v npm >/dev/null || fail "npm not found: it installs the node redlock peer"
    rm -rf "$NODE_DIR"
    mkdir -p "$NODE_DIR"
    # shellcheck disable=SC2086
    (cd "$NODE_DIR" && timeout 120 npm install --no-audit --no-fund --no-save --ignore-scripts \
        --fetch-retries=1 --loglevel=error $NODE_PKGS) >"$t/npm.log" 2>&1 ||
        { cat "$t/npm.log" >&2; fail "npm install $NODE_PKGS failed: is the npm registry reachable?"; }
    echo "$NODE_PKGS" >"$NODE_DIR/.installed"
fi
ok "node $(node --version) with $(cat "$NODE_DIR/.installed")"

dl_start_redis "$t"
export DLOCK_URL="redis://127.0.0.1:$REDIS_PORT"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

# peer_cmd NAME: sets P to the peer's command line (an array, so "${P[@]}" &
# gives the peer's own PID).
peer_cmd() {
    case $1 in
    redis-py) P=("$PY" "$here/peer_redis_py.py") ;;
    redlock) P=(env "PEER_NODE_MODULES=$NODE_DIR/node_modules" node "$here/peer_redlock.cjs") ;;
    esac
}
wait_file() {
    local i
    for i in $(seq 1 500); do [ -e "$1" ] && return 0; sleep 0.02; done
    fail "timed out waiting for $1"
}
wait_gone() {   # KEY: until its lease has run out on the server
    local i
    for i in $(seq 1 250); do [ "$(rcli exists "$1")" = 0 ] && return 0; sleep 0.02; done
    fail "key $1 did not expire"
}
# A dlock job holding KEY until file GO exists; sets DL_PID. Extra dlock
# options before KEY.
dlock_hold() {
    local held=$1 go=$2
    shift 2
    "$DLOCK_BIN" "$@" -- sh -c "touch '$held'; while [ ! -e '$go' ]; do sleep 0.02; done" \
        2>>"$t/dlock.err" &
    DL_PID=$!
    dl_track "$DL_PID"
}

for peer in redis-py redlock; do
    peer_cmd "$peer"
    d="$t/$peer"
    mkdir -p "$d"

    # A: the peer holds -> dlock -n refused; released -> dlock gets it
    key="peers:$peer:a"
    "${P[@]}" hold "$REDIS_PORT" "$key" 30000 "$d/a-held" "$d/a-go" >"$d/a.out" &
    pid=$!
    dl_track "$pid"
    wait_file "$d/a-held"
    rc=0
    "$DLOCK_BIN" -n "$key" -- touch "$d/a-ran" || rc=$?
    [ "$rc" = 1 ] || fail "$peer holds $key: dlock -n exited $rc, want 1 (busy)"
    [ ! -e "$d/a-ran" ] || fail "dlock ran its command while $peer held $key"
    touch "$d/a-go"
    wait "$pid" || fail "$peer hold exited $?"
    [ "$(cat "$d/a.out")" = released ] || fail "$peer did not release: $(cat "$d/a.out")"
    "$DLOCK_BIN" -n "$key" -- true || fail "dlock -n after $peer released: exit $?"
    ok "$peer holds -> dlock -n refused (exit 1); after its release dlock gets the lock"

    # B: dlock holds -> the peer refused; released -> the peer gets it
    key="peers:$peer:b"
    dlock_hold "$d/b-held" "$d/b-go" "$key"
    wait_file "$d/b-held"
    [ "$(rcli type "$key")" = string ] || fail "dlock's simple lock is a $(rcli type "$key"), want string"
    out=$("${P[@]}" try "$REDIS_PORT" "$key")
    [ "$out" = busy ] || fail "$peer took $key while dlock held it ($out)"
    touch "$d/b-go"
    wait "$DL_PID" || fail "dlock job exited $?"
    out=$("${P[@]}" try "$REDIS_PORT" "$key")
    [ "$out" = acquired ] || fail "$peer could not take $key after dlock released it ($out)"
    ok "dlock holds -> $peer refused; after dlock's release $peer gets the lock"

    # C: dlock's lease runs out, the peer takes the key: dlock's release is refused
    key="peers:$peer:c"
    dlock_hold "$d/c-held" "$d/c-go" --lease 0.3 --on-lost=ignore "$key"
    wait_file "$d/c-held"
    wait_gone "$key"
    "${P[@]}" hold "$REDIS_PORT" "$key" 30000 "$d/c-pheld" "$d/c-pgo" >"$d/c.out" &
    pid=$!
    dl_track "$pid"
    wait_file "$d/c-pheld"
    touch "$d/c-go"
    wait "$DL_PID" || true     # lost lock, --on-lost=ignore: COMMAND's status
    [ "$(rcli exists "$key")" = 1 ] || fail "dlock's late release deleted $peer's lock on $key"
    touch "$d/c-pgo"
    wait "$pid" || fail "$peer hold exited $?"
    [ "$(cat "$d/c.out")" = released ] || fail "$peer no longer owned $key after dlock's release: $(cat "$d/c.out")"
    ok "dlock's release after its lease ran out is refused: $peer still owns and releases $key"

    # D: the peer's lease runs out, dlock takes the key: the peer's release is refused
    key="peers:$peer:d"
    "${P[@]}" hold "$REDIS_PORT" "$key" 300 "$d/d-pheld" "$d/d-pgo" >"$d/d.out" &
    pid=$!
    dl_track "$pid"
    wait_file "$d/d-pheld"
    wait_gone "$key"
    dlock_hold "$d/d-held" "$d/d-go" "$key"
    wait_file "$d/d-held"
    touch "$d/d-pgo"
    wait "$pid" || fail "$peer hold exited $?"
    [ "$(cat "$d/d.out")" = refused ] || fail "$peer's late release was not refused: $(cat "$d/d.out")"
    [ "$(rcli exists "$key")" = 1 ] || fail "$peer's late release deleted dlock's lock on $key"
    touch "$d/d-go"
    rc=0
    wait "$DL_PID" || rc=$?
    [ "$rc" = 0 ] || fail "dlock could not release its own lock after $peer's refused release (exit $rc)"
    ok "$peer's release after its lease ran out is refused: dlock still owns and releases $key"
done
echo "peers: redis-py and node redlock interoperate with dlock's simple lock"
