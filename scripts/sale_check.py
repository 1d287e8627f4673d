#!/usr/bin/python3
"""sale_check.py: the invariant checker of the demo and of every fault
scenario. The invariants are on what buyers were told, checked against the
system of record; it prints the report and, with --html, writes the
self-contained HTML report (scripts/sale_report.py).

A 201 is a promise: every order a buyer was answered 201 for (the orders
file, written by seckill-bench) must end in the database as persisted, paid,
or cancelled by its own payment timeout (reason `payment timeout`), under
the order id the buyer was given. A guard rejection of such an order, or its
absence, is a broken promise. A 202 (pending) is not a promise: it is
counted with its final state (confirmed or lost). Exit 1 if any check
fails: broken promises, told 201 beyond the stock, oversold in the
database, users above the limit (answers and database), lost orders (orders
the current Redis master or cluster holds that the database lacks; the
current master is always given), orders sold in the database beyond what
buyers were told (an order whose buyer's last answer was "outcome unknown":
503 outcome_unknown, or a request written that got no complete answer, is
allowed), idempotency violations (two order ids told 201 under one
Idempotency-Key, or two orders of one key kept in the database: a key whose
202 decision was lost with its master may be decided again, but only one of
its orders may survive), malformed requests not answered 4xx, a liveness
floor (a sale with buyers and stock sells min(stock, what its distinct
well-formed buyers may buy) unless the scenario declares its own floor and
why), the load generator's 201/202 counts equal to the orders file's and no
201/202 answer it could not record, and a reconciliation taken after the
pipeline drained that finds no difference.
There is no relaxed mode: a fault scenario passes on the same checks as the
demo (only the floor may be declared, with its reason)."""
import argparse
import json
import sqlite3
import subprocess
import sys

SOLD = ("persisted", "paid")


def db_rows(url, campaign):
    """(order_id, user, qty, status, reason) for the campaign's orders."""
    q = ("SELECT order_id, user_id, qty, status, COALESCE(reason, '') FROM orders "
         "WHERE campaign = '%s'" % campaign.replace("'", "''"))
    if url.startswith("postgres"):
        out = subprocess.run(["psql", url, "-AtF", "\t", "-c", q], check=True,
                             capture_output=True, text=True).stdout
        rows = [l.split("\t") for l in out.splitlines() if l]
    else:
        path = url[len("sqlite://"):] if url.startswith("sqlite://") else url
        con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        rows = con.execute(q).fetchall()
        con.close()
    return [(int(r[0]), r[1], int(r[2]), r[3], r[4]) for r in rows]


def read_told(path):
    """(told, counts): order id -> (user, qty, status, key) of what buyers
    were finally told, from lines 'order_id user qty [status [key]]' (status
    201 by default, or 202; key the load generator's Idempotency-Key slot,
    -1 none; a later 201 for the same order wins), and the number of lines
    per status (the load generator writes one line per distinct order)."""
    told, counts = {}, {201: 0, 202: 0}
    for line in open(path):
        f = line.split()
        if not f:
            continue
        status = int(f[3]) if len(f) > 3 else 201
        counts[status] = counts.get(status, 0) + 1
        key = int(f[4]) if len(f) > 4 else -1
        oid = int(f[0])
        if oid in told and told[oid][2] == 201:
            continue
        told[oid] = (f[1], int(f[2]), status, key)
    return told, counts


def kept(row, t):
    """True when the database row keeps what the buyer was told: the order
    exists under that id for that user and quantity, and is persisted, paid,
    or cancelled by its own payment timeout."""
    if row is None or row[1] != t[0] or row[2] != t[1]:
        return False
    return row[3] in SOLD or (row[3] == "cancelled" and row[4] == "payment timeout")


def keys_kept_twice(told, by_id):
    """Idempotency-Keys under which more than one order is kept."""
    kept_by_key = {}
    for oid, t in told.items():
        if t[3] >= 0 and kept(by_id.get(oid), t):
            kept_by_key[t[3]] = kept_by_key.get(t[3], 0) + 1
    return sum(1 for n in kept_by_key.values() if n > 1)


def redis_client(url):
    """A client of the current master: redis://h:p, redis-sentinel://h:p,h:p/name
    (the master Sentinel names now) or redis-cluster://h:p,h:p (every slot)."""
    import redis  # Debian python3-redis
    if url.startswith("redis-cluster://") or url.startswith("redis-sentinel://"):
        rest = url.split("://", 1)[1].split("?")[0]
        hosts, _, name = rest.partition("/")
        nodes = [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1])) for h in hosts.split(",")]
        if url.startswith("redis-sentinel://"):
            from redis.sentinel import Sentinel
            return Sentinel(nodes, socket_timeout=5).master_for(name or "mymaster", socket_timeout=5)
        from redis.cluster import RedisCluster, ClusterNode
        return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in nodes])
    return redis.Redis.from_url(url, socket_timeout=5)


def redis_order_ids(url, campaign):
    """Order ids in the campaign's streams on the current masters: one
    stream, or one per bucket of a sharded campaign (meta bucket_tags);
    an entry's id is field o (purchase.lua), or order_id (the entries of
    the release before it)."""
    r = redis_client(url)
    tags = (r.hget("{c:%s}:meta" % campaign, "bucket_tags") or b"").decode()
    tags = tags.split(",") if tags else ["c:" + campaign]
    return {int(f.get(b"o") or f[b"order_id"]) for t in tags for _, f in r.xrange("{%s}:orders" % t)}


def willing_units(bench, limit):
    """Units the sale's distinct well-formed buyers may buy: each buyer one
    purchase, each scalper up to its distinct keys (10 at most), each user
    at most the per-user limit."""
    q = bench.get("quantity", 1)
    per = lambda n: min(n * q, (limit // q) * q if limit > 0 else n * q)  # noqa: E731
    keys = min(bench.get("scalper_burst", 0), 10)
    return bench.get("buyers", 0) * per(1) + bench.get("scalpers", 0) * per(keys)


def reconcile_not_drained(path, rc):
    """1 when the reconciliation was not taken after the drain (a bucket
    with entries pending or never delivered) or found differences."""
    try:
        recs = json.load(open(path))
    except (OSError, ValueError):
        return 1
    for rec in recs if isinstance(recs, list) else [recs]:
        red = rec.get("redis", {})
        for b in red.get("buckets", [red]):
            if b.get("pending", 0) or b.get("lag", 0):
                return 1
    return 0 if rc == 0 else 1


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--orders", required=True)
    ap.add_argument("--reconcile", required=True, help="seckill reconcile --json, taken after the drain")
    ap.add_argument("--reconcile-rc", type=int, required=True)
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--campaign", required=True)
    ap.add_argument("--stock", type=int, required=True)
    ap.add_argument("--limit", type=int, default=1)
    ap.add_argument("--redis-url", required=True,
                    help="the current master (redis://), its Sentinels (redis-sentinel://) or the cluster "
                    "(redis-cluster://): orders its streams hold must all be in the database")
    ap.add_argument("--expect-sold-min", type=int,
                    help="the scenario's declared liveness floor in units (default min(stock, willing buyers))")
    ap.add_argument("--expect-sold-why", default="", help="why the declared floor (required with it)")
    ap.add_argument("--html")
    ap.add_argument("--events", help="file of 'name wall_ms' lines (kill, promoted, barrier) for the report")
    ap.add_argument("--summary-json", help="append a one-line JSON summary to this file")
    ap.add_argument("--scenario", default="demo")
    ap.add_argument("--recover-ms", type=int, default=0, help="recorded in the summary")
    a = ap.parse_args(argv)
    if a.expect_sold_min is not None and not a.expect_sold_why:
        ap.error("--expect-sold-min needs --expect-sold-why (the reason the sale may sell less)")
    return a


def evaluate(a, bench, told, counts, rows, in_redis):
    """The figures (a dict) and the checks [(name, got, want)]."""
    by_id = {r[0]: r for r in rows}
    promised = {oid: t for oid, t in told.items() if t[2] == 201}
    pending = {oid: t for oid, t in told.items() if t[2] == 202}
    sold = sum(r[2] for r in rows if r[3] in SOLD)
    per_user = {}
    for r in rows:
        if r[3] in SOLD:
            per_user[r[1]] = per_user.get(r[1], 0) + r[2]
    untold = len([r for r in rows if r[0] not in told and r[3] in SOLD])
    unknown_answers = bench["errors"].get("outcome_unknown", 0)
    floor = min(a.stock, willing_units(bench, a.limit)) if a.expect_sold_min is None else a.expect_sold_min
    # sold at some time: units a payment timeout gave back were sold too
    moved = sold + sum(r[2] for r in rows if r[3] == "cancelled" and r[4] == "payment timeout")
    f = {"by_id": by_id, "promised": promised, "pending": pending, "sold": sold, "untold": untold,
         "unknown_answers": unknown_answers, "floor": floor,
         "broken": sorted(oid for oid, t in promised.items() if not kept(by_id.get(oid), t)),
         "confirmed": [oid for oid, t in pending.items() if kept(by_id.get(oid), t)],
         "lost": sorted(oid for oid in in_redis if oid not in by_id),
         "rejected": sum(1 for r in rows if r[3] == "rejected"),
         "told_qty": sum(t[1] for t in promised.values()),
         "idem_bad": bench["idempotency_violations"] + keys_kept_twice(told, by_id),
         "count_diff": abs(bench["told_201"] - counts.get(201, 0)) + abs(bench["told_202"] - counts.get(202, 0))}
    floor_name = ("units short of the liveness floor (%d)" % floor if a.expect_sold_min is None
                  else "units short of the declared floor (%d: %s)" % (floor, a.expect_sold_why))
    checks = [
        ("broken promises (told 201, not kept)", len(f["broken"]), 0),
        ("told 201 beyond the stock", max(0, f["told_qty"] - a.stock), 0),
        ("oversold (answers)", bench["oversold"], 0),
        ("oversold (database)", max(0, sold - a.stock), 0),
        ("users above limit (answers)", bench["users_over_limit"], 0),
        ("users above limit (database)", sum(1 for q in per_user.values() if q > a.limit), 0),
        ("lost orders (in Redis, not in the database)", len(f["lost"]), 0),
        ("orders sold beyond the buyers' answers", max(0, untold - unknown_answers), 0),
        ("idempotency violations", f["idem_bad"], 0),
        ("malformed requests not answered 4xx", bench["bad_unexpected"], 0),
        (floor_name, max(0, floor - moved), 0),
        ("bench 201/202 counts unlike the orders file's", f["count_diff"], 0),
        ("201/202 answers the bench could not record", bench.get("orders_unrecorded", 0), 0),
        ("reconciliation differences (after the drain)", reconcile_not_drained(a.reconcile, a.reconcile_rc), 0),
    ]
    return f, checks


def write_summary(a, bench, f, checks, failed):
    with open(a.summary_json, "a") as out:
        out.write(json.dumps({
            "scenario": a.scenario, "ok": not failed, "failed": [c[0] for c in failed],
            "told_201": len(f["promised"]), "told_202": len(f["pending"]), "confirmed_202": len(f["confirmed"]),
            "lost_202": len(f["pending"]) - len(f["confirmed"]), "broken_promises": len(f["broken"]),
            "sold_db": f["sold"], "floor": f["floor"],
            "oversold": max(bench["oversold"], checks[3][1], checks[1][1]),
            "duplicates": bench["users_over_limit"] + checks[5][1] + f["idem_bad"],
            "redecided": bench.get("idempotency_redecided", 0), "lost": len(f["lost"]),
            "guard_rejected": f["rejected"], "retried": bench.get("retried", 0),
            "conn_errors": bench["connection_errors"], "recover_ms": a.recover_ms}) + "\n")


def report_lines(a, bench, f, checks, statuses):
    lat = bench["latency_us"]
    lines = [
        "=" * 64,
        "flash sale %s: stock %d, limit %d per user" % (a.campaign, a.stock, a.limit),
        "requests %d (%d buyers' answers), %.0f decisions/s, elapsed %.2f s"
        % (bench["requests"], bench["responses"], bench["requests_per_s"], bench["elapsed_s"]),
        "told 201: %d orders (%d units), told 202 (pending): %d, of which confirmed %d, lost %d"
        % (len(f["promised"]), f["told_qty"], len(f["pending"]), len(f["confirmed"]),
           len(f["pending"]) - len(f["confirmed"])),
        "persisted/sold in database %d (floor %d), database rows %d; sold to buyers whose answer was "
        "'outcome unknown': %d (of %d such answers)"
        % (f["sold"], f["floor"], len(f["by_id"]), f["untold"], f["unknown_answers"]),
        "answers under an Idempotency-Key with another order id than its answer before "
        "(a new decision after a 202; at most one of them may be kept): %d" % bench.get("idempotency_redecided", 0),
        "rejections: " + ", ".join("%s %d" % kv for kv in sorted(bench["errors"].items())),
        "database statuses: " + ", ".join("%s %d" % kv for kv in sorted(statuses.items())),
        "latency us: p50 %d  p90 %d  p99 %d  max %d" % (lat["p50"], lat["p90"], lat["p99"], lat["max"]),
    ]
    for name, got, want in checks:
        lines.append("%-52s %6d  %s" % (name, got, "ok" if got == want else "FAILED"))
    if f["broken"]:
        lines.append("broken promises (order ids): " + " ".join(map(str, f["broken"][:20]))
                     + (" ..." if len(f["broken"]) > 20 else ""))
    if f["lost"]:
        lines.append("lost orders (order ids): " + " ".join(map(str, f["lost"][:20])))
    lines.append("orders the database guard rejected: %d" % f["rejected"])
    lines.append("=" * 64)
    return lines


def main(argv=None):
    a = parse_args(argv)
    bench = json.load(open(a.bench))
    told, counts = read_told(a.orders)
    rows = db_rows(a.database_url, a.campaign)
    f, checks = evaluate(a, bench, told, counts, rows, redis_order_ids(a.redis_url, a.campaign))
    failed = [c for c in checks if c[1] != c[2]]
    if a.summary_json:
        write_summary(a, bench, f, checks, failed)
    statuses = {}
    for r in rows:
        key = r[3] + (":" + r[4] if r[4] else "")
        statuses[key] = statuses.get(key, 0) + 1
    print("\n".join(report_lines(a, bench, f, checks, statuses)))
    if a.html:
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        import sale_report
        sale_report.write(a, bench, f, checks, failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
