#!/bin/bash
# test_seckilld_db_books.sh: the database path keeps the same books as the
# Redis path, with real processes: one seckilld, a persister,
# SQLite, a redis-server with an fsync-always AOF, stopped and started by PID.
#  - a replayed Idempotency-Key of an order since cancelled answers the
#    order's current state (200, GET's document), never 201 "accepted";
#  - creating a campaign while Redis is down answers 503 and stores nothing
#    (the database included); once Redis is back the same creation works;
#  - on the database path a quantity above the reserve left is refused
#    (503 degraded_reserve_exhausted, "only 5 left") without flagging the
#    reserve empty: a purchase of 1 still sells; a reserve used up while the
#    campaign has units in Redis (the default db_reserve 0 at once) is that
#    503 with Retry-After, never 409 sold_out, and takes no order; a
#    campaign sold out (and persisted) before the outage is 409 sold_out;
#  - after 24 units sold on the database path, a forced pre-heat counts them
#    once: reconcile stays consistent, and releasing the orders gives every
#    unit back (Redis + buyers + reserve = stock).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-dbbooks-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 30 "$work"/seckilld.log "$work"/persist.log >&2 || true; exit 1; }

dl_start_redis "$work" --appendonly yes --appendfsync always
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT" DATABASE_URL="sqlite://$work/orders.db"
TOKEN=t0k
port=$(dl_free_port)
h="127.0.0.1:$port"
# one event loop: the sold-out flag is per loop
"$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" \
    --degraded-after-ms 300 --degraded-recover-ms 500 --redis-timeout-ms 500 --threads 1 >"$work/seckilld.log" 2>&1 &
dl_track $!
SK_PID=$!
"$build/tools/seckill-persist/seckill-persist" --sweep-interval 100ms --block 100ms >"$work/persist.log" 2>&1 &
dl_track $!
dl_wait_http "http://$h/healthz" 100 || fail "seckilld not healthy"

now_ms=$(($(date +%s) * 1000))
# post PATH BODY [curl args...]: prints "<body> <code>"
post() { p=$1 b=$2; shift 2; curl -s -m 10 -X POST "http://$h$p" -d "$b" -w ' %{http_code}' "$@"; }
def() { # id stock limit db_reserve
    echo "{\"id\":\"$1\",\"title\":\"t\",\"stock\":$2,\"per_user_limit\":$3,\"db_reserve\":$4,
        \"starts_at\":$((now_ms - 1000)),\"ends_at\":$((now_ms + 3600000)),\"price_cents\":1}"
}
admin=(-H "Authorization: Bearer $TOKEN")
create() { post /v1/campaigns "$(def "$@")" "${admin[@]}"; }
sql() { "$PY" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1], timeout=10).execute(sys.argv[2]).fetchone()[0])' \
    "$work/orders.db" "$1"; }
field() { "$PY" -c 'import json,sys; print(json.loads(sys.argv[1].rsplit(" ",1)[0])[sys.argv[2]])' "$1" "$2"; }
code_of() { echo "${1##* }"; }
mode() { curl -s -m 2 "http://$h/metrics" | awk '$1 == "seckill_mode" {print $2}'; }
wait_mode() { for _ in $(seq 1 $(($2 * 10))); do [ "$(mode)" = "$1" ] && return 0; sleep 0.1; done; return 1; }
reconcile() { "$build/tools/seckill/seckill" reconcile --campaign "$1" --wait 15s >"$work/rec.txt" 2>&1; }

for c in "bk 100 10 50" "sm 10 10 5" "rp 10 1 0" "z0 5 5 0" "gs 1 1 0"; do
    # shellcheck disable=SC2086
    r=$(create $c)
    [ "$(code_of "$r")" = 201 ] || fail "create $c: $r"
done

# --- a replay after the order was cancelled ---------------------------------
r=$(post /v1/campaigns/rp/purchase '{"quantity":1}' -H 'X-User-Id: ru' -H 'Idempotency-Key: k-rp')
case "$(code_of "$r")" in 201 | 202) ;; *) fail "keyed purchase: $r" ;; esac
ref=$(field "$r" order_id)
for _ in $(seq 1 100); do
    [ "$(sql "SELECT COUNT(*) FROM orders WHERE campaign='rp' AND status='persisted'")" = 1 ] && break
    sleep 0.1
done
c=$(post "/v1/orders/$ref/cancel" '' -H 'X-User-Id: ru')
[ "$(code_of "$c")" = 200 ] || fail "cancel: $c"
g=$(curl -s -m 10 "http://$h/v1/orders/$ref" -H 'X-User-Id: ru' -w ' %{http_code}')
r=$(post /v1/campaigns/rp/purchase '{"quantity":1}' -H 'X-User-Id: ru' -H 'Idempotency-Key: k-rp')
[ "$(code_of "$r")" = 200 ] || fail "replay of a cancelled order's key: $r (want 200 and the order's state)"
[ "$r" = "$g" ] || fail "replay of a cancelled order's key: $r, but GET says $g"
case "$r" in *'"status":"cancelled"'*) ;; *) fail "replay of a cancelled order: $r" ;; esac
echo "ok: a replayed key of a cancelled order answers its state: $r"

# gs sells its one unit on the Redis path, persisted before the outage
r=$(post /v1/campaigns/gs/purchase '{"quantity":1}' -H 'X-User-Id: g1')
[ "$(code_of "$r")" = 201 ] || fail "gs, its one unit on the Redis path: $r"
for _ in $(seq 1 100); do
    [ "$(sql "SELECT remaining FROM campaign_stock WHERE campaign='gs'")" = 0 ] && break
    sleep 0.1
done
[ "$(sql "SELECT remaining FROM campaign_stock WHERE campaign='gs'")" = 0 ] || fail "gs's sale was not persisted"

# --- Redis down: the database path ------------------------------------------
kill -9 "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
wait_mode 1 10 || fail "seckilld did not switch to the database path"

r=$(create nc 10 1 0)
[ "$(code_of "$r")" = 503 ] || fail "create while Redis is down: $r (want 503)"
[ "$(sql "SELECT COUNT(*) FROM campaigns WHERE id='nc'")" = 0 ] || fail "a 503 creation stored the campaign"
[ "$(sql "SELECT COUNT(*) FROM campaign_stock WHERE campaign='nc'")" = 0 ] || fail "a 503 creation stored its stock"
echo "ok: creating a campaign while Redis is down stores nothing: $r"

r=$(post /v1/campaigns/sm/purchase '{"quantity":6}' -H 'X-User-Id: s1')
[ "$(code_of "$r")" = 503 ] || fail "6 of a reserve of 5: $r (want 503)"
case "$r" in *'"error":"degraded_reserve_exhausted"'*'reserve has only 5 left; buy fewer or retry later"'*) ;;
    *) fail "6 of 5: $r (want degraded_reserve_exhausted, only 5 left)" ;; esac
r=$(post /v1/campaigns/sm/purchase '{"quantity":1}' -H 'X-User-Id: s2')
[ "$(code_of "$r")" = 202 ] || fail "1 after a refused 6: $r (want 202: the reserve has 5)"
r=$(post /v1/campaigns/sm/purchase '{"quantity":4}' -H 'X-User-Id: s3')
[ "$(code_of "$r")" = 202 ] || fail "the last 4 of the reserve: $r"
r=$(post /v1/campaigns/sm/purchase '{"quantity":1}' -H 'X-User-Id: s4')
case "$r" in *'"error":"degraded_reserve_exhausted"'*' 503') ;;
    *) fail "the reserve is empty, 5 units in Redis: $r (want 503 degraded_reserve_exhausted)" ;; esac
echo "ok: a quantity above the reserve is refused and a smaller one still sells"

# the default reserve (0) while Redis holds 5 units: not sold out, a 503
# that says why and when to come back; the second answer (the flag) as well
for u in z1 z2; do
    hdr=$(curl -s -m 10 -D - -o "$work/z0.out" -X POST "http://$h/v1/campaigns/z0/purchase" -H "X-User-Id: $u")
    r="$(cat "$work/z0.out") $(awk 'NR == 1 {print $2}' <<<"$hdr")"
    case "$r" in *'"error":"degraded_reserve_exhausted"'*'"message":"Redis unavailable and this campaign'"'"'s database reserve is used up'*' 503') ;;
        *) fail "z0 (reserve 0, 5 units in Redis) on the database path, $u: $r (want 503 degraded_reserve_exhausted)" ;; esac
    grep -qi '^Retry-After: [1-9]' <<<"$hdr" || fail "z0's 503 has no Retry-After: $hdr"
done
[ "$(sql "SELECT COUNT(*) FROM orders WHERE campaign='z0'")" = 0 ] || fail "a refused z0 purchase took an order"
# gs has no unit left anywhere: sold out, as on the Redis path
r=$(post /v1/campaigns/gs/purchase '{"quantity":1}' -H 'X-User-Id: g2')
case "$r" in *'"error":"sold_out"'*' 409') ;; *) fail "gs has no unit left: $r (want 409 sold_out)" ;; esac
echo "ok: a used-up reserve is 503 degraded_reserve_exhausted with Retry-After; no unit left is 409 sold_out"

refs=()
for u in d1 d2 d3; do
    r=$(post /v1/campaigns/bk/purchase '{"quantity":8}' -H "X-User-Id: $u")
    [ "$(code_of "$r")" = 202 ] || fail "database path, 8 for $u: $r"
    refs+=("$(field "$r" order_id)")
done

# --- Redis back (same port, its AOF) -----------------------------------------
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$work" --save '' --appendonly yes \
    --appendfsync always --protected-mode no >"$work/redis-restart.log" 2>&1 &
REDIS_PID=$!
dl_track $REDIS_PID
wait_mode 0 30 || fail "seckilld did not switch back to Redis"
runid() { redis-cli -p "$REDIS_PORT" INFO server | awk -F: '$1 == "run_id" {print $2}' | tr -d '\r'; }
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$REDIS_PORT" HGET "{c:bk}:meta" runid)" = "$(runid)" ] && break
    sleep 0.1
done
reconcile bk || { cat "$work/rec.txt" >&2; fail "reconcile after 24 database-path units"; }
[ "$(sql "SELECT SUM(qty) FROM orders WHERE campaign='bk' AND path='db' AND status='persisted'")" = 24 ] ||
    fail "the 24 database-path units are not persisted"

r=$(post "/v1/campaigns/bk/preheat?force=1" '' "${admin[@]}")
[ "$(code_of "$r")" = 200 ] || fail "preheat force: $r"
[ "$(field "$r" remaining)" = 50 ] || fail "preheat force after 24 database-path units: $r (Redis had 50)"
reconcile bk || { cat "$work/rec.txt" >&2; fail "reconcile after the forced pre-heat"; }
echo "ok: a forced pre-heat counts the database-path sales once: $r"

for ref in "${refs[@]}"; do
    c=$(post "/v1/orders/$ref/cancel" '' "${admin[@]}")
    [ "$(code_of "$c")" = 200 ] || fail "cancel $ref: $c"
done
for _ in $(seq 1 100); do
    [ "$(sql "SELECT COUNT(*) FROM orders WHERE campaign='bk' AND status='cancelled' AND redis_released=1")" = 3 ] &&
        break
    sleep 0.1
done
reconcile bk || { cat "$work/rec.txt" >&2; fail "reconcile after the releases"; }
stock=$(redis-cli -p "$REDIS_PORT" GET "{c:bk}:stock")
held=$(redis-cli -p "$REDIS_PORT" HVALS "{c:bk}:buyers" | awk '{s += $1} END {print s + 0}')
reserve=$(sql "SELECT reserve_remaining FROM campaign_stock WHERE campaign='bk'")
[ $((stock + held + reserve)) = 100 ] || fail "units lost: Redis $stock + held $held + reserve $reserve != 100"
[ "$stock" = 74 ] || fail "Redis stock after the releases: $stock (want 50 + 24)"
echo "ok: released database-path units all came back (Redis $stock, held $held, reserve $reserve)"

# --- the refused creation again, Redis up ------------------------------------
r=$(create nc 10 1 0)
[ "$(code_of "$r")" = 201 ] || fail "re-create after Redis is back: $r (want 201)"
g=$(curl -s -m 10 "http://$h/v1/campaigns/nc" -w ' %{http_code}')
[ "$(code_of "$g")" = 200 ] || fail "GET the re-created campaign: $g"
r=$(post /v1/campaigns/nc/purchase '{"quantity":1}' -H 'X-User-Id: n1')
case "$(code_of "$r")" in 201 | 202) ;; *) fail "purchase of the re-created campaign: $r" ;; esac
echo "ok: the creation refused while Redis was down succeeds once it is back"

kill -TERM "$SK_PID"
rc=0
wait "$SK_PID" || rc=$?
[ $rc = 0 ] || fail "seckilld exited $rc on SIGTERM"
! grep -l 'Sanitizer' "$work"/seckilld.log || fail "sanitizer report in the seckilld log"
