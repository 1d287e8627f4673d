#!/bin/bash
# test_alert_rules.sh: Prometheus's own tool proves the ops pack.
# 1. `promtool check rules` accepts docs/ops/alerts.yml;
# 2. every alert there has a unit test in alerts_test.yml where it fires and
#    one where it stays quiet, and `promtool test rules` passes them all;
# 3. every PromQL expression of docs/ops/grafana-dashboard.json, emitted as
#    a recording rule, passes `promtool check rules`.
# DLOCK_ALERTS_FILE / DLOCK_DASHBOARD_FILE check other copies (used to show
# that a broken rule fails this test).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
alerts=${DLOCK_ALERTS_FILE:-$src/docs/ops/alerts.yml}
dashboard=${DLOCK_DASHBOARD_FILE:-$src/docs/ops/grafana-dashboard.json}
command -v promtool >/dev/null || { echo "FAIL: promtool not found (Debian package prometheus)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-promtool-XXXXXX")
trap 'rm -rf "$work"' EXIT

promtool check rules "$alerts"

# Each alert: at least one test where it fires and one where it does not.
/usr/bin/python3 - "$alerts" "$src/tests/ops/alerts_test.yml" <<'PY'
import sys, yaml
rules = [r["alert"] for g in yaml.safe_load(open(sys.argv[1]))["groups"]
         for r in g["rules"] if "alert" in r]
fires, quiet = set(), set()
for t in yaml.safe_load(open(sys.argv[2]))["tests"]:
    for a in t.get("alert_rule_test", []):
        (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
missing = ["%s (%s)" % (r, k) for r in rules
           for k, s in (("firing", fires), ("not firing", quiet)) if r not in s]
unknown = sorted((fires | quiet) - set(rules))
assert not missing, "alerts without a test: %s" % ", ".join(missing)
assert not unknown, "tests of alerts that do not exist: %s" % ", ".join(unknown)
print("alert tests: %d alerts, each tested firing and not firing" % len(rules))
PY
cp "$alerts" "$work/alerts.yml"
cp "$src/tests/ops/alerts_test.yml" "$work/alerts_test.yml"
promtool test rules "$work/alerts_test.yml"

# Dashboard expressions as recording rules (Grafana's interval variables
# replaced by a plain range; any other variable is left to fail the parse).
/usr/bin/python3 - "$dashboard" "$work/dashboard-rules.yml" <<'PY'
import json, sys
def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))
exprs = [t["expr"] for p in panels(json.load(open(sys.argv[1]))["panels"])
         for t in p.get("targets", []) if t.get("expr")]
assert len(exprs) >= 10, "dashboard: only %d expressions found" % len(exprs)
for v in ("$__rate_interval", "$__interval", "$__range"):
    exprs = [e.replace(v, "5m") for e in exprs]
rules = [{"record": "dashboard:expr_%02d" % i, "expr": e} for i, e in enumerate(exprs)]
json.dump({"groups": [{"name": "grafana-dashboard", "rules": rules}]}, open(sys.argv[2], "w"), indent=1)
print("dashboard: %d expressions" % len(exprs))
PY
promtool check rules "$work/dashboard-rules.yml"
echo "alert rules: check, unit tests and dashboard expressions passed"
