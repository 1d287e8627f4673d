#!/bin/sh
# Installs the build into a scratch prefix and builds a consumer program
# against it twice: with pkg-config and with CMake's find_package(dlock).
# Each consumer is run; it must exit 0. Also checks what the installed
# library exposes: only dlock_* symbols, no libevent (the async door is the
# engine's, not the library's), and a static pkg-config line that names only
# what libdlock links. Usage: check-install.sh [BUILD_DIR]
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
echo "install check: libdlock.so exports $(nm -D --defined-only "$so" | wc -l) dlock_* symbols; static link: $static_libs"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$prefix/consumer_pc" tests/install/consumer.c \
    $(pkg-config --cflags --libs dlock) -Wl,-rpath,"$libdir"
"$prefix/consumer_pc"
cmake -S tests/install/cmake-consumer -B "$prefix/cm" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/cm/consumer_shared"
"$prefix/cm/consumer_static"
echo "install check: pkg-config and find_package consumers built and ran"
