#!/bin/bash
# `make fault`: runs every fault scenario FAULT_RUNS times (default 10) and
# writes docs/RELIABILITY.md: per scenario the runs, passes, oversold,
# duplicates, lost orders, orders Redis itself lost, anomalies caught by the
# database guard, and time to recover, each sale as its log states it, at
# one commit (a dirty tree is refused; FAULT_ALLOW_DIRTY=1 marks the report
# instead). FAULT_ONLY="a b" runs only those scenarios (the report says it
# is partial). Builds first unless FAULT_SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
RUNS=${FAULT_RUNS:-10}
BUILD=${BUILD_DIR:-build}
case "$BUILD" in /*) ;; *) BUILD="$root/$BUILD" ;; esac
if [ "${FAULT_SKIP_BUILD:-0}" != 1 ]; then
    ./scripts/setup.sh
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$BUILD" -j "$(nproc)" >/dev/null
fi
export DLOCK_SOURCE_DIR="$root" DLOCK_BUILD_DIR="$BUILD"
# The tree the runs test, stated in the report (read before the runs): one
# commit. A tree with uncommitted changes (other than the report itself) is
# refused, unless FAULT_ALLOW_DIRTY=1, which marks the report so.
commit=$(git rev-parse HEAD 2>/dev/null) || { echo "fault.sh: not a git tree: no commit to state" >&2; exit 2; }
if [ -n "$(git status --porcelain --untracked-files=normal -- . ':!docs/RELIABILITY.md' ':!out')" ]; then
    if [ "${FAULT_ALLOW_DIRTY:-0}" != 1 ]; then
        echo "fault.sh: the tree has uncommitted changes; commit them (or FAULT_ALLOW_DIRTY=1 marks the report)" >&2
        git status --short -- . ':!docs/RELIABILITY.md' ':!out' >&2
        exit 2
    fi
    commit="$commit + uncommitted changes (not a report of any commit)"
fi
results=$(mktemp /tmp/dlock-fault-results-XXXXXX)
logdir=${FAULT_LOG_DIR:-$root/out/fault}
mkdir -p "$logdir"
trap 'rm -f "$results"' EXIT
export FAULT_RESULTS="$results"
declare -A pass fail skip
skip_code=$(. scripts/lib.sh && echo "$DL_SKIP_CODE") # a skipped scenario's exit code
scenarios="kill_seckilld kill_persister failover failover_synced failover_no_return aof_restart redis_outage lease_pause lease_cut redis_restart partition split_brain cluster_reshard cluster_failover shards shards_limit shards_transfer_crash shards_reshard"
# every scenario file under tests/fault must be in the list: the report
# covers them all
for f in tests/fault/scenario_*.sh; do
    s=${f#tests/fault/scenario_}; s=${s%.sh}
    case $s in *_lib) continue ;; esac
    case " $scenarios clock " in *" $s "*) ;; *) echo "fault.sh: $f is not in the scenario list" >&2; exit 2 ;; esac
done
# The lease partitions (tests/fault/lease_partition*.sh): a live
# holder cut off from a live server, named lease_partition[_cli]_WHAT_Ns
# (WHAT: the topology, or the CLI's mode; N: the lease in seconds).
lease_scenarios=""
for t in redis sentinel cluster etcd cli_redis; do
    lease_scenarios="$lease_scenarios lease_partition_${t}_3s lease_partition_${t}_10s"
done
lease_scenarios="$lease_scenarios lease_partition_cli_etcd_3s lease_partition_cli_etcd_revoke_3s"
lease_scenarios="$lease_scenarios lease_partition_election_redis_3s lease_partition_election_etcd_3s"
# lease_run NAME: runs that lease-partition scenario's script.
lease_run() {
    local what=${1%_*} lease=${1##*_}
    lease=${lease%s}
    case $what in
        lease_partition_election_*) bash tests/fault/election_partition.sh "${what#lease_partition_election_}" "$lease" ;;
        lease_partition_cli_*) bash tests/fault/lease_partition_cli.sh "${what#lease_partition_cli_}" "$lease" ;;
        *) bash tests/fault/lease_partition.sh "${what#lease_partition_}" "$lease" ;;
    esac
}
# FAULT_ONLY="a b": those scenarios only (to try the generator); the report
# then says it is partial
run_list=${FAULT_ONLY:-$scenarios clock lock_nemesis etcd_nemesis $lease_scenarios}
for s in $scenarios clock lock_nemesis etcd_nemesis $lease_scenarios; do pass[$s]=0; fail[$s]=0; skip[$s]=0; done
for i in $(seq 1 "$RUNS"); do
    for s in $run_list; do
        log="$logdir/$s-$i.log"
        rc=0
        if [ "$s" = lock_nemesis ]; then
            DLOCK_NEMESIS_HISTORY="$logdir/$s-$i.history" \
                bash tests/fault/test_lock_nemesis.sh 20 4 >"$log" 2>&1 || rc=$?
        elif [ "$s" = etcd_nemesis ]; then # the same workload, the lock on a 3-member etcd cluster
            DLOCK_NEMESIS_HISTORY="$logdir/$s-$i.history" DLOCK_NEMESIS_LEASE=1s \
                "$BUILD/tests/lib/etcd/etcd_run" 3 DLOCK_NEMESIS_URL \
                bash tests/fault/test_lock_nemesis.sh 20 4 >"$log" 2>&1 || rc=$?
        elif [ "${s#lease_partition_}" != "$s" ]; then
            lease_run "$s" >"$log" 2>&1 || rc=$?
        else
            bash "tests/fault/scenario_$s.sh" >"$log" 2>&1 || rc=$?
        fi
        case $rc in
            0) pass[$s]=$(( ${pass[$s]} + 1 )); r=pass ;;
            "$skip_code") skip[$s]=$(( ${skip[$s]} + 1 )); r=skipped ;;
            *) fail[$s]=$(( ${fail[$s]} + 1 )); r="FAILED (log $log)" ;;
        esac
        echo "run $i/$RUNS $s: $r"
    done
done
"${PY:-/usr/bin/python3}" - "$results" "$RUNS" "$logdir" "$commit" \
    "$(for s in $run_list; do printf '%s:%s:%s:%s ' "$s" "${pass[$s]}" "${fail[$s]}" "${skip[$s]}"; done)" \
    "${FAULT_ONLY:-}" "$(uptime | sed 's/.*load average: *//')" \
    > docs/RELIABILITY.md <<'PY'
import json, statistics, sys, datetime, os, platform, re
results, runs, logdir, commit, counts, only, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5].split(), sys.argv[6], sys.argv[7]
rows = [json.loads(l) for l in open(results) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["scenario"].replace("-", "_"), []).append(r)

def sale_of(s):
    """The sale each run of s actually made, as its log states it."""
    seen = []
    for i in range(1, runs + 1):
        try:
            text = open(os.path.join(logdir, "%s-%d.log" % (s, i)), errors="replace").read()
        except OSError:
            continue
        for m in re.findall(r"sale started: (.*)", text):
            if m.strip() not in seen:
                seen.append(m.strip())
    return "; ".join(seen) if seen else "-"

print("# Reliability: the fault suite\n")
print("Generated by `make fault` (scripts/fault.sh) at commit %s on %s UTC, %d run(s) per scenario, on a %d-core %s"
      " machine (load average at the end: %s)."
      % (commit, datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), runs, os.cpu_count(), platform.machine(), load))
if only:
    print("\n**Partial run**: only FAULT_ONLY=`%s`; not a report of the whole suite." % only)
env = " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items()) if k.startswith("FAULT_") and k != "FAULT_RESULTS")
print("Parameters: %s." % (env if env else "the scenarios' defaults (no FAULT_* variable set)"))
print("Each sale scenario runs seckilld instances and persisters on real servers, buyers plus scalpers and malformed")
print("requests; the *sale* column is what each run's log says it started (buyers, rate, stock). The checker is")
print("scripts/sale_check.py, which judges what buyers were told (docs/design/promise.md). Logs: %s/.\n"
      % os.path.relpath(logdir, os.getcwd()))
lease_counts = [c for c in counts if c.startswith("lease_partition_")]
counts = [c for c in counts if not c.startswith("lease_partition_")]
print("| scenario | sale | runs | passed | failed | skipped | told 201 | told 202 | 202 confirmed | 202 lost | broken promises | oversold | duplicates | lost | rejected by the guard | retried requests | time to recover (median ms) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for c in counts:
    s, p, f, k = c.split(":")
    rs = by.get(s, [])
    def tot(key):
        return sum(r.get(key, 0) for r in rs) if rs else "-"
    rec = [r["recover_ms"] for r in rs if r.get("recover_ms")]
    print("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        s, sale_of(s), int(p) + int(f) + int(k), p, f, k, tot("told_201"), tot("told_202"), tot("confirmed_202"),
        tot("lost_202"), tot("broken_promises"), tot("oversold"), tot("duplicates"), tot("lost"),
        tot("guard_rejected"), tot("retried"), int(statistics.median(rec)) if rec else "-"))
if lease_counts:
    print("""
Lease partitions: a live holder cut off from a live server, the other client on a direct connection.
Times are ms after the cut, on CLOCK_MONOTONIC, taken in the processes; per object of every run. *stopped*: the
holder's local held state turned false (the CLI: its COMMAND had exited); *other*: the other client held it (the CLI:
the second COMMAND started); *margin*: other minus stopped, which must be positive every time. *never*: objects the
holder still believed held when the run ended (lease + 3 s after the cut).
""")
    print("| scenario | lease (ms) | runs | passed | failed | skipped | objects | stopped (max ms) | other (min ms) | margin (min ms) | never |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
for c in lease_counts:
    s, p, f, k = c.split(":")
    rs = by.get(s, [])
    objs = sorted({o for r in rs for o, v in r.items() if isinstance(v, dict)})
    vals = [v for r in rs for v in r.values() if isinstance(v, dict)]
    stops = [v["stop_ms"] for v in vals if v.get("stop_ms") is not None]
    others = [v["other_ms"] for v in vals if v.get("other_ms") is not None]
    margins = [v["other_ms"] - v["stop_ms"] for v in vals
               if v.get("stop_ms") is not None and v.get("other_ms") is not None]
    never = sum(1 for v in vals if v.get("stop_ms") is None)
    print("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        s, rs[0]["lease_ms"] if rs else "-", int(p) + int(f) + int(k), p, f, k, ", ".join(objs) or "-",
        max(stops) if stops else "-", min(others) if others else "-", min(margins) if margins else "-",
        never if rs else "-"))
print("""
Notes:
- *broken promises*: orders a buyer was answered 201 for that did not end persisted, paid or cancelled by
  their own payment timeout under the order id the buyer was given. Must be 0 everywhere; one fails the run.
- *told 202*: decisions that were made but not yet safe when answered (no replica acknowledgement in time,
  no fsync-always on a standalone server, or the database path); each ends *confirmed* or *lost*.
- *oversold*: units sold beyond the stock, in the database or in the 201 answers. *lost*: orders the current
  Redis master holds that the database lacks. *duplicates*: users above their limit (answers and database)
  plus idempotency violations (two order ids told 201 under one Idempotency-Key, or two orders of one key
  kept). All must be 0. A key whose 202 decision was lost with its master may be decided again.
- *rejected by the guard*: orders the database guard refused; a refused Redis-path order of the current
  timeline is a broken promise, a refused order of a dead timeline (stale epoch) was told 202.
- `split_brain`: the master and one seckilld instance in a network namespace, cut off from the sentinels,
  the replica and the other instances while buyers still reach that instance; Sentinel promotes the
  replica, and after the heal turns the old master into its replica (its writes are lost). Both Redis
  servers run `min-replicas-to-write 1`: the isolated instance answers 202 (WAIT fails) then 503
  (NOREPLICAS), never 201 (checked from its metrics); with one replica the new master also refuses writes
  until the old one has rejoined, so the time to recover includes Sentinel's wait before it reconfigures a
  returning master and a full resync.
- `shards*`: one campaign over several buckets on the 3-master + 3-replica Cluster. `shards`: exactly the
  stock told 201 and persisted, every bucket empty, nothing in transit. `shards_limit`: concurrent attempts
  per user under the per-user limit. `shards_transfer_crash`: kill -9 of the seckilld between a transfer's
  take and its give (`SECKILLD_TEST_XFER_PAUSE_MS`), the survivors' recovery finishes it; time to recover =
  kill to the killed mover's journal entry finished. `shards_reshard`: one bucket's slot moved to another
  master mid-sale; time to recover = migration start to the next sale.
- `lock_nemesis` is the lock workload, `dlock torture` (SIGSTOP of the holder past its lease; fenced storage); its figures are
  in its logs: counter == accepted writes, tokens increasing, no overlap of unpaused holders; the
  history of every holding and pause is in the logs' directory (lock_nemesis-N.history).
- `etcd_nemesis` is the same lock workload through an `etcd://` URL on a 3-member etcd cluster (1 s leases,
  tokens = revisions); its logs and histories are etcd_nemesis-N.*.
- `lease_partition_*`: tests/fault/lease_partition.sh (every lock object on one holder client: simple, reentrant,
  read-write lock's write side, 1-permit semaphore; etcd: the lock) and lease_partition_cli.sh (the dlock CLI; `revoke`:
  the etcd lease revoked behind the holder) and election_partition.sh (`election`: run one of three with
  `dlock --standby`, the leader cut off; "stopped" is when its service was told to stop, "other" when the next
  one was told to lead). Standalone Redis and etcd are cut with a frozen TCP proxy
  (tests/support/dl_freeze_proxy.c), Sentinel and Cluster by taking down the veth link of the holder's network namespace.
- `clock` runs dlock processes with clocks 3 h ahead/behind (libfaketime): exclusion, server-side expiry and
  fencing order hold.
""")
PY
echo "wrote docs/RELIABILITY.md"
awk '/^\| scenario/,/^$/' docs/RELIABILITY.md
