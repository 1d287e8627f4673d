#!/bin/sh
# Fails when files of one source directory call each other in a circle:
# two or more files each reaching the others' external functions (a -> b
# -> a, or longer). Read from the object files of a build (nm), so it sees
# calls, not includes.   usage: check-circles.sh BUILD_DIR SRC_DIR...
# (e.g. build src/common src/lib). A directory with no objects in the
# build is an error, so a wrong path cannot pass silently.
set -eu
build=$1
shift
fail=0
for dir in "$@"; do
    objs=$(find "$build" -path "*/$dir/CMakeFiles/*" -name '*.c.o' | sort)
    if [ -z "$objs" ]; then
        echo "circles: no object files of $dir under $build (build it first)" >&2
        exit 2
    fi
    out=$(for o in $objs; do
        stem=$(basename "$o" .c.o)
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
[ $fail -eq 0 ] && echo "file-circle check ($*): clean"
exit $fail
