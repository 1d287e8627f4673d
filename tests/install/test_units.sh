#!/bin/bash
# test_units.sh: the systemd units of etc/systemd/ against the programs and
# the packaging, without a running systemd: every ExecStart program is one
# we build and package, every flag it passes is in that program's --help,
# every file it names is shipped (the config file and the environment
# file's example, at the paths cmake/packaging.cmake installs them), every
# path the service writes (the example DATABASE_URL's directory, the metrics
# collector's directory) is writable under its ProtectSystem=strict sandbox
# (StateDirectory= or ReadWritePaths=), PostgreSQL is After= but never
# Wants=/Requires=, the three seckill services agree on user, environment
# and state directory, the user is created by the .deb's postinst, and the
# config path is the same everywhere (units, example, man page, packaging).
# Then `systemd-analyze verify` (when installed) on copies running the
# build's programs: no message at all is accepted; the same for
# etc/dlock-singleton@.service (dlock --standby), with its dlock options
# checked against dlock's --help.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-units-XXXXXX")
trap 'rm -rf "$work"' EXIT
for p in seckilld seckill-persist seckill; do "$build/tools/$p/$p" --help >"$work/$p.help"; done
"$PY" - "$src" "$build" "$work" <<'PY'
import os, re, shlex, sys
src, build, work = sys.argv[1:4]
udir = os.path.join(src, "etc/systemd")
pack = open(os.path.join(src, "cmake/packaging.cmake")).read()
postinst = open(os.path.join(src, "cmake/debian/seckill.postinst")).read()
bad = []

def unit(path):
    d, sec = {}, None
    for line in open(path):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            sec = line.strip("[]")
            continue
        k, v = line.split("=", 1)
        d.setdefault((sec, k), []).append(v)
    return d

# where the packaging installs a file of etc/ (install(FILES ... DESTINATION /etc/dlock))
m = re.search(r"install\(FILES ([^)]*?)\s+DESTINATION (/\S+) COMPONENT seckill", pack)
shipped = {os.path.join(m.group(2), os.path.basename(f)) for f in m.group(1).split()}
packaged_bins = set(re.findall(r"(\S+?):(?:tools|seckill)\b", pack.split("# --- programs")[1].split("# ---")[0]))
bin_of = {"seckilld": "seckilld", "seckill-persist": "seckill-persist", "seckill": "seckill_admin"}

services = sorted(f for f in os.listdir(udir) if f.endswith(".service"))
seckill_units = {}
for name in services:
    u = unit(os.path.join(udir, name))
    svc = lambda k: u.get(("Service", k), [])
    (cmd,) = svc("ExecStart")
    argv = shlex.split(cmd)
    if argv[:2] == ["/bin/sh", "-c"]:
        shell = argv[2]
        progs = re.findall(r"(/usr/local/bin/\S+)((?: [a-z][a-z-]*| --?[a-z][a-z-]*(?: \S+)?)*)", shell)
        written = re.findall(r"\bd=(/\S+?);", shell)
    else:
        progs = [(argv[0], " " + " ".join(shlex.quote(a) for a in argv[1:]))]
        written = []
    for prog, args in progs:
        p = os.path.basename(prog)
        if not prog.startswith("/usr/local/bin/") or p not in bin_of:
            bad.append("%s: ExecStart runs %s, not one of our programs in /usr/local/bin" % (name, prog))
            continue
        if bin_of[p] not in packaged_bins:
            bad.append("%s: %s is not packaged (cmake/packaging.cmake)" % (name, p))
        helptext = open(os.path.join(work, p + ".help")).read()
        a = shlex.split(args)
        for i, w in enumerate(a):
            if w.startswith("-") and not re.search(r"(^|[\s,])%s\b" % re.escape(w.split("=")[0]), helptext):
                bad.append("%s: %s %s is not in its --help" % (name, p, w))
            if not w.startswith("-") and i == 0 and p == "seckill" and not re.search(r"^\s+%s\b" % w, helptext, re.M):
                bad.append("%s: seckill has no command %s" % (name, w))
            if w == "--config":
                path = a[i + 1]
                if "%i" in path:
                    if os.path.dirname(path) + "/seckilld.conf" not in shipped:
                        bad.append("%s: per-instance configs %s not beside the shipped example" % (name, path))
                elif path not in shipped:
                    bad.append("%s: --config %s is not a file the package ships (%s)" % (name, path, sorted(shipped)))
    env = None
    for e in svc("EnvironmentFile"):
        e = e.lstrip("-")
        if e + ".example" not in shipped:
            bad.append("%s: EnvironmentFile %s: no %s.example shipped" % (name, e, e))
        env = os.path.join(src, "etc/systemd", os.path.basename(e) + ".example")
    # what the service writes: the example database's directory, the shell's output directory
    if env and os.path.exists(env):
        for line in open(env):
            mm = re.match(r"DATABASE_URL=(?:sqlite://)?(/\S+)", line.strip())
            if mm:
                written.append(os.path.dirname(mm.group(1)))
    if svc("ProtectSystem") == ["strict"]:
        writable = ["/var/lib/" + d for s in svc("StateDirectory") for d in s.split()]
        writable += [w.lstrip("-") for s in svc("ReadWritePaths") for w in s.split()]
        for w in written:
            if not any(w == x or w.startswith(x + "/") for x in writable):
                bad.append("%s: writes %s, not writable under ProtectSystem=strict (writable: %s)" % (name, w, writable))
    elif written:
        bad.append("%s: no ProtectSystem=strict" % name)
    after = " ".join(u.get(("Unit", "After"), [])).split()
    hard = " ".join(u.get(("Unit", "Wants"), []) + u.get(("Unit", "Requires"), [])).split()
    if "postgresql.service" not in after:
        bad.append("%s: not After=postgresql.service" % name)
    if "postgresql.service" in hard:
        bad.append("%s: pulls in postgresql.service (SQLite hosts need none): After= only" % name)
    user = svc("User")
    if not user or not re.search(r"adduser --system .*\b%s\b" % re.escape(user[0]), postinst):
        bad.append("%s: User=%s is not created by the .deb's postinst" % (name, user))
    if not re.search(r"adduser", open(os.path.join(udir, name)).read()):
        bad.append("%s: the unit does not say how its user is created" % name)
    seckill_units[name] = (tuple(user), tuple(svc("EnvironmentFile")), tuple(svc("StateDirectory")))
if len(set(seckill_units.values())) != 1:
    bad.append("the seckill units disagree on User / EnvironmentFile / StateDirectory: %s" % seckill_units)

# one config path everywhere
conf = "/etc/dlock/seckilld.conf"
if conf not in shipped:
    bad.append("the package does not install %s" % conf)
for rel in ["etc/seckilld.conf", "tools/seckilld/seckilld.8", "etc/systemd/seckilld.service", "docs/seckill.md"]:
    text = open(os.path.join(src, rel)).read().replace("\\-", "-")
    if rel != "docs/seckill.md" and conf not in text:
        bad.append("%s does not name %s" % (rel, conf))
for root, dirs, files in os.walk(src):
    dirs[:] = [d for d in dirs if d not in (".git", "build")]
    for f in files:
        if f.endswith((".md", ".8", ".1", ".3", ".service", ".conf", ".cmake", ".txt", ".c", ".h", ".sh", ".example")):
            path = os.path.join(root, f)
            text = open(path, errors="replace").read().replace("\\-", "-")
            if f != "test_units.sh" and re.search(r"(?:^|[\s'\"`(=])/etc/seckilld\.conf", text, re.M):
                bad.append("%s names /etc/seckilld.conf (the path is %s)" % (os.path.relpath(path, src), conf))
# a unit mentioned anywhere in etc/ or docs/ is shipped
for rel in ["etc", "docs", "tools"]:
    for root, dirs, files in os.walk(os.path.join(src, rel)):
        for f in files:
            for mu in re.findall(r"\b(seckill[\w@.-]*\.(?:service|timer))", open(os.path.join(root, f), errors="replace").read()):
                if mu not in os.listdir(udir) and not (("@" in mu) and re.sub(r"@[^.]+\.", "@.", mu) in os.listdir(udir)):
                    bad.append("%s mentions %s, which is not shipped" % (os.path.relpath(os.path.join(root, f), src), mu))
if bad:
    print("\n".join("FAIL: " + b for b in sorted(set(bad))))
    sys.exit(1)
print("units: %d services checked against the programs, the packaging and the sandbox" % len(services))
PY

# without systemd-analyze the test is skipped (failed in CI: the package is listed)
dl_need_tool systemd-analyze systemd
mkdir "$work/units"
for f in "$src"/etc/systemd/*.service "$src"/etc/systemd/*.timer; do
    sed -e "s|/usr/local/bin/seckilld|$build/tools/seckilld/seckilld|" \
        -e "s|/usr/local/bin/seckill-persist|$build/tools/seckill-persist/seckill-persist|" \
        -e "s|/usr/local/bin/seckill |$build/tools/seckill/seckill |" "$f" >"$work/units/$(basename "$f")"
done
cd "$work/units"
units=$(ls ./*.service ./*.timer | grep -v '@\.service$')
# shellcheck disable=SC2086
if ! systemd-analyze verify $units "$PWD/seckilld@a.service" >"$work/verify.log" 2>&1 || [ -s "$work/verify.log" ]; then
    cat "$work/verify.log" >&2
    echo "FAIL: systemd-analyze verify" >&2
    exit 1
fi
echo "systemd-analyze verify: $(echo $units | wc -w) units and seckilld@a.service, no message"

# dlock-singleton@.service (etc/, the dlock-tools package): the dlock
# options it passes are in dlock's --help, the packaging installs it, and
# systemd-analyze verify says nothing about an instance running the build's dlock.
"$build/tools/dlock/dlock" --help >"$work/dlock.help"
for opt in $(grep '^ExecStart=' "$src/etc/dlock-singleton@.service" | grep -o -- ' --[a-z-]*'); do
    grep -q -- "$opt" "$work/dlock.help" || { echo "FAIL: dlock-singleton@.service: dlock $opt is not in its --help" >&2; exit 1; }
done
grep -q 'dlock-singleton@.service DESTINATION ${deb_unitdir}' "$src/cmake/packaging.cmake" ||
    { echo "FAIL: cmake/packaging.cmake does not install dlock-singleton@.service" >&2; exit 1; }
sed "s|/usr/local/bin/dlock|$build/tools/dlock/dlock|" "$src/etc/dlock-singleton@.service" >"$work/units/dlock-singleton@billing.service"
if ! systemd-analyze verify "$work/units/dlock-singleton@billing.service" >"$work/verify.log" 2>&1 || [ -s "$work/verify.log" ]; then
    cat "$work/verify.log" >&2
    echo "FAIL: systemd-analyze verify dlock-singleton@billing.service" >&2
    exit 1
fi
echo "dlock-singleton@billing.service: options in dlock --help, packaged, verified"
