// node_redlock.js: side-by-side peer for dlock-bench's `uncontended`
// scenario: node redlock (one ioredis client, so the RedLock quorum is that
// one server), one async loop, lock(resource, ttl) + unlock() cycles, and
// the same-run limit (two trivial EVALSHA round trips per cycle through
// ioredis). Packages: pinned in bench/peers/package.json, installed by
// bench/dlock-bench/run_bench.sh into a cache dir (NODE_PATH points there).
// Run: node bench/peers/node_redlock.js --port PORT [--duration-ms MS]
// Prints the dlock-bench CSV row: scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us
'use strict';
const Redis = require('ioredis');
const Redlock = require('redlock');

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

function pct(samples, q) {
  samples.sort((a, b) => a - b);
  return samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] / 1000;
}

async function limit(r, ms) {
  const sha = await r.script('LOAD', 'return 1');
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(ms) * 1000000n;
  let cycles = 0;
  while (process.hrtime.bigint() < end) {
    await r.evalsha(sha, 1, 'bench:limit');
    await r.evalsha(sha, 1, 'bench:limit');
    cycles++;
  }
  return (cycles * 1e9) / Number(process.hrtime.bigint() - t0);
}

async function main() {
  const port = arg('--port', 6379);
  const ms = arg('--duration-ms', 3000);
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
  await r.connect();
  const lim = await limit(r, ms);
  const redlock = new Redlock([r], { retryCount: 0 });
  const name = 'bench:node:' + process.pid + ':uncontended';
  const samples = [];
  let cycles = 0;
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(ms) * 1000000n;
  while (process.hrtime.bigint() < end) {
    const s = process.hrtime.bigint();
    const lock = await redlock.lock(name, 10000);
    await lock.unlock();
    samples.push(Number(process.hrtime.bigint() - s));
    cycles++;
  }
  const rate = (cycles * 1e9) / Number(process.hrtime.bigint() - t0);
  console.log(['node_redlock_uncontended', rate.toFixed(0), lim.toFixed(0), (rate / lim).toFixed(3),
               pct(samples, 0.5).toFixed(1), pct(samples, 0.99).toFixed(1)].join(','));
  r.disconnect();
}

main().catch((e) => {
  console.error('node_redlock: ' + e.message);
  process.exit(1);
});
