#!/bin/bash
# test_shard_admin_sale.sh: the admin tool on a campaign of K = 3 buckets
# heated by a real seckilld on a real 3-master Redis Cluster
# (tests/support/cluster.sh): `seckill campaigns show` names, for every
# bucket, the master the Cluster says serves its slot, and the three are
# different masters (seckilld placed them with sk_buckets_place); after a
# sale the buckets' stock, buyers and units in transit add up to the stock;
# `seckill metrics` exports the same per bucket; once seckill-persist drained
# the three streams reconcile is clean, and `seckill cancel` gives the unit
# back to the buyer's home bucket only (reconcile still clean); `seckill
# barrier` runs one bucket's barrier or every bucket's in turn.
set -euo pipefail
src=${DLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${DLOCK_BUILD_DIR:-$src/build}
. "$src/scripts/lib.sh"
. "$src/tests/support/cluster.sh"
bin="$build/tools"
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-shard-admin-XXXXXX")
trap 'dl_cleanup; [ -n "${DLOCK_TEST_KEEP:-}" ] || rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "== $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
TOKEN=shard-admin
STOCK=30

cluster_start "$work" 3 0 || fail "cluster fixture"
export REDIS_URL=$CLUSTER_URL DATABASE_URL="sqlite://$work/orders.db"
port=$(dl_free_port)
"$bin/seckilld/seckilld" --port "$port" --bind 127.0.0.1 --admin-token "$TOKEN" --replica-acks 0 \
    >"$work/seckilld.log" 2>&1 &
dl_track $!
base="http://127.0.0.1:$port"
dl_wait_http "$base/healthz" 100 || fail "seckilld not healthy"

now_ms=$(($(date +%s) * 1000))
code=$(curl -s -o "$work/create.out" -w '%{http_code}' -X POST "$base/v1/campaigns" \
    -H "Authorization: Bearer $TOKEN" -d "{\"id\":\"hot\",\"title\":\"t\",\"stock\":$STOCK,\"per_user_limit\":1,
    \"shards\":3,\"starts_at\":$((now_ms - 1000)),\"ends_at\":$((now_ms + 3600000)),\"price_cents\":1}")
[ "$code" = 201 ] || fail "create: $code $(cat "$work/create.out")"
for i in $(seq 1 12); do
    code=$(curl -s -o "$work/buy-$i.json" -w '%{http_code}' -X POST "$base/v1/campaigns/hot/purchase" \
        -H "X-User-Id: u$i")
    case $code in 201 | 202) ;; *) fail "purchase of u$i answered $code" ;; esac
done

"$bin/seckill/seckill" campaigns show hot >"$work/show.txt" 2>&1 || fail "campaigns show: $(cat "$work/show.txt")"
cat "$work/show.txt"
"$bin/seckill/seckill" campaigns show hot --json >"$work/show.json" 2>&1 || fail "campaigns show --json"
masters=()
for j in 0 1 2; do
    tag=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["buckets"][int(sys.argv[2])]["tag"])' \
        "$work/show.json" "$j")
    want="127.0.0.1:$(cluster_port_of_key "{$tag}:meta")"
    line=$(grep "^  bucket $j {$tag} on " "$work/show.txt") || fail "no line for bucket $j"
    case $line in "  bucket $j {$tag} on $want: "*) ;; *) fail "bucket $j: '$line', its slot's master is $want" ;; esac
    masters+=("$want")
done
n=$(printf '%s\n' "${masters[@]}" | sort -u | wc -l)
[ "$n" = 3 ] || fail "the three buckets are on $n masters: ${masters[*]}"
echo "three buckets on three masters: ${masters[*]}"

"$PY" - "$work/show.json" "$STOCK" <<'PY' || fail "the buckets do not add up"
import json, sys
s = json.load(open(sys.argv[1]))
b = s["buckets"]
assert s["shards"] == 3 and len(b) == 3, s
bought = sum(x["bought_units"] for x in b)
left = sum(x["remaining"] for x in b) + s["in_transit"]
assert bought == 12 and left + bought == int(sys.argv[2]), (left, bought, s)
assert sum(x["stream_entries"] for x in b) == 12, b
PY
metrics=$("$bin/seckill/seckill" metrics --campaign hot)
for j in 0 1 2; do
    case $metrics in *"seckill_bucket_remaining{campaign=\"hot\",bucket=\"$j\"} "*) ;;
    *) fail "seckill metrics has no seckill_bucket_remaining of bucket $j" ;; esac
done
case $metrics in *'seckill_campaign_shards{campaign="hot"} 3'*) ;; *) fail "seckill metrics: shards" ;; esac
echo "campaigns show and metrics list the three buckets"

"$bin/seckill-persist/seckill-persist" --drain --quiet >"$work/persist.log" 2>&1 || fail "seckill-persist --drain"
"$bin/seckill/seckill" reconcile --campaign hot --wait 10s >"$work/reconcile.txt" 2>&1 ||
    fail "reconcile after the sale: $(cat "$work/reconcile.txt")"
# u5's order cancelled: its home bucket gets the unit, the others keep theirs
oid=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["order_id"])' "$work/buy-5.json")
stocks() { "$bin/seckill/seckill" campaigns show hot --json |
    "$PY" -c 'import json, sys; print(" ".join(str(b["remaining"]) for b in json.load(sys.stdin)["buckets"]))'; }
before=$(stocks)
"$bin/seckill/seckill" cancel "$oid" --reason test >"$work/cancel.txt" 2>&1 || fail "cancel: $(cat "$work/cancel.txt")"
after=$(stocks)
# u5's home bucket: FNV-1a (32 bit) of the user id mod K (buckets.h)
"$PY" - "$before" "$after" <<'PY' || fail "cancel restocked '$before' -> '$after'"
import sys
b = [int(x) for x in sys.argv[1].split()]
a = [int(x) for x in sys.argv[2].split()]
def fnv(s):
    h = 2166136261
    for c in s.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h
home = fnv("u5") % 3
want = [x + (1 if j == home else 0) for j, x in enumerate(b)]
assert a == want, ("stock before", b, "after", a, "home bucket of u5", home)
print("cancel: bucket %d got the unit back (%s -> %s)" % (home, b, a))
PY
"$bin/seckill/seckill" reconcile --campaign hot >"$work/reconcile2.txt" 2>&1 ||
    fail "reconcile after the cancellation: $(cat "$work/reconcile2.txt")"

# the barrier by hand: one bucket, then every bucket in turn; bad buckets refused
"$bin/seckill-persist/seckill-persist" --block 100ms >"$work/persist-bg.log" 2>&1 &
dl_track $!
for b in 3 x -1; do
    st=0
    "$bin/seckill/seckill" barrier --campaign hot --bucket "$b" >/dev/null 2>"$work/bad.txt" || st=$?
    [ "$st" = 2 ] || fail "barrier --bucket $b: exit $st ($(cat "$work/bad.txt"))"
done
"$bin/seckill/seckill" barrier --campaign hot --bucket 1 --wait 10s >"$work/barrier1.txt" 2>&1 ||
    fail "barrier --bucket 1: $(cat "$work/barrier1.txt")"
grep -q "^campaign hot bucket 1 {c:hot/1\.[0-9]*}: barrier done" "$work/barrier1.txt" ||
    fail "barrier --bucket 1 said: $(cat "$work/barrier1.txt")"
"$bin/seckill/seckill" barrier --campaign hot --wait 20s >"$work/barrier.txt" 2>&1 ||
    fail "barrier of every bucket: $(cat "$work/barrier.txt")"
n=$(grep -c "^campaign hot bucket [012] {.*}: barrier done" "$work/barrier.txt" || true)
[ "$n" = 3 ] || fail "barrier of every bucket: $(cat "$work/barrier.txt")"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/v1/campaigns/hot/purchase" -H "X-User-Id: late")
case $code in 201 | 202) ;; *) fail "a purchase after the barriers answered $code" ;; esac
"$bin/seckill/seckill" reconcile --campaign hot --wait 10s >"$work/reconcile3.txt" 2>&1 ||
    fail "reconcile after the barriers: $(cat "$work/reconcile3.txt")"
echo "barrier of one bucket and of every bucket; reconcile clean"
echo "PASS"
