# redis_py_peer.py: the other side of test_lock_interop: redis-py's Lock on
# the same key dlock's simple lock uses. Run with /usr/bin/python3.
#   try  PORT KEY      non-blocking acquire; prints 1 (then releases) or 0
#   hold PORT KEY MS   acquire (wait <= 5 s), print "acquired", hold MS ms,
#                      release, print "released"
import sys
import time

import redis

mode, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = redis.Redis(host="127.0.0.1", port=port)
lock = r.lock(key, timeout=5)
if mode == "try":
    got = lock.acquire(blocking=False)
    print("1" if got else "0", flush=True)
    if got:
        lock.release()
elif mode == "hold":
    if not lock.acquire(blocking=True, blocking_timeout=5):
        print("failed", flush=True)
        sys.exit(1)
    print("acquired", flush=True)
    time.sleep(int(sys.argv[4]) / 1000.0)
    lock.release()
    print("released", flush=True)
