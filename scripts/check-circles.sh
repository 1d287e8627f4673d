#!/bin/sh
# Fails when files of one source directory call each other in a circle:
# two or more files each reaching the others' external functions (a -> b
# -> a, or longer). Read from the object files of a build (nm), so it sees
# calls, not includes.
#   usage: check-circles.sh [--src ROOT] [--module DIR:FILE,FILE...]... BUILD_DIR [SRC_DIR...]
# --src ROOT: an object counts only while its source is still there
# (ROOT/DIR/..., or generated in BUILD_DIR/DIR/...): a build directory that
# is reused keeps the objects of deleted files, which would still define
# and call functions and could hide a circle.
# Without SRC_DIR it checks the tree's list below (what check-layers.sh and
# the unit test test_file_circles run). --module makes the named files of
# DIR (stems, no .c) count as one unit: calls among them are not circles,
# calls between the unit and any other file are. Every file a module names
# must have an object, and a directory with no objects in the build is an
# error, so a wrong path or a stale allow-list cannot pass silently.
set -eu

# The directories the tree keeps free of file circles, and the one module
# of several files allowed to (the HTTP layer behind hs_internal.h). Add a
# directory here once it has no circle left.
TREE_DIRS="src/common src/lib src/seckill src/seckilld"
TREE_MODULES="src/seckilld:hserver,hs_conn,hs_req"

usage() {
    echo "usage: check-circles.sh [--src ROOT] [--module DIR:FILE,FILE...]... BUILD_DIR [SRC_DIR...]" >&2
    exit 2
}
modules="" root=""
while [ $# -gt 0 ]; do
    case $1 in
    --src) [ $# -ge 2 ] || usage; root=$2; shift 2 ;;
    --src=*) root=${1#--src=}; shift ;;
    --module) [ $# -ge 2 ] || usage; modules="$modules $2"; shift 2 ;;
    --module=*) modules="$modules ${1#--module=}"; shift ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || usage
build=$1
shift
if [ $# -eq 0 ]; then
    # shellcheck disable=SC2086
    set -- $TREE_DIRS
    modules="$modules $TREE_MODULES"
fi

for m in $modules; do
    case $m in
    ?*:?*) ;;
    *) echo "circles: --module $m is not DIR:FILE,FILE..." >&2; exit 2 ;;
    esac
done
# The members of DIR's module (space separated), "" when it has none.
members_of() {
    for m in $modules; do
        case $m in "$1":*) echo "${m#*:}" | tr ',' ' ' ;; esac
    done
}

# The objects of dir (one per line) whose source is still there (all of
# them without --src).
live_objects() {
    find "$build" -path "*/$1/CMakeFiles/*" -name '*.c.o' | sort | while read -r o; do
        rel=${o#*/CMakeFiles/*.dir/}
        rel=${rel%.o}
        if [ -z "$root" ] || [ -f "$root/$1/$rel" ] || [ -f "$build/$1/$rel" ]; then
            echo "$o"
        else
            echo "circles: ignoring $o: its source $1/$rel is gone" >&2
        fi
    done
}

fail=0 applied=""
for dir in "$@"; do
    objs=$(live_objects "$dir")
    if [ -z "$objs" ]; then
        echo "circles: no object files of $dir under $build (build it first)" >&2
        exit 2
    fi
    members=$(members_of "$dir")
    # shellcheck disable=SC2086
    unit=$(echo $members | tr ' ' '+')
    [ -n "$unit" ] && applied="$applied $dir:$unit"
    for f in $members; do
        if ! echo "$objs" | grep -q "/$f\.c\.o\$"; then
            echo "circles: module $dir:$unit names $f, which has no object file under $build" >&2
            exit 2
        fi
    done
    out=$(for o in $objs; do
        stem=$(basename "$o" .c.o)
        for f in $members; do [ "$f" = "$stem" ] && stem=$unit; done
        nm -P "$o" | awk -v F="$stem" '$2 == "U" { print "U", F, $1 } $2 ~ /^[TDBR]$/ { print "D", F, $1 }'
    done | sort -u | awk '
        $1 == "D" { owner[$3] = $2; files[$2] = 1 }
        $1 == "U" { files[$2] = 1; use[++n] = $2 " " $3 }
        END {
            for (i = 1; i <= n; i++) {
                split(use[i], u, " ")
                o = owner[u[2]]
                if (o == "" || o == u[1]) continue
                if (!((u[1], o) in reach)) via[u[1], o] = u[2]
                reach[u[1], o] = 1
            }
            for (k in files) for (a in files) if ((a, k) in reach) for (b in files)
                if ((k, b) in reach) reach[a, b] = 1
            for (a in files) for (b in files)
                if (a < b && ((a, b) in reach) && ((b, a) in reach)) {
                    line = a " <-> " b
                    if ((a, b) in via) line = line "  (" a " calls " via[a, b] ")"
                    if ((b, a) in via) line = line "  (" b " calls " via[b, a] ")"
                    print line
                }
        }' | sort)
    if [ -n "$out" ]; then
        echo "circles: files of $dir that reach each other's functions:" >&2
        echo "$out" >&2
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "file-circle check ($*${applied:+; one unit each:$applied}): clean"
exit $fail
