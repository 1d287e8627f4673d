#!/bin/bash
# test_openapi_conformance.sh: docs/openapi.yaml is the contract of seckilld:
# openapi_conformance.py lints it, shows its checker refusing wrong
# documents, then drives a live seckilld (private redis-server, SQLite,
# seckill-persist; Redis stopped for degraded mode) through every route and
# status the document lists and checks every answer against it.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
# python3-yaml and python3-jsonschema (scripts/debian-packages.txt)
if ! "$PY" -c 'import jsonschema, yaml' 2>/dev/null; then
    [ "${CI:-}" = true ] && { echo "FAIL: python3-jsonschema or python3-yaml missing in CI"; exit 1; }
    dl_skip "python3-jsonschema or python3-yaml not installed"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-openapi-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$PY" "$src/tests/seckilld/openapi_conformance.py" --spec "${OPENAPI_SPEC:-$src/docs/openapi.yaml}" \
    --build "$build" --work "$work"
