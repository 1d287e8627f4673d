#!/bin/bash
# test_server_commands.sh: the server on PATH (Redis, or Valkey in CI's
# Valkey pass) knows every command dlock sends, asked with COMMAND INFO:
# features are probed, never inferred from a version string (dlock reads
# none). Fails naming each command the server does not know.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/dlock-cmds-XXXXXX)
trap 'dl_cleanup; rm -rf "$work"' EXIT
dl_start_redis "$work"

# what src/ sends (argv arrays and Lua redis.call), subcommands as A|B;
# docs/compatibility.md lists why each is needed
commands="PING INFO ROLE TIME AUTH SELECT HELLO CLIENT|ID CLIENT|UNBLOCK CONFIG|GET
EVAL EVALSHA SCRIPT|LOAD MULTI EXEC WAIT
GET SET DEL EXISTS INCR INCRBY DECR DECRBY PEXPIRE PTTL TYPE SCAN
HGET HSET HSETNX HMGET HGETALL HDEL HEXISTS HINCRBY HLEN HVALS
SADD SREM SCARD SMEMBERS SISMEMBER RPUSH LPOP LREM LINDEX LLEN LRANGE
ZADD ZREM ZSCORE ZRANK ZRANGE ZRANGEBYSCORE ZREMRANGEBYSCORE ZINCRBY ZCOUNT ZCARD ZSCAN
XADD XDEL XLEN XRANGE XREVRANGE XREAD XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM XTRIM XSETID
XGROUP|CREATE XINFO|GROUPS
PUBLISH SUBSCRIBE SPUBLISH SSUBSCRIBE
CLUSTER|SLOTS CLUSTER|SHARDS ASKING READONLY"
missing=""
n=0
for c in $commands; do
    n=$((n + 1))
    [ -n "$(redis-cli -p "$REDIS_PORT" COMMAND INFO "$c" | head -1)" ] || missing="$missing $c"
done
server=$(redis-cli -p "$REDIS_PORT" INFO server | grep -E '^(redis|valkey)_version:' | tr -d '\r' | tr '\n' ' ')
if [ -n "$missing" ]; then
    echo "FAIL: the server ($server) does not know:$missing"
    exit 1
fi
echo "ok: the server ($server) knows all $n commands dlock sends"
