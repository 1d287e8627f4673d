"""http_wire.py: the raw-socket HTTP helpers that test_http_hostile.py and
http_conformance.py share: their command line, free loopback ports, answers
read off a socket byte for byte, one-shot requests, and the servers under
test, each on a port of its own and stopped by PID only (never by name, never
port 6379 or 2379). Imported from the scripts' own directory."""
import json
import os
import random
import signal
import socket
import subprocess
import time

HEALTHZ = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def parse_args(argv):
    """(redis_url or None, command) from [--redis-url URL] [--] BINARY [ARGS...]."""
    redis_url, args = None, list(argv)
    if args[:1] == ["--redis-url"]:
        redis_url, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    return redis_url, args


def free_port():
    """A free port below the kernel's ephemeral range (as scripts/lib.sh's
    dl_free_port): a port-0 pick could be taken by any outgoing connection
    before the server binds it."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    while True:
        p = random.randint(10000, low - 1)
        if p in (6379, 2379):
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            pass
        finally:
            s.close()


def connect(port, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


class Reader:
    """Responses read off one socket (Content-Length framing); eof stays set
    once the server has closed (or reset) the connection."""

    def __init__(self, sock):
        self.s, self.buf, self.eof = sock, b"", False

    def fill(self):
        try:
            d = self.s.recv(65536)
        except socket.timeout:
            return False
        except ConnectionResetError:
            d = b""
        if not d:
            self.eof = True
        self.buf += d
        return bool(d)

    def response(self):
        """(status, headers, body) or None at EOF/timeout."""
        while b"\r\n\r\n" not in self.buf:
            if self.eof or not self.fill():
                return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0")) if status >= 200 else 0
        while len(self.buf) < n:
            if self.eof or not self.fill():
                return None
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hdrs, body

    def rest(self, seconds=3):
        """(every answer until the server closes or seconds pass, closed)."""
        out, end = [], time.time() + seconds
        while time.time() < end:
            r = self.response()
            if r is None:
                break
            out.append(r)
        return out, self.eof

    def closed_within(self, seconds):
        """True when the server closes the socket within seconds."""
        end = time.time() + seconds
        while time.time() < end and not self.eof:
            self.s.settimeout(max(0.05, end - time.time()))
            self.fill()
        return self.eof


def _raw(raw):
    return raw.encode("latin-1") if isinstance(raw, str) else raw


def request(port, raw, timeout=5):
    """The first answer to raw on a connection of its own, (0, {}, b"") if none."""
    s = connect(port, timeout)
    s.sendall(_raw(raw))
    r = Reader(s).response()
    s.close()
    return r if r else (0, {}, b"")


def exchange(port, raw, seconds=3):
    """(answers, closed): the answers to raw on one connection, and whether
    the server closed it within seconds."""
    s = connect(port, seconds)
    s.sendall(_raw(raw))
    got = Reader(s).rest(seconds)
    s.close()
    return got


def is_json_error(resp):
    """The error shape of docs/http-api.md: a JSON object with error and message."""
    st, h, body = resp
    if not h.get("content-type", "").startswith("application/json"):
        return False
    try:
        j = json.loads(body)
    except ValueError:
        return False
    return isinstance(j, dict) and "error" in j and "message" in j


class Servers:
    """The instances of the server under test that one script starts. Each
    logs to a file of its own, kept only when the instance does not exit 0
    (under ASan: a leak or a memory error), for the failure to point at."""

    def __init__(self, cmd, log_tag):
        self.cmd, self.log_tag, self.procs = list(cmd), log_tag, []

    def start(self, args, health_s):
        """cmd --bind 127.0.0.1 --port PORT args; PORT once /healthz answers 200
        (SystemExit after health_s without it)."""
        port = free_port()
        cmd = self.cmd + ["--bind", "127.0.0.1", "--port", str(port)] + list(args)
        path = "%s/%s-%d-%d.log" % (os.environ.get("TMPDIR", "/tmp"), self.log_tag, os.getpid(), port)
        with open(path, "w") as log:
            p = subprocess.Popen(cmd, stdout=log, stderr=log)
        p.log_path = path
        self.procs.append(p)
        deadline = time.time() + health_s
        while time.time() < deadline:
            try:
                if request(port, HEALTHZ)[0] == 200:
                    return port
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit("server %s did not become healthy (log %s)" % (cmd, path))

    def stop_all(self, wait_s):
        """SIGTERM every instance still running, SIGKILL one that has not
        exited after wait_s; [(process, exit code or "killed after N s")].
        The log of an instance that exited 0 is removed."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        out = []
        for p in self.procs:
            try:
                code = p.wait(wait_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                code = "killed after %d s" % wait_s
            if code == 0:
                os.unlink(p.log_path)
            out.append((p, code))
        return out
