#!/bin/bash
# test_http_api_examples.sh: the examples of docs/http-api.md run as printed.
# Starts the deployment the section describes (Redis with appendonly yes +
# appendfsync always, seckilld with admin token s3cr3t and a SQLite
# database, one seckill-persist), cuts every ```sh block out of "##
# Examples", runs them in order in one bash (localhost:8080 -> our port;
# the streams drained before each block, as a reader's pause would) and
# compares each block's output with the ```text block after it: line by
# line, a JSON answer must have exactly the fields shown with the values
# shown, except order ids and times (any value of the same kind); any other
# line must be equal. Then `seckill order ID --json` on the session's
# order says "quantity" as the HTTP API does, and no doc still carries a
# draft marker.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-apidoc-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work" --appendonly yes --appendfsync always
port=$(dl_free_port)
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT" DATABASE_URL="sqlite://$work/orders.db"
"$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token s3cr3t \
    >"$work/seckilld.log" 2>&1 &
dl_track $!
"$build/tools/seckill-persist/seckill-persist" --quiet >"$work/persist.log" 2>&1 &
dl_track $!
dl_wait_http "http://127.0.0.1:$port/healthz" || { cat "$work/seckilld.log" >&2; exit 1; }

# the blocks: work/sh.N and work/want.N
"$PY" - "$src/docs/http-api.md" "$work" <<'PY'
import re, sys
text, work = open(sys.argv[1]).read(), sys.argv[2]
sec = text.split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```(\w+)\n(.*?)```", sec, re.S)
assert blocks, "no blocks under ## Examples"
n = 0
for i, (lang, body) in enumerate(blocks):
    if lang != "sh":
        continue
    assert i + 1 < len(blocks) and blocks[i + 1][0] == "text", "sh block %d has no ```text answer after it" % n
    open("%s/sh.%d" % (work, n), "w").write(body)
    open("%s/want.%d" % (work, n), "w").write(blocks[i + 1][1])
    n += 1
print("docs/http-api.md: %d example blocks" % n)
PY

# one shell for the whole session, as a reader pastes it
{
    echo 'cd "$WORK"'
    for f in "$work"/sh.*; do
        i=${f##*.}
        echo '"$SECKILL" reconcile --wait 5s >/dev/null 2>&1 || true'
        echo "{"
        sed "s/localhost:8080/127.0.0.1:$port/g" "$f"
        echo "} >\"\$WORK/got.$i\" 2>&1"
    done
    echo 'printf "%s" "$order" >"$WORK/order"'
} >"$work/session.sh"
WORK=$work SECKILL=$build/tools/seckill/seckill bash "$work/session.sh"

"$PY" - "$work" <<'PY'
import glob, json, os, re, sys
work = sys.argv[1]
VARYING = {"order_id": r"[1-9][0-9]*-[0-9a-f]{16}", "starts_at": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
           "ends_at": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"}
VARYING_INT = {"starts_at_ms", "ends_at_ms"}
bad = []
def same(want, got, where):
    try:
        w, g = json.loads(want), json.loads(got)
    except ValueError:
        w = g = None
    if not isinstance(w, dict) or not isinstance(g, dict):
        if want != got:
            bad.append("%s: got %r, the doc shows %r" % (where, got, want))
        return
    if sorted(w) != sorted(g):
        bad.append("%s: fields %s, the doc shows %s" % (where, sorted(g), sorted(w)))
        return
    for k in w:
        if k in VARYING:
            ok = isinstance(g[k], str) and re.fullmatch(VARYING[k], g[k])
        elif k in VARYING_INT:
            ok = isinstance(g[k], int)
        else:
            ok = g[k] == w[k]
        if not ok:
            bad.append("%s: %s = %r, the doc shows %r" % (where, k, g[k], w[k]))
n = len(glob.glob(work + "/sh.*"))
for i in range(n):
    want = open("%s/want.%d" % (work, i)).read().splitlines()
    got = open("%s/got.%d" % (work, i)).read().splitlines()
    if len(want) != len(got):
        bad.append("block %d: %d lines, the doc shows %d:\n  %s" % (i + 1, len(got), len(want), "\n  ".join(got)))
        continue
    for j, (w, g) in enumerate(zip(want, got)):
        same(w, g, "block %d line %d" % (i + 1, j + 1))
if bad:
    print("\n".join("FAIL: " + b for b in bad))
    sys.exit(1)
print("docs/http-api.md: %d blocks ran, every answer as the doc shows it" % n)
PY

order=$(cat "$work/order")
json=$("$build/tools/seckill/seckill" order "$order" --json)
"$PY" -c 'import json, sys
o = json.loads(sys.argv[1])
assert o.get("quantity") == 1 and "qty" not in o, "seckill order --json: %s" % o
print("seckill order --json: quantity, as the HTTP API says")' "$json"
drafts=$(grep -rlnEi '^\s*(>\s*)?\**(draft|wip|work in progress)\b' "$src/docs" "$src/README.md" || true)
[ -z "$drafts" ] || { echo "FAIL: draft marker in: $drafts" >&2; exit 1; }
echo "api docs: all checks passed"
