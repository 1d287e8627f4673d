#!/usr/bin/env python3
# abi_layout.py BASELINE.abi NEW.abi: the layout of every struct, union and
# enum the public headers (include/dlock/) define, compared between two
# abidw XML files. abidiff judges some changes of a type reached through a
# pointer (a struct grown at its end, say) harmless and leaves them out of
# its report; for libdlock they are not: a caller allocates the option and
# result structs, so their size and every member's offset and type are the
# ABI. Fails (exit 1), naming each, on a public type removed, a size or a
# member changed, or an enumerator removed or renumbered. A new type or a
# new enumerator is not a break.
import sys
import xml.etree.ElementTree as ET

PUBLIC = "include/dlock/"  # relative in the baseline, absolute in a fresh dump


def load(path):
    root = ET.parse(path).getroot()
    by_id = {}
    for el in root.iter():
        i = el.get("id")
        if i is not None:
            by_id[i] = el
    return root, by_id


def type_name(by_id, tid, depth=0):
    el = by_id.get(tid)
    if el is None or depth > 16:
        return "?"
    tag = el.tag
    if tag == "pointer-type-def":
        return type_name(by_id, el.get("type-id"), depth + 1) + "*"
    if tag == "qualified-type-def":
        q = " ".join(k for k in ("const", "volatile", "restrict") if el.get(k) == "yes")
        return q + " " + type_name(by_id, el.get("type-id"), depth + 1)
    if tag == "array-type-def":
        sub = el.find("subrange")
        n = sub.get("length") if sub is not None else "?"
        return type_name(by_id, el.get("type-id"), depth + 1) + "[%s]" % n
    if tag == "function-type":
        return "fn(" + ",".join(type_name(by_id, p.get("type-id"), depth + 1)
                                for p in el.findall("parameter") if p.get("type-id")) + ")"
    return el.get("name") or tag


def public_types(root, by_id):
    out = {}
    for el in root.iter():
        if el.tag not in ("class-decl", "union-decl", "enum-decl"):
            continue
        if PUBLIC not in (el.get("filepath") or "") or el.get("is-declaration-only") == "yes":
            continue
        name = el.get("name")
        if not name or name.startswith("__anonymous"):
            continue
        if el.tag == "enum-decl":
            vals = {e.get("name"): e.get("value") for e in el.findall("enumerator")}
            out[("enum", name)] = ("enum", vals)
            continue
        members = []
        for dm in el.findall("data-member"):
            v = dm.find("var-decl")
            members.append((v.get("name"), dm.get("layout-offset-in-bits"), type_name(by_id, v.get("type-id"))))
        out[(el.tag, name)] = (el.get("size-in-bits"), members)
    return out


def main():
    if len(sys.argv) != 3:
        print("usage: abi_layout.py BASELINE.abi NEW.abi", file=sys.stderr)
        return 2
    old = public_types(*load(sys.argv[1]))
    new = public_types(*load(sys.argv[2]))
    if not old:
        print("abi_layout.py: no public type in %s" % sys.argv[1], file=sys.stderr)
        return 2
    bad = []
    for key, was in sorted(old.items()):
        kind, name = key
        now = new.get(key)
        if now is None:
            bad.append("%s %s: gone from the public headers" % (kind, name))
        elif kind == "enum":
            for e, v in sorted(was[1].items()):
                if now[1].get(e) != v:
                    bad.append("enum %s: %s was %s, is %s" % (name, e, v, now[1].get(e, "gone")))
        else:
            if was[0] != now[0]:
                bad.append("%s %s: size %s bits, was %s" % (kind, name, now[0], was[0]))
            if was[1] != now[1]:
                bad.append("%s %s: members (name, offset, type) %s, were %s" % (kind, name, now[1], was[1]))
    for b in bad:
        print("abi_layout.py: " + b, file=sys.stderr)
    print("abi_layout.py: %d public types compared, %d changed" % (len(old), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
