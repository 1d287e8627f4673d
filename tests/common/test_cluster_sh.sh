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

# the replica must have the migrated key before its master dies
[ "$(redis-cli -p "$to" wait 1 5000)" = 1 ] || fail "the replica of $to did not acknowledge"
cluster_kill "$to"
cluster_wait_failover "$to" || fail "no failover"
now=$(cluster_port_of_key "sh:{t}k") || fail "no master after failover"
[ "$now" != "$to" ] || fail "still the dead node"
[ "$(redis-cli -p "$now" get "sh:{t}k")" = v ] || fail "the promoted replica lost the key"

pids=$CLUSTER_PIDS
cluster_stop
for pid in $pids; do kill -0 "$pid" 2>/dev/null && fail "node $pid still running"; done
echo "ok"
