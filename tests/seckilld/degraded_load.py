# degraded_load.py: purchase load for test_seckilld_degraded.sh. Threads
# buy one unit at a time for random users of a set on random instances until
# the stop file exists (or --seconds pass, or --until-soldout sees every
# instance answer sold_out); with --answered-file, creates that file at
# the first decided answer, with --soldout-file at the first sold_out
# (handshakes for the caller). On the database path a reserve used up while
# the campaign has units in Redis is "503 degraded_reserve_exhausted": for
# these handshakes, nothing left to sell there, as sold_out. Writes a JSON
# summary (answers by code, the accepted order ids, 201 and 202, and the
# messages of the refusals by code) to --out.
import argparse, http.client, json, os, random, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--urls", required=True)          # host:port,host:port,...
ap.add_argument("--campaign", required=True)
ap.add_argument("--users", required=True)         # prefix:count
ap.add_argument("--threads", type=int, default=6)
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--stop-file", default="")
ap.add_argument("--until-soldout", action="store_true")
ap.add_argument("--out", required=True)
ap.add_argument("--answered-file", default="")  # created at the first 202/409 answer
ap.add_argument("--soldout-file", default="")   # created at the first 409 sold_out (or reserve used up)
a = ap.parse_args()

hosts = a.urls.split(",")
prefix, count = a.users.split(":")
users = ["%s-%d" % (prefix, i) for i in range(int(count))]
lock = threading.Lock()
codes, accepted, messages = {}, [], {}
NOTHING_LEFT = ("409 sold_out", "503 degraded_reserve_exhausted")
soldout_seen = set()
end = time.time() + a.seconds


def stop():
    if time.time() > end or (a.stop_file and os.path.exists(a.stop_file)):
        return True
    return a.until_soldout and len(soldout_seen) == len(hosts)


def run(seed):
    rnd = random.Random(seed)
    conns = {}
    while not stop():
        h = rnd.choice(hosts)
        user = rnd.choice(users)
        try:
            c = conns.get(h)
            if c is None:
                host, port = h.split(":")
                c = conns[h] = http.client.HTTPConnection(host, int(port), timeout=10)
            c.request("POST", "/v1/campaigns/%s/purchase" % a.campaign, body=b'{"quantity":1}',
                      headers={"X-User-Id": user, "Content-Type": "application/json"})
            r = c.getresponse()
            body = json.loads(r.read() or b"{}")
            key = "%d %s" % (r.status, body.get("error", body.get("status", "")))
        except Exception as e:  # connection trouble: count it, open a new one
            conns.pop(h, None)
            key = "exception " + type(e).__name__
            body = {}
        with lock:
            codes[key] = codes.get(key, 0) + 1
            # 202: decided but not acknowledged (the database path's
            # tentative orders, docs/design/promise.md): an order all the same
            if key in ("201 accepted", "202 pending"):
                # buyers see <id>-<tag>; the database keeps <id>
                accepted.append(body["order_id"].split("-")[0])
            if key in NOTHING_LEFT:
                soldout_seen.add(h)
                if a.soldout_file:
                    open(a.soldout_file, "a").close()
            if a.answered_file and key in ("202 pending", "201 accepted") + NOTHING_LEFT:
                open(a.answered_file, "a").close()
            if "message" in body:
                messages.setdefault(key, set()).add(body["message"])
        if key.startswith("503") or key.startswith("exception"):
            time.sleep(0.01)


ts = [threading.Thread(target=run, args=(i,)) for i in range(a.threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
with open(a.out, "w") as f:
    json.dump({"codes": codes, "accepted": accepted,
               "messages": {k: sorted(v) for k, v in messages.items()}}, f)
