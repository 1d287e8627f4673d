#!/bin/sh
# Fails when the tree breaks its layering (docs/design/architecture.md):
#   src/common <- src/lib (libdlock);  src/common <- src/seckill <- src/seckilld <- tools/
# and nothing outside src/lib (src/seckill, src/seckilld, tools/, bench/,
# tests/) includes libdlock's internal headers (src/lib/*.h): they use it
# through what it exports (include/dlock/*.h). The one exception is the
# library's own tests, tests/lib. A file may include headers of its own
# layer and of layers below, never above; the common layer never sees the
# public API (dlock/dlock.h), so libdlock maps its codes at its edge.
# Inside src/seckill the same holds between its folders,
#   base <- engine;  base <- db <- pipeline   (engine and db/pipeline apart)
# every source file sits in one of them, and inside a folder no two modules
# include each other, directly or round a longer circle (a module: x.c with
# x.h, and x_internal.h). Also
# fails on a function longer than 60 lines in src/, tools/ or bench/
# (CONTRIBUTING.md, "Style": split past ~60), counted from the opening to
# the closing brace at column 0, and on a file circle in src/common or
# src/lib (scripts/check-circles.sh).
set -eu
cd "$(dirname "$0")/.."
fail=0
headers_of() { find "$1" -name '*.h' -printf '%f\n' 2>/dev/null | sort -u; }
check() { # check "DIR..." "forbidden header names..." why
    dirs=$1 names=$2 why=$3
    for h in $names; do
        # "h", <h>, or any path ending in /h ("../src/lib/h")
        re="^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]([^\">]*/)?$(echo "$h" | sed 's/\./\\./g')[\">]"
        # shellcheck disable=SC2086
        hits=$(grep -rnE "$re" $dirs --include='*.c' --include='*.h' --include='*.cc' --include='*.cpp' || true)
        if [ -n "$hits" ]; then
            echo "layering: $dirs includes $h ($why):" >&2
            echo "$hits" >&2
            fail=1
        fi
    done
}
lib_h=$(headers_of src/lib)
seckill_h=$(headers_of src/seckill)
front_h=$(headers_of src/seckilld)
check src/common "dlock/dlock.h $lib_h $seckill_h $front_h" "layer 1 includes nothing above it"
check src/lib "$seckill_h $front_h" "libdlock does not know the engine"
check src/seckill "$front_h $lib_h" "the engine is usable without HTTP and uses libdlock's public API only"
# src/seckill's folders, lowest first; what each may not see, and why.
sk_engine_h=$(headers_of src/seckill/engine)
sk_db_h=$(headers_of src/seckill/db)
sk_pipeline_h=$(headers_of src/seckill/pipeline)
check src/seckill/base "$sk_engine_h $sk_db_h $sk_pipeline_h" \
    "the shared base is below every seckill subsystem"
check src/seckill/engine "$sk_db_h $sk_pipeline_h" \
    "the decision engine decides in Redis; the system of record and the pipeline are not its"
check src/seckill/db "$sk_engine_h $sk_pipeline_h" \
    "the system of record knows neither the engine nor the pipeline that feeds it"
check src/seckill/pipeline "$sk_engine_h" \
    "the pipeline reads what the engine wrote through Redis and the base, never the engine's code"
stray=$(find src/seckill -name '*.[ch]' ! -path 'src/seckill/base/*' ! -path 'src/seckill/engine/*' \
    ! -path 'src/seckill/db/*' ! -path 'src/seckill/pipeline/*')
if [ -n "$stray" ]; then
    echo "layering: seckill files outside base/, engine/, db/, pipeline/ (CONTRIBUTING.md says where a piece goes):" >&2
    echo "$stray" >&2
    fail=1
fi
# Inside a folder no include circle between modules (an arrow that points
# up): x.c, x.h and x_internal.h are module x; tsort names a circle.
for d in base engine db pipeline; do
    dir=src/seckill/$d
    loops=$(for f in "$dir"/*.[ch]; do
        s=$(basename "$f"); s=${s%.?}; s=${s%_internal}
        sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*\/)?([A-Za-z0-9_]+)\.h".*/\2/p' "$f" |
            while read -r h; do
                [ -f "$dir/$h.h" ] || continue
                t=${h%_internal}
                [ "$t" = "$s" ] || echo "$s $t"
            done
    done | tsort 2>&1 >/dev/null || true)
    if [ -n "$loops" ]; then
        echo "layering: modules of $dir include each other (an include points up; move what both need into a smaller header below them):" >&2
        echo "$loops" | awk '/input contains a loop/ { if (l != "") print l; l = "  circle:"; next }
            { sub(/^tsort: /, ""); l = l " " $0 } END { if (l != "") print l }' >&2
        fail=1
    fi
done
check src/seckilld "$lib_h" "libdlock's public API only"
check tools "$lib_h" "libdlock's public API only"
check bench "$lib_h" "libdlock's public API only"
# tests/lib is libdlock's own test suite and may see its internals
check "$(find tests -mindepth 1 -maxdepth 1 -type d ! -name lib | sort | tr '\n' ' ')" "$lib_h" \
    "only libdlock's own tests (tests/lib) see its internals"
long=$(for f in $(find src tools bench -name '*.c'); do
    awk -v F="$f" '/^\{$/ { s = NR; name = prev }
        /^\}/ { if (s) { n = NR - s - 1; if (n > 60) print F ": " n " lines: " name; s = 0 } }
        { prev = $0 }' "$f"
done)
if [ -n "$long" ]; then
    echo "functions longer than 60 lines:" >&2
    echo "$long" >&2
    fail=1
fi
# No file circle in the directories scripts/check-circles.sh lists
# (TREE_DIRS there), from the objects of a build: DLOCK_BUILD_DIR, else
# ./build when it has them.
bdir=${DLOCK_BUILD_DIR:-build}
if [ -n "$(find "$bdir" -path '*/src/common/CMakeFiles/*' -name '*.c.o' 2>/dev/null | head -1)" ]; then
    ./scripts/check-circles.sh --src . "$bdir" || fail=1
else
    echo "file-circle check skipped: no build in $bdir (tests/common/test_file_circles.sh runs it)"
fi
[ $fail -eq 0 ] && echo "layering and function-length check: clean"
exit $fail
