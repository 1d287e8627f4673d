#!/bin/bash
# test_clients.sh python|java|javascript: the client of docs/clients/ in
# that language against a live seckilld (client_scenario.py starts
# redis-server, seckilld and seckill-persist, and asserts every outcome the
# client reports). Java: Client.java runs once as a single source file
# (`java Client.java`), then compiled once for the scenario (a JVM start per
# command is enough). openjdk-17-jdk-headless and nodejs come from
# scripts/debian-packages.txt; a missing JDK is installed here when root.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-client-XXXXXX")
trap 'rm -rf "$work"' EXIT
clients=$src/docs/clients
case ${1:?python, java or javascript} in
python) cmd=("$PY" "$clients/seckill_client.py") ;;
javascript)
    dl_need_tool node nodejs
    cmd=(node "$clients/seckill-client.mjs")
    ;;
java)
    if ! command -v javac >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "installing openjdk-17-jdk-headless (scripts/debian-packages.txt)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=120 \
            openjdk-17-jdk-headless >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
    fi
    dl_need_tool javac openjdk-17-jdk-headless
    # the single-file launch a reader runs: usage, exit 2
    rc=0
    java "$clients/Client.java" >"$work/usage.out" 2>&1 || rc=$?
    grep -q '^usage: java Client.java' "$work/usage.out" && [ $rc = 2 ] ||
        { cat "$work/usage.out" >&2; echo "FAIL: java Client.java did not run (exit $rc)"; exit 1; }
    javac -d "$work/classes" "$clients/Client.java"
    cmd=(java -XX:TieredStopAtLevel=1 -cp "$work/classes" Client)
    ;;
*) echo "test_clients.sh: unknown client $1" >&2; exit 2 ;;
esac
"$PY" "$src/tests/docs/client_scenario.py" --build "$build" --work "$work" -- "${cmd[@]}"
