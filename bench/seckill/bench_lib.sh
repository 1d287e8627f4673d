# bench/seckill/bench_lib.sh: the set-up every flash-sale bench script
# shares. Source it from the repository root (after scripts/lib.sh):
#   sb_setup NAME PROGRAM...
# resolves BUILD_DIR (default build-rel, relative to the root) into $BUILD,
# checks each PROGRAM (a path under the build dir, e.g.
# tools/seckill-bench/seckill-bench) is built, makes the temp dir $work and
# the EXIT trap that stops what the script started (by PID) and removes it.
# Also: sb_cpu_ms PID SECONDS (a process's CPU time over the next seconds),
# sb_syscalls PID SECONDS (its system calls over the next seconds)
# and sb_start_nginx DIR (a private nginx `return 200`, the HTTP reference).
sb_setup() {
    local name=$1 p
    shift
    BUILD=${BUILD_DIR:-build-rel}
    case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
    for p in "$@"; do
        [ -x "$BUILD/$p" ] || { echo "$name: $BUILD/$p not built (cmake --build $BUILD --target $(basename "$p"))" >&2; exit 2; }
    done
    work=$(mktemp -d "${TMPDIR:-/tmp}/$name-XXXXXX")
    trap 'dl_cleanup; rm -rf "$work"' EXIT
    trap 'exit 130' INT TERM
}

# sb_cpu_ms PID SECONDS: the CPU time (ms) PID uses over the next SECONDS:
# `perf stat -e task-clock -p PID`, or utime+stime from /proc/PID/stat when
# perf is refused.
sb_cpu_ms() {
    local out hz a b
    out=$(mktemp "${TMPDIR:-/tmp}/sb-perf-XXXXXX")
    if perf stat -e task-clock -p "$1" -x, -o "$out" -- sleep "$2" 2>/dev/null && grep -q task-clock "$out"; then
        awk -F, '/task-clock/ { v = $1 } END { printf "%.1f\n", v + 0 }' "$out"
        rm -f "$out"
        return
    fi
    rm -f "$out"
    hz=$(getconf CLK_TCK)
    a=$(awk '{ print $14 + $15 }' "/proc/$1/stat")
    sleep "$2"
    b=$(awk '{ print $14 + $15 }' "/proc/$1/stat")
    echo $(((b - a) * 1000 / hz))
}

# sb_syscalls PID SECONDS: the system calls PID enters over the next SECONDS
# (`perf stat -e raw_syscalls:sys_enter -p PID`), or "" when the tracepoint
# is refused (perf_event_paranoid, no tracefs).
sb_syscalls() {
    local out
    out=$(mktemp "${TMPDIR:-/tmp}/sb-perf-XXXXXX")
    if perf stat -e raw_syscalls:sys_enter -p "$1" -x, -o "$out" -- sleep "$2" 2>/dev/null &&
        grep -q '^[0-9]*,,raw_syscalls' "$out"; then
        awk -F, '/raw_syscalls:sys_enter/ { v = $1 } END { printf "%d\n", v + 0 }' "$out"
    else
        sleep "$2" # the same seconds either way
        echo ""
    fi
    rm -f "$out"
}

# sb_start_nginx DIR: a private nginx (Debian nginx-light), one process, no
# master, `return 200 "ok"` on a free loopback port, its files in DIR; sets
# NG_PORT, NG_PID (tracked, stopped by PID).
sb_start_nginx() {
    local d=$1
    NG_PORT=$(dl_free_port)
    mkdir -p "$d"
    cat >"$d/nginx.conf" <<NGINX
daemon off;
master_process off;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $d/body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$NG_PORT;
        location / { return 200 "ok"; }
    }
}
NGINX
    nginx -p "$d" -c "$d/nginx.conf" 2>"$d/stderr" &
    NG_PID=$!
    dl_track "$NG_PID"
    dl_wait_http "http://127.0.0.1:$NG_PORT/" 100
}
