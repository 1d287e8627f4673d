# bench/seckill/decision_summary.py: the summary block of decision.sh, from
# its rows (round,measure,value,unit): medians over the rounds, and every
# ratio taken within one round (both sides measured in that round), then
# the median of those ratios, each beside its goal, and each ratio again
# as a SUMMARY line. A part that did not run prints nothing.
#   decision_summary.py ROWS.csv MEM_ORDERS OLD_REF
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
orders, old = int(sys.argv[2]), sys.argv[3]
by, units, summary = {}, {}, []
for x in rows:
    by.setdefault(x["measure"], {})[x["round"]] = float(x["value"])
    units[x["measure"]] = x["unit"].replace(" ", "_") or "-"


def med(m):
    v = list(by.get(m, {}).values())
    return statistics.median(v) if v else None


def rounds(m):
    return " ".join("%g" % v for v in by[m].values())


def line(label, m, unit, goal=""):
    if m in by:
        print("%-50s %10.2f %-14s rounds: %s%s" % (label, med(m), unit, rounds(m), "  goal " + goal if goal else ""))


def ratio(label, a, b, goal="", op=None, lim=None):
    if a not in by or b not in by:
        return
    rs = [by[a][k] / by[b][k] for k in by[a] if by[b].get(k)]
    if not rs:
        return
    m = statistics.median(rs)
    met = "" if op is None else ("  met" if (m <= lim if op == "<=" else m >= lim) else "  NOT met")
    print("%-50s %10.2f %-14s rounds: %s%s%s" % (label, m, "ratio", " ".join("%.2f" % r for r in rs),
                                                "  goal " + goal if goal else "", met))
    # the headline figures for the report's summary table (scripts/bench_summary.py)
    summary.append("SUMMARY name=%s value=%.2f unit=%s ref=%s ref_value=%.2f ratio=%.2f"
                   % (a, med(a), units[a], b, med(b), m))


def diff(label, a, b):
    if a in by and b in by:
        ds = [by[a][k] - by[b][k] for k in by[a] if k in by[b]]
        print("%-50s %10.2f %-14s rounds: %s" % (label, statistics.median(ds), "us", " ".join("%.2f" % d for d in ds)))


def cmds(prefix, unit):
    cs = sorted((m for m in by if m.startswith(prefix)), key=lambda m: -med(m))
    if cs:
        print("  per command (%s): %s" % (unit, ", ".join("%s %.2f" % (m[len(prefix):].upper(), med(m)) for m in cs)))


print("== Redis CPU per accepted purchase (plain server, this tree; accepted = seckilld 201+202 answers)")
line("redis us / accepted (EVALSHA+EVAL usec)", "plain_redis_us", "us", "<= 12")
cmds("plain_cmd_", "us per accepted: the scripts' redis.call and seckilld's own")
line("  of which commands (all but EVALSHA/EVAL)", "plain_inner_us", "us")
diff("  script's own overhead (EVALSHA - commands)", "plain_redis_us", "plain_inner_us")
line("  batch (accepted / EVALSHA calls)", "plain_batch", "purchases")
line("redis process CPU / accepted (INFO cpu)", "plain_redis_proc_cpu_us", "us")
line("the same with seckilld --threads 1: redis us / accepted", "plain_t1_redis_us", "us")
line("  batch, --threads 1", "plain_t1_batch", "purchases")
ratio("redis us / accepted: default loops / --threads 1", "plain_redis_us", "plain_t1_redis_us", "<= 1.1", "<=", 1.1)
ratio("  the same by process CPU", "plain_redis_proc_cpu_us", "plain_t1_redis_proc_cpu_us", "<= 1.1", "<=", 1.1)
line("same run, %s: redis us / accepted" % old, "old_plain_redis_us", "us")
line("same run, %s: redis process CPU / accepted" % old, "old_plain_redis_proc_cpu_us", "us")
line("same run, %s: batch" % old, "old_plain_batch", "purchases")
print("== native floor (the accepted path's data commands, plain pipelined, emptied server)")
line("floor us / purchase", "floor_us", "us")
cmds("floor_cmd_", "us per purchase")
line("script us / accepted (same rounds)", "plain_redis_us", "us")
diff("script - floor (what the script adds)", "plain_redis_us", "floor_us")
print("== Redis memory per order (%d orders, no persister)" % orders)
line("used_memory delta / order", "mem_bytes_per_order", "B", "<= 200")
for part, m in (("order status (its hash field)", "mem_order_status"), ("stream entry", "mem_stream"), ("buyer record", "mem_buyers")):
    line("  " + part + " (MEMORY USAGE)", m, "B")
if "mem_bytes_per_order" in by:
    parts = [med(m) or 0 for m in ("mem_order_status", "mem_stream", "mem_buyers")]
    rest = med("mem_bytes_per_order") - sum(parts)
    print("%-50s %10.2f %-14s" % ("  rest (keyspace tables, campaign keys)", rest, "B"))
    line("  keys per order", "mem_keys_per_order", "keys")
    b = med("mem_bytes_per_order")
    print("  a sale of N units needs: " + ", ".join("N=%s %.1f MiB" % (f"{n:,}", n * b / 2**20)
                                                   for n in (10**5, 10**6, 10**7)))
print("== acknowledgement cost (master + 1 replica on loopback; acks 1 = WAIT per batch, 201)")
line("engine decisions/s, --replica-acks 1", "engine_acks1_decisions_per_s", "/s")
line("engine decisions/s, --replica-acks 0", "engine_acks0_decisions_per_s", "/s")
ratio("engine acks 1 / acks 0", "engine_acks1_decisions_per_s", "engine_acks0_decisions_per_s", ">= 0.9", ">=", 0.9)
line("HTTP accepted/s, --replica-acks 1", "replica_acks1_accepted_per_s", "/s")
line("  answered 201 (share of accepted)", "replica_acks1_share_201", "")
line("HTTP accepted/s, --replica-acks 0", "replica_acks0_accepted_per_s", "/s")
ratio("HTTP acks 1 / acks 0", "replica_acks1_accepted_per_s", "replica_acks0_accepted_per_s", ">= 0.9", ">=", 0.9)
print("== HTTP accepted purchases/s against %s (wrk -t2 -c64, same rounds, interleaved)" % old)
line("plain server, this tree", "plain_accepted_per_s", "/s")
line("plain server, " + old, "old_plain_accepted_per_s", "/s")
ratio("plain: this tree / " + old, "plain_accepted_per_s", "old_plain_accepted_per_s", ">= 1.0 (no worse)", ">=", 1.0)
line("replica (acks 1), this tree", "replica_acks1_accepted_per_s", "/s")
line("replica (acks 1), " + old, "old_replica_acks1_accepted_per_s", "/s")
line("  answered 201 (share of accepted), " + old, "old_replica_acks1_share_201", "")
line("  batch, this tree", "replica_acks1_batch", "purchases")
line("  batch, " + old, "old_replica_acks1_batch", "purchases")
ratio("replica: this tree / " + old, "replica_acks1_accepted_per_s", "old_replica_acks1_accepted_per_s",
      ">= 1.0 (no worse)", ">=", 1.0)
print("== seckilld CPU per purchase against nginx `return 200` (perf task-clock, wrk -t1 -c64)")
line("seckilld --threads 1", "cpu_seckilld_t1_us", "us CPU")
line("seckilld --threads 2", "cpu_seckilld_t2_us", "us CPU")
line("nginx", "cpu_nginx_us", "us CPU")
line("same run, %s --threads 1" % old, "cpu_old_t1_us", "us CPU")
ratio("threads 1 / %s threads 1" % old, "cpu_seckilld_t1_us", "cpu_old_t1_us", "<= 1.0 (no worse)", "<=", 1.0)
ratio("threads 1 / nginx", "cpu_seckilld_t1_us", "cpu_nginx_us", "<= 1.3", "<=", 1.3)
ratio("threads 2 / nginx", "cpu_seckilld_t2_us", "cpu_nginx_us", "<= 1.5", "<=", 1.5)
print("== Cluster per-bucket cost (3 masters, K = 3 buckets, usec summed over the masters)")
line("cluster redis us / accepted", "cluster_k3_redis_us", "us")
cmds("cluster_k3_cmd_", "us per accepted")
line("cluster batch (accepted / EVALSHA calls)", "cluster_k3_batch", "purchases")
line("cluster redis process CPU / accepted", "cluster_k3_redis_proc_cpu_us", "us")
line("cluster HTTP accepted/s", "cluster_k3_accepted_per_s", "/s")
ratio("cluster / plain server (same round)", "cluster_k3_redis_us", "plain_redis_us", "<= 1.1", "<=", 1.1)
ratio("  the same by process CPU", "cluster_k3_redis_proc_cpu_us", "plain_redis_proc_cpu_us")
if summary:
    print("\n".join(summary))
