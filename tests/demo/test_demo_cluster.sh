#!/bin/bash
# test_demo_cluster.sh: `make demo-cluster` at reduced size (2 000 buyers,
# stock 100) on a private 3-master Redis Cluster: every invariant of the
# report holds (the demo exits non-zero otherwise), the sale sold its whole
# stock, each order was persisted once, and the HTML report renders.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
out=$(mktemp -d /tmp/dlock-demo-cluster-XXXXXX)
trap 'rm -rf "$out"' EXIT
DEMO_CLUSTER=1 DEMO_SKIP_BUILD=1 BUILD_DIR="$build" DEMO_BUYERS=2000 DEMO_SCALPERS=10 DEMO_BURST=100 \
    DEMO_BAD=100 DEMO_STOCK=100 DEMO_OUT="$out" "$src/scripts/demo.sh" | tee "$out/demo.log"
grep -q '^demo: Redis Cluster, masters ' "$out/demo.log" || { echo "FAIL: the demo did not run on a Cluster" >&2; exit 1; }
/usr/bin/python3 - "$out" <<'PY'
import json, sys, xml.etree.ElementTree as ET
out = sys.argv[1]
ids = {e.get("id"): "".join(e.itertext()) for e in ET.parse(out + "/report.html").getroot().iter() if e.get("id")}
bench = json.load(open(out + "/bench.json"))
assert ids["accepted"] == str(bench["accepted_qty"]) == "100", (ids, bench["accepted_qty"])
assert ids["orders"] == "100" and ids["persisted"] == "100", ids
PY
/usr/bin/python3 "$src/tests/demo/check_report.py" "$out/report.html" "$out"
