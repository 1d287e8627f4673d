#!/bin/sh
# Fetches Valkey 8.0 (valkey-server, valkey-tools) from Debian
# bookworm-backports into a cache directory, without installing anything and
# without touching the system's apt sources (a private sources list, lists and
# cache), then prints a bin directory whose redis-server, redis-sentinel and
# redis-cli are the Valkey binaries: put it first on PATH to run the suites.
# Usage: scripts/valkey.sh [CACHE_DIR]   (default $VALKEY_CACHE or ~/.cache/dlock-valkey)
set -eu
cache=${1:-${VALKEY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dlock-valkey}}
want=8.0.
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
bin=$cache/bin
root=$cache/root

if [ -x "$bin/redis-server" ] && "$bin/redis-server" --version | grep -q "v=$want"; then
    echo "$bin"
    exit 0
fi

apt_dir=$cache/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$cache/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" \
    >"$apt_dir/sources.list"
set -- -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" \
    -o APT::Sandbox::User="$(id -un)"
apt-get -qq "$@" update >&2
version=$(apt-cache "$@" policy valkey-server | sed -n 's/^ *Candidate: *//p')
case $version in
    "$want"*) ;;
    *) echo "valkey.sh: bookworm-backports offers valkey-server '$version', want $want*" >&2; exit 1 ;;
esac
rm -f "$cache/debs/"*.deb
(cd "$cache/debs" && apt-get -qq "$@" download "valkey-server=$version" "valkey-tools=$version" >&2)

rm -rf "$root" "$bin"
mkdir -p "$root" "$bin"
for deb in "$cache/debs/"*.deb; do dpkg-deb -x "$deb" "$root"; done
# valkey-server is a link to valkey-check-rdb: the binary picks its mode from
# the name it is started under, and Valkey answers to the Redis names too.
ln -s "$root/usr/bin/valkey-check-rdb" "$bin/redis-server"
ln -s "$root/usr/bin/valkey-check-rdb" "$bin/redis-sentinel"
ln -s "$root/usr/bin/valkey-cli" "$bin/redis-cli"
ln -s "$root/usr/bin/valkey-benchmark" "$bin/redis-benchmark"
"$bin/redis-server" --version | grep -q "v=$want" || {
    echo "valkey.sh: $bin/redis-server is not Valkey $want: $("$bin/redis-server" --version)" >&2
    exit 1
}
echo "$bin"
