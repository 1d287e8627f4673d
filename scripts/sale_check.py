#!/usr/bin/python3
"""sale_check.py: the invariant checker of the demo and of every fault
scenario. Checks a sale's invariants against the
system of record and writes the report (terminal + self-contained HTML with
inline SVG charts; no scripts, no external fonts).

Invariants (exit 1 if any fails): oversold 0 (database and answers), no user
above the limit, no lost order (every order a buyer was told was accepted is
in the database), no idempotency violation, every malformed request answered
4xx, and reconciliation clean once the stream drained."""
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
    ap.add_argument("--redis-url", help="master to look up orders the database lacks")
    ap.add_argument("--allow-redis-loss", action="store_true",
                    help="failover scenarios: an order the buyer was told about that Redis itself "
                         "no longer has (lost with the old master) is listed, not failed")
    ap.add_argument("--summary-json", help="append a one-line JSON summary to this file")
    ap.add_argument("--scenario", default="demo")
    ap.add_argument("--recover-ms", type=int, default=0, help="recorded in the summary")
    a = ap.parse_args()

    bench = json.load(open(a.bench))
    told = {}
    for line in open(a.orders):
        # order_id user qty [status]: 201 (acknowledged: a promise) or 202
        # (pending: may end lost); older files have no status (all 201)
        f = line.split()
        told[int(f[0])] = (f[1], int(f[2]), int(f[3]) if len(f) > 3 else 201)
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
    missing = [oid for oid in told if oid not in by_id and told[oid][2] == 201]
    redis_dropped = []  # told accepted, but the (new) master's stream lacks them
    if a.redis_url:
        import redis  # Debian python3-redis
        r = redis.Redis.from_url(a.redis_url)
        in_stream = {int(f[b"order_id"]) for _, f in r.xrange("{c:%s}:orders" % a.campaign)}
        redis_dropped = [oid for oid in told if oid not in in_stream]
    dropped = set(redis_dropped)
    redis_lost = [oid for oid in missing if oid in dropped]  # gone from Redis and never persisted
    lost = [oid for oid in missing if not (a.allow_redis_loss and oid in dropped)]
    rejected = sum(1 for r in rows if r[3] == "rejected")
    oversold_db = max(0, sold - a.stock)
    over_limit = sum(1 for q in per_user.values() if q > a.limit)
    rps = bench["requests_per_s"]
    lat = bench["latency_us"]
    checks = [
        ("oversold (answers)", bench["oversold"], 0),
        ("oversold (database)", oversold_db, 0),
        ("users above limit (answers)", bench["users_over_limit"], 0),
        ("users above limit (database)", over_limit, 0),
        ("lost orders", len(lost), 0),
        ("orders in the database not told to any buyer", len([r for r in rows if r[0] not in told and r[3] != "rejected"]), 0),
        ("idempotency violations", bench["idempotency_violations"], 0),
        ("malformed requests not answered 4xx", bench["bad_unexpected"], 0),
        ("reconciliation differences", 0 if a.reconcile_rc == 0 else 1, 0),
    ]
    informational = []
    if a.allow_redis_loss and redis_dropped:
        # Redis lost acknowledged writes, so its answers could promise more than
        # it had (stock resold, a lost idempotency key answered anew): those
        # answer-level figures are reported, not failed. The database-level
        # checks stay strict: that is the guard's job. Reconciliation must
        # report the difference, so it is not expected to be clean.
        relaxed = ("oversold (answers)", "users above limit (answers)", "idempotency violations",
                   "reconciliation differences")
        informational = [c for c in checks if c[0] in relaxed]
        checks = [c for c in checks if c[0] not in relaxed]
        rec = json.load(open(a.reconcile))
        rec_rejected = sum(c["database"]["orders"]["rejected"] for c in rec)
        checks.append(("guard rejections reconciliation did not report", abs(rec_rejected - rejected), 0))
        if rejected:
            checks.append(("reconciliation clean despite the guard's rejections", 1 if a.reconcile_rc == 0 else 0, 0))
    failed = [c for c in checks if c[1] != c[2]]
    if a.summary_json:
        with open(a.summary_json, "a") as f:
            f.write(json.dumps({"scenario": a.scenario, "ok": not failed,
                                "failed": [c[0] for c in failed], "accepted": bench["accepted_qty"],
                                "sold_db": sold, "oversold": max(bench["oversold"], oversold_db),
                                "duplicates": bench["users_over_limit"] + over_limit + bench["idempotency_violations"],
                                "lost": len(lost), "lost_by_redis": len(redis_lost),
                                "dropped_by_redis": len(redis_dropped),
                                "told_beyond_stock": bench["oversold"],
                                "guard_rejected": rejected, "retried": bench.get("retried", 0),
                                "conn_errors": bench["connection_errors"],
                                "recover_ms": a.recover_ms}) + "\n")

    lines = [
        "=" * 64,
        "flash sale %s: stock %d, limit %d per user" % (a.campaign, a.stock, a.limit),
        "requests %d (%d buyers' answers), %.0f decisions/s, elapsed %.2f s"
        % (bench["requests"], bench["responses"], rps, bench["elapsed_s"]),
        "accepted %d, persisted/sold in database %d, database rows %d"
        % (bench["accepted_qty"], sold, len(rows)),
        "rejections: " + ", ".join("%s %d" % kv for kv in sorted(bench["errors"].items())),
        "database statuses: " + ", ".join("%s %d" % kv for kv in sorted(statuses.items())),
        "latency us: p50 %d  p90 %d  p99 %d  max %d" % (lat["p50"], lat["p90"], lat["p99"], lat["max"]),
    ]
    for name, got, want in checks:
        lines.append("%-48s %6d  %s" % (name, got, "ok" if got == want else "FAILED"))
    for name, got, _ in informational:
        lines.append("%-48s %6d  (Redis lost writes: reported, not checked)" % (name, got))
    if redis_dropped:
        lines.append("orders Redis dropped in the fault (acknowledged, then gone from Redis): %d, of which "
                     "persisted before the fault: %d, gone entirely: %d%s"
                     % (len(redis_dropped), len(redis_dropped) - len(redis_lost), len(redis_lost),
                        (": " + " ".join(map(str, redis_lost[:20]))) if redis_lost else ""))
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
<tr><th>accepted</th><td id="accepted">%(acc)d</td></tr>
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
       "stock": a.stock, "acc": bench["accepted_qty"], "sold": sold, "rps": rps,
       "p50": lat["p50"], "p90": lat["p90"], "p99": lat["p99"], "max": lat["max"], "rows": rows_html,
       "h1": svg_bars(hist, xlabel="latency (upper bucket edge)"),
       "h2": svg_bars(series, color="#2a7d2a", xlabel="seconds since start"),
       "h3": svg_bars(outcome, color="#a86b3b", xlabel="outcome")}
    with open(a.html, "w") as f:
        f.write(doc)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
