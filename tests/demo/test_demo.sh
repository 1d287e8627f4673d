#!/bin/bash
# test_demo.sh: the README's demo at reduced size (2 000 buyers, stock 100),
# then checks that its HTML report is well-formed XML, holds the figures
# and renders in headless Chromium (tests/demo/check_report.py), and runs the load generator's --smoke mode in its ping and buy modes.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
out=$(mktemp -d /tmp/dlock-demo-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
DEMO_SKIP_BUILD=1 BUILD_DIR="$build" DEMO_BUYERS=2000 DEMO_SCALPERS=10 DEMO_BURST=100 \
    DEMO_BAD=100 DEMO_STOCK=100 DEMO_OUT="$out" "$src/scripts/demo.sh"
/usr/bin/python3 - "$out" <<'PY'
import json, sys, xml.etree.ElementTree as ET
out = sys.argv[1]
root = ET.parse(out + "/report.html").getroot()
ids = {e.get("id"): "".join(e.itertext()) for e in root.iter() if e.get("id")}
bench = json.load(open(out + "/bench.json"))
assert ids["stock"] == "100", ids
assert ids["accepted"] == str(bench["accepted_qty"]) == "100", (ids, bench["accepted_qty"])
assert ids["orders"] == "100", ids  # each order once, the scalpers' replays not counted
assert ids["persisted"] == "100", ids
PY
/usr/bin/python3 "$src/tests/demo/check_report.py" "$out/report.html" "$out"

# --- seckill-bench --smoke in its other modes, against one seckilld -----
. "$src/scripts/lib.sh"
trap 'dl_cleanup; rm -rf "$out"' EXIT
dl_start_redis "$out" --appendonly yes --appendfsync always  # the reply is the acknowledgement: 201
port=$(dl_free_port)
"$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token t0k \
    --redis-url "redis://127.0.0.1:$REDIS_PORT" >"$out/seckilld.log" 2>&1 &
dl_track $!
dl_wait_http "http://127.0.0.1:$port/healthz"
bench="$build/tools/seckill-bench/seckill-bench"
"$bench" --url "http://127.0.0.1:$port" --mode ping --smoke --connections 8 --csv | tee "$out/ping.csv"
"$bench" --url "http://127.0.0.1:$port" --mode buy --smoke --connections 8 --campaign smoke \
    --create --admin-token t0k --stock 1000000 --limit 1 --json >"$out/buy.json"
/usr/bin/python3 - "$out" <<'PY'
import csv, json, sys
out = sys.argv[1]
ping = list(csv.DictReader(open(out + "/ping.csv")))[0]
assert int(ping["responses"]) > 0 and int(ping["conn_errors"]) == 0, ping
buy = json.load(open(out + "/buy.json"))
assert buy["accepted"] == buy["responses"] > 0, buy   # unique buyers, ample stock: all accepted
assert buy["status"] == {"201": buy["responses"]}, buy["status"]
print("bench smoke ok: ping %s req, buy %d accepted" % (ping["responses"], buy["accepted"]))
PY
