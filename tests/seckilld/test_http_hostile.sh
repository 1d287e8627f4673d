#!/bin/bash
# test_http_hostile.sh layer|seckilld [BINARY]: runs test_http_hostile.py
# (the front-door cases over raw sockets) against the HTTP layer
# alone (tests/seckilld/hs_testserver) or against seckilld on a private
# redis-server. BINARY overrides the build's (e.g. an older seckilld).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-hostile-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
case ${1:?layer or seckilld} in
layer)
    "$PY" "$src/tests/seckilld/test_http_hostile.py" -- "${2:-$build/tests/seckilld/hs_testserver}" ;;
seckilld)
    dl_start_redis "$work"
    "$PY" "$src/tests/seckilld/test_http_hostile.py" --redis-url "redis://127.0.0.1:$REDIS_PORT" \
        -- "${2:-$build/tools/seckilld/seckilld}" ;;
*) echo "usage: $0 layer|seckilld [BINARY]" >&2; exit 2 ;;
esac
