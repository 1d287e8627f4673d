# test_cli_interop.sh: dlock's default (simple) layout is redis-py's Lock:
# a Python job holding the lock blocks `dlock -n`, and a dlock job holding
# it makes redis-py's non-blocking acquire fail; each works once the other
# has released. Uses /usr/bin/python3's redis module.
. "$(dirname "$0")/lib.sh"
start_redis

cat > "$T_DIR/pyhold.py" <<'PY'
import os, sys, time, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
lock = r.lock(sys.argv[2], timeout=30)
assert lock.acquire(blocking=False), "python could not take a free lock"
open(sys.argv[3], "w").write("held")
while not os.path.exists(sys.argv[4]):
    time.sleep(0.02)
lock.release()
PY
cat > "$T_DIR/pytry.py" <<'PY'
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
lock = r.lock(sys.argv[2], timeout=30)
ok = lock.acquire(blocking=False)
if ok:
    lock.release()
print("acquired" if ok else "busy")
PY

# Python holds -> dlock -n conflicts; after release dlock runs.
bg "$PY" "$T_DIR/pyhold.py" "$REDIS_PORT" shared "$T_DIR/py-held" "$T_DIR/py-go"
py=$BG_PID
wait_until 10 test -e "$T_DIR/py-held"
run_rc "$DLOCK_BIN" -n shared -- touch "$T_DIR/dlock-ran"
expect_eq "$RC" 1 "dlock -n on a lock held by redis-py -> conflict"
[ ! -e "$T_DIR/dlock-ran" ] || fail "dlock ran COMMAND while redis-py held the lock"
touch "$T_DIR/py-go"
wait_rc "$py"
expect_eq "$RC" 0 "redis-py released its lock"
run_rc "$DLOCK_BIN" -n shared -- true
expect_eq "$RC" 0 "dlock -n after redis-py released"

# dlock holds -> redis-py cannot; after dlock is done redis-py can.
bg "$DLOCK_BIN" shared -- sh -c "touch $T_DIR/dl-held; while [ ! -e $T_DIR/dl-go ]; do sleep 0.02; done"
dl=$BG_PID
wait_until 5 test -e "$T_DIR/dl-held"
expect_eq "$("$PY" "$T_DIR/pytry.py" "$REDIS_PORT" shared)" "busy" "redis-py on a lock held by dlock"
touch "$T_DIR/dl-go"
wait_rc "$dl"
expect_eq "$RC" 0 "dlock job finished"
expect_eq "$("$PY" "$T_DIR/pytry.py" "$REDIS_PORT" shared)" "acquired" "redis-py after dlock released"

# A waiting dlock gets a lock redis-py releases (foreign holders do not
# publish: the wait must still notice).
rm -f "$T_DIR/py-held" "$T_DIR/py-go"
bg "$PY" "$T_DIR/pyhold.py" "$REDIS_PORT" shared "$T_DIR/py-held" "$T_DIR/py-go"
py=$BG_PID
wait_until 10 test -e "$T_DIR/py-held"
( sleep 0.5; touch "$T_DIR/py-go" ) &
t0=$(now_ms)
run_rc "$DLOCK_BIN" -w 5 shared -- true
el=$(($(now_ms) - t0))
expect_eq "$RC" 0 "dlock -w 5 gets the lock redis-py released"
expect_range "$el" 400 4000 "acquired soon after redis-py's release (ms)"
wait_rc "$py"
