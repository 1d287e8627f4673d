#!/bin/bash
# http_nginx.sh: seckilld's HTTP cost next to nginx's, in one run. Per
# round, each for DURATION under `wrk -t1 -c64`: seckilld GET /ping,
# seckilld purchases (bench/seckill/wrk_buy.lua: a new buyer per request,
# stock 1e9) and nginx `return 200 "ok"` (own temp config, one process, a
# free loopback port). Server CPU is `perf stat -e task-clock -p PID` over
# the same seconds (or utime+stime from /proc/PID/stat when perf is
# refused), divided by the requests wrk counted; so are the server's system
# calls (`perf stat -e raw_syscalls:sys_enter`, empty when refused), which
# show whether a difference in CPU is more system calls or dearer ones.
# Prints one CSV line per measurement, the medians, and the same-run ratios
# per round and their median.
#   bench/seckill/http_nginx.sh [BUILD_DIR] [ROUNDS] [DURATION_S] [SECKILLD_BINARY] [EXTRA_SECKILLD_ARGS...]
# (e.g. ... build-rel/tools/seckilld/seckilld --threads 1; the load average
# goes to stderr at the start and before each round)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
ROUNDS=${2:-5}
DUR=${3:-10}
seckilld=${4:-$BUILD/tools/seckilld/seckilld}
shift $(($# < 4 ? $# : 4))
. scripts/lib.sh
. bench/seckill/bench_lib.sh # sb_start_nginx, sb_cpu_ms (not sb_setup: BUILD is an argument here)
work=$(mktemp -d "${TMPDIR:-/tmp}/http-nginx-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
TOKEN=bench-token

dl_start_redis "$work"
SK_PORT=$(dl_free_port)
"$seckilld" --port "$SK_PORT" --bind 127.0.0.1 --redis-url "redis://127.0.0.1:$REDIS_PORT" \
    --admin-token "$TOKEN" --log-level warn "$@" >"$work/seckilld.log" 2>&1 &
SK_PID=$!
dl_track "$SK_PID"
dl_wait_http "http://127.0.0.1:$SK_PORT/healthz" 100
now=$(($(date +%s) * 1000))
curl -sf -o /dev/null -X POST "http://127.0.0.1:$SK_PORT/v1/campaigns" -H "Authorization: Bearer $TOKEN" \
    -d "{\"id\":\"bench\",\"stock\":1000000000,\"per_user_limit\":1,\"starts_at\":$((now - 60000)),\"ends_at\":$((now + 3600000))}"

sb_start_nginx "$work/nginx"

cpu_ms() { sb_cpu_ms "$@"; }

# measure NAME PID URL [wrk args]: prints NAME,rps,requests,cpu_ms,us_per_req,
# Redis's CPU per request and the server's system calls per request over
# the same seconds.
measure() {
    local name=$1 pid=$2 url=$3
    shift 3
    cpu_ms "$pid" "$DUR" >"$work/cpu" &
    local cpid=$!
    cpu_ms "$REDIS_PID" "$DUR" >"$work/rcpu" &
    local rpid=$!
    sb_syscalls "$pid" "$DUR" >"$work/sys" &
    local spid=$!
    wrk -t1 -c64 -d"${DUR}s" "$@" "$url" >"$work/wrk.txt" 2>&1
    wait "$cpid" "$rpid" "$spid"
    local reqs rps bad cpu rcpu sys
    reqs=$(awk '/requests in/ { print $1 }' "$work/wrk.txt")
    rps=$(awk '/Requests\/sec/ { print $2 }' "$work/wrk.txt")
    bad=$(awk '/Non-2xx/ { print $5 }' "$work/wrk.txt")
    cpu=$(cat "$work/cpu")
    rcpu=$(cat "$work/rcpu")
    sys=$(cat "$work/sys")
    [ -z "$bad" ] || { echo "http_nginx: $name: $bad non-2xx answers" >&2; cat "$work/wrk.txt" >&2; exit 1; }
    echo "$name,$rps,$reqs,$cpu,$(awk -v c="$cpu" -v r="$reqs" 'BEGIN { printf "%.2f", c * 1000 / r }')," \
        "$(awk -v c="$rcpu" -v r="$reqs" 'BEGIN { printf "%.2f", c * 1000 / r }')," \
        "$(awk -v s="$sys" -v r="$reqs" 'BEGIN { if (s != "") printf "%.3f", s / r }')" | tr -d ' '
}

echo "# $(date -u +%FT%TZ) seckilld ${*:-} load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "name,rps,requests,server_cpu_ms,server_cpu_us_per_request,redis_cpu_us_per_request,server_syscalls_per_request"
for r in $(seq "$ROUNDS"); do
    echo "# round $r load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    measure ping "$SK_PID" "http://127.0.0.1:$SK_PORT/ping"
    BUY_PREFIX="r$r-$$" measure buy "$SK_PID" "http://127.0.0.1:$SK_PORT/v1/campaigns/bench/purchase" -s bench/seckill/wrk_buy.lua
    measure nginx "$NG_PID" "http://127.0.0.1:$NG_PORT/"
done | tee "$work/all.csv"
python3 - "$work/all.csv" <<'PY'
import statistics, sys
rows = [l.strip().split(",") for l in open(sys.argv[1]) if not l.startswith("name,")]
def med(name, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == name)
rps = {n: med(n, 1) for n in ("ping", "buy", "nginx")}
cpu = {n: med(n, 4) for n in ("ping", "buy", "nginx")}
rcpu = {n: med(n, 5) for n in ("ping", "buy", "nginx")}
def med_sys(name):
    v = [float(r[6]) for r in rows if r[0] == name and len(r) > 6 and r[6]]
    return "%.3f" % statistics.median(v) if v else "n/a"
for n in ("ping", "buy", "nginx"):
    print("median %-5s %9.0f req/s  %6.2f us server CPU/request  %6.2f us Redis CPU/request  %s server syscalls/request"
          % (n, rps[n], cpu[n], rcpu[n], med_sys(n)))
# same-run ratios per round, and their median
per = {}
for r in rows:
    per.setdefault(r[0], []).append(r)
cr, rr = [], []
for i in range(len(per["buy"])):
    b, p, g = per["buy"][i], per["ping"][i], per["nginx"][i]
    cr.append(float(b[4]) / float(g[4]))
    rr.append(float(b[1]) / float(p[1]))
    print("round %d: cpu buy/nginx %.2f, rps buy/ping %.2f" % (i + 1, cr[-1], rr[-1]))
print("purchase CPU / nginx CPU per request: median of rounds %.2f, of medians %.2f (goal <= 1.5)"
      % (statistics.median(cr), cpu["buy"] / cpu["nginx"]))
print("purchases/s / seckilld /ping per s:   median of rounds %.2f, of medians %.2f (goal >= 0.8)"
      % (statistics.median(rr), rps["buy"] / rps["ping"]))
# the headline figures for the report's summary table (scripts/bench_summary.py)
print("SUMMARY name=http_purchases value=%.0f unit=req/s ref=seckilld_ping ref_value=%.0f ratio=%.2f"
      % (rps["buy"], rps["ping"], statistics.median(rr)))
print("SUMMARY name=http_purchase_cpu value=%.2f unit=us_CPU/request ref=nginx_return_200 ref_value=%.2f ratio=%.2f"
      % (cpu["buy"], cpu["nginx"], statistics.median(cr)))
PY
