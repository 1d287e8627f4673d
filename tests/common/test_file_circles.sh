#!/bin/bash
# test_file_circles.sh: no two files of a directory the tree keeps free of
# circles (TREE_DIRS in scripts/check-circles.sh) call each other's
# functions, directly or round a longer circle, checked on this build's
# objects. The check itself is probed by test_check_circles.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?} build=${DLOCK_BUILD_DIR:?}
"$src/scripts/check-circles.sh" --src "$src" "$build"
