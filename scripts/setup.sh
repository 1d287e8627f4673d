#!/bin/sh
# Installs the Debian packages listed in scripts/debian-packages.txt (or in
# the list file given, e.g. scripts/bench-packages.txt) that are missing.
# Idempotent; as non-root it names what is missing and stops.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
list=${1:-$here/debian-packages.txt}
pkgs=$(grep -v '^#' "$list" | grep -v '^$')
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "dlock: missing Debian packages:$missing" >&2
    echo "dlock: run as root, or: sudo apt-get install$missing" >&2
    exit 2
fi
echo "dlock: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
