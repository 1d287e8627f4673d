#!/bin/bash
# Fault 7: client clocks do not matter. Leases expire on the Redis server
# and fencing tokens come from the server's TIME, so a dlock process whose
# clock runs 3 hours ahead (libfaketime, all clocks) or 3 hours behind
# (wall clock only) excludes, expires and orders exactly like one with a
# true clock. Pass: exclusion holds across skewed holders, a skewed
# holder's 1 s lease expires after about 1 s of real time, and fencing
# tokens strictly increase across runs in acquisition order.
set -Eeuo pipefail
# under set -e a failing command ends the script with its own exit code;
# make every such end a failure (never the skip code)
trap 'echo "FAIL: line $LINENO exited $?"; exit 1' ERR
SCENARIO=clock
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-clock-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_need_tool faketime faketime
dl_start_redis "$work"
export DLOCK_URL="redis://127.0.0.1:$REDIS_PORT"
dlock="$build/tools/dlock/dlock"
ahead() { faketime -f '+3h' "$@"; }
behind() { FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f '-3h' "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
# held FILE: waits until a holder's command wrote FILE (it holds the lock)
held() {
    local i=0
    until [ -s "$1" ]; do
        [ $i -lt 500 ] || fail "the holder never got the lock (no $1 after 10 s)"
        sleep 0.02; i=$((i + 1))
    done
}
# a holder keeps the lock until the test touches its go file
hold_until() { echo "while [ ! -e $work/$1 ]; do sleep 0.02; done"; }

# 1. exclusion: a holder 3 h ahead blocks a true-clock process, and vice versa
ahead "$dlock" clk -c "echo \$DLOCK_FENCE > $work/f1; $(hold_until go1)" &
holder=$!
dl_track $holder
held "$work/f1"
rc=0; "$dlock" -n clk -- true || rc=$?
touch "$work/go1"
[ "$rc" = 1 ] || fail "true-clock process got the lock held by a clock 3 h ahead (exit $rc)"
wait "$holder" || fail "the holder 3 h ahead failed"
"$dlock" clk -c "echo \$DLOCK_FENCE > $work/f2"
behind "$dlock" clk -c "echo \$DLOCK_FENCE > $work/f3; $(hold_until go3)" &
holder=$!
dl_track $holder
held "$work/f3"
rc=0; ahead "$dlock" -n clk -- true || rc=$?
touch "$work/go3"
[ "$rc" = 1 ] || fail "a clock 3 h ahead got the lock held by one 3 h behind (exit $rc)"
wait "$holder" || fail "the holder 3 h behind failed"

# 2. a 1 s lease taken by a skewed client expires after ~1 s of real time
ahead "$dlock" --lease 1 --on-lost=ignore clk -c "echo \$DLOCK_FENCE > $work/f4; sleep 4" &
holder=$!
dl_track $holder
held "$work/f4"
t0=$(date +%s%N)
behind "$dlock" -w 5s clk -c "echo \$DLOCK_FENCE > $work/f5"
waited=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$waited" -ge 400 ] && [ "$waited" -le 2500 ] || fail "lease of 1 s ended $waited ms after it was taken"
wait "$holder" || true

# 3. fencing tokens strictly increase in acquisition order, whatever the clocks
prev=0
for i in 1 2 3 4 5; do
    f=$(cat "$work/f$i")
    [ "$f" -gt "$prev" ] || fail "fence $i ($f) is not above the previous one ($prev)"
    prev=$f
done
echo "clock scenario: exclusion held across +-3 h skews, skewed 1 s lease ended after $waited ms, fences increasing: $(cat "$work"/f{1,2,3,4,5} | tr '\n' ' ')"
echo PASS
