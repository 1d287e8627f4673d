#!/bin/sh
# Installs the build into a scratch prefix and builds a consumer program
# against it twice: with pkg-config and with CMake's find_package(dlock).
# Each consumer is run; it must exit 0. Usage: check-install.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=$(mktemp -d /tmp/dlock-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name 'libdlock.so*' -printf '%h\n' | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$prefix/consumer_pc" tests/install/consumer.c \
    $(pkg-config --cflags --libs dlock) -Wl,-rpath,"$libdir"
"$prefix/consumer_pc"
cmake -S tests/install/cmake-consumer -B "$prefix/cm" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/cm/consumer_shared"
"$prefix/cm/consumer_static"
echo "install check: pkg-config and find_package consumers built and ran"
