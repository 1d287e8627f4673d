#!/bin/bash
# test_trusted_proxies.sh: the client address behind proxies and one
# identity per request, with real processes: a redis-server and seckilld
# --trusted-proxies 127.0.0.2/32 --ip-rate-limit 5. A proxy (peer
# 127.0.0.2) that appends to the client's X-Forwarded-For: the limit holds
# however the client forges the left part; an untrusted peer (127.0.0.1)
# is keyed on itself whatever it sends; entries that are not addresses are
# 400; duplicated X-User-Id / X-User-Signature / Authorization are 400
# (trusted_proxies.py).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-proxies-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work"
port=$(dl_free_port)
"$build/tools/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token adm --threads 1 \
    --trusted-proxies 127.0.0.2/32 --ip-rate-limit 5 --ip-rate-window-ms 60s \
    --redis-url "redis://127.0.0.1:$REDIS_PORT" >"$work/seckilld.log" 2>&1 &
dl_track $!
dl_wait_http "http://127.0.0.1:$port/healthz" || { cat "$work/seckilld.log" >&2; exit 1; }
"$PY" "$src/tests/seckilld/trusted_proxies.py" "$port" || { tail "$work/seckilld.log" >&2; exit 1; }
