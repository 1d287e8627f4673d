#!/bin/bash
# test_seckilld_redis_auth.sh: seckilld and credentials
# Redis refuses, with a real redis-server.
# 1. At start-up a wrong password (or user) is a configuration error: exit
#    77 (dlock(1)'s code) with one line on stderr naming the user and the
#    server's answer, never the password; also with --workers 2.
# 2. Once running, a refusal is retried: the server starts requiring a
#    password (CONFIG SET requirepass + CLIENT KILL TYPE normal) while the
#    URL has none (NOAUTH), then the password rotates under a URL that has
#    the old one (WRONGPASS), then the server drops its password under a URL
#    that has one (AUTH refused with ERR). Each time the reconnects follow
#    the backoff (50 ms doubling to 2 s, jittered: at most 12 connections in
#    5 s, where a 50 ms loop makes about 100), /healthz answers 503 with the reason (to the admin token)
#    "redis auth refused ...", the reason is logged once, and once the
#    server takes the credentials again seckilld is healthy and sells.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-auth-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
seckilld=$build/tools/seckilld/seckilld
fail() { echo "FAIL: $*" >&2; tail -n 30 "$work"/*.log >&2 || true; exit 1; }

dl_start_redis "$work"
rc() { redis-cli -p "$REDIS_PORT" --no-auth-warning ${PW:+-a "$PW"} "$@"; }
PW=

# --- 1. start-up: exit 77, one line ------------------------------------------
rc CONFIG SET requirepass Right-Pw-1 >/dev/null
PW=Right-Pw-1
rc ACL SETUSER alice on '>Alice-Pw-1' '~*' '&*' '+@all' >/dev/null
startup_refused() { # url expected-text [extra args]
    url=$1 want=$2
    shift 2
    set +e
    timeout 10 "$seckilld" --port "$(dl_free_port)" --bind 127.0.0.1 --redis-url "$url" "$@" \
        >"$work/start.out" 2>"$work/start.err"
    st=$?
    set -e
    [ "$st" = 77 ] || fail "start-up with $want: exit $st, want 77 ($(cat "$work/start.err"))"
    [ "$(wc -l <"$work/start.err")" = 1 ] || fail "start-up with $want: not one line: $(cat "$work/start.err")"
    [ ! -s "$work/start.out" ] || fail "start-up with $want printed on stdout"
    grep -qF "seckilld: redis auth refused$want" "$work/start.err" || fail "start-up: $(cat "$work/start.err")"
    ! grep -q 'Wrong-Pw' "$work/start.err" || fail "the password is in the message: $(cat "$work/start.err")"
    echo "start-up, exit 77: $(cat "$work/start.err")"
}
startup_refused "redis://:Wrong-Pw@127.0.0.1:$REDIS_PORT" " for user 'default': WRONGPASS"
startup_refused "redis://alice:Wrong-Pw@127.0.0.1:$REDIS_PORT" " for user 'alice': WRONGPASS"
startup_refused "redis://127.0.0.1:$REDIS_PORT" ": the server requires a password and redis-url has none (NOAUTH"
startup_refused "redis://:Wrong-Pw@127.0.0.1:$REDIS_PORT" " for user 'default': WRONGPASS" --workers 2

# --- 2. running: refusals are retried with backoff ---------------------------
# total_connections_received: Redis 7.0 and Valkey 8.0 (both passes)
conns() { rc INFO stats | awk -F: '/^total_connections_received:/ {print $2 + 0}'; }
health() { curl -s -m 2 -H "Authorization: Bearer t0k" -w ' %{http_code}' "$base/healthz"; }
start() { # name url
    port=$(dl_free_port)
    base=http://127.0.0.1:$port
    log=$work/$1.log
    "$seckilld" --port "$port" --bind 127.0.0.1 --admin-token t0k --redis-url "$2" >"$log" 2>&1 &
    spid=$!
    dl_track "$spid"
    dl_wait_http "$base/healthz" || fail "$1: seckilld not healthy"
    now_ms=$(($(date +%s) * 1000))
    code=$(curl -s -o "$work/create.out" -w '%{http_code}' -X POST "$base/v1/campaigns" -H 'Authorization: Bearer t0k' \
        -d "{\"id\":\"$1\",\"stock\":100,\"starts_at\":$((now_ms - 1000)),\"ends_at\":$((now_ms + 3600000))}")
    [ "$code" = 201 ] || fail "$1: create: $code $(cat "$work/create.out")"
}
refused_for_a_while() { # name reason-text
    c0=$(conns)
    sleep 5
    n=$(($(conns) - c0 - 1)) # the INFO call itself is one
    h=$(health)
    echo "$1: $n connections in 5 s; /healthz: $h"
    [ "$n" -le 12 ] || fail "$1: $n connections in 5 s: no backoff"
    [ "$n" -ge 2 ] || fail "$1: $n connections in 5 s: seckilld does not retry"
    case "$h" in *"\"reason\":\"redis auth refused$2"*' 503') ;; *) fail "$1: /healthz: $h" ;; esac
    kill -0 "$spid" || fail "$1: seckilld exited"
}
recovers() { # name
    for _ in $(seq 1 80); do
        case "$(health)" in *'"status":"ok"'*' 200') break ;; esac
        sleep 0.1
    done
    case "$(health)" in *'"status":"ok"'*' 200') ;; *) fail "$1: not healthy 8 s after the fix: $(health)" ;; esac
    code=$(curl -s -o "$work/buy.out" -w '%{http_code}' -X POST "$base/v1/campaigns/$1/purchase" -H 'X-User-Id: u1')
    case "$code" in 201 | 202) ;; *) fail "$1: purchase after the fix: $code $(cat "$work/buy.out")" ;; esac
    kill -TERM "$spid"
    st=0
    wait "$spid" || st=$?
    [ "$st" = 0 ] || fail "$1: seckilld exited $st on SIGTERM"
    ! grep -q Sanitizer "$log" || fail "$1: sanitizer report"
    n=$(grep -c 'error: redis auth refused' "$log" || true)
    [ "$n" = 1 ] || fail "$1: the refusal is logged $n times, want once"
    ! grep -q 'Pw-' "$log" || fail "$1: a password is in the log"
    [ "$(wc -l <"$log")" -lt 25 ] || fail "$1: $(wc -l <"$log") log lines"
    echo "$1: recovered; log:"
    cat "$log"
}

# NOAUTH: the URL has no password and the server starts requiring one.
rc CONFIG SET requirepass "" >/dev/null
PW=
start noauth "redis://127.0.0.1:$REDIS_PORT"
rc CONFIG SET requirepass Right-Pw-2 >/dev/null
PW=Right-Pw-2
rc CLIENT KILL TYPE normal >/dev/null
refused_for_a_while noauth ": the server requires a password and redis-url has none (NOAUTH"
rc CONFIG SET requirepass "" >/dev/null
PW=
recovers noauth

# WRONGPASS: the password rotates on the server.
rc CONFIG SET requirepass Right-Pw-1 >/dev/null
PW=Right-Pw-1
start wrongpass "redis://:Right-Pw-1@127.0.0.1:$REDIS_PORT"
rc CONFIG SET requirepass Right-Pw-3 >/dev/null
PW=Right-Pw-3
rc CLIENT KILL TYPE normal >/dev/null
refused_for_a_while wrongpass " for user 'default': WRONGPASS"
rc CONFIG SET requirepass Right-Pw-1 >/dev/null
PW=Right-Pw-1
recovers wrongpass

# The server drops its password under a URL that has one: Redis refuses the
# AUTH ("ERR AUTH <password> called without any password configured") and
# the commands behind it work, which must not count as a good connection.
start nopass "redis://:Right-Pw-1@127.0.0.1:$REDIS_PORT"
rc CONFIG SET requirepass "" >/dev/null
PW=
rc CLIENT KILL TYPE normal >/dev/null
refused_for_a_while nopass " for user 'default': ERR AUTH"
rc CONFIG SET requirepass Right-Pw-1 >/dev/null
PW=Right-Pw-1
recovers nopass
echo PASS
