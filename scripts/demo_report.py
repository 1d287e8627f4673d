#!/usr/bin/python3
"""demo_report.py: checks the flash-sale demo's invariants against the
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
    ap.add_argument("--html", required=True)
    a = ap.parse_args()

    bench = json.load(open(a.bench))
    told = {}
    for line in open(a.orders):
        oid, user, qty = line.split()
        told[int(oid)] = (user, int(qty))
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
    lost = [oid for oid in told if oid not in by_id]
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
        ("idempotency violations", bench["idempotency_violations"], 0),
        ("malformed requests not answered 4xx", bench["bad_unexpected"], 0),
        ("reconciliation differences", 0 if a.reconcile_rc == 0 else 1, 0),
    ]
    failed = [c for c in checks if c[1] != c[2]]

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
        lines.append("%-40s %6d  %s" % (name, got, "ok" if got == want else "FAILED"))
    lines.append("=" * 64)
    print("\n".join(lines))

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
