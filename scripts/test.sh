#!/bin/sh
# README command 2: installs what is missing (Debian packages), builds, and
# runs the whole test suite against private servers the tests start.
# Environment: BUILD_DIR (default build), JOBS (default nproc),
# CTEST_ARGS (extra ctest arguments, e.g. "-L unit").
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/check-banned.sh
./scripts/check-layers.sh
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
# shellcheck disable=SC2086
ctest --test-dir "$build" --output-on-failure -j 2 -LE slow ${CTEST_ARGS:-}
