/* async_sentinel.c: the asynchronous client's master, found through the
 * sentinels of a redis-sentinel:// URL (async_internal.h). A resolution
 * asks the sentinels in URL order, one connection at a time, each bounded
 * by connect_timeout_ms, SENTINEL get-master-addr-by-name; the first
 * answer is the master. The sentinel that answered is then watched: a
 * subscription to +switch-master names the new master after a failover.
 * Every outcome goes to the client's callback (on the loop thread): a
 * master found or switched (ok) or no sentinel answering (not ok).
 * Nothing here blocks; the sentinels get no AUTH (the URL's credentials
 * are the master's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_internal.h"
#include "util.h"

struct dlock__asent {
    dlock_async_loop loop;
    dlock__evloop ev;
    const dlock__url *url;
    const dlock_client_options *o;
    void (*changed)(void *priv, bool ok);
    void *priv;
    char host[256];
    int port;
    bool known, resolving;
    size_t next;          /* the sentinel to ask next */
    dlock__lconn *query;  /* the one being asked */
    dlock__lconn *watch;  /* subscribed to +switch-master */
    size_t watched;       /* the sentinel watched */
    void *timer;          /* the query's deadline */
};

static void ask_next(dlock__asent *s);

static void query_close(dlock__asent *s)
{
    dlock__lconn *q = s->query;
    s->query = NULL;
    dlock__atimer_stop(&s->loop, s->timer);
    dlock__lconn_close(q);
}

static void set_master(dlock__asent *s, const char *host, size_t len, long port)
{
    if (len >= sizeof(s->host) || port <= 0 || port > 65535) return;
    memcpy(s->host, host, len);
    s->host[len] = '\0';
    s->port = (int)port;
    s->known = true;
}

/* ---- watching for +switch-master -------------------------------------------------- */

static void on_switch(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)err;
    dlock__asent *s = priv;
    if (lc != s->watch || !reply || dlock__reply_kind(reply) != DLOCK__R_ARRAY || dlock__reply_count(reply) < 3)
        return;
    if (strcmp(dlock__reply_str(dlock__reply_at(reply, 0), NULL), "message") != 0) return;
    /* "<name> <old ip> <old port> <new ip> <new port>" */
    char name[256], oldh[256], newh[256];
    int oldp = 0, newp = 0;
    const char *msg = dlock__reply_str(dlock__reply_at(reply, 2), NULL);
    if (sscanf(msg, "%255s %255s %d %255s %d", name, oldh, &oldp, newh, &newp) != 5) return;
    if (strcmp(name, s->url->master_name) != 0) return;
    dlock__log_opts(s->o, DLOCK_LOG_WARN, "async sentinel: master %s moved from %s:%d to %s:%d", name, oldh,
                    oldp, newh, newp);
    set_master(s, newh, strlen(newh), newp);
    s->changed(s->priv, true);
}

static void on_watch_state(dlock__lconn *lc, bool up, const char *why, void *priv)
{
    dlock__asent *s = priv;
    if (up || lc != s->watch) return;
    dlock__log_opts(s->o, DLOCK_LOG_INFO, "async sentinel: watch connection lost: %s", why);
    s->watch = NULL;
    dlock__lconn_close(lc);
}

static void watch(dlock__asent *s, size_t idx)
{
    if (s->watch && s->watched == idx) return;
    dlock__lconn_close(s->watch);
    s->watch = NULL;
    const dlock__hostport *hp = &s->url->sentinels[idx];
    if (dlock__lconn_open(&s->ev, hp->host, hp->port, NULL, on_watch_state, s, &s->watch, NULL, 0) != 0) return;
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    dlock__lconn_sub(s->watch, on_switch, s, 2, argv);
    s->watched = idx;
}

/* ---- resolution ------------------------------------------------------------------------ */

static void on_addr(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)err;
    dlock__asent *s = priv;
    if (lc != s->query) return;
    size_t idx = s->next - 1;
    const dlock__reply *h = reply && dlock__reply_kind(reply) == DLOCK__R_ARRAY ? dlock__reply_at(reply, 0) : NULL;
    const dlock__reply *p = h ? dlock__reply_at(reply, 1) : NULL;
    if (!h || !p || dlock__reply_kind(h) != DLOCK__R_STRING || dlock__reply_kind(p) != DLOCK__R_STRING) {
        dlock__log_opts(s->o, DLOCK_LOG_WARN, "async sentinel %s:%d: no master %s", s->url->sentinels[idx].host,
                        s->url->sentinels[idx].port, s->url->master_name);
        query_close(s);
        ask_next(s);
        return;
    }
    size_t hlen;
    const char *host = dlock__reply_str(h, &hlen);
    set_master(s, host, hlen, strtol(dlock__reply_str(p, NULL), NULL, 10));
    query_close(s);
    s->resolving = false;
    watch(s, idx);
    s->changed(s->priv, s->known);
}

static void on_query_state(dlock__lconn *lc, bool up, const char *why, void *priv)
{
    dlock__asent *s = priv;
    if (up || lc != s->query) return;
    dlock__log_opts(s->o, DLOCK_LOG_INFO, "async sentinel: %s", why);
    query_close(s);
    ask_next(s);
}

/* The query's deadline, or the start of a resolution (from the loop, so
 * its outcome never reaches the client inside the call that asked). */
static void on_query_timer(void *arg)
{
    dlock__asent *s = arg;
    if (s->query) query_close(s);
    else if (!s->resolving) return;
    ask_next(s);
}

/* Asks the next sentinel; after the last, the resolution failed. */
static void ask_next(dlock__asent *s)
{
    while (s->next < s->url->n_sentinels) {
        const dlock__hostport *hp = &s->url->sentinels[s->next++];
        if (dlock__lconn_open(&s->ev, hp->host, hp->port, NULL, on_query_state, s, &s->query, NULL, 0) != 0)
            continue;
        const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", s->url->master_name};
        if (dlock__lconn_cmd(s->query, on_addr, s, 3, argv, NULL) != 0) {
            query_close(s);
            continue;
        }
        dlock__atimer_start(&s->loop, s->timer, s->o->connect_timeout_ms);
        return;
    }
    s->resolving = false;
    s->changed(s->priv, false);
}

void dlock__asent_resolve(dlock__asent *s)
{
    if (s->resolving) return;
    s->known = false;
    s->resolving = true;
    s->next = 0;
    dlock__atimer_start(&s->loop, s->timer, 0);
}

bool dlock__asent_master(const dlock__asent *s, const char **host_out, int *port_out)
{
    if (!s->known) return false;
    *host_out = s->host;
    *port_out = s->port;
    return true;
}

bool dlock__asent_resolving(const dlock__asent *s)
{
    return s->resolving;
}

int dlock__asent_new(const dlock_async_loop *loop, const dlock__url *url, const dlock_client_options *o,
                     void (*changed)(void *priv, bool ok), void *priv, dlock__asent **out)
{
    *out = NULL;
    dlock__asent *s = calloc(1, sizeof(*s));
    if (!s) return DLOCK_ENOMEM;
    *s = (dlock__asent){.loop = *loop, .url = url, .o = o, .changed = changed, .priv = priv};
    dlock__aloop_evloop(loop, &s->ev);
    s->timer = dlock__atimer_new(loop, on_query_timer, s);
    if (!s->timer) {
        free(s);
        return DLOCK_ENOMEM;
    }
    *out = s;
    return 0;
}

void dlock__asent_free(dlock__asent *s)
{
    if (!s) return;
    dlock__lconn_close(s->query);
    dlock__lconn_close(s->watch);
    dlock__atimer_free(&s->loop, s->timer);
    free(s);
}
