# scenario_cluster_lib.sh: the flash sale on a Redis Cluster, for the
# cluster scenarios (scenario_cluster_*.sh), the cluster tests of
# tests/seckill and `make demo-cluster`. Source after sale_lib.sh (or
# scripts/lib.sh with $work, $src set). On top of tests/support/cluster.sh
# (3 masters + 3 replicas, every node stopped by PID): campaigns placed on
# a chosen master, a batched slot move, reads that skip SIGSTOPped nodes.
# cl_start sets CL_PORTS, CL_MASTERS, REDIS_URL (a redis-cluster:// URL
# naming every master) and DATABASE_URL.
# shellcheck source=../support/cluster.sh
. "$src/tests/support/cluster.sh"

# cl_free_port: a free port whose cluster bus port (+10000) is free too
# (a one-node cluster started by hand, cl_start_node).
cl_free_port() { dl_free_port 10000; }

cl_start_node() { # cl_start_node PORT: one cluster-enabled node (not joined)
    mkdir -p "$work/node-$1"
    "${DL_PDEATHSIG[@]}" redis-server --port "$1" --bind 127.0.0.1 --dir "$work/node-$1" --save '' \
        --appendonly no --protected-mode no --cluster-enabled yes --cluster-config-file nodes.conf \
        >"$work/node-$1.log" 2>&1 &
    dl_track $!
    eval "CLUSTER_PID_$1=$!"
}

cl_pid() { eval "echo \${CLUSTER_PID_$1}"; }

# cl_live PORT: the node runs and is not stopped (a stopped node would hang redis-cli).
cl_live() {
    local pid st
    pid=$(cl_pid "$1")
    st=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
    case "$st" in T*) return 1 ;; esac
}

cl_start() {
    local p i url=""
    cluster_start "$work" 3 1 || return 1
    CL_PORTS=$CLUSTER_PORTS
    CL_MASTERS=$(for p in $CL_PORTS; do
        if [ "$(redis-cli -p "$p" role 2>/dev/null | head -1)" = master ]; then echo "$p"; fi; done | tr '\n' ' ')
    CL_MASTERS=${CL_MASTERS% }
    for p in $CL_MASTERS; do url="$url,127.0.0.1:$p"; done
    REDIS_URL="redis-cluster://${url#,}"
    DATABASE_URL=${DATABASE_URL:-sqlite://$work/orders.db}
    # every master with its replica linked (WAIT 1 can be answered)
    for p in $CL_MASTERS; do
        i=0
        until [ "$(redis-cli -p "$p" info replication | tr -d '\r' | sed -n 's/^connected_slaves://p')" = 1 ]; do
            i=$((i + 1)); [ $i -gt 200 ] && { echo "master $p has no replica" >&2; return 1; }; sleep 0.05
        done
    done
}

cl_wait_ok() { # cl_wait_ok SECONDS: every live node says cluster_state:ok
    local end=$(( $(date +%s) + $1 )) p bad
    while :; do
        bad=0
        for p in $CL_PORTS; do
            cl_live "$p" || continue
            case "$(redis-cli -p "$p" cluster info 2>/dev/null)" in *cluster_state:ok*) ;; *) bad=1 ;; esac
        done
        [ $bad = 0 ] && return 0
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}

# cl_slot KEY: the key's slot (asked of a live node).
cl_slot() {
    local p
    for p in $CL_PORTS; do
        cl_live "$p" || continue
        redis-cli -p "$p" cluster keyslot "$1" && return 0
    done
    return 1
}

# cl_master_of KEY: the port of the master serving KEY's slot now (a node
# that does not serve it answers MOVED <slot> <host:port>).
cl_master_of() {
    local p r
    for p in $CL_PORTS; do
        cl_live "$p" || continue
        r=$(redis-cli -p "$p" type "$1" 2>&1) || continue
        case "$r" in
            MOVED*) echo "${r##*:}"; return 0 ;;
            CLUSTERDOWN*|TRYAGAIN*|ASK*) continue ;;
            *) [ "$(redis-cli -p "$p" role | head -1)" = master ] && { echo "$p"; return 0; } ;;
        esac
    done
    return 1
}

# cl_replica_of PORT: the port of a replica of master PORT.
cl_replica_of() {
    redis-cli -p "$1" info replication | tr -d '\r' | sed -n 's/^slave0:ip=[^,]*,port=\([0-9]*\),.*/\1/p'
}

# cl_campaign_on PORT PREFIX: a campaign id (PREFIX + n) whose slot that master serves.
cl_campaign_on() {
    local n id
    for n in $(seq 0 999); do
        id="$2$n"
        case "$(redis-cli -p "$1" get "{c:$id}:meta" 2>&1)" in MOVED*) ;; *) echo "$id"; return 0 ;; esac
    done
    return 1
}

# cl_node_id PORT: the cluster node id of the node on PORT.
cl_node_id() { redis-cli -p "$1" cluster myid; }

# cl_stock ID: the campaign's Redis stock, wherever its slot lives.
cl_stock() {
    local p
    p=$(cl_master_of "{c:$1}:stock") && redis-cli -p "$p" get "{c:$1}:stock" 2>/dev/null
}

# cl_move_slot SLOT FROM TO [BATCH]: moves SLOT from master FROM to master
# TO by hand, as `redis-cli --cluster reshard` does for each slot
# (SETSLOT IMPORTING / MIGRATING, MIGRATE of BATCH keys at a time, then
# SETSLOT NODE on both and on every other master). Clients meet ASK,
# TRYAGAIN and finally MOVED. Sets MOVE_MS (how long the slot was in
# migration) and MOVE_KEYS.
cl_move_slot() {
    local slot=$1 from=$2 to=$3 batch=${4:-50} fid tid t0 r p
    local -a keys
    fid=$(cl_node_id "$from")
    tid=$(cl_node_id "$to")
    t0=$(date +%s%N)
    MOVE_KEYS=0
    redis-cli -p "$to" cluster setslot "$slot" importing "$fid" >/dev/null
    redis-cli -p "$from" cluster setslot "$slot" migrating "$tid" >/dev/null
    while :; do
        mapfile -t keys < <(redis-cli -p "$from" cluster getkeysinslot "$slot" "$batch")
        [ "${#keys[@]}" -gt 0 ] && [ -n "${keys[0]}" ] || break
        r=$(redis-cli -p "$from" migrate 127.0.0.1 "$to" "" 0 5000 REPLACE KEYS "${keys[@]}")
        case "$r" in OK|NOKEY) ;; *) echo "MIGRATE: $r" >&2; return 1 ;; esac
        MOVE_KEYS=$((MOVE_KEYS + ${#keys[@]}))
    done
    redis-cli -p "$to" cluster setslot "$slot" node "$tid" >/dev/null
    redis-cli -p "$from" cluster setslot "$slot" node "$tid" >/dev/null
    for p in $CL_MASTERS; do
        [ "$p" = "$from" ] || [ "$p" = "$to" ] || redis-cli -p "$p" cluster setslot "$slot" node "$tid" >/dev/null
    done
    MOVE_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
}

# cl_sale_setup PREFIX: the cluster, a campaign on its first master
# (CAMPAIGN, CAMP_MASTER, CAMP_SLOT). Call before start_services.
cl_sale_setup() {
    cl_start
    CAMP_MASTER=${CL_MASTERS%% *}
    CAMPAIGN=$(cl_campaign_on "$CAMP_MASTER" "$1")
    CAMP_SLOT=$(cl_slot "{c:$CAMPAIGN}:meta")
    export REDIS_URL DATABASE_URL
    say "cluster up: masters $CL_MASTERS; campaign $CAMPAIGN in slot $CAMP_SLOT on master $CAMP_MASTER"
}

# cl_wait_sold_out BUDGET_S: until the campaign's Redis stock is 0.
cl_wait_sold_out() {
    local end=$(( $(date +%s) + $1 ))
    until [ "$(cl_stock "$CAMPAIGN")" = 0 ]; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.05
    done
}

# cl_wait_sold_at_least N BUDGET_S: until N units are sold.
cl_wait_sold_at_least() {
    local end=$(( $(date +%s) + $2 )) s
    while :; do
        s=$(cl_stock "$CAMPAIGN")
        case "$s" in ''|*[!0-9-]*) ;; *) [ $((STOCK - s)) -ge "$1" ] && return 0 ;; esac
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.05
    done
}

# cl_wait_selling BUDGET_S: ms until the campaign's stock moves again (or
# it is sold out): buyers are decided again.
cl_wait_selling_ms() {
    local t0 s0 s end=$(( $(date +%s) + $1 ))
    t0=$(date +%s%N)
    s0=$(cl_stock "$CAMPAIGN")
    while :; do
        s=$(cl_stock "$CAMPAIGN")
        if [ "$s" = 0 ] || { [ -n "$s" ] && [ "$s" != "$s0" ] && [ -n "$s0" ]; }; then break; fi
        [ -n "$s0" ] || s0=$s
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.02
    done
    echo $(( ($(date +%s%N) - t0) / 1000000 ))
}
