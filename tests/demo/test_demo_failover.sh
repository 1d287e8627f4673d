#!/bin/bash
# test_demo_failover.sh: `make demo-failover` as the README runs it (the
# master killed with -9 mid-sale, never back; Sentinel promotes the
# replica), on the test's build: every invariant holds, the report says
# "broken promises 0", "lost 0", "sold beyond the buyers' answers 0", and
# its HTML report marks the failover and renders in headless Chromium.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
out=$(mktemp -d /tmp/dlock-demo-failover-XXXXXX)
trap 'rm -rf "$out"' EXIT
DEMO_FAILOVER=1 DEMO_SKIP_BUILD=1 BUILD_DIR="$build" DEMO_OUT="$out" "$src/scripts/demo.sh" | tee "$out/demo.log"
for check in "broken promises (told 201, not kept)" "lost orders (in Redis, not in the database)" \
    "orders sold beyond the buyers' answers"; do
    grep -F "$check" "$out/demo.log" | grep -Eq ' 0  ok$' || { echo "FAIL: '$check' is not 0" >&2; exit 1; }
done
/usr/bin/python3 "$src/tests/demo/check_report.py" "$out/report.html" "$out" failover
