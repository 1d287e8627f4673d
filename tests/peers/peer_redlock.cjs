// peer_redlock.cjs: node `redlock` (5.0.0-beta.2, over ioredis 5) as a peer
// of dlock's simple lock, for test_peers_simple.sh; the same commands as
// peer_redis_py.py. PEER_NODE_MODULES names the node_modules directory the
// test installed them into. No retries: a busy lock answers at once.
"use strict";
const fs = require("fs");
const path = require("path");
const mods = process.env.PEER_NODE_MODULES;
const Redis = require(path.join(mods, "ioredis"));
const Redlock = require(path.join(mods, "redlock")).default;
const { ExecutionError } = require(path.join(mods, "redlock"));

const [cmd, port, key, leaseMs, held, go] = process.argv.slice(2);
const client = new Redis({ host: "127.0.0.1", port: Number(port), lazyConnect: false });
const redlock = new Redlock([client], { retryCount: 0 });

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

async function tryTake(ms) {
  try {
    return await redlock.acquire([key], ms);
  } catch (e) {
    if (e instanceof ExecutionError) return null;  // the key exists: busy
    throw e;
  }
}

async function main() {
  if (cmd === "try") {
    const lock = await tryTake(30000);
    console.log(lock ? "acquired" : "busy");
    if (lock) await lock.release();
  } else if (cmd === "hold") {
    const lock = await tryTake(Number(leaseMs));
    if (!lock) { console.log("busy"); return 3; }
    fs.writeFileSync(held, "");
    const deadline = Date.now() + 30000;
    while (!fs.existsSync(go)) {
      if (Date.now() > deadline) throw new Error("gave up waiting for " + go);
      await sleep(20);
    }
    try {
      await lock.release();
      console.log("released");
    } catch (e) {
      // release deletes only a key holding this lock's value; a key that
      // expired and was taken by someone else counts as a vote against
      if (!(e instanceof ExecutionError)) throw e;
      console.log("refused");
    }
  } else {
    throw new Error("unknown command " + cmd);
  }
  return 0;
}

main().then((rc) => { client.disconnect(); process.exit(rc); },
            (e) => { console.error("peer_redlock: " + e.message); process.exit(2); });
