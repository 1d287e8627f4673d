#!/bin/bash
# test_ops.sh: every metric the alert rules (docs/ops/alerts.yml) and the
# Grafana dashboard (docs/ops/grafana-dashboard.json) use is exported by a
# real seckilld, a real libdlock client or `seckill metrics`, with the
# labels they select on.
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
curl -s "http://127.0.0.1:$port/metrics" >"$work/exported.txt"
"$build/tests/ops/metrics_dump" "redis://127.0.0.1:$REDIS_PORT" >>"$work/exported.txt"
"$build/tools/seckill/seckill" metrics >>"$work/exported.txt"
"$PY" - "$src/docs/ops" "$work/exported.txt" <<'PY'
import json, re, sys
ops, exported = sys.argv[1], open(sys.argv[2]).read()
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
assert not missing, "not exported: %s" % sorted(set(missing))
print("ops: %d expressions, every metric and label they use is exported" % len(exprs))
PY
