#!/bin/bash
# test_freeze_proxy.sh: the partition tool does what the lease tests rely
# on (tests/support/dl_freeze_proxy.c): through it a client talks to Redis
# (a 1 MB value both ways, byte for byte); frozen with kill -STOP, an open
# connection stays open and gets no reply, and a new connection is accepted
# (by the kernel) but never answered; thawed with kill -CONT, both are
# answered, the queued request included. Its own servers, stopped by PID.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-proxy-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL [test_freeze_proxy]: $*" >&2; exit 1; }

dl_start_redis "$work"
"$build/tests/dl_freeze_proxy" 127.0.0.1 "$REDIS_PORT" >"$work/port" &
pid=$!
dl_track "$pid"
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.02; done
port=$(cat "$work/port")
[ -n "$port" ] || fail "no port printed"
"$build/tests/dl_freeze_proxy" 127.0.0.1 x >/dev/null 2>&1 && fail "a bad target port was accepted"

"$PY" - "$port" "$pid" <<'PY'
import os, signal, socket, sys
port, pid = int(sys.argv[1]), int(sys.argv[2])

def cmd(s, *args):
    s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]))

def reply(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("FAIL: connection closed after %d bytes" % len(buf))
        buf += chunk
    return buf

a = socket.create_connection(("127.0.0.1", port), timeout=5)
big = os.urandom(1 << 20).hex().encode()[: 1 << 20]
cmd(a, b"SET", b"k", big)
assert reply(a, 5) == b"+OK\r\n"
cmd(a, b"GET", b"k")
want = b"$%d\r\n%s\r\n" % (len(big), big)
assert reply(a, len(want)) == want, "the value came back altered"
print("ok   1 MB through the proxy both ways, byte for byte")

os.kill(pid, signal.SIGSTOP)
cmd(a, b"PING")
a.settimeout(1.0)
try:
    a.recv(10)
    raise SystemExit("FAIL: a reply came through a frozen proxy")
except socket.timeout:
    pass
b = socket.create_connection(("127.0.0.1", port), timeout=1.0)  # the kernel accepts it
cmd(b, b"PING")
try:
    b.recv(10)
    raise SystemExit("FAIL: a new connection was answered through a frozen proxy")
except socket.timeout:
    pass
print("ok   frozen: open connection silent, new connection accepted and silent")

os.kill(pid, signal.SIGCONT)
a.settimeout(5)
b.settimeout(5)
assert reply(a, 7) == b"+PONG\r\n", "the queued request was not answered after the thaw"
assert reply(b, 7) == b"+PONG\r\n", "the new connection was not served after the thaw"
print("ok   thawed: the queued requests are answered on both connections")
PY
echo "ok   test_freeze_proxy"
