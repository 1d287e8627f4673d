"""check_report.py REPORT.html WORKDIR [failover]: the demo's HTML report is
well-formed, self-contained, holds the timeline, the orders and the latency
charts with valued axes and the deployment, (with `failover`) marks the
kill, the promotion, the barrier and the first 201 after it, and renders
in headless Chromium to a PNG that is not blank (many distinct colours)."""
import os
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib


def png_colours(path):
    """The number of distinct pixel colours of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and ctype in (2, 6), "want 8-bit RGB(A), got depth %d type %d" % (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw, stride, prev, colours = zlib.decompress(idat), w * bpp, bytearray(w * bpp), set()
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        colours.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp * 4))  # every 4th pixel
        prev = line
    return len(colours)


def main():
    report, work = sys.argv[1], sys.argv[2]
    failover = len(sys.argv) > 3 and sys.argv[3] == "failover"
    root = ET.parse(report).getroot()
    ids = {e.get("id"): "".join(e.itertext()) for e in root.iter() if e.get("id")}
    assert ids["verdict"] == "all invariants held", ids["verdict"]
    assert ids["deployment"].startswith(("Sentinel", "standalone", "Redis Cluster")), ids["deployment"]
    svgs = [e for e in root.iter() if e.tag.endswith("svg")]
    assert len(svgs) == 3, "want 3 inline charts (timeline, orders, latency), got %d" % len(svgs)
    assert not [e for e in root.iter() if e.tag in ("script", "link")], "report must be self-contained"
    texts = ["".join(t.itertext()) for t in svgs[0].iter() if t.tag.endswith("text")]
    assert "answers per 100 ms" in texts and "seconds since the sale started" in texts, texts[:10]
    assert sum(1 for t in texts if t.strip().isdigit()) >= 4, "the timeline's axes carry no values: %s" % texts
    marks = [t for t in texts if t.startswith(("kill", "promoted", "barrier", "first 201 after"))]
    if failover:
        for m in ("kill", "promoted", "barrier", "first 201 after"):
            assert any(t.startswith(m) for t in marks), "no '%s' mark in the timeline: %s" % (m, marks)
        assert "failover-rates" in ids, "no decisions/s around the failover"
    png = os.path.join(work, "report.png")
    subprocess.run(["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--user-data-dir=" + os.path.join(work, "chromium-profile"),
                    "--window-size=1000,1600", "--screenshot=" + png, "file://" + os.path.abspath(report)],
                   check=True, capture_output=True, timeout=120)
    n = png_colours(png)
    assert n > 16, "the rendered report is blank (%d distinct colours)" % n
    print("report ok: %s, %d marks, rendered %s with %d distinct colours" % (ids["deployment"], len(marks), png, n))


if __name__ == "__main__":
    main()
