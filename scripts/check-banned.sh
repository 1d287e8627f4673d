#!/bin/sh
# Fails when a banned C function appears in the project's sources.
# Banned: unbounded copies/formatting (strcpy strcat sprintf vsprintf gets),
# non-reentrant tokenising (strtok) and unchecked conversions (atoi atol).
set -eu
cd "$(dirname "$0")/.."
pattern='\b(strcpy|strcat|sprintf|vsprintf|gets|strtok|atoi|atol)[[:space:]]*\('
hits=$(grep -rnE "$pattern" --include='*.c' --include='*.h' src include tools tests bench 2>/dev/null || true)
if [ -n "$hits" ]; then
    echo "banned functions in use (use snprintf, memcpy with bounds, strtol):" >&2
    echo "$hits" >&2
    exit 1
fi
# The process environment is not changed where threads may read it: the
# library never changes its host's, and dlock builds COMMAND's privately
# (a getenv in another thread while setenv rewrites environ reads freed
# memory). tools/common/envfile.c loads an env file before any thread.
pattern='\b(setenv|unsetenv|putenv|clearenv)[[:space:]]*\('
hits=$(grep -rnE "$pattern" --include='*.c' --include='*.h' src include tools/dlock 2>/dev/null || true)
if [ -n "$hits" ]; then
    echo "the environment is changed where threads read it (build the child's own, see tools/dlock/child.c):" >&2
    echo "$hits" >&2
    exit 1
fi
echo "banned-function check: clean"
