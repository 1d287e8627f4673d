#!/bin/bash
# test_check_config.sh: `seckilld --check-config` refuses exactly what the
# start refuses, and says where: every bad value gets exit 2 and one line
# naming FILE:LINE (or the variable, or the flag) and the setting, the same
# line from --check-config and from a real start; every value the check
# accepts lets the real start reach "listening". An unterminated quote is
# an error; secrets are masked, not hidden. etc/seckilld.conf is exactly
# the built-in defaults. --env-file reads the units' environment file.
# seckill-persist and seckill refuse a bad URL the same way (exit 2) before
# opening anything.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
sk=$build/tools/seckilld/seckilld
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-checkconf-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
conf=$work/seckilld.conf
fails=0
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
seen=0
# section_ok TEXT: "ok TEXT" when the section just ended had no failure
section_ok() { [ "$fails" = "$seen" ] && echo "ok   $*"; seen=$fails; }

# starts seckilld on a free port with the given arguments; prints its exit
# code once it exits, or "listening" once it logged so (then stops it).
start_real() {
    local log=$work/start.log port
    port=$(dl_free_port)
    "$sk" "$@" --bind 127.0.0.1 --port "$port" --log-level info >"$log" 2>&1 &
    local pid=$! i
    for i in $(seq 1 100); do
        if grep -q 'listening on' "$log"; then
            kill -TERM "$pid"; wait "$pid" || true
            echo listening; return
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"; wait "$pid" || true
        echo "no 'listening' line in 5 s"; return
    fi
    local rc=0
    wait "$pid" || rc=$?
    echo "$rc"
}

# refused "LINE" "EXPECTED STDERR": the file holds LINE; --check-config and
# the real start both exit 2 with exactly that one line.
refused() {
    printf '%s\n' "# a comment" "$1" >"$conf"
    local rc=0 out
    out=$("$sk" --config "$conf" --check-config 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 2 ] || { bad "check of '$1': exit $rc, want 2"; return; }
    [ "$out" = "$2" ] || { bad "check of '$1' said '$out', want '$2'"; return; }
    local st
    st=$(start_real --config "$conf")
    [ "$st" = 2 ] || { bad "start with '$1': $st, want exit 2"; return; }
    [ "$(cat "$work/start.log")" = "$2" ] || bad "start with '$1' said '$(cat "$work/start.log")', want '$2'"
}

# accepted "LINE..." : the check exits 0 and the real start listens.
accepted() {
    printf '%s\n' "$@" >"$conf"
    "$sk" --config "$conf" --check-config >"$work/shown" 2>"$work/err" ||
        { bad "check of '$*' refused: $(cat "$work/err")"; return; }
    local st
    st=$(start_real --config "$conf")
    [ "$st" = listening ] || bad "check accepted '$*' but the start gave $st: $(cat "$work/start.log")"
}

f=$conf:2
refused 'redis-url http://x' \
    "seckilld: $f: invalid redis-url: unknown scheme (expected redis://, unix://, redis-sentinel:// or redis-cluster://)"
refused 'redis-url redis://127.0.0.1:notaport' "seckilld: $f: invalid redis-url: port must be a number in 1..65535"
refused 'admin-token "abc' "seckilld: $f: admin-token: unterminated quote (a value starting with \" ends with \")"
refused 'admin-token "abc" def' "seckilld: $f: admin-token: text after the closing quote"
refused 'max-batch 0' "seckilld: $f: invalid max-batch '0': expected an integer from 1 to 512"
refused 'worker-lease-ms 100' \
    "seckilld: $f: invalid worker-lease-ms '100': expected a duration from 300ms to 720h (e.g. 1.5s, 2m, 1h; a bare number is milliseconds)"
refused 'replica-ack-timeout-ms 0' \
    "seckilld: $f: invalid replica-ack-timeout-ms '0': expected a duration from 1ms to 720h (e.g. 250ms, 1.5s, 2m; a bare number is milliseconds)"
refused 'log-level loud' "seckilld: $f: invalid log-level: 'loud': expected debug, info, warn or error"
refused 'database-url sqlite://orders.db' \
    "seckilld: $f: invalid database-url: sqlite url needs an absolute path, sqlite:///abs/path.db (a relative file is given as a plain path, without sqlite://)"
refused 'database-url postgresql://app:pw@db:notaport/sale' \
    "seckilld: $f: invalid database-url: bad postgresql url: a port must be a number from 1 to 65535"
refused 'database-url mysql://app:pw@db/sale' \
    "seckilld: $f: invalid database-url: unsupported database url scheme (want sqlite:// or postgresql://)"
refused 'check-config true' "seckilld: $f: unknown setting \"check-config\""
[ "$(ls "$work")" = "$(basename "$conf")
start.log" ] || bad "a refused configuration left files: $(ls "$work")"
section_ok "bad values: exit 2 from check and start alike, one line naming $conf:LINE and the setting"

# the same rule from the environment and from a flag, naming them
out=$(REDIS_URL=http://x "$sk" --check-config 2>&1 >/dev/null) && bad "REDIS_URL=http://x accepted"
[ "$out" = "seckilld: invalid REDIS_URL: unknown scheme (expected redis://, unix://, redis-sentinel:// or redis-cluster://)" ] ||
    bad "env: '$out'"
out=$("$sk" --max-batch 0 --check-config 2>&1 >/dev/null) && bad "--max-batch 0 accepted"
[[ "$out" == "seckilld: invalid --max-batch '0': expected an integer from 1 to 512"* ]] || bad "flag: '$out'"
section_ok "environment and flags: the same checks, naming the variable or the flag"

# accepted values start for real; secrets masked, not hidden
long=$(head -c 5000 /dev/zero | tr '\0' k)
accepted 'redis-url redis://app:s3cr3t-pw@127.0.0.1:1' \
    "database-url sqlite://$work/orders.db" 'admin-token "t0k3n with \"quotes\" and \\"' \
    "user-secret $long" 'user-secret-previous pr3v10us' 'user-signature-legacy true' 'bind "127.0.0.1"' \
    '  log-level  warn  '
grep -Fxq 'redis-url redis://app:****@127.0.0.1:1' "$work/shown" || bad "redis-url not masked: $(grep redis-url "$work/shown")"
grep -Fxq "database-url sqlite://$work/orders.db" "$work/shown" || bad "database-url not shown as is"
grep -Fxq 'admin-token ****' "$work/shown" || bad "admin-token not ****: $(grep admin-token "$work/shown")"
grep -Fxq 'user-secret ****' "$work/shown" || bad "a 5000-byte line not read whole: $(grep user-secret "$work/shown")"
grep -Fxq 'user-secret-previous ****' "$work/shown" || bad "user-secret-previous not ****: $(grep previous "$work/shown")"
grep -Fxq 'user-signature-legacy true' "$work/shown" || bad "user-signature-legacy not read"
grep -Fxq 'bind 127.0.0.1' "$work/shown" || bad "quoted bind not unquoted"
grep -Fxq 'log-level warn' "$work/shown" || bad "log-level with blanks: $(grep log-level "$work/shown")"
grep -Eq 's3cr3t|t0k3n|kkkk|pr3v10us' "$work/shown" && bad "a secret leaked into --check-config: $(cat "$work/shown")"
printf '%s\n' 'database-url postgresql://app@db.example:5432/sale' 'redis-url redis://bob@127.0.0.1:1' >"$conf"
"$sk" --config "$conf" --check-config >"$work/shown"
grep -Fxq 'database-url postgresql://app@db.example:5432/sale' "$work/shown" ||
    bad "a database-url without a password is not shown as is: $(grep database-url "$work/shown")"
grep -Fxq 'redis-url redis://bob@127.0.0.1:1' "$work/shown" || bad "a user-only redis-url is not shown as is"
out=$(DATABASE_URL='postgresql://app:pw@db/sale?sslpassword=zz&sslmode=require' "$sk" --check-config)
grep -Fxq 'database-url postgresql://app:****@db/sale?sslpassword=****&sslmode=require' <<<"$out" ||
    bad "database-url password not masked: $(grep database-url <<<"$out")"
accepted "# the packaged example" "$(grep -v '^#' "$src/etc/seckilld.conf" | grep -v '^redis-url')" \
    'redis-url redis://127.0.0.1:1'
section_ok "accepted values start (listening); secrets shown as ****, passwords masked, user-only URLs as is"

# The packaged example holds every setting at its built-in default, and
# nothing else: exactly what --check-config prints with no file and no
# environment (a setting added to seckilld must be added there too).
env -i "$sk" --check-config >"$work/defaults" || bad "--check-config with nothing set failed"
grep -v '^#' "$src/etc/seckilld.conf" | sed '/^$/d' | sort >"$work/example"
sort "$work/defaults" >"$work/defaults.sorted"
diff "$work/defaults.sorted" "$work/example" >"$work/diff" ||
    bad "etc/seckilld.conf is not the built-in defaults ('<' --check-config, '>' the file): $(cat "$work/diff")"
section_ok "etc/seckilld.conf: every setting, each at the default --check-config prints"

# --env-file: what the units' EnvironmentFile= gives them, for a command run
# by hand. The shipped example reads as the unit gets it; the file's
# variables replace the inherited ones; flags still win; quotes; a bad line
# or a missing file is exit 2 naming it, before anything is opened.
ex=$src/etc/systemd/seckill.env.example
out=$(env -i "$sk" --env-file "$ex" --config "$src/etc/seckilld.conf" --check-config) ||
    bad "--env-file with the shipped example refused"
grep -Fxq "redis-url $(sed -n 's/^REDIS_URL=//p' "$ex")" <<<"$out" || bad "REDIS_URL of the env file not used: $(grep redis-url <<<"$out")"
grep -Fxq "database-url $(sed -n 's/^DATABASE_URL=//p' "$ex")" <<<"$out" || bad "DATABASE_URL of the env file not used"
grep -Fxq 'admin-token ****' <<<"$out" || bad "SECKILL_ADMIN_TOKEN of the env file not used (or not masked)"
grep -Fxq 'user-secret-previous ****' <<<"$out" || bad "SECKILL_USER_SECRET_PREVIOUS of the env file not used (or not masked)"
envf=$work/seckill.env
printf '%s\n' '# comment' '; comment too' '' 'REDIS_URL="redis://127.0.0.1:7001"' \
    "  SECKILL_MAX_BATCH = 8" "SECKILL_BIND='127.0.0.1'" >"$envf"
out=$(REDIS_URL=redis://127.0.0.1:9 "$sk" --env-file "$envf" --check-config)
grep -Fxq 'redis-url redis://127.0.0.1:7001' <<<"$out" || bad "the env file does not replace the inherited REDIS_URL"
grep -Fxq 'max-batch 8' <<<"$out" || bad "a blank-padded line not read: $(grep max-batch <<<"$out")"
grep -Fxq 'bind 127.0.0.1' <<<"$out" || bad "a single-quoted value not unquoted"
out=$("$sk" --env-file="$envf" --max-batch 9 --check-config)
grep -Fxq 'max-batch 9' <<<"$out" || bad "a flag does not beat the env file"
printf '%s\n' 'REDIS_URL=redis://127.0.0.1:7001' 'export DATABASE_URL=/x.db' >"$envf"
rc=0; out=$("$sk" --env-file "$envf" --check-config 2>&1) || rc=$?
[ "$rc" = 2 ] && [ "$out" = "seckilld: $envf:2: expected NAME=VALUE" ] || bad "bad env line: exit $rc, '$out'"
printf '%s\n' 'SECKILL_MAX_BATCH=0' >"$envf"
rc=0; out=$("$sk" --env-file "$envf" --check-config 2>&1) || rc=$?
[ "$rc" = 2 ] && [[ "$out" == *"invalid SECKILL_MAX_BATCH '0'"* ]] || bad "a bad value from the env file: exit $rc, '$out'"
rc=0; out=$("$sk" --env-file "$work/none.env" --check-config 2>&1) || rc=$?
[ "$rc" = 2 ] && [[ "$out" == "seckilld: cannot read env file $work/none.env: "* ]] || bad "missing env file: exit $rc, '$out'"
printf '%s\n' "DATABASE_URL=sqlite://$work/envfile.db" >"$envf"
adm=$build/tools/seckill/seckill
out=$(env -i "$adm" --env-file "$envf" migrate 2>&1) || bad "seckill --env-file F migrate: $out"
[ -s "$work/envfile.db" ] || bad "seckill did not take DATABASE_URL from --env-file"
rc=0; out=$(env -i "$adm" reconcile --campaign c1 2>&1) || rc=$?
[ "$rc" = 2 ] && [[ "$out" == *"--env-file /etc/dlock/seckill.env"* ]] ||
    bad "seckill without a database does not point at --env-file: exit $rc, '$out'"
printf '%s\n' 'REDIS_URL=http://x' >"$envf"
rc=0; out=$("$build/tools/seckill-persist/seckill-persist" --database-url "$work/p2.db" --env-file "$envf" 2>&1) || rc=$?
[ "$rc" = 2 ] && [[ "$out" == *"invalid REDIS_URL"* ]] || bad "seckill-persist --env-file not read: exit $rc, '$out'"
section_ok "--env-file: the units' environment for a hand-run command (seckilld, seckill, seckill-persist)"

# seckill-persist and seckill: a bad URL is exit 2 before anything is opened
for prog in "$build/tools/seckill-persist/seckill-persist" "$build/tools/seckill/seckill reconcile"; do
    rc=0
    # shellcheck disable=SC2086
    out=$($prog --redis-url http://x --database-url "$work/p.db" 2>&1) || rc=$?
    [ "$rc" = 2 ] || bad "$prog --redis-url http://x: exit $rc, want 2 ($out)"
    [ -e "$work/p.db" ] && bad "$prog opened the database before refusing the Redis URL"
    rc=0
    # shellcheck disable=SC2086
    out=$($prog --database-url sqlite://rel.db 2>&1) || rc=$?
    [ "$rc" = 2 ] && [[ "$out" == *"invalid --database-url: sqlite url needs an absolute path"* ]] ||
        bad "$prog --database-url sqlite://rel.db: exit $rc ($out)"
done
section_ok "seckill-persist and seckill: bad URLs exit 2, nothing opened"
[ "$fails" = 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "check-config: all checks passed"
