#!/bin/bash
# test_tls_stunnel.sh: the recipe of docs/ops/tls.md, for real. A throwaway
# CA signs a server and a client certificate; redis-server listens on TLS
# only (--port 0, client certificates required); stunnel in client mode
# offers plain redis:// on a free loopback port. Through it: the demo's
# sale (its invariant check must pass) and a dlock CLI lock, both seen on
# the TLS side with redis-cli --tls. Plain text to the TLS port is refused.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:?}
build=${DLOCK_BUILD_DIR:?}
. "$src/scripts/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-tls-XXXXXX")
trap 'dl_cleanup; rm -rf "$work"' EXIT
fail() { echo "FAIL [tls]: $*" >&2; for f in "$work"/*.log; do tail -n 5 "$f" >&2; done; exit 1; }
command -v stunnel4 >/dev/null || fail "stunnel4 not found (Debian package stunnel4)"

# --- a throwaway CA, a server certificate for 127.0.0.1, a client certificate
cd "$work"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=dlock test CA" \
    -keyout ca.key -out ca.crt 2>/dev/null
for who in server client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=dlock test $who" \
        -keyout "$who.key" -out "$who.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=%sAuth\n' "$who" >"$who.ext"
    openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
        -extfile "$who.ext" -out "$who.crt" 2>/dev/null
done
chmod 600 ./*.key

# --- TLS-only redis-server
tls_port=$(dl_free_port)
"${DL_PDEATHSIG[@]}" redis-server --port 0 --tls-port "$tls_port" --bind 127.0.0.1 \
    --tls-cert-file server.crt --tls-key-file server.key --tls-ca-cert-file ca.crt \
    --tls-auth-clients yes --dir "$work" --save '' --appendonly no >redis.log 2>&1 &
dl_track $!
tcli() { redis-cli -p "$tls_port" --tls --cacert ca.crt --cert client.crt --key client.key "$@"; }
for _ in $(seq 1 100); do tcli ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
[ "$(tcli ping 2>/dev/null)" = PONG ] || fail "TLS redis-server did not answer (does this redis-server build have TLS?)"
if redis-cli -p "$tls_port" ping 2>/dev/null | grep -q PONG; then
    fail "the TLS port answered plain text"
fi
echo "ok   TLS-only redis-server on $tls_port (plain text refused)"

# --- stunnel client: plain on 127.0.0.1:$plain_port -> TLS, server verified
plain_port=$(dl_free_port)
cat >stunnel.conf <<EOF
foreground = yes
pid =
output = $work/stunnel.log
[redis]
client = yes
accept = 127.0.0.1:$plain_port
connect = 127.0.0.1:$tls_port
verifyChain = yes
CAfile = $work/ca.crt
checkIP = 127.0.0.1
cert = $work/client.crt
key = $work/client.key
EOF
"${DL_PDEATHSIG[@]}" stunnel4 "$work/stunnel.conf" >stunnel.out 2>&1 &
dl_track $!
for _ in $(seq 1 100); do redis-cli -p "$plain_port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
[ "$(redis-cli -p "$plain_port" ping 2>/dev/null)" = PONG ] || fail "no PONG through stunnel"
url="redis://127.0.0.1:$plain_port"
echo "ok   stunnel $url -> rediss://127.0.0.1:$tls_port"

# --- a dlock CLI lock through the tunnel, seen on the TLS side while held
key=tls-test-lock
seen=$("$build/tools/dlock/dlock" --url "$url" -w 2s "$key" -- \
    redis-cli -p "$tls_port" --tls --cacert ca.crt --cert client.crt --key client.key exists "$key")
[ "$seen" = 1 ] || fail "dlock's lock key not seen on the TLS server while held (got '$seen')"
[ "$(tcli exists "$key")" = 0 ] || fail "dlock's lock key left after release"
echo "ok   dlock lock through stunnel held (key on the TLS server) and released"

# --- the demo's sale through the tunnel; its invariant check must pass
DEMO_SKIP_BUILD=1 BUILD_DIR="$build" REDIS_URL="$url" DEMO_OUT="$work/demo" \
    DEMO_BUYERS=${TLS_DEMO_BUYERS:-400} DEMO_SCALPERS=5 DEMO_BURST=20 DEMO_BAD=20 \
    DEMO_STOCK=50 DEMO_CONNECTIONS=32 "$src/scripts/demo.sh" >demo.log 2>&1 ||
    { cat demo.log >&2; fail "the demo's sale through stunnel failed"; }
grep -q "all invariants held" demo.log || fail "demo did not report its invariants"
campaigns=$(tcli --scan --pattern '{c:demo-*}:meta' | wc -l)
[ "$campaigns" -ge 1 ] || fail "the demo's campaign is not on the TLS server"
grep -E '^(accepted|oversold)' demo.log
echo "ok   demo sale through stunnel: all invariants held, campaign on the TLS server"

# --- a rediss:// URL is refused with a message naming the way out
msg=$("$build/tools/dlock/dlock" --url "rediss://127.0.0.1:$tls_port" "$key" -- true 2>&1) && rc=0 || rc=$?
[ "$rc" = 78 ] || fail "rediss:// URL: exit $rc, want 78 (bad URL)"
printf '%s' "$msg" | grep -q 'docs/ops/tls.md' || fail "rediss:// refusal does not point to the stunnel recipe: $msg"
echo "ok   rediss:// refused: $msg"
echo "tls: all checks passed"
