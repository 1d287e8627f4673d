#!/bin/sh
# Installs the build into a scratch prefix (not a system directory) and
# builds a consumer program against it: with pkg-config (dlock, dlock
# --static, dlock-static: libdlock.a) and with CMake's find_package(dlock).
# Each consumer is run; it must exit 0. Also checks what the installed
# library exposes: only dlock_* symbols, no libevent (the async door is the
# engine's, not the library's), a static pkg-config line that names only
# what libdlock links; that the installed programs run from the prefix with
# no LD_LIBRARY_PATH; and that every document and page the installed man
# pages send readers to is installed under the prefix.
# Usage: check-install.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=$(mktemp -d /tmp/dlock-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name 'libdlock.so*' -printf '%h\n' | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
so=$(find "$libdir" -name 'libdlock.so.*.*' | head -n 1)
# (the version nodes of the version script, e.g. DLOCK_1.0, are listed too)
foreign=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^dlock_' | grep -v '^DLOCK_[0-9]' || true)
unversioned=$(nm -D --defined-only "$so" | awk '{print $3}' | grep '^dlock_' | grep -v '@@DLOCK_[0-9]' || true)
if [ -n "$unversioned" ]; then
    echo "install check: libdlock.so exports symbols without a version node (src/lib/libdlock.map):" >&2
    echo "$unversioned" >&2
    exit 1
fi
if [ -n "$foreign" ]; then
    echo "install check: libdlock.so exports symbols outside dlock_*:" >&2
    echo "$foreign" >&2
    exit 1
fi
if readelf -d "$so" | grep -q 'NEEDED.*libevent'; then
    echo "install check: libdlock.so needs libevent, which the library does not use" >&2
    exit 1
fi
static_libs=$(pkg-config --libs --static dlock)
case "$static_libs" in
*event*) echo "install check: dlock.pc names libevent: $static_libs" >&2; exit 1 ;;
esac
# only what libdlock links, never a dependency's private libraries (libcurl's
# -llber -lzstd ... are not installed by Debian's -dev packages)
for l in $static_libs; do
    case "$l" in
    -L*|-ldlock|-lhiredis|-lcurl|-lcrypto|-lpthread|-pthread) ;;
    *) echo "install check: pkg-config --static --libs dlock names $l (not a library libdlock links): $static_libs" >&2
       exit 1 ;;
    esac
done
echo "install check: libdlock.so exports $(nm -D --defined-only "$so" | wc -l) dlock_* symbols; static link: $static_libs"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$prefix/consumer_pc" tests/install/consumer.c \
    $(pkg-config --cflags --libs dlock) -Wl,-rpath,"$libdir"
"$prefix/consumer_pc"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$prefix/consumer_pc_static" tests/install/consumer.c \
    $(pkg-config --static --cflags --libs dlock) -Wl,-rpath,"$libdir"
"$prefix/consumer_pc_static"
# libdlock.a through dlock-static.pc: nothing of libdlock is needed at run time
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$prefix/consumer_pc_archive" tests/install/consumer.c \
    $(pkg-config --cflags --libs dlock-static)
if readelf -d "$prefix/consumer_pc_archive" | grep -q 'NEEDED.*libdlock'; then
    echo "install check: a program linked with dlock-static.pc needs libdlock.so" >&2
    exit 1
fi
env -u LD_LIBRARY_PATH "$prefix/consumer_pc_archive"
cmake -S tests/install/cmake-consumer -B "$prefix/cm" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/cm/consumer_shared"
"$prefix/cm/consumer_static"
echo "install check: pkg-config (shared, --static, dlock-static) and find_package consumers built and ran"

# The installed programs run from a prefix ld.so does not search, with no
# LD_LIBRARY_PATH: they link libdlock statically (none needs libdlock.so).
for p in dlock dlock-bench seckilld seckill-persist seckill seckill-bench; do
    [ -x "$prefix/bin/$p" ] || { echo "install check: $prefix/bin/$p not installed" >&2; exit 1; }
    if ! out=$(env -u LD_LIBRARY_PATH "$prefix/bin/$p" --help 2>&1); then
        echo "install check: installed $p does not run from $prefix: $out" >&2
        exit 1
    fi
done
# What the installed pages name is installed: /usr/share/doc/PKG/X is
# <prefix>/share/doc/PKG/X after `cmake --install`, and every page of
# SEE ALSO is installed.
pages=$(find "$prefix/share/man" -type f)
for page in $pages; do
    for d in $(sed -n 's|.*/usr/share/doc/\([^ ]*\).*|\1|p' "$page" | sed 's/\\-/-/g; s/[).,;:]*$//; s/\\f[BIRP]//g' | sort -u); do
        [ -e "$prefix/share/doc/$d" ] || { echo "install check: $(basename "$page") names /usr/share/doc/$d, not installed" >&2; exit 1; }
    done
    for ref in $(sed -n '/^\.SH SEE ALSO/,/^\.SH/p' "$page" | grep -o '^\.BR [a-z\\-]* ([1-8])' | sed 's/^\.BR //; s/\\-/-/g; s/ (\([1-8]\))/.\1/'); do
        case "$ref" in dlock*|libdlock*|seckill*) ;; *) continue ;; esac # this project's pages
        [ -n "$(find "$prefix/share/man" -name "$ref")" ] ||
            { echo "install check: $(basename "$page") sends readers to $ref, not installed" >&2; exit 1; }
    done
done
echo "install check: programs ran from $prefix without LD_LIBRARY_PATH; the pages' documents are installed"
