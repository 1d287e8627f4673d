#!/bin/bash
# test_seckilld_connlimit.sh: --max-connections bounds what one seckilld
# process holds open (its fd limit is max-connections + 64 spare for Redis,
# the database and the loop): 300 idle clients against a limit of 20 never
# push its open sockets past 84, it keeps running (accept pauses
# instead of spinning or crashing), the idle ones are closed by the idle
# timeout, and it serves again afterwards.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-connlimit-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work"
port=$(dl_free_port)
"$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --max-connections 20 \
    --idle-timeout-ms 1500 --redis-url "redis://127.0.0.1:$REDIS_PORT" >"$work/seckilld.log" 2>&1 &
pid=$!
dl_track "$pid"
dl_wait_http "http://127.0.0.1:$port/healthz"
"$PY" - "$port" "$pid" <<'PY'
import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
def nfds():  # sockets only: descriptors inherited from the shell do not count
    d = "/proc/%d/fd" % pid
    n = 0
    for f in os.listdir(d):
        try:
            n += os.readlink(os.path.join(d, f)).startswith("socket:")
        except OSError:
            pass
    return n
socks, peak = [], 0
for _ in range(300):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))   # the kernel backlog accepts even when the server pauses
    except OSError:
        s.close()
        break
    socks.append(s)
    peak = max(peak, nfds())
time.sleep(0.5)
peak = max(peak, nfds())
assert peak <= 84, "seckilld holds %d sockets with --max-connections 20 (fd limit 84)" % peak
assert peak >= 20, "only %d sockets: the flood did not reach the limit" % peak
assert os.path.exists("/proc/%d" % pid), "seckilld died under the connection flood"
print("300 clients: seckilld peaked at %d open sockets (fd limit 84)" % peak)
for s in socks:
    s.close()
deadline = time.time() + 15
while time.time() < deadline:          # idle timeout (1.5 s) frees whatever it had accepted
    if nfds() < 40:
        break
    time.sleep(0.2)
assert nfds() < 40, "descriptors not released: %d" % nfds()
PY
code=$(curl -s -o /dev/null -w "%{http_code}" --max-time 5 "http://127.0.0.1:$port/ping" || true)
[ "$code" = 200 ] || { echo "FAIL: /ping answered $code after the flood"; exit 1; }
kill -0 "$pid"
echo PASS
