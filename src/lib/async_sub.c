/* async_sub.c: the asynchronous client's pub/sub connections and the FIFO
 * of waiters on each channel (async_internal.h). Invariant: a channel with
 * waiters is subscribed, being subscribed, or queued to be subscribed again
 * on the next connection; only its head is ever given a turn, so one
 * release wakes one waiter of this client however many wait.
 *
 * Channel states: NEW (no SUBSCRIBE on the current connection) ->
 * SUBSCRIBING -> SUBSCRIBED -> UNSUBSCRIBING (its last waiter left) ->
 * freed, or SUBSCRIBING again when waiters came back meanwhile: a channel
 * is never subscribed while its UNSUBSCRIBE is unanswered, because hiredis
 * 0.14 forgets a channel's callback on the UNSUBSCRIBE answer. A lost
 * connection puts its channels back to NEW and reconnects after
 * retry_delay_ms; the heads' rechecks (async_wait.c) carry on meanwhile.
 * Connections: one (the URL's server, or the master the sentinels named),
 * or on a Cluster one per master a channel's slot lives on (the map of
 * async_cluster.c). A sharded channel is SSUBSCRIBEd there; hiredis 0.14
 * hands a connection's pushes only to names a plain SUBSCRIBE registered,
 * so it is plainly subscribed too (first in, last out: UNSUBSCRIBE's
 * answer ends it). When the server drops a sharded subscription
 * (`sunsubscribe`: its slot moved) or refuses one (MOVED), that master's
 * connection goes, the map is asked again, and its channels are placed
 * again where the map then says; their heads get a turn once subscribed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_internal.h"
#include "cluster_router.h"
#include "slot.h"
#include "util.h"

#define NBUCKETS 1024
#define RETRY_MIN_MS 50
#define MAX_NODES DLOCK__ROUTER_MAX_NODES

enum { CH_NEW = 0, CH_SUBSCRIBING, CH_SUBSCRIBED, CH_UNSUBSCRIBING };

/* One pub/sub connection: index 0 for standalone and Sentinel URLs; on a
 * Cluster one per master (host:port). */
typedef struct snode {
    dlock__asub *s;
    dlock__lconn *lc;
    char host[256];
    int port;
} snode;

struct dlock__achan {
    dlock__asub *s;
    char *name;
    dlock__achan *hnext; /* bucket chain */
    dlock__achan *knext; /* the kick list */
    dlock__await *head, *tail;
    snode *at;           /* the connection it was subscribed on (NEW: none) */
    int state;
    int skip;            /* releases counted by release_sent whose message has not come yet */
    bool kicked, sharded;
};

struct dlock__asub {
    dlock_async_loop loop;
    dlock__evloop ev;
    dlock__url url;
    const dlock_client_options *o;
    dlock__acl *acl; /* Cluster URLs */
    snode nodes[MAX_NODES];
    size_t n_nodes;
    void *retry_timer, *kick_timer;
    dlock__achan *buckets[NBUCKETS];
    dlock__achan *kicks;
    size_t nchan, nwait;
    char mhost[256]; /* a Sentinel URL's master ("": not known yet) */
    int mport;
};

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h & (NBUCKETS - 1);
}

static dlock__achan *find(dlock__asub *s, const char *name, size_t len)
{
    for (dlock__achan *ch = s->buckets[hash_name(name)]; ch; ch = ch->hnext)
        if (strlen(ch->name) == len && memcmp(ch->name, name, len) == 0) return ch;
    return NULL;
}

static void unkick(dlock__achan *ch)
{
    for (dlock__achan **p = &ch->s->kicks; *p; p = &(*p)->knext) {
        if (*p == ch) {
            *p = ch->knext;
            break;
        }
    }
    ch->kicked = false;
}

static void chan_free(dlock__achan *ch)
{
    dlock__asub *s = ch->s;
    if (ch->kicked) unkick(ch);
    for (dlock__achan **p = &s->buckets[hash_name(ch->name)]; *p; p = &(*p)->hnext) {
        if (*p == ch) {
            *p = ch->hnext;
            break;
        }
    }
    s->nchan--;
    free(ch->name);
    free(ch);
}

static void kick(dlock__achan *ch)
{
    if (ch->kicked || !ch->head) return;
    ch->kicked = true;
    ch->knext = ch->s->kicks;
    ch->s->kicks = ch;
    dlock__atimer_start(&ch->s->loop, ch->s->kick_timer, 0);
}

/* ---- the connections ------------------------------------------------------------ */

/* (S)SUBSCRIBE or (S)UNSUBSCRIBE ch on its connection (see the note above
 * for the plain half of a sharded channel). */
static void send_sub(dlock__achan *ch, bool subscribe)
{
    dlock__lconn *lc = ch->at ? ch->at->lc : NULL;
    if (!lc) return;
    const char *plain[2] = {subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", ch->name};
    const char *shard[2] = {subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE", ch->name};
    int rc = 0;
    if (!subscribe && ch->sharded) rc = dlock__lconn_sub(lc, NULL, NULL, 2, shard);
    if (rc == 0) rc = dlock__lconn_sub(lc, NULL, NULL, 2, plain);
    if (rc == 0 && subscribe && ch->sharded) rc = dlock__lconn_sub(lc, NULL, NULL, 2, shard);
    if (rc == 0) ch->state = subscribe ? CH_SUBSCRIBING : CH_UNSUBSCRIBING;
}

static void on_message(dlock__lconn *lc, dlock__reply *reply, int err, void *priv);
static void on_state(dlock__lconn *lc, bool up, const char *why, void *priv);

static void handshake_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)err;
    dlock__asub *s = priv;
    if (reply && dlock__reply_kind(reply) == DLOCK__R_ERROR) {
        dlock__log_opts(s->o, DLOCK_LOG_WARN, "async pub/sub connection refused: %s",
                        dlock__reply_str(reply, NULL));
        dlock__lconn_drop(lc);
    }
}

static void retry_later(dlock__asub *s)
{
    dlock__atimer_start(&s->loop, s->retry_timer, s->o->retry_delay_ms + RETRY_MIN_MS);
}

/* The connection ch goes on: the one, or on a Cluster its slot's master's
 * (NULL while the map is not known or the table is full). */
static snode *node_for(dlock__asub *s, const dlock__achan *ch)
{
    if (!s->acl) return &s->nodes[0];
    const char *host;
    int port;
    if (!dlock__acl_node_of(s->acl, (int)dlock__key_slot(ch->name, strlen(ch->name)), &host, &port))
        return NULL;
    for (size_t i = 0; i < s->n_nodes; i++)
        if (s->nodes[i].port == port && strcmp(s->nodes[i].host, host) == 0) return &s->nodes[i];
    if (s->n_nodes >= MAX_NODES) return NULL;
    snode *n = &s->nodes[s->n_nodes++];
    snprintf(n->host, sizeof(n->host), "%s", host);
    n->port = port;
    return n;
}

/* Opens n's connection when it has none; false: not now (retried later). */
static bool open_node(dlock__asub *s, snode *n)
{
    if (n->lc) return true;
    bool sentinel = s->url.kind == DLOCK__URL_SENTINEL, unix_sock = s->url.kind == DLOCK__URL_UNIX;
    const char *host = s->acl ? n->host : unix_sock ? NULL : sentinel ? s->mhost : s->url.host;
    int port = s->acl ? n->port : sentinel ? s->mport : s->url.port;
    if (sentinel && !s->mhost[0]) return false; /* dlock__asub_set_master comes back here */
    if (dlock__lconn_open(&s->ev, host, port, unix_sock ? s->url.path : NULL, on_state, n, &n->lc, NULL, 0) !=
        0) {
        n->lc = NULL;
        retry_later(s);
        return false;
    }
    const char *auth[3];
    int argc = dlock__url_auth_argv(&s->url, auth);
    if (argc) dlock__lconn_cmd(n->lc, handshake_reply, s, argc, auth, NULL);
    const char *sub0[2] = {"SUBSCRIBE", "dlock__async_hello"};
    dlock__lconn_sub(n->lc, on_message, n, 2, sub0); /* sets the one subscription callback */
    return true;
}

/* Subscribes every NEW channel with waiters where it lives. */
static void ensure(dlock__asub *s)
{
    bool later = false;
    for (size_t b = 0; b < NBUCKETS; b++) {
        for (dlock__achan *ch = s->buckets[b]; ch; ch = ch->hnext) {
            if (ch->state != CH_NEW || !ch->head) continue;
            snode *n = node_for(s, ch);
            if (!n || !open_node(s, n)) {
                later = later || !n;
                continue;
            }
            ch->at = n;
            send_sub(ch, true);
        }
    }
    if (later) retry_later(s);
}

/* n's connection goes: its channels are NEW (placed again later). */
static void node_gone(snode *n)
{
    dlock__asub *s = n->s;
    dlock__lconn *lc = n->lc;
    n->lc = NULL;
    dlock__lconn_close(lc);
    bool any = false;
    for (size_t b = 0; b < NBUCKETS; b++) {
        for (dlock__achan *ch = s->buckets[b], *nx; ch; ch = nx) {
            nx = ch->hnext;
            if (ch->at != n) continue;
            ch->at = NULL;
            ch->state = CH_NEW;
            ch->skip = 0;
            if (!ch->head) chan_free(ch);
            else any = true;
        }
    }
    if (any) retry_later(s);
}

static void on_state(dlock__lconn *lc, bool up, const char *why, void *priv)
{
    snode *n = priv;
    if (up || lc != n->lc) return;
    dlock__log_opts(n->s->o, DLOCK_LOG_INFO, "async pub/sub connection lost: %s", why);
    node_gone(n);
    if (n->s->acl) dlock__acl_refresh(n->s->acl); /* a failover: place the channels where the map then says */
}

/* On a Cluster, a subscription refused (MOVED) or dropped by the server
 * (its slot moved away): see the design note. */
static void moved_away(snode *n, const char *what)
{
    dlock__log_opts(n->s->o, DLOCK_LOG_INFO,
                    "async pub/sub on %s:%d: %s: subscribing where the slot now lives", n->host, n->port,
                    what);
    dlock__acl *acl = n->s->acl;
    node_gone(n);
    dlock__acl_refresh(acl);
}

static void after_sub(dlock__achan *ch, bool subscribed)
{
    if (subscribed) {
        ch->state = CH_SUBSCRIBED;
        if (ch->head) ch->head->turn(ch->head, DLOCK__TURN_TRY); /* a message may have been missed before */
        else send_sub(ch, false);
        return;
    }
    ch->state = CH_NEW;
    if (ch->head) send_sub(ch, true);
    else chan_free(ch);
}

static bool is(const char *kind, const char *want)
{
    return strcmp(kind, want) == 0;
}

static void on_message(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)lc;
    (void)err;
    snode *n = priv;
    if (reply && n->s->acl && dlock__reply_kind(reply) == DLOCK__R_ERROR) {
        moved_away(n, dlock__reply_str(reply, NULL));
        return;
    }
    if (!reply || dlock__reply_kind(reply) != DLOCK__R_ARRAY || dlock__reply_count(reply) < 3) return;
    const char *kind = dlock__reply_str(dlock__reply_at(reply, 0), NULL);
    size_t len;
    const char *name = dlock__reply_str(dlock__reply_at(reply, 1), &len);
    dlock__achan *ch = find(n->s, name, len);
    if (!ch || ch->at != n) return;
    bool message = is(kind, "message") || is(kind, "smessage");
    if (ch->state == CH_SUBSCRIBING && (is(kind, ch->sharded ? "ssubscribe" : "subscribe")))
        after_sub(ch, true);
    else if (is(kind, "unsubscribe") && ch->state == CH_UNSUBSCRIBING)
        after_sub(ch, false);
    else if (is(kind, "sunsubscribe") && ch->state == CH_SUBSCRIBED)
        moved_away(n, "sharded subscription dropped");
    else if (message && ch->skip > 0)
        ch->skip--;
    else if (message && ch->head)
        ch->head->turn(ch->head, DLOCK__TURN_TRY);
}

static void on_retry(void *arg)
{
    ensure(arg);
}

static void on_kick(void *arg)
{
    dlock__asub *s = arg;
    while (s->kicks) {
        dlock__achan *ch = s->kicks;
        s->kicks = ch->knext;
        ch->kicked = false;
        if (ch->head && ch->state == CH_SUBSCRIBED) ch->head->turn(ch->head, DLOCK__TURN_TRY);
    }
}

/* ---- the API ------------------------------------------------------------------------ */

int dlock__asub_new(const dlock_async_loop *loop, const dlock__url *url, const dlock_client_options *o,
                    dlock__acl *acl, dlock__asub **out)
{
    *out = NULL;
    dlock__asub *s = calloc(1, sizeof(*s));
    if (!s) return DLOCK_ENOMEM;
    s->loop = *loop;
    s->o = o;
    s->acl = acl;
    s->n_nodes = acl ? 0 : 1;
    for (size_t i = 0; i < MAX_NODES; i++) s->nodes[i].s = s;
    dlock__aloop_evloop(loop, &s->ev);
    s->retry_timer = dlock__atimer_new(loop, on_retry, s);
    s->kick_timer = dlock__atimer_new(loop, on_kick, s);
    if (dlock__url_copy(url, &s->url) != 0 || !s->retry_timer || !s->kick_timer) {
        dlock__asub_free(s);
        return DLOCK_ENOMEM;
    }
    *out = s;
    return 0;
}

void dlock__asub_free(dlock__asub *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_nodes; i++) {
        dlock__lconn_close(s->nodes[i].lc);
        s->nodes[i].lc = NULL;
    }
    dlock__atimer_free(&s->loop, s->retry_timer);
    dlock__atimer_free(&s->loop, s->kick_timer);
    s->kicks = NULL;
    for (size_t b = 0; b < NBUCKETS; b++) {
        while (s->buckets[b]) {
            dlock__achan *ch = s->buckets[b];
            for (dlock__await *w = ch->head; w; w = w->next) w->ch = NULL;
            ch->kicked = false;
            chan_free(ch);
        }
    }
    dlock__url_free(&s->url);
    free(s);
}

static dlock__achan *chan_new(dlock__asub *s, const char *channel)
{
    dlock__achan *ch = calloc(1, sizeof(*ch));
    if (!ch || !(ch->name = strdup(channel))) {
        free(ch);
        return NULL;
    }
    ch->s = s;
    uint32_t b = hash_name(channel);
    ch->hnext = s->buckets[b];
    s->buckets[b] = ch;
    s->nchan++;
    return ch;
}

int dlock__asub_join(dlock__asub *s, const char *channel, bool sharded, dlock__await *w)
{
    dlock__achan *ch = find(s, channel, strlen(channel));
    if (!ch) {
        if (!(ch = chan_new(s, channel))) return DLOCK_ENOMEM;
        ch->sharded = sharded && s->acl; /* a pure function of the name: every joiner agrees */
    }
    w->ch = ch;
    w->next = NULL;
    w->prev = ch->tail;
    if (ch->tail) ch->tail->next = w;
    else ch->head = w;
    ch->tail = w;
    s->nwait++;
    if (ch->state == CH_NEW) ensure(s);
    else if (ch->state == CH_SUBSCRIBED && ch->head == w) kick(ch);
    return 0;
}

static void unlink_waiter(dlock__await *w, bool holding)
{
    dlock__achan *ch = w->ch;
    if (!ch) return;
    bool was_head = ch->head == w;
    if (w->prev) w->prev->next = w->next;
    else ch->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else ch->tail = w->prev;
    w->ch = NULL;
    w->prev = w->next = NULL;
    ch->s->nwait--;
    if (ch->head) {
        if (was_head && holding) ch->head->turn(ch->head, DLOCK__TURN_WAIT);
        else if (was_head) kick(ch);
        return;
    }
    if (ch->state == CH_SUBSCRIBED) send_sub(ch, false);
    if (ch->state == CH_NEW || ch->state == CH_SUBSCRIBED) chan_free(ch); /* never sent, or the send failed */
}

void dlock__asub_leave(dlock__await *w)
{
    unlink_waiter(w, false);
}

void dlock__asub_leave_holding(dlock__await *w)
{
    unlink_waiter(w, true);
}

bool dlock__asub_is_head(const dlock__await *w)
{
    return w->ch && w->ch->head == w;
}

bool dlock__asub_release_sent(dlock__asub *s, const char *channel)
{
    dlock__achan *ch = find(s, channel, strlen(channel));
    if (!ch || !ch->head || ch->state != CH_SUBSCRIBED) return false;
    ch->skip++;
    ch->head->turn(ch->head, DLOCK__TURN_SEND);
    return true;
}

void dlock__asub_release_done(dlock__asub *s, const char *channel, bool counted, bool published)
{
    dlock__achan *ch = find(s, channel, strlen(channel));
    if (!ch) return;
    if (counted && !published && ch->skip > 0) ch->skip--;
    else if (!counted && published && ch->state == CH_SUBSCRIBED) kick(ch);
}

void dlock__asub_set_master(dlock__asub *s, const char *host, int port)
{
    if (strcmp(s->mhost, host) == 0 && s->mport == port) return;
    snprintf(s->mhost, sizeof(s->mhost), "%s", host);
    s->mport = port;
    if (s->nodes[0].lc) dlock__lconn_drop(s->nodes[0].lc); /* on_state: channels NEW, reconnect there */
    else if (s->nchan) dlock__atimer_start(&s->loop, s->retry_timer, 0);
}

void dlock__asub_counts(const dlock__asub *s, size_t *channels_out, size_t *waiters_out)
{
    if (channels_out) *channels_out = s ? s->nchan : 0;
    if (waiters_out) *waiters_out = s ? s->nwait : 0;
}
