# peer_redis_py.py: redis-py's Lock (Debian's python3-redis) as a peer of
# dlock's simple lock, for test_peers_simple.sh. Same commands as
# peer_redlock.cjs:
#   try  PORT KEY                      prints "acquired" (then releases) or "busy"
#   hold PORT KEY LEASE_MS HELD GO     takes the lock without waiting (exit 3
#        if busy), creates file HELD, waits for file GO, releases; prints
#        "released", or "refused" when the key no longer holds its token
import os
import sys
import time

import redis
from redis.exceptions import LockNotOwnedError

cmd, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = redis.Redis(host="127.0.0.1", port=port)
if cmd == "try":
    lock = r.lock(key, timeout=30)
    got = lock.acquire(blocking=False)
    print("acquired" if got else "busy", flush=True)
    if got:
        lock.release()
elif cmd == "hold":
    lease_ms, held, go = int(sys.argv[4]), sys.argv[5], sys.argv[6]
    lock = r.lock(key, timeout=lease_ms / 1000.0)
    if not lock.acquire(blocking=False):
        print("busy", flush=True)
        sys.exit(3)
    open(held, "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.exit("peer_redis_py: gave up waiting for " + go)
        time.sleep(0.02)
    try:
        lock.release()
        print("released", flush=True)
    except LockNotOwnedError:
        print("refused", flush=True)
else:
    sys.exit("peer_redis_py: unknown command " + cmd)
