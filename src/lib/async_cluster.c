/* async_cluster.c: the asynchronous client's Redis Cluster driver
 * (async_internal.h), a third driver of the pure router
 * (cluster_router.h), on the host loop's connections (redis_loop.h) and
 * timers, never blocking.
 *
 * Design note. One connection per master, opened on first use with the
 * URL's credentials. The slot map is loaded without blocking, by the
 * router's walk (dlock__rwalk: CLUSTER SLOTS, SHARDS when SLOTS is refused
 * or does not parse, one node at a time in dlock__router_refresh_order),
 * at most one walk at once and one per DLOCK__CLUSTER_REFRESH_GAP_MS; a
 * walk no node answered is tried again after retry_delay_ms while
 * commands wait for the map (else when the next one needs it; its
 * failure is logged once). A command made
 * while its slot has no known master is parked with its deadline
 * (command_timeout_ms) and sent when a walk succeeds, or ends ECONN.
 * Each command in flight is listed on its node in send order with its
 * reply deadline; when the oldest's passes, the node's connection is
 * dropped (its commands end EUNKNOWN), the router is told
 * (dlock__router_lost) and the map asked again. What a reply asks for is
 * the router's: MOVED re-points the slot, resends there at once and
 * refreshes the map in the background; ASK sends ASKING + the command to
 * the named node once; TRYAGAIN / LOADING / MASTERDOWN / CLUSTERDOWN /
 * READONLY park the command for the router's wait (the last two go to the
 * slot's master once the map was asked again). A command whose node never
 * came up (nothing was written) is sent again where the refreshed map
 * says, within the redirect bound. One timer serves every deadline.
 * Invariant: the driver's memory lives until it was freed, no callback of
 * its is on the stack (depth) and no command or handshake is pending in
 * hiredis (npending): hiredis may call back after the free returned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_internal.h"
#include "cluster_router.h"
#include "util.h"

#define MAX_NODES DLOCK__ROUTER_MAX_NODES

typedef struct creq creq;

typedef struct cnode {
    dlock__lconn *lc;
    bool up;
    int64_t connect_deadline_ms;
    int64_t next_connect_ms; /* no new connection before (after a failed one) */
    creq *head, *tail;       /* in flight on lc, in send order */
} cnode;

struct creq {
    dlock__acl *a;
    dlock__acl_fn fn;
    void *priv;
    int slot;  /* -1: keyless */
    int fixed; /* >= 0: this node only, no redirects (map requests) */
    dlock__hop h;
    int node;    /* in flight on this node, -1: not */
    bool parked; /* in a->parked */
    int64_t deadline_ms;
    int64_t resend_ms; /* parked: when to send again; 0: when the map is known */
    int64_t born_ms;   /* made then: waiting for the map ends command_timeout_ms later */
    creq *prev, *next;
    int argc;
    const char **argv;
    size_t *lens;
};

struct dlock__acl {
    dlock_async_loop loop;
    dlock__evloop ev;
    dlock__url url;
    const dlock_client_options *o;
    dlock__router rt;
    cnode nodes[MAX_NODES]; /* aligned with rt.nodes */
    bool known;             /* a map was applied */
    creq *parked;
    void *timer;
    bool walking, walk_pending;
    bool walk_failed; /* the last walk found no node (logged once) */
    dlock__rwalk walk;
    int64_t next_walk_ms;
    size_t npending;
    int depth;
    bool closing;
};

static void rearm(dlock__acl *a);
static int dispatch(creq *r);
static void start_walk(dlock__acl *a);

/* ---- lifetime ------------------------------------------------------------------ */

static void maybe_free(dlock__acl *a)
{
    if (!a->closing || a->depth || a->npending) return;
    dlock__router_free(&a->rt);
    dlock__url_free(&a->url);
    free(a);
}

static void leave(dlock__acl *a)
{
    a->depth--;
    if (!a->closing) rearm(a);
    maybe_free(a);
}

/* ---- lists ------------------------------------------------------------------------ */

static void node_unlist(dlock__acl *a, creq *r)
{
    if (r->node < 0) return;
    cnode *n = &a->nodes[r->node];
    if (r->prev)
        r->prev->next = r->next;
    else
        n->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        n->tail = r->prev;
    r->prev = r->next = NULL;
    r->node = -1;
}

static void node_enlist(dlock__acl *a, creq *r, int i)
{
    cnode *n = &a->nodes[i];
    r->node = i;
    r->deadline_ms = dlock__now_ms() + a->o->command_timeout_ms;
    r->prev = n->tail;
    r->next = NULL;
    if (n->tail)
        n->tail->next = r;
    else
        n->head = r;
    n->tail = r;
}

static void unpark(dlock__acl *a, creq *r)
{
    if (!r->parked) return;
    if (r->prev)
        r->prev->next = r->next;
    else
        a->parked = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    r->parked = false;
}

/* Waits until resend_ms (a retry: within command_timeout_ms from now; the
 * retries are bounded by the router), or 0: until the map is known
 * (within command_timeout_ms from the command's making, however often a
 * map comes without its slot). */
static void park(dlock__acl *a, creq *r, int64_t resend_ms)
{
    r->deadline_ms = (resend_ms ? dlock__now_ms() : r->born_ms) + a->o->command_timeout_ms;
    r->resend_ms = resend_ms;
    r->parked = true;
    r->prev = NULL;
    r->next = a->parked;
    if (a->parked) a->parked->prev = r;
    a->parked = r;
}

static void finish(creq *r, const dlock__reply *reply, int rc)
{
    dlock__acl *a = r->a;
    unpark(a, r);
    node_unlist(a, r);
    r->fn(r->priv, reply, a->closing ? DLOCK_ECLOSED : rc);
    a->npending--;
    free(r);
}

/* ---- nodes ---------------------------------------------------------------------- */

/* Node i's connection goes (why: logged); its commands end (EUNKNOWN if
 * it was up, ECONN if not) and the map is asked again. */
static void node_gone(dlock__acl *a, int i, const char *why, bool drop)
{
    cnode *n = &a->nodes[i];
    dlock__lconn *lc = n->lc;
    if (!lc) return;
    /* as the one connection's: a reply deadline passed WARN, a lost connection INFO */
    dlock__log_opts(a->o, drop ? DLOCK_LOG_WARN : DLOCK_LOG_INFO, "async cluster: connection to %s:%d %s: %s",
                    a->rt.nodes[i].host, a->rt.nodes[i].port, drop ? "dropped" : "lost", why);
    if (!n->up) n->next_connect_ms = dlock__now_ms() + a->o->retry_delay_ms;
    n->lc = NULL;
    n->up = false;
    if (drop) dlock__lconn_drop(lc);
    dlock__lconn_close(lc);
    if (!a->closing) {
        dlock__router_lost(&a->rt, i);
        start_walk(a);
    }
}

static void on_node_state(dlock__lconn *lc, bool up, const char *why, void *priv)
{
    dlock__acl *a = priv;
    a->depth++;
    for (size_t i = 0; i < a->rt.n_nodes; i++) {
        if (a->nodes[i].lc != lc) continue;
        if (up)
            a->nodes[i].up = true;
        else
            node_gone(a, (int)i, why, false);
        break;
    }
    leave(a);
}

static void handshake_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)lc;
    (void)err;
    dlock__acl *a = priv;
    a->npending--;
    if (reply && dlock__reply_kind(reply) == DLOCK__R_ERROR && !a->closing)
        dlock__log_opts(a->o, DLOCK_LOG_ERROR, "async cluster: connection refused: %s",
                        dlock__reply_str(reply, NULL));
    maybe_free(a);
}

/* Node i's connection, opened when there is none; NULL (not yet: *retry_at
 * set, or failed). */
static dlock__lconn *node_conn(dlock__acl *a, int i, int64_t *retry_at)
{
    cnode *n = &a->nodes[i];
    if (n->lc) return n->lc;
    int64_t now = dlock__now_ms();
    if (now < n->next_connect_ms) {
        *retry_at = n->next_connect_ms;
        return NULL;
    }
    char err[160];
    if (dlock__lconn_open(&a->ev, a->rt.nodes[i].host, a->rt.nodes[i].port, NULL, on_node_state, a, &n->lc,
                          err, sizeof(err)) != 0) {
        dlock__log_opts(a->o, DLOCK_LOG_WARN, "async cluster: %s", err);
        n->lc = NULL;
        n->next_connect_ms = now + a->o->retry_delay_ms;
        *retry_at = n->next_connect_ms;
        return NULL;
    }
    n->up = false;
    n->connect_deadline_ms = now + a->o->connect_timeout_ms;
    const char *auth[3];
    int argc = dlock__url_auth_argv(&a->url, auth);
    if (argc && dlock__lconn_cmd(n->lc, handshake_reply, a, argc, auth, NULL) == 0) a->npending++;
    return n->lc;
}

/* ---- deadlines --------------------------------------------------------------------- */

static void rearm(dlock__acl *a)
{
    int64_t at = INT64_MAX;
    for (size_t i = 0; i < a->rt.n_nodes; i++) {
        const cnode *n = &a->nodes[i];
        if (n->lc && !n->up && n->connect_deadline_ms < at) at = n->connect_deadline_ms;
        if (n->head && n->head->deadline_ms < at) at = n->head->deadline_ms;
    }
    for (const creq *r = a->parked; r; r = r->next) {
        if (r->deadline_ms < at) at = r->deadline_ms;
        if (r->resend_ms && r->resend_ms < at) at = r->resend_ms;
    }
    if (a->walk_pending && !a->walking && a->next_walk_ms < at) at = a->next_walk_ms;
    if (at == INT64_MAX)
        dlock__atimer_stop(&a->loop, a->timer);
    else
        dlock__atimer_start(&a->loop, a->timer, at - dlock__now_ms());
}

/* Takes the parked commands that go now (due: their resend time came, or
 * 0: those waiting for the map) off the list, so that a callback freeing
 * the client meanwhile cannot pull the walk from under the caller. */
static creq *take_parked(dlock__acl *a, int64_t due)
{
    creq *todo = NULL;
    for (creq *r = a->parked, *nx; r; r = nx) {
        nx = r->next;
        bool go = due ? (due >= r->deadline_ms || (r->resend_ms && due >= r->resend_ms)) : !r->resend_ms;
        if (!go) continue;
        unpark(a, r);
        r->next = todo;
        todo = r;
    }
    return todo;
}

/* Sends the taken commands again, or ends them: ECONN past their
 * deadline (never ran), ECLOSED once the client is being freed. */
static void send_taken(dlock__acl *a, creq *todo, int64_t now)
{
    while (todo) {
        creq *r = todo;
        todo = r->next;
        r->next = NULL;
        int rc = a->closing ? DLOCK_ECLOSED : now && now >= r->deadline_ms ? DLOCK_ECONN : dispatch(r);
        if (rc) finish(r, NULL, rc);
    }
}

static void on_timer(void *arg)
{
    dlock__acl *a = arg;
    a->depth++;
    int64_t now = dlock__now_ms();
    send_taken(a, take_parked(a, now), now);
    for (size_t i = 0; i < a->rt.n_nodes; i++) {
        cnode *n = &a->nodes[i];
        if (n->lc && !n->up && now >= n->connect_deadline_ms)
            node_gone(a, (int)i, "connect timed out", true);
        else if (n->lc && n->head && now >= n->head->deadline_ms)
            node_gone(a, (int)i, "no reply within command_timeout_ms", true);
    }
    if (a->walk_pending && !a->walking && now >= a->next_walk_ms) start_walk(a);
    leave(a);
}

/* ---- the slot map -------------------------------------------------------------------- */

static int send_fixed(dlock__acl *a, int node, int argc, const char **argv, dlock__acl_fn fn, void *priv);
static void walk_next(dlock__acl *a);

static void on_map(void *priv, const dlock__reply *reply, int rc)
{
    dlock__acl *a = priv;
    if (a->closing) return;
    const char *sub = NULL;
    dlock__rwalk_step step = dlock__rwalk_reply(&a->rt, &a->walk, rc == 0 ? reply : NULL, &sub);
    if (step == DLOCK__RWALK_AGAIN) {
        const char *argv[2] = {"CLUSTER", sub};
        if (send_fixed(a, a->walk.node, 2, argv, on_map, a) == 0) return;
    }
    if (step != DLOCK__RWALK_DONE) {
        walk_next(a);
        return;
    }
    a->walking = false;
    a->walk_failed = false;
    a->known = true;
    send_taken(a, take_parked(a, 0), 0); /* those waiting for the map */
}

/* Asks the next node of the walk; when none is left, walks again later. */
static void walk_next(dlock__acl *a)
{
    const char *sub;
    int i;
    while ((i = dlock__rwalk_next(&a->walk, &sub)) >= 0) {
        const char *argv[2] = {"CLUSTER", sub};
        if (send_fixed(a, i, 2, argv, on_map, a) == 0) return;
    }
    a->walking = false;
    if (!a->walk_failed)
        dlock__log_opts(a->o, DLOCK_LOG_WARN, "async cluster: no node answered CLUSTER %s", DLOCK__CMAP_FIRST);
    a->walk_failed = true;
    bool waiting = false; /* commands that wait for a map walk again; else the next one that needs it asks */
    for (const creq *r = a->parked; r && !waiting; r = r->next) waiting = !r->resend_ms;
    if (!waiting) return;
    a->walk_pending = true;
    a->next_walk_ms = dlock__now_ms() + (a->o->retry_delay_ms > DLOCK__CLUSTER_REFRESH_GAP_MS
                                             ? a->o->retry_delay_ms
                                             : DLOCK__CLUSTER_REFRESH_GAP_MS);
}

/* A walk now, or once the router's gap (and after a failed walk,
 * retry_delay_ms) passed. */
static void start_walk(dlock__acl *a)
{
    if (a->walking || a->closing) return;
    int64_t now = dlock__now_ms();
    int64_t at = now + dlock__router_refresh_wait_ms(&a->rt, now);
    if (a->walk_pending && a->next_walk_ms > at) at = a->next_walk_ms;
    if (at > now) {
        a->walk_pending = true;
        a->next_walk_ms = at;
        return;
    }
    a->walk_pending = false;
    a->walking = true;
    dlock__rwalk_begin(&a->rt, &a->url, &a->walk, now);
    walk_next(a);
}

/* ---- commands ------------------------------------------------------------------------ */

static void on_node_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv);

static void ignore_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)lc;
    (void)reply;
    (void)err;
    dlock__acl *a = priv;
    a->npending--;
    maybe_free(a);
}

/* Writes r to its target (the slot's master when none is set or the
 * router asked to look again; ASKING first when asked), or parks it.
 * 0, or ECONN/ENOMEM (nothing was queued). */
static int dispatch(creq *r)
{
    dlock__acl *a = r->a;
    if (r->fixed >= 0)
        r->h.target = r->fixed;
    else if (r->h.target < 0 || (r->h.reroute && !r->h.asking))
        r->h.target = dlock__router_target(&a->rt, r->slot);
    r->h.reroute = false;
    if (r->h.target < 0) {
        park(a, r, 0);
        start_walk(a);
        return 0;
    }
    int64_t retry_at = 0;
    dlock__lconn *lc = node_conn(a, r->h.target, &retry_at);
    if (!lc && retry_at && r->fixed < 0) {
        park(a, r, retry_at);
        return 0;
    }
    if (!lc) return DLOCK_ECONN;
    const char *ask[1] = {"ASKING"};
    if (r->h.asking) {
        if (dlock__lconn_cmd(lc, ignore_reply, a, 1, ask, NULL) != 0) return DLOCK_ECONN;
        a->npending++;
    }
    int rc = dlock__err_from_common(dlock__lconn_cmd(lc, on_node_reply, r, r->argc, r->argv, r->lens));
    if (rc) return rc;
    node_enlist(a, r, r->h.target);
    if (r->slot >= 0 && r->fixed < 0) a->rt.last = r->h.target;
    if (a->rt.refresh_due) start_walk(a);
    return 0;
}

/* No reply: written and lost (EUNKNOWN, never resent), or never written
 * because the connection never came up (sent again where the map says). */
static void no_reply(creq *r, int node, int err)
{
    dlock__acl *a = r->a;
    bool again = !a->closing && dlock__router_no_reply(&a->rt, &r->h, node, err != DLOCK_ECONN, r->fixed < 0);
    if (!a->closing) start_walk(a);
    if (!again) {
        finish(r, NULL, err);
        return;
    }
    r->h.target = -1;
    park(a, r, dlock__now_ms() + DLOCK__CLUSTER_REFRESH_GAP_MS);
}

/* A redirect or busy reply: sent again (now, or parked); false: final. */
static bool follow(creq *r, const dlock__reply *reply)
{
    dlock__acl *a = r->a;
    int64_t wait = 0;
    dlock__next next = DLOCK__NEXT_DONE;
    if (r->fixed >= 0 ||
        dlock__router_follow(&a->rt, &r->h, r->slot, reply, &wait, &next) == DLOCK__HOP_FINAL)
        return false;
    if (next == DLOCK__NEXT_MOVED || next == DLOCK__NEXT_DOWN || next == DLOCK__NEXT_DEMOTED) start_walk(a);
    if (next != DLOCK__NEXT_MOVED && next != DLOCK__NEXT_ASK) {
        park(a, r, dlock__now_ms() + (wait > 0 ? wait : 1));
        return true;
    }
    int rc = dispatch(r);
    if (rc) finish(r, NULL, rc);
    return true;
}

static void on_node_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)lc;
    creq *r = priv;
    dlock__acl *a = r->a;
    a->depth++;
    int node = r->node;
    node_unlist(a, r);
    if (!reply)
        no_reply(r, node, dlock__err_from_common(err));
    else if (a->closing || dlock__reply_kind(reply) != DLOCK__R_ERROR || !follow(r, reply))
        finish(r, reply, 0);
    leave(a);
}

static creq *creq_new(dlock__acl *a, int argc, const char **argv, const size_t *lens)
{
    size_t bytes = sizeof(creq) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
    for (int i = 0; i < argc; i++)
        bytes += (lens ? lens[i] : strlen(argv[i])) + 1;
    creq *r = calloc(1, bytes);
    if (!r) return NULL;
    r->a = a;
    r->argc = argc;
    r->lens = (size_t *)(void *)(r + 1);
    r->argv = (const char **)(void *)(r->lens + argc);
    char *p = (char *)(r->argv + argc);
    for (int i = 0; i < argc; i++) {
        r->lens[i] = lens ? lens[i] : strlen(argv[i]);
        memcpy(p, argv[i], r->lens[i]);
        p[r->lens[i]] = '\0';
        r->argv[i] = p;
        p += r->lens[i] + 1;
    }
    r->node = -1;
    r->fixed = -1;
    r->h.target = -1;
    r->born_ms = dlock__now_ms();
    return r;
}

static int submit(dlock__acl *a, creq *r, dlock__acl_fn fn, void *priv)
{
    r->fn = fn;
    r->priv = priv;
    a->depth++;
    int rc = dispatch(r);
    if (rc)
        free(r);
    else
        a->npending++;
    leave(a);
    return rc;
}

static int send_fixed(dlock__acl *a, int node, int argc, const char **argv, dlock__acl_fn fn, void *priv)
{
    creq *r = creq_new(a, argc, argv, NULL);
    if (!r) return DLOCK_ENOMEM;
    r->fixed = node;
    return submit(a, r, fn, priv);
}

/* ---- the API ----------------------------------------------------------------------------- */

int dlock__acl_new(const dlock_async_loop *loop, const dlock__url *url, const dlock_client_options *o,
                   dlock__acl **out)
{
    *out = NULL;
    dlock__acl *a = calloc(1, sizeof(*a));
    if (!a) return DLOCK_ENOMEM;
    a->loop = *loop;
    a->o = o;
    dlock__aloop_evloop(loop, &a->ev);
    dlock__router_init(&a->rt);
    a->timer = dlock__atimer_new(loop, on_timer, a);
    if (!a->timer || dlock__url_copy(url, &a->url) != 0) {
        dlock__atimer_free(loop, a->timer);
        a->timer = NULL;
        a->closing = true;
        maybe_free(a);
        return DLOCK_ENOMEM;
    }
    a->depth++;
    start_walk(a);
    leave(a);
    *out = a;
    return 0;
}

void dlock__acl_free(dlock__acl *a)
{
    if (!a || a->closing) return;
    a->closing = true;
    a->depth++;
    for (size_t i = 0; i < a->rt.n_nodes; i++) {
        dlock__lconn *lc = a->nodes[i].lc;
        a->nodes[i].lc = NULL;
        dlock__lconn_close(lc); /* each command ends ECLOSED (now, or when hiredis returns) */
    }
    while (a->parked)
        finish(a->parked, NULL, DLOCK_ECLOSED);
    dlock__atimer_free(&a->loop, a->timer);
    a->timer = NULL;
    leave(a);
}

int dlock__acl_cmd(dlock__acl *a, int slot, int argc, const char **argv, const size_t *lens, dlock__acl_fn fn,
                   void *priv)
{
    if (a->closing) return DLOCK_ECLOSED;
    if (argc < 1 || slot >= DLOCK__SLOTS) return DLOCK_EINVAL;
    creq *r = creq_new(a, argc, argv, lens);
    if (!r) return DLOCK_ENOMEM;
    r->slot = slot < 0 ? -1 : slot;
    return submit(a, r, fn, priv);
}

bool dlock__acl_node_of(const dlock__acl *a, int slot, const char **host_out, int *port_out)
{
    int t = a->known ? dlock__router_target(&a->rt, slot) : -1;
    if (t < 0) return false;
    *host_out = a->rt.nodes[t].host;
    *port_out = a->rt.nodes[t].port;
    return true;
}

void dlock__acl_refresh(dlock__acl *a)
{
    if (a->closing) return;
    a->rt.refresh_due = true;
    a->depth++;
    start_walk(a);
    leave(a);
}
