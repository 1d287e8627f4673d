#!/bin/sh
# abi.sh: libdlock's ABI check against the baseline committed in abi/.
#   scripts/abi.sh check  [BUILD_DIR]  abidiff of BUILD_DIR's libdlock.so.1
#                                      against abi/libdlock.abi, and the public
#                                      types' layouts (scripts/abi_layout.py);
#                                      fails on any change to the public ABI
#   scripts/abi.sh update [BUILD_DIR]  regenerates abi/libdlock.abi from that
#                                      library (a deliberate ABI change: bump
#                                      the version and say it in CHANGELOG.md)
# check also compares against abi/libdlock-1.0.abi, the baseline 1.0.0
# shipped (never updated): every 1.x must still run a program built
# against 1.0, whatever the newer baselines say.
# The library must be built with debug info (RelWithDebInfo or Debug).
# Only the public headers (include/dlock) count: internal types are not ABI.
set -eu
cd "$(dirname "$0")/.."
mode=${1:-check}
build=${2:-build}
# the file the soname link points at (a stale libdlock.so.1.x of an older
# version may lie beside it in a reused build directory)
lib=$(readlink -f "$build/src/lib/libdlock.so.1" 2>/dev/null || true)
[ -n "$lib" ] && [ -f "$lib" ] || { echo "abi.sh: no $build/src/lib/libdlock.so.1: build first" >&2; exit 2; }
base=abi/libdlock.abi
case $mode in
update)
    abidw --headers-dir include/dlock --no-corpus-path --no-comp-dir-path --out-file "$base" "$lib"
    # the tree's own paths relative, so the baseline does not change with
    # the directory it was made in
    sed -i "s|$(pwd)/||g" "$base"
    echo "abi.sh: wrote $base from $lib"
    ;;
check)
    [ -f "$base" ] || { echo "abi.sh: no $base (scripts/abi.sh update)" >&2; exit 2; }
    now=$(mktemp /tmp/dlock-abi-XXXXXX)
    trap 'rm -f "$now"' EXIT
    abidw --headers-dir include/dlock --no-corpus-path --no-comp-dir-path --out-file "$now" "$lib"
    for b in abi/libdlock-1.0.abi "$base"; do
        set +e
        abidiff --headers-dir2 include/dlock --no-added-syms "$b" "$lib"
        arc=$?
        # abidiff leaves out, as harmless, some changes of a type reached
        # through a pointer (an option struct grown at its end); the public
        # structs' and enums' layouts are compared member by member as well
        python3 scripts/abi_layout.py "$b" "$now"
        lrc=$?
        set -e
        if [ $arc -ne 0 ] || [ $lrc -ne 0 ]; then
            echo "abi.sh: libdlock's ABI differs from $b (abidiff exit $arc, layouts exit $lrc)." >&2
            echo "  A change 1.x may not make fails the build. If the change is meant, it is a" >&2
            echo "  new major version (libdlock.so.2, a new 2.0 baseline), noted in CHANGELOG.md;" >&2
            echo "  an addition meant for this release: bump the version and run scripts/abi.sh update" >&2
            exit 1
        fi
        echo "abi.sh: ABI matches $b"
    done
    ;;
*) echo "usage: scripts/abi.sh check|update [BUILD_DIR]" >&2; exit 2 ;;
esac
