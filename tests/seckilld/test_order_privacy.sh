#!/bin/bash
# test_order_privacy.sh: buyers see only their own orders, with real
# processes: a fsync-always redis-server, two seckilld instances (signed
# identities, admin token, one SQLite file) and one seckill-persist. A sale
# runs; an attacker who owns one order per instance enumerates the ids
# around them (time window x worker ids x sequence, bare and with made-up
# tags) and must find none of the victims' orders; a buyer reads, pays and
# cancels only their own; the admin token reads any; a refusal is the 404
# of a nonexistent order, byte for byte; /metrics and /healthz show no
# worker id or node address without the admin token (order_privacy.py).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-privacy-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$work"/seckilld-*.log "$work"/persist.log >&2 || true; exit 1; }

dl_start_redis "$work" --appendonly yes --appendfsync always
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT" DATABASE_URL="sqlite://$work/orders.db"
ports=()
for i in 1 2; do
    port=$(dl_free_port)
    "$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token adm \
        --user-secret usersecret --threads 1 >"$work/seckilld-$i.log" 2>&1 &
    dl_track $!
    ports+=("$port")
done
for p in "${ports[@]}"; do dl_wait_http "http://127.0.0.1:$p/healthz" || fail "seckilld on $p did not start"; done
"$build/tools/seckill-persist/seckill-persist" --quiet --sweep-interval 200ms >"$work/persist.log" 2>&1 &
dl_track $!
"$PY" "$src/tests/seckilld/order_privacy.py" "${ports[0]}" "${ports[1]}" "${PRIVACY_TRIES:-2000}" ||
    fail "order privacy"
echo "order privacy: all checks passed"
