#!/usr/bin/python3
"""bench_summary.py: the summary table at the top of docs/BENCHMARKS.md,
from what the benchmark scripts printed in this run (scripts/bench.sh).
Every figure comes from a line a script printed,

  SUMMARY name=<figure> value=<v> unit=<u> ref=<reference> ref_value=<v> ratio=<v>

(the reference measured by the same script in the same run, the ratio as
the script computed it), never typed in by hand. A script that failed
or printed no SUMMARY line gets a row that says so.

  bench_summary.py MANIFEST

MANIFEST: one line per script run, `script|output file|exit status`, in
report order. Prints the Markdown section; exit 2 on a malformed SUMMARY
line (a script that prints one is broken, the table must not guess)."""
import sys

FIELDS = ("name", "value", "unit", "ref", "ref_value", "ratio")


def parse(line):
    """The fields of one SUMMARY line; ValueError when one is missing or extra."""
    got = {}
    for tok in line.split()[1:]:
        key, sep, val = tok.partition("=")
        if not sep or key not in FIELDS or key in got or not val:
            raise ValueError("bad field %r" % tok)
        got[key] = val
    missing = [f for f in FIELDS if f not in got]
    if missing:
        raise ValueError("missing " + ", ".join(missing))
    return got


def rows_of(script, path, rc):
    """Table rows (lists of cells) for one script's output."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.startswith("SUMMARY ")]
    except OSError:
        lines = []
    out = []
    for ln in lines:
        try:
            s = parse(ln)
        except ValueError as e:
            raise SystemExit("bench_summary.py: %s: %s: %s" % (script, e, ln))
        out.append(["`%s`" % script, s["name"], s["value"], s["unit"].replace("_", " "), s["ref"],
                    s["ref_value"], s["ratio"]])
    if not out:
        why = "failed (exit status %s)" % rc if rc != "0" else "printed no SUMMARY line"
        out.append(["`%s`" % script, "**no figures: %s**" % why, "", "", "", "", ""])
    elif rc != "0":
        out.append(["`%s`" % script, "**exit status %s: the figures above are partial**" % rc, "", "", "", "", ""])
    return out


def main(argv):
    if len(argv) != 1:
        raise SystemExit(__doc__.split("\n\n")[2])
    print("## Summary")
    print()
    print("The headline figures of this run, each printed by its script as a `SUMMARY` line, beside the")
    print("reference the same script measured in the same run, and their ratio as the script computed it")
    print("(the median of its round-by-round ratios where it measures both in each round): the ratio")
    print("carries from one machine to another better than either figure. Each script's whole output")
    print("follows.")
    print()
    print("| script | figure | value | unit | same-run reference | reference | ratio |")
    print("|---|---|---:|---|---|---:|---:|")
    with open(argv[0]) as f:
        for line in f:
            if not line.strip():
                continue
            script, path, rc = line.rstrip("\n").split("|")
            for r in rows_of(script, path, rc):
                print("| " + " | ".join(r) + " |")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
