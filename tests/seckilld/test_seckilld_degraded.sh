#!/bin/bash
# test_seckilld_degraded.sh: degraded mode with real processes: 3 seckilld
# instances, one SQLite file, one persister, a redis-server with an
# fsync-always AOF. A sale runs; redis is killed (-9, by PID) mid-sale; the
# instances switch to the database path and keep selling (campaign B uses
# its reserve up there: 503 degraded_reserve_exhausted, as its 5 Redis units
# are not sold); redis restarts on the same port; the instances switch back
# once the persister mirrored the database-path orders; campaign A sells
# out on the Redis path, then (after the persister handed the unsold
# database reserve back) sells out again. The database path sells only
# each campaign's reserve (db_reserve units carved out of the stock; its
# orders are tentative until the persister finalises them). While degraded, a held database write lock shows
# the throttle (503 beyond degraded-max-inflight) and a free event loop.
# Checks: the database never sells more than the
# stock nor more than the limit to a user, every order records its path,
# some orders took each path, every 201 is a stored order, reconcile clean.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-degraded-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 30 "$work"/seckilld-*.log "$work"/persist.log >&2 || true; exit 1; }

dl_start_redis "$work" --appendonly yes --appendfsync always
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT" DATABASE_URL="sqlite://$work/orders.db"
TOKEN=t0k
hosts=()
dpids=()
for i in 1 2 3; do
    port=$(dl_free_port)
    # instance 3 admits only 2 database-path purchases at a time (throttle check)
    max=64
    [ $i = 3 ] && max=2
    "$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" \
        --degraded-after-ms 300 --degraded-recover-ms 500 --redis-timeout-ms 500 --degraded-max-inflight $max \
        >"$work/seckilld-$i.log" 2>&1 &
    dl_track $!
    dpids+=($!)
    hosts+=("127.0.0.1:$port")
done
"$build/tools/seckill-persist/seckill-persist" --sweep-interval 100ms --block 100ms >"$work/persist.log" 2>&1 &
dl_track $!
for h in "${hosts[@]}"; do dl_wait_http "http://$h/healthz" 100 || fail "$h not healthy"; done
urls=$(IFS=,; echo "${hosts[*]}")

now_ms=$(($(date +%s) * 1000))
create() { # id stock limit db_reserve
    code=$(curl -s -o "$work/create.out" -w '%{http_code}' -X POST "http://${hosts[0]}/v1/campaigns" \
        -H "Authorization: Bearer $TOKEN" -d "{\"id\":\"$1\",\"title\":\"t\",\"stock\":$2,\"per_user_limit\":$3,
        \"db_reserve\":$4,\"starts_at\":$((now_ms - 1000)),\"ends_at\":$((now_ms + 3600000)),\"price_cents\":1}")
    [ "$code" = 201 ] || fail "create $1: $code $(cat "$work/create.out")"
}
# db_reserve (docs/design/promise.md): the database keeps those units for
# its path, Redis gets the rest.
create dgA 1000 2 400
create dgB 25 5 20
redis_stock=$(redis-cli -p "$REDIS_PORT" GET "{c:dgA}:stock")
[ "$redis_stock" = 600 ] || fail "dgA: Redis got $redis_stock units of 1000 with a reserve of 400, want 600"

mode_of() { curl -s -m 2 "http://$1/metrics" | awk '$1 == "seckill_mode" {print $2}'; }
wait_mode() { # mode seconds
    for _ in $(seq 1 $(($2 * 10))); do
        all=1
        for h in "${hosts[@]}"; do [ "$(mode_of "$h")" = "$1" ] || all=0; done
        [ $all = 1 ] && return 0
        sleep 0.1
    done
    return 1
}
load() { # name campaign users [extra args]
    n=$1 c=$2 u=$3; shift 3
    "$PY" "$src/tests/seckilld/degraded_load.py" --urls "$urls" --campaign "$c" --users "$u" \
        --stop-file "$work/stop-$n" --out "$work/$n.json" "$@" &
    dl_track $!
    eval "pid_$n=$!"
}

# --- phase 1: Redis path; redis dies mid-sale ------------------------------
wait_file() { # file seconds: a handshake from a load
    for _ in $(seq 1 $(($2 * 20))); do [ -e "$1" ] && return 0; sleep 0.05; done
    return 1
}
load p1 dgA u1:100 --answered-file "$work/p1-answered"
# mid-sale: once the Redis path has decided a purchase
wait_file "$work/p1-answered" 20 || fail "no purchase decided on the Redis path"
kill -9 "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
touch "$work/stop-p1"
wait "$pid_p1"
wait_mode 1 10 || fail "instances did not switch to the database path"
echo "degraded: all 3 instances on the database path"

# --- phase 2: database path (A goes on, B sells out there) -----------------
load p2 dgA u2:100
load p2b dgB u2:100 --threads 3 --soldout-file "$work/p2b-soldout"
# dgB's database reserve (20 units) is gone once the load is told so (the
# reserve is the database's, one for every instance); its 5 Redis units are
# not sold: not sold out, a 503 that says why (docs/http-api.md)
wait_file "$work/p2b-soldout" 30 || fail "dgB did not use up its reserve on the database path"
late=$(curl -s -X POST "http://${hosts[1]}/v1/campaigns/dgB/purchase" -H 'X-User-Id: late' -w ' %{http_code}')
case "$late" in *'"error":"degraded_reserve_exhausted"'*' 503') ;;
    *) fail "dgB on the database path: $late (want 503 degraded_reserve_exhausted)" ;; esac
# a purchase under an Idempotency-Key waits for Redis (the database keeps
# no keys): the outcome table's answer, and no order is taken for it
keyed=$(curl -s -X POST "http://${hosts[0]}/v1/campaigns/dgA/purchase" -H 'X-User-Id: keyed-1' \
    -H 'Idempotency-Key: k-degraded-1' -w ' %{http_code}')
case "$keyed" in *'"error":"unavailable"'*'purchases with an Idempotency-Key wait for it'*' 503') ;;
    *) fail "a keyed purchase on the database path: $keyed (want 503 unavailable, the keyed-wait message)" ;; esac
case "$late" in *'"message":"Redis unavailable and this campaign'"'"'s database reserve is used up'*) ;;
    *) fail "dgB's reserve used up on the database path: $late (want the reserve message)" ;; esac

touch "$work/stop-p2" "$work/stop-p2b"
wait "$pid_p2"
wait "$pid_p2b"
# every database-path answer is the outcome table's: a reserve used up is
# never "sold out", nor a count of units Redis holds and this path cannot sell
"$PY" - "$work/p2b.json" <<'PYEOF' || fail "dgB: a database-path refusal said sold out or counted Redis's units: $(cat "$work/p2b.json")"
import json, sys
m = json.load(open(sys.argv[1])).get("messages", {})
want = ["Redis unavailable and this campaign's database reserve is used up (it is not sold out: "
        "the rest of its stock is Redis's to sell); retry later"]
sys.exit(0 if m.get("503 degraded_reserve_exhausted") == want and "409 sold_out" not in m else 1)
PYEOF

# --- the database is slow (write lock held): the loop still answers, the
# throttle refuses beyond 2 at once, the admitted ones complete --------------
"$PY" - "$work/orders.db" "${hosts[2]}" <<'PY'
import http.client, json, sqlite3, sys, threading, time
db, host = sys.argv[1], sys.argv[2]
lk = sqlite3.connect(db, isolation_level=None, timeout=10)
lk.execute("BEGIN IMMEDIATE")  # the database path now waits for the write lock
res = []
def buy(u):
    c = http.client.HTTPConnection(*host.split(":"), timeout=20)
    c.request("POST", "/v1/campaigns/dgA/purchase", body=b"{}", headers={"X-User-Id": u})
    r = c.getresponse()
    res.append((r.status, json.loads(r.read()).get("error", "")))
ts = [threading.Thread(target=buy, args=("lk-%d" % i,)) for i in range(6)]
for t in ts:
    t.start()
# handshake: the refusals have come back (4 answers while 2 purchases stay
# admitted behind the lock), instead of a guessed delay
deadline = time.time() + 10
while len(res) < 4 and time.time() < deadline:
    time.sleep(0.01)
t0 = time.time()
c = http.client.HTTPConnection(*host.split(":"), timeout=5)
c.request("GET", "/ping")
assert c.getresponse().status == 200
ping_ms = (time.time() - t0) * 1000
early = sorted(res)
lk.execute("ROLLBACK")
for t in ts:
    t.join()
print("degraded: while the database was locked: %s, /ping %.1f ms; then: %s" % (early, ping_ms, sorted(res)))
assert early == [(503, "unavailable")] * 4, "throttle: want 4 x 503 at once, got %s" % early
assert ping_ms < 500, "event loop blocked: /ping took %.0f ms" % ping_ms
# database-path orders are tentative: 202 pending (docs/design/promise.md)
assert sorted(res) == [(202, "")] * 2 + [(503, "unavailable")] * 4, sorted(res)
PY
load p2c dgA u4:50 --threads 3

# --- redis back on the same port; switch back after mirroring --------------
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$work" --save '' --appendonly yes \
    --appendfsync always --protected-mode no >"$work/redis-restart.log" 2>&1 &
REDIS_PID=$!
dl_track $REDIS_PID
wait_mode 0 30 || fail "instances did not switch back to Redis"
echo "degraded: all 3 instances back on the Redis path"
touch "$work/stop-p2c"
wait "$pid_p2c"
# The restarted server has a new run id: dgA sells again only after
# seckill-persist ran the barrier (drain, seal, mirror, open).
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$REDIS_PORT" HGET "{c:dgA}:meta" runid)" = \
      "$(redis-cli -p "$REDIS_PORT" INFO server | awk -F: '$1 == "run_id" {print $2}' | tr -d '\r')" ] && break
    sleep 0.1
done
[ "$(redis-cli -p "$REDIS_PORT" HGET "{c:dgA}:meta" runid)" = \
  "$(redis-cli -p "$REDIS_PORT" INFO server | awk -F: '$1 == "run_id" {print $2}' | tr -d '\r')" ] ||
    fail "the persister did not run the barrier on the restarted server"
echo "degraded: the barrier reopened dgA on the restarted server"

# --- phase 3: Redis path until A is sold out -------------------------------
load p3 dgA u3:500 --until-soldout --seconds 20
load p3b dgA u2:100 --until-soldout --seconds 20 --threads 2
wait "$pid_p3"
wait "$pid_p3b"
# Redis sold out while healthy: the persister hands the unsold reserve back
# once; it sells on the Redis path (after the instances' sold-out poll)
for _ in $(seq 1 100); do
    done_=$("$PY" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(
        "SELECT handback_done FROM campaign_stock WHERE campaign=\"dgA\"").fetchone()[0])' "$work/orders.db")
    [ "$done_" = 1 ] && break
    sleep 0.1
done
[ "$done_" = 1 ] || fail "the reserve of dgA was not handed back"
sleep 1
load p4 dgA u5:500 --until-soldout --seconds 20
wait "$pid_p4"

"$build/tools/seckill/seckill" reconcile --wait 15s >"$work/reconcile.txt" 2>&1 ||
    { cat "$work/reconcile.txt" >&2; fail "reconcile not clean"; }
for h in "${hosts[@]}"; do curl -s "http://$h/metrics" | grep -E '^seckill_(mode|db_purchases_total|degraded_entered)' \
    | grep -v ' 0$' | sed "s|^|$h |" || true; done

"$PY" - "$work" <<'PY'
import json, sqlite3, sys
w = sys.argv[1]
db = sqlite3.connect(w + "/orders.db")
ph = {n: json.load(open("%s/%s.json" % (w, n))) for n in ("p1", "p2", "p2b", "p2c", "p3", "p3b", "p4")}
for n, r in ph.items():
    print("degraded: phase %s: %s" % (n, r["codes"]))
stock = {"dgA": 1000, "dgB": 20}  # dgB: its reserve (Redis's 5 units are never offered)
limit = {"dgA": 2, "dgB": 5}
live = "status IN ('persisted','paid')"
for c in stock:
    sold = db.execute("SELECT COALESCE(SUM(qty),0) FROM orders WHERE campaign=? AND " + live, (c,)).fetchone()[0]
    assert sold == stock[c], "%s: sold %d of %d (must sell out exactly)" % (c, sold, stock[c])
    worst = db.execute("SELECT user_id, SUM(qty) s FROM orders WHERE campaign=? AND " + live +
                       " GROUP BY user_id ORDER BY s DESC LIMIT 1", (c,)).fetchone()
    assert worst[1] <= limit[c], "%s: user %s holds %d > limit %d" % (c, worst[0], worst[1], limit[c])
bad = db.execute("SELECT COUNT(*) FROM orders WHERE path NOT IN ('redis','db') OR path IS NULL").fetchone()[0]
assert bad == 0, "%d orders without a path" % bad
rej = db.execute("SELECT COUNT(*) FROM orders WHERE status='rejected'").fetchone()[0]
assert rej == 0, "%d orders rejected by the database guard" % rej
assert db.execute("SELECT COUNT(*) FROM orders WHERE user_id = 'keyed-1'").fetchone()[0] == 0, \
    "the keyed purchase refused on the database path took an order"
paths = dict(db.execute("SELECT path, COUNT(*) FROM orders GROUP BY path").fetchall())
print("degraded: orders by path:", paths)
path_of = dict((str(i), p) for i, p in db.execute("SELECT order_id, path FROM orders"))
for n, r in ph.items():
    missing = [i for i in r["accepted"] if i not in path_of]
    assert not missing, "phase %s: %d accepted orders not in the database (%s...)" % (n, len(missing), missing[:3])
p1 = [path_of[i] for i in ph["p1"]["accepted"]]
assert p1 and all(p == "redis" for p in p1), "phase 1 orders must be redis-path"
p2 = [path_of[i] for i in ph["p2"]["accepted"] + ph["p2b"]["accepted"]]
assert p2.count("db") > 0, "no order took the database path while redis was down"
dbB = db.execute("SELECT COUNT(*) FROM orders WHERE campaign='dgB' AND path<>'db'").fetchone()[0]
assert dbB == 0, "dgB was sold while redis was down: every order must be db-path"
p3 = [path_of[i] for i in ph["p3"]["accepted"] + ph["p3b"]["accepted"] + ph["p4"]["accepted"]]
assert p3 and all(p == "redis" for p in p3), "after the switch back orders must take the redis path"
print("degraded: ok (db-path %d, redis-path after switch-back %d)" % (p2.count("db"), len(p3)))
PY

# redis down again: SIGTERM while database-path purchases are under way;
# every instance exits 0 (under ASan: no leaks, no memory errors)
kill -9 "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
wait_mode 1 10 || fail "instances did not switch to the database path again"
load p4 dgB u5:50 --seconds 5 --answered-file "$work/p4-answered"
# handshake: SIGTERM only once a database-path answer has come back
for _ in $(seq 1 100); do [ -e "$work/p4-answered" ] && break; sleep 0.1; done
[ -e "$work/p4-answered" ] || fail "no database-path answer in 10 s before SIGTERM: $(ls "$work")"
for p in "${dpids[@]}"; do
    kill -TERM "$p"
    rc=0
    wait "$p" || rc=$?
    [ $rc = 0 ] || fail "seckilld $p exited $rc on SIGTERM"
done
! grep -l 'Sanitizer' "$work"/seckilld-*.log || fail "sanitizer report in a seckilld log"
touch "$work/stop-p4"
wait "$pid_p4" || true
grep -q '"202 pending"\|"409 sold_out"\|"503 degraded_reserve_exhausted"' "$work/p4.json" || fail "no database-path answer before SIGTERM: $(cat "$work/p4.json")"
