/* cluster_conn.c: the sync Redis Cluster router (see cluster_conn.h).
 *
 * Design note. A routing connection holds the slot map (slot -> index in a
 * small pool of nodes) and, per node, one plain dlock__conn opened lazily
 * with the URL's credentials (db 0). A command is routed by its keys
 * (cluster_route.c) and sent to the slot's master; the reply decides:
 *   MOVED slot h:p   the slot now lives on h:p: the map entry is updated at
 *                    once, a full map refresh is scheduled (at most one per
 *                    REFRESH_GAP_MS), the command is resent there;
 *   ASK slot h:p     ASKING + the command, once, on h:p; the map unchanged;
 *   TRYAGAIN / LOADING / MASTERDOWN / CLUSTERDOWN / READONLY  sleep 5, 10,
 *                    20, 40, 80, 100, 100, 100 ms (at most BUSY_RETRIES = 8
 *                    retries, 455 ms in all) and retry; CLUSTERDOWN and
 *                    READONLY (a master demoted by a failover) also refresh
 *                    the map first and resend to the slot's master then;
 * and at most MAX_REDIRECTS (5) MOVED/ASK a command; past a bound the last
 * error reply is the caller's reply. A redirect or a busy error means the
 * command did not run, so resending it is safe. A command that was sent and
 * got no reply (timeout, reset) is never resent: the caller gets
 * DLOCK__EUNKNOWN as with a plain connection, and a map refresh from another
 * node is scheduled. A node that cannot be connected to (nothing sent)
 * refreshes the map from the others at once; if the slot's owner changed
 * the command goes there, else the caller gets ECONN.
 * Keyless commands: SCRIPT/FUNCTION/FLUSHALL/FLUSHDB go to every master
 * (the first master's reply, or the first error reply); the others (WAIT,
 * PING, INFO, ROLE, CLIENT, CONFIG, PUBLISH...) go to the "current node":
 * the node of this connection's last routed command, so WAIT counts the
 * replicas of the write just made (before any routed command: the master
 * of slot 0). The map is bootstrapped from CLUSTER SLOTS (CLUSTER SHARDS
 * when the server refuses it) of the first seed that answers; the node
 * table, the map and what a reply asks for are the router's
 * (cluster_router.c), shared with the async driver.
 * Pipelines: split into units (a command, or MULTI..EXEC), each routed;
 * sent as one pipeline per node; replies reassembled in order; a unit that
 * got a redirect is resent alone, reply by reply. A keyless WAIT/PING
 * follows the keyed unit before it (resent with it when it moves). */
#include "cluster_conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_map.h"
#include "cluster_router.h"
#include "common_err.h"
#include "redis_plain.h"
#include "util.h"

#define MAX_NODES DLOCK__ROUTER_MAX_NODES
#define NONE      DLOCK__CMAP_NONE

struct dlock__cluster {
    dlock__url url; /* redis-cluster://: seeds and credentials */
    dlock__conn_opts opts;
    dlock__router rt;
    dlock__conn *conns[MAX_NODES]; /* plain, one per router node; NULL until first used */
    char errstr[256];
};

__attribute__((format(printf, 2, 3))) static void cl_err(dlock__cluster *cl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cl->errstr, sizeof(cl->errstr), fmt, ap);
    va_end(ap);
}

const char *dlock__cluster_errstr(const dlock__cluster *cl)
{
    return cl->errstr;
}

void dlock__cluster_set_timeouts(dlock__cluster *cl, const dlock__conn_opts *opts)
{
    cl->opts = *opts;
    for (int i = 0; i < MAX_NODES; i++)
        if (cl->conns[i]) dlock__plain_set_timeouts(cl->conns[i], opts);
}

/* The node's connection, opened on first use. 0, ECONN, EAUTH or ENOMEM. */
static int node_conn(dlock__cluster *cl, int i, dlock__conn **out)
{
    const dlock__hostport *n = &cl->rt.nodes[i];
    if (!cl->conns[i]) {
        dlock__url u = {.kind = DLOCK__URL_TCP,
                        .host = n->host,
                        .port = n->port,
                        .user = cl->url.user,
                        .password = cl->url.password};
        char why[200] = "";
        int rc = dlock__plain_open(&u, &cl->opts, &cl->conns[i], why, sizeof(why));
        if (rc) {
            cl_err(cl, "cluster node %s:%d: %s", n->host, n->port, why);
            return rc;
        }
    }
    *out = cl->conns[i];
    return 0;
}

/* ---- slot map ------------------------------------------------------------ */

/* One map request and its parse; 0, ESERVER (error or bad reply), or the
 * transport code (nothing parsed). */
static int fetch_one(dlock__conn *c, const char *sub, const char *host, dlock__cmap *out, char *err,
                     size_t errlen)
{
    const char *argv[2] = {"CLUSTER", sub};
    dlock__reply *r = NULL;
    int rc = dlock__plain_cmd(c, 2, argv, NULL, &r);
    if (rc) return dlock__errf(rc, err, errlen, "%s", dlock__plain_errstr(c));
    rc = dlock__cmap_parse(sub, r, host, out, err, errlen);
    if (rc == DLOCK__ESERVER && dlock__reply_kind(r) == DLOCK__R_ERROR)
        dlock__errf(rc, err, errlen, "%s", dlock__reply_str(r, NULL));
    dlock__reply_free(r);
    return rc;
}

int dlock__cluster_fetch_map(dlock__conn *c, const char *host, dlock__cmap *out, char *err, size_t errlen)
{
    int rc = fetch_one(c, DLOCK__CMAP_FIRST, host, out, err, errlen);
    if (rc == DLOCK__ESERVER) rc = fetch_one(c, DLOCK__CMAP_SECOND, host, out, err, errlen);
    return rc;
}

/* The map from node i. */
static int load_map_from(dlock__cluster *cl, int i)
{
    dlock__conn *c;
    int rc = node_conn(cl, i, &c);
    if (rc) return rc;
    dlock__cmap m;
    char why[200] = "";
    rc = dlock__cluster_fetch_map(c, cl->rt.nodes[i].host, &m, why, sizeof(why));
    if (rc) {
        cl_err(cl, "cluster node %s:%d: %s", cl->rt.nodes[i].host, cl->rt.nodes[i].port, why);
        return rc;
    }
    rc = dlock__router_apply(&cl->rt, &m);
    dlock__cmap_free(&m);
    return rc;
}

/* Reloads the map from the first node that answers; the old map stays
 * when none does. */
static int refresh(dlock__cluster *cl)
{
    int order[MAX_NODES + 1];
    size_t n = dlock__router_refresh_order(&cl->rt, &cl->url, order);
    int rc = DLOCK__ECONN;
    dlock__router_refresh_begins(&cl->rt, dlock__now_ms());
    for (size_t i = 0; i < n; i++) {
        rc = load_map_from(cl, order[i]);
        if (rc == 0) {
            dlock__router_refreshed(&cl->rt);
            return 0;
        }
        if (rc == DLOCK__ENOMEM) return rc;
    }
    return rc;
}

static void refresh_if_due(dlock__cluster *cl)
{
    if (dlock__router_refresh_allowed(&cl->rt, dlock__now_ms())) (void)refresh(cl);
}

int dlock__cluster_open(const dlock__url *url, const dlock__conn_opts *opts, dlock__cluster **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    dlock__cluster *cl = calloc(1, sizeof(*cl));
    if (!cl) return DLOCK__ENOMEM;
    cl->opts = *opts;
    dlock__router_init(&cl->rt);
    int rc = dlock__url_copy(url, &cl->url);
    if (rc == 0) rc = refresh(cl);
    if (rc) {
        if (err && errlen) snprintf(err, errlen, "%s", cl->errstr[0] ? cl->errstr : dlock__strerror(rc));
        dlock__cluster_close(cl);
        return rc == DLOCK__ESERVER ? DLOCK__ECONN : rc;
    }
    *out = cl;
    return 0;
}

void dlock__cluster_close(dlock__cluster *cl)
{
    if (!cl) return;
    for (size_t i = 0; i < cl->rt.n_nodes; i++)
        dlock__plain_close(cl->conns[i]);
    dlock__router_free(&cl->rt);
    dlock__url_free(&cl->url);
    free(cl);
}

/* ---- one routed command ---------------------------------------------------- */

static int target_of(const dlock__cluster *cl, int slot)
{
    return dlock__router_target(&cl->rt, slot);
}

/* Sends argv (after ASKING when asking) to node i and reads the reply. */
static int node_exec(dlock__cluster *cl, int i, bool asking, int argc, const char **argv, const size_t *lens,
                     dlock__reply **reply_out)
{
    dlock__conn *c;
    int rc = node_conn(cl, i, &c);
    if (rc) return rc;
    if (asking) {
        const char *ask[1] = {"ASKING"};
        const char *const *argvs[2] = {ask, argv};
        const size_t *lv[2] = {NULL, lens};
        int argcs[2] = {1, argc};
        dlock__reply *rs[2] = {NULL, NULL};
        rc = dlock__plain_pipeline(c, 2, argcs, argvs, lv, rs);
        dlock__reply_free(rs[0]);
        *reply_out = rs[1];
    } else {
        rc = dlock__plain_cmd(c, argc, argv, lens, reply_out);
    }
    if (rc) {
        cl_err(cl, "cluster node %s:%d: %s", cl->rt.nodes[i].host, cl->rt.nodes[i].port,
               dlock__plain_errstr(c));
        dlock__router_lost(&cl->rt, i);
    }
    return rc;
}

typedef dlock__hop hop;

enum { FINAL = DLOCK__HOP_FINAL, RESEND = DLOCK__HOP_RESEND };

static int follow(dlock__cluster *cl, hop *h, int slot, const dlock__reply *r, int64_t *wait_ms)
{
    return (int)dlock__router_follow(&cl->rt, h, slot, r, wait_ms, NULL);
}

/* Nothing was sent to h->target (connect failed): refresh from the other
 * nodes now; true when the slot's owner changed (resend there). */
static bool reroute_after_conn_failure(dlock__cluster *cl, hop *h, int slot)
{
    if (h->redirects >= DLOCK__CLUSTER_MAX_REDIRECTS) return false;
    h->redirects++;
    dlock__router_lost(&cl->rt, h->target);
    char keep[sizeof(cl->errstr)];
    memcpy(keep, cl->errstr, sizeof(keep));
    refresh_if_due(cl); /* rate-limited: a burst of failures asks once */
    int rc = cl->rt.refresh_due ? DLOCK__ECONN : 0;
    memcpy(cl->errstr, keep, sizeof(keep));
    int t = target_of(cl, slot);
    if (rc || t < 0 || t == h->target) return false;
    h->target = t;
    h->asking = false;
    return true;
}

static int run_routed(dlock__cluster *cl, int slot, int argc, const char **argv, const size_t *lens,
                      dlock__reply **reply_out)
{
    hop h = {.target = target_of(cl, slot)};
    for (;;) {
        if (h.target < 0) {
            if (slot >= 0)
                cl_err(cl, "cluster: slot %d has no master in the map (cluster down?)", slot);
            else
                cl_err(cl, "cluster: no master in the map (cluster down?)");
            return DLOCK__ECONN;
        }
        dlock__reply *r = NULL;
        int rc = node_exec(cl, h.target, h.asking, argc, argv, lens, &r);
        if (rc == DLOCK__ECONN && reroute_after_conn_failure(cl, &h, slot)) continue;
        if (rc) return rc;
        cl->rt.last = h.target;
        int64_t wait = 0;
        if (follow(cl, &h, slot, r, &wait) == FINAL) {
            *reply_out = r;
            return 0;
        }
        dlock__reply_free(r);
        if (wait) dlock__sleep_ms(wait);
        refresh_if_due(cl);
        if (h.reroute && target_of(cl, slot) >= 0) {
            h.target = target_of(cl, slot);
            h.asking = h.reroute = false;
        }
    }
}

/* Every master, in slot order; the first reply, or the first error reply.
 * A transport failure after the first master was sent to is EUNKNOWN. */
static int run_all(dlock__cluster *cl, int argc, const char **argv, const size_t *lens,
                   dlock__reply **reply_out)
{
    int masters[MAX_NODES];
    size_t n = dlock__router_masters(&cl->rt, masters, NULL, MAX_NODES);
    dlock__reply *keep = NULL;
    int sent = 0;
    for (size_t i = 0; i < n; i++) {
        int o = masters[i];
        dlock__reply *r = NULL;
        int rc = node_exec(cl, o, false, argc, argv, lens, &r);
        if (rc) {
            dlock__reply_free(keep);
            return sent && rc != DLOCK__ENOMEM ? DLOCK__EUNKNOWN : rc;
        }
        sent++;
        if (!keep || (dlock__reply_kind(r) == DLOCK__R_ERROR && dlock__reply_kind(keep) != DLOCK__R_ERROR)) {
            dlock__reply_free(keep);
            keep = r;
        } else {
            dlock__reply_free(r);
        }
    }
    if (!keep) {
        cl_err(cl, "cluster: no master in the map");
        return DLOCK__ECONN;
    }
    *reply_out = keep;
    return 0;
}

int dlock__cluster_cmd(dlock__cluster *cl, int argc, const char **argv, const size_t *lens,
                       dlock__reply **reply_out)
{
    *reply_out = NULL;
    dlock__route rt;
    int rc = dlock__route_cmd(argc, argv, lens, &rt, cl->errstr, sizeof(cl->errstr));
    if (rc) return rc;
    refresh_if_due(cl);
    switch (rt.kind) {
    case DLOCK__ROUTE_SLOT: return run_routed(cl, (int)rt.slot, argc, argv, lens, reply_out);
    case DLOCK__ROUTE_CURRENT: return run_routed(cl, -1, argc, argv, lens, reply_out);
    case DLOCK__ROUTE_ALL: return run_all(cl, argc, argv, lens, reply_out);
    case DLOCK__ROUTE_MULTI:
    case DLOCK__ROUTE_EXEC: break;
    }
    cl_err(cl, "cluster: send MULTI ... EXEC as one pipeline on a redis-cluster:// connection");
    return DLOCK__EINVAL;
}

int dlock__cluster_cmd_slot(dlock__cluster *cl, unsigned slot, int argc, const char **argv,
                            const size_t *lens, dlock__reply **reply_out)
{
    *reply_out = NULL;
    if (slot >= DLOCK__SLOTS || argc < 1) return DLOCK__EINVAL;
    refresh_if_due(cl);
    hop h = {.target = target_of(cl, (int)slot)};
    if (h.target < 0) {
        cl_err(cl, "cluster: slot %u has no master in the map", slot);
        return DLOCK__ECONN;
    }
    int rc = node_exec(cl, h.target, false, argc, argv, lens, reply_out);
    if (rc == 0) cl->rt.last = h.target;
    return rc;
}

int dlock__cluster_master_of_slot(dlock__cluster *cl, unsigned slot, dlock__url *out)
{
    memset(out, 0, sizeof(*out));
    if (slot >= DLOCK__SLOTS) return DLOCK__EINVAL;
    refresh_if_due(cl);
    int t = target_of(cl, (int)slot);
    if (t < 0) {
        cl_err(cl, "cluster: slot %u has no master in the map", slot);
        return DLOCK__ECONN;
    }
    dlock__url u = {.kind = DLOCK__URL_TCP,
                    .host = cl->rt.nodes[t].host,
                    .port = cl->rt.nodes[t].port,
                    .user = cl->url.user,
                    .password = cl->url.password};
    return dlock__url_copy(&u, out);
}

size_t dlock__cluster_master_slots(dlock__cluster *cl, unsigned *slots_out, size_t max)
{
    refresh_if_due(cl);
    return dlock__router_masters(&cl->rt, NULL, slots_out, max);
}

/* ---- pipelines -------------------------------------------------------------- */

typedef struct unit {
    size_t first, count; /* commands first .. first+count-1 (MULTI..EXEC is one unit) */
    int slot;            /* -1: keyless */
    int follows;         /* keyless: the keyed unit before it, or -1 */
    bool rerun_ok;       /* keyless and harmless to run again (WAIT, PING...) */
    bool done;
    hop h;
} unit;

typedef struct pipe {
    size_t n;
    const int *argcs;
    const char *const *const *argvs;
    const size_t *const *lens;
    dlock__reply **out;
    unit *u;
    size_t nu;
    bool sent;       /* something reached a node: a later failure is EUNKNOWN */
    int64_t wait_ms; /* the longest busy wait asked for in this round */
} pipe;

static bool rerunnable(const char *const *argv, const size_t *lens)
{
    static const char *ok[] = {"WAIT", "WAITAOF", "PING", "ECHO", "TIME", "ROLE", "INFO", NULL};
    size_t n = lens ? lens[0] : strlen(argv[0]);
    for (int i = 0; ok[i]; i++)
        if (n == strlen(ok[i]) && strncasecmp(argv[0], ok[i], n) == 0) return true;
    return false;
}

static int route_at(dlock__cluster *cl, const pipe *p, size_t i, dlock__route *rt)
{
    return dlock__route_cmd(p->argcs[i], p->argvs[i], p->lens ? p->lens[i] : NULL, rt, cl->errstr,
                            sizeof(cl->errstr));
}

/* MULTI at p->u[k].first: the unit runs to its EXEC; its keys share a slot. */
static int tx_unit(dlock__cluster *cl, pipe *p, unit *u)
{
    for (size_t j = u->first + 1; j < p->n; j++) {
        dlock__route rt;
        int rc = route_at(cl, p, j, &rt);
        if (rc) return rc;
        if (rt.kind == DLOCK__ROUTE_EXEC) {
            u->count = j - u->first + 1;
            return 0;
        }
        if (rt.kind == DLOCK__ROUTE_MULTI || rt.kind == DLOCK__ROUTE_ALL) break;
        if (rt.kind != DLOCK__ROUTE_SLOT) continue;
        if (u->slot >= 0 && u->slot != (int)rt.slot) {
            cl_err(cl,
                   "cluster: a MULTI..EXEC spans slots %d and %u; give its keys one {hash tag} "
                   "(nothing was sent)",
                   u->slot, rt.slot);
            return DLOCK__ECROSSSLOT;
        }
        u->slot = (int)rt.slot;
    }
    cl_err(cl, "cluster: MULTI without its EXEC in the pipeline (or SCRIPT/MULTI inside it)");
    return DLOCK__EINVAL;
}

static int build_units(dlock__cluster *cl, pipe *p)
{
    int last_keyed = -1;
    for (size_t i = 0; i < p->n; i += p->u[p->nu - 1].count) {
        dlock__route rt;
        int rc = route_at(cl, p, i, &rt);
        if (rc) return rc;
        unit *u = &p->u[p->nu++];
        *u = (unit){.first = i, .count = 1, .slot = -1, .follows = -1};
        if (rt.kind == DLOCK__ROUTE_MULTI && (rc = tx_unit(cl, p, u)) != 0) return rc;
        if (rt.kind == DLOCK__ROUTE_EXEC || rt.kind == DLOCK__ROUTE_ALL) {
            cl_err(cl,
                   "cluster: %s in a pipeline: send SCRIPT/FUNCTION/FLUSH* alone, EXEC after "
                   "its MULTI",
                   rt.kind == DLOCK__ROUTE_ALL ? "a command for every master" : "EXEC without MULTI");
            return DLOCK__EINVAL;
        }
        if (rt.kind == DLOCK__ROUTE_SLOT) u->slot = (int)rt.slot;
        if (u->slot >= 0) {
            last_keyed = (int)(p->nu - 1);
        } else {
            u->follows = last_keyed;
            u->rerun_ok = rerunnable(p->argvs[i], p->lens ? p->lens[i] : NULL);
        }
        u->h.target = u->follows >= 0 ? p->u[u->follows].h.target : target_of(cl, u->slot);
    }
    return 0;
}

/* The reply deciding whether unit u must be resent: its own reply, or for
 * MULTI..EXEC an inner redirect/busy reply when EXEC was aborted. */
static const dlock__reply *decisive(const unit *u, dlock__reply **rs)
{
    if (u->count == 1) return rs[0];
    if (dlock__reply_kind(rs[u->count - 1]) != DLOCK__R_ERROR) return NULL;
    dlock__redirect rd;
    int64_t w;
    for (size_t j = 1; j + 1 < u->count; j++)
        if (dlock__cluster_next(rs[j], 0, 0, &rd, &w) != DLOCK__NEXT_DONE) return rs[j];
    return NULL;
}

/* Files the replies rs of the units sent to node t (in order). */
static void distribute(dlock__cluster *cl, pipe *p, int t, const size_t *ids, size_t k, dlock__reply **rs)
{
    size_t pos = 0;
    for (size_t x = 0; x < k; x++) {
        unit *u = &p->u[ids[x]];
        if (u->h.asking) dlock__reply_free(rs[pos++]);
        dlock__reply **mine = rs + pos;
        pos += u->count;
        if (u->slot >= 0) cl->rt.last = t;
        const dlock__reply *d = u->slot >= 0 ? decisive(u, mine) : NULL;
        int64_t w = 0;
        if (d && follow(cl, &u->h, u->slot, d, &w) == RESEND) {
            for (size_t j = 0; j < u->count; j++)
                dlock__reply_free(mine[j]);
            if (w > p->wait_ms) p->wait_ms = w;
            continue;
        }
        for (size_t j = 0; j < u->count; j++)
            p->out[u->first + j] = mine[j];
        u->done = true;
    }
}

/* One pipeline to node t with its pending units ids[0..k). */
static int send_group(dlock__cluster *cl, pipe *p, int t, const size_t *ids, size_t k)
{
    size_t m = 0;
    for (size_t x = 0; x < k; x++)
        m += p->u[ids[x]].count + p->u[ids[x]].h.asking;
    int *ac = malloc(m * sizeof(*ac));
    const char *const **av = malloc(m * sizeof(*av));
    const size_t **lv = malloc(m * sizeof(*lv));
    dlock__reply **rs = calloc(m, sizeof(*rs));
    static const char *ask[1] = {"ASKING"};
    int rc = ac && av && lv && rs ? 0 : DLOCK__ENOMEM;
    for (size_t x = 0, j = 0; rc == 0 && x < k; x++) {
        const unit *u = &p->u[ids[x]];
        if (u->h.asking) ac[j] = 1, av[j] = ask, lv[j++] = NULL;
        for (size_t c = u->first; c < u->first + u->count; c++)
            ac[j] = p->argcs[c], av[j] = p->argvs[c], lv[j++] = p->lens ? p->lens[c] : NULL;
    }
    dlock__conn *c = NULL;
    if (rc == 0) rc = node_conn(cl, t, &c);
    if (rc == 0) rc = dlock__plain_pipeline(c, m, ac, av, lv, rs);
    if (rc && c) {
        cl_err(cl, "cluster node %s:%d: %s", cl->rt.nodes[t].host, cl->rt.nodes[t].port,
               dlock__plain_errstr(c));
        dlock__router_lost(&cl->rt, t);
    }
    if (rc == 0) distribute(cl, p, t, ids, k, rs);
    if (rc == 0 || rc == DLOCK__EUNKNOWN) p->sent = true;
    free(ac);
    free((void *)av);
    free((void *)lv);
    free(rs);
    return rc;
}

/* A keyless unit runs where the keyed unit before it runs; when that one is
 * resent, a WAIT/PING after it is run again with it (its old reply
 * dropped), so WAIT counts the replicas of the write that counted. */
static void sync_followers(pipe *p)
{
    for (size_t i = 0; i < p->nu; i++) {
        unit *u = &p->u[i];
        if (u->follows < 0) continue;
        const unit *l = &p->u[u->follows];
        if (!l->done && u->done && u->rerun_ok) {
            for (size_t j = 0; j < u->count; j++) {
                dlock__reply_free(p->out[u->first + j]);
                p->out[u->first + j] = NULL;
            }
            u->done = false;
        }
        if (!u->done) u->h.target = l->h.target;
    }
}

/* Opens every target's connection before anything is sent, so a node that
 * cannot be reached fails the whole pipeline with nothing sent (ECONN),
 * after one map refresh from the other nodes. */
static int preopen(dlock__cluster *cl, pipe *p)
{
    for (int pass = 0; pass < 2; pass++) {
        int failed = -1, rc = 0;
        for (size_t i = 0; i < p->nu && failed < 0; i++) {
            dlock__conn *c;
            int t = p->u[i].h.target;
            if (t < 0) {
                cl_err(cl, "cluster: slot %d has no master in the map (cluster down?)", p->u[i].slot);
                return DLOCK__ECONN;
            }
            if ((rc = node_conn(cl, t, &c)) != 0) failed = t;
        }
        if (failed < 0) return 0;
        if (rc != DLOCK__ECONN || pass == 1) return rc;
        cl->rt.suspect = failed;
        char keep[sizeof(cl->errstr)];
        memcpy(keep, cl->errstr, sizeof(keep));
        if (refresh(cl) != 0) return memcpy(cl->errstr, keep, sizeof(keep)), rc;
        for (size_t i = 0; i < p->nu; i++)
            p->u[i].h.target =
                p->u[i].follows >= 0 ? p->u[p->u[i].follows].h.target : target_of(cl, p->u[i].slot);
    }
    return 0;
}

/* One round: every pending unit, grouped by node. */
static int run_round(dlock__cluster *cl, pipe *p, size_t *ids, size_t *pending_out)
{
    bool grouped[MAX_NODES] = {false};
    size_t pending = 0;
    p->wait_ms = 0;
    for (size_t i = 0; i < p->nu; i++) {
        int t = p->u[i].h.target;
        if (p->u[i].done || grouped[t]) continue;
        grouped[t] = true;
        size_t k = 0;
        for (size_t j = i; j < p->nu; j++)
            if (!p->u[j].done && p->u[j].h.target == t) ids[k++] = j;
        pending += k;
        int rc = send_group(cl, p, t, ids, k);
        if (rc) return rc;
    }
    *pending_out = pending;
    return 0;
}

static void drop_out(pipe *p)
{
    for (size_t i = 0; i < p->n; i++) {
        dlock__reply_free(p->out[i]);
        p->out[i] = NULL;
    }
}

int dlock__cluster_pipeline(dlock__cluster *cl, size_t n, const int *argcs, const char *const *const *argvs,
                            const size_t *const *lens, dlock__reply **replies_out)
{
    for (size_t i = 0; i < n; i++)
        replies_out[i] = NULL;
    if (n == 0) return 0;
    pipe p = {.n = n, .argcs = argcs, .argvs = argvs, .lens = lens, .out = replies_out};
    p.u = calloc(n, sizeof(*p.u));
    size_t *ids = calloc(n, sizeof(*ids));
    refresh_if_due(cl);
    int rc = p.u && ids ? build_units(cl, &p) : DLOCK__ENOMEM;
    if (rc == 0) rc = preopen(cl, &p);
    /* Each unit is resent at most MAX_REDIRECTS + BUSY_RETRIES times; the
     * round cap is a second fence. */
    for (int round = 0; rc == 0 && round <= 2 * (DLOCK__CLUSTER_MAX_REDIRECTS + DLOCK__CLUSTER_BUSY_RETRIES);
         round++) {
        size_t pending = 0;
        rc = run_round(cl, &p, ids, &pending);
        if (rc || pending == 0) break;
        sync_followers(&p);
        if (p.wait_ms) dlock__sleep_ms(p.wait_ms);
        refresh_if_due(cl);
        bool left = false;
        for (size_t i = 0; i < p.nu; i++)
            left = left || !p.u[i].done;
        if (!left) break;
    }
    if (rc == DLOCK__ECONN && p.sent) rc = DLOCK__EUNKNOWN;
    for (size_t i = 0; rc == 0 && i < p.nu; i++)
        if (!p.u[i].done) rc = DLOCK__EUNKNOWN; /* unreachable: bounded above */
    if (rc) drop_out(&p);
    free(p.u);
    free(ids);
    return rc;
}
