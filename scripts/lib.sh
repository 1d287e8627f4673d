# scripts/lib.sh: shell helpers shared by the demo, the fault suite and
# script tests. Every process started here is recorded in DLOCK_PIDS and
# stopped by that PID only (never by name); never port 6379.
# Source it; call dl_cleanup from an EXIT trap.

DLOCK_PIDS=""
PY=/usr/bin/python3

# Command prefix: runs a program with PR_SET_PDEATHSIG=SIGKILL, so servers
# die with the shell that started them even when it is killed with -9 (an
# EXIT trap cannot run then). Best effort: some sandboxes (this project's
# build machine among them) accept the setting but never deliver the
# signal; the EXIT traps remain the real cleanup. It execs, so $! is the
# program's own PID.
DL_PDEATHSIG=("$PY" -c 'import ctypes, os, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)
os.execvp(sys.argv[1], sys.argv[1:])')

# dl_free_port [SPAN]: a free loopback port below the kernel's ephemeral
# range (ip_local_port_range), with SPAN more above it free too (a Cluster
# node's bus port is port + 10000). Not port 0's answer: that port comes
# from the ephemeral range, where any client's outgoing connection may take
# it between this check and the server's bind (seen: a Cluster node that
# "did not start" in a parallel run). Never 6379 or 2379.
dl_free_port() {
    "$PY" - "${1:-0}" <<'PY'
import random, socket, sys
span = int(sys.argv[1])
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
top = low - 1 - span
if top < 10000:
    sys.exit("dl_free_port: no room below the ephemeral range (%d)" % low)
while True:
    p = random.randint(10000, top)
    if p in (6379, 2379) or p + span in (6379, 2379):
        continue
    ok = True
    for q in {p, p + span}:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        s.close()
    if ok:
        print(p)
        break
PY
}

dl_track() { DLOCK_PIDS="$DLOCK_PIDS $1"; }

# Exit code of a skipped test (CTest's SKIP_RETURN_CODE in tests/, skipped in
# scripts/fault.sh): 96, a code no dlock program exits with (dlock's 77 means
# "credentials refused", so a failure must never read as a skip).
DL_SKIP_CODE=96
# dl_skip REASON...: this environment cannot run the test; says why, skips.
dl_skip() { echo "SKIP: $*"; exit "$DL_SKIP_CODE"; }
# dl_need_tool COMMAND PACKAGE: skips without COMMAND, except in CI (CI=true),
# where scripts/setup.sh installed every package and a missing one fails.
dl_need_tool() {
    command -v "$1" >/dev/null && return 0
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $1 (Debian package $2, scripts/debian-packages.txt) is missing in CI"
        exit 1
    fi
    dl_skip "$1 (Debian package $2) not installed"
}

# dl_stop PID: SIGTERM, then SIGKILL after 5 s; waits for it.
dl_stop() {
    pid=$1
    kill -0 "$pid" 2>/dev/null || return 0
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

dl_cleanup() {
    for pid in $DLOCK_PIDS; do dl_stop "$pid"; done
    DLOCK_PIDS=""
}

# dl_start_redis DIR [extra redis-server args...]: sets REDIS_PORT, REDIS_PID.
dl_start_redis() {
    dir=$1; shift
    REDIS_PORT=$(dl_free_port)
    "${DL_PDEATHSIG[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$dir" --save '' \
        --appendonly no --protected-mode no --enable-debug-command local "$@" \
        >"$dir/redis-$REDIS_PORT.log" 2>&1 &
    REDIS_PID=$!
    dl_track "$REDIS_PID"
    i=0
    until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$REDIS_PID" 2>/dev/null; then
            echo "redis-server did not start (log $dir/redis-$REDIS_PORT.log)" >&2
            return 1
        fi
        sleep 0.05
    done
}

# dl_wait_http URL [tries]: waits until URL answers 200.
dl_wait_http() {
    n=${2:-100}
    i=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ]; do
        i=$((i + 1))
        [ $i -gt "$n" ] && return 1
        sleep 0.1
    done
}

# dl_start_replica DIR MASTER_PORT: a replica of MASTER_PORT; sets
# REPLICA_PORT, REPLICA_PID.
dl_start_replica() {
    dir=$1
    REPLICA_PORT=$(dl_free_port)
    "${DL_PDEATHSIG[@]}" redis-server --port "$REPLICA_PORT" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
        --protected-mode no --replicaof 127.0.0.1 "$2" >"$dir/replica-$REPLICA_PORT.log" 2>&1 &
    REPLICA_PID=$!
    dl_track "$REPLICA_PID"
    i=0
    until redis-cli -p "$REPLICA_PORT" info replication 2>/dev/null | grep -q 'master_link_status:up'; do
        i=$((i + 1))
        [ $i -gt 200 ] && { echo "replica never linked" >&2; return 1; }
        sleep 0.05
    done
}

# dl_start_sentinels DIR MASTER_PORT NAME [HOST]: three sentinels, quorum 2,
# down-after 1000 ms; sets SENTINEL_PORTS (space separated). HOST (default
# 127.0.0.1): the master's address as the sentinels monitor and hand it
# out; another HOST (a host veth address that clients in a network
# namespace reach) is also bound and announced by the sentinels.
dl_start_sentinels() {
    dir=$1
    host=${4:-127.0.0.1}
    SENTINEL_PORTS=""
    for i in 1 2 3; do
        p=$(dl_free_port)
        printf 'port %s\nbind 127.0.0.1%s\ndir %s\nprotected-mode no\nsentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\n' \
            "$p" "$([ "$host" = 127.0.0.1 ] || echo " $host")" "$dir" "$3" "$host" "$2" "$3" "$3" >"$dir/sentinel-$p.conf"
        [ "$host" = 127.0.0.1 ] || printf 'sentinel announce-ip %s\n' "$host" >>"$dir/sentinel-$p.conf"
        "${DL_PDEATHSIG[@]}" redis-sentinel "$dir/sentinel-$p.conf" >"$dir/sentinel-$p.log" 2>&1 &
        dl_track $!
        SENTINEL_PORTS="$SENTINEL_PORTS $p"
    done
    for p in $SENTINEL_PORTS; do
        i=0
        until redis-cli -p "$p" ping >/dev/null 2>&1; do
            i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.05
        done
    done
}

# dl_sentinel_master PORT NAME: prints host:port of the current master.
dl_sentinel_master() {
    redis-cli -p "$1" sentinel get-master-addr-by-name "$2" | paste -sd: -
}
