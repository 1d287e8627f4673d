#!/usr/bin/python3
"""sale_check.py: the invariant checker of the demo and of every fault
scenario. The invariants are on what buyers were told, checked against the
system of record; it writes the report (terminal + self-contained HTML with
inline SVG charts; no scripts, no external fonts).

A 201 is a promise: every order a buyer was answered 201 for (the orders
file, written by seckill-bench) must end in the database as persisted, paid,
or cancelled by its own payment timeout, under the order id the buyer was
given. A guard rejection of such an order, or its absence, is a broken
promise. A 202 (pending) is not a promise: it is counted with its final state
(confirmed or lost). Exit 1 if any check fails: broken promises, told 201
beyond the stock, oversold in the database, users above the limit (answers
and database), lost orders (orders the current Redis master holds that the
database lacks), orders sold in the database beyond what buyers were told
(an order whose buyer was answered "outcome unknown" is allowed), idempotency
violations (two order ids told 201 under one Idempotency-Key, or two orders
of one key kept in the database: a key whose 202 decision was lost with its
master may be decided again, but only one of its orders may survive),
malformed requests not answered 4xx, reconciliation differences.
There is no relaxed mode: a fault scenario passes on the same checks as the
demo."""
import argparse
import html
import json
import sqlite3
import subprocess
import sys


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
    """order id -> (user, qty, status, key) of what buyers were finally
    told: 'order_id user qty [status [key]]', status 201 (default) or 202,
    key the load generator's Idempotency-Key slot (-1 none); a later 201 for
    the same order (a replay after the decision became safe) wins."""
    told = {}
    for line in open(path):
        f = line.split()
        if not f:
            continue
        status = int(f[3]) if len(f) > 3 else 201
        key = int(f[4]) if len(f) > 4 else -1
        oid = int(f[0])
        if oid in told and told[oid][2] == 201:
            continue
        told[oid] = (f[1], int(f[2]), status, key)
    return told


def keys_kept_twice(told, by_id):
    """Idempotency-Keys under which more than one order is kept."""
    kept_by_key = {}
    for oid, t in told.items():
        if t[3] >= 0 and kept(by_id.get(oid), t):
            kept_by_key[t[3]] = kept_by_key.get(t[3], 0) + 1
    return sum(1 for n in kept_by_key.values() if n > 1)


def kept(row, t):
    """True when the database row keeps what the buyer was told: the order
    exists under that id for that user and quantity, and is persisted, paid,
    or cancelled later by its own payment timeout or the buyer."""
    if row is None or row[1] != t[0] or row[2] != t[1]:
        return False
    return row[3] in ("persisted", "paid", "cancelled")


def redis_order_ids(url, campaign):
    """Order ids in the campaign's streams on the current masters: one
    stream, or one per bucket of a sharded campaign (meta bucket_tags);
    url redis:// (one master) or redis-cluster://h:p,h:p (every slot)."""
    import redis  # Debian python3-redis
    if url.startswith("redis-cluster://"):
        from redis.cluster import RedisCluster, ClusterNode
        hosts = url[len("redis-cluster://"):].split("?")[0].split(",")
        r = RedisCluster(startup_nodes=[ClusterNode(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1]))
                                        for h in hosts])
    else:
        r = redis.Redis.from_url(url)
    tags = (r.hget("{c:%s}:meta" % campaign, "bucket_tags") or b"").decode()
    tags = tags.split(",") if tags else ["c:" + campaign]
    return {int(f[b"order_id"]) for t in tags for _, f in r.xrange("{%s}:orders" % t)}


def svg_bars(pairs, width=560, height=180, color="#3b6ea8", xlabel=""):
    """A bar chart of (label, value) pairs as an inline SVG string."""
    if not pairs:
        return "<p>(no data)</p>"
    top = max(v for _, v in pairs) or 1
    bw = width / len(pairs)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">'
             % (width, height + 30)]
    for i, (label, v) in enumerate(pairs):
        h = (height - 10) * v / top
        parts.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>'
                     % (i * bw + 1, height - h, max(bw - 2, 1), h, color, html.escape(str(label)), v))
        if len(pairs) <= 24 or i % max(1, len(pairs) // 12) == 0:
            parts.append('<text x="%.1f" y="%d" font-size="9" text-anchor="middle">%s</text>'
                         % (i * bw + bw / 2, height + 12, html.escape(str(label))))
    parts.append('<text x="%d" y="%d" font-size="10" text-anchor="middle">%s</text>'
                 % (width / 2, height + 27, html.escape(xlabel)))
    parts.append("</svg>")
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--orders", required=True)
    ap.add_argument("--reconcile", required=True)
    ap.add_argument("--reconcile-rc", type=int, required=True)
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--campaign", required=True)
    ap.add_argument("--stock", type=int, required=True)
    ap.add_argument("--limit", type=int, default=1)
    ap.add_argument("--html")
    ap.add_argument("--redis-url", help="the current master (redis://) or the cluster (redis-cluster://): "
                    "orders its streams hold must all be in the database")
    ap.add_argument("--summary-json", help="append a one-line JSON summary to this file")
    ap.add_argument("--scenario", default="demo")
    ap.add_argument("--recover-ms", type=int, default=0, help="recorded in the summary")
    a = ap.parse_args()

    bench = json.load(open(a.bench))
    told = read_told(a.orders)
    promised = {oid: t for oid, t in told.items() if t[2] == 201}
    pending = {oid: t for oid, t in told.items() if t[2] == 202}
    rows = db_rows(a.database_url, a.campaign)
    by_id = {r[0]: r for r in rows}
    sold_status = ("persisted", "paid")
    sold = sum(r[2] for r in rows if r[3] in sold_status)
    per_user = {}
    for r in rows:
        if r[3] in sold_status:
            per_user[r[1]] = per_user.get(r[1], 0) + r[2]
    statuses = {}
    for r in rows:
        key = r[3] + (":" + r[4] if r[4] else "")
        statuses[key] = statuses.get(key, 0) + 1
    broken = sorted(oid for oid, t in promised.items() if not kept(by_id.get(oid), t))
    confirmed = [oid for oid, t in pending.items() if kept(by_id.get(oid), t)]
    in_redis = redis_order_ids(a.redis_url, a.campaign) if a.redis_url else set()
    lost = sorted(oid for oid in in_redis if oid not in by_id)
    rejected = sum(1 for r in rows if r[3] == "rejected")
    oversold_db = max(0, sold - a.stock)
    told_qty = sum(t[1] for t in promised.values())
    beyond = max(0, told_qty - a.stock)
    over_limit = sum(1 for q in per_user.values() if q > a.limit)
    rps = bench["requests_per_s"]
    lat = bench["latency_us"]
    # a buyer whose last answer was "outcome unknown" (503 outcome_unknown:
    # sent, reply lost) may hold an order nobody was told of; any beyond
    # those answers came from nowhere
    untold = len([r for r in rows if r[0] not in told and r[3] in sold_status])
    unknown_answers = bench["errors"].get("outcome_unknown", 0)
    unknown = max(0, untold - unknown_answers)
    idem_bad = bench["idempotency_violations"] + keys_kept_twice(told, by_id)
    redecided = bench.get("idempotency_redecided", 0)
    checks = [
        ("broken promises (told 201, not kept)", len(broken), 0),
        ("told 201 beyond the stock", beyond, 0),
        ("oversold (answers)", bench["oversold"], 0),
        ("oversold (database)", oversold_db, 0),
        ("users above limit (answers)", bench["users_over_limit"], 0),
        ("users above limit (database)", over_limit, 0),
        ("lost orders (in Redis, not in the database)", len(lost), 0),
        ("orders sold beyond the buyers' answers", unknown, 0),
        ("idempotency violations", idem_bad, 0),
        ("malformed requests not answered 4xx", bench["bad_unexpected"], 0),
        ("reconciliation differences", 0 if a.reconcile_rc == 0 else 1, 0),
    ]
    failed = [c for c in checks if c[1] != c[2]]
    if a.summary_json:
        with open(a.summary_json, "a") as f:
            f.write(json.dumps({"scenario": a.scenario, "ok": not failed,
                                "failed": [c[0] for c in failed], "told_201": len(promised),
                                "told_202": len(pending), "confirmed_202": len(confirmed),
                                "lost_202": len(pending) - len(confirmed),
                                "broken_promises": len(broken), "sold_db": sold,
                                "oversold": max(bench["oversold"], oversold_db, beyond),
                                "duplicates": bench["users_over_limit"] + over_limit + idem_bad,
                                "redecided": redecided,
                                "lost": len(lost), "guard_rejected": rejected,
                                "retried": bench.get("retried", 0),
                                "conn_errors": bench["connection_errors"],
                                "recover_ms": a.recover_ms}) + "\n")

    lines = [
        "=" * 64,
        "flash sale %s: stock %d, limit %d per user" % (a.campaign, a.stock, a.limit),
        "requests %d (%d buyers' answers), %.0f decisions/s, elapsed %.2f s"
        % (bench["requests"], bench["responses"], rps, bench["elapsed_s"]),
        "told 201: %d orders (%d units), told 202 (pending): %d, of which confirmed %d, lost %d"
        % (len(promised), told_qty, len(pending), len(confirmed), len(pending) - len(confirmed)),
        "persisted/sold in database %d, database rows %d; sold to buyers whose answer was "
        "'outcome unknown': %d (of %d such answers)" % (sold, len(rows), untold, unknown_answers),
        "answers under an Idempotency-Key with another order id than its answer before "
        "(a new decision after a 202; at most one of them may be kept): %d" % redecided,
        "rejections: " + ", ".join("%s %d" % kv for kv in sorted(bench["errors"].items())),
        "database statuses: " + ", ".join("%s %d" % kv for kv in sorted(statuses.items())),
        "latency us: p50 %d  p90 %d  p99 %d  max %d" % (lat["p50"], lat["p90"], lat["p99"], lat["max"]),
    ]
    for name, got, want in checks:
        lines.append("%-48s %6d  %s" % (name, got, "ok" if got == want else "FAILED"))
    if broken:
        lines.append("broken promises (order ids): " + " ".join(map(str, broken[:20]))
                     + (" ..." if len(broken) > 20 else ""))
    if lost:
        lines.append("lost orders (order ids): " + " ".join(map(str, lost[:20])))
    lines.append("orders the database guard rejected: %d" % rejected)
    lines.append("=" * 64)
    print("\n".join(lines))
    if not a.html:
        return 1 if failed else 0

    hist = [("%dus" % le if le < 1000 else "%dms" % (le // 1000), n)
            for le, n in bench["latency_hist"] if n] or []
    series = [(i / 10, v) for i, v in enumerate(bench["accepted_per_100ms"])]
    outcome = sorted(bench["errors"].items()) + [("accepted", bench["accepted"])]
    rows_html = "".join("<tr><td>%s</td><td>%d</td><td>%s</td></tr>"
                        % (html.escape(n), g, "ok" if g == w else "FAILED") for n, g, w in checks)
    doc = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><title>dlock flash-sale demo: %(c)s</title>
<style>body{font-family:sans-serif;margin:2em;max-width:60em}td,th{padding:2px 10px;text-align:left}
.ok{color:#2a7d2a}.bad{color:#b00020}</style></head><body>
<h1>Flash sale <code>%(c)s</code></h1>
<p id="verdict" class="%(vc)s">%(verdict)s</p>
<table id="figures">
<tr><th>stock</th><td id="stock">%(stock)d</td></tr>
<tr><th>told 201 (units)</th><td id="accepted">%(acc)d</td></tr>
<tr><th>told 202 (pending)</th><td id="pending">%(pend)d</td></tr>
<tr><th>promises broken</th><td id="broken">%(broken)d</td></tr>
<tr><th>sold in database</th><td id="persisted">%(sold)d</td></tr>
<tr><th>decisions/s</th><td id="rps">%(rps).0f</td></tr>
<tr><th>latency p50 / p90 / p99 / max (us)</th><td id="latency">%(p50)d / %(p90)d / %(p99)d / %(max)d</td></tr>
</table>
<h2>Invariants</h2><table id="checks"><tr><th>check</th><th>value</th><th>result</th></tr>%(rows)s</table>
<h2>Latency histogram</h2>%(h1)s
<h2>Accepted orders over time (per 100 ms)</h2>%(h2)s
<h2>Outcomes</h2>%(h3)s
</body></html>
""" % {"c": html.escape(a.campaign), "vc": "bad" if failed else "ok",
       "verdict": "FAILED: " + ", ".join(f[0] for f in failed) if failed else "all invariants held",
       "stock": a.stock, "acc": told_qty, "pend": len(pending), "broken": len(broken), "sold": sold, "rps": rps,
       "p50": lat["p50"], "p90": lat["p90"], "p99": lat["p99"], "max": lat["max"], "rows": rows_html,
       "h1": svg_bars(hist, xlabel="latency (upper bucket edge)"),
       "h2": svg_bars(series, color="#2a7d2a", xlabel="seconds since start"),
       "h3": svg_bars(outcome, color="#a86b3b", xlabel="outcome")}
    with open(a.html, "w") as f:
        f.write(doc)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
