#!/bin/bash
# test_user_signatures.sh: expiring signed identities and admin text, with
# real processes: a redis-server, one SQLite file and two seckilld
# instances (A: current and previous user secret; B: current secret and
# the legacy switch) run user_signatures.py (expiry and its leeway,
# malformed forms, rotation, the legacy form only under its switch,
# campaign binding, control characters in titles). Then: B warned about
# the legacy form at start; a previous secret without a current one is
# refused (exit 2, also by --check-config); `seckill campaigns` prints a title holding a raw ESC
# and a newline (written into the database behind seckilld's back) escaped,
# and `seckill order` (text and --json) an order row's text fields so.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-usersig-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$work"/*.log >&2 || true; exit 1; }

dl_start_redis "$work"
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT" DATABASE_URL="sqlite://$work/orders.db"
seckilld=$build/tools/seckilld/seckilld
start() { # NAME ARGS...: starts one instance; its port in PORT. Not run
    # in $(...): the PID must be tracked by this shell, whose exit stops it
    local name=$1
    shift
    PORT=$(dl_free_port)
    "$seckilld" --port "$PORT" --bind 127.0.0.1 --admin-token adm --threads 1 "$@" >"$work/$name.log" 2>&1 &
    dl_track $!
    dl_wait_http "http://127.0.0.1:$PORT/healthz" >/dev/null || fail "seckilld $name did not start"
}
start a --user-secret new --user-secret-previous old
pa=$PORT
start b --user-secret new --user-signature-legacy
pb=$PORT
"$PY" "$src/tests/seckilld/user_signatures.py" "$pa" "$pb" || fail "user signatures"

grep -q 'user-signature-legacy' "$work/b.log" || fail "no warning about the legacy form in B's log"
grep -q 'user-signature-legacy' "$work/a.log" && fail "A warned about a legacy form it does not accept"
for extra in "--user-secret-previous old" "--user-signature-legacy" "--user-secret-previous old --check-config"; do
    rc=0
    # shellcheck disable=SC2086 # the flags are words
    "$seckilld" --port 0 --bind 127.0.0.1 $extra >"$work/refused.log" 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "$extra without a user secret: exit $rc, want 2 (bad configuration)"
    grep -q 'need user-secret' "$work/refused.log" || fail "refusal without a reason: $(cat "$work/refused.log")"
done
echo "ok: legacy warning at start; a previous secret alone is refused"

# a title written into the database directly (older version, SQL by hand)
"$PY" - "$work/orders.db" <<'PYEOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("UPDATE campaigns SET title = ? WHERE id = 'c1'", ("evil\x1b[2J\x1b]0;pwned\x07\nFAKE LOG LINE\\",))
con.commit()
PYEOF
"$build/tools/seckill/seckill" campaigns >"$work/campaigns.out" 2>&1 || fail "seckill campaigns: $(cat "$work/campaigns.out")"
"$build/tools/seckill/seckill" campaigns show c1 >"$work/show.out" 2>&1 || fail "seckill campaigns show: $(cat "$work/show.out")"
for f in campaigns show; do
    if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/$f.out"; then
        fail "seckill $f printed a raw control byte: $(od -c "$work/$f.out" | head -20)"
    fi
    grep -q '^FAKE LOG LINE' "$work/$f.out" && fail "seckill $f printed the title's newline raw"
    grep -qF 'evil\x1b[2J\x1b]0;pwned\x07\x0aFAKE LOG LINE\x5c' "$work/$f.out" ||
        fail "seckill $f: title not shown escaped: $(cat "$work/$f.out")"
done
echo "ok: seckill campaigns (list and show) escapes control bytes from the database"

# an order row whose text fields hold control bytes, a quote and a
# backslash (SQL by hand, `seckill cancel --reason TEXT`): `seckill order`
# prints them escaped, and its --json output stays one valid object
"$PY" - "$work/orders.db" <<'PYEOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms, updated_ms)"
            " VALUES (999, 'c1', ?, 1, 'cancelled', ?, 'db', 1, 1)",
            ("u\x1b[2Jx", 'evil"\x1b]0;pwned\x07\nFAKE LOG LINE\\'))
con.commit()
PYEOF
"$build/tools/seckill/seckill" order 999 >"$work/order.out" 2>&1 || fail "seckill order: $(cat "$work/order.out")"
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/order.out"; then
    fail "seckill order printed a raw control byte: $(od -c "$work/order.out" | head -20)"
fi
grep -q '^FAKE LOG LINE' "$work/order.out" && fail "seckill order printed the reason's newline raw"
grep -qF 'user u\x1b[2Jx ' "$work/order.out" || fail "seckill order: user not shown escaped: $(cat "$work/order.out")"
grep -qF 'evil"\x1b]0;pwned\x07\x0aFAKE LOG LINE\x5c' "$work/order.out" ||
    fail "seckill order: reason not shown escaped: $(cat "$work/order.out")"
"$build/tools/seckill/seckill" --json order 999 >"$work/order.json" 2>&1 || fail "seckill --json order: $(cat "$work/order.json")"
"$PY" - "$work/order.json" <<'PYEOF' || fail "seckill --json order: $(cat "$work/order.json")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["user"] == "u\x1b[2Jx", o
assert o["reason"] == 'evil"\x1b]0;pwned\x07\nFAKE LOG LINE\\', o
assert o["order_id"] == "999" and o["quantity"] == 1 and o["status"] == "cancelled", o
PYEOF
echo "ok: seckill order escapes what it prints from the database (text and JSON)"

# bidi controls and invisible characters (a title that reads reversed, a
# reason with a hidden line separator, a C1 control, a tag character):
# shown as \uXXXX in the text form; the --json form escapes them too and
# stays valid JSON that reads back as the same text
hidden_title='pay\u202eexe.txt\u200bzw\u2028ls\u2029ps\u2066i\u2067r\u2068f\u2069p\u200el\u200fr\ufeffbom'
"$PY" - "$work/orders.db" <<'PYEOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
title = "pay\u202eexe.txt\u200bzw\u2028ls\u2029ps\u2066i\u2067r\u2068f\u2069p\u200el\u200fr\ufeffbom"
con.execute("UPDATE campaigns SET title = ? WHERE id = 'c1'", (title,))
con.execute("INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms, updated_ms)"
            " VALUES (998, 'c1', 'u2', 1, 'cancelled', ?, 'db', 1, 1)", ("why\u2028\u0085c1\U000e0041tag\u00e9",))
con.commit()
PYEOF
"$build/tools/seckill/seckill" campaigns >"$work/campaigns.out" 2>&1 || fail "seckill campaigns: $(cat "$work/campaigns.out")"
"$build/tools/seckill/seckill" campaigns show c1 >"$work/show.out" 2>&1 || fail "seckill campaigns show: $(cat "$work/show.out")"
"$build/tools/seckill/seckill" order 998 >"$work/order.out" 2>&1 || fail "seckill order: $(cat "$work/order.out")"
"$build/tools/seckill/seckill" --json order 998 >"$work/order.json" 2>&1 || fail "seckill --json order: $(cat "$work/order.json")"
"$build/tools/seckill/seckill" --json campaigns show c1 >"$work/show.json" 2>&1 ||
    fail "seckill --json campaigns show: $(cat "$work/show.json")"
for f in campaigns.out show.out order.out order.json show.json; do
    # UTF-8 of U+200B-U+200F, U+2028-U+202E, U+2060-U+206F, U+FEFF, C1, tags
    if LC_ALL=C grep -qP '\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa0-\xaf]|\xef\xbb\xbf|\xc2[\x80-\x9f]|\xf3\xa0' "$work/$f"; then
        fail "seckill printed a raw bidi or invisible character ($f): $(od -c "$work/$f" | head -20)"
    fi
done
for f in campaigns show; do
    grep -qF "$hidden_title" "$work/$f.out" || fail "seckill $f: title not shown escaped: $(cat "$work/$f.out")"
done
grep -qF 'why\u2028\xc2\x85c1\U000e0041tag'$'\u00e9' "$work/order.out" ||
    fail "seckill order: reason not shown escaped: $(cat "$work/order.out")"
"$PY" - "$work/order.json" "$work/show.json" <<'PYEOF' || fail "seckill --json: $(cat "$work/order.json" "$work/show.json")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["reason"] == "why\u2028\u0085c1\U000e0041tag\u00e9", o
s = json.load(open(sys.argv[2]))
assert s["database"]["title"] == ("pay\u202eexe.txt\u200bzw\u2028ls\u2029ps\u2066i\u2067r\u2068f\u2069p"
                                  "\u200el\u200fr\ufeffbom"), s
PYEOF
echo "ok: seckill shows bidi controls and invisible characters escaped (text and JSON)"
echo "user signatures and admin text: all checks passed"
