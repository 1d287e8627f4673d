// seckill-client.mjs: a seckilld buyer client in JavaScript (Node 20: the
// built-in fetch and crypto, no packages). Copy it into your service;
// docs/http-api.md explains each answer, docs/openapi.yaml is the contract.
//
// What it does right, and why:
// - signs the buyer's identity (X-User-Id + X-User-Signature, HMAC-SHA256)
//   when the deployment has a user secret;
// - sends every purchase with an Idempotency-Key and retries with the SAME
//   key on a network error or a 503/429 (after Retry-After): a retry can
//   never buy twice, and an outcome_unknown is resolved by the retry;
// - treats 202 as "decided, not yet safe" and polls its Location until the
//   order is confirmed (a lost order is bought again under the same key);
// - turns every documented error code into SeckillError; anything else is
//   UnexpectedAnswer (a contract break worth an alert, never ignored).
//
// Command line (the same for the Python and Java clients):
//   SECKILL_URL=http://localhost:8080 SECKILL_USER=alice [SECKILL_SECRET=...] \
//     node seckill-client.mjs buy CAMPAIGN [QUANTITY [IDEMPOTENCY_KEY]] | order ID | pay ID | cancel ID
// prints one JSON line; exit 0 done, 1 refused (a documented error), 2 an
// unexpected answer, 3 gave up retrying.
import { createHmac, randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';

// 503 and 429: nothing was decided (or, outcome_unknown, it may have been):
// the same request, with the same Idempotency-Key, is safe to send again.
const RETRY = new Set(['unavailable', 'recovering', 'outcome_unknown', 'degraded_reserve_exhausted', 'rate_limited']);
// Every other error code docs/http-api.md lists: a final answer.
const REFUSALS = new Set(['bad_request', 'unauthorized', 'signature_malformed', 'signature_expired',
  'signature_campaign', 'signature_legacy', 'not_found', 'method_not_allowed', 'request_timeout', 'sold_out',
  'limit_reached', 'not_started', 'ended', 'exists', 'conflict', 'cancelled', 'rejected', 'paid', 'too_large',
  'uri_too_long', 'expectation_failed', 'headers_too_large', 'not_implemented', 'version_not_supported']);

export class SeckillError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    Object.assign(this, { status, code, detail: message });
  }
}
export class UnexpectedAnswer extends Error {}
export class GaveUp extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class SeckillClient {
  constructor(baseUrl, user, secret = null, { attempts = 6, timeoutMs = 10000 } = {}) {
    Object.assign(this, { baseUrl, user, secret, attempts, timeoutMs });
  }

  // The buyer's headers. The signature expires in 5 minutes: sign per
  // request (or per session), never store one.
  identity(campaign = null) {
    const h = { 'X-User-Id': this.user };
    if (this.secret) {
      const exp = Math.floor(Date.now() / 1000) + 300;
      const msg = `${this.user}\n${exp}` + (campaign ? `\n${campaign}` : '');
      const mac = createHmac('sha256', this.secret).update(msg).digest('hex');
      h['X-User-Signature'] = `v1=${mac};exp=${exp}` + (campaign ? `;c=${campaign}` : '');
    }
    return h;
  }

  // Sends until an answer in ok (statuses) or a final refusal. Retries
  // network errors and RETRY codes after Retry-After: callers pass an
  // Idempotency-Key wherever a retry must not act twice.
  async call(method, path, ok, body = null, headers = {}) {
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      let res, doc;
      try {
        res = await fetch(this.baseUrl + path, {
          method, headers: { ...headers, ...(body ? { 'Content-Type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined, signal: AbortSignal.timeout(this.timeoutMs),
        });
        const text = await res.text();
        try {
          doc = text ? JSON.parse(text) : {};
        } catch {
          throw new UnexpectedAnswer(`${res.status} with a body that is not JSON: ${text.slice(0, 200)}`);
        }
      } catch (e) {
        if (e instanceof UnexpectedAnswer) throw e;
        // refused, reset, timed out: the request may have been decided and only its answer lost
        await sleep(Math.min(100 * 2 ** attempt, 2000));
        continue;
      }
      if (ok.includes(res.status)) return { status: res.status, headers: res.headers, doc };
      if (RETRY.has(doc.error) && (res.status === 429 || res.status === 503)) {
        await sleep(1000 * Number(res.headers.get('retry-after') ?? 1));
        continue;
      }
      if (REFUSALS.has(doc.error) && res.status >= 400) throw new SeckillError(res.status, doc.error, doc.message);
      throw new UnexpectedAnswer(`${method} ${path}: ${res.status} ${JSON.stringify(doc)}`);
    }
    throw new GaveUp(`${method} ${path}: no answer after ${this.attempts} attempts`);
  }

  // Buys; returns the order once confirmed (a 201, or a 202 followed to its
  // confirmation). The key makes every retry the same purchase.
  async buy(campaign, quantity = 1, key = randomUUID(), confirmWithinMs = 30000) {
    const path = `/v1/campaigns/${encodeURIComponent(campaign)}/purchase`;
    const deadline = Date.now() + confirmWithinMs;
    for (;;) {
      const headers = { ...this.identity(campaign), 'Idempotency-Key': key };
      const { status, headers: h, doc } = await this.call('POST', path, [200, 201, 202], { quantity }, headers);
      if (status === 201) return { ...doc, state: 'confirmed' };
      if (status === 200) return doc; // the key's order moved on (paid, cancelled...): it is that order
      if (!h.get('location')) throw new UnexpectedAnswer('202 without a Location');
      const order = await this.follow(h.get('location'), deadline); // 202: decided, not yet safe
      if (order) return order;
      // lost before it was safe: the same key decides the purchase again
    }
  }

  // Polls a 202's Location: the order once it is no longer pending, null if it was lost.
  async follow(location, deadline) {
    while (Date.now() < deadline) {
      let r;
      try {
        r = await this.call('GET', location, [200], null, this.identity());
      } catch (e) {
        if (e instanceof SeckillError && e.status === 404) return null; // "state":"lost"
        throw e;
      }
      if (r.doc.state !== 'pending') return r.doc;
      await sleep(1000 * Number(r.headers.get('retry-after') ?? 0.2));
    }
    throw new GaveUp(`order ${location} still pending`);
  }

  async order(id) {
    return (await this.call('GET', `/v1/orders/${id}`, [200], null, this.identity())).doc;
  }

  // Paying or cancelling twice is 200 again: safe to retry.
  async pay(id) {
    return (await this.call('POST', `/v1/orders/${id}/pay`, [200], null, this.identity())).doc;
  }

  async cancel(id) {
    return (await this.call('POST', `/v1/orders/${id}/cancel`, [200], null, this.identity())).doc;
  }
}

async function main([cmd, ...args]) {
  const env = process.env;
  const client = new SeckillClient(env.SECKILL_URL ?? 'http://localhost:8080', env.SECKILL_USER,
    env.SECKILL_SECRET || null);
  let out;
  try {
    if (cmd === 'buy') out = await client.buy(args[0], Number(args[1] ?? 1), args[2] ?? randomUUID());
    else if (['order', 'pay', 'cancel'].includes(cmd)) out = await client[cmd](args[0]);
    else {
      console.error('usage: seckill-client.mjs buy CAMPAIGN [QUANTITY [KEY]] | order ID | pay ID | cancel ID');
      return 2;
    }
  } catch (e) {
    if (e instanceof SeckillError) {
      console.log(JSON.stringify({ refused: e.code, status: e.status, message: e.detail }));
      return 1;
    }
    console.log(JSON.stringify(e instanceof GaveUp ? { gave_up: e.message } : { unexpected: String(e) }));
    return e instanceof GaveUp ? 3 : 2;
  }
  console.log(JSON.stringify(out));
  return 0;
}

// run as a program, not when imported
if (import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = await main(process.argv.slice(2));
