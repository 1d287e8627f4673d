#!/bin/bash
# test_ops.sh: every metric the alert rules (docs/ops/alerts.yml) and the
# Grafana dashboard (docs/ops/grafana-dashboard.json) use is exported by a
# real seckilld, a real libdlock client or `seckill metrics`, with the
# labels they select on; the dashboard shows seckill_mode and every metric
# `seckill metrics` exports; and every field the persisters leave in
# {c:<id>}:pipeline after a sale is exported by `seckill metrics` with its
# value (docs/pipeline.md).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-ops-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work"
port=$(dl_free_port)
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT" DATABASE_URL="sqlite://$work/orders.db"
"$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token t \
    >"$work/seckilld.log" 2>&1 &
dl_track $!
dl_wait_http "http://127.0.0.1:$port/healthz"
"$build/tools/seckill-bench/seckill-bench" --url "http://127.0.0.1:$port" --smoke --create \
    --admin-token t --campaign ops >/dev/null
"$build/tools/seckill-persist/seckill-persist" --drain --quiet
curl -s "http://127.0.0.1:$port/metrics" >"$work/exported.txt"
"$build/tests/ops/metrics_dump" "redis://127.0.0.1:$REDIS_PORT" >>"$work/exported.txt"
"$build/tools/seckill/seckill" metrics >"$work/pipeline.txt"
cat "$work/pipeline.txt" >>"$work/exported.txt"
redis-cli -p "$REDIS_PORT" --raw HGETALL '{c:ops}:pipeline' >"$work/hash.txt"
"$PY" - "$work/hash.txt" "$work/pipeline.txt" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
fields = dict(zip(lines[0::2], lines[1::2]))
fields.pop("", None)
text = open(sys.argv[2]).read()
# each field of {c:<id>}:pipeline -> (metric line selector, value scale)
where = {
    "persisted": ('seckill_pipeline_entries_total{campaign="ops",result="persisted"}', 1),
    "rejected": ('seckill_pipeline_entries_total{campaign="ops",result="rejected"}', 1),
    "duplicates": ('seckill_pipeline_entries_total{campaign="ops",result="duplicate"}', 1),
    "dead": ('seckill_pipeline_entries_total{campaign="ops",result="dead_lettered"}', 1),
    "stale": ('seckill_pipeline_entries_total{campaign="ops",result="stale"}', 1),
    "confirmed": ('seckill_tentative_finalised_total{campaign="ops",result="confirmed"}', 1),
    "lost": ('seckill_tentative_finalised_total{campaign="ops",result="lost"}', 1),
    "handbacks": ('seckill_reserve_handbacks_total{campaign="ops"}', 1),
    "barrier_runs": ('seckill_barrier_runs_total{campaign="ops"}', 1),
    "barrier_ms_total": ('seckill_barrier_seconds_total{campaign="ops"}', 1000),
    "barrier_last_ms": ('seckill_barrier_last_seconds{campaign="ops"}', 1000),
    "barrier_started_ms": ('seckill_barrier_running_seconds{campaign="ops"}', None),
}
assert int(fields.get("persisted", 0)) > 0, "the persister left no counters in {c:ops}:pipeline: %s" % fields
bad = []
for f, v in fields.items():
    if f not in where:
        bad.append("field %s of {c:ops}:pipeline is exported by no metric" % f)
        continue
    sel, scale = where[f]
    m = re.search(r"^%s (\S+)$" % re.escape(sel), text, re.M)
    if not m:
        bad.append("%s (field %s) not in seckill metrics" % (sel, f))
    elif scale and abs(float(m.group(1)) * scale - float(v)) > 1:
        bad.append("%s = %s, the hash's %s = %s" % (sel, m.group(1), f, v))
assert not bad, "\n".join(bad)
print("pipeline hash: every field (%s) exported by seckill metrics with its value" % " ".join(sorted(fields)))
PY
"$PY" - "$src/docs/ops" "$work/exported.txt" "$work/pipeline.txt" <<'PY'
import json, re, sys
ops, exported = sys.argv[1], open(sys.argv[2]).read()
pipeline = set(re.findall(r"^(seckill_[a-z_]+)[{ ]", open(sys.argv[3]).read(), re.M))
names = set(re.findall(r"^([a-z_]+)[{ ]", exported, re.M))
labels = set(re.findall(r'([a-z_]+)="', exported))
exprs = re.findall(r"expr:\s*(\|[\s\S]*?)(?=\n\s*(?:for|labels|annotations):|\Z)|expr:\s*(.+)",
                   open(ops + "/alerts.yml").read())
exprs = [a or b for a, b in exprs]
dash = json.load(open(ops + "/grafana-dashboard.json"))
exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
missing = []
for e in exprs:
    for m in re.findall(r"\b((?:lock|seckill)_[a-z_]+)", e):
        if m not in names:
            missing.append(m)
    for l in re.findall(r"\b([a-z_]+)=~?\"", e):
        if l not in labels:
            missing.append("label " + l)
    for l in re.findall(r"by \(([a-z_, ]+)\)", e):
        for x in l.split(","):
            x = x.strip()
            if x not in ("le", "instance", "job") and x not in labels:  # le: histograms; the rest: added by Prometheus
                missing.append("label " + x)
assert len(exprs) >= 12, "found only %d expressions" % len(exprs)
shown = set(m for t in dash["panels"] for tt in t["targets"] for m in re.findall(r"\b(seckill_[a-z_]+)", tt["expr"]))
unshown = sorted((pipeline | {"seckill_mode"}) - shown)
assert not unshown, "the dashboard has no panel for: %s" % unshown
assert not missing, "not exported: %s" % sorted(set(missing))
print("ops: %d expressions, every metric and label they use is exported" % len(exprs))
PY
