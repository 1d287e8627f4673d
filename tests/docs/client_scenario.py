#!/usr/bin/python3
"""client_scenario.py: one of the clients of docs/clients/ against a live
seckilld, through the command line the three share:

  client_scenario.py --build BUILD_DIR --work DIR -- CLIENT COMMAND...

(e.g. -- python3 docs/clients/seckill_client.py). Starts a private
redis-server (no fsync: every acceptance is a 202 first), seckilld (signed
identities, admin token, SQLite) and seckill-persist, and asserts what the
client reports for: a purchase followed from 202 to confirmed, its replay,
the order, pay (twice), cancel refused once paid, limit_reached,
sold_out, not_found, ended, a wrong secret (401), a cancelled order's key
replayed (200), a purchase whose answer a proxy drops (the client retries
with the same key: bought once), a purchase answered 503 recovering
(retried with the same key after Retry-After), and an answer no
contract describes (the client must fail, exit 2). Processes are stopped
by PID. Exit 1 on the first unexpected outcome."""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "seckilld"))
from http_wire import Servers, free_port, request  # noqa: E402

ADMIN, SECRET = "adm-token", "client-secret"


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        raise SystemExit(1)
    print("ok  ", what, flush=True)


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
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args)).encode())
    reply = s.recv(4096)
    s.close()
    return reply


def admin(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    raw = ("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
           % (method, path, ADMIN, len(data))).encode() + data
    st, _, out = request(port, raw)
    return st, json.loads(out) if out else {}


# ---- a proxy that loses one answer, and a server that breaks the contract -------


def read_message(sock, buf):
    """(message bytes, rest) of one HTTP message framed by Content-Length, or (None, b"")."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None, b""
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        d = sock.recv(65536)
        if not d:
            return None, b""
        rest += d
    return head + b"\r\n\r\n" + rest[:n], rest[n:]


class FlakyProxy:
    """Forwards to seckilld, except the first purchase: in mode "lose" it is
    forwarded and its answer dropped (the connection closed: decided by the
    server, lost on the way); in mode "busy" it is answered 503 recovering
    with Retry-After: 1 (nothing decided, as seckilld answers during its
    barrier). Records each purchase's Idempotency-Key and arrival time."""

    BUSY = (b'{"error":"recovering","message":"campaign recovering after a change of Redis master; '
            b'retry shortly"}\n')

    def __init__(self, upstream, mode):
        self.upstream, self.mode, self.keys, self.times = upstream, mode, [], []
        self.ls = socket.socket()
        self.port = free_port()
        self.ls.bind(("127.0.0.1", self.port))
        self.ls.listen(16)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.ls.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        up = socket.create_connection(("127.0.0.1", self.upstream))
        cbuf = ubuf = b""
        try:
            while True:
                req, cbuf = read_message(c, cbuf)
                if req is None:
                    return
                purchase = b"/purchase" in req.split(b"\r\n", 1)[0]
                if purchase:
                    key = [ln.split(b":", 1)[1].strip() for ln in req.split(b"\r\n")
                           if ln.lower().startswith(b"idempotency-key:")]
                    self.keys.append(key[0].decode() if key else None)
                    self.times.append(time.time())
                first = purchase and len(self.keys) == 1
                if first and self.mode == "busy":
                    c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                              b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s" % (len(self.BUSY), self.BUSY))
                    continue
                up.sendall(req)
                resp, ubuf = read_message(up, ubuf)
                if resp is None or (first and self.mode == "lose"):
                    return  # the first purchase's answer never reaches the client
                c.sendall(resp)
        finally:
            c.close()
            up.close()


def contract_breaker():
    """A server whose every answer is 409 with an error code no contract lists."""
    ls = socket.socket()
    port = free_port()
    ls.bind(("127.0.0.1", port))
    ls.listen(8)
    body = b'{"error":"mystery","message":"not in the contract"}'

    def serve():
        while True:
            c, _ = ls.accept()
            read_message(c, b"")
            c.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    return port


# ---- the scenario ----------------------------------------------------------------


class Client:
    def __init__(self, cmd, port):
        self.cmd, self.port = cmd, port

    def run(self, user, *args, port=None, secret=SECRET):
        env = dict(os.environ, SECKILL_URL="http://127.0.0.1:%d" % (port or self.port), SECKILL_USER=user,
                   SECKILL_SECRET=secret)
        p = subprocess.run(self.cmd + list(args), env=env, capture_output=True, text=True, timeout=60)
        lines = p.stdout.strip().splitlines()
        try:
            out = json.loads(lines[-1]) if lines else {}
        except ValueError:
            out = {}
        if p.returncode not in (0, 1, 2, 3) or not lines:
            print("client %s: exit %d\nstdout: %s\nstderr: %s" % (args, p.returncode, p.stdout, p.stderr))
        return p.returncode, out


def scenario(cl, port):
    rc, o = cl.run("alice", "buy", "c-live", "1", "k-alice")
    check(rc == 0 and o.get("state") == "confirmed", "buy: 202 followed to confirmed %s" % o)
    order = o.get("order_id", "none")
    rc, o = cl.run("alice", "buy", "c-live", "1", "k-alice")
    check(rc == 0 and o.get("order_id") == order, "the same key again: the same order %s" % o)
    rc, o = cl.run("alice", "order", order)
    check(rc == 0 and o.get("state") == "confirmed" and o.get("user") == "alice", "order: %s" % o)
    for _ in range(2):
        rc, o = cl.run("alice", "pay", order)
        check(rc == 0 and o.get("status") == "paid", "pay (twice is fine): %s" % o)
    rc, o = cl.run("alice", "cancel", order)
    check(rc == 1 and o.get("refused") == "paid" and o.get("status") == 409, "cancel a paid order: %s" % o)
    rc, o = cl.run("alice", "buy", "c-live", "1")
    check(rc == 1 and o.get("refused") == "limit_reached", "a second unit over the limit: %s" % o)
    rc, o = cl.run("bob", "buy", "c-live", "1", "k-bob")
    check(rc == 0 and o.get("state") == "confirmed", "bob buys: %s" % o)
    rc, o = cl.run("bob", "cancel", o.get("order_id", "none"))
    check(rc == 0 and o.get("state") == "cancelled", "bob cancels: %s" % o)
    rc, o = cl.run("bob", "buy", "c-live", "1", "k-bob")
    check(rc == 0 and o.get("state") == "cancelled", "bob's key again: the cancelled order (200) %s" % o)
    for cid, code, status in (("c-out", "sold_out", 409), ("c-none", "not_found", 404), ("c-past", "ended", 409)):
        rc, o = cl.run("carol", "buy", cid, "1")
        check(rc == 1 and o.get("refused") == code and o.get("status") == status, "%s: %s" % (cid, o))
    rc, o = cl.run("carol", "buy", "c-live", "1", secret="not-the-secret")
    check(rc == 1 and o.get("refused") == "unauthorized" and o.get("status") == 401, "a wrong secret: %s" % o)
    rc, o = cl.run("alice", "order", "123-0000000000000000")
    check(rc == 1 and o.get("refused") == "not_found", "an order that is not there: %s" % o)
    # the answer lost on the way: the retry carries the same key, one unit is bought
    proxy = FlakyProxy(port, "lose")
    rc, o = cl.run("dave", "buy", "c-multi", "1", port=proxy.port)
    check(rc == 0 and o.get("state") == "confirmed", "a lost answer, retried: %s" % o)
    check(len(proxy.keys) >= 2 and proxy.keys[0] and len(set(proxy.keys)) == 1,
          "every attempt carried one Idempotency-Key: %s" % proxy.keys)
    st, c = admin(port, "GET", "/v1/campaigns/c-multi")
    check(st == 200 and c.get("sold") == 1, "bought once, not once per attempt: sold %s" % c.get("sold"))
    # 503 recovering with Retry-After: 1: retried with the same key, no sooner
    proxy = FlakyProxy(port, "busy")
    rc, o = cl.run("erin", "buy", "c-multi", "1", "k-erin", port=proxy.port)
    check(rc == 0 and o.get("state") == "confirmed", "503 recovering, retried: %s" % o)
    waited = proxy.times[1] - proxy.times[0] if len(proxy.times) > 1 else 0
    check(proxy.keys[:2] == ["k-erin", "k-erin"] and waited >= 0.95,
          "the retry after Retry-After (%.2f s later), with the same key: %s" % (waited, proxy.keys))
    rc, o = cl.run("frank", "buy", "c-live", "1", port=contract_breaker())
    check(rc == 2, "an error code no contract lists is not swallowed: exit %d %s" % (rc, o))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("client", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    client = [a for a in args.client if a != "--"]
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--dir", args.work,
                              "--save", "", "--appendonly", "no", "--protected-mode", "no"],
                             stdout=open(os.path.join(args.work, "redis.log"), "w"), stderr=subprocess.STDOUT)
    servers, persist, rc = Servers([os.path.join(args.build, "tools/seckilld/seckilld")], "client-scenario"), None, 0
    try:
        for _ in range(100):
            try:
                if redis_cmd(rport, "PING").startswith(b"+PONG"):
                    break
            except OSError:
                time.sleep(0.05)
        os.environ.update(REDIS_URL="redis://127.0.0.1:%d" % rport,
                          DATABASE_URL="sqlite://%s/orders.db" % args.work)
        port = servers.start(["--admin-token", ADMIN, "--user-secret", SECRET, "--threads", "1"], 15)
        persist = subprocess.Popen([os.path.join(args.build, "tools/seckill-persist/seckill-persist"), "--quiet",
                                    "--sweep-interval", "200ms"],
                                   stdout=open(os.path.join(args.work, "persist.log"), "w"), stderr=subprocess.STDOUT)
        now = int(time.time() * 1000)
        for cid, stock, limit, start, end in (("c-live", 100, 1, now - 60000, now + 3600000),
                                              ("c-multi", 100, 5, now - 60000, now + 3600000),
                                                                                            ("c-out", 0, 1, now - 60000, now + 3600000),
                                              ("c-past", 5, 1, now - 7200000, now - 3600000)):
            st, _ = admin(port, "POST", "/v1/campaigns", {"id": cid, "stock": stock, "per_user_limit": limit,
                                                          "starts_at": start, "ends_at": end})
            check(st == 201, "campaign %s created" % cid)
        t0 = time.time()
        scenario(Client(client, port), port)
        print("client %s: every outcome as expected (%.1f s)" % (" ".join(client), time.time() - t0))
    finally:
        if persist:
            stop(persist)
        for p, code in servers.stop_all(20):
            if code != 0:
                print("FAIL: seckilld pid %d exited with %s (log %s)" % (p.pid, code, p.log_path))
                rc = 1
        stop(redis)
    return rc


if __name__ == "__main__":
    sys.exit(main())
