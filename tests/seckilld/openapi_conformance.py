#!/usr/bin/python3
"""openapi_conformance.py: docs/openapi.yaml against a live seckilld.

  openapi_conformance.py --spec docs/openapi.yaml --build BUILD_DIR --work DIR

Lints the document (openapi_check.lint), shows the checker refusing five
deliberately wrong cases, then starts a private redis-server, two
seckilld (A: admin token, SQLite database, rate limit, short timeouts; B:
signed identities, no database, a connection cap) and seckill-persist, and
drives them through every route and every status the document lists: the
HTTP layer's refusals on every route, 202 then confirmed, the replays, pay
and cancel, 401/404/405/409/413/429, 503 recovering, then degraded mode
(Redis stopped). Every answer is checked against the document: a status,
header or field it does not describe fails, and so does a listed status
that no request produced. Processes are stopped by PID. Exit 1 on failure."""
import argparse
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openapi_check  # noqa: E402
from http_wire import Reader, Servers, connect, free_port, request  # noqa: E402

ADMIN, SECRET = "adm-token", "user-secret-1"
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL", msg, flush=True)


def raw_request(method, target, headers=(), body=b"", version="1.1"):
    head = "%s %s HTTP/%s\r\nHost: x\r\n" % (method, target, version)
    head += "".join("%s: %s\r\n" % (k, v) for k, v in headers)
    if body and not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers):
        head += "Content-Length: %d\r\n" % len(body)
    return head.encode("latin-1") + b"\r\n" + body


class Driver:
    """Sends requests, checks each answer against the contract."""

    def __init__(self, contract):
        self.c, self.count, self.headers_seen = contract, 0, set()

    def send(self, oid, port, raw, expect=None, code=None):
        """The answer (status, headers, body) to raw, checked against
        operation oid; expect/code: the status and error code this case is
        about (a different one fails: the case did not test what it says)."""
        return self.check(oid, request(port, raw, timeout=5), expect, code, raw)

    def check(self, oid, resp, expect=None, code=None, raw=b""):
        st, hdrs, body = resp or (0, {}, b"")
        self.count += 1
        self.headers_seen.update(hdrs)
        if st == 0:
            fail("%s: no answer to %r" % (oid, raw[:80]))
            return st, hdrs, body
        for p in self.c.check(oid, st, hdrs, body):
            fail(p)
        if expect is not None and st != expect:
            fail("%s: expected %d, got %d %s" % (oid, expect, st, body[:200]))
        if code is not None:
            try:
                got = json.loads(body).get("error")
            except (ValueError, AttributeError):
                got = None
            if got != code:
                fail("%s: expected error %s, got %s" % (oid, code, body[:200]))
        return st, hdrs, body

    def call(self, oid, port, method, target, headers=(), body=b"", expect=None, code=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        return self.send(oid, port, raw_request(method, target, list(headers), body), expect, code)

    def json(self, *a, **kw):
        st, h, body = self.call(*a, **kw)
        try:
            return st, h, json.loads(body)
        except ValueError:
            return st, h, {}


def signature(user, exp, campaign=None, secret=SECRET):
    msg = "%s\n%d" % (user, exp) + ("\n" + campaign if campaign else "")
    mac = hmac.new(secret.encode(), msg.encode(), hashlib.sha256).hexdigest()
    return "v1=%s;exp=%d" % (mac, exp) + (";c=" + campaign if campaign else "")


def signed(user, **kw):
    return [("X-User-Id", user), ("X-User-Signature", signature(user, int(time.time()) + 300, **kw))]


def stop(p):
    """SIGTERM, SIGKILL after 10 s: a process this script started, by its PID."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def redis_cmd(port, *args):
    """One command over RESP (the reply's first line is enough here)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    out = "*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a.encode()), a) for a in args)
    s.sendall(out.encode())
    reply = s.recv(4096)
    s.close()
    return reply


# ---- the wrong documents the checker must refuse ------------------------------


def self_test(doc, d_port):
    """The checker fails on deliberately wrong documents: an example its
    schema refuses and a misspelt field (lint), a field the server sends
    that the schema drops, a body and a status the server answers that the
    document drops."""
    wrong = openapi_check.mutate(doc, "components/schemas/Campaign/properties/state/enum", ["scheduled", "ended"])
    if not any("does not fit its schema" in p for p in openapi_check.lint(wrong)):
        fail("self-test: lint accepted an example outside its schema")
    wrong = openapi_check.mutate(doc, "components/headers/Allow/requried", True)
    if not any("'requried' is not a field of a header object" in p for p in openapi_check.lint(wrong)):
        fail("self-test: lint accepted a misspelt field")
    wrong = openapi_check.mutate(doc, "components/schemas/Campaign/properties",
                                 {k: v for k, v in doc["components"]["schemas"]["Campaign"]["properties"].items()
                                  if k != "sold"})
    wrong["components"]["schemas"]["Campaign"]["required"].remove("sold")
    st, h, body = request(d_port, raw_request("GET", "/v1/campaigns/c-live"))
    probs = openapi_check.Contract(wrong).check("getCampaign", st, h, body)
    if not any("body.sold not in the contract" in p for p in probs):
        fail("self-test: a field the schema does not name passed: %s" % probs)
    wrong = openapi_check.mutate(doc, "paths/~1ping/get/responses", {"200": {"description": "x"}})
    st, h, body = request(d_port, raw_request("GET", "/ping"))
    probs = openapi_check.Contract(wrong).check("ping", st, h, body)
    if not any("a body the contract does not describe" in p for p in probs):
        fail("self-test: an undescribed body passed: %s" % probs)
    st, h, body = request(d_port, raw_request("POST", "/ping"))
    if not openapi_check.Contract(wrong).check("ping", st, h, body):
        fail("self-test: an undescribed status (405) passed")
    print("self-test: the checker refuses the five wrong cases", flush=True)


# ---- the HTTP layer's answers, on every route ------------------------------------


def layer_cases(d, port, targets):
    """400, 405, 408, 413, 414, 417, 431, 501, 505 on each operation."""
    for oid, (method, target) in targets.items():
        other = "POST" if method == "GET" else "GET"
        d.call(oid, port, other, target, expect=405, code="method_not_allowed")
        d.send(oid, port, raw_request(method, target, [("Content-Length", "0"), ("Content-Length", "0")]),
               expect=400, code="bad_request")
        d.send(oid, port, raw_request(method, target, [("Content-Length", "5")]), expect=408,
               code="request_timeout")
        d.send(oid, port, raw_request(method, target, [("Content-Length", "100000")]), expect=413,
               code="too_large")
        sep = "&" if "?" in target else "?"
        d.send(oid, port, raw_request(method, target + sep + "a" * 5000), expect=414, code="uri_too_long")
        d.send(oid, port, raw_request(method, target, [("Expect", "later")]), expect=417,
               code="expectation_failed")
        d.send(oid, port, raw_request(method, target, [("X-H%d" % i, "v") for i in range(101)]), expect=431,
               code="headers_too_large")
        d.send(oid, port, raw_request(method, target, [("Transfer-Encoding", "gzip")]), expect=501,
               code="not_implemented")
        d.send(oid, port, raw_request(method, target, version="2.0"), expect=505, code="version_not_supported")


def connection_cap(d, port, targets):
    """503 on each operation: a connection over max-connections-per-address (3)."""
    idle = [connect(port) for _ in range(3)]
    time.sleep(0.3)
    for oid in targets:
        # answered at accept, before any request is read (sending one could
        # turn the close into a reset that loses the answer)
        s = connect(port)
        d.check(oid, Reader(s).response(), expect=503, code="unavailable")
        s.close()
    for s in idle:
        s.close()


# ---- the scenario ------------------------------------------------------------------


def campaigns(d, a):
    now = int(time.time() * 1000)
    live = {"starts_at": now - 60000, "ends_at": now + 3600000}
    adm = [("Authorization", "Bearer " + ADMIN)]
    for cid, extra in (("c-live", {"stock": 100}), ("c-res", {"stock": 10, "db_reserve": 2}),
                       ("c-out", {"stock": 0}), ("c-bar", {"stock": 5}),
                       ("c-future", {"stock": 5, "starts_at": now + 3600000, "ends_at": now + 7200000}),
                       ("c-past", {"stock": 5, "starts_at": now - 7200000, "ends_at": now - 3600000})):
        body = dict(live, id=cid, title="conformance " + cid, per_user_limit=1, **extra)
        d.call("createCampaign", a, "POST", "/v1/campaigns", adm, body, expect=201)
    d.call("createCampaign", a, "POST", "/v1/campaigns", adm, dict(live, id="c-live", stock=1), expect=409,
           code="exists")
    d.call("createCampaign", a, "POST", "/v1/campaigns", [], dict(live, id="c-x", stock=1), expect=401,
           code="unauthorized")
    d.call("createCampaign", a, "POST", "/v1/campaigns", adm, dict(live, id="c-x", stock=1, colour="red"),
           expect=400, code="bad_request")
    d.call("getCampaign", a, "GET", "/v1/campaigns/c-live", expect=200)
    d.call("getCampaign", a, "GET", "/v1/campaigns/c-none", expect=404, code="not_found")
    d.call("preheatCampaign", a, "POST", "/v1/campaigns/c-live/preheat", adm, expect=409, code="conflict")
    d.call("preheatCampaign", a, "POST", "/v1/campaigns/c-live/preheat?force=1", adm, expect=200)
    d.call("preheatCampaign", a, "POST", "/v1/campaigns/c-live/preheat?force=2", adm, expect=400,
           code="bad_request")
    d.call("preheatCampaign", a, "POST", "/v1/campaigns/c-live/preheat", expect=401, code="unauthorized")
    d.call("preheatCampaign", a, "POST", "/v1/campaigns/c-none/preheat", adm, expect=404, code="not_found")


def until_confirmed(d, port, location, who):
    """Polls a 202's Location until the order is confirmed (the persister
    wrote it); fails after 15 s."""
    deadline = time.time() + 15
    while time.time() < deadline:
        st, _, o = d.json("getOrder", port, "GET", location, who, expect=200)
        if o.get("state") == "confirmed":
            return o
        time.sleep(0.1)
    fail("order %s never confirmed" % location)
    return {}


def buy(d, port, cid, who, key=None, qty=1, **kw):
    hdrs = list(who) + ([("Idempotency-Key", key)] if key else [])
    return d.json("purchase", port, "POST", "/v1/campaigns/%s/purchase" % cid, hdrs, {"quantity": qty}, **kw)


def orders(d, a):
    """202 -> confirmed -> replay 201 -> pay; another order cancelled; refusals."""
    alice, bob, erin = [("X-User-Id", "alice")], [("X-User-Id", "bob")], [("X-User-Id", "erin")]
    adm = [("Authorization", "Bearer " + ADMIN)]
    st, h, o = buy(d, a, "c-live", alice, key="k-alice-1", expect=202)
    loc = h.get("location", "/v1/orders/none")
    until_confirmed(d, a, loc, alice)
    d.call("purchase", a, "POST", "/v1/campaigns/c-live/purchase", alice + [("Idempotency-Key", "k-alice-1")],
           {"quantity": 1}, expect=201)
    d.call("payOrder", a, "POST", loc + "/pay", alice, expect=200)
    d.call("payOrder", a, "POST", loc + "/pay", alice, expect=200)
    d.call("cancelOrder", a, "POST", loc + "/cancel", alice, expect=409, code="paid")
    buy(d, a, "c-live", alice, expect=409, code="limit_reached")
    st, h, o = buy(d, a, "c-live", bob, key="k-bob-1", expect=202)
    bob_loc = h.get("location", "/v1/orders/none")
    until_confirmed(d, a, bob_loc, bob)
    d.call("cancelOrder", a, "POST", bob_loc + "/cancel", bob, expect=200)
    d.call("cancelOrder", a, "POST", bob_loc + "/cancel", bob, expect=200)
    d.call("payOrder", a, "POST", bob_loc + "/pay", bob, expect=409, code="cancelled")
    buy(d, a, "c-live", bob, key="k-bob-1", expect=200)  # the key's order, cancelled since
    # who may see an order: nobody but its buyer and the admin token
    d.call("getOrder", a, "GET", loc, erin, expect=404, code="not_found")
    d.call("getOrder", a, "GET", loc + "?campaign=c-res", alice, expect=404, code="not_found")
    d.call("getOrder", a, "GET", loc + "?colour=red", alice, expect=400, code="bad_request")
    d.call("getOrder", a, "GET", loc, expect=401, code="unauthorized")
    d.call("getOrder", a, "GET", loc, adm, expect=200)
    d.call("getOrder", a, "GET", "/v1/orders/123", alice, expect=404, code="not_found")
    d.call("payOrder", a, "POST", loc + "/pay", erin, expect=404, code="not_found")
    d.call("payOrder", a, "POST", loc + "/pay", expect=401, code="unauthorized")
    d.call("cancelOrder", a, "POST", loc + "/cancel", erin, expect=404, code="not_found")
    d.call("cancelOrder", a, "POST", loc + "/cancel", expect=401, code="unauthorized")
    return loc


def refusals(d, a, b, redis_port):
    """The purchase's refusals: 400, 401 (B, signed), 404, 409, 429, 503 recovering."""
    carol = [("X-User-Id", "carol")]
    buy(d, a, "c-live", carol, qty=0, expect=400, code="bad_request")
    d.call("purchase", a, "POST", "/v1/campaigns/c-live/purchase", [], {"quantity": 1}, expect=400,
           code="bad_request")
    buy(d, a, "c-none", carol, expect=404, code="not_found")
    buy(d, a, "c-out", carol, expect=409, code="sold_out")
    buy(d, a, "c-future", carol, expect=409, code="not_started")
    buy(d, a, "c-past", carol, expect=409, code="ended")
    # the per-user rate limit (4 a minute on A): the fifth attempt is 429
    for i in range(4):
        buy(d, a, "c-live", [("X-User-Id", "flood")])
    buy(d, a, "c-live", [("X-User-Id", "flood")], expect=429, code="rate_limited")
    # the barrier after a change of Redis master: the campaign's run id is not the master's
    redis_cmd(redis_port, "HSET", "{c:c-bar}:meta", "runid", "an-older-master")
    buy(d, a, "c-bar", carol, expect=503, code="recovering")
    # signed identities (B)
    dave = [("X-User-Id", "dave")]
    buy(d, b, "c-live", dave, expect=401, code="unauthorized")
    buy(d, b, "c-live", dave + [("X-User-Signature", "v1=00")], expect=401, code="signature_malformed")
    old = int(time.time()) - 3600
    buy(d, b, "c-live", dave + [("X-User-Signature", signature("dave", old))], expect=401,
        code="signature_expired")
    buy(d, b, "c-live", signed("dave", campaign="c-res"), expect=401, code="signature_campaign")
    st, h, o = buy(d, b, "c-live", signed("dave"), key="k-dave", expect=202)
    loc = h.get("location", "/v1/orders/none")
    d.call("getOrder", b, "GET", loc, signed("dave"), expect=200)
    d.call("payOrder", b, "POST", loc + "/pay", signed("dave"), expect=503, code="unavailable")
    d.call("cancelOrder", b, "POST", loc + "/cancel", signed("dave"), expect=503, code="unavailable")
    return loc


def degraded(d, a, b, redis, alice_order):
    """Redis stopped: A takes the database path, B (no database) is 503."""
    adm = [("Authorization", "Bearer " + ADMIN)]
    stop(redis)
    deadline = time.time() + 15
    while time.time() < deadline:
        st, h, body = request(a, raw_request("GET", "/healthz"))
        if st == 200 and b'"degraded"' in body:
            break
        time.sleep(0.1)
    d.call("health", a, "GET", "/healthz", expect=200)
    d.call("health", a, "GET", "/healthz", adm, expect=200)
    d.call("health", b, "GET", "/healthz", adm, expect=503)
    gus = [("X-User-Id", "gus")]
    buy(d, a, "c-res", gus, key="k-gus", expect=503, code="unavailable")  # no keys on the database path
    buy(d, a, "c-live", gus, expect=503, code="degraded_reserve_exhausted")
    st, h, o = buy(d, a, "c-res", gus, expect=202)
    loc = h.get("location", "/v1/orders/none")
    d.call("getOrder", a, "GET", loc, gus, expect=200)
    d.call("cancelOrder", a, "POST", loc + "/cancel", gus, expect=409, code="conflict")
    d.call("getCampaign", a, "GET", "/v1/campaigns/c-live", expect=503)
    now = int(time.time() * 1000)
    d.call("createCampaign", a, "POST", "/v1/campaigns", adm,
           {"id": "c-new", "stock": 1, "starts_at": now, "ends_at": now + 60000}, expect=503, code="unavailable")
    d.call("preheatCampaign", a, "POST", "/v1/campaigns/c-live/preheat?force=1", adm, expect=503)
    d.call("getOrder", a, "GET", alice_order, [("X-User-Id", "alice")], expect=200)  # the database has it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    doc = openapi_check.load(args.spec)
    problems = openapi_check.lint(doc)
    for p in problems:
        fail("lint: " + p)
    if problems:
        return 1
    print("lint: %s is a valid OpenAPI 3.1 document (%d paths)" % (args.spec, len(doc["paths"])), flush=True)
    contract = openapi_check.Contract(doc)
    d = Driver(contract)
    started = time.time()
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--dir", args.work,
                              "--save", "", "--appendonly", "no", "--protected-mode", "no"],
                             stdout=open(os.path.join(args.work, "redis.log"), "w"), stderr=subprocess.STDOUT)
    seckilld = [os.path.join(args.build, "tools/seckilld/seckilld")]
    servers = Servers(seckilld, "openapi-conf")
    persist = None
    try:
        for _ in range(100):
            try:
                if redis_cmd(rport, "PING").startswith(b"+PONG"):
                    break
            except OSError:
                time.sleep(0.05)
        os.environ["REDIS_URL"] = "redis://127.0.0.1:%d" % rport
        os.environ["DATABASE_URL"] = "sqlite://%s/orders.db" % args.work
        a = servers.start(["--admin-token", ADMIN, "--threads", "1", "--user-rate-limit", "4",
                           "--user-rate-window-ms", "60000", "--head-timeout-ms", "300", "--body-timeout-ms", "300",
                           "--degraded-after-ms", "300"], 15)
        persist = subprocess.Popen([os.path.join(args.build, "tools/seckill-persist/seckill-persist"), "--quiet",
                                    "--sweep-interval", "200ms"],
                                   stdout=open(os.path.join(args.work, "persist.log"), "w"), stderr=subprocess.STDOUT)
        del os.environ["DATABASE_URL"]
        b = servers.start(["--admin-token", ADMIN, "--user-secret", SECRET, "--threads", "1",
                           "--max-connections-per-address", "3"], 15)
        d.call("health", a, "GET", "/healthz", expect=200)
        d.call("metrics", a, "GET", "/metrics", expect=200)
        d.call("metrics", a, "GET", "/metrics", [("Authorization", "Bearer " + ADMIN)], expect=200)
        d.call("ping", a, "GET", "/ping", expect=200)
        campaigns(d, a)
        self_test(doc, a)
        alice_order = orders(d, a)
        targets = {"createCampaign": ("POST", "/v1/campaigns"), "getCampaign": ("GET", "/v1/campaigns/c-live"),
                   "preheatCampaign": ("POST", "/v1/campaigns/c-live/preheat"),
                   "purchase": ("POST", "/v1/campaigns/c-live/purchase"), "getOrder": ("GET", alice_order),
                   "payOrder": ("POST", alice_order + "/pay"), "cancelOrder": ("POST", alice_order + "/cancel"),
                   "health": ("GET", "/healthz"), "metrics": ("GET", "/metrics"), "ping": ("GET", "/ping")}
        layer_cases(d, a, targets)
        refusals(d, a, b, rport)
        degraded(d, a, b, redis, alice_order)
        connection_cap(d, b, targets)
    finally:
        if persist:
            stop(persist)
        for p, code in servers.stop_all(20):
            if code != 0:
                fail("seckilld pid %d exited with %s (log %s)" % (p.pid, code, p.log_path))
        stop(redis)
    for oid, status in contract.missing():
        fail("%s: status %s is in the contract but no request produced it" % (oid, status))
    print("%d (operation, status) pairs listed, %d produced" % (sum(len(v) for v in contract.listed().values()),
                                                              sum(len(v) for v in contract.seen.values())))
    print("%d answers checked against %s in %.1f s (headers seen: %s); %d failures"
          % (d.count, args.spec, time.time() - started, ", ".join(sorted(d.headers_seen)), len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
