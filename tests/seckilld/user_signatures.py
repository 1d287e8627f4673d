#!/usr/bin/python3
"""user_signatures.py PORT_A PORT_B: signed identities against two running
seckilld instances (admin token "adm"). A: --user-secret new
--user-secret-previous old; B: --user-secret new --user-signature-legacy.
The v1 form (v1=<hex>;exp=<s>[;c=<campaign>]) is built here from
docs/http-api.md, not from seckilld's code. Also: control characters in a
campaign title are refused. Exits 1 on the first failed check."""
import hashlib, hmac, http.client, json, sys, time

A, B = int(sys.argv[1]), int(sys.argv[2])
ADMIN = {"Authorization": "Bearer adm"}
OK = (201, 202)  # accepted (202: no replica to acknowledge it)


def call(port, method, path, headers=None, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    out = r.status, r.read().decode()
    c.close()
    return out


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def v1(secret, user, exp, campaign=None):
    text = user + "\n" + str(exp) + ("\n" + campaign if campaign else "")
    mac = hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()
    return "v1=%s;exp=%d%s" % (mac, exp, ";c=" + campaign if campaign else "")


def legacy(secret, user):
    return hmac.new(secret.encode(), user.encode(), hashlib.sha256).hexdigest()


def buy(port, campaign, user, sig):
    h = {"X-User-Id": user}
    if sig is not None:
        h["X-User-Signature"] = sig
    st, body = call(port, "POST", "/v1/campaigns/%s/purchase" % campaign, h, '{"quantity":1}')
    err = json.loads(body).get("error", "") if body.startswith("{") else ""
    return st, err, body


def create(campaign, title="t"):
    now = int(time.time() * 1000)
    body = json.dumps({"id": campaign, "title": title, "stock": 1000, "per_user_limit": 1,
                       "starts_at": now - 1000, "ends_at": now + 3600000})
    return call(A, "POST", "/v1/campaigns", ADMIN, body)


for c in ("c1", "c2"):
    check(create(c)[0] == 201, "create " + c)
now = int(time.time())
hour = now + 3600

# the current and the previous secret; an unknown one
check(buy(A, "c1", "u1", v1("new", "u1", hour))[0] in OK, "v1 with the current secret: 201")
check(buy(A, "c1", "u2", v1("old", "u2", hour))[0] in OK, "v1 with the previous secret: 201 (rotation)")
st, err, _ = buy(B, "c1", "u3", v1("old", "u3", hour))
check((st, err) == (401, "unauthorized"), "the previous secret where none is configured: 401 (%d %s)" % (st, err))
st, err, _ = buy(A, "c1", "u4", v1("other", "u4", hour))
check((st, err) == (401, "unauthorized"), "another secret: 401 unauthorized (%d %s)" % (st, err))
st, err, _ = buy(A, "c1", "u5", v1("new", "someone-else", hour))
check((st, err) == (401, "unauthorized"), "a signature of another user: 401 (%d %s)" % (st, err))

# expiry, with the documented 30 s leeway
st, err, _ = buy(A, "c1", "u6", v1("new", "u6", now - 120))
check((st, err) == (401, "signature_expired"), "expired 120 s ago: 401 signature_expired (%d %s)" % (st, err))
st, err, _ = buy(A, "c1", "u7", v1("old", "u7", now - 120))
check((st, err) == (401, "signature_expired"), "expired, previous secret: 401 signature_expired (%d %s)" % (st, err))
check(buy(A, "c1", "u8", v1("new", "u8", now - 5))[0] in OK, "expired 5 s ago (within the leeway): 201")

# malformed
good = v1("new", "u9", hour)
mac = good[3:3 + 64]
for bad in ("v1=zz;exp=%d" % hour, "v1=" + mac, "v1=%s;exp=0%d" % (mac, hour), "v1=%s;exp=abc" % mac,
            "v2=%s;exp=%d" % (mac, hour), "v1=%s;exp=%d;c=bad id!" % (mac, hour), "v1=%s;exp=%d;x=1" % (mac, hour),
            "exp=%d;v1=%s" % (hour, mac), good + ";", good.upper(), "v1=%s;exp=%d;c=c1;c=c2" % (mac, hour), mac[:63]):
    st, err, _ = buy(A, "c1", "u9", bad)
    check((st, err) == (401, "signature_malformed"), "malformed %r: 401 signature_malformed (%d %s)" % (bad, st, err))
st, err, _ = buy(A, "c1", "u9", None)
check((st, err) == (401, "unauthorized"), "missing: 401 unauthorized (%d %s)" % (st, err))

# the old unexpiring form: only where the legacy switch is on
st, err, _ = buy(A, "c1", "u10", legacy("new", "u10"))
check((st, err) == (401, "signature_legacy"), "legacy form without the switch: 401 signature_legacy (%d %s)" % (st, err))
check(buy(B, "c1", "u11", legacy("new", "u11"))[0] in OK, "legacy form with --user-signature-legacy: 201")
st, err, _ = buy(B, "c1", "u12", legacy("other", "u12"))
check((st, err) == (401, "unauthorized"), "legacy form, wrong secret: 401 (%d %s)" % (st, err))
check(buy(B, "c1", "u13", v1("new", "u13", hour))[0] in OK, "v1 on the legacy instance too: 201")

# bound to a campaign
st, err, _ = buy(A, "c2", "u14", v1("new", "u14", hour, "c1"))
check((st, err) == (401, "signature_campaign"), "bound to c1, used on c2: 401 signature_campaign (%d %s)" % (st, err))
st, err, _ = buy(A, "c1", "u14", v1("new", "u14", hour, "c2"))
check((st, err) == (401, "signature_campaign"), "bound to c2, used on c1: 401 (%d %s)" % (st, err))
st, err, body = buy(A, "c1", "u14", v1("new", "u14", hour, "c1"))
check(st in OK, "bound to c1, used on c1: 201 (%d %s)" % (st, body))
order = json.loads(body)["order_id"]
st, err, _ = buy(A, "c1", "u15", v1("new", "u15", hour) + ";c=c1")
check((st, err) == (401, "unauthorized"), "a campaign appended to an unbound MAC: 401 (%d %s)" % (st, err))
# an order read under a signature bound to another campaign: the 404 of no order
who = lambda c: {"X-User-Id": "u14", "X-User-Signature": v1("new", "u14", hour, c)}
st, mine = call(A, "GET", "/v1/orders/" + order, who("c1"))
check(st == 200, "the buyer reads the order under a signature bound to its campaign (%d %s)" % (st, mine))
st, other = call(A, "GET", "/v1/orders/" + order, who("c2"))
st2, none = call(A, "GET", "/v1/orders/" + order[:-1] + ("0" if order[-1] != "0" else "1"), who("c1"))
check(st == 404 and (st, other) == (st2, none),
      "bound to another campaign: the order reads as nonexistent (%d %s / %d %s)" % (st, other, st2, none))

# control characters in a campaign title
for title in ("red\x1b[31m", "line\nforged", "bell\x07", "csi\u009b2J", "del\x7f"):
    st, body = create("t%d" % abs(hash(title) % 100000), title)
    check(st == 400 and "control" in body, "title %r refused: %d %s" % (title, st, body))
st, body = create("tok", "Sale \u00e9t\u00e9 \u2014 50% \"off\"")
check(st == 201, "a title with UTF-8 and quotes is accepted (%d %s)" % (st, body))
print("user signatures: all checks passed")
