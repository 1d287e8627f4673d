# shellcheck shell=bash
# scenario_shards_lib.sh: the flash sale of one campaign sharded over K
# buckets on the 3-master + 3-replica Cluster, for the
# scenario_shards*.sh scenarios. Source after sale_lib.sh and
# scenario_cluster_lib.sh. Reads every bucket through a Cluster client
# (python3-redis), wherever its slot lives now:
#   sh_state            one JSON line: per bucket tag, master, stock,
#                       journal entries, gate size, stream length; sold
#                       (units in every buyers hash), units in transit
#                       (journal entries whose id the destination's gate
#                       lacks), the sum of all three, the journal's ids
#   sh_field JSON F     one field of that line (a list space-separated)
#   sh_db_sold          units persisted/paid in the database
#   sh_metric URL NAME  a seckilld /metrics counter (0 when absent)
#   sh_check_final      the end of a sale: every bucket's stock 0, no
#                       journal entry, nothing in transit, Redis sold and
#                       database sold == STOCK (exits 1 otherwise)
SHARDS=${FAULT_SHARDS:-3}

sh_state() {
    "$PY" - "$REDIS_URL" "$CAMPAIGN" <<'PY'
import json, sys
from redis.cluster import RedisCluster, ClusterNode
hosts = sys.argv[1][len("redis-cluster://"):].split(",")
r = RedisCluster(startup_nodes=[ClusterNode(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1])) for h in hosts])
camp = sys.argv[2]
tags = (r.hget("{c:%s}:meta" % camp, "bucket_tags") or b"").decode()
tags = tags.split(",") if tags else ["c:" + camp]
out = {"k": len(tags), "buckets": [], "sold": 0, "in_transit": 0, "journal": 0, "xids": []}
for t in tags:
    k = "{%s}:" % t
    node = r.get_node_from_key(k + "stock")
    b = {"tag": t, "master": node.port, "stock": int(r.get(k + "stock") or 0), "xfer": r.hlen(k + "xfer"),
         "xin": r.scard(k + "xin"), "orders": r.xlen(k + "orders")}
    out["sold"] += sum(int(v) for v in r.hvals(k + "buyers"))
    out["buckets"].append(b)
for t in tags:
    for xid, v in r.hgetall("{%s}:xfer" % t).items():
        dst, units = v.decode().split("\n")[:2]
        out["journal"] += 1
        out["xids"].append(xid.decode(errors="backslashreplace"))
        if not r.sismember("{%s}:xin" % tags[int(dst)], xid):
            out["in_transit"] += int(units)
out["stock"] = sum(b["stock"] for b in out["buckets"])
out["total"] = out["stock"] + out["in_transit"] + out["sold"]
print(json.dumps(out))
PY
}

sh_field() {
    "$PY" -c 'import json, sys; v = json.loads(sys.argv[1])[sys.argv[2]]; print(" ".join(v) if isinstance(v, list) else v)' "$1" "$2"
}

sh_db_sold() {
    "$PY" - "${DATABASE_URL#sqlite://}" "$CAMPAIGN" <<'PY'
import sqlite3, sys
con = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(con.execute("SELECT COALESCE(SUM(qty), 0) FROM orders WHERE campaign = ? AND status IN ('persisted', 'paid')",
                  (sys.argv[2],)).fetchone()[0])
PY
}

sh_metric() {
    local v
    v=$(curl -s "$1/metrics" | sed -n "s/^$2 \\([0-9.e+]*\\)\$/\\1/p" | head -1)
    echo "${v:-0}"
}

# sh_wait_xids_gone "XID..." BUDGET_S: until none of those transfer ids is
# in any bucket's journal (finished by its mover or by recovery).
sh_wait_xids_gone() {
    local end=$(( $(date +%s) + $2 )) st x left
    while :; do
        if st=$(sh_state); then
            left=0
            for x in $1; do case " $(sh_field "$st" xids) " in *" $x "*) left=1 ;; esac; done
            [ $left = 0 ] && return 0
        fi
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.2
    done
}

# sh_wait_accepted_at_least N BUDGET_S: until the instances have accepted
# (answered 201 or 202) N purchases, summed over their metrics: a cheap poll
# (curl), for a trigger that must fire mid-sale on a loaded machine.
sh_wait_accepted_at_least() {
    local end=$(( $(date +%s) + $2 )) u n
    while :; do
        n=0
        for u in "${SECKILLD_URLS[@]}"; do
            n=$(( n + $(sh_metric "$u" 'seckill_answers_total{answer="201"}' | cut -d. -f1) \
                  + $(sh_metric "$u" 'seckill_answers_total{answer="202"}' | cut -d. -f1) ))
        done
        [ "$n" -ge "$1" ] && return 0
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.05
    done
}

# sh_wait_sold_at_least N BUDGET_S: until N units are sold, at most
# BUDGET_S seconds of wall clock (a reading of sh_state is a Python start
# and a Cluster discovery: on a loaded machine it takes most of a second,
# so the budget is not counted in polls).
sh_wait_sold_at_least() {
    local end=$(( $(date +%s) + $2 )) st
    while :; do
        st=$(sh_state) && [ "$(sh_field "$st" sold)" -ge "$1" ] && return 0
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}

# The transfer and stranded-wait figures of every live seckilld.
sh_report_transfers() {
    local u
    for u in "${SECKILLD_URLS[@]}"; do
        curl -s -m 2 "$u/metrics" >/dev/null 2>&1 || continue
        say "$u: transfers $(sh_metric "$u" seckill_transfers_total), units $(sh_metric "$u" seckill_transfer_units_total), recovered $(sh_metric "$u" seckill_transfers_recovered_total), transfer script calls $(sh_metric "$u" seckill_transfer_script_calls_total), stranded waits $(sh_metric "$u" seckill_stranded_wait_seconds_count) (sum $(sh_metric "$u" seckill_stranded_wait_seconds_sum) s, <= 0.1 s: $(sh_metric "$u" 'seckill_stranded_wait_seconds_bucket{le="0.1"}'))"
    done
}

sh_check_final() {
    local st db bad=0
    st=$(sh_state)
    say "final state: $st"
    [ "$(sh_field "$st" k)" = "$SHARDS" ] || { say "FAILED: the campaign has $(sh_field "$st" k) buckets, not $SHARDS"; bad=1; }
    [ "$(sh_field "$st" stock)" = 0 ] || { say "FAILED: $(sh_field "$st" stock) units stranded in the buckets"; bad=1; }
    [ "$(sh_field "$st" journal)" = 0 ] || { say "FAILED: $(sh_field "$st" journal) journal entries left"; bad=1; }
    [ "$(sh_field "$st" in_transit)" = 0 ] || { say "FAILED: $(sh_field "$st" in_transit) units in transit"; bad=1; }
    [ "$(sh_field "$st" sold)" = "$STOCK" ] || { say "FAILED: Redis sold $(sh_field "$st" sold) of $STOCK"; bad=1; }
    [ "$(sh_field "$st" total)" = "$STOCK" ] || { say "FAILED: buckets + in transit + sold = $(sh_field "$st" total), stock $STOCK"; bad=1; }
    db=$(sh_db_sold)
    [ "$db" = "$STOCK" ] || { say "FAILED: the database sold $db of $STOCK"; bad=1; }
    [ $bad = 0 ] || exit 1
    say "every unit sold exactly once: $STOCK in Redis and in the database, every bucket empty, no journal entry"
}
