"""sale_check_cases.py: crafted inputs for scripts/sale_check.py, each run
through the checker: the good sale passes, every other case fails with
exactly the check it is about (and prints FAILED on that line only).
argv: sale_check.py, a work dir, the redis:// URL of a private server."""
import json
import sqlite3
import subprocess
import sys

CHECKER, WORK, REDIS = sys.argv[1], sys.argv[2], sys.argv[3]
N = [0]


def bench(**over):
    b = {"mode": "sale", "requests": 3, "responses": 3, "connection_errors": 0, "retried": 0, "elapsed_s": 1.0,
         "requests_per_s": 3.0, "accepted": 3, "accepted_qty": 3, "oversold": 0, "users_over_limit": 0,
         "idempotency_violations": 0, "bad_unexpected": 0, "told_201": 3, "told_202": 0, "orders_unrecorded": 0,
         "buyers": 3, "scalpers": 0, "scalper_burst": 1, "quantity": 1, "errors": {},
         "latency_us": {"p50": 1, "p90": 1, "p99": 1, "p999": 1, "max": 1}, "latency_hist": [[64, 3]],
         "timeline": {"step_ms": 100, "t0_wall_ms": 0, "201": [3], "orders": [3], "decided": [3]}}
    b.update(over)
    return b


GOOD_ORDERS = [(101, "u1", 1, 201, 1), (102, "u2", 1, 201, 2), (103, "u3", 1, 201, 3)]
GOOD_ROWS = [(101, "u1", 1, "persisted", None), (102, "u2", 1, "persisted", None), (103, "u3", 1, "paid", None)]
DRAINED = [{"campaign": "c", "consistent": True, "redis": {"pending": 0, "lag": 0, "buckets": [
    {"bucket": 0, "pending": 0, "lag": 0}]}}]


def run(name, b, orders, rows, stock=3, reconcile=None, rc=0, stream=(), extra=()):
    N[0] += 1
    camp = "case%d" % N[0]
    d = "%s/%s" % (WORK, camp)
    json.dump(b, open(d + ".bench.json", "w"))
    with open(d + ".orders.txt", "w") as f:
        for o in orders:
            f.write("%d %s %d %d %d\n" % o)
    json.dump(DRAINED if reconcile is None else reconcile, open(d + ".reconcile.json", "w"))
    con = sqlite3.connect(d + ".db")
    con.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, campaign TEXT, user_id TEXT, qty INTEGER, "
                "status TEXT, reason TEXT)")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", [(r[0], camp) + r[1:] for r in rows])
    con.commit()
    con.close()
    for oid in stream:
        subprocess.run(["redis-cli", "-u", REDIS, "XADD", "{c:%s}:orders" % camp, "*", "order_id", str(oid)],
                       check=True, capture_output=True)
    p = subprocess.run([sys.executable, CHECKER, "--bench", d + ".bench.json", "--orders", d + ".orders.txt",
                        "--reconcile", d + ".reconcile.json", "--reconcile-rc", str(rc), "--database-url",
                        "sqlite://" + d + ".db", "--campaign", camp, "--stock", str(stock), "--redis-url", REDIS,
                        "--html", d + ".html"] + list(extra), capture_output=True, text=True)
    failed = [l for l in p.stdout.splitlines() if l.endswith("FAILED")]
    return p.returncode, failed, p.stdout + p.stderr


def expect_pass(name, *args, **kw):
    rc, failed, out = run(name, *args, **kw)
    assert rc == 0 and not failed, "%s: want a pass, got exit %d:\n%s" % (name, rc, out)
    print("ok   %-58s passes" % name)


def expect_fail(name, check, *args, **kw):
    rc, failed, out = run(name, *args, **kw)
    assert rc == 1, "%s: want exit 1, got %d:\n%s" % (name, rc, out)
    assert len(failed) == 1 and failed[0].startswith(check), \
        "%s: want only '%s' FAILED, got %s:\n%s" % (name, check, failed, out)
    print("ok   %-58s fails: %s" % (name, " ".join(failed[0].split())))


expect_pass("a good sale", bench(), GOOD_ORDERS, GOOD_ROWS)
expect_fail("the dead sale: 10000 buyers all 503, stock 100", "units short of the liveness floor (100)",
            bench(buyers=10000, scalpers=0, requests=10000, responses=10000, told_201=0, accepted=0,
                  accepted_qty=0, errors={"unavailable": 10000}, timeline={"503": [10000]}), [], [], stock=100)
expect_pass("the dead sale with a declared floor (an outage)",
            bench(buyers=10000, told_201=0, errors={"unavailable": 10000}), [], [], stock=100,
            extra=["--expect-sold-min", "0", "--expect-sold-why", "Redis down the whole sale"])
expect_fail("a sale that sold 2 of 3 to 3 willing buyers", "units short of the liveness floor (3)",
            bench(told_201=2), GOOD_ORDERS[:2], GOOD_ROWS[:2])
expect_fail("the bench counted a 201 the orders file lacks", "bench 201/202 counts unlike the orders file's",
            bench(told_201=4, buyers=4), GOOD_ORDERS, GOOD_ROWS)
expect_fail("a 201 with no parseable order id", "201/202 answers the bench could not record",
            bench(orders_unrecorded=1), GOOD_ORDERS, GOOD_ROWS)
expect_fail("an order in the Redis stream, not in the database", "lost orders (in Redis, not in the database)",
            bench(), GOOD_ORDERS, GOOD_ROWS, stream=(101, 102, 103, 104))
expect_fail("a 201 order cancelled by an admin, not its payment timeout", "broken promises (told 201, not kept)",
            bench(buyers=2), GOOD_ORDERS, GOOD_ROWS[:2] + [(103, "u3", 1, "cancelled", "admin")])
expect_pass("a 201 order cancelled by its payment timeout", bench(), GOOD_ORDERS,
            GOOD_ROWS[:2] + [(103, "u3", 1, "cancelled", "payment timeout")])
expect_fail("a reconcile taken before the drain (3 pending)", "reconciliation differences (after the drain)",
            bench(), GOOD_ORDERS, GOOD_ROWS,
            reconcile=[{"redis": {"pending": 3, "lag": 0, "buckets": [{"bucket": 0, "pending": 3, "lag": 0}]}}])
expect_fail("an order sold to a buyer never told, no unknown answer", "orders sold beyond the buyers' answers",
            bench(told_201=2), GOOD_ORDERS[:2], GOOD_ROWS)
expect_pass("the same, the buyer's request written and never answered",
            bench(told_201=2, errors={"outcome_unknown": 1}), GOOD_ORDERS[:2], GOOD_ROWS)
print("sale_check: every crafted case judged as expected")
