/* cluster_async.c: the async Redis Cluster router (see cluster_async.h).
 *
 * Design note. Same routing rules as the sync router (cluster_conn.c, and
 * the bounds in cluster_map.h), on one libevent loop: one plain dlock__aconn
 * per master, opened on first use with the URL's credentials; the slot map
 * is loaded synchronously at open (as a sentinel lookup is) and refreshed
 * asynchronously afterwards (CLUSTER SLOTS, then SHARDS, from the masters,
 * then the URL's nodes; at most one walk at a time, at most one per 100 ms). The
 * node table, the map and what a reply asks for are the router's
 * (cluster_router.c), shared with the sync driver.
 * Each command keeps a private copy of itself as RESP bytes, written once
 * (from argv) or copied as the caller wrote them (a command that comes
 * with its slot is never parsed), and every send and resend writes those
 * bytes: MOVED resends to the named node and updates the map entry
 * at once; ASK sends ASKING + the command there; TRYAGAIN / LOADING /
 * MASTERDOWN / CLUSTERDOWN / READONLY wait on a timer (5..100 ms, 8 times
 * at most; the last two refresh the map and go to the slot's master). A command whose connection
 * dropped after it was written is never resent: the caller's callback gets
 * EUNKNOWN. One whose connection never came up (nothing written) is
 * retried after 100 ms on the slot's owner then (the refresh may have
 * found a promoted replica), at most 5 times, then ECONN.
 * State: up once the map is loaded (on the loop's next turn after open);
 * down only when a map refresh found no node reachable; a lost node is
 * handled inside (its connection closed, reopened on next use, map
 * refreshed). SCRIPT/FUNCTION/FLUSH* go to every master: the callback gets
 * the last master's reply, or the first error reply any master gave.
 * Freeing: callbacks may close the aconn; the router is then freed on the
 * loop's next turn, after hiredis has run every pending callback. */
#include "cluster_async.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cluster_conn.h"
#include "cluster_map.h"
#include "cluster_router.h"
#include "common_err.h"
#include "redis_aplain.h"
#include "redis_plain.h"
#include "resp_write.h"
#include "util.h"

#define MAX_NODES DLOCK__ROUTER_MAX_NODES

typedef struct anode {
    dlock__aconn *ac; /* plain; NULL until first used */
    unsigned gen;     /* bumped at each (re)open */
    unsigned gen_up;  /* the gen that connected last */
} anode;

typedef struct fan fan;
typedef struct ccmd ccmd;

struct dlock__acluster {
    struct event_base *base;
    dlock__aconn *outer;
    dlock__url url;
    dlock__router rt;
    anode nodes[MAX_NODES]; /* aligned with rt.nodes */
    bool up, down, closing, refreshing;
    dlock__rwalk walk; /* the current refresh walk */
    struct event *refresh_ev, *up_ev;
    ccmd *waiting; /* commands parked on a timer */
    int in_cb;
    uint64_t parsed; /* RESP commands read back into argv to find their keys */
};

struct ccmd {
    dlock__acluster *cl;
    dlock__acb cb;
    void *priv;
    fan *fan;
    int slot; /* -1: keyless */
    bool fixed;
    dlock__hop h;
    unsigned gen;
    struct event *timer;
    ccmd *prev, *next;
    size_t len; /* the command, in RESP: cmd[0..len), after the struct */
    char cmd[];
};

struct fan {
    dlock__acb cb;
    void *priv;
    int left, err, queued;
    char errtext[256];
};

static void node_state(dlock__aconn *ac, bool up, const char *why, void *priv);
static void start_refresh(dlock__acluster *cl);

/* The node's connection (opening it if needed), or NULL. */
static dlock__aconn *node_ac(dlock__acluster *cl, int i)
{
    anode *n = &cl->nodes[i];
    if (n->ac) return n->ac;
    dlock__url u = {.kind = DLOCK__URL_TCP,
                    .host = cl->rt.nodes[i].host,
                    .port = cl->rt.nodes[i].port,
                    .user = cl->url.user,
                    .password = cl->url.password};
    char why[200] = "";
    n->gen++;
    if (dlock__aplain_open(cl->base, &u, node_state, cl, &n->ac, why, sizeof(why)) != 0) n->ac = NULL;
    return n->ac;
}

static int target_of(const dlock__acluster *cl, int slot)
{
    return dlock__router_target(&cl->rt, slot);
}

/* ---- the map --------------------------------------------------------------- */

/* Synchronous, at open: the first seed that answers. */
static int bootstrap(dlock__acluster *cl, char *err, size_t errlen)
{
    dlock__conn_opts o = {.connect_timeout_ms = 500, .command_timeout_ms = 500};
    int rc = DLOCK__ECONN;
    for (size_t i = 0; i < cl->url.n_seeds; i++) {
        dlock__url u = {.kind = DLOCK__URL_TCP,
                        .host = cl->url.seeds[i].host,
                        .port = cl->url.seeds[i].port,
                        .user = cl->url.user,
                        .password = cl->url.password};
        dlock__conn *c = NULL;
        char why[200] = "";
        rc = dlock__plain_open(&u, &o, &c, why, sizeof(why));
        dlock__cmap m;
        if (rc == 0) rc = dlock__cluster_fetch_map(c, u.host, &m, why, sizeof(why));
        dlock__plain_close(c);
        if (rc == 0) {
            rc = dlock__router_apply(&cl->rt, &m);
            dlock__cmap_free(&m);
            if (rc == 0) return 0;
        }
        dlock__errf(rc, err, errlen, "cluster seed %s:%d: %s", u.host, u.port, why);
        if (rc == DLOCK__EAUTH || rc == DLOCK__ENOMEM) return rc;
    }
    return rc == DLOCK__ESERVER ? DLOCK__ECONN : rc;
}

typedef struct map_req {
    dlock__acluster *cl; /* the walk (cl->walk) says which node and question */
} map_req;

static void refresh_next(dlock__acluster *cl);

static void refresh_done(dlock__acluster *cl, bool ok)
{
    cl->refreshing = false;
    if (ok) return;
    if (!cl->walk.answered && !cl->down && !cl->closing) { /* nobody answered at all */
        cl->down = true;
        cl->up = false;
        cl->in_cb++; /* the owner may close us in there: the walk's callers still read cl */
        dlock__aplain_report(cl->outer, false, "cluster: no node reachable");
        cl->in_cb--;
    }
}

static void on_map_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    (void)err;
    map_req *q = priv;
    dlock__acluster *cl = q->cl;
    cl->in_cb++;
    if (cl->closing) goto out;
    const char *sub = NULL;
    dlock__rwalk_step step = dlock__rwalk_reply(&cl->rt, &cl->walk, reply, &sub);
    if (step == DLOCK__RWALK_AGAIN) {
        const char *argv[2] = {"CLUSTER", sub};
        map_req *q2 = malloc(sizeof(*q2));
        if (q2 && (*q2 = (map_req){.cl = cl}, true) && dlock__aplain_cmd(ac, on_map_reply, q2, 2, argv, NULL) == 0)
            goto out;
        free(q2);
    }
    if (step == DLOCK__RWALK_DONE)
        refresh_done(cl, true);
    else
        refresh_next(cl);
out:
    free(q);
    cl->in_cb--;
}

/* Asks the next candidate of the walk; ends it when none is left. */
static void refresh_next(dlock__acluster *cl)
{
    const char *sub;
    int i;
    while ((i = dlock__rwalk_next(&cl->walk, &sub)) >= 0) {
        const char *argv[2] = {"CLUSTER", sub};
        dlock__aconn *ac = node_ac(cl, i);
        map_req *q = ac ? malloc(sizeof(*q)) : NULL;
        if (!q) continue;
        *q = (map_req){.cl = cl};
        if (dlock__aplain_cmd(ac, on_map_reply, q, 2, argv, NULL) == 0) return;
        free(q);
    }
    refresh_done(cl, false);
}

static void on_refresh_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    dlock__acluster *cl = arg;
    cl->in_cb++;
    start_refresh(cl);
    cl->in_cb--;
}

/* Starts a walk: masters of the map, the URL's nodes, the suspect last; at most
 * one walk at a time and one per REFRESH_GAP_MS (later: on a timer). */
static void start_refresh(dlock__acluster *cl)
{
    if (cl->refreshing || cl->closing || cl->down) return;
    int64_t ms = dlock__router_refresh_wait_ms(&cl->rt, dlock__now_ms());
    if (ms > 0) {
        struct timeval tv = {.tv_sec = 0, .tv_usec = (suseconds_t)(ms * 1000)};
        if (cl->refresh_ev && !evtimer_pending(cl->refresh_ev, NULL)) evtimer_add(cl->refresh_ev, &tv);
        return;
    }
    cl->refreshing = true;
    dlock__rwalk_begin(&cl->rt, &cl->url, &cl->walk, dlock__now_ms());
    refresh_next(cl);
}

static void node_state(dlock__aconn *ac, bool up, const char *why, void *priv)
{
    (void)why;
    dlock__acluster *cl = priv;
    cl->in_cb++;
    for (size_t i = 0; i < cl->rt.n_nodes; i++) {
        anode *n = &cl->nodes[i];
        if (n->ac != ac) continue;
        if (up) {
            n->gen_up = n->gen;
            break;
        }
        n->ac = NULL; /* reopened on next use */
        dlock__aplain_close(ac);
        if (!cl->closing) {
            dlock__router_lost(&cl->rt, (int)i);
            start_refresh(cl);
        }
        break;
    }
    cl->in_cb--;
}

/* ---- commands ---------------------------------------------------------------- */

/* A command with room for len bytes of RESP. */
static ccmd *ccmd_alloc(dlock__acluster *cl, size_t len)
{
    ccmd *cm = malloc(sizeof(ccmd) + len); /* the bytes are written over at once */
    if (!cm) return NULL;
    memset(cm, 0, sizeof(*cm));
    cm->cl = cl;
    cm->len = len;
    cm->slot = -1;
    return cm;
}

/* The command of argv, written in RESP once (the only formatting). */
static ccmd *ccmd_argv(dlock__acluster *cl, int argc, const char **argv, const size_t *lens)
{
    size_t room = 1 + DLOCK__RESP_INT_MAX + 2;
    for (int i = 0; i < argc; i++)
        room += (lens ? lens[i] : strlen(argv[i])) + DLOCK__RESP_BULK_OVERHEAD;
    ccmd *cm = ccmd_alloc(cl, room);
    if (!cm) return NULL;
    char *p = dlock__resp_len(cm->cmd, '*', (size_t)argc);
    for (int i = 0; i < argc; i++)
        p = dlock__resp_bulk(p, argv[i], lens ? lens[i] : strlen(argv[i]));
    cm->len = (size_t)(p - cm->cmd);
    return cm;
}

/* A copy of a command the caller wrote in RESP. */
static ccmd *ccmd_resp(dlock__acluster *cl, const char *cmd, size_t len)
{
    ccmd *cm = ccmd_alloc(cl, len);
    if (cm) memcpy(cm->cmd, cmd, len);
    return cm;
}

static void unpark(ccmd *cm)
{
    dlock__acluster *cl = cm->cl;
    if (cm->prev)
        cm->prev->next = cm->next;
    else if (cl->waiting == cm)
        cl->waiting = cm->next;
    if (cm->next) cm->next->prev = cm->prev;
    cm->prev = cm->next = NULL;
}

static void fan_part(dlock__acluster *cl, fan *f, dlock__reply *reply, int err);

/* The command's end: its callback (or its share of a fan-out), freed. */
static void finish(ccmd *cm, dlock__reply *reply, int err)
{
    if (cm->timer) event_free(cm->timer);
    if (cm->fan)
        fan_part(cm->cl, cm->fan, reply, err);
    else
        dlock__aplain_deliver(cm->cl->outer, cm->cb, reply, err, cm->priv);
    free(cm);
}

static void on_node_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv);

static void ignore(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    (void)ac, (void)reply, (void)err, (void)priv;
}

/* Writes cm to its target (ASKING first when asked). 0 or ECONN/ENOMEM:
 * nothing was queued. */
static int dispatch(ccmd *cm)
{
    dlock__acluster *cl = cm->cl;
    if (cm->h.target < 0) return DLOCK__ECONN;
    dlock__aconn *ac = node_ac(cl, cm->h.target);
    if (!ac) return DLOCK__ECONN;
    const char *ask[1] = {"ASKING"};
    if (cm->h.asking && dlock__aplain_cmd(ac, ignore, NULL, 1, ask, NULL) != 0) return DLOCK__ECONN;
    cm->gen = cl->nodes[cm->h.target].gen;
    int rc = dlock__aplain_cmd_resp(ac, on_node_reply, cm, cm->cmd, cm->len);
    if (rc == 0 && cm->slot >= 0) cl->rt.last = cm->h.target;
    return rc;
}

static void on_cm_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ccmd *cm = arg;
    dlock__acluster *cl = cm->cl;
    cl->in_cb++;
    unpark(cm);
    if (!cm->fixed && cm->slot >= 0 && !cm->h.asking && target_of(cl, cm->slot) >= 0)
        cm->h.target = target_of(cl, cm->slot);
    int rc = dispatch(cm);
    if (rc) finish(cm, NULL, rc);
    cl->in_cb--;
}

/* Parks cm on a timer of ms, then dispatches it again. */
static void park(ccmd *cm, int64_t ms)
{
    dlock__acluster *cl = cm->cl;
    if (!cm->timer) cm->timer = evtimer_new(cl->base, on_cm_timer, cm);
    struct timeval tv = {.tv_sec = 0, .tv_usec = (suseconds_t)(ms * 1000)};
    if (!cm->timer || evtimer_add(cm->timer, &tv) != 0) {
        finish(cm, NULL, DLOCK__ECONN);
        return;
    }
    cm->next = cl->waiting;
    if (cl->waiting) cl->waiting->prev = cm;
    cl->waiting = cm;
}

/* No reply: written and lost (EUNKNOWN, never resent), or never written
 * because the connection never came up (retried on the slot's owner). */
static void no_reply(ccmd *cm)
{
    dlock__acluster *cl = cm->cl;
    anode *n = &cl->nodes[cm->h.target];
    bool written = n->gen_up == cm->gen;
    bool again = !cl->closing && dlock__router_no_reply(&cl->rt, &cm->h, cm->h.target, written, !cm->fixed);
    if (!cl->closing) start_refresh(cl);
    if (!again) {
        finish(cm, NULL, written ? DLOCK__EUNKNOWN : DLOCK__ECONN);
        return;
    }
    park(cm, DLOCK__CLUSTER_REFRESH_GAP_MS);
}

/* A redirect or busy reply: resend (now, or parked); false: r is final. */
static bool follow(ccmd *cm, const dlock__reply *r)
{
    dlock__acluster *cl = cm->cl;
    int64_t wait = 0;
    dlock__next next = DLOCK__NEXT_DONE;
    if (cm->fixed || dlock__router_follow(&cl->rt, &cm->h, cm->slot, r, &wait, &next) == DLOCK__HOP_FINAL)
        return false;
    if (next == DLOCK__NEXT_MOVED || next == DLOCK__NEXT_DOWN || next == DLOCK__NEXT_DEMOTED)
        start_refresh(cl); /* the map changed, or must be asked again */
    if (next != DLOCK__NEXT_MOVED && next != DLOCK__NEXT_ASK) {
        park(cm, wait);
        return true;
    }
    int rc = dispatch(cm);
    if (rc) finish(cm, NULL, rc);
    return true;
}

static void on_node_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    (void)ac;
    (void)err;
    ccmd *cm = priv;
    dlock__acluster *cl = cm->cl;
    cl->in_cb++;
    if (!reply)
        no_reply(cm);
    else if (cl->closing || !follow(cm, reply))
        finish(cm, reply, 0);
    cl->in_cb--;
}

/* ---- every master ------------------------------------------------------------- */

static void fan_part(dlock__acluster *cl, fan *f, dlock__reply *reply, int err)
{
    (void)cl;
    /* a part lost while another master may have run it: unknown */
    if (!reply) f->err = f->queued > 1 || err == DLOCK__EUNKNOWN ? DLOCK__EUNKNOWN : err;
    if (reply && dlock__reply_kind(reply) == DLOCK__R_ERROR && !f->errtext[0])
        snprintf(f->errtext, sizeof(f->errtext), "%s", dlock__reply_str(reply, NULL));
    if (--f->left > 0) return;
    dlock__reply *synth = NULL;
    if (!f->err && f->errtext[0] && dlock__reply_kind(reply) != DLOCK__R_ERROR) {
        char resp[300];
        int n = snprintf(resp, sizeof(resp), "-%s\r\n", f->errtext);
        if (dlock__reply_parse(resp, (size_t)n, &synth) != 0) f->err = DLOCK__ENOMEM;
    }
    if (f->err)
        dlock__aplain_deliver(cl->outer, f->cb, NULL, f->err, f->priv);
    else
        dlock__aplain_deliver(cl->outer, f->cb, synth ? synth : reply, 0, f->priv);
    dlock__reply_free(synth);
    free(f);
}

static int run_all(dlock__acluster *cl, dlock__acb cb, void *priv, const char *cmd, size_t len)
{
    int masters[MAX_NODES];
    int n = (int)dlock__router_masters(&cl->rt, masters, NULL, MAX_NODES);
    fan *f = n ? calloc(1, sizeof(*f)) : NULL;
    if (!f) return n ? DLOCK__ENOMEM : DLOCK__ECONN;
    *f = (fan){.cb = cb, .priv = priv, .left = n};
    int queued = 0;
    for (int i = 0; i < n; i++) {
        ccmd *cm = ccmd_resp(cl, cmd, len);
        int rc = DLOCK__ENOMEM;
        if (cm) {
            cm->fan = f;
            cm->fixed = true;
            cm->h.target = masters[i];
        }
        if (cm && (rc = dispatch(cm)) == 0) {
            queued++;
            continue;
        }
        free(cm);
        f->left--;
        f->err = queued ? DLOCK__EUNKNOWN : rc;
    }
    if (queued == 0) {
        free(f);
        return DLOCK__ECONN;
    }
    f->queued = queued;
    if (f->err) f->err = DLOCK__EUNKNOWN; /* some masters have it, some not */
    return 0;
}

/* ---- the routing connection ------------------------------------------------------ */

static void on_up(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    dlock__acluster *cl = arg;
    cl->in_cb++;
    if (!cl->closing && !cl->down) {
        cl->up = true;
        dlock__aplain_report(cl->outer, true, "cluster map loaded");
    }
    cl->in_cb--;
}

static void destroy(dlock__acluster *cl)
{
    dlock__router_free(&cl->rt);
    if (cl->refresh_ev) event_free(cl->refresh_ev);
    if (cl->up_ev) event_free(cl->up_ev);
    dlock__url_free(&cl->url);
    free(cl);
}

int dlock__acluster_open(struct event_base *base, const dlock__url *url, dlock__aconn *outer,
                         dlock__acluster **out, char *err, size_t errlen)
{
    *out = NULL;
    dlock__acluster *cl = calloc(1, sizeof(*cl));
    if (!cl) return DLOCK__ENOMEM;
    *cl = (dlock__acluster){.base = base, .outer = outer};
    dlock__router_init(&cl->rt);
    int rc = dlock__url_copy(url, &cl->url);
    cl->refresh_ev = evtimer_new(base, on_refresh_timer, cl);
    cl->up_ev = evtimer_new(base, on_up, cl);
    if (rc == 0 && (!cl->refresh_ev || !cl->up_ev)) rc = DLOCK__ENOMEM;
    if (rc == 0) rc = bootstrap(cl, err, errlen);
    struct timeval zero = {0, 0};
    if (rc == 0 && evtimer_add(cl->up_ev, &zero) != 0) rc = DLOCK__ENOMEM;
    if (rc) {
        destroy(cl);
        return rc;
    }
    dlock__router_refresh_begins(&cl->rt, dlock__now_ms());
    *out = cl;
    return 0;
}

static void destroy_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    destroy(arg);
}

void dlock__acluster_close(dlock__acluster *cl)
{
    if (!cl) return;
    cl->closing = true;
    cl->in_cb++;          /* what runs below must not free cl */
    while (cl->waiting) { /* parked: never written */
        ccmd *cm = cl->waiting;
        unpark(cm);
        finish(cm, NULL, DLOCK__ECONN);
    }
    for (size_t i = 0; i < cl->rt.n_nodes; i++) {
        dlock__aconn *ac = cl->nodes[i].ac;
        cl->nodes[i].ac = NULL;
        dlock__aplain_close(ac); /* pending callbacks: on_node_reply, closing */
    }
    cl->in_cb--;
    dlock__after_callbacks(cl->base, cl->in_cb, destroy_cb, cl);
}

/* Where argv goes: *slot (its keys' slot, -1 keyless) or *all (every
 * master); ECROSSSLOT/EINVAL for what the router does not send. */
static int route_argv(int argc, const char **argv, const size_t *lens, int *slot, bool *all)
{
    dlock__route rt = {0};
    int rc = dlock__route_cmd(argc, argv, lens, &rt, NULL, 0);
    if (rc) return rc;
    if (rt.kind == DLOCK__ROUTE_MULTI || rt.kind == DLOCK__ROUTE_EXEC) return DLOCK__EINVAL;
    *all = rt.kind == DLOCK__ROUTE_ALL;
    *slot = rt.kind == DLOCK__ROUTE_SLOT ? (int)rt.slot : -1;
    return 0;
}

/* The same for a command written in RESP (an array of bulk strings): read
 * back into argv, the only way to find its keys. */
static int route_resp(dlock__acluster *cl, const char *cmd, size_t len, int *slot, bool *all)
{
    dlock__reply *req = NULL;
    int rc = dlock__reply_parse(cmd, len, &req);
    if (rc) return rc == DLOCK__ENOMEM ? rc : DLOCK__EINVAL;
    cl->parsed++;
    size_t n = dlock__reply_kind(req) == DLOCK__R_ARRAY ? dlock__reply_count(req) : 0;
    const char **argv = n ? calloc(n, sizeof(*argv)) : NULL;
    size_t *lens = n ? calloc(n, sizeof(*lens)) : NULL;
    rc = n == 0 || n > INT_MAX ? DLOCK__EINVAL : (!argv || !lens) ? DLOCK__ENOMEM : 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const dlock__reply *a = dlock__reply_at(req, i);
        if (dlock__reply_kind(a) != DLOCK__R_STRING)
            rc = DLOCK__EINVAL;
        else
            argv[i] = dlock__reply_str(a, &lens[i]);
    }
    if (rc == 0) rc = route_argv((int)n, argv, lens, slot, all);
    free(argv);
    free(lens);
    dlock__reply_free(req);
    return rc;
}

/* Sends cm: to slot's master following redirects (slot < 0: keyless, to
 * the current node), or once to slot's master (fixed). Frees it if not. */
static int submit(dlock__acluster *cl, ccmd *cm, int slot, bool fixed, dlock__acb cb, void *priv)
{
    cm->cb = cb;
    cm->priv = priv;
    cm->fixed = fixed;
    cm->h.target = target_of(cl, slot);
    cm->slot = fixed ? -1 : slot; /* fixed: keyless, does not move "the current node" */
    int rc = dispatch(cm);
    if (rc) free(cm);
    if (rc == 0 && cl->rt.refresh_due) start_refresh(cl);
    return rc;
}

int dlock__acluster_cmd(dlock__acluster *cl, int slot, dlock__acb cb, void *priv, int argc, const char **argv,
                        const size_t *lens)
{
    if (cl->closing || cl->down) return DLOCK__ECONN;
    if (argc < 1 || slot >= DLOCK__SLOTS) return DLOCK__EINVAL;
    int to = slot;
    bool all = false;
    int rc = slot < 0 ? route_argv(argc, argv, lens, &to, &all) : 0;
    if (rc) return rc;
    ccmd *cm = ccmd_argv(cl, argc, argv, lens);
    if (!cm) return DLOCK__ENOMEM;
    if (!all) return submit(cl, cm, to, slot >= 0, cb, priv);
    rc = run_all(cl, cb, priv, cm->cmd, cm->len);
    free(cm);
    return rc;
}

int dlock__acluster_cmd_resp(dlock__acluster *cl, int slot, dlock__acb cb, void *priv, const char *cmd,
                             size_t len)
{
    if (cl->closing || cl->down) return DLOCK__ECONN;
    if (len == 0 || slot >= DLOCK__SLOTS) return DLOCK__EINVAL;
    bool all = false;
    int rc = slot < 0 ? route_resp(cl, cmd, len, &slot, &all) : 0;
    if (rc) return rc;
    if (all) return run_all(cl, cb, priv, cmd, len);
    ccmd *cm = ccmd_resp(cl, cmd, len);
    if (!cm) return DLOCK__ENOMEM;
    return submit(cl, cm, slot, false, cb, priv);
}

uint64_t dlock__acluster_parsed(const dlock__acluster *cl)
{
    return cl->parsed;
}

bool dlock__acluster_is_up(const dlock__acluster *cl)
{
    return cl && cl->up && !cl->down && !cl->closing;
}

int dlock__acluster_node_of_slot(dlock__acluster *cl, unsigned slot, char *buf, size_t len)
{
    if (slot >= DLOCK__SLOTS) return DLOCK__EINVAL;
    int t = target_of(cl, (int)slot);
    if (t < 0) return DLOCK__ECONN;
    snprintf(buf, len, "%s:%d", cl->rt.nodes[t].host, cl->rt.nodes[t].port);
    return 0;
}
