#!/usr/bin/python3
"""http_conformance.py: seckilld's request framing against RFC 9112 sections
3.2 (Host), 5 (fields), 6-7 (message body, chunked coding, trailers), one
table row per case with the answer it must get (docs/http-api.md, "HTTP
framing"), and the chunked-trailer attacks (an identity, admin token or signature
sent as a trailer). Starts the servers
under test itself (free loopback ports, stopped by PID, each must exit 0:
under ASan a memory error fails the run):

  http_conformance.py --redis-url URL -- SECKILLD [ARGS...]

Prints PASS or FAIL per case; exits 1 when any failed. Uses only flags
seckilld has always had, so it also runs against an older binary (to show
what that one got wrong)."""
import hashlib
import hmac
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_wire import HEALTHZ, Servers, exchange, is_json_error, parse_args  # noqa: E402

ADMIN = "adm-token"
SECRET = "conf-secret"
redis_url, CMD = parse_args(sys.argv[1:])
SERVERS, RESULTS = Servers(CMD, "http-conf"), []
TAG = "%x" % int(time.time() * 1000)
PING = "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def one(port, raw):
    got, _ = exchange(port, raw)
    return got[0] if got else (0, {}, b"")


def start(*extra):
    return SERVERS.start(["--admin-token", ADMIN, "--threads", "1", "--redis-url", redis_url] + list(extra), 15)


def stop_all():
    """Each instance must exit 0 (under ASan a memory error fails the run)."""
    for p, code in SERVERS.stop_all(20):
        ok = code == 0
        RESULTS.append(("server pid %d exits 0" % p.pid, ok))
        print("%s server pid %d exited with %s (log %s)" % ("PASS" if ok else "FAIL", p.pid, code, p.log_path))


def check(name, cond, why=""):
    RESULTS.append((name, bool(cond)))
    print("%s %s%s" % ("PASS" if cond else "FAIL", name, "" if cond else ": " + why), flush=True)


def create(port, cid, limit=1):
    now = int(time.time() * 1000)
    body = json.dumps({"id": cid, "stock": 100000000, "per_user_limit": limit,
                       "starts_at": now - 60000, "ends_at": now + 3600000})
    return one(port, "POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: %d\r\n\r\n%s" % (ADMIN, len(body), body))[0]


def chunks(body, trailer="", ext=""):
    return "%x%s\r\n%s\r\n0\r\n%s\r\n" % (len(body), ext, body, trailer)


BUY = '{"quantity":1}'
USERS = [0]


def buy_head(te=True, extra=""):
    """A purchase head for a user of its own (no per-user limit between cases)."""
    USERS[0] += 1
    h = "POST /v1/campaigns/c/purchase HTTP/1.1\r\nHost: x\r\nX-User-Id: u%s-%d\r\n%s" % (TAG, USERS[0], extra)
    return h + ("Transfer-Encoding: chunked\r\n\r\n" if te else "")


def user_head(user, body_len=None, version="1.1"):
    h = "POST /v1/campaigns/c/purchase HTTP/%s\r\nHost: x\r\nX-User-Id: %s\r\n" % (version, user)
    return h + ("Content-Length: %d\r\n\r\n" % body_len if body_len is not None else "")


OKBUY = (201, 202)  # accepted (202: no replica acknowledged it)
# name, raw request (a second request "GET /ping" follows: a refusal must
# not answer it, an accepted request must), the answer it must get
TABLE = [
    # RFC 9112 6.1-6.3: message body length
    ("content_length_and_transfer_encoding", buy_head(False, "Content-Length: 20\r\nTransfer-Encoding: chunked\r\n\r\n")
     + chunks(BUY), 400),
    ("two_differing_content_lengths", buy_head(False, "Content-Length: 14\r\nContent-Length: 15\r\n\r\n") + BUY + " ", 400),
    ("two_equal_content_lengths", buy_head(False, "Content-Length: 14\r\nContent-Length: 14\r\n\r\n") + BUY, 400),
    ("content_length_not_a_number", buy_head(False, "Content-Length: 1x\r\n\r\n") + BUY, 400),
    ("transfer_coding_list_ending_chunked", buy_head(False, "Transfer-Encoding: gzip, chunked\r\n\r\n") + chunks(BUY), 501),
    ("transfer_coding_chunked_not_final", buy_head(False, "Transfer-Encoding: chunked, gzip\r\n\r\n") + chunks(BUY), 501),
    ("transfer_coding_identity", buy_head(False, "Transfer-Encoding: identity\r\n\r\n") + chunks(BUY), 501),
    ("transfer_coding_xchunked", buy_head(False, "Transfer-Encoding: xchunked\r\n\r\n") + chunks(BUY), 501),
    ("transfer_encoding_twice", buy_head(False, "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n")
     + chunks(BUY), 501),
    ("transfer_encoding_in_http_1_0", user_head("te10", version="1.0") + "Transfer-Encoding: chunked\r\n\r\n"
     + chunks(BUY), 400),
    ("chunked_in_any_case", buy_head(False, "Transfer-Encoding: ChUnKeD\r\n\r\n") + chunks(BUY), OKBUY),
    # RFC 9112 7.1: chunk sizes and line ends
    ("chunk_size_not_hex", buy_head() + "zz\r\n" + BUY + "\r\n0\r\n\r\n", 400),
    ("chunk_size_0x_prefix", buy_head() + "0xe\r\n" + BUY + "\r\n0\r\n\r\n", 400),
    ("chunk_size_negative", buy_head() + "-e\r\n" + BUY + "\r\n0\r\n\r\n", 400),
    ("chunk_size_overflow", buy_head() + "1" + "0" * 16 + "e\r\n" + BUY + "\r\n0\r\n\r\n", 400),
    ("chunk_size_over_max_body", buy_head() + "100000\r\n" + BUY + "\r\n0\r\n\r\n", 413),
    ("chunk_size_with_leading_zeros", buy_head() + "000e\r\n" + BUY + "\r\n0\r\n\r\n", OKBUY),
    ("chunk_data_without_crlf", buy_head() + "e\r\n" + BUY + "XY0\r\n\r\n", 400),
    ("chunk_data_longer_than_its_size", buy_head() + "d\r\n" + BUY + "\r\n0\r\n\r\n", 400),
    ("chunk_data_then_bare_lf", buy_head() + "e\r\n" + BUY + "\n0\r\n\r\n", 400),
    ("chunk_size_line_bare_lf", buy_head() + "e\n" + BUY + "\r\n0\r\n\r\n", 400),
    ("chunk_size_line_cr_without_lf", buy_head() + "e\rX" + BUY + "\r\n0\r\n\r\n", 400),
    ("last_chunk_without_final_crlf", buy_head() + "e\r\n" + BUY + "\r\n0\r\nX", 400),
    ("body_in_several_chunks", buy_head() + "5\r\n" + BUY[:5] + "\r\n9\r\n" + BUY[5:] + "\r\n0\r\n\r\n", OKBUY),
    # RFC 9112 7.1.1: chunk extensions, accepted and ignored, bounded
    ("chunk_extension_ignored", buy_head() + chunks(BUY, ext=";name=value"), OKBUY),
    ("chunk_extension_quoted_and_bws", buy_head() + chunks(BUY, ext=' ; a="b c" ;d'), OKBUY),
    ("chunk_extension_control_byte", buy_head() + chunks(BUY, ext=";a=\x01"), 400),
    ("chunk_extension_bare_lf", buy_head() + chunks(BUY, ext=";a\nb"), 400),
    ("chunk_extension_over_1024_bytes", buy_head() + chunks(BUY, ext=";" + "a" * 1100), 400),
    # RFC 9112 7.1.2: trailers, parsed strictly and dropped
    ("trailer_dropped", buy_head() + chunks(BUY, "X-Note: a\r\nX-Other: b\r\n"), OKBUY),
    ("trailer_content_length_changes_nothing", buy_head() + chunks(BUY, "Content-Length: 40\r\n"), OKBUY),
    ("trailer_transfer_encoding_changes_nothing", buy_head() + chunks(BUY, "Transfer-Encoding: chunked\r\n"), OKBUY),
    ("trailer_connection_close_changes_nothing", buy_head() + chunks(BUY, "Connection: close\r\n"), OKBUY),
    ("trailer_host_is_not_a_host", "POST /v1/campaigns/c/purchase HTTP/1.1\r\nX-User-Id: th\r\n"
     "Transfer-Encoding: chunked\r\n\r\n" + chunks(BUY, "Host: x\r\n"), 400),
    ("trailer_folded", buy_head() + chunks(BUY, "X-A: a\r\n b\r\n"), 400),
    ("trailer_bare_lf", buy_head() + chunks(BUY, "X-A: a\n"), 400),
    ("trailer_space_before_colon", buy_head() + chunks(BUY, "X-A : a\r\n"), 400),
    ("trailer_without_colon", buy_head() + chunks(BUY, "X-A a\r\n"), 400),
    ("trailer_empty_name", buy_head() + chunks(BUY, ": a\r\n"), 400),
    ("trailer_nul_in_value", buy_head() + chunks(BUY, "X-A: a\0b\r\n"), 400),
    ("trailer_cr_in_value", buy_head() + chunks(BUY, "X-A: a\rb\r\n"), 400),
    ("trailer_section_over_max_headers", buy_head() + chunks(BUY, "X-A: %s\r\n" % ("a" * 9000)), 431),
    ("trailer_lines_over_100", buy_head() + chunks(BUY, "X-A: a\r\n" * 101), 431),
    # RFC 9112 5, 5.2, 2.2: field syntax and line ends in the head
    ("obs_fold_in_a_header", "GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400),
    ("obs_fold_with_tab", "GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n", 400),
    ("whitespace_line_before_first_header", "GET /ping HTTP/1.1\r\n Host: x\r\n\r\n", 400),
    ("bare_lf_line_endings", "GET /ping HTTP/1.1\nHost: x\n\n", 400),
    ("bare_lf_after_request_line", "GET /ping HTTP/1.1\nHost: x\r\n\r\n", 400),
    ("bare_lf_ending_the_head", "GET /ping HTTP/1.1\r\nHost: x\r\n\n", 400),
    ("cr_without_lf_in_the_head", "GET /ping HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n", 400),
    ("whitespace_before_colon", "GET /ping HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    ("tab_before_colon", "GET /ping HTTP/1.1\r\nHost: x\r\nX-A\t: b\r\n\r\n", 400),
    ("nul_in_a_header_value", "GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n", 400),
    ("cr_in_a_header_value", "GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 400),
    ("empty_lines_before_the_request_line", "\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\n\r\n", 200),
    ("htab_in_a_header_value", "GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\tb\r\n\r\n", 200),
    # RFC 9112 3.2: Host
    ("http_1_1_without_host", "GET /ping HTTP/1.1\r\n\r\n", 400),
    ("http_1_1_two_hosts", "GET /ping HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    ("http_1_1_two_equal_hosts", "GET /ping HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400),
    ("host_with_space", "GET /ping HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    ("host_with_slash", "GET /ping HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    ("host_with_userinfo", "GET /ping HTTP/1.1\r\nHost: u@a\r\n\r\n", 400),
    ("host_with_bad_port", "GET /ping HTTP/1.1\r\nHost: a:8x\r\n\r\n", 400),
    ("host_name_and_port", "GET /ping HTTP/1.1\r\nHost: shop.example:8080\r\n\r\n", 200),
    ("host_ipv6_literal", "GET /ping HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 200),
    ("host_empty", "GET /ping HTTP/1.1\r\nHost:\r\n\r\n", 200),
    ("http_1_0_without_host", "GET /ping HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200),
    ("http_1_0_two_hosts", "GET /ping HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    # one identity per request; one Idempotency-Key per request
    ("two_idempotency_keys", user_head("ik%s" % TAG) + "Idempotency-Key: k1%s\r\nIdempotency-Key: k2%s\r\n"
     "Content-Length: 14\r\n\r\n%s" % (TAG, TAG, BUY), 400),
    ("two_user_ids", "POST /v1/campaigns/c/purchase HTTP/1.1\r\nHost: x\r\nX-User-Id: a1\r\nX-User-Id: a2\r\n"
     "Content-Length: 14\r\n\r\n" + BUY, 400),
]


# refused by a handler, not by the HTTP layer: the framing is sound, the
# connection stays open and the next request is answered
HANDLER_REFUSALS = ("two_idempotency_keys", "two_user_ids")


def run_row(port, name, raw, want):
    want = want if isinstance(want, tuple) else (want,)
    got, closed = exchange(port, raw + PING)
    if not got:
        return check(name, False, "no answer")
    st = got[0][0]
    if st not in want:
        return check(name, False, "answered %d %r, want %s" % (st, got[0][2][:120], want))
    if st >= 400 and name not in HANDLER_REFUSALS:
        ok = is_json_error(got[0]) and closed and len(got) == 1
        return check(name, ok, "not one JSON error then close: %d answers, closed %s" % (len(got), closed))
    if st >= 400 and not is_json_error(got[0]):
        return check(name, False, "not the JSON error shape: %r" % got[0][2][:120])
    ok = len(got) == 2 and got[1][0] == 200 and got[1][2] == b"pong\n"
    check(name, ok, "the request after it: %r" % [g[0] for g in got[1:]])


def head_layout(url, hdrs):
    """The bytes the old layer's pooled head buffer held for a request:
    target, then each name and value, NUL-terminated, then the path."""
    return len(url) + 1 + sum(len(k) + len(v) + 2 for k, v in hdrs) + len(url.split("?")[0]) + 1


def raw_req(url, hdrs, tail):
    return "POST %s HTTP/1.1\r\n%s\r\n%s" % (url, "".join("%s: %s\r\n" % kv for kv in hdrs), tail)


def attack_identity_in_a_trailer(port):
    """A chunked purchase with no X-User-Id but a trailer X-User-Id: victim."""
    victim = "victim" + TAG
    raw = raw_req("/v1/campaigns/trl/purchase", [("Host", "x"), ("Transfer-Encoding", "chunked"),
                                                  ("Connection", "close")],
                  chunks(BUY, "X-User-Id: %s\r\nX-Pad: 1\r\n" % victim))
    st = one(port, raw)[0]
    check("attack_identity_in_a_trailer_is_refused", st in (400, 401), "answered %d" % st)
    st = one(port, user_head(victim, 14).replace("/c/", "/trl/") + BUY)[0]
    check("attack_identity_in_a_trailer_bought_nothing_for_the_victim", st in OKBUY,
          "the victim's own purchase (limit 1) answered %d" % st)


def attack_unterminated_last_trailer(port):
    """X-User-Id as the last trailer of a loop's first purchase: the old
    layer never terminated it, and read past its buffer (ASan:
    heap-buffer-overflow in the user-id check)."""
    raw = raw_req("/v1/campaigns/trl/purchase", [("Host", "x"), ("Transfer-Encoding", "chunked"),
                                                  ("Connection", "close")], chunks(BUY, "X-User-Id: v%s\r\n" % TAG))
    try:
        st = one(port, raw)[0]
    except OSError as e:
        st = "%s" % e
    check("attack_unterminated_last_trailer_is_refused", st in (400, 401), "answered %s" % st)
    try:
        st = one(port, HEALTHZ)[0]
    except OSError as e:
        st = "%s" % e
    check("attack_unterminated_last_trailer_server_alive", st == 200, "healthz answered %s" % st)


def attack_admin_token_from_stale_bytes(port):
    """An admin request, then one with no token whose only trailer is
    Authorization: B, placed where the admin's value was."""
    url = "/v1/campaigns"
    evil = [("Host", "x"), ("Transfer-Encoding", "chunked"), ("Connection", "close")]
    at = head_layout(url, evil) + len("Authorization") + 1
    pad = at - (head_layout(url, [("Host", "x")]) - len(url) - 1 + len("X-Pad") + 2 + len("Authorization") + 1)
    now = int(time.time() * 1000)
    prime = json.dumps({"id": "pr" + TAG, "stock": 1, "starts_at": now, "ends_at": now + 60000})
    one(port, raw_req(url, [("Host", "x"), ("X-Pad", "p" * pad), ("Authorization", "Bearer " + ADMIN),
                            ("Content-Length", str(len(prime))), ("Connection", "close")], prime))
    cid = "zz" + TAG
    body = json.dumps({"id": cid, "stock": 5, "starts_at": now, "ends_at": now + 60000})
    st = one(port, raw_req(url, evil, chunks(body, "Authorization: B\r\n")))[0]
    check("attack_admin_token_in_a_trailer_is_refused", st == 401, "answered %d" % st)
    st = one(port, "GET /v1/campaigns/%s HTTP/1.1\r\nHost: x\r\n\r\n" % cid)[0]
    check("attack_admin_token_in_a_trailer_created_nothing", st == 404, "GET of the campaign answered %d" % st)


def sign(user, exp):
    mac = hmac.new(SECRET.encode(), ("%s\n%d" % (user, exp)).encode(), hashlib.sha256).hexdigest()
    return "v1=%s;exp=%d" % (mac, exp)


def attack_signature_from_stale_bytes(port):
    """The victim's signed purchase, then one naming the victim whose
    X-User-Signature is only a trailer 'v' placed where the victim's was."""
    victim, url = "sv" + TAG, "/v1/campaigns/sg/purchase"
    evil = [("Host", "x"), ("X-User-Id", victim), ("Transfer-Encoding", "chunked"), ("Connection", "close")]
    at = head_layout(url, evil) + len("X-User-Signature") + 1
    base = len(url) + 1 + 7 + len("X-Pad") + 2 + len("X-User-Id") + len(victim) + 2 + len("X-User-Signature") + 1
    sig = sign(victim, int(time.time()) + 3600)
    hdrs = [("Host", "x"), ("X-Pad", "p" * (at - base)), ("X-User-Id", victim), ("X-User-Signature", sig),
            ("Content-Length", "14"), ("Connection", "close")]
    st = one(port, raw_req(url, hdrs, BUY))[0]
    check("signed_purchase_of_the_victim", st in OKBUY, "answered %d" % st)
    st = one(port, raw_req(url, evil, chunks(BUY, "X-User-Signature: v\r\n")))[0]
    check("attack_signature_in_a_trailer_is_refused", st == 401, "answered %d" % st)
    hdrs[1] = ("X-Pad", "p")
    st = one(port, raw_req(url, hdrs, BUY))[0]
    check("attack_signature_in_a_trailer_bought_nothing", st in OKBUY,
          "the victim's second purchase (limit 2) answered %d" % st)


def main():
    if not redis_url or not CMD:
        raise SystemExit(__doc__)
    try:
        port = start()
        for cid, limit in (("c", 1), ("trl", 1), ("sg", 2)):
            st = create(port, cid, limit)
            assert st in (201, 409), "creating campaign %s: %d" % (cid, st)
        fresh = start()  # the first request a loop reads: no earlier bytes in its buffers
        attack_identity_in_a_trailer(fresh)
        attack_unterminated_last_trailer(start())
        attack_admin_token_from_stale_bytes(port)
        signed = start("--user-secret", SECRET)
        attack_signature_from_stale_bytes(signed)
        for name, raw, want in TABLE:
            run_row(port, name, raw, want)
        for p in (port, fresh, signed):
            st = one(p, HEALTHZ)[0]
            check("alive_after_every_case_%d" % p, st == 200, "healthz answered %d" % st)
    finally:
        stop_all()
    failed = [n for n, ok in RESULTS if not ok]
    print("%d of %d checks passed" % (len(RESULTS) - len(failed), len(RESULTS)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
