/* coalesce.c: the purchase path. Concurrent purchases of one campaign are
 * queued and sent as one purchase.lua call (at most max_batch, in arrival
 * order); the script decides them one after another, so a batch answers
 * exactly as the same requests sent one by one would. A queue is sent at
 * once when nothing of its campaign is in flight (no added latency when
 * idle); under load it waits for the in-flight call to return or for
 * linger_us, whichever comes first. Redis is reached only through the
 * wire (engine_wire.h); outcomes are read from the table of rulebook.h.
 * Acknowledgement: when the plan is SK__ACK_WAIT, a WAIT is pipelined
 * right behind the script; a batch is decided by the script's reply and
 * answered when both replies are in: acceptances (and replays) are 201
 * only if WAIT reported enough replicas, else pending (202); the engine
 * skips the WAIT of a master known to have too few replicas in sync (the
 * batch is then pending at once). A replay of an order the database holds
 * is 201 in any batch. WAIT counts the replicas of its own connection's
 * last write and blocks that connection until they acknowledge, so a
 * batch goes on the data connection (SK__CONNS, conn_usable) with the
 * fewest batches in flight, its WAIT on the same one: while one
 * connection's WAIT waits for the replica, the next batch's script runs
 * on another instead of queueing behind it.
 * Sharded campaigns (K buckets, buckets.h): each bucket has its own lane
 * (queue, batches); a purchase goes to its user's home bucket. A campaign
 * starts with one lane; a "reroute" answer makes the coalescer read the
 * layout and re-queue. A "short" answer parks the purchase on its lane
 * (park.h) and kicks the mover (transfer.h), which calls the park where a
 * pull ends: units arrived (the parked purchases go out again), proven
 * empty (sold out, the local flag set), going round again (those parked
 * past the deadline answer 503, not decided). What goes out again is
 * taken from the park's FIFO here (send_again). Every answer is the
 * park's one answer (sk__park_answer). */
#include "coalesce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "camp_table.h"
#include "dlock/dlock.h"
#include "layout.h"
#include "park.h"
#include "rulebook.h"
#include "soldout.h"
#include "transfer.h"
#include "util.h"

struct sk__coalescer {
    struct event_base *base;
    sk__co_deps d;          /* the wire and the parts it reads */
    int max_batch;
    int64_t linger_us;
    int64_t limits[6];      /* user rate, window; ip rate, window; idem ttl; order ttl */
    sk__camp_table camps;   /* camps.closing: fail_all was called */
    sk__park park;          /* every purchase until its answer; the parked ones */
    sk__xfer *xfer;         /* moves units into lanes with parked purchases */
    struct sk__batch *failed; /* batches to fail from the loop (fail_ev) */
    struct event *fail_ev;
    struct event *again_ev; /* the park has purchases to send again */
    uint64_t batches[SK_STAT_BATCH_BUCKETS];
    uint64_t batched_purchases;
    uint64_t soldout_local;
    uint64_t answered_acked, answered_pending, answered_confirmed, ack_waits, ack_failures, ack_skipped;
    char *wire;             /* the last batch's RESP arguments (reused) */
    size_t wire_cap;
    int conn_batches[SK__CONNS]; /* batches sent on each data connection and not yet answered */
    int conn_waits[SK__CONNS];   /* WAITs in flight on each (each blocks its connection) */
    unsigned conn_next;          /* where the next tie between connections starts */
};

typedef struct sk__batch {
    sk__lane *lane;         /* until the script's reply */
    struct sk__batch *next; /* on co->failed */
    int err;                /* not sent (fail_later), or the script's transport error */
    int n;
    int ack;                /* SK__ACK_* when sent */
    int acks;               /* WAIT's replicas */
    int replies_due;        /* the script's and WAIT's replies still to come */
    bool acked;             /* WAIT reported >= acks */
    bool alone;             /* its master lists no replica: confirmed replays are 201 */
    bool wait_later;        /* WAIT follows the script's reply (Cluster) */
    bool script_in;         /* the script's reply came */
    bool rewait;            /* an acknowledgement came before the script's reply */
    int conn;               /* the data connection of its script and WAIT; -1 until sent */
    int k;                  /* its campaign's buckets as known when it was sent */
    sk__coalescer *co;
    sk__preq *reqs[];
} sk__batch;

const int64_t sk_batch_bucket_le[SK_STAT_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128, INT64_MAX};

static void sk__co_enqueue(sk__lane *l, sk__preq *q);

static void sk__co_log(sk__coalescer *co, int level, const char *msg)
{
    sk__wire_log(co->d.w, level, "%s", msg);
}

/* ---- failing batches from the loop ----------------------------------- */

static void deliver_batch_error(sk__coalescer *co, sk__batch *b, int err)
{
    for (int i = 0; i < b->n; i++) {
        sk_purchase_result r = {.err = err, .qty = b->reqs[i]->qty, .order_id = b->reqs[i]->order_id};
        sk__park_answer(&co->park, b->reqs[i], &r);
    }
}

/* A batch is answered (or failed): its connection has one fewer in flight. */
static void batch_free(sk__coalescer *co, sk__batch *b)
{
    if (b->conn >= 0) co->conn_batches[b->conn]--;
    free(b);
}

static void deliver_failed(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk__coalescer *co = arg;
    while (co->failed) {
        sk__batch *b = co->failed;
        co->failed = b->next;
        sk__lane *l = b->lane;
        l->inflight--;
        deliver_batch_error(co, b, b->err);
        batch_free(co, b);
        sk__camp_settle(&co->camps, l->camp);
    }
}

/* A batch that could not be sent is answered from the loop, never from
 * inside sk__coalescer_purchase (whose caller expects no callback then). */
static void fail_later(sk__coalescer *co, sk__batch *b, int err)
{
    b->err = err;
    b->next = co->failed;
    co->failed = b;
    if (co->camps.closing) {
        deliver_failed(-1, 0, co);
        return;
    }
    struct timeval zero = {0, 0};
    event_add(co->fail_ev, &zero);
}

/* ---- sending ------------------------------------------------------------ */

static void on_batch_reply(const dlock__reply *r, int err, void *priv);
static void flush(sk__lane *l);

static void on_linger(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk__lane *l = arg;
    l->linger_armed = false;
    if (l->npending) flush(l);
}

/* ---- the batch's EVALSHA arguments, written as RESP ------------------------
 * One call of purchase.lua carries 15 + 4 to 8 per purchase arguments; they are
 * written straight into the wire format (engine_wire.h, sk__rb_write) in a buffer the
 * coalescer keeps: the printf family and hiredis' argv formatting were
 * ~40 % of seckilld's instructions per purchase (docs/BENCHMARKS.md). The
 * batch goes to the engine with the slot of its keys; the engine writes
 * the "*<argc>" header and the EVALSHA/sha arguments in front. */

static void w_batch(char *buf, const sk__coalescer *co, const sk__lane *l, const sk__batch *b, sk__resp_args *out)
{
    sk__rb_buyer buyers[b->n > 0 ? b->n : 1];
    const sk__rb_buyer *bp[b->n > 0 ? b->n : 1];
    for (int i = 0; i < b->n; i++) {
        const sk__preq *q = b->reqs[i];
        buyers[i] = (sk__rb_buyer){.user = q->user, .idem = q->idem, .ip = q->ip, .order_id = q->order_id,
                                   .qty = q->qty, .resent = q->resent};
        bp[i] = &buyers[i];
    }
    const sk__rb_camp camp = {.prefix = l->prefix, .k = l->camp->k, .limits = co->limits,
                              .runid = sk__server_script_runid(co->d.srv)};
    sk__rb_write(buf, &camp, bp, b->n, out);
}

static void on_wait_reply(const dlock__reply *r, int err, void *priv);
static void batch_reply_in(sk__coalescer *co, sk__batch *b);

/* An acknowledgement covers the batch only if the server ran it after the
 * script: replies on one connection come in order, so its reply must come
 * after the script's. One that comes first was answered before the
 * script ran: the script met NOSCRIPT (SCRIPT FLUSH) and the engine sent
 * it again with its source behind the WAIT already on its way. Such an
 * acknowledgement is void; another one is sent once the script's reply is
 * in (on_batch_reply), so the batch can still be 201. */
static bool ack_before_script(sk__batch *b)
{
    if (b->script_in) return false;
    b->rewait = true;
    b->acked = false;
    return true;
}

/* CONFIG GET append*'s reply behind a batch: the reply is the
 * acknowledgement only if the AOF was on with appendfsync always once the
 * script had run (the engine's probe read it up to 250 ms before: a switch
 * to everysec in between must not give a 201). */
static void on_fsync_reply(const dlock__reply *r, int err, void *priv)
{
    sk__batch *b = priv;
    bool aof = false, always = false;
    for (size_t i = 0; !err && dlock__reply_kind(r) == DLOCK__R_ARRAY && i + 1 < dlock__reply_count(r); i += 2) {
        const char *k = dlock__reply_str(dlock__reply_at(r, i), NULL);
        const char *v = dlock__reply_str(dlock__reply_at(r, i + 1), NULL);
        if (k && v && strcmp(k, "appendonly") == 0) aof = strcmp(v, "yes") == 0;
        if (k && v && strcmp(k, "appendfsync") == 0) always = strcmp(v, "always") == 0;
    }
    if (!ack_before_script(b)) {
        b->acked = aof && always;
        if (!b->acked) b->co->ack_failures++;
    }
    batch_reply_in(b->co, b);
}

/* WAIT right behind the script, on the same connection: it covers the
 * script's write (purchase.lua always writes when it decides), and no
 * other connection's WAIT does (each counts its own writes). On a
 * Cluster it follows the script's reply, to the node serving the
 * campaign's slot (where the script ran). On fsync, the settings are
 * read again behind the script instead. */
static void send_wait(sk__coalescer *co, const sk__lane *l, sk__batch *b)
{
    int64_t timeout = 0;
    b->ack = sk__acks_plan(co->d.acks, &b->acks, &timeout);
    b->acked = false;
    if (b->ack == SK__ACK_REPLY) {
        const char *cfg[] = {"CONFIG", "GET", "append*"};
        if (sk__wire_cmd(co->d.w, 0, -1, 3, cfg, on_fsync_reply, b) == 0) b->replies_due++;
        return;
    }
    if (b->ack != SK__ACK_WAIT) return;
    int rc = sk__acks_send_wait(co->d.acks, b->conn, l->slot, b->acks, timeout, on_wait_reply, b);
    if (rc == 1) { /* too few replicas in sync: pending at once */
        co->ack_skipped++;
        return;
    }
    co->ack_waits++;
    if (rc == 0) {
        b->replies_due++;
        co->conn_waits[b->conn]++;
    }
    else co->ack_failures++; /* decided, never acknowledged: pending */
}

bool sk__coalescer_ready(const sk__coalescer *co)
{
    return sk__wire_up(co->d.w, 0) && co->d.srv->due == 0 && sk__lease_valid(co->d.lease);
}

/* Data connection conn may carry a batch now: connection 0 whenever the
 * engine is ready (a batch is sent only then); another one once its
 * server's run id is known to be connection 0's, so its batches pass the
 * barrier check exactly as connection 0's would (on a Cluster the script
 * reads the run id of the node it runs on). */
static bool conn_usable(const sk__coalescer *co, int conn)
{
    if (conn == 0) return true;
    const sk__server *srv = co->d.srv;
    const char *runid = co->d.w->runid[conn];
    if (!sk__wire_up(co->d.w, 0) || !sk__wire_up(co->d.w, conn) || !runid[0] || srv->due != 0) return false;
    return srv->cluster || (srv->runid[0] && strcmp(runid, srv->runid) == 0);
}

/* How busy connection conn is: one without a WAIT in flight first (a
 * batch sent there runs at once), then the fewest batches in flight. */
static int conn_load(const sk__coalescer *co, int conn)
{
    return (co->conn_waits[conn] > 0 ? 1 << 20 : 0) + co->conn_batches[conn];
}

/* The data connection for lane l's next batch. While an earlier script of
 * the lane is in flight, the one it went on: a connection runs its
 * commands in order, so the lane's batches are decided in the order they
 * were sent. Unless a WAIT is in flight there: the batch would wait
 * behind it for the replica, so it goes on another connection and may be
 * decided before the batch ahead of it. Those purchases were all waiting
 * at once, none answered yet, so either order is one the same requests
 * could have come in. Else a usable one with the fewest batches in
 * flight, the extra connections before the engine's main one (whose lease
 * and probes then do not queue behind a WAIT). */
static int pick_conn(sk__coalescer *co, const sk__lane *l)
{
    if (l->inflight > 1 && conn_usable(co, l->conn) && co->conn_waits[l->conn] == 0)
        return l->conn; /* flush counted this batch */
    int best = -1; /* ties go round the extra connections */
    co->conn_next++;
    for (int k = 0; k < SK__CONNS - 1; k++) {
        int i = 1 + (co->conn_next + k) % (SK__CONNS - 1);
        if (conn_usable(co, i) && (best < 0 || conn_load(co, i) < conn_load(co, best))) best = i;
    }
    return best < 0 || conn_load(co, 0) < conn_load(co, best) ? 0 : best;
}

static int send_batch(sk__coalescer *co, sk__lane *l, sk__batch *b)
{
    size_t need = sk__rb_bound(sizeof(l->prefix), b->n);
    if (need > co->wire_cap) {
        char *w = realloc(co->wire, need);
        if (!w) return DLOCK_ENOMEM;
        co->wire = w;
        co->wire_cap = need;
    }
    sk__resp_args args;
    w_batch(co->wire, co, l, b, &args);
    b->replies_due = 0;
    int conn = pick_conn(co, l);
    int rc = sk__wire_batch(co->d.w, conn, SK__LUA_PURCHASE, &args, on_batch_reply, b);
    if (rc == 0) {
        b->conn = conn;
        l->conn = conn;
        co->conn_batches[conn]++;
        b->replies_due = 1;
        /* on a Cluster only the reply says the script ran, maybe on
         * another node after a redirect: the WAIT must go where it ran */
        b->wait_later = co->d.srv->cluster;
        if (!b->wait_later) send_wait(co, l, b);
    }
    return rc;
}

static void count_batch(sk__coalescer *co, int n)
{
    co->batched_purchases += (uint64_t)n;
    for (int k = 0; k < SK_STAT_BATCH_BUCKETS; k++)
        if (n <= sk_batch_bucket_le[k]) {
            co->batches[k]++;
            break;
        }
}

static void flush(sk__lane *l)
{
    sk__coalescer *co = l->camp->co;
    if (l->linger_armed) {
        event_del(l->linger);
        l->linger_armed = false;
    }
    int n = l->npending;
    if (!n || l->camp->loading) return;
    sk__batch *b = malloc(sizeof(*b) + (size_t)n * sizeof(sk__preq *));
    if (!b) return; /* stays queued: the next arrival or reply retries */
    *b = (sk__batch){.lane = l, .co = co, .n = n, .conn = -1, .k = l->camp->k};
    memcpy(b->reqs, l->pending, (size_t)n * sizeof(sk__preq *));
    l->npending = 0;
    l->inflight++;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (!b->reqs[i]->order_id) rc = sk__lease_next_id(co->d.lease, &b->reqs[i]->order_id);
    if (!rc) rc = send_batch(co, l, b);
    if (rc) fail_later(co, b, rc == DLOCK_ENOMEM ? rc : SK_EUNAVAIL);
    else count_batch(co, n);
}

enum { CODE_REROUTE = 11, CODE_SHORT = 12, CODE_CONFIRMED = 13 }; /* purchase.lua's ROUTE codes */

static void reroute(sk__camp *c, sk__preq *q)
{
    q->next = NULL;
    *c->rerouted_tail = q;
    c->rerouted_tail = &q->next;
}

/* A batch reply's entry for one purchase (purchase.lua, "Returns"): an
 * integer code + 16 * value about the purchase as sent, or a replay's
 * array {code, value, order id, qty}. */
static bool entry_ok(const dlock__reply *e)
{
    return dlock__reply_kind(e) == DLOCK__R_INTEGER ||
           (dlock__reply_kind(e) == DLOCK__R_ARRAY && dlock__reply_count(e) == 4);
}

static void read_entry(const dlock__reply *e, const sk__preq *q, long long *code, long long *v,
                       sk_purchase_result *res)
{
    if (dlock__reply_kind(e) == DLOCK__R_INTEGER) {
        long long n = dlock__reply_int(e);
        *code = ((n % 16) + 16) % 16; /* n may be negative: floored */
        *v = (n - *code) / 16;
        res->order_id = q->order_id;
        res->qty = q->qty;
        return;
    }
    *code = dlock__reply_int(dlock__reply_at(e, 0));
    *v = dlock__reply_int(dlock__reply_at(e, 1));
    const char *oid = dlock__reply_str(dlock__reply_at(e, 2), NULL);
    res->order_id = 0; /* the script's decimal string, read without strtoull */
    for (const char *p = oid ? oid : ""; *p >= '0' && *p <= '9'; p++)
        res->order_id = res->order_id * 10 + (uint64_t)(*p - '0');
    res->qty = dlock__reply_int(dlock__reply_at(e, 3));
}

/* Reads purchase i of a batch from its reply entry into q->res (its shape
 * checked by on_batch_reply); the answer waits for the acknowledgement
 * (deliver_decided). A "reroute" or "short" moves q out of the batch:
 * false then. */
static bool decide_one(sk__lane *l, const dlock__reply *r, int i, sk__preq *q)
{
    sk__camp *c = l->camp;
    long long code = 0, v = 0;
    sk_purchase_result res = {0};
    read_entry(dlock__reply_at(r, (size_t)i), q, &code, &v, &res);
    if (code == CODE_REROUTE) {
        reroute(c, q);
        return false;
    }
    /* A campaign proven empty (the local flag, sk__park_empty) answers a short
     * bucket sold out at once, as the flag answers a purchase without an
     * Idempotency-Key: units that come back clear the flag (poll_one). */
    if (code == CODE_SHORT && c->soldout) code = sk_outcome_get(SK_OUT_SOLD_OUT)->script_code;
    /* a replay whose order the database holds (idem_confirm.lua marked its
     * answer): confirmed whatever this batch's acknowledgement */
    q->confirmed = code == CODE_CONFIRMED;
    if (q->confirmed) code = sk_outcome_get(SK_OUT_REPLAY)->script_code;
    if (code == CODE_SHORT) {
        l->known = v;
        sk__park_add(l, q);
        return false;
    }
    sk_outcome_id id = sk_outcome_of_script(code);
    res.err = sk_outcome_get(id)->err;
    res.replay = id == SK_OUT_REPLAY;
    bool stock_value = id == SK_OUT_ACCEPTED || id == SK_OUT_REPLAY || id == SK_OUT_SOLD_OUT;
    if (stock_value) res.remaining = v;
    else res.value = v;
    if (id == SK_OUT_ACCEPTED || id == SK_OUT_SOLD_OUT) {
        l->known = v;
        /* one bucket: empty is sold out; K > 1: transfer.c decides */
        if (v == 0 && c->k == 1) c->soldout = true;
    }
    c->unknown = id == SK_OUT_NOT_FOUND;
    q->res = res;
    return true;
}

/* Answers a decided batch: an acceptance or replay is pending unless the
 * batch was acknowledged. */
static void deliver_decided(sk__coalescer *co, sk__batch *b)
{
    for (int i = 0; i < b->n; i++) {
        sk__preq *q = b->reqs[i];
        if (q->res.err == 0) {
            bool confirmed = q->confirmed && b->alone;
            q->res.pending = !b->acked && !confirmed;
            if (confirmed && !b->acked) co->answered_confirmed++;
            if (q->res.pending) co->answered_pending++;
            else co->answered_acked++;
        }
        sk__park_answer(&co->park, q, &q->res);
    }
}

/* The script's or WAIT's reply is in; the second one answers the batch. */
static void batch_reply_in(sk__coalescer *co, sk__batch *b)
{
    if (--b->replies_due > 0) return;
    if (b->err) deliver_batch_error(co, b, b->err);
    else deliver_decided(co, b);
    batch_free(co, b);
}

static void on_wait_reply(const dlock__reply *r, int err, void *priv)
{
    sk__batch *b = priv;
    sk__coalescer *co = b->co;
    co->conn_waits[b->conn]--;
    if (!ack_before_script(b)) {
        b->acked = !err && dlock__reply_kind(r) == DLOCK__R_INTEGER && dlock__reply_int(r) >= b->acks;
        if (!b->acked) co->ack_failures++;
    }
    batch_reply_in(co, b);
}

static void load_layout(sk__camp *c);
static void redistribute(sk__camp *c);

static bool master_alone(sk__coalescer *co, const sk__lane *l)
{
    return sk__acks_master_alone(co->d.acks, l->slot);
}

/* One entry per purchase of b, each an integer or a replay's array. */
static bool reply_shape_ok(const dlock__reply *r, const sk__batch *b)
{
    if (dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != (size_t)b->n) return false;
    for (int i = 0; i < b->n; i++)
        if (!entry_ok(dlock__reply_at(r, (size_t)i))) return false;
    return true;
}

static void on_batch_reply(const dlock__reply *r, int err, void *priv)
{
    sk__batch *b = priv;
    sk__lane *l = b->lane;
    sk__camp *c = l->camp;
    sk__coalescer *co = c->co;
    l->inflight--;
    b->script_in = true;
    if (!err && !reply_shape_ok(r, b)) {
        sk__co_log(co, DLOCK_LOG_ERROR, "purchase script: unexpected reply shape");
        err = DLOCK_ESERVER;
    }
    if (err) {
        /* Sent and unanswered: the decision may have been made. */
        b->err = err == DLOCK_EUNKNOWN ? DLOCK_EUNKNOWN : SK_EUNAVAIL;
    } else {
        bool decided = false; /* an acceptance or replay: something to acknowledge */
        int kept = 0; /* the batch keeps only what it answers */
        bool confirmed = false;
        for (int i = 0; i < b->n; i++) {
            sk__preq *q = b->reqs[i];
            if (!decide_one(l, r, i, q)) continue;
            b->reqs[kept++] = q;
            decided = decided || q->res.err == 0;
            confirmed = confirmed || q->confirmed;
        }
        b->n = kept;
        if (confirmed) b->alone = master_alone(co, l);
        /* no WAIT for a batch of refusals (a barrier, sold out): nothing to
         * acknowledge, and a promoted master without replicas would make
         * each such batch wait the whole timeout */
        if ((b->wait_later || b->rewait) && decided) send_wait(co, l, b);
    }
    b->lane = NULL; /* the campaign may go before the WAIT's reply */
    int b_k = b->k;
    batch_reply_in(co, b);
    if (co->camps.closing) return;
    /* A batch sent before the layout was read (on another connection than
     * the layout's read, so its reply may come after it): its "reroute"
     * purchases go to their home lanes, known now. */
    if (c->rerouted && !c->loading) {
        if (b_k < c->k) redistribute(c);
        else load_layout(c);
    }
    if (c->k > 1 && (l->parked || (l->known == 0 && !c->soldout))) sk__xfer_kick(co->xfer, l);
    if (l->npending) flush(l);
    sk__camp_settle(&co->camps, c);
}

/* ---- the layout of a sharded campaign ------------------------------------ */

/* Every purchase of c waiting for the layout goes to its home lane. */
static void redistribute(sk__camp *c)
{
    sk__lane *l0 = c->lanes[0];
    sk__preq *q = c->rerouted;
    c->rerouted = NULL;
    c->rerouted_tail = &c->rerouted;
    int n = l0->npending;
    sk__preq *queued[n > 0 ? n : 1];
    memcpy(queued, l0->pending, (size_t)n * sizeof(*queued));
    l0->npending = 0;
    while (q) {
        sk__preq *next = q->next;
        sk__co_enqueue(c->lanes[sk_home_bucket(q->user, c->k)], q);
        q = next;
    }
    for (int i = 0; i < n; i++) sk__co_enqueue(c->lanes[sk_home_bucket(queued[i]->user, c->k)], queued[i]);
}

static void fail_rerouted(sk__camp *c, int err)
{
    sk__preq *q = c->rerouted;
    c->rerouted = NULL;
    c->rerouted_tail = &c->rerouted;
    while (q) {
        sk__preq *next = q->next;
        sk_purchase_result res = {.err = err, .qty = q->qty, .order_id = q->order_id};
        sk__park_answer(&c->co->park, q, &res);
        q = next;
    }
}

static void on_layout(const dlock__reply *r, int err, void *priv)
{
    sk__camp *c = priv;
    sk__coalescer *co = c->co;
    c->loading = false;
    if (co->camps.closing) return;
    sk_buckets *b = malloc(sizeof(*b));
    int rc = b ? 0 : DLOCK_ENOMEM;
    if (!rc && (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 2)) rc = SK_EUNAVAIL;
    if (!rc && sk_layout_of_fields(c->id, dlock__reply_at(r, 0), dlock__reply_at(r, 1), b) != 0) rc = SK_EUNAVAIL;
    if (!rc) rc = sk__camp_grow(&co->camps, c, b);
    free(b);
    if (rc) {
        char msg[160];
        snprintf(msg, sizeof(msg), "campaign %s: bucket layout unreadable (%s)", c->id, sk_strerror(rc));
        sk__co_log(co, DLOCK_LOG_ERROR, msg);
        fail_rerouted(c, SK_EUNAVAIL);
        flush(c->lanes[0]);
        return;
    }
    redistribute(c);
}

/* Reads bucket 0's shards + bucket_tags; until the answer nothing of c is sent. */
static void load_layout(sk__camp *c)
{
    char key[96];
    sk_campaign_key(c->id, "meta", key, sizeof(key));
    const char *argv[] = {"HMGET", key, "shards", "bucket_tags"};
    c->loading = true;
    if (sk__wire_cmd(c->co->d.w, 0, -1, 4, argv, on_layout, c) != 0) {
        c->loading = false;
        fail_rerouted(c, SK_EUNAVAIL);
    }
}

/* ---- public entry ------------------------------------------------------- */

static void arm_linger(sk__coalescer *co, sk__lane *l)
{
    if (l->linger_armed) return;
    if (!l->linger) l->linger = event_new(co->base, -1, 0, on_linger, l);
    if (!l->linger) return;
    int64_t us = co->linger_us > 0 ? co->linger_us : 0;
    struct timeval tv = {.tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000)};
    event_add(l->linger, &tv);
    l->linger_armed = true;
}

static void sk__co_enqueue(sk__lane *l, sk__preq *q)
{
    sk__coalescer *co = l->camp->co;
    if (l->npending >= co->max_batch) flush(l);
    if (l->npending >= co->max_batch) { /* only left full by an allocation failure */
        sk_purchase_result res = {.err = SK_EQUEUEFULL, .qty = q->qty};
        sk__park_answer(&co->park, q, &res);
        return;
    }
    l->pending[l->npending++] = q;
    if (l->npending >= co->max_batch || l->inflight == 0) flush(l);
    else arm_linger(co, l);
}

/* Purchases the park gave back (units arrived, or they fit after a proven
 * empty) go out again on their lanes, in the order they were parked. */
static void send_again(sk__coalescer *co)
{
    for (sk__preq *q; (q = sk__park_next_again(&co->park)) != NULL;) {
        sk__lane *l = q->lane;
        sk__co_enqueue(l, q);
        sk__camp_settle(&co->camps, l->camp); /* idle only if q was answered at once */
    }
}

static void on_again(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    send_again(arg);
}

/* The engine is called directly too (tools, tests): the one check of rulebook.h. */
static bool purchase_valid(const char *campaign, const char *user, int64_t qty, const char *idem)
{
    return sk_purchase_invalid(campaign, user, qty, idem) == NULL;
}

int sk__coalescer_purchase(sk__coalescer *co, const char *campaign, const char *user, int64_t qty,
                           const char *idem, const char *ip, sk_purchase_cb cb, void *arg)
{
    if (!cb || !purchase_valid(campaign, user, qty, idem)) return SK_EINVAL;
    if (!sk__coalescer_ready(co)) {
        co->park.outcomes[SK_OUT_UNAVAILABLE]++;
        return SK_EUNAVAIL;
    }
    send_again(co); /* parked purchases before a newer one */
    sk__camp *c = sk__camp_find(&co->camps, campaign, true);
    if (!c) return DLOCK_ENOMEM;
    int rc = sk_soldout_answer(c->soldout, idem != NULL, &co->soldout_local, co->park.outcomes);
    if (rc) return rc;
    sk__lane *l = c->lanes[c->k > 1 ? sk_home_bucket(user, c->k) : 0];
    size_t max = (size_t)co->max_batch;
    if (!c->loading && sk_throttle_admit((size_t)l->npending, max, NULL)) {
        flush(l); /* only left full by an allocation failure */
        if ((rc = sk_throttle_admit((size_t)l->npending, max, NULL))) return rc;
    }
    sk__preq *q = sk__park_preq(&co->park);
    if (!q) return DLOCK_ENOMEM;
    q->cb = cb;
    q->arg = arg;
    q->qty = qty;
    /* valid (purchase_valid): user and idem fit; an ip that does not is left out */
    memcpy(q->user, user, strlen(user) + 1);
    if (idem) memcpy(q->idem, idem, strlen(idem) + 1);
    size_t ipn = ip ? strlen(ip) : 0;
    if (ipn < sizeof(q->ip)) memcpy(q->ip, ip ? ip : "", ipn + 1);
    co->park.pending++;
    if (c->loading) reroute(c, q); /* its home is known with the layout */
    else sk__co_enqueue(l, q);
    return 0;
}

static void fail_queue(sk__camp *c, void *ud)
{
    int err = *(const int *)ud;
    fail_rerouted(c, err);
    for (int j = 0; j < c->nlanes; j++) {
        sk__lane *l = c->lanes[j];
        if (l->linger_armed) {
            event_del(l->linger);
            l->linger_armed = false;
        }
        int n = l->npending;
        l->npending = 0;
        for (int i = 0; i < n; i++) {
            sk_purchase_result r = {.err = err, .qty = l->pending[i]->qty};
            sk__park_answer(&c->co->park, l->pending[i], &r);
        }
        sk__park_fail(&c->co->park, l, err);
    }
}

void sk__coalescer_fail_all(sk__coalescer *co, int err)
{
    co->camps.closing = true;
    deliver_failed(-1, 0, co);
    sk__xfer_stop(co->xfer);
    for (sk__preq *q; (q = sk__park_next_again(&co->park)) != NULL;) {
        sk_purchase_result res = {.err = err, .qty = q->qty, .order_id = q->order_id};
        sk__park_answer(&co->park, q, &res);
    }
    sk__camp_each(&co->camps, fail_queue, &err);
}

/* ---- local sold-out flag ------------------------------------------------ */

static void on_poll_reply(const dlock__reply *r, int err, void *priv)
{
    sk__camp *c = priv;
    c->polling--;
    if (!err) {
        const char *s = dlock__reply_str(r, NULL);
        long long v = dlock__reply_kind(r) == DLOCK__R_STRING ? strtoll(s, NULL, 10) : 0;
        if (v > 0 && c->soldout) {
            char msg[128];
            snprintf(msg, sizeof(msg), "campaign %s has stock again (%lld)", c->id, v);
            sk__co_log(c->co, DLOCK_LOG_INFO, msg);
            c->soldout = false;
        }
    }
    sk__camp_settle(&c->co->camps, c);
}

/* A sold-out campaign's every bucket: stock in any clears the flag. */
static void poll_one(sk__camp *c, void *ud)
{
    (void)ud;
    if (!c->soldout || c->polling) return;
    for (int j = 0; j < c->k; j++) {
        char key[SK_BUCKET_TAG_MAX + 16];
        snprintf(key, sizeof(key), "%sstock", c->lanes[j]->prefix);
        const char *argv[] = {"GET", key};
        if (sk__wire_cmd(c->co->d.w, 0, -1, 2, argv, on_poll_reply, c) == 0) c->polling++;
    }
}

void sk__coalescer_poll_soldout(sk__coalescer *co)
{
    sk__camp_each(&co->camps, poll_one, NULL);
    sk__xfer_recover(co->xfer);
}

void sk__coalescer_restocked(sk__coalescer *co, const char *campaign)
{
    sk__camp *c = sk__camp_find(&co->camps, campaign, false);
    if (c) c->soldout = false;
}

/* ---- life cycle and figures --------------------------------------------- */

int sk__coalescer_new(struct event_base *base, const sk_engine_opts *o, const sk__co_deps *deps,
                      sk__coalescer **out)
{
    *out = NULL;
    sk__coalescer *co = calloc(1, sizeof(*co));
    if (!co) return DLOCK_ENOMEM;
    co->base = base;
    co->d = *deps;
    co->max_batch = o->max_batch;
    co->linger_us = o->linger_us;
    const int64_t lim[6] = {o->user_rate_limit, o->user_rate_window_ms, o->ip_rate_limit,
                            o->ip_rate_window_ms, o->idem_ttl_ms, o->order_ttl_ms};
    memcpy(co->limits, lim, sizeof(lim));
    co->camps.max_batch = o->max_batch;
    co->camps.owner = co;
    co->fail_ev = event_new(base, -1, 0, deliver_failed, co);
    co->again_ev = event_new(base, -1, 0, on_again, co);
    sk__park_init(&co->park, &co->camps, o->command_timeout_ms > 0 ? o->command_timeout_ms : 2000, co->again_ev);
    if (!co->fail_ev || !co->again_ev ||
        sk__xfer_new(base, co->d.w, co->d.acks, &co->camps, &co->park, o->xfer_pause_ms, &co->xfer) != 0) {
        if (co->fail_ev) event_free(co->fail_ev);
        if (co->again_ev) event_free(co->again_ev);
        free(co);
        return DLOCK_ENOMEM;
    }
    *out = co;
    return 0;
}

void sk__coalescer_free(sk__coalescer *co)
{
    if (!co) return;
    sk__xfer_free(co->xfer); /* its pulls point into the lanes */
    sk__camp_table_clear(&co->camps);
    sk__park_clear(&co->park);
    event_free(co->fail_ev);
    event_free(co->again_ev);
    free(co->wire);
    free(co);
}

size_t sk__coalescer_pending(const sk__coalescer *co) { return co->park.pending; }

void sk__coalescer_stats(const sk__coalescer *co, sk_engine_stats *st)
{
    memcpy(st->outcomes, co->park.outcomes, sizeof(st->outcomes));
    memcpy(st->batches, co->batches, sizeof(st->batches));
    st->batched_purchases = co->batched_purchases;
    st->soldout_local = co->soldout_local;
    st->answered_acked = co->answered_acked;
    st->answered_pending = co->answered_pending;
    st->answered_confirmed = co->answered_confirmed;
    st->ack_waits = co->ack_waits;
    st->ack_failures = co->ack_failures;
    st->ack_skipped = co->ack_skipped;
    sk__xfer_stats(co->xfer, &st->xfer);
    memcpy(st->xfer.waits, co->park.waits, sizeof(st->xfer.waits));
    st->xfer.wait_ms_sum = co->park.wait_ms_sum;
}
