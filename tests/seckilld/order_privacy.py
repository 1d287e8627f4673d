#!/usr/bin/env python3
"""order_privacy.py PORT1 PORT2 TRIES: the checks of test_order_privacy.sh
against two running seckilld instances (admin token "adm", user secret
"usersecret", a database and a persister behind them). Prints the medians
of TRIES refusals of each kind (timing is reported, never asserted)."""
import hashlib, hmac, http.client, json, os, statistics, sys, time

P1, P2, TRIES = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ADMIN = {"Authorization": "Bearer adm"}
conns = {}


def call(port, method, path, headers=None, body=None):
    c = conns.get(port)
    if c is None:
        c = conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    return r.status, r.read().decode()


def who(user):
    exp = str(int(time.time()) + 3600)
    sig = hmac.new(b"usersecret", (user + "\n" + exp).encode(), hashlib.sha256).hexdigest()
    return {"X-User-Id": user, "X-User-Signature": "v1=%s;exp=%s" % (sig, exp)}


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


now = int(time.time() * 1000)
camp = {"id": "priv", "stock": 100, "per_user_limit": 1, "starts_at": now - 60000, "ends_at": now + 3600000}
st, body = call(P1, "POST", "/v1/campaigns", ADMIN, json.dumps(camp))
check(st == 201, "create: %d %s" % (st, body))

# the sale: 30 victims over both instances, the attacker once on each
mine, theirs = [], {}
check(call(P1, "POST", "/v1/campaigns/priv/purchase", who("mallory"), '{"quantity":1}')[0] == 201, "buy")
for i in range(30):
    st, body = call(P1 if i % 2 else P2, "POST", "/v1/campaigns/priv/purchase", who("v%d" % i), '{"quantity":1}')
    check(st == 201, "victim %d: %d %s" % (i, st, body))
    theirs["v%d" % i] = json.loads(body)["order_id"]
st, body = call(P2, "POST", "/v1/campaigns/priv/purchase", who("mallory2"), '{"quantity":1}')
check(st == 201, "buy 2")
mine = [json.loads(body)["order_id"]]
st, body = call(P1, "GET", "/v1/orders/" + mine[0], who("mallory2"))
check(st == 200 and json.loads(body)["user"] == "mallory2", "the buyer reads their own order: %d %s" % (st, body))

# the attacker's enumeration: the ids buyers are handed are <id>-<tag>;
# the internal ids are time-ordered (ms << 22 | worker << 12 | seq)
inner = [int(v.split("-")[0]) for v in theirs.values()] + [int(mine[0].split("-")[0])]
lo, hi = min(i >> 22 for i in inner) - 200, max(i >> 22 for i in inner) + 200
workers = sorted({(i >> 12) & 1023 for i in inner})
found, tries = 0, 0
refusal = None
for ms in range(lo, hi + 1):
    for w in workers:
        oid = (ms << 22) | (w << 12)
        for form in ("%d" % oid, "%d-%016x" % (oid, (oid * 2654435761) & (2**64 - 1))):
            st, body = call(P1 if tries % 2 else P2, "GET", "/v1/orders/" + form, who("mallory2"))
            tries += 1
            if st == 200:
                found += 1
            else:
                refusal = refusal or (st, body)
                check((st, body) == refusal, "every refusal is the same: %r vs %r" % ((st, body), refusal))
print("enumeration: %d GETs over %d ms x %d workers, %d orders of others found" % (tries, hi - lo + 1,
                                                                                   len(workers), found))
check(found == 0, "the enumeration found %d orders" % found)
check(refusal[0] == 404 and json.loads(refusal[1])["error"] == "not_found", "refusal %r" % (refusal,))

# another buyer with a victim's real id gets exactly the nonexistent answer
victim = theirs["v0"]
for port in (P1, P2):
    for m, path in (("GET", ""), ("POST", "/pay"), ("POST", "/cancel")):
        got = call(port, m, "/v1/orders/" + victim + path, who("mallory2"), "" if m == "POST" else None)
        gone = call(port, m, "/v1/orders/1-0123456789abcdef" + path, who("mallory2"), "" if m == "POST" else None)
        check(got == gone == refusal, "%s %s of another buyer: %r, nonexistent %r" % (m, path, got, gone))
# the admin token reads any order, by the public or the internal id
st, body = call(P2, "GET", "/v1/orders/" + victim, ADMIN)
check(st == 200 and json.loads(body)["user"] == "v0", "admin reads: %d %s" % (st, body))
internal = json.loads(body)["internal_id"]
st, body = call(P1, "GET", "/v1/orders/" + internal, ADMIN)
check(st == 200 and json.loads(body)["order_id"] == victim, "admin by internal id: %d %s" % (st, body))
# without the signature there is no identity at all
check(call(P1, "GET", "/v1/orders/" + victim, {"X-User-Id": "v0"})[0] == 401, "unsigned refused")


def persisted(ref):
    for _ in range(100):
        st, body = call(P1, "GET", "/v1/orders/" + ref, ADMIN)
        if st == 200 and json.loads(body)["state"] == "confirmed":
            return
        time.sleep(0.1)
    check(False, "order %s never persisted" % ref)


# the buyer pays their own order on the other instance; a paid one stays paid
persisted(victim)
# read from the database: its own campaign named is the order; another
# campaign named does not hold it (404, never a false "lost")
st, body = call(P1, "GET", "/v1/orders/" + victim + "?campaign=priv", who("v0"))
check(st == 200 and json.loads(body)["state"] == "confirmed", "own campaign named: %d %s" % (st, body))
st, body = call(P1, "GET", "/v1/orders/" + victim + "?campaign=other", who("v0"))
b = json.loads(body)
check(st == 404 and b["error"] == "not_found" and "state" not in b, "another campaign named: %d %s" % (st, body))
st, body = call(P2, "POST", "/v1/orders/" + victim + "/pay", who("v0"), "")
check(st == 200 and json.loads(body)["status"] == "paid", "own pay: %d %s" % (st, body))
st, body = call(P1, "POST", "/v1/orders/" + victim + "/cancel", who("v0"), "")
check(st == 409 and json.loads(body)["error"] == "paid", "a paid order is not cancelled: %d %s" % (st, body))


def remaining():
    return json.loads(call(P1, "GET", "/v1/campaigns/priv")[1])["remaining"]


# the buyer cancels their own order: twice the same answer, the unit back
other = theirs["v1"]
persisted(other)
before = remaining()
first = call(P1, "POST", "/v1/orders/" + other + "/cancel", who("v1"), "")
again = call(P2, "POST", "/v1/orders/" + other + "/cancel", who("v1"), "")
check(first[0] == 200 and json.loads(first[1])["state"] == "cancelled", "cancel: %r" % (first,))
check(first == again, "cancel twice: %r then %r" % (first, again))
st, body = call(P2, "GET", "/v1/orders/" + other, who("v1"))
check(st == 200 and json.loads(body)["state"] == "cancelled", "a cancelled order reads cancelled: %s" % body)
for _ in range(100):
    if remaining() == before + 1:
        break
    time.sleep(0.1)
check(remaining() == before + 1, "the unit is back in Redis: %d -> %d" % (before, remaining()))
# (a route without parameters ignores its query: the body's quantity is
# what is bought, never the query's)
st, body = call(P1, "POST", "/v1/campaigns/priv/purchase?quantity=5", who("v1"), '{"quantity":1}')
check(st == 201, "the buyer's quota is back too: %d %s" % (st, body))
st, body = call(P1, "GET", "/v1/orders/" + json.loads(body)["order_id"], who("v1"))
check(st == 200 and json.loads(body)["quantity"] == 1, "the query bought nothing: %d %s" % (st, body))

# the public metrics and health name no worker id and no Redis node
st, m = call(P1, "GET", "/metrics")
check(st == 200 and "seckill_worker_id" not in m and "node=" not in m, "public /metrics shows the insides")
st, m = call(P1, "GET", "/metrics", ADMIN)
check("seckill_worker_id" in m, "the admin scrape has the worker id")
st, h = call(P1, "GET", "/healthz")
check(st == 200 and "127.0.0.1" not in h, "public /healthz: %s" % h)


# timing of the two refusals (reported only)
def median_us(path):
    t = []
    for _ in range(TRIES):
        a = time.perf_counter()
        call(P1, "GET", path, who("mallory2"))
        t.append((time.perf_counter() - a) * 1e6)
    return statistics.median(t)


a = median_us("/v1/orders/" + theirs["v2"])
b = median_us("/v1/orders/%d-0123456789abcdef" % ((lo << 22) | 7))
print("refusal medians over %d tries: another buyer's order %.0f us, nonexistent %.0f us" % (TRIES, a, b))
print("order privacy: ok")
