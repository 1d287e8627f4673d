# bench/seckill/bench_lib.sh: the set-up every flash-sale bench script
# shares. Source it from the repository root (after scripts/lib.sh):
#   sb_setup NAME PROGRAM...
# resolves BUILD_DIR (default build-rel, relative to the root) into $BUILD,
# checks each PROGRAM (a path under the build dir, e.g.
# tools/seckill-bench/seckill-bench) is built, makes the temp dir $work and
# the EXIT trap that stops what the script started (by PID) and removes it.
sb_setup() {
    local name=$1 p
    shift
    BUILD=${BUILD_DIR:-build-rel}
    case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
    for p in "$@"; do
        [ -x "$BUILD/$p" ] || { echo "$name: $BUILD/$p not built (cmake --build $BUILD --target $(basename "$p"))" >&2; exit 2; }
    done
    work=$(mktemp -d "${TMPDIR:-/tmp}/$name-XXXXXX")
    trap 'dl_cleanup; rm -rf "$work"' EXIT
    trap 'exit 130' INT TERM
}
