#!/bin/bash
# test_sale_check.sh: the invariant checker (scripts/sale_check.py) on
# crafted sales: a good one passes; a dead sale (every buyer answered 503)
# and each other crafted fault fails with its own check. A private
# redis-server holds the crafted stream for the lost-orders check.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-sale-check-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work"
"$PY" "$src/tests/demo/sale_check_cases.py" "$src/scripts/sale_check.py" "$work" "redis://127.0.0.1:$REDIS_PORT"
