#!/bin/bash
# test_lock_nemesis.sh: the lock workload of the fault suite, run through
# `dlock torture` (tools/dlock/torture*.c: the one implementation of the
# nemesis and its checker) against two private redis-servers, one for the
# lock and one for the fenced counter (--store-url).
# Usage: test_lock_nemesis.sh [seconds] [workers] [nofence]; defaults 6 s,
# 3 workers (the CI run; `make fault` runs it longer). Pass: the verdict is
# SAFE. With "nofence" the storage ignores fencing tokens, so the checker
# must catch lost updates: pass only when torture says UNSAFE (exit 2) and
# reports them. DLOCK_NEMESIS_HISTORY=FILE keeps the history;
# DLOCK_NEMESIS_URL=URL puts the lock there instead (e.g. etcd://, started
# by etcd_run) with the counter still on a private Redis;
# DLOCK_NEMESIS_LEASE=DUR sets the lease (default 500ms; etcd's are whole
# seconds).
set -uo pipefail
. "${DLOCK_SOURCE_DIR:?set DLOCK_SOURCE_DIR}/scripts/lib.sh"
dlock=${DLOCK_BUILD_DIR:?set DLOCK_BUILD_DIR}/tools/dlock/dlock
seconds=${1:-6}
workers=${2:-3}
mode=${3:-fence}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-nemesis-XXXXXX")
trap 'dl_cleanup; rm -rf "$dir"' EXIT

lock_url=${DLOCK_NEMESIS_URL:-}
if [ -z "$lock_url" ]; then
    dl_start_redis "$dir" || exit 2
    lock_port=$REDIS_PORT
    lock_url="redis://127.0.0.1:$lock_port"
fi
dl_start_redis "$dir" || exit 2
store_port=$REDIS_PORT
args=(torture --url "$lock_url" --store-url "redis://127.0.0.1:$store_port"
      --prefix nemesis: --workers "$workers" --duration "${seconds}s" --lease "${DLOCK_NEMESIS_LEASE:-500ms}")
[ "$mode" = nofence ] && args+=(--no-fence)
[ -n "${DLOCK_NEMESIS_HISTORY:-}" ] && args+=(--history "$DLOCK_NEMESIS_HISTORY")
rc=0
out=$("$dlock" "${args[@]}" 2>&1) || rc=$?
echo "$out"
left=$(redis-cli -p "$store_port" dbsize)
[ -z "${lock_port:-}" ] || left="$(redis-cli -p "$lock_port" dbsize)/$left"
case "$left" in 0 | 0/0) ;; *) echo "FAIL: keys left behind (lock/store dbsize $left)"; exit 1 ;; esac
if [ "$mode" = nofence ]; then
    if [ $rc -eq 2 ] && grep -Eq 'lost updates: [1-9]' <<<"$out"; then
        echo "PASS: the unfenced storage was caught losing updates"
        exit 0
    fi
    echo "FAIL: without fencing, torture exited $rc and reported no lost update"
    exit 1
fi
[ $rc -eq 0 ] && { echo PASS; exit 0; }
echo "FAIL: dlock torture exited $rc"
exit 1
