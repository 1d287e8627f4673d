#!/bin/sh
# fuzz.sh: builds the libFuzzer targets with clang (instrumented, ASan and
# UBSan) and runs each for a bounded time on its seed corpus; fails on a
# crash, a leak, a sanitizer report or a target's own abort. .ci/run runs it.
#   scripts/fuzz.sh [SECONDS]   total fuzzing time, shared by the targets (60)
# Environment: FUZZ_BUILD_DIR (build-fuzz). Needs clang and libclang-rt-14-dev
# (scripts/debian-packages.txt). New findings go to a temporary directory,
# never into the tree; a crash leaves its input in $FUZZ_BUILD_DIR/crashes.
set -eu
cd "$(dirname "$0")/.."
total=${1:-60}
build=${FUZZ_BUILD_DIR:-build-fuzz}
# target (as built by CMake: directory/name) and the seeds it starts from
targets="tests/seckill/fuzz_sk_json tests/seckilld/fuzz_hs_request"
command -v clang >/dev/null || { echo "fuzz.sh: clang is not installed (scripts/setup.sh)" >&2; exit 2; }
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
names=""
for t in $targets; do names="$names --target $(basename "$t")"; done
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" $names >/dev/null
n=$(echo "$targets" | wc -w)
each=$(( total / n ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/crashes"
for t in $targets; do
    name=$(basename "$t")
    mkdir -p "$work/$name" "$work/$name.seeds"
    case $name in
    fuzz_sk_json)
        cp tests/common/json_corpus/* "$work/$name.seeds/"
        python3 tests/common/test_json_differential.py --write-corpus "$work/$name.seeds" ;;
    fuzz_hs_request)
        cp tests/seckilld/fuzz_hs_corpus/* "$work/$name.seeds/" ;;
    esac
    echo "fuzz.sh: $name for ${each}s"
    # the first directory takes new findings; the seeds stay as they are
    if ! "$build/$t" -max_total_time="$each" -max_len=9000 -timeout=10 -print_final_stats=1 \
            -artifact_prefix="$build/crashes/$name-" "$work/$name" "$work/$name.seeds" >"$work/$name.log" 2>&1; then
        tail -n 60 "$work/$name.log" >&2
        echo "fuzz.sh: $name failed; its input is in $build/crashes/" >&2
        exit 1
    fi
    grep -E '^stat::number_of_executed_units|^Done' "$work/$name.log" || true
done
echo "fuzz.sh: every target ran clean"
