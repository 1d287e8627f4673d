#!/usr/bin/env python3
"""test_json_differential.py JSON_CANON CORPUS_DIR
   test_json_differential.py --write-corpus DIR

One JSON body, one reading: every input (the files of CORPUS_DIR, the
crafted cases below, and deterministic mutations of both) goes to the
server's reader (JSON_CANON, tests/common/json_canon.c, which links
src/common/json.c) and to a reference reader: Python's json over the bytes
decoded as strict UTF-8, refusing duplicate keys and NaN/Infinity.

- What the server accepts, the reference must accept and read the same
  (same canonical form: types, keys in order, decoded bytes, numbers).
- Where the server refuses and the reference accepts, the server's reason
  must be one of its documented strictnesses (json.h, docs/http-api.md) and
  that reason must really be in the reference's reading (a key holding
  U+0000 is there, the integer is outside int64, ...).

--write-corpus DIR writes the crafted cases as files (the fuzz step seeds
libFuzzer with them: scripts/fuzz.sh)."""
import json
import os
import random
import subprocess
import sys

INT64 = (-(2**63), 2**63 - 1)
MAX_DEPTH = 32


class Refused(Exception):
    pass


def no_dups(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise Refused("duplicate key")
        d[k] = v
    return d


def no_constant(name):
    raise Refused("constant " + name)


def reference(data):
    """Python's reading of data, or raises."""
    text = data.decode("utf-8")  # strict: no surrogates, no overlongs
    return json.loads(text, object_pairs_hook=no_dups, parse_constant=no_constant)


def hexs(s):
    return s.encode("utf-8", "surrogatepass").hex()


def canon(v):
    if v is None:
        return "n"
    if v is True:
        return "t"
    if v is False:
        return "f"
    if isinstance(v, int):
        return "I:%d" % v
    if isinstance(v, float):
        return "F:%.17g" % v
    if isinstance(v, str):
        return "S:" + hexs(v)
    if isinstance(v, list):
        return "A[" + ",".join(canon(x) for x in v) + "]"
    return "O{" + ",".join(hexs(k) + ":" + canon(x) for k, x in v.items()) + "}"


def walk(v, depth=0):
    """(value, containers around it) for every value and key of v."""
    yield v, depth
    if isinstance(v, list):
        for x in v:
            yield from walk(x, depth + 1)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield ("key", k), depth + 1
            yield from walk(x, depth + 1)


def has(v, pred):
    return any(pred(x, d) for x, d in walk(v))


def is_key(x):
    return isinstance(x, tuple) and x[0] == "key"


def text_of(x):
    return x[1] if is_key(x) else x if isinstance(x, str) else ""


# The server's documented strictnesses: its message, and what must then be
# present in the reference's reading for the refusal to be that one.
STRICT = [
    ("key contains U+0000", lambda x, d: is_key(x) and "\0" in x[1]),
    ("integer out of range (int64)",
     lambda x, d: isinstance(x, int) and not isinstance(x, bool) and not INT64[0] <= x <= INT64[1]),
    ("number out of range (double)", lambda x, d: isinstance(x, float) and x in (float("inf"), float("-inf"))),
    ("lone high surrogate", lambda x, d: any(0xD800 <= ord(c) <= 0xDFFF for c in text_of(x))),
    ("lone low surrogate", lambda x, d: any(0xD800 <= ord(c) <= 0xDFFF for c in text_of(x))),
    ("bad low surrogate", lambda x, d: any(0xD800 <= ord(c) <= 0xDFFF for c in text_of(x))),
    ("nesting deeper than 32", lambda x, d: isinstance(x, (list, dict)) and d >= MAX_DEPTH),
]


def crafted():
    """Hand-made cases: name -> bytes."""
    c = {}
    q = "quantity"
    # the reproductions
    c["nul_key_purchase"] = b'{"quantity":1,"quantity\\u0000":3}'
    c["nul_key_campaign"] = (b'{"id":"D6","id\\u0000x":"zz","stock":5,"starts_at":0,'
                             b'"ends_at":4102444800000}')
    c["nul_key_alone"] = b'{"\\u0000":1}'
    c["nul_key_middle"] = b'{"a\\u0000b":1}'
    c["nul_value"] = b'{"title":"a\\u0000b"}'
    # duplicate keys by every spelling of each character of "quantity"
    for i, ch in enumerate(q):
        for name, esc in (("lower", "\\u%04x" % ord(ch)), ("upper", "\\u%04X" % ord(ch))):
            k = q[:i] + esc + q[i + 1:]
            c["dup_%s_%d" % (name, i)] = ('{"quantity":1,"%s":3}' % k).encode()
    c["dup_plain"] = b'{"quantity":1,"quantity":3}'
    c["dup_all_escaped"] = ('{"quantity":1,"%s":3}' % "".join("\\u%04x" % ord(x) for x in q)).encode()
    c["dup_solidus"] = b'{"a/b":1,"a\\/b":2}'
    c["dup_nested"] = b'{"o":{"k":1,"\\u006b":2}}'
    c["dup_utf8_vs_escape"] = '{"\u00e9":1,"\\u00e9":2}'.encode()
    c["dup_astral"] = '{"\U0001F600":1,"\\ud83d\\ude00":2}'.encode()
    c["not_dup_nfc_nfd"] = '{"\u00e9":1,"e\u0301":2}'.encode()  # different code points: two keys
    c["not_dup_case"] = b'{"Quantity":1,"quantity":2}'
    # surrogates
    c["surrogate_pair"] = b'"\\ud83d\\ude00"'
    c["lone_high"] = b'"\\ud800"'
    c["lone_high_end"] = b'"x\\ud800"'
    c["lone_low"] = b'"\\udc00"'
    c["high_then_letter"] = b'"\\ud800\\u0041"'
    c["high_high"] = b'"\\ud800\\ud800"'
    c["reversed_pair"] = b'"\\ude00\\ud83d"'
    c["surrogate_key"] = b'{"\\ud800":1}'
    c["utf8_surrogate"] = b'"\xed\xa0\x80"'
    c["utf8_overlong"] = b'"\xc0\xaf"'
    c["utf8_too_big"] = b'"\xf4\x90\x80\x80"'
    c["utf8_truncated"] = b'"\xe4\xb8"'
    c["utf8_ok"] = '"\u4e2d\U0001F600"'.encode()
    c["latin1_byte"] = b'"\xe9"'
    # numbers
    for name, n in (("int_max", "9223372036854775807"), ("int_min", "-9223372036854775808"),
                    ("int_over", "9223372036854775808"), ("int_under", "-9223372036854775809"),
                    ("int_huge", "1" + "0" * 40), ("neg_zero", "-0"), ("neg_zero_float", "-0.0"),
                    ("float", "1.5"), ("float_int", "1.0"), ("exp", "1e2"), ("exp_upper", "1E+2"),
                    ("exp_neg", "25e-1"), ("exp_big", "1e308"), ("exp_over", "1e309"),
                    ("exp_neg_over", "-1e400"), ("exp_tiny", "1e-400"), ("denormal", "4.9e-324"),
                    ("long_fraction", "1." + "0" * 80 + "1"), ("long_tiny", "0." + "0" * 80 + "1"),
                    ("long_mantissa", "1" * 70 + ".5"), ("leading_zero", "01"), ("plus", "+1"),
                    ("dot_start", ".5"), ("dot_end", "1."), ("exp_empty", "1e"), ("minus_only", "-"),
                    ("hex", "0x10"), ("nan", "NaN"), ("inf", "Infinity"), ("neg_inf", "-Infinity"),
                    ("round_half", "0.1000000000000000055511151231257827"), ("max_double", "1.7976931348623157e308")):
        c["num_" + name] = n.encode()
        c["qty_" + name] = ('{"quantity":%s}' % n).encode()
    # time fields (the JSON is fine; the field reader bounds them)
    c["ends_at_huge"] = b'{"id":"t1","stock":1,"starts_at":0,"ends_at":4611686018427387904}'
    c["ends_at_max"] = b'{"id":"t1","stock":1,"starts_at":0,"ends_at":253402300799999}'
    # nesting
    for k in (31, 32, 33, 200):
        c["deep_arrays_%d" % k] = b"[" * k + b"]" * k
        c["deep_objects_%d" % k] = b'{"a":' * k + b"1" + b"}" * k
        c["deep_value_%d" % k] = b"[" * k + b"1" + b"]" * k
    # whitespace, BOM, framing
    c["ws_all"] = b' \t\r\n{ \t\r\n"a" \t\r\n: \t\r\n1 \t\r\n} \t\r\n'
    c["ws_vtab"] = b"\x0b{}"
    c["ws_formfeed"] = b"{}\x0c"
    c["ws_nbsp"] = b"\xc2\xa0{}"
    c["ws_nul_after"] = b"{}\x00"
    c["bom"] = b"\xef\xbb\xbf{}"
    c["bom_inside"] = b'"\xef\xbb\xbf"'
    c["trailing_comma_obj"] = b'{"a":1,}'
    c["trailing_comma_arr"] = b"[1,]"
    c["leading_comma"] = b"[,1]"
    c["double_comma"] = b"[1,,2]"
    c["trailing_garbage"] = b'{"quantity":1}x'
    c["two_values"] = b'{"quantity":1}{"quantity":3}'
    c["comment"] = b'{"quantity":1}/*x*/'
    c["line_comment"] = b'//x\n{"quantity":1}'
    c["single_quotes"] = b"{'quantity':1}"
    c["bare_key"] = b"{quantity:1}"
    c["empty"] = b""
    c["spaces"] = b"   "
    c["raw_tab_in_string"] = b'"a\tb"'
    c["raw_newline_in_string"] = b'"a\nb"'
    c["raw_del_in_string"] = b'"a\x7fb"'
    c["escapes"] = b'"\\"\\\\\\/\\b\\f\\n\\r\\t"'
    c["bad_escape"] = b'"\\x41"'
    c["short_u"] = b'"\\u12"'
    c["literals"] = b"[true,false,null]"
    c["literal_caps"] = b"True"
    c["literal_short"] = b"tru"
    c["scalar_root"] = b"1"
    c["string_root"] = b'"x"'
    c["many_keys"] = ("{" + ",".join('"k%d":%d' % (i, i) for i in range(300)) + "}").encode()
    return c


def mutations(seeds, count, rng):
    """Deterministic byte mutations of the seeds."""
    alphabet = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"\\", b" ", b"0", b"1", b"9", b"-", b"e",
                b".", b"\\u0000", b"\\ud800", b"\\udc00", b"\\u0069", b"\xff", b"\xc3", b"\xed\xa0\x80",
                b"\x00", b"\t", b"n", b"t", b"1e400", b"99999999999999999999"]
    out = []
    for _ in range(count):
        s = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            pos = rng.randint(0, len(s))
            op = rng.randint(0, 3)
            if op == 0 and s:
                del s[min(pos, len(s) - 1)]
            elif op == 1:
                s[pos:pos] = rng.choice(alphabet)
            elif op == 2 and s:
                s[min(pos, len(s) - 1):min(pos, len(s) - 1) + 1] = rng.choice(alphabet)
            else:
                other = rng.choice(seeds)
                a = rng.randint(0, len(other))
                s[pos:pos] = other[a:a + rng.randint(0, 12)]
        out.append(bytes(s))
    return out


def server_readings(canon_prog, inputs):
    feed = "".join(x.hex() + "\n" for x in inputs)
    r = subprocess.run([canon_prog], input=feed, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit("json_canon failed (%d): %s" % (r.returncode, r.stderr))
    lines = r.stdout.split("\n")[:-1]
    if len(lines) != len(inputs):
        sys.exit("json_canon answered %d lines for %d inputs" % (len(lines), len(inputs)))
    return lines


def judge(data, got):
    """None when the two readings agree, else what is wrong."""
    try:
        ref = reference(data)
        ref_err = None
    except (Refused, ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        ref, ref_err = None, e
    if not got.startswith("REFUSED "):
        if ref_err is not None:
            return "server accepted %s, the reference refused it: %s" % (got[:200], ref_err)
        want = canon(ref)
        return None if want == got else "server read %s, the reference %s" % (got[:300], want[:300])
    if ref_err is not None:
        return None
    msg = got[len("REFUSED "):]
    for reason, present in STRICT:
        if msg.startswith(reason + " at byte "):
            if has(ref, present):
                return None
            return "server refused (%s) but the reference's reading has no such thing: %s" % (msg, canon(ref)[:300])
    return "server refused (%s) what the reference reads as %s: not a documented strictness" % (msg, canon(ref)[:300])


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--write-corpus":
        os.makedirs(args[1], exist_ok=True)
        for name, data in crafted().items():
            with open(os.path.join(args[1], name), "wb") as f:
                f.write(data)
        return 0
    if len(args) != 2:
        sys.exit(__doc__)
    canon_prog, corpus = args
    seeds = []
    for name in sorted(os.listdir(corpus)):
        with open(os.path.join(corpus, name), "rb") as f:
            seeds.append(f.read())
    seeds += list(crafted().values())
    inputs = seeds + mutations(seeds, 20000, random.Random(37))
    got = server_readings(canon_prog, inputs)
    bad, accepted = [], 0
    for data, g in zip(inputs, got):
        why = judge(data, g)
        if why:
            bad.append((data, why))
        accepted += not g.startswith("REFUSED ")
    for data, why in bad[:20]:
        print("FAIL: %r: %s" % (data[:120], why))
    print("%d inputs, %d accepted by the server, %d disagreements" % (len(inputs), accepted, len(bad)))
    if accepted < 1000:
        print("FAIL: too few accepted inputs to compare")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
