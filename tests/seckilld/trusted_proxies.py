#!/usr/bin/env python3
"""trusted_proxies.py PORT: the checks of test_trusted_proxies.sh against a
running seckilld (admin token "adm", --trusted-proxies 127.0.0.2/32,
--ip-rate-limit 5 per minute)."""
import http.client, json, sys, time

PORT = int(sys.argv[1])


def call(src, method, path, headers, body=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10, source_address=(src, 0))
    c.putrequest(method, path, skip_accept_encoding=True)
    for k, v in headers:  # a list: a header may repeat
        c.putheader(k, v)
    data = body.encode() if body else b""
    c.putheader("Content-Length", str(len(data)))
    c.endheaders(data)
    r = c.getresponse()
    out = r.status, r.read().decode()
    c.close()
    return out


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


now = int(time.time() * 1000)
for cid in ("viaproxy", "direct", "bad", "v6net", "mapped"):
    camp = {"id": cid, "stock": 1000, "per_user_limit": 1, "starts_at": now - 60000, "ends_at": now + 3600000}
    st, body = call("127.0.0.1", "POST", "/v1/campaigns", [("Authorization", "Bearer adm")], json.dumps(camp))
    check(st == 201, "create %s: %d %s" % (cid, st, body))


def buy(src, camp, user, extra):
    return call(src, "POST", "/v1/campaigns/%s/purchase" % camp, [("X-User-Id", user)] + extra, '{"quantity":1}')


# behind a proxy that appends: the client's own left part changes each time
codes = [buy("127.0.0.2", "viaproxy", "p%d" % i, [("X-Forwarded-For", "10.9.%d.1, 198.51.100.7" % i)])[0]
         for i in range(10)]
check(sum(c in (201, 202) for c in codes) == 5 and codes.count(429) == 5, "via the proxy: %s" % codes)
# a second trusted hop on the right is skipped: same client, still limited
st, _ = buy("127.0.0.2", "viaproxy", "p-extra", [("X-Forwarded-For", "198.51.100.7, 127.0.0.2")])
check(st == 429, "the rightmost untrusted entry is the client: %d" % st)
# Forwarded: for= counts the same way, in its own header
st, _ = buy("127.0.0.2", "viaproxy", "p-fwd", [("Forwarded", 'for="[2001:db8::1]:4711";proto=https')])
check(st in (201, 202), "Forwarded for= a new client: %d" % st)
# IPv6 clients count per /64 (--ipv6-prefix, default 64): ten hosts of one
# network are one client; a host of another /64 is another client
codes = [buy("127.0.0.2", "v6net", "n%d" % i, [("X-Forwarded-For", "2001:db8:0:1:%x::%x" % (i * 4099, i + 1))])[0]
         for i in range(10)]
check(sum(c in (201, 202) for c in codes) == 5 and codes.count(429) == 5, "one IPv6 /64: %s" % codes)
st, _ = buy("127.0.0.2", "v6net", "n-other", [("X-Forwarded-For", "2001:db8:0:2::1")])
check(st in (201, 202), "another /64 is another client: %d" % st)
# ::ffff:a.b.c.d is the IPv4 client a.b.c.d
codes = [buy("127.0.0.2", "mapped", "m%d" % i,
             [("X-Forwarded-For", ("::ffff:198.51.100.9", "198.51.100.9", "::FFFF:c633:6409")[i % 3])])[0]
         for i in range(10)]
check(sum(c in (201, 202) for c in codes) == 5 and codes.count(429) == 5, "IPv4-mapped: %s" % codes)
# an untrusted peer is keyed on itself whatever it forwards
codes = [buy("127.0.0.1", "direct", "d%d" % i, [("X-Forwarded-For", "203.0.113.%d" % i)])[0] for i in range(10)]
check(sum(c in (201, 202) for c in codes) == 5 and codes.count(429) == 5, "direct: %s" % codes)
# not addresses: refused, from a trusted peer (an untrusted one is not read)
for bad in ("not-an-ip", "{c:xf1}", "a:b:c", "1.2.3.4, ", "1.2.3.4:80", "", "1.2.3.4 5.6.7.8"):
    st, body = buy("127.0.0.2", "bad", "b", [("X-Forwarded-For", bad)])
    check(st == 400 and json.loads(body)["error"] == "bad_request", "X-Forwarded-For %r: %d %s" % (bad, st, body))
for bad in ("for=unknown", "for=_hidden", "proto=http", "for=1.2.3.4;for=5.6.7.8", 'for="[::1"'):
    st, body = buy("127.0.0.2", "bad", "b", [("Forwarded", bad)])
    check(st == 400, "Forwarded %r: %d %s" % (bad, st, body))
# one identity per request
for name, v in (("X-User-Id", "eve"), ("X-User-Signature", "00"), ("Authorization", "Bearer adm")):
    hdrs = [(name, v), (name, v)] if name != "X-User-Id" else []
    st, body = call("127.0.0.1", "POST", "/v1/campaigns/bad/purchase",
                    [("X-User-Id", "eve")] + ([("X-User-Id", "mallory")] if name == "X-User-Id" else hdrs),
                    '{"quantity":1}')
    check(st == 400 and "more than one" in body, "duplicated %s: %d %s" % (name, st, body))
print("trusted proxies and one identity per request: ok")
