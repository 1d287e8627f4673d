# test_cli_cluster.sh: dlock on a redis-cluster:// URL (3 masters,
# tests/support/cluster.sh): names served by three different masters each
# lock on their own master; -n conflicts and a waiter is woken at once by
# the holder's exit (sharded pub/sub); status and release --force; the other
# kinds (--reentrant, --fair, --read/--write, --semaphore); dlock torture
# (a used prefix on any master is refused, a run is SAFE); an unreachable
# cluster is exit 69 with one line.
. "$(dirname "$0")/lib.sh"
# shellcheck source=../../support/cluster.sh
. "$DLOCK_SOURCE_DIR/tests/support/cluster.sh"
trap 'cluster_stop; t_cleanup' EXIT
cluster_start "$T_DIR/cluster" 3 0 || fail "cluster did not start"
unset DLOCK_URL
U=$CLUSTER_URL

# Three names whose keys three different masters serve.
names=() ports=()
for i in $(seq 1 200); do
    p=$(cluster_port_of_key "job$i")
    case " ${ports[*]} " in *" $p "*) continue ;; esac
    names+=("job$i"); ports+=("$p")
    [ ${#names[@]} -eq 3 ] && break
done
expect_eq "${#names[@]}" 3 "names on three masters"

for i in 0 1 2; do
    n=${names[$i]} p=${ports[$i]}
    run_rc "$DLOCK_BIN" -u "$U" "$n" -- sh -c "redis-cli -p $p exists $n > $T_DIR/held-$i; echo \$DLOCK_FENCE > $T_DIR/fence-$i"
    expect_eq "$RC" 0 "dlock -u redis-cluster:// $n"
    expect_eq "$(cat "$T_DIR/held-$i")" 1 "$n held on its slot's master ($p) while COMMAND ran"
    [ -s "$T_DIR/fence-$i" ] || fail "$n: no DLOCK_FENCE"
    expect_eq "$(redis-cli -p "$p" exists "$n")" 0 "$n released after COMMAND"
done

# Exclusion, and a waiter woken by the release, not by a recheck.
n=${names[1]}
rm -f "$T_DIR/ready" "$T_DIR/go"
bg "$DLOCK_BIN" -u "$U" "$n" -- sh -c "touch $T_DIR/ready; while [ ! -e $T_DIR/go ]; do sleep 0.02; done"
h=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
run_rc "$DLOCK_BIN" -u "$U" -n "$n" -- true
expect_eq "$RC" 1 "-n while another dlock holds it -> conflict"
out=$("$DLOCK_BIN" status -u "$U" "$n")
expect_match "$out" "^lock '$n': held" "status on the cluster"
bg "$DLOCK_BIN" -u "$U" -w 20 "$n" -- sh -c "date +%s%3N > $T_DIR/ran-at"
w=$BG_PID
sleep 2.5 # the waiter's recheck interval has grown to 1 s
touch "$T_DIR/go"
wait_rc "$h"; expect_eq "$RC" 0 "holder exit status"
t1=$(now_ms) # the holder released before it exited
wait_rc "$w"; expect_eq "$RC" 0 "waiter exit status"
expect_range "$(($(cat "$T_DIR/ran-at") - t1))" -5000 900 "waiter ran soon after the holder's release (ms)"

# Admin: release --force of a held lock on its master.
rm -f "$T_DIR/ready"
bg "$DLOCK_BIN" -u "$U" "${names[2]}" -- sh -c "touch $T_DIR/ready; sleep 30"
p=$BG_PID
wait_until 5 test -e "$T_DIR/ready"
out=$("$DLOCK_BIN" release -u "$U" --force "${names[2]}")
expect_match "$out" "^removed lock '${names[2]}'" "release --force on the cluster"
expect_eq "$(redis-cli -p "${ports[2]}" exists "${names[2]}")" 0 "key gone from its master"
wait_rc "$p" # the holder saw its lock vanish
expect_eq "$RC" 75 "holder of a force-released lock exits 75"

# The other kinds run on the cluster too.
for kind in --reentrant --fair --read --write "--semaphore 2"; do
    # shellcheck disable=SC2086
    run_rc "$DLOCK_BIN" -u "$U" -n $kind "k${kind// /}" -- true
    expect_eq "$RC" 0 "dlock $kind on the cluster"
done

# dlock torture on the cluster: a prefix with a key on any master is
# refused; a short run on a free prefix is SAFE.
p=$(cluster_port_of_key "used:x")
redis-cli -p "$p" set used:x 1 > /dev/null
run_rc "$DLOCK_BIN" torture -u "$U" --prefix used: --duration 1s > /dev/null 2>&1
expect_eq "$RC" 4 "torture: a prefix with a key on one of the masters is refused"
run_rc "$DLOCK_BIN" torture -u "$U" --prefix tort: --duration 2s > "$T_DIR/tort" 2>&1
expect_eq "$RC" 0 "torture on the cluster: SAFE"
expect_match "$(cat "$T_DIR/tort")" "verdict: SAFE" "torture verdict"

# Unreachable: every seed refuses.
port=$(dl_free_port)
run_rc "$DLOCK_BIN" -u "redis-cluster://127.0.0.1:$port" x -- true 2> "$T_DIR/err"
expect_eq "$RC" 69 "unreachable cluster"
head -1 "$T_DIR/err" | grep -q '^dlock: ' || fail "unreachable: stderr is '$(cat "$T_DIR/err")'"
