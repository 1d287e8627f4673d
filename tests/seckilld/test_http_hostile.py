#!/usr/bin/python3
"""test_http_hostile.py: seckilld's front door against hostile clients
(malformed, slow, oversized and flooding requests), over raw sockets. Starts the server under test
itself (each case's instance on a free loopback port, stopped by PID):

  test_http_hostile.py [--redis-url URL] -- BINARY [ARGS...]

BINARY is seckilld (then --redis-url is passed and a campaign "c" with a
huge stock is created) or tests/seckilld/hs_testserver (the HTTP layer
alone). Every case prints PASS or FAIL with the reason; the exit status
is 1 when any failed. Only flags seckilld has always had are used, so the
same script runs against an older binary (to show what it got wrong)."""
import json
import os
import resource
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_wire import Reader, Servers, connect, is_json_error, parse_args, request  # noqa: E402

ADMIN = "adm-token"
redis_url, CMD = parse_args(sys.argv[1:])
SERVERS = Servers(CMD, "http-hostile")


def start(*extra):
    """An instance of the server under test; returns its port."""
    redis = ["--redis-url", redis_url] if redis_url else []
    port = SERVERS.start(["--admin-token", ADMIN] + list(extra) + redis, 10)
    if redis_url:
        now = int(time.time() * 1000)
        body = json.dumps({"id": "c", "stock": 100000000, "per_user_limit": 1,
                           "starts_at": now - 60000, "ends_at": now + 3600000})
        st = request(port, "POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s" % (ADMIN, len(body), body))[0]
        assert st in (201, 409), "creating the campaign: %d" % st
    return port


def stop_all():
    """An instance that does not exit 0 (under ASan: a leak or a memory
    error) is a failed case."""
    for p, code in SERVERS.stop_all(15):
        if code != 0:
            RESULTS.append(("exit of %s" % " ".join(p.args[:1]), False, str(code)))
            print("FAIL server pid %d exited with %s (log %s)" % (p.pid, code, p.log_path))


RESULTS = []


def case(fn):
    def run(*a):
        t0 = time.time()
        try:
            fn(*a)
            RESULTS.append((fn.__name__, True, ""))
            print("PASS %s (%.1f s)" % (fn.__name__, time.time() - t0), flush=True)
        except Exception as e:  # a case's failure is reported, the others still run
            RESULTS.append((fn.__name__, False, str(e)))
            print("FAIL %s (%.1f s): %s" % (fn.__name__, time.time() - t0, e), flush=True)
    run.__name__ = fn.__name__
    return run


HEAD = "POST /v1/campaigns/c/purchase HTTP/1.1\r\nHost: x\r\nX-User-Id: %s\r\n"

# ---- 1. slow clients, caps, health under saturation ----------------------


def drip(s, byte, budget_s):
    """Sends one byte every half second until the server closes or budget_s
    pass; returns the reader and the seconds it took."""
    r, t0 = Reader(s), time.time()
    while time.time() - t0 < budget_s:
        try:
            s.sendall(byte)
        except OSError:
            break
        s.settimeout(0.5)
        r.fill()
        if r.eof:
            break
    return r, time.time() - t0


@case
def test_a_head_sent_at_one_byte_per_half_second_is_closed_at_the_head_deadline(port):
    s = connect(port)
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    r, took = drip(s, b"a", 12)
    assert r.eof, "still open after %.1f s of a never-ending head" % took
    assert took < 9, "closed only after %.1f s" % took
    if r.buf:
        resp = Reader.response(r)
        assert resp and resp[0] == 408 and is_json_error(resp), "answer before closing: %r" % r.buf[:200]


@case
def test_a_body_sent_at_one_byte_per_half_second_is_closed_at_the_body_deadline(port):
    s = connect(port)
    s.sendall((HEAD % "slowbody" + "Content-Length: 2000\r\n\r\n").encode())
    r, took = drip(s, b" ", 16)
    assert r.eof, "still open after %.1f s of a never-ending body" % took
    assert took < 14, "closed only after %.1f s" % took


@case
def test_an_idle_keep_alive_connection_is_closed(port):
    s = connect(port)
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    r = Reader(s)
    assert r.response()[0] == 200
    assert r.closed_within(4), "idle keep-alive connection not closed in 4 s (idle timeout 1 s)"


@case
def test_one_address_cannot_hold_more_than_1024_connections(port):
    socks = []
    for _ in range(1100):
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    time.sleep(0.5)
    refused = 0
    for s in socks:
        s.setblocking(False)
        try:
            d = s.recv(4096)
            refused += 1  # EOF or the 503
            assert not d or b" 503 " in d, "unexpected answer %r" % d[:100]
        except BlockingIOError:
            pass
        except ConnectionResetError:
            refused += 1
    for s in socks:
        s.close()
    assert 1100 - 1024 <= refused <= 1100 - 1000, "%d of 1100 connections refused (cap 1024)" % refused
    time.sleep(0.3)
    assert request(port, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200


@case
def test_healthz_and_metrics_answer_while_200_slow_clients_saturate_100_connections(port):
    slow = []
    for i in range(200):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"POST /v1/campaigns/c/purchase HTTP/1.1\r\nX-Slow: ")
            slow.append(s)
        except OSError:
            pass
    try:
        for path in ("/healthz", "/metrics"):
            t0 = time.time()
            st = request(port, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path, timeout=5)[0]
            assert st == 200, "%s answered %d after %.1f s with the door saturated" % (path, st, time.time() - t0)
    finally:
        for s in slow:
            s.close()

# ---- 2. framing: Content-Length, Transfer-Encoding, chunks ---------------


def refused_and_closed(port, raw, status=400):
    s = connect(port)
    s.sendall(raw.encode("latin-1"))
    r = Reader(s)
    resp = r.response()
    assert resp, "no answer"
    assert resp[0] == status, "answered %d %r" % (resp[0], resp[2][:120])
    assert is_json_error(resp), "not the JSON error shape: %r %r" % (resp[1].get("content-type"), resp[2][:120])
    assert r.closed_within(3), "connection left open after a framing error"
    more = r.response() if r.buf else None
    assert more is None, "a second answer from the same bytes: %r" % (more,)


@case
def test_conflicting_duplicate_content_length_is_400_and_closed(port):
    body = '{"quantity":1}GET /ping HTTP/1.1\r\nHost: x\r\n\r\n'
    refused_and_closed(port, HEAD % "dupcl" + "Content-Length: 14\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


@case
def test_content_length_with_transfer_encoding_is_400_and_closed(port):
    refused_and_closed(port, HEAD % "clte" + "Content-Length: 14\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "0\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\n\r\n")


@case
def test_a_malformed_chunk_size_is_400(port):
    refused_and_closed(port, HEAD % "chunk" + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")


@case
def test_an_overflowing_chunk_size_is_400(port):
    refused_and_closed(port, HEAD % "chunk2" + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n{}\r\n0\r\n\r\n")

@case
def test_a_transfer_coding_other_than_exactly_chunked_is_501_and_closed(port):
    body = "e\r\n{\"quantity\":1}\r\n0\r\n\r\n"
    for te in ("gzip, chunked", "gzip,chunked", "deflate, chunked", "identity, chunked"):
        refused_and_closed(port, HEAD % "te" + "Transfer-Encoding: %s\r\n\r\n%s" % (te, body), 501)
    refused_and_closed(port, HEAD % "te2" + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
                       + body, 501)
    # exactly chunked (any case) is read as before
    for te in ("chunked", "Chunked"):
        resp = request(port, HEAD % "te3" + "Transfer-Encoding: %s\r\n\r\n%s" % (te, body))
        assert resp[0] != 501, "Transfer-Encoding: %s refused: %d %r" % (te, resp[0], resp[2][:120])


@case
def test_whitespace_between_a_header_name_and_its_colon_is_400(port):
    refused_and_closed(port, "GET /ping HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nGET /ping HTTP/1.1\r\n\r\n")

# ---- 3. control bytes in header values ----------------------------------


@case
def test_a_nul_in_x_user_id_is_refused_not_bought_as_the_prefix(port):
    resp = request(port, (HEAD % "al\0ice") + "Content-Length: 14\r\n\r\n{\"quantity\":1}")
    assert resp[0] == 400 and is_json_error(resp), "X-User-Id al\\0ice: %d %r" % (resp[0], resp[2][:160])


@case
def test_a_nul_after_the_admin_token_does_not_pass_admin_auth(port):
    now = int(time.time() * 1000)
    body = json.dumps({"id": "nul1", "stock": 1, "starts_at": now, "ends_at": now + 60000})
    resp = request(port, "POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\0junk\r\n"
                   "Content-Length: %d\r\n\r\n%s" % (ADMIN, len(body), body))
    assert resp[0] == 400 and is_json_error(resp), "Bearer token\\0junk: %d %r" % (resp[0], resp[2][:160])


@case
def test_other_control_bytes_in_a_header_value_are_refused(port):
    for ch in ("\x01", "\x1b", "\x7f"):
        resp = request(port, "GET /ping HTTP/1.1\r\nHost: x\r\nX-Thing: a%sb\r\n\r\n" % ch)
        assert resp[0] == 400 and is_json_error(resp), "byte %r: %d" % (ch, resp[0])
    assert request(port, "GET /ping HTTP/1.1\r\nHost: x\r\nX-Thing: a\tb\r\n\r\n")[0] == 200  # HTAB is fine

# ---- 4. pipelining and half-close ---------------------------------------


@case
def test_1000_pipelined_requests_then_half_close_get_1000_answers_in_order(port):
    reqs, kinds = [], []
    tag = "%d" % (time.time() * 1000)
    for i in range(1000):
        if i % 10 == 3:
            reqs.append(HEAD % ("pipe%s-%d" % (tag, i)) + "Content-Length: 14\r\n\r\n{\"quantity\":1}")
            kinds.append("buy")
        else:
            reqs.append("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            kinds.append("ping")
    s = connect(port, timeout=20)
    s.sendall("".join(reqs).encode())
    s.shutdown(socket.SHUT_WR)
    r, got = Reader(s), []
    while True:
        resp = r.response()
        if resp is None:
            break
        got.append(resp)
    assert len(got) == 1000, "%d answers to 1000 pipelined requests after a half-close" % len(got)
    for i, (k, resp) in enumerate(zip(kinds, got)):
        if k == "ping":
            assert resp[0] == 200 and resp[2] == b"pong\n", "answer %d out of order: %r" % (i, resp[:1])
        else:
            # 201 accepted, or 202 pending where Redis has no replica and no fsync'd AOF
            assert resp[0] in (201, 202) and (b"accepted" in resp[2] or b"pending" in resp[2]), \
                "answer %d (a purchase): %d %r" % (i, resp[0], resp[2][:80])

# ---- 5. Expect: 100-continue and the layer's error shapes ---------------


@case
def test_expect_100_continue_over_max_body_is_413_at_once(port):
    s = connect(port, timeout=3)
    s.sendall((HEAD % "exp" + "Content-Length: 100000\r\nExpect: 100-continue\r\n\r\n").encode())
    resp = Reader(s).response()
    assert resp, "no answer within 3 s"
    assert resp[0] == 413 and is_json_error(resp), "first answer %d %r" % (resp[0], resp[2][:80])


@case
def test_expect_100_continue_within_limits_gets_100_then_the_answer(port):
    s = connect(port, timeout=3)
    s.sendall((HEAD % ("exp%d" % time.time()) + "Content-Length: 14\r\nExpect: 100-continue\r\n\r\n").encode())
    r = Reader(s)
    first = r.response()
    assert first and first[0] == 100, "expected 100 Continue, got %r" % (first[:1] if first else None)
    s.sendall(b'{"quantity":1}')
    final = r.response()
    assert final and final[0] in (201, 202), "after the body: %r" % (final[:1] if final else None)


@case
def test_every_error_the_http_layer_answers_is_json(port):
    cases = [
        ("\x01\x02 / HTTP/1.1\r\n\r\n", 400),
        ("POST /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", 413),
        ("GET /" + "a" * 10000 + " HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + "b" * 10000 + "\r\n\r\n", 431),
        ("BREW /ping HTTP/1.1\r\nHost: x\r\n\r\n", 501),
        ("GET /ping HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ]
    bad = []
    for raw, want in cases:
        resp = request(port, raw)
        if resp[0] != want or not is_json_error(resp):
            bad.append("%r...: %d %s %r" % (raw[:24], resp[0], resp[1].get("content-type"), resp[2][:60]))
    assert not bad, "; ".join(bad)


def main():
    lim = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(lim[1], 4096), lim[1]))
    try:
        main_port = start("--idle-timeout-ms", "1000", "--max-connections", "2000")
        wide_port = start("--max-connections", "2000")
        small_port = start("--max-connections", "100")
        slow = [threading.Thread(target=test_a_head_sent_at_one_byte_per_half_second_is_closed_at_the_head_deadline,
                                 args=(main_port,)),
                threading.Thread(target=test_a_body_sent_at_one_byte_per_half_second_is_closed_at_the_body_deadline,
                                 args=(main_port,))]
        for t in slow:
            t.start()
        test_an_idle_keep_alive_connection_is_closed(main_port)
        test_one_address_cannot_hold_more_than_1024_connections(wide_port)
        test_healthz_and_metrics_answer_while_200_slow_clients_saturate_100_connections(small_port)
        for fn in (test_conflicting_duplicate_content_length_is_400_and_closed,
                   test_content_length_with_transfer_encoding_is_400_and_closed,
                   test_a_malformed_chunk_size_is_400, test_an_overflowing_chunk_size_is_400,
                   test_a_transfer_coding_other_than_exactly_chunked_is_501_and_closed,
                   test_whitespace_between_a_header_name_and_its_colon_is_400,
                   test_a_nul_in_x_user_id_is_refused_not_bought_as_the_prefix,
                   test_a_nul_after_the_admin_token_does_not_pass_admin_auth,
                   test_other_control_bytes_in_a_header_value_are_refused,
                   test_1000_pipelined_requests_then_half_close_get_1000_answers_in_order,
                   test_expect_100_continue_over_max_body_is_413_at_once,
                   test_expect_100_continue_within_limits_gets_100_then_the_answer,
                   test_every_error_the_http_layer_answers_is_json):
            fn(wide_port)
        for t in slow:
            t.join()
    finally:
        stop_all()
    failed = [n for n, ok, _ in RESULTS if not ok]
    print("%d of %d cases passed" % (len(RESULTS) - len(failed), len(RESULTS)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
