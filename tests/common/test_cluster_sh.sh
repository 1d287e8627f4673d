#!/usr/bin/env bash
# test_cluster_sh.sh: the shell cluster fixture (tests/support/cluster.sh)
# does what the fault scenarios rely on: 3 masters + 3 replicas up and ok,
# a key's master found, a slot moved with its key, a killed master replaced
# by its replica, and every node gone after cluster_stop (by PID).
set -euo pipefail
. "$(dirname "$0")/../support/cluster.sh"
D=$(mktemp -d "${TMPDIR:-/tmp}/dlock-clsh-XXXXXX")
trap 'cluster_stop; dl_cleanup; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cluster_start "$D" 3 1
[ "$(echo "$CLUSTER_PORTS" | wc -w)" = 6 ] || fail "want 6 nodes: $CLUSTER_PORTS"
case $CLUSTER_URL in redis-cluster://127.0.0.1:*,127.0.0.1:*) ;; *) fail "url $CLUSTER_URL" ;; esac

p=$(cluster_port_of_key "sh:{t}k") || fail "no master for the key"
[ "$(redis-cli -p "$p" set "sh:{t}k" v)" = OK ] || fail "SET on its master"
slot=$(redis-cli -p "$p" cluster keyslot "sh:{t}k")
to=""
for q in $CLUSTER_PORTS; do
    [ "$q" != "$p" ] && [ "$(redis-cli -p "$q" role | head -1)" = master ] && { to=$q; break; }
done
cluster_move_slot "$slot" "$to" || fail "move slot"
[ "$(cluster_port_of_key "sh:{t}k")" = "$to" ] || fail "slot not on $to"
[ "$(redis-cli -p "$to" get "sh:{t}k")" = v ] || fail "the key did not move"

# the replica must have the migrated key before its master dies: $to has
# exactly one replica ($rep). A WAIT counts the replicas that have the
# writes of its own connection, and a new connection has written nothing
# (its WAIT answers every connected replica at once, even a stopped one),
# so the WAIT follows a write on the same connection: a write after the
# key's RESTORE, which the replication stream carries after it. Then the
# replica itself is asked for the key.
info=$(redis-cli -p "$to" info replication | tr -d '\r')
[ "$(echo "$info" | sed -n 's/^connected_slaves://p')" = 1 ] || fail "$to has not exactly one replica: $info"
rep=$(echo "$info" | sed -n 's/^slave0:ip=[^,]*,port=\([0-9]*\),.*/\1/p')
[ -n "$rep" ] || fail "no replica port in: $info"
acked=$(printf 'SET sh:{t}sync 1\nWAIT 1 5000\n' | redis-cli -p "$to" | tr -d '\r' | tr '\n' ' ')
[ "$acked" = "OK 1 " ] || fail "the replica $rep of $to did not acknowledge a write after the key's move: $acked"
onrep=$(printf 'READONLY\nGET sh:{t}k\n' | redis-cli -p "$rep" | tr -d '\r' | tr '\n' ' ')
[ "$onrep" = "OK v " ] || fail "the replica $rep does not hold the moved key before the kill: $onrep"
cluster_kill "$to"
cluster_wait_failover "$to" || fail "no failover"
# Only that replica can take over $to's slots. Every node's view and the
# promoted node's own state converge a moment after the failover: wait for
# the slot to be served by $rep before reading (a redirection or CLUSTERDOWN
# from a node still catching up is not a lost key).
now="" got="" i=0
while [ $i -lt 200 ]; do
    now=$(cluster_port_of_key "sh:{t}k" || true)
    if [ "$now" = "$rep" ]; then
        got=$(redis-cli -p "$rep" get "sh:{t}k" 2>&1)
        case $got in MOVED* | ASK* | CLUSTERDOWN* | TRYAGAIN* | LOADING*) ;; *) break ;; esac
    fi
    i=$((i + 1))
    sleep 0.05
done
[ "$now" = "$rep" ] || fail "the slot of the key is not served by the promoted replica $rep (the view says '$now')"
[ "$got" = v ] || fail "the promoted replica $rep, which acknowledged the write, answers '$got' for the key (want v)"

pids=$CLUSTER_PIDS
cluster_stop
for pid in $pids; do kill -0 "$pid" 2>/dev/null && fail "node $pid still running"; done
echo "ok"
