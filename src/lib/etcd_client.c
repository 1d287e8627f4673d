/* etcd_client.c: the client side of the etcd backend: attaching a gateway
 * client to a dlock_client made from an etcd URL, the key layout of
 * etcd.h, lease helpers, and the admin calls (status, force unlock, fence
 * guard), attached through the etcd backend table (backend.c). Only etcd
 * clients reach this file, so their be_state is always a dlock__etcd.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "client_priv.h"
#include "etcd.h"
#include "util.h"

struct dlock__etcd {
    dlock__gw *gw;
    char *prefix; /* the URL's, e.g. "/dlock" */
};

static dlock__etcd *state_of(const dlock_client *c)
{
    return c->be_state;
}

static void gw_log(void *ud, int level, const char *msg)
{
    dlock__log(ud, (dlock_log_level)level, "%s", msg);
}

int dlock__etcd_attach(dlock_client *c)
{
    char err[256] = "";
    dlock__etcd_url u;
    int rc = dlock__etcd_url_parse(c->url_copy, &u, err, sizeof(err));
    if (rc == DLOCK_EURL) dlock__log(c, DLOCK_LOG_ERROR, "url: %s", err);
    if (rc) return rc;
    dlock__etcd *e = calloc(1, sizeof(*e));
    if (!e || !(e->prefix = strdup(u.prefix))) {
        free(e);
        dlock__etcd_url_free(&u);
        return DLOCK_ENOMEM;
    }
    dlock__gw_opts o = {.connect_timeout_ms = c->opts.connect_timeout_ms,
                        .command_timeout_ms = c->opts.command_timeout_ms,
                        .retry_attempts = c->opts.retry_attempts,
                        .retry_delay_ms = c->opts.retry_delay_ms,
                        .pool_size = c->opts.pool_size,
                        .log_fn = gw_log,
                        .log_ud = c};
    rc = dlock__gw_open(&u, &o, &e->gw, err, sizeof(err));
    dlock__etcd_url_free(&u);
    if (rc) {
        dlock__log(c, DLOCK_LOG_ERROR, "etcd: %s", err);
        free(e->prefix);
        free(e);
        return rc;
    }
    c->be_state = e;
    return 0;
}

void dlock__etcd_detach(dlock_client *c)
{
    dlock__etcd *e = c ? c->be_state : NULL;
    if (!e) return;
    dlock__gw_close(e->gw);
    free(e->prefix);
    free(e);
    c->be_state = NULL;
}

dlock__gw *dlock__etcd_gw(const dlock_client *c)
{
    /* be_state is a dlock__etcd only when this file's attach made it */
    bool mine = c && c->be && c->be->attach == dlock__etcd_attach && c->be_state;
    return mine ? state_of(c)->gw : NULL;
}

/* ---- keys ------------------------------------------------------------------- */

/* Appends s with '%' and '/' percent-encoded. */
static void put_escaped(dlock__buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '%') dlock__buf_append(b, "%25", 3);
        else if (*s == '/') dlock__buf_append(b, "%2F", 3);
        else dlock__buf_append(b, s, 1);
    }
}

static char *make_key(const dlock_client *c, const char *kind, const char *name, bool dir, int *rc_out)
{
    *rc_out = dlock__check_name(name);
    if (*rc_out) return NULL;
    dlock__buf b = {0};
    dlock__buf_printf(&b, "%s/%s/", state_of(c)->prefix, kind);
    put_escaped(&b, c->prefix_copy);
    put_escaped(&b, name);
    if (dir) DLOCK__BUF_LIT(&b, "/");
    if (b.oom) {
        dlock__buf_free(&b);
        *rc_out = DLOCK_ENOMEM;
    }
    return b.data;
}

char *dlock__etcd_lock_dir(const dlock_client *c, const char *name, int *rc_out)
{
    return make_key(c, "lock", name, true, rc_out);
}

void dlock__etcd_put_dir_range(dlock__buf *b, const char *dir)
{
    size_t n = strlen(dir);
    char end[DLOCK__ETCD_KEY_MAX];
    if (n == 0 || n >= sizeof(end)) {
        b->oom = true; /* cannot happen: names are bounded */
        return;
    }
    memcpy(end, dir, n);
    end[n - 1] = (char)(end[n - 1] + 1); /* "x/" -> "x0": just past every key under x/ */
    dlock__gw_put_b64(b, "key", dir, n);
    dlock__buf_append(b, ",", 1);
    dlock__gw_put_b64(b, "range_end", end, n);
}

/* ---- holder and leases -------------------------------------------------------- */

int dlock__etcd_holder_get(dlock__gw *g, const char *dir, dlock__etcd_holder *out)
{
    memset(out, 0, sizeof(*out));
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{");
    dlock__etcd_put_dir_range(&b, dir);
    DLOCK__BUF_LIT(&b, ",\"sort_order\":\"ASCEND\",\"sort_target\":\"CREATE\",\"limit\":\"1\"}");
    dlock__gw_reply r;
    int rc = dlock__gw_call_buf(g, "/v3/kv/range", &b, DLOCK__GW_RETRY, &r);
    if (rc == 0) {
        const dlock__json_val *kvs = dlock__gw_get(&r.doc, r.root, "kvs");
        const dlock__json_val *kv = dlock__gw_at(&r.doc, r.root, "kvs", 0);
        if (kvs && kvs->type != DLOCK__JSON_ARRAY) rc = DLOCK_ESERVER;
        out->count = dlock__gw_int(&r.doc, r.root, "count");
        out->found = kv != NULL;
        if (kv) {
            rc = dlock__gw_b64(&r.doc, kv, "key", out->key, sizeof(out->key), NULL);
            out->lease = dlock__gw_int(&r.doc, kv, "lease");
            out->create_rev = dlock__gw_int(&r.doc, kv, "create_revision");
            char val[64 + DLOCK_LABEL_MAX + 1];
            size_t vlen = 0;
            if (rc == 0 && dlock__gw_b64(&r.doc, kv, "value", val, sizeof(val), &vlen) == 0) {
                const char *sp = memchr(val, ' ', vlen);
                if (sp) snprintf(out->label, sizeof(out->label), "%.*s", (int)(vlen - (size_t)(sp + 1 - val)), sp + 1);
            }
        }
    }
    dlock__gw_reply_free(&r);
    return rc;
}

char *dlock__etcd_key_value(const dlock_client *c, const char *label)
{
    dlock__buf b = {0};
    dlock__buf_printf(&b, "%s", dlock_client_id(c));
    if (label) dlock__buf_printf(&b, " %s", label);
    if (!b.oom) return b.data;
    dlock__buf_free(&b);
    return NULL;
}

int dlock__etcd_lease_ttl(dlock__gw *g, int64_t lease, int64_t *ttl_ms_out)
{
    *ttl_ms_out = -2;
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", lease);
    dlock__gw_reply r;
    int rc = dlock__gw_call(g, "/v3/lease/timetolive", body, DLOCK__GW_RETRY, &r);
    if (rc == 0) {
        int64_t ttl = dlock__gw_int(&r.doc, r.root, "TTL");
        *ttl_ms_out = ttl < 0 ? -2 : ttl * 1000; /* -1: the lease is gone */
    }
    dlock__gw_reply_free(&r);
    return rc;
}

int dlock__etcd_revoke(dlock__gw *g, int64_t lease)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", lease);
    dlock__gw_reply r;
    int rc = dlock__gw_call(g, "/v3/lease/revoke", body, 0, &r);
    if (rc == DLOCK_ESERVER && r.code == DLOCK__GRPC_NOT_FOUND) rc = DLOCK_ELOST;
    dlock__gw_reply_free(&r);
    return rc;
}

/* ---- admin ---------------------------------------------------------------------- */

int dlock__etcd_status_get(dlock_client *c, const char *name, dlock_lock_status *st, dlock__holder_extra *x)
{
    if (x) memset(x, 0, sizeof(*x));
    int rc = 0;
    char *dir = dlock__etcd_lock_dir(c, name, &rc);
    if (!dir) return rc;
    dlock__etcd_holder h;
    rc = dlock__etcd_holder_get(state_of(c)->gw, dir, &h);
    free(dir);
    if (rc || !h.found) return rc;
    const char *slash = strrchr(h.key, '/');
    st->locked = true;
    st->kind = DLOCK_LOCK_SIMPLE;
    snprintf(st->holder, sizeof(st->holder), "%.*s", DLOCK_OWNER_MAX, slash ? slash + 1 : h.key);
    st->hold_count = 1;
    st->last_fence = (uint64_t)h.create_rev; /* the holder's token */
    if (x) {
        snprintf(x->label, sizeof(x->label), "%s", h.label);
        x->fence = (uint64_t)h.create_rev;
    }
    st->ttl_ms = -1;
    if (h.lease) rc = dlock__etcd_lease_ttl(state_of(c)->gw, h.lease, &st->ttl_ms);
    return rc;
}

/* Deletes a lease-less key (someone else's writing) by name. */
static int delete_key(dlock__gw *g, const char *key)
{
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{");
    dlock__gw_put_b64(&b, "key", key, strlen(key));
    DLOCK__BUF_LIT(&b, "}");
    dlock__gw_reply r;
    int rc = dlock__gw_call_buf(g, "/v3/kv/deleterange", &b, DLOCK__GW_RETRY, &r);
    dlock__gw_reply_free(&r);
    return rc;
}

int dlock__etcd_force_unlock(dlock_client *c, const char *name, dlock_lock_kind kind, bool *removed_out)
{
    if (kind != DLOCK_LOCK_SIMPLE) return DLOCK_ENOTSUP;
    int rc = 0;
    char *dir = dlock__etcd_lock_dir(c, name, &rc);
    if (!dir) return rc;
    dlock__etcd_holder h;
    rc = dlock__etcd_holder_get(state_of(c)->gw, dir, &h);
    free(dir);
    /* Revoking the holder's lease deletes its key, the next contender's
     * watch fires, and the holder's next keepalive finds the lease gone
     * (so it is told: lost). */
    if (rc == 0 && h.found) rc = h.lease ? dlock__etcd_revoke(state_of(c)->gw, h.lease) : delete_key(state_of(c)->gw, h.key);
    if (rc == DLOCK_ELOST) rc = 0; /* it expired in between */
    bool removed = rc == 0 && h.found;
    if (removed_out) *removed_out = removed;
    dlock__log(c, DLOCK_LOG_WARN, "audit: force_unlock %s (etcd) by client %s: %s", name, dlock_client_id(c),
               rc ? dlock_strerror(rc) : removed ? "holder's lease revoked" : "no such lock");
    return rc;
}

/* Guard key P/fence/<key_prefix + resource> holds the highest accepted
 * token as 20 zero-padded digits, so etcd's bytewise compare is numeric. */
int dlock__etcd_fence_guard(dlock_client *c, const char *resource, uint64_t token, uint64_t *highest_out)
{
    int rc = 0;
    char *key = make_key(c, "fence", resource, false, &rc);
    if (!key) return rc;
    char tok[24];
    snprintf(tok, sizeof(tok), "%020" PRIu64, token);
    size_t kl = strlen(key);
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{\"compare\":[{\"target\":\"VALUE\",\"result\":\"GREATER\",");
    dlock__gw_put_b64(&b, "key", key, kl);
    DLOCK__BUF_LIT(&b, ",");
    dlock__gw_put_b64(&b, "value", tok, 20);
    DLOCK__BUF_LIT(&b, "}],\"success\":[{\"request_range\":{");
    dlock__gw_put_b64(&b, "key", key, kl);
    DLOCK__BUF_LIT(&b, "}}],\"failure\":[{\"request_put\":{");
    dlock__gw_put_b64(&b, "key", key, kl);
    DLOCK__BUF_LIT(&b, ",");
    dlock__gw_put_b64(&b, "value", tok, 20);
    DLOCK__BUF_LIT(&b, "}}]}");
    free(key);
    dlock__gw_reply r;
    rc = dlock__gw_call_buf(state_of(c)->gw, "/v3/kv/txn", &b, DLOCK__GW_RETRY, &r);
    uint64_t highest = token;
    bool stale = rc == 0 && dlock__gw_bool(&r.doc, r.root, "succeeded");
    const dlock__json_val *r0 = rc == 0 ? dlock__gw_at(&r.doc, r.root, "responses", 0) : NULL;
    if (rc == 0 && !dlock__gw_get(&r.doc, r0, stale ? "response_range" : "response_put"))
        rc = DLOCK_ESERVER; /* not a txn answer: never report "accepted" on garbage */
    if (rc == 0 && stale) {
        /* a greater token is recorded */
        const dlock__json_val *rr = dlock__gw_get(&r.doc, r0, "response_range");
        char v[64] = "";
        rc = dlock__gw_b64(&r.doc, dlock__gw_at(&r.doc, rr, "kvs", 0), "value", v, sizeof(v), NULL);
        highest = strtoull(v, NULL, 10);
        if (rc == 0) rc = DLOCK_ESTALE;
    }
    dlock__gw_reply_free(&r);
    if (highest_out) *highest_out = rc == 0 || rc == DLOCK_ESTALE ? highest : 0;
    return rc;
}
