# redis_py_lock.py: side-by-side peer for dlock-bench's `uncontended`
# scenario: redis-py's Lock (the same SET NX PX + Lua release layout), one
# thread, acquire(blocking=False) + release cycles, and the same-run limit
# (two round trips per cycle of libdlock's fence-guard script, GET + SET
# of one small key, as dlock-bench's limit, through redis-py).
# Run: /usr/bin/python3 bench/peers/redis_py_lock.py --port PORT [--duration-ms MS]
# Prints the dlock-bench CSV row: scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us
import argparse
import os
import time

import redis


def pct(samples, q):
    samples.sort()
    return samples[min(len(samples) - 1, int(q * len(samples)))] / 1000.0


GUARD_LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "lib",
                         "lua", "fence_guard.lua")


def limit(r, duration_s):
    with open(GUARD_LUA) as f:
        sha = r.script_load(f.read())
    end = time.monotonic() + duration_s
    cycles = 0
    t0 = time.monotonic()
    while time.monotonic() < end:
        r.evalsha(sha, 1, "bench:limit", "1")
        r.evalsha(sha, 1, "bench:limit", "1")
        cycles += 1
    return cycles / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--duration-ms", type=int, default=3000)
    ap.add_argument("--csv", action="store_true")
    a = ap.parse_args()
    r = redis.Redis(host="127.0.0.1", port=a.port)
    d = a.duration_ms / 1000.0
    lim1 = limit(r, d)
    lock = r.lock("bench:py:%d:uncontended" % os.getpid(), timeout=10)
    samples = []
    cycles = 0
    t0 = time.monotonic()
    end = t0 + d
    while time.monotonic() < end:
        s = time.perf_counter_ns()
        if not lock.acquire(blocking=False):
            raise SystemExit("redis_py_lock: lock unexpectedly busy")
        lock.release()
        samples.append(time.perf_counter_ns() - s)
        cycles += 1
    ops = cycles / (time.monotonic() - t0)
    lim2 = limit(r, d)
    lim = (lim1 + lim2) / 2
    if a.csv:
        print("scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us")
    print("redis_py_uncontended,%.0f,%.0f,%.3f,%.1f,%.1f"
          % (ops, lim, ops / lim, pct(samples, 0.5), pct(samples, 0.99)))


if __name__ == "__main__":
    main()
