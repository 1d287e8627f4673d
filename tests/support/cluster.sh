# tests/support/cluster.sh: a real Redis Cluster for shell scenarios, on
# top of scripts/lib.sh (sourced here if it was not): every node is started
# on free 127.0.0.1 ports (client and bus port chosen explicitly), in its own
# directory under DIR, recorded in DLOCK_PIDS and stopped by that PID only.
#
#   cluster_start DIR N_MASTERS REPLICAS   starts and joins the cluster, waits
#                                          for cluster_state:ok everywhere
#   cluster_stop                           stops every node (by PID)
#   cluster_master_of_slot SLOT            prints the port of the slot's master
#   cluster_port_of_key KEY                prints the port of the key's master
#   cluster_kill PORT                      kill -9 the node on PORT (by PID)
#   cluster_wait_ok [TRIES]                every live node says cluster_state:ok
#   cluster_wait_failover PORT [TRIES]     after PORT died: a new master serves
#                                          its slots, the cluster is ok again
#   cluster_move_slot SLOT TO_PORT         moves a slot (keys included) by hand
#
# CLUSTER_ANNOUNCE_IP (optional, set before cluster_start): nodes also bind
# that local address and announce it (cluster-announce-ip), and the cluster
# is created on it, so clients in a network namespace that reach the host
# by that address follow MOVED replies; CLUSTER_URL then names it too.
#
# After cluster_start: CLUSTER_PORTS (all nodes, space-separated),
# CLUSTER_PIDS (same order), CLUSTER_PID_<port>, CLUSTER_URL
# (redis-cluster://127.0.0.1:p1,127.0.0.1:p2), all exported.

if ! declare -F dl_free_port >/dev/null; then
    # shellcheck source=../../scripts/lib.sh
    . "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
fi

cluster__cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

cluster__start_node() {
    local dir=$1 port bus
    port=$(dl_free_port)
    bus=$(dl_free_port)
    mkdir -p "$dir/node-$port"
    local ann=()
    [ -z "${CLUSTER_ANNOUNCE_IP:-}" ] || ann=(--bind 127.0.0.1 "$CLUSTER_ANNOUNCE_IP" --cluster-announce-ip "$CLUSTER_ANNOUNCE_IP")
    "${DL_PDEATHSIG[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/node-$port" \
        --save '' --appendonly no --protected-mode no --enable-debug-command local \
        --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
        --cluster-replica-validity-factor 0 --cluster-port "$bus" "${ann[@]}" \
        >"$dir/node-$port/redis.log" 2>&1 &
    local pid=$!
    dl_track "$pid"
    local i=0
    until cluster__cli "$port" ping >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
            echo "cluster node $port did not start (log $dir/node-$port/redis.log)" >&2
            return 1
        fi
        sleep 0.05
    done
    CLUSTER_PORTS="$CLUSTER_PORTS $port"
    CLUSTER_PIDS="$CLUSTER_PIDS $pid"
    eval "export CLUSTER_PID_$port=$pid"
}

cluster_start() {
    local dir=$1 masters=$2 replicas=$3 n i addrs=""
    CLUSTER_PORTS="" CLUSTER_PIDS=""
    n=$((masters * (1 + replicas)))
    for ((i = 0; i < n; i++)); do cluster__start_node "$dir" || return 1; done
    local host=${CLUSTER_ANNOUNCE_IP:-127.0.0.1}
    for p in $CLUSTER_PORTS; do addrs="$addrs $host:$p"; done
    # shellcheck disable=SC2086
    if ! timeout 60 redis-cli --cluster create $addrs --cluster-replicas "$replicas" --cluster-yes \
        >"$dir/cluster-create.log" 2>&1; then
        echo "redis-cli --cluster create failed (log $dir/cluster-create.log)" >&2
        return 1
    fi
    cluster_wait_ok 600 || return 1
    local p1 p2
    read -r p1 p2 _ <<<"$CLUSTER_PORTS"
    CLUSTER_PORTS=${CLUSTER_PORTS# } CLUSTER_PIDS=${CLUSTER_PIDS# }
    export CLUSTER_PORTS CLUSTER_PIDS
    export CLUSTER_URL="redis-cluster://$host:$p1,$host:$p2"
}

cluster_stop() {
    for pid in $CLUSTER_PIDS; do dl_stop "$pid"; done
}

cluster__alive() {
    local pid
    eval "pid=\${CLUSTER_PID_$1:-}"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Every live node: cluster_state:ok, and every live replica linked.
cluster_wait_ok() {
    local tries=${1:-600} i=0 ok p info
    while [ $i -lt "$tries" ]; do
        ok=1
        for p in $CLUSTER_PORTS; do
            cluster__alive "$p" || continue
            info=$(cluster__cli "$p" cluster info 2>/dev/null || true)
            case $info in *cluster_state:ok*) ;; *) ok=0; break ;; esac
            info=$(cluster__cli "$p" info replication 2>/dev/null || true)
            case $info in
            *role:slave*) case $info in *master_link_status:up*) ;; *) ok=0; break ;; esac ;;
            esac
        done
        [ $ok = 1 ] && return 0
        i=$((i + 1))
        sleep 0.05
    done
    echo "cluster never became ok" >&2
    return 1
}

cluster_master_of_slot() {
    local slot=$1 p nodes
    for p in $CLUSTER_PORTS; do
        cluster__alive "$p" || continue
        nodes=$(cluster__cli "$p" cluster nodes 2>/dev/null) || continue
        echo "$nodes" | "$PY" -c '
import sys
slot = int(sys.argv[1])
for line in sys.stdin:
    f = line.split()
    if len(f) < 8 or "master" not in f[2] or "fail" in f[2]:
        continue
    for r in f[8:]:
        if r.startswith("["):
            continue
        lo, _, hi = r.partition("-")
        if int(lo) <= slot <= int(hi or lo):
            print(f[1].split("@")[0].rsplit(":", 1)[1]); sys.exit(0)
sys.exit(1)' "$slot" && return 0
        return 1
    done
    return 1
}

cluster_port_of_key() {
    local p slot
    for p in $CLUSTER_PORTS; do
        cluster__alive "$p" || continue
        slot=$(cluster__cli "$p" cluster keyslot "$1") || return 1
        cluster_master_of_slot "$slot"
        return
    done
    return 1
}

cluster_kill() {
    local pid
    eval "pid=\${CLUSTER_PID_$1:-}"
    [ -n "$pid" ] || return 1
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# cluster_wait_failover DEAD_PORT [TRIES]: the live nodes have marked the
# dead node failed (not just suspected) and say cluster_state:ok again, so a
# replica serves its slots.
cluster_wait_failover() {
    local dead=$1 tries=${2:-400} i=0 p nodes
    while [ $i -lt "$tries" ]; do
        for p in $CLUSTER_PORTS; do
            [ "$p" = "$dead" ] && continue
            cluster__alive "$p" || continue
            nodes=$(cluster__cli "$p" cluster nodes 2>/dev/null) || continue
            if echo "$nodes" | grep -Eq " 127\.0\.0\.1:$dead@[0-9]+ [a-z,]*fail[ ,]" &&
                cluster_wait_ok 1 2>/dev/null; then
                return 0
            fi
            break
        done
        i=$((i + 1))
        sleep 0.05
    done
    echo "no failover of $dead" >&2
    return 1
}

cluster__id() { cluster__cli "$1" cluster myid; }

cluster_move_slot() {
    local slot=$1 to=$2 from from_id to_id keys k p
    from=$(cluster_master_of_slot "$slot") || return 1
    [ "$from" = "$to" ] && return 0
    from_id=$(cluster__id "$from")
    to_id=$(cluster__id "$to")
    cluster__cli "$to" cluster setslot "$slot" importing "$from_id" >/dev/null || return 1
    cluster__cli "$from" cluster setslot "$slot" migrating "$to_id" >/dev/null || return 1
    while :; do
        keys=$(cluster__cli "$from" cluster getkeysinslot "$slot" 100)
        [ -z "$keys" ] && break
        for k in $keys; do
            cluster__cli "$from" migrate 127.0.0.1 "$to" "$k" 0 5000 >/dev/null || return 1
        done
    done
    cluster__cli "$to" cluster setslot "$slot" node "$to_id" >/dev/null || return 1
    cluster__cli "$from" cluster setslot "$slot" node "$to_id" >/dev/null || return 1
    for p in $CLUSTER_PORTS; do
        [ "$p" = "$to" ] || [ "$p" = "$from" ] && continue
        cluster__alive "$p" || continue
        [ "$(cluster__cli "$p" role | head -1)" = master ] || continue
        cluster__cli "$p" cluster setslot "$slot" node "$to_id" >/dev/null || true
    done
}
