#!/bin/bash
# test_http_conformance.sh [SECKILLD]: runs http_conformance.py (RFC 9112
# framing, Host and trailer cases, one table row each, and the
# trailer attacks) against seckilld on a private redis-server.
# SECKILLD overrides the build's (e.g. an older seckilld).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-conformance-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work"
"$PY" "$src/tests/seckilld/http_conformance.py" --redis-url "redis://127.0.0.1:$REDIS_PORT" \
    -- "${1:-$build/tools/seckilld/seckilld}"
