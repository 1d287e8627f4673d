"""sale_report.py: the HTML report of a sale checked by sale_check.py, one
self-contained file (inline SVG, no scripts, no external fonts): the
verdict and figures, the invariants, the sale's timeline (answers per
100 ms stacked by kind over the whole sale, with marks for the kill, the
promotion, the barrier and the first 201 after it), the orders accepted
over time (each order once, replays not counted) and the latency
histogram. Every chart has labelled axes with values; labels never overlap."""
import html
import math

KINDS = [("201", "201 confirmed", "#2a7d2a"), ("202", "202 pending", "#e0a020"),
         ("4xx", "4xx refused", "#3b6ea8"), ("503", "503 unavailable", "#b00020"),
         ("unknown", "outcome unknown (503 outcome_unknown, reset, timeout)", "#6a3d9a")]
W, H, L, T, B = 900, 220, 60, 40, 40  # chart width, plot height, left, top and bottom margins


def esc(s):
    return html.escape(str(s))


def nice_step(top, ticks=5):
    """A 1/2/5 x 10^k step (k may be negative) giving about `ticks` ticks up to top."""
    raw = (top if top > 0 else 1) / ticks
    k = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * k >= raw * 0.999:
            return m * k
    return 10 * k


def deployment(url):
    if url.startswith("redis-sentinel://"):
        return "Sentinel (master + replica + 3 Sentinels)"
    if url.startswith("redis-cluster://"):
        return "Redis Cluster"
    return "standalone Redis"


def read_events(path, t0_ms):
    """[(name, seconds since the load generator's start)] from 'name wall_ms' lines."""
    out = []
    if path:
        for line in open(path):
            f = line.split()
            if len(f) == 2:
                out.append((f[0], (int(f[1]) - t0_ms) / 1000.0))
    return out


def marks_of(tl, events):
    """The events, plus the first 201 after the barrier (or the promotion)."""
    marks = list(events)
    after = [s for n, s in events if n == "barrier"] or [s for n, s in events if n == "promoted"]
    if after:
        for i, n in enumerate(tl.get("201", [])):
            if n and (i + 1) * 0.1 > after[0]:
                marks.append(("first 201 after", max(i * 0.1, after[0])))
                break
    return sorted(marks, key=lambda m: m[1])


def axes(parts, n_buckets, top, step, ylabel, xlabel):
    """Axes with tick values: y from 0 to top, x in seconds over n buckets of 100 ms."""
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (L, T, L, T + H))
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (L, T + H, L + W, T + H))
    v = 0
    while v <= top:
        y = T + H - H * v / top
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                     '<text x="%d" y="%.1f" font-size="10" text-anchor="end">%d</text>'
                     % (L, y, L + W, y, L - 4, y + 3, v))
        v += step
    secs = n_buckets / 10.0
    xstep = nice_step(secs, 10)
    s, j = 0.0, 0
    while s <= secs + 1e-9:
        x = L + W * s / secs
        parts.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>'
                     '<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%g</text>'
                     % (x, T + H, x, T + H + 4, x, T + H + 15, float("%.6g" % s)))
        j += 1
        s = j * xstep
    parts.append('<text x="%d" y="%d" font-size="11" text-anchor="middle">%s</text>'
                 % (L + W // 2, T + H + 32, esc(xlabel)))
    parts.append('<text x="14" y="%d" font-size="11" text-anchor="middle" transform="rotate(-90 14 %d)">%s</text>'
                 % (T + H // 2, T + H // 2, esc(ylabel)))


def draw_marks(parts, marks, secs):
    """Vertical marks; a label goes to the first row where it overlaps none."""
    rows = []
    for name, s in marks:
        x = L + W * min(max(s, 0), secs) / secs
        label = "%s %.1f s" % (name, s)
        width = 6 * len(label) + 6
        row = 0
        while row < len(rows) and any(abs(x - px) < (width + pw) / 2 for px, pw in rows[row]):
            row += 1
        if row == len(rows):
            rows.append([])
        rows[row].append((x, width))
        y = T - 6 - 12 * row
        parts.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-dasharray="4 3"/>'
                     '<text class="mark" x="%.1f" y="%d" font-size="10" text-anchor="middle">%s</text>'
                     % (x, y + 2, x, T + H, x, y, esc(label)))
    return len(rows)


def svg_open(extra_top):
    return ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img"><g transform="translate(0 %d)">'
            % (L + W + 20, T + H + B + extra_top, extra_top)]


def timeline_svg(tl, marks):
    """Answers per 100 ms stacked by kind, with the marks."""
    n = max((len(tl.get(k, [])) for k, _, _ in KINDS), default=0)
    if n == 0:
        return "<p>(no answers)</p>"
    totals = [sum(tl.get(k, [0] * n)[i] if i < len(tl.get(k, [])) else 0 for k, _, _ in KINDS) for i in range(n)]
    step = max(1, int(nice_step(max(totals))))
    top = step * (-(-max(max(totals), 1) // step))
    mark_rows = max(1, len(marks))
    parts = svg_open(12 * mark_rows)
    axes(parts, n, top, step, "answers per 100 ms", "seconds since the sale started")
    bw = W / n
    for i in range(n):
        y = T + H
        for k, label, color in KINDS:
            v = tl.get(k, [])[i] if i < len(tl.get(k, [])) else 0
            if v:
                h = H * v / top
                y -= h
                parts.append('<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s"><title>%.1f s: %s %d</title></rect>'
                             % (L + i * bw, y, max(bw - 0.3, 0.5), h, color, i / 10, esc(label), v))
    draw_marks(parts, marks, n / 10.0)
    parts.append("</g></svg>")
    legend = "".join('<span style="margin-right:1em"><span style="display:inline-block;width:10px;height:10px;'
                     'background:%s"></span> %s</span>' % (c, esc(l)) for _, l, c in KINDS)
    return "".join(parts) + '<p class="legend">%s</p>' % legend


def bars_svg(values, labels, ylabel, xlabel, color, title_of):
    """A bar chart; at most one x label per 60 px, so none overlap."""
    n = len(values)
    if n == 0:
        return "<p>(no data)</p>"
    step = max(1, int(nice_step(max(values))))
    top = step * (-(-max(max(values), 1) // step))
    parts = svg_open(0)
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (L, T, L, T + H))
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (L, T + H, L + W, T + H))
    v = 0
    while v <= top:
        y = T + H - H * v / top
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" font-size="10" '
                     'text-anchor="end">%d</text>' % (L, y, L + W, y, L - 4, y + 3, v))
        v += step
    bw = W / n
    every = max(1, int(-(-60 // bw)))
    for i, val in enumerate(values):
        h = H * val / top
        parts.append('<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s"><title>%s</title></rect>'
                     % (L + i * bw, T + H - h, max(bw - 1, 0.5), h, color, esc(title_of(i, val))))
        if i % every == 0:
            parts.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%s</text>'
                         % (L + i * bw + bw / 2, T + H + 15, esc(labels[i])))
    parts.append('<text x="%d" y="%d" font-size="11" text-anchor="middle">%s</text>' % (L + W // 2, T + H + 32, esc(xlabel)))
    parts.append('<text x="14" y="%d" font-size="11" text-anchor="middle" transform="rotate(-90 14 %d)">%s</text>'
                 % (T + H // 2, T + H // 2, esc(ylabel)))
    parts.append("</g></svg>")
    return "".join(parts)


def fmt_us(us):
    if us < 1000:
        return "%dus" % us
    if us < 1000000:
        return "%gms" % float("%.2g" % (us / 1000))
    return "%gs" % float("%.2g" % (us / 1e6))


def rate(series, a, b):
    """Mean per second of a 100 ms series over [a, b) seconds."""
    i, j = max(0, int(round(a * 10))), max(0, int(round(b * 10)))
    return sum(series[i:j]) / ((j - i) / 10.0) if j > i else 0.0


def failover_rates(bench, events):
    """decisions/s before the kill, in the second after the promotion and
    in the seconds after that (to the end of the sale's decisions), or None."""
    tl = bench.get("timeline", {})
    ev = dict(read_events(events, tl.get("t0_wall_ms", 0))) if events else {}
    dec = tl.get("decided", [])
    if "kill" not in ev or "promoted" not in ev or not dec:
        return None
    last = max((i + 1 for i, v in enumerate(dec) if v), default=0) / 10.0
    p, o = ev["promoted"], ev.get("barrier", ev["promoted"])
    return {"before_kill": rate(dec, 0, ev["kill"]), "second_after_promotion": rate(dec, p, p + 1),
            "after_that": rate(dec, p + 1, max(last, p + 1)), "second_after_barrier": rate(dec, o, o + 1),
            "kill_s": ev["kill"], "promoted_s": p, "barrier_s": o, "end_s": last,
            "first_decision_after_barrier_s": next((i / 10.0 - o for i, v in enumerate(dec) if v and i / 10.0 >= o), None)}


DOC = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><title>dlock flash-sale demo: %(c)s</title>
<style>body{font-family:sans-serif;margin:2em;max-width:62em}td,th{padding:2px 10px;text-align:left}
.ok{color:#2a7d2a}.bad{color:#b00020}</style></head><body>
<h1>Flash sale <code>%(c)s</code></h1>
<p id="verdict" class="%(vc)s">%(verdict)s</p>
<table id="figures">
<tr><th>deployment</th><td id="deployment">%(dep)s</td></tr>
<tr><th>stock</th><td id="stock">%(stock)d</td></tr>
<tr><th>accepted orders (told 201 or 202, each order once)</th><td id="orders">%(orders)d</td></tr>
<tr><th>told 201 (units)</th><td id="accepted">%(acc)d</td></tr>
<tr><th>told 202 (pending), of which confirmed</th><td id="pending">%(pend)d / %(conf)d</td></tr>
<tr><th>promises broken</th><td id="broken">%(broken)d</td></tr>
<tr><th>sold in database</th><td id="persisted">%(sold)d</td></tr>
<tr><th>decisions/s (whole sale)</th><td id="rps">%(rps).0f</td></tr>
%(rates)s
<tr><th>latency p50 / p90 / p99 / max (us)</th><td id="latency">%(p50)d / %(p90)d / %(p99)d / %(max)d</td></tr>
</table>
<h2>Invariants</h2><table id="checks"><tr><th>check</th><th>value</th><th>result</th></tr>%(rows)s</table>
<h2>The sale over time: answers per 100 ms, by kind</h2>%(tl)s
<h2>Accepted orders over time (each order once, replays not counted)</h2>%(orders_svg)s
<h2>Latency histogram</h2>%(hist)s
</body></html>
"""


def write(a, bench, f, checks, failed):
    tl = bench.get("timeline", {})
    events = read_events(a.events, tl.get("t0_wall_ms", 0))
    orders = tl.get("orders", [])
    hist = [(le, n) for le, n in bench["latency_hist"] if n]
    r = failover_rates(bench, a.events)
    rates = "" if not r else (
        '<tr><th>decisions/s before the kill / in the second after the promotion / after that</th>'
        '<td id="failover-rates">%.0f / %.0f / %.0f</td></tr>'
        % (r["before_kill"], r["second_after_promotion"], r["after_that"]))
    lat = bench["latency_us"]
    doc = DOC % {
        "c": esc(a.campaign), "vc": "bad" if failed else "ok",
        "verdict": esc("FAILED: " + ", ".join(c[0] for c in failed)) if failed else "all invariants held",
        "dep": esc(deployment(a.redis_url)), "stock": a.stock, "orders": len(f["promised"]) + len(f["pending"]),
        "acc": f["told_qty"], "pend": len(f["pending"]), "conf": len(f["confirmed"]), "broken": len(f["broken"]),
        "sold": f["sold"], "rps": bench["requests_per_s"], "rates": rates,
        "p50": lat["p50"], "p90": lat["p90"], "p99": lat["p99"], "max": lat["max"],
        "rows": "".join("<tr><td>%s</td><td>%d</td><td>%s</td></tr>" % (esc(n), g, "ok" if g == w else "FAILED")
                        for n, g, w in checks),
        "tl": timeline_svg(tl, marks_of(tl, events)),
        "orders_svg": bars_svg(orders, ["%g" % (i / 10) for i in range(len(orders))], "orders per 100 ms",
                               "seconds since the sale started", "#2a7d2a",
                               lambda i, v: "%.1f s: %d new orders" % (i / 10, v)),
        "hist": bars_svg([n for _, n in hist], [fmt_us(le) for le, _ in hist], "answers",
                         "latency (upper bucket edge)", "#a86b3b",
                         lambda i, v: "<= %s: %d" % (fmt_us(hist[i][0]), v))}
    with open(a.html, "w") as out:
        out.write(doc)
