#!/usr/bin/env python3
"""seckill_client.py: a seckilld buyer client in Python (standard library
only). Copy it into your service; docs/http-api.md explains each answer,
docs/openapi.yaml is the contract.

What it does right, and why:
- signs the buyer's identity (X-User-Id + X-User-Signature, HMAC-SHA256)
  when the deployment has a user secret;
- sends every purchase with an Idempotency-Key and retries with the SAME
  key on a network error or a 503/429 (after Retry-After): a retry can
  never buy twice, and an outcome_unknown is resolved by the retry;
- treats 202 as "decided, not yet safe", and polls its Location until the
  order is confirmed (a lost order is bought again under the same key);
- turns every documented error code into SeckillError; anything else is
  UnexpectedAnswer (a contract break worth an alert, never ignored).

Command line (the same for the Java and JavaScript clients):
  SECKILL_URL=http://localhost:8080 SECKILL_USER=alice [SECKILL_SECRET=...] \\
    seckill_client.py buy CAMPAIGN [QUANTITY [IDEMPOTENCY_KEY]] | order ID | pay ID | cancel ID
prints one JSON line; exit 0 done, 1 refused (a documented error), 2 an
unexpected answer, 3 gave up retrying.
"""
import hashlib
import hmac
import http.client
import json
import os
import sys
import time
import urllib.parse
import uuid

# 503 and 429: nothing was decided (or, outcome_unknown, it may have been):
# the same request, with the same Idempotency-Key, is safe to send again.
RETRY = {"unavailable", "recovering", "outcome_unknown", "degraded_reserve_exhausted", "rate_limited"}
# Every other error code docs/http-api.md lists: a final answer.
REFUSALS = {"bad_request", "unauthorized", "signature_malformed", "signature_expired", "signature_campaign",
            "signature_legacy", "not_found", "method_not_allowed", "request_timeout", "sold_out", "limit_reached",
            "not_started", "ended", "exists", "conflict", "cancelled", "rejected", "paid", "too_large",
            "uri_too_long", "expectation_failed", "headers_too_large", "not_implemented", "version_not_supported"}


class SeckillError(Exception):
    """A documented refusal: status, error code, message."""

    def __init__(self, status, code, message):
        super().__init__("%d %s: %s" % (status, code, message))
        self.status, self.code, self.message = status, code, message


class UnexpectedAnswer(Exception):
    """An answer the contract does not describe."""


class GaveUp(Exception):
    """Still unavailable after every retry."""


class SeckillClient:
    def __init__(self, base_url, user, secret=None, attempts=6, timeout=10):
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port = u.hostname, u.port or 80
        self.user, self.secret = user, secret
        self.attempts, self.timeout = attempts, timeout

    def identity(self, campaign=None):
        """The buyer's headers. The signature expires in 5 minutes: sign per
        request (or per session), never store one."""
        h = {"X-User-Id": self.user}
        if self.secret:
            exp = int(time.time()) + 300
            msg = "%s\n%d" % (self.user, exp) + ("\n" + campaign if campaign else "")
            mac = hmac.new(self.secret.encode(), msg.encode(), hashlib.sha256).hexdigest()
            h["X-User-Signature"] = "v1=%s;exp=%d" % (mac, exp) + (";c=" + campaign if campaign else "")
        return h

    def _send(self, method, path, body=None, headers=None):
        """One exchange: (status, headers, parsed JSON body). Network errors raise OSError."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            hdrs = dict(headers or {}, **({"Content-Type": "application/json"} if data else {}))
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            raw = r.read()
            try:
                doc = json.loads(raw) if raw else {}
            except ValueError:
                raise UnexpectedAnswer("%d with a body that is not JSON: %r" % (r.status, raw[:200]))
            return r.status, {k.lower(): v for k, v in r.getheaders()}, doc
        finally:
            conn.close()

    def _call(self, method, path, ok, body=None, headers=None):
        """Sends until an answer in ok (a status set) or a final refusal.
        Retries network errors and RETRY codes after Retry-After: callers
        pass an Idempotency-Key wherever a retry must not act twice."""
        for attempt in range(1, self.attempts + 1):
            try:
                status, hdrs, doc = self._send(method, path, body, headers)
            except (OSError, http.client.HTTPException):
                # refused, reset, timed out, cut short: the request may have
                # been decided and only its answer lost
                time.sleep(min(0.1 * 2 ** attempt, 2))
                continue
            if status in ok:
                return status, hdrs, doc
            code = doc.get("error") if isinstance(doc, dict) else None
            if code in RETRY and status in (429, 503):
                time.sleep(int(hdrs.get("retry-after", "1")))
                continue
            if code in REFUSALS and 400 <= status < 600:
                raise SeckillError(status, code, doc.get("message", ""))
            raise UnexpectedAnswer("%s %s: %d %s" % (method, path, status, doc))
        raise GaveUp("%s %s: no answer after %d attempts" % (method, path, self.attempts))

    def buy(self, campaign, quantity=1, key=None, confirm_within=30):
        """Buys; returns the order once confirmed (a 201, or a 202 followed
        to its confirmation). The key makes every retry the same purchase."""
        key = key or str(uuid.uuid4())
        path = "/v1/campaigns/%s/purchase" % urllib.parse.quote(campaign, safe="")
        deadline = time.time() + confirm_within
        while True:
            hdrs = dict(self.identity(campaign), **{"Idempotency-Key": key})
            status, h, doc = self._call("POST", path, {200, 201, 202}, {"quantity": quantity}, hdrs)
            if status == 201:
                return dict(doc, state="confirmed")
            if status == 200:  # the key's order moved on (paid, cancelled...): it is that order
                return doc
            if "location" not in h:
                raise UnexpectedAnswer("202 without a Location")
            order = self._follow(h["location"], deadline)  # 202: decided, not yet safe
            if order is not None:
                return order
            # lost before it was safe: the same key decides the purchase again

    def _follow(self, location, deadline):
        """Polls a 202's Location: the order once it is no longer pending,
        None if it was lost."""
        while time.time() < deadline:
            try:
                status, h, doc = self._call("GET", location, {200}, headers=self.identity())
            except SeckillError as e:
                if e.status == 404:  # "state":"lost": neither the database nor Redis holds it
                    return None
                raise
            if doc["state"] != "pending":
                return doc
            time.sleep(float(h.get("retry-after", "0.2")))
        raise GaveUp("order %s still pending" % location)

    def order(self, order_id):
        return self._call("GET", "/v1/orders/" + order_id, {200}, headers=self.identity())[2]

    def pay(self, order_id):
        """Paying twice is 200 again: safe to retry."""
        return self._call("POST", "/v1/orders/%s/pay" % order_id, {200}, headers=self.identity())[2]

    def cancel(self, order_id):
        """Cancelling twice is 200 again: safe to retry."""
        return self._call("POST", "/v1/orders/%s/cancel" % order_id, {200}, headers=self.identity())[2]


def main(argv):
    client = SeckillClient(os.environ.get("SECKILL_URL", "http://localhost:8080"), os.environ["SECKILL_USER"],
                           os.environ.get("SECKILL_SECRET") or None)
    cmd, args = argv[0], argv[1:]
    try:
        if cmd == "buy":
            out = client.buy(args[0], int(args[1]) if len(args) > 1 else 1, args[2] if len(args) > 2 else None)
        elif cmd in ("order", "pay", "cancel"):
            out = getattr(client, cmd)(args[0])
        else:
            raise SystemExit("usage: seckill_client.py buy CAMPAIGN [QUANTITY [KEY]] | order ID | pay ID | cancel ID")
    except SeckillError as e:
        print(json.dumps({"refused": e.code, "status": e.status, "message": e.message}))
        return 1
    except UnexpectedAnswer as e:
        print(json.dumps({"unexpected": str(e)}))
        return 2
    except GaveUp as e:
        print(json.dumps({"gave_up": str(e)}))
        return 3
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
