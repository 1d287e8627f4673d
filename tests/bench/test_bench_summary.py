#!/usr/bin/python3
"""test_bench_summary.py SOURCE_DIR: scripts/bench_summary.py, the summary
table of docs/BENCHMARKS.md, on a small fixture of script outputs: every
SUMMARY line becomes a row with its figures as printed (the rest of the
output is ignored), a failed script and one without SUMMARY lines get a
row saying so, a malformed SUMMARY line is refused (exit 2); and every
benchmark script scripts/bench.sh runs prints SUMMARY lines."""
import os
import re
import subprocess
import sys
import tempfile

src = sys.argv[1]
gen = os.path.join(src, "scripts/bench_summary.py")
FAILS = []


def check(cond, what):
    print("%s %s" % ("PASS" if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)


def run(outputs):
    """bench_summary.py over {script: (output text, exit status)}: (rc, stdout, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        manifest = os.path.join(d, "manifest")
        with open(manifest, "w") as m:
            for i, (script, (text, rc)) in enumerate(outputs.items()):
                path = os.path.join(d, "%d.out" % i)
                with open(path, "w") as f:
                    f.write(text)
                m.write("%s|%s|%d\n" % (script, path, rc))
        p = subprocess.run([sys.executable, gen, manifest], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr


# the tail of a run_bench.sh and of an acks.sh output, as they print them
lock = """scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us
uncontended,5824,6031,0.996,153.6,382.9
# uncontended / ping_2rtt_limit: median 0.689 (runs: 0.68 0.69 0.64 0.78 0.89)
SUMMARY name=lock_uncontended value=5824 unit=ops/s ref=ping_2rtt_limit ref_value=8287 ratio=0.689
SUMMARY name=lock_uncontended value=5824 unit=ops/s ref=redis_py_uncontended ref_value=3460 ratio=1.563
# load after: 1.39 0.85 0.60
"""
acks = """cost_inflight_1,per_round 29.1% 40.7%,median 29.1 %
SUMMARY name=acks_on_inflight_128 value=69111 unit=decisions/s ref=acks_off ref_value=81495 ratio=0.848
"""
rc, out, err = run({"bench/dlock-bench/run_bench.sh": (lock, 0), "bench/seckill/acks.sh": (acks, 0),
                    "bench/seckill/decision.sh": ("", 2), "bench/seckill/cluster.sh": ("no summary here\n", 0)})
check(rc == 0, "the table is made (exit %d %s)" % (rc, err))
check(out.startswith("## Summary\n"), "it is a section of its own")
check("| `bench/dlock-bench/run_bench.sh` | lock_uncontended | 5824 | ops/s | ping_2rtt_limit | 8287 | 0.689 |" in out,
      "a figure, its same-run reference and ratio, as printed")
check("| redis_py_uncontended | 3460 | 1.563 |" in out, "every SUMMARY line of a script is a row")
check("| `bench/seckill/acks.sh` | acks_on_inflight_128 | 69111 | decisions/s | acks_off | 81495 | 0.848 |" in out,
      "rows in report order, from each script's own output")
check("`bench/seckill/decision.sh` | **no figures: failed (exit status 2)**" in out, "a failed script says so")
check("`bench/seckill/cluster.sh` | **no figures: printed no SUMMARY line**" in out, "a silent script says so")
check(out.index("run_bench.sh") < out.index("acks.sh") < out.index("decision.sh"), "the manifest's order")
check(len([ln for ln in out.splitlines() if ln.startswith("| `")]) == 5, "no other rows: %s" % out)
rc, out, err = run({"bench/seckill/run.sh": ("SUMMARY name=x value=1 unit=/s ref=y ratio=2\n", 0)})
check(rc != 0 and "missing ref_value" in err, "a SUMMARY line without a field is refused: %d %s" % (rc, err))
rc, out, err = run({"bench/seckill/run.sh": ("SUMMARY name=x value=1 unit=/s ref=y ref_value=2 ratio=2 z=3\n", 0)})
check(rc != 0 and "bad field" in err, "a SUMMARY line with an unknown field is refused")
rc, out, err = run({"bench/seckill/run.sh": (acks, 1)})
check(rc == 0 and "exit status 1: the figures above are partial" in out, "figures of a failed run are marked")
# every script bench.sh runs prints SUMMARY lines (itself or through its helper)
bench_sh = open(os.path.join(src, "scripts/bench.sh")).read()
for script in sorted(set(re.findall(r"bench/[a-z-]+/[a-z_]+\.sh", bench_sh))):
    text = open(os.path.join(src, script)).read()
    for helper in re.findall(r"bench/seckill/[a-z_]+\.py", text):
        text += open(os.path.join(src, helper)).read()
    check("SUMMARY name=" in text, "%s prints SUMMARY lines" % script)
sys.exit(1 if FAILS else 0)
