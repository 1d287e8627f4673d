#!/bin/bash
# bench/seckill/decision.sh: what one purchase decision costs, in one run
# (its section of docs/BENCHMARKS.md), each figure beside its same-run
# reference. Every round runs, interleaved (private servers on free
# loopback ports, stopped by PID; no AOF; never port 6379):
#   redis   one redis-server, one seckilld (this tree, its default loops:
#           one per CPU; and again with --threads 1, for the Redis cost of
#           more loops), `wrk -t2 -c64` of new buyers
#           (bench/seckill/wrk_buy.lua) on a campaign of unlimited stock,
#           a warm-up second, then CONFIG RESETSTAT: Redis us per accepted purchase =
#           cmdstat_evalsha (+ eval) usec / accepted (accepted = seckilld's
#           seckill_answers_total 201 + 202 over the run), every command's
#           usec per accepted (Redis 7 counts a script's redis.call under
#           its own cmdstat too; seckilld's own few direct commands are in
#           the list), the script's own overhead (EVALSHA usec minus the
#           commands'), the batch (accepted / EVALSHA calls), and the
#           server process's CPU (INFO cpu) per accepted: cmdstat usec is
#           elapsed time inside a command, inflated when the server is
#           descheduled on a busy machine; the process CPU is not, but it
#           also holds the reading, parsing and replies around the scripts
#           (run too for http, floor and cluster: their reference)
#   floor   the data commands purchase.lua runs for an accepted purchase
#           (per purchase an XADD of 4 fields; per batch of the measured
#           size HMGET meta, HINCRBY calls, TIME, GET stock, HMGET of the
#           batch's buyers, SET stock, HSET of the buyers, HSET of the
#           order statuses, PTTL of the statuses; the one PEXPIREAT that
#           sets their expiry), realistic sizes, as plain commands from a RESP file
#           through `redis-cli --pipe` on an emptied server, as many
#           purchases as the round's redis run accepted: the native floor =
#           their usec / purchases (one client, back to back: the best case
#           of those writes); the script minus the floor
#   memory  MEM_ORDERS accepted orders through seckilld (no persister, so
#           the stream is untrimmed): used_memory after - before, per
#           order, and per part (MEMORY USAGE of the order status hash, of
#           the stream, of the buyers hash, each / orders; the rest is the
#           keyspace's own tables and any order hash of an earlier
#           release), and what a sale of N units needs
#   acks    master + one replica: accepted/s with --replica-acks 1 against
#           0, engine level (seckill-bench --mode compare lua-coalesced, 128
#           in flight) and through HTTP (wrk as in redis); the ratio
#   http    the same wrk through a seckilld built from OLD_REF (d10fb27, before the engine redesign,
#           built once into out/decision-cache/, RelWithDebInfo), on the
#           plain server and on the master with its replica (acks 1):
#           accepted/s of this tree / OLD_REF's, and OLD_REF's Redis us
#   cpu     seckilld's CPU per purchase (perf task-clock, `wrk -t1 -c64`)
#           with --threads 1 and --threads 2, against a private nginx
#           `return 200` per request in the same round, and OLD_REF's
#           seckilld with --threads 1 (this tree must be no worse)
#   cluster 3 masters, a campaign of K = 3 buckets, wrk as in redis: Redis
#           us per accepted summed over the masters, against redis's plain
#           server figure of the same round
# Targets that are compared alternate which runs first, round by round.
# Prints CSV rows (round,measure,value,unit) as it goes, then a summary of
# medians (and per-round ratios) with each goal beside it, the commit and
# the load average.
# Env: ROUNDS (3) DURATION (5 s) BUILD_DIR (build-rel, RelWithDebInfo)
#      DECISION_ONLY ("redis floor memory acks http cpu cluster": a subset)
#      WRK_CONNS (64: the measured wrk_buy runs' connections, -c)
#      MEM_ORDERS (100000) OLD_REF (d10fb27) QUICK=1 (1 round of 1 s, 20000
#      orders: proves the script, not a measurement)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
. scripts/lib.sh
. bench/seckill/bench_lib.sh
. tests/support/cluster.sh
if [ "${QUICK:-0}" = 1 ]; then
    ROUNDS=${ROUNDS:-1} DURATION=${DURATION:-1} MEM_ORDERS=${MEM_ORDERS:-20000}
fi
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
MEM_ORDERS=${MEM_ORDERS:-100000}
OLD_REF=${OLD_REF:-d10fb27}
PARTS="redis floor memory acks http cpu cluster"
ONLY=${DECISION_ONLY:-$PARTS}
want() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }
for p in $ONLY; do
    case " $PARTS " in *" $p "*) ;; *) echo "decision.sh: unknown part $p (parts: $PARTS)" >&2; exit 2 ;; esac
done
for t in wrk redis-cli curl; do command -v $t >/dev/null || { echo "decision.sh: $t not installed" >&2; exit 2; }; done
if want cpu; then command -v nginx >/dev/null || { echo "decision.sh: nginx not installed (nginx-light)" >&2; exit 2; }; fi
sb_setup seckill-decision tools/seckilld/seckilld tools/seckill-bench/seckill-bench
seckilld="$BUILD/tools/seckilld/seckilld"
bench="$BUILD/tools/seckill-bench/seckill-bench"
TOKEN=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
out="$work/rows.csv"
load() { cut -d' ' -f1-3 /proc/loadavg; }

# build_old: seckilld of OLD_REF, built once into out/decision-cache/REF
# (git archive: no worktree to clean up; out/ is ignored) and reused; sets OLD.
build_old() {
    local d="$root/out/decision-cache/$OLD_REF"
    OLD="$d/build/tools/seckilld/seckilld"
    [ -x "$OLD" ] && return 0
    git rev-parse -q --verify "$OLD_REF^{commit}" >/dev/null ||
        { echo "decision.sh: commit $OLD_REF is not in this clone (fetch it, or DECISION_ONLY without http)" >&2; exit 2; }
    echo "# building seckilld of $OLD_REF into $d (once)" >&2
    rm -rf "$d" && mkdir -p "$d/src"
    git archive "$OLD_REF" | tar -x -C "$d/src"
    if ! { cmake -S "$d/src" -B "$d/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$d/configure.log" 2>&1 &&
        cmake --build "$d/build" -j "$(nproc)" --target seckilld >"$d/build.log" 2>&1; }; then
        echo "decision.sh: building $OLD_REF failed ($d/*.log)" >&2
        exit 1
    fi
}

# sk_start BIN REDIS_URL ACKS [args]: a fresh seckilld (--threads
# $SK_THREADS when set); sets SK_PID, URL.
sk_start() {
    local bin=$1 rurl=$2 acks=$3 port
    shift 3
    port=$(dl_free_port)
    "$bin" --port "$port" --bind 127.0.0.1 --redis-url "$rurl" --admin-token "$TOKEN" --replica-acks "$acks" \
        --log-level warn ${SK_THREADS:+--threads "$SK_THREADS"} "$@" >>"$work/seckilld.log" 2>&1 &
    SK_PID=$!
    dl_track "$SK_PID"
    URL="http://127.0.0.1:$port"
    dl_wait_http "$URL/healthz" 150 || { echo "decision.sh: seckilld did not start" >&2; tail "$work/seckilld.log" >&2; exit 1; }
}
sk_stop() { dl_stop "$SK_PID"; }
# campaign ID STOCK [K]: creates it through the admin API (limit 1 per user)
campaign() {
    local now shards=""
    now=$(($(date +%s) * 1000))
    [ "${3:-1}" -gt 1 ] && shards=",\"shards\":$3"
    curl -sf -o /dev/null -X POST "$URL/v1/campaigns" -H "Authorization: Bearer $TOKEN" \
        -d "{\"id\":\"$1\",\"stock\":$2,\"per_user_limit\":1,\"starts_at\":$((now - 60000)),\"ends_at\":$((now + 3600000))$shards}" ||
        { echo "decision.sh: creating campaign $1 failed" >&2; exit 1; }
}
metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'; }
accepted_now() { echo $(( $(metric 'seckill_answers_total{answer="201"}') + $(metric 'seckill_answers_total{answer="202"}') )); }
# stats PORT...: "cmd calls usec" lines of INFO commandstats, summed over the ports
stats() {
    local p
    for p in "$@"; do redis-cli -p "$p" info commandstats | tr -d '\r'; done |
        sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),usec=\([0-9]*\),.*/\1 \2 \3/p' |
        awk '{ c[$1] += $2; u[$1] += $3 } END { for (k in c) print k, c[k], u[k] }'
}
# redis_cpu_ms PORT...: the servers' CPU time so far (used_cpu_user + sys), ms, summed
redis_cpu_ms() {
    local p
    for p in "$@"; do redis-cli -p "$p" info cpu | tr -d '\r'; done |
        awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.0f", s * 1000 }'
}
row() { echo "$1,$2,$3,$4" | tee -a "$out"; }

# wrk_buy ROUND LABEL BIN ACKS K REDIS_URL PORT... : one seckilld, one
# campaign, a warm-up second, RESETSTAT, then wrk -t2 -c$WRK_CONNS for DURATION.
# Rows: LABEL_accepted_per_s, LABEL_redis_us, LABEL_batch, LABEL_cmd_<c>.
wrk_buy() {
    local r=$1 label=$2 bin=$3 acks=$4 k=$5 rurl=$6 id a0 a1 n acc p c0 c1 s0 s1
    shift 6
    id="d$r$label$$"
    sk_start "$bin" "$rurl" "$acks"
    campaign "$id" 1000000000 "$k"
    CAMPAIGN=$id BUY_PREFIX="w$r$label" wrk -t2 -c64 -d1s -s bench/seckill/wrk_buy.lua "$URL" >/dev/null 2>&1
    for p in "$@"; do redis-cli -p "$p" config resetstat >/dev/null; done
    a0=$(accepted_now) c0=$(redis_cpu_ms "$@") s0=$(metric 'seckill_answers_total{answer="201"}')
    CAMPAIGN=$id BUY_PREFIX="b$r$label" wrk -t2 -c${WRK_CONNS:-64} -d"${DURATION}s" -s bench/seckill/wrk_buy.lua "$URL" >"$work/wrk.txt" 2>&1
    a1=$(accepted_now) c1=$(redis_cpu_ms "$@") s1=$(metric 'seckill_answers_total{answer="201"}')
    stats "$@" >"$work/stats.txt"
    sk_stop
    n=$(awk '/requests in/ { print $1 }' "$work/wrk.txt")
    acc=$((a1 - a0))
    [ "$acc" -gt 0 ] || { echo "decision.sh: $label accepted nothing" >&2; cat "$work/wrk.txt" >&2; exit 1; }
    [ $((acc * 100)) -ge $((n * 95)) ] || echo "decision.sh: $label: only $acc of $n requests accepted (wrk: $(grep -i non-2xx "$work/wrk.txt"))" >&2
    row "$r" "${label}_accepted" "$acc" purchases
    row "$r" "${label}_share_201" "$(awk -v a="$acc" -v s=$((s1 - s0)) 'BEGIN { printf "%.3f", s / a }')" "of accepted answered 201"
    row "$r" "${label}_redis_proc_cpu_us" "$(awk -v a="$acc" -v c0="$c0" -v c1="$c1" 'BEGIN { printf "%.2f", (c1 - c0) * 1000 / a }')" "us/accepted (INFO cpu)"
    row "$r" "${label}_accepted_per_s" "$(awk -v a="$acc" -v d="$DURATION" 'BEGIN { printf "%.0f", a / d }')" purchases/s
    awk -v a="$acc" -v r="$r" -v l="$label" -v f="$out" '
        $1 == "evalsha" || $1 == "eval" { us += $3; calls += $2 }
        $1 !~ /^(evalsha|eval|config)($|\|)/ { inner += $3; cmd[$1] = $3 }
        END { printf "%s,%s_redis_us,%.2f,us/accepted\n", r, l, us / a
              printf "%s,%s_inner_us,%.2f,us/accepted\n", r, l, inner / a
              printf "%s,%s_batch,%.2f,accepted/evalsha\n", r, l, calls ? a / calls : 0
              for (c in cmd) printf "%s,%s_cmd_%s,%.3f,us/accepted\n", r, l, c, cmd[c] / a }' "$work/stats.txt" |
        sort -t, -k2,2 | tee -a "$out"
}

# floor ROUND PORT BATCH N: the native floor of N purchases on an emptied server.
floor() {
    local r=$1 p=$2 b=$3 n=$4
    redis-cli -p "$p" flushall >/dev/null
    "$PY" - "$n" "$b" "d${r}plain$$" >"$work/floor.resp" <<'EOF'
import sys
n, b, cid = int(sys.argv[1]), max(1, int(round(float(sys.argv[2])))), sys.argv[3]
w = sys.stdout.buffer
def cmd(*a):
    a = [x if isinstance(x, bytes) else str(x).encode() for x in a]
    w.write(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
t = "{c:%s}" % cid
cmd("HSET", t + ":meta", "per_user_limit", 1, "starts_at_ms", 0, "ends_at_ms", 99999999999999, "runid", "x" * 40)
cmd("SET", t + ":stock", 1000000000)
cmd("CONFIG", "RESETSTAT")
for s in range(0, n, b):
    batch = range(s, min(n, s + b))
    users = ["b1plain-%d-%d" % (1 + i % 2, i) for i in batch]
    oids = [121434076673466368 + i * 4099 for i in batch]
    cmd("HMGET", t + ":meta", "per_user_limit", "starts_at_ms", "ends_at_ms", "runid", "epoch", "shards")
    cmd("HINCRBY", t + ":meta", "calls", 1)
    cmd("TIME")
    cmd("GET", t + ":stock")
    cmd("HMGET", t + ":buyers", *users)
    for oid, user in zip(oids, users):
        cmd("XADD", t + ":orders", "*", "o", oid, "u", user, "q", 1, "e", 1)
    cmd("SET", t + ":stock", 1000000000 - batch[-1] - 1)
    cmd("HSET", t + ":buyers", *[x for u in users for x in (u, 1)])
    cmd("HSET", t + ":order_status", *[x for o, u in zip(oids, users) for x in (o, u + "\n1")])
    cmd("PTTL", t + ":order_status")
    if s == 0:
        cmd("PEXPIREAT", t + ":order_status", 99999999999999 + 604800000)
EOF
    redis-cli -p "$p" --pipe <"$work/floor.resp" >"$work/pipe.txt" 2>&1 ||
        { echo "decision.sh: redis-cli --pipe failed" >&2; cat "$work/pipe.txt" >&2; exit 1; }
    grep -q 'errors: 0' "$work/pipe.txt" || { echo "decision.sh: floor commands failed" >&2; cat "$work/pipe.txt" >&2; exit 1; }
    stats "$p" | awk -v n="$n" -v r="$r" '$1 !~ /^(config|info|echo|ping)($|\|)/ { us += $3; cmd[$1] = $3 }
        END { printf "%s,floor_us,%.2f,us/purchase\n", r, us / n
              for (c in cmd) printf "%s,floor_cmd_%s,%.3f,us/purchase\n", r, c, cmd[c] / n }' | sort -t, -k2,2 | tee -a "$out"
    redis-cli -p "$p" flushall >/dev/null
}

# memory ROUND PORT: MEM_ORDERS orders through seckilld, used_memory per order and per part.
memory() {
    local r=$1 p=$2 id="m$1$$" m0 m1 wpid i n t os so st bu
    redis-cli -p "$p" flushall >/dev/null
    sk_start "$seckilld" "redis://127.0.0.1:$p" 0
    campaign "$id" "$MEM_ORDERS"
    t="{c:$id}"
    sleep 0.5
    m0=$(redis-cli -p "$p" info memory | tr -d '\r' | sed -n 's/^used_memory://p')
    CAMPAIGN=$id BUY_PREFIX="m$r" wrk -t2 -c64 -d600s -s bench/seckill/wrk_buy.lua "$URL" >/dev/null 2>&1 &
    wpid=$!
    dl_track "$wpid"
    for i in $(seq 1 1200); do
        n=$(redis-cli -p "$p" xlen "$t:orders")
        [ "$n" -ge "$MEM_ORDERS" ] && break
        sleep 0.2
    done
    dl_stop "$wpid"
    sleep 0.3
    sk_stop
    [ "$n" = "$MEM_ORDERS" ] || { echo "decision.sh: memory: $n orders in the stream, not $MEM_ORDERS" >&2; exit 1; }
    m1=$(redis-cli -p "$p" info memory | tr -d '\r' | sed -n 's/^used_memory://p')
    os=$(redis-cli -p "$p" memory usage "$t:order_status" samples 0)
    so=$(redis-cli -p "$p" memory usage "$t:orders" samples 0)
    bu=$(redis-cli -p "$p" memory usage "$t:buyers" samples 0)
    st=$(redis-cli -p "$p" dbsize)
    row "$r" mem_bytes_per_order "$(awk -v a="$m0" -v b="$m1" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }')" B/order
    row "$r" mem_order_status "$(awk -v s="$os" -v n="$n" 'BEGIN { printf "%.1f", s / n }')" "B/order (MEMORY USAGE of the order status hash / $n)"
    row "$r" mem_stream "$(awk -v s="$so" -v n="$n" 'BEGIN { printf "%.1f", s / n }')" "B/order (MEMORY USAGE of the stream / $n)"
    row "$r" mem_buyers "$(awk -v s="$bu" -v n="$n" 'BEGIN { printf "%.1f", s / n }')" "B/order (MEMORY USAGE of the buyers hash / $n)"
    row "$r" mem_keys_per_order "$(awk -v s="$st" -v n="$n" 'BEGIN { printf "%.3f", s / n }')" "keys/order ($st keys in all)"
    redis-cli -p "$p" flushall >/dev/null
}

# acks_engine ROUND ACKS: seckill-bench compare on the master with its replica.
acks_engine() {
    "$bench" --mode compare --redis-url "redis://127.0.0.1:$MASTER_PORT" --strategies lua-coalesced \
        --replica-acks "$2" --inflight 128 --users 200 --duration "$DURATION" --csv >"$work/cmp.csv" 2>"$work/cmp.err" ||
        { echo "decision.sh: compare failed" >&2; cat "$work/cmp.err" "$work/cmp.csv" >&2; exit 1; }
    row "$1" "engine_acks$2_decisions_per_s" "$(tail -1 "$work/cmp.csv" | cut -d, -f2)" decisions/s
}

# cpu ROUND LABEL PID URL [wrk args]: server CPU per request under wrk -t1 -c64.
cpu() {
    local r=$1 label=$2 pid=$3 url=$4 reqs ms
    shift 4
    sb_cpu_ms "$pid" "$DURATION" >"$work/cpu" &
    local cp=$!
    wrk -t1 -c64 -d"${DURATION}s" "$@" "$url" >"$work/wrk.txt" 2>&1
    wait "$cp"
    reqs=$(awk '/requests in/ { print $1 }' "$work/wrk.txt")
    ! grep -q Non-2xx "$work/wrk.txt" || { echo "decision.sh: cpu $label: non-2xx answers" >&2; cat "$work/wrk.txt" >&2; exit 1; }
    ms=$(cat "$work/cpu")
    row "$r" "cpu_${label}_us" "$(awk -v c="$ms" -v n="$reqs" 'BEGIN { printf "%.2f", c * 1000 / n }')" "us CPU/request"
}
# cpu_seckilld ROUND THREADS [BIN LABEL]: CPU per purchase of a fresh
# seckilld (this tree's, or BIN's as LABEL).
cpu_seckilld() {
    local r=$1 t=$2 bin=${3:-$seckilld} label=${4:-seckilld} id="c$1t$2${4:-}$$"
    sk_start "$bin" "redis://127.0.0.1:$PLAIN_PORT" 0 --threads "$t"
    campaign "$id" 1000000000
    CAMPAIGN=$id BUY_PREFIX="cw$r$t$label" wrk -t1 -c64 -d1s -s bench/seckill/wrk_buy.lua "$URL" >/dev/null 2>&1
    CAMPAIGN=$id BUY_PREFIX="c$r$t$label" cpu "$r" "${label}_t$t" "$SK_PID" "$URL" -s bench/seckill/wrk_buy.lua
    sk_stop
}

# the servers: plain (redis, http, cpu), scratch (floor, memory), master +
# replica (acks, http), 3-master cluster (cluster)
mkdir -p "$work/plain" "$work/scratch" "$work/master" "$work/clu"
dl_start_redis "$work/plain"
PLAIN_PORT=$REDIS_PORT
if want floor || want memory; then dl_start_redis "$work/scratch"; SCRATCH_PORT=$REDIS_PORT; fi
if want acks || want http; then
    dl_start_redis "$work/master"
    MASTER_PORT=$REDIS_PORT
    dl_start_replica "$work/master" "$MASTER_PORT"
fi
if want http || want cpu; then build_old; fi
if want cluster; then cluster_start "$work/clu" 3 0; fi
if want cpu; then sb_start_nginx "$work/nginx"; fi
plain="redis://127.0.0.1:$PLAIN_PORT"
master="redis://127.0.0.1:${MASTER_PORT:-0}"

echo "# decision.sh at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(redis-server --version | cut -d' ' -f3), $(nproc) CPUs, load $(load); rounds $ROUNDS x ${DURATION} s; parts: $ONLY"
echo "round,measure,value,unit" | tee "$out"
for r in $(seq 1 "$ROUNDS"); do
    echo "# round $r load $(load)"
    # this tree and OLD_REF alternate which goes first, round by round
    if want http && [ $((r % 2)) = 0 ]; then wrk_buy "$r" old_plain "$OLD" 0 1 "$plain" "$PLAIN_PORT"; fi
    if want redis && [ $((r % 2)) = 0 ]; then SK_THREADS=1 wrk_buy "$r" plain_t1 "$seckilld" 0 1 "$plain" "$PLAIN_PORT"; fi
    if want redis || want http || want floor || want cluster; then wrk_buy "$r" plain "$seckilld" 0 1 "$plain" "$PLAIN_PORT"; fi
    if want redis && [ $((r % 2)) = 1 ]; then SK_THREADS=1 wrk_buy "$r" plain_t1 "$seckilld" 0 1 "$plain" "$PLAIN_PORT"; fi
    if want http && [ $((r % 2)) = 1 ]; then wrk_buy "$r" old_plain "$OLD" 0 1 "$plain" "$PLAIN_PORT"; fi
    if want floor; then
        # the batch size and the count of the round's plain run (or 13, MEM_ORDERS)
        b=$(awk -F, -v r="$r" '$1 == r && $2 == "plain_batch" { print $3 }' "$out")
        n=$(awk -F, -v r="$r" '$1 == r && $2 == "plain_accepted" { print $3 }' "$out")
        floor "$r" "$SCRATCH_PORT" "${b:-13}" "${n:-$MEM_ORDERS}"
    fi
    if want acks; then
        acks_engine "$r" $((r % 2))
        acks_engine "$r" $(((r + 1) % 2))
    fi
    if want http && [ $((r % 2)) = 0 ]; then wrk_buy "$r" old_replica_acks1 "$OLD" 1 1 "$master" "$MASTER_PORT"; fi
    if want acks && [ $((r % 2)) = 0 ]; then wrk_buy "$r" replica_acks0 "$seckilld" 0 1 "$master" "$MASTER_PORT"; fi
    if want acks || want http; then wrk_buy "$r" replica_acks1 "$seckilld" 1 1 "$master" "$MASTER_PORT"; fi
    if want acks && [ $((r % 2)) = 1 ]; then wrk_buy "$r" replica_acks0 "$seckilld" 0 1 "$master" "$MASTER_PORT"; fi
    if want http && [ $((r % 2)) = 1 ]; then wrk_buy "$r" old_replica_acks1 "$OLD" 1 1 "$master" "$MASTER_PORT"; fi
    if want cpu; then
        if [ $((r % 2)) = 0 ]; then cpu_seckilld "$r" 1 "$OLD" old; fi
        cpu_seckilld "$r" $((1 + r % 2))
        cpu "$r" nginx "$NG_PID" "http://127.0.0.1:$NG_PORT/"
        cpu_seckilld "$r" $((2 - r % 2))
        if [ $((r % 2)) = 1 ]; then cpu_seckilld "$r" 1 "$OLD" old; fi
    fi
    if want cluster; then
        # shellcheck disable=SC2086
        wrk_buy "$r" cluster_k3 "$seckilld" 0 3 "$CLUSTER_URL" $CLUSTER_PORTS
    fi
    if want memory; then memory "$r" "$SCRATCH_PORT"; fi
done
want cluster && cluster_stop
echo
echo "# summary at $(git rev-parse HEAD 2>/dev/null || echo '?')$( [ -n "$(git status --porcelain -- bench src tools 2>/dev/null)" ] && echo ' + uncommitted changes')"
echo "# medians over $ROUNDS rounds of ${DURATION} s; ratios per round (same round), then their median; load $(load)"
"$PY" bench/seckill/decision_summary.py "$out" "$MEM_ORDERS" "$OLD_REF"
