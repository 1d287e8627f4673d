#!/bin/bash
# test_deb.sh: the Debian packages (cmake/packaging.cmake) on this machine,
# as root: build them, `dpkg -i` them, use what they installed (a consumer
# compiled through pkg-config and find_package, `dlock --version`,
# `seckilld --help`, the documents the man pages name, seckilld started
# from its unit's ExecStart line against a private redis-server),
# `systemd-analyze verify` the units, then
# `dpkg -r` (conffiles stay), `dpkg -P` (they go) and compare the file
# system with its state before: nothing of ours may be left. The packages
# are purged on every exit, failed or not. Not in the default suite: label
# package, run with DLOCK_TEST_PACKAGE=1 (.ci/run does, in its own step).
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
pkgs=(seckill dlock-tools libdlock-dev libdlock1)   # removal order
fail() { echo "FAIL [deb]: $*" >&2; exit 1; }
ok() { echo "ok   [deb] $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i / dpkg -P)"
command -v dpkg-deb >/dev/null || fail "dpkg not found: a Debian machine is needed"

installed() { local s; s=$(dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null) && grep -q ' installed$' <<<"$s"; }
known() { local s; s=$(dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null) && grep -qv 'not-installed$' <<<"$s"; }
for p in "${pkgs[@]}"; do
    known "$p" && fail "$p is already on this machine (not ours to remove): dpkg -P $p first"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-deb-XXXXXX")
chmod 755 "$work"
# dpkg_retry ARGS...: dpkg, waiting for another dpkg/apt run to let go of its lock.
dpkg_retry() {
    local i out
    for i in $(seq 1 30); do
        if out=$(dpkg "$@" 2>&1); then printf '%s\n' "$out"; return 0; fi
        printf '%s' "$out" | grep -q 'lock' || { printf '%s\n' "$out" >&2; return 1; }
        sleep 2
    done
    printf '%s\n' "$out" >&2
    return 1
}
purge_all() {
    local p left=()
    for p in "${pkgs[@]}"; do known "$p" && left+=("$p"); done
    [ ${#left[@]} -eq 0 ] || dpkg_retry -P "${left[@]}" >/dev/null
}
trap 'dl_cleanup; purge_all || echo "deb: could not purge ${pkgs[*]}: remove them by hand" >&2; rm -rf "$work"' EXIT

# Every path under these trees, but the package manager's own state.
snapshot() {
    find /usr /etc /var/lib /opt -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt \
        -o -path /var/lib/systemd -o -path /var/lib/ucf -o -path '/var/lib/*/*' \) -prune -o -print \
        2>/dev/null | sort
}
snapshot >"$work/before.txt"
cp /etc/passwd "$work/passwd.before"

# --- build and install -----------------------------------------------------------
cmake --build "$build" --target package >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log" >&2; fail "cpack"; }
debs=()
for p in libdlock1 libdlock-dev dlock-tools seckill; do
    f=$(ls "$build"/deb/"${p}"_*.deb 2>/dev/null | head -n 1)
    [ -n "$f" ] || fail "no package $p in $build/deb"
    debs+=("$f")
done
ok "built: $(cd "$build/deb" && ls ./*.deb | tr '\n' ' ')"
if ! dpkg_retry -i "${debs[@]}" >"$work/dpkg-i.log"; then
    echo "deb: dependencies missing, apt-get -f install" >&2
    DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq -o DPkg::Lock::Timeout=60 >>"$work/dpkg-i.log" 2>&1 ||
        { cat "$work/dpkg-i.log" >&2; fail "apt-get -f install"; }
fi
for p in "${pkgs[@]}"; do installed "$p" || fail "$p not installed after dpkg -i"; done
ok "dpkg -i: ${pkgs[*]} installed"
for p in "${pkgs[@]}"; do dpkg -L "$p"; done | sort -u >"$work/owned.txt"

# --- the library, from the installed headers --------------------------------------
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/consumer_pc" "$src/tests/install/consumer.c" \
    $(pkg-config --cflags --libs dlock) || fail "consumer does not build with pkg-config"
deps=$(ldd "$work/consumer_pc")   # whole, then matched: grep -q closing the pipe fails it under pipefail
grep -Eq "libdlock.so.1 => (/usr)?/lib/[^ ]*libdlock.so.1 " <<<"$deps" ||
    fail "consumer does not load the packaged libdlock: $(grep dlock <<<"$deps")"
"$work/consumer_pc" >/dev/null || fail "pkg-config consumer failed"
cmake -S "$src/tests/install/cmake-consumer" -B "$work/cm" >/dev/null &&
    cmake --build "$work/cm" >/dev/null || fail "consumer does not build with find_package(dlock)"
"$work/cm/consumer_shared" >/dev/null && "$work/cm/consumer_static" >/dev/null ||
    fail "find_package consumers failed"
ok "consumer built with pkg-config ($(pkg-config --modversion dlock)) and find_package, both ran"

# --- the programs -------------------------------------------------------------------
ver=$(dpkg-query -W -f='${Version}' dlock-tools)
out=$(/usr/bin/dlock --version) || fail "dlock --version exited non-zero"
[ "$out" = "dlock ${ver%-*}" ] || fail "dlock --version: '$out', want 'dlock ${ver%-*}'"
help=$(/usr/bin/seckilld --help) || fail "seckilld --help exited non-zero"
grep -q '^usage: seckilld' <<<"$help" || fail "seckilld --help does not start with its usage line"
for m in $(grep '/usr/share/man/.*\.gz$' "$work/owned.txt"); do
    zgrep -q '^\.TH ' "$m" || fail "$m is not a man page"
done
ok "dlock --version ($out), seckilld --help, man pages: $(grep -c '/usr/share/man/.*\.gz$' "$work/owned.txt")"
# The documents the man pages send readers to are installed: every
# /usr/share/doc/... path an installed page names exists, and each package
# has its documents and README.md.
docs=0
for m in $(grep '/usr/share/man/.*\.gz$' "$work/owned.txt"); do
    for d in $(zcat "$m" | sed 's/\\-/-/g; s/\\f[BIRP]//g' | grep -oE '/usr/share/doc/[A-Za-z0-9._/-]*[A-Za-z0-9/]' | sort -u); do
        [ -e "$d" ] || fail "$m names $d, which no package installed"
        docs=$((docs + 1))
    done
done
[ "$docs" -ge 10 ] || fail "the man pages name only $docs installed documents"
for f in seckill/http-api.md seckill/ops/README.md seckill/ops/alerts.yml seckill/design/promise.md \
         dlock-tools/cli.md libdlock-dev/locks.md libdlock-dev/locks-family.md \
         seckill/README.md dlock-tools/README.md libdlock-dev/README.md; do
    grep -qx "/usr/share/doc/$f" "$work/owned.txt" || fail "/usr/share/doc/$f is not in a package"
done
dpkg-query -W -f='${Description}\n' dlock-tools | grep -q etcd || fail "dlock-tools' description does not name etcd"
ok "documents: the $docs /usr/share/doc paths the man pages name are installed"

# --- seckilld from its unit: its user, its environment example, its sandbox -------
# No systemd runs here, so the unit's sandbox is rebuilt from its lines in a
# private mount namespace (unshare -m): ProtectSystem=strict makes every
# mount read-only but /dev, /proc, /sys; StateDirectory= creates
# /var/lib/<dir> owned by User= and leaves it writable; PrivateTmp= gets a
# fresh /tmp. seckilld then runs the example's own DATABASE_URL
# (/var/lib/seckill/orders.db); only REDIS_URL and the port are ours.
unit=/lib/systemd/system/seckilld.service
[ -f "$unit" ] || fail "$unit not installed"
exec_line=$(sed -n 's/^ExecStart=//p' "$unit")
user=$(sed -n 's/^User=//p' "$unit")
envfile=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit")
states=$(sed -n 's/^StateDirectory=//p' "$unit")
[ "$(sed -n 's/^ProtectSystem=//p' "$unit")" = strict ] || fail "$unit: not ProtectSystem=strict"
grep -qx 'PrivateTmp=yes' "$unit" || fail "$unit: no PrivateTmp=yes"
read -ra cmd <<<"$exec_line"
grep -Fqx "${cmd[0]}" "$work/owned.txt" || fail "ExecStart runs ${cmd[0]}, which the packages do not install"
[ -f "$envfile.example" ] || fail "no example of $envfile installed"
getent passwd "$user" >/dev/null || fail "unit user $user was not created by postinst"
made_state=()
for d in $states; do
    [ -e "/var/lib/$d" ] || made_state+=("/var/lib/$d")
    install -d -o "$user" -g "$user" -m 0755 "/var/lib/$d"
done
sandbox_sh='
mount --make-rprivate /
for m in $(awk "{print \$5}" /proc/self/mountinfo | sort -u); do
    case $m in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue ;; esac
    mount -o remount,bind,ro "$m" 2>/dev/null || true
done
for d in $STATES; do mount --bind "/var/lib/$d" "/var/lib/$d" && mount -o remount,bind,rw "/var/lib/$d"; done
mount -t tmpfs tmpfs /tmp
exec "$@"'
dl_start_redis "$work"
port=$(dl_free_port)
(
    set -a
    # shellcheck disable=SC1090
    . "$envfile.example"
    REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
    SECKILL_PORT=$port
    SECKILL_BIND=127.0.0.1
    set +a
    STATES=$states exec unshare -m sh -c "$sandbox_sh" sandbox \
        setpriv --reuid="$user" --regid="$user" --init-groups "${cmd[@]}"
) >"$work/seckilld.log" 2>&1 &
sk_pid=$!
dl_track "$sk_pid"
dl_wait_http "http://127.0.0.1:$port/healthz" 100 ||
    { cat "$work/seckilld.log" >&2; fail "seckilld from '$exec_line' in the unit's sandbox did not answer /healthz"; }
health=$(curl -s "http://127.0.0.1:$port/healthz")
pid=$(pgrep -P "$sk_pid" -x seckilld || echo "$sk_pid")
[ "$(ps -o user= -p "$pid")" = "$user" ] || fail "seckilld does not run as $user"
db=$(sed -n 's|^DATABASE_URL=sqlite://||p' "$envfile.example")
[ -n "$db" ] && [ "$(stat -c %U "$db" 2>/dev/null)" = "$user" ] ||
    fail "the example's database $db was not created by $user in the sandbox"
kill -TERM "$sk_pid"
rc=0
wait "$sk_pid" || rc=$?
[ "$rc" = 0 ] || fail "seckilld exited $rc on SIGTERM (the unit's KillSignal)"
[ ${#made_state[@]} -eq 0 ] || rm -rf "${made_state[@]}"
ok "seckilld from ExecStart ($exec_line) as $user, ProtectSystem=strict + StateDirectory=$states: database $db, /healthz $health; SIGTERM: exit 0"

# --- systemd's own check of the installed units --------------------------------------
if command -v systemd-analyze >/dev/null; then
    units=$(grep '^/lib/systemd/system/' "$work/owned.txt" | grep -E '\.(service|timer)$')
    # shellcheck disable=SC2086
    if ! systemd-analyze verify $units >"$work/verify.log" 2>&1; then
        cat "$work/verify.log" >&2
        fail "systemd-analyze verify"
    fi
    [ -s "$work/verify.log" ] && sed 's/^/     /' "$work/verify.log"
    ok "systemd-analyze verify: $(echo $units | wc -w) units"
elif [ "${CI:-}" = true ]; then
    fail "systemd-analyze (Debian package systemd, scripts/debian-packages.txt) is missing in CI"
else
    echo "note [deb] systemd-analyze not installed: units not verified (in CI this fails)"
fi

# --- remove: conffiles stay; purge: everything goes ----------------------------------
dpkg_retry -r "${pkgs[@]}" >/dev/null
for p in "${pkgs[@]}"; do installed "$p" && fail "$p still installed after dpkg -r"; done
[ -f /etc/dlock/seckilld.conf ] || fail "dpkg -r removed the conffile /etc/dlock/seckilld.conf"
[ -e /usr/bin/seckilld ] && fail "dpkg -r left /usr/bin/seckilld"
ok "dpkg -r: programs gone, conffiles kept ($(dpkg-query -W -f='${db:Status-Abbrev}' seckill))"
dpkg_retry -P "${pkgs[@]}" >/dev/null
for p in "${pkgs[@]}"; do known "$p" && fail "$p still known to dpkg after purge"; done
dl_cleanup
snapshot >"$work/after.txt"
left=$(comm -13 "$work/before.txt" "$work/after.txt" | { grep -v "^$work" || true; } | while read -r f; do
    dpkg -S "$f" >/dev/null 2>&1 || echo "$f"    # new and owned by no package: ours
done)
[ -z "$left" ] || fail "left behind after purge: $left"
while read -r f; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    [ "$f" = / ] && continue
    if [ -d "$f" ]; then                      # a directory: /lib -> /usr/lib
        c=$(readlink -f "$f")
    else                                      # a file or link: its directory
        c=$(readlink -f "$(dirname "$f")"); c="${c%/}/$(basename "$f")"
    fi
    grep -Fqx "$c" "$work/before.txt" || fail "packaged path left behind: $f"
done <"$work/owned.txt"
diff <(cut -d: -f1 "$work/passwd.before") <(cut -d: -f1 /etc/passwd) >/dev/null ||
    fail "users differ after purge: $(diff <(cut -d: -f1 "$work/passwd.before") <(cut -d: -f1 /etc/passwd) | tr '\n' ' ')"
ok "dpkg -P: conffiles, /etc/dlock and the seckill user gone; file list as before"
echo "deb: all checks passed"
