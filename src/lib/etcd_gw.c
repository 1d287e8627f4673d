/* etcd_gw.c: the v3 JSON gateway client of etcd_gw.h.
 *
 * Design note. Each call takes a curl easy handle from a small pool (so
 * HTTP keep-alive connections are reused), POSTs JSON to the current
 * endpoint and parses the answer with the strict JSON parser. Endpoint
 * failover: a call that could not connect (nothing sent) moves on to the
 * next listed endpoint; after a full round of failures it backs off and
 * tries again, retry_attempts more rounds. A call whose answer was lost is
 * resent only when marked DLOCK__GW_RETRY, else it is EUNKNOWN. With a user
 * in the URL the client authenticates (/v3/auth/authenticate) and sends the
 * token in the Authorization header; an expired token is renewed once per
 * call. Proxies from the environment are ignored (the endpoints are etcd).
 */
#include "etcd_gw.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base64.h"
#include "common_err.h"
#include "dlock/dlock.h"
#include "util.h"

#define MAX_ANSWER (8u << 20) /* bytes; a longer answer is a protocol error */

struct dlock__gw {
    dlock__etcd_url u;
    dlock__gw_opts o;
    char **base; /* "http://host:port" per endpoint */
    pthread_mutex_t mu; /* guards idle, n_idle, current, token */
    CURL **idle;
    int n_idle;
    size_t current;
    char *token;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void init_curl(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void logf_(const dlock__gw *g, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void logf_(const dlock__gw *g, int level, const char *fmt, ...)
{
    if (!g->o.log_fn) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    g->o.log_fn(g->o.log_ud, level, msg);
}

/* ---- curl handles --------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    dlock__buf *b = ud;
    size_t len = size * n;
    if (b->len + len > MAX_ANSWER) return 0; /* aborts the transfer */
    dlock__buf_append(b, p, len);
    return b->oom ? 0 : len;
}

static CURL *new_handle(const dlock__gw *g)
{
    CURL *h = curl_easy_init();
    if (!h) return NULL;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)g->o.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    if (g->u.tls) {
        if (g->u.cacert) curl_easy_setopt(h, CURLOPT_CAINFO, g->u.cacert);
        if (g->u.cert) curl_easy_setopt(h, CURLOPT_SSLCERT, g->u.cert);
        if (g->u.key) curl_easy_setopt(h, CURLOPT_SSLKEY, g->u.key);
    }
    return h;
}

static CURL *handle_get(dlock__gw *g)
{
    pthread_mutex_lock(&g->mu);
    CURL *h = g->n_idle > 0 ? g->idle[--g->n_idle] : NULL;
    pthread_mutex_unlock(&g->mu);
    return h ? h : new_handle(g);
}

static void handle_put(dlock__gw *g, CURL *h)
{
    pthread_mutex_lock(&g->mu);
    if (g->n_idle < g->o.pool_size) {
        g->idle[g->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&g->mu);
    if (h) curl_easy_cleanup(h);
}

/* Content-Type and, when authenticated, the token. */
static struct curl_slist *headers(dlock__gw *g)
{
    struct curl_slist *hs = curl_slist_append(NULL, "Content-Type: application/json");
    if (hs) hs = curl_slist_append(hs, "Expect:");
    pthread_mutex_lock(&g->mu);
    if (hs && g->token) {
        size_t n = strlen(g->token) + 32;
        char *line = malloc(n);
        struct curl_slist *more = NULL;
        if (line) {
            snprintf(line, n, "Authorization: %s", g->token);
            more = curl_slist_append(hs, line);
            free(line);
        }
        if (!more) {
            curl_slist_free_all(hs);
            hs = NULL;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return hs;
}

/* ---- one request ---------------------------------------------------------- */

/* Maps a failed transfer: nothing sent -> ECONN, else EUNKNOWN. */
static int transport_rc(CURL *h, CURLcode cc)
{
    curl_off_t sent = 0;
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent);
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
        return DLOCK_ECONN;
    case CURLE_OUT_OF_MEMORY: return DLOCK_ENOMEM;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_WRITE_ERROR: /* on_body refused an answer over MAX_ANSWER */
        return DLOCK_ESERVER; /* something answered, but not a gateway's answer */
    default: return sent > 0 ? DLOCK_EUNKNOWN : DLOCK_ECONN;
    }
}

/* Turns an HTTP answer into r. A gateway error is {"error", "code",
 * "message"} (3.4 and 3.5) or, in streams, {"error": {"grpc_code", ...}}. */
static int parse_answer(dlock__gw_reply *r, long status, const dlock__buf *body)
{
    char perr[128] = "";
    const char *text = body->data ? body->data : "";
    int rc = dlock__json_parse(text, body->len, &r->doc, perr, sizeof(perr));
    if (rc == DLOCK__ENOMEM) return DLOCK_ENOMEM;
    const dlock__json_val *root = rc == 0 ? &r->doc.nodes[0] : NULL;
    if (!root || root->type != DLOCK__JSON_OBJECT) {
        snprintf(r->msg, sizeof(r->msg), "the gateway answered HTTP %ld with no JSON object (%s): %.60s",
                 status, rc ? perr : "not an object", text);
        return DLOCK_ESERVER;
    }
    const dlock__json_val *res = dlock__json_get(&r->doc, root, "result");
    const dlock__json_val *err = dlock__json_get(&r->doc, root, "error");
    if (res && res->type == DLOCK__JSON_OBJECT) root = res;
    if (err && err->type == DLOCK__JSON_OBJECT) root = err; /* stream error */
    const dlock__json_val *msg = dlock__json_get(&r->doc, root, "message");
    if (status == 200 && !err) {
        const dlock__json_val *h = dlock__json_get(&r->doc, root, "header");
        if (!h || h->type != DLOCK__JSON_OBJECT) {
            snprintf(r->msg, sizeof(r->msg), "the gateway answered an object without a header: %.60s", text);
            return DLOCK_ESERVER;
        }
        r->root = root;
        return 0;
    }
    r->code = (int)dlock__gw_int(&r->doc, root, root == err ? "grpc_code" : "code");
    snprintf(r->msg, sizeof(r->msg), "%s",
             msg && msg->type == DLOCK__JSON_STRING ? msg->s : "etcd answered an error without a message");
    if (r->code == 0) r->code = -1;
    return DLOCK_ESERVER;
}

/* Per-try timeout: command_timeout_ms, cut to what is left before
 * deadline_ms (a monotonic time; INT64_MAX: none). */
static long try_timeout(const dlock__gw *g, int64_t deadline_ms)
{
    int64_t t = g->o.command_timeout_ms;
    if (deadline_ms != INT64_MAX && deadline_ms - dlock__now_ms() < t) t = deadline_ms - dlock__now_ms();
    return t < 1 ? 1L : (long)t;
}

static int post(dlock__gw *g, size_t ep, const char *path, const char *body, int64_t deadline_ms,
                dlock__gw_reply *r)
{
    CURL *h = handle_get(g);
    struct curl_slist *hs = h ? headers(g) : NULL;
    if (!hs) {
        if (h) handle_put(g, h);
        return DLOCK_ENOMEM;
    }
    char url[600];
    snprintf(url, sizeof(url), "%s%s", g->base[ep], path);
    dlock__buf buf = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, try_timeout(g, deadline_ms));
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &buf);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    int rc;
    if (cc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        rc = parse_answer(r, status, &buf);
    } else {
        rc = buf.oom ? DLOCK_ENOMEM : transport_rc(h, cc);
        snprintf(r->msg, sizeof(r->msg), "%s: %s", g->base[ep], curl_easy_strerror(cc));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hs);
    dlock__buf_free(&buf);
    if (cc == CURLE_OK || rc == DLOCK_ENOMEM) handle_put(g, h);
    else curl_easy_cleanup(h); /* a broken handle may hold a dead connection */
    return rc;
}

/* ---- calls with failover -------------------------------------------------- */

static bool auth_error(const dlock__gw_reply *r)
{
    return r->code == DLOCK__GRPC_PERMISSION_DENIED ||
           (r->code == DLOCK__GRPC_INVALID_ARGUMENT &&
            (strstr(r->msg, "authentication failed") || strstr(r->msg, "user name")));
}

static int authenticate(dlock__gw *g, size_t ep, dlock__gw_reply *r);

/* Sends to endpoint ep; classifies etcd's own errors. *next_out: try
 * another endpoint. */
static int try_endpoint(dlock__gw *g, size_t ep, const char *path, const char *body, int flags,
                        int64_t deadline_ms, dlock__gw_reply *r, bool *next_out)
{
    dlock__gw_reply_free(r);
    int rc = post(g, ep, path, body, deadline_ms, r);
    *next_out = rc == DLOCK_ECONN || (rc == DLOCK_EUNKNOWN && (flags & DLOCK__GW_RETRY));
    if (rc == DLOCK_ESERVER && r->code == DLOCK__GRPC_UNAUTHENTICATED && g->u.user) {
        dlock__gw_reply ar = {0};
        rc = authenticate(g, ep, &ar); /* the token expired: once more with a new one */
        dlock__gw_reply_free(&ar);
        if (rc == 0) {
            dlock__gw_reply_free(r);
            rc = post(g, ep, path, body, deadline_ms, r);
        }
    }
    if (rc == DLOCK_ESERVER && auth_error(r)) return DLOCK_EAUTH;
    if (rc == DLOCK_ESERVER && r->code == DLOCK__GRPC_UNAVAILABLE) {
        /* No leader, or the member is cut off: another member may do. */
        *next_out = true;
        if (!(flags & DLOCK__GW_RETRY)) rc = DLOCK_EUNKNOWN;
    }
    return rc;
}

int dlock__gw_call(dlock__gw *g, const char *path, const char *body, int flags, dlock__gw_reply *r)
{
    return dlock__gw_call_until(g, path, body, flags, INT64_MAX, r);
}

int dlock__gw_call_until(dlock__gw *g, const char *path, const char *body, int flags, int64_t deadline_ms,
                         dlock__gw_reply *r)
{
    memset(r, 0, sizeof(*r));
    size_t n = g->u.n_endpoints;
    int rc = DLOCK_ECONN;
    bool lost_answer = false; /* an attempt was sent and its answer lost */
    for (int round = 0; round <= g->o.retry_attempts && dlock__now_ms() < deadline_ms; round++) {
        if (round > 0) {
            int64_t pause = dlock__backoff_ms(g->o.retry_delay_ms, round - 1, 1000);
            int64_t left = deadline_ms - dlock__now_ms();
            dlock__sleep_ms(pause < left ? pause : left);
        }
        pthread_mutex_lock(&g->mu);
        size_t first = g->current;
        pthread_mutex_unlock(&g->mu);
        for (size_t k = 0; k < n && dlock__now_ms() < deadline_ms; k++) {
            size_t ep = (first + k) % n;
            bool next = false;
            rc = try_endpoint(g, ep, path, body, flags, deadline_ms, r, &next);
            lost_answer = lost_answer || rc == DLOCK_EUNKNOWN;
            if (!next) return rc;
            if (rc == DLOCK_EUNKNOWN && !(flags & DLOCK__GW_RETRY)) return rc;
            pthread_mutex_lock(&g->mu);
            if (g->current == ep) g->current = (ep + 1) % n;
            pthread_mutex_unlock(&g->mu);
            logf_(g, DLOCK_LOG_WARN, "etcd %s: %s; trying the next endpoint", path, r->msg);
        }
    }
    /* A resent call whose first try may have been applied is not ECONN. */
    return rc == DLOCK_ECONN && lost_answer ? DLOCK_EUNKNOWN : rc;
}

int dlock__gw_call_buf(dlock__gw *g, const char *path, dlock__buf *body, int flags, dlock__gw_reply *r)
{
    memset(r, 0, sizeof(*r));
    int rc = body->oom || !body->data ? DLOCK_ENOMEM : dlock__gw_call(g, path, body->data, flags, r);
    dlock__buf_free(body);
    return rc;
}

void dlock__gw_reply_free(dlock__gw_reply *r)
{
    if (!r) return;
    dlock__json_free(&r->doc);
    memset(&r->doc, 0, sizeof(r->doc));
    r->root = NULL;
    r->code = 0;
    r->msg[0] = '\0';
}

/* ---- authentication and opening ------------------------------------------- */

static int authenticate(dlock__gw *g, size_t ep, dlock__gw_reply *r)
{
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{\"name\":");
    dlock__json_put_str(&b, g->u.user, strlen(g->u.user));
    DLOCK__BUF_LIT(&b, ",\"password\":");
    const char *pw = g->u.password ? g->u.password : "";
    dlock__json_put_str(&b, pw, strlen(pw));
    DLOCK__BUF_LIT(&b, "}");
    int rc = b.oom ? DLOCK_ENOMEM : post(g, ep, "/v3/auth/authenticate", b.data, INT64_MAX, r);
    if (b.data) memset(b.data, 0, b.len);
    dlock__buf_free(&b);
    if (rc == DLOCK_ESERVER && strstr(r->msg, "authentication is not enabled")) return 0; /* no token needed */
    if (rc == DLOCK_ESERVER && (auth_error(r) || r->code == DLOCK__GRPC_INVALID_ARGUMENT)) return DLOCK_EAUTH;
    if (rc) return rc;
    const dlock__json_val *t = dlock__json_get(&r->doc, r->root, "token");
    if (!t || t->type != DLOCK__JSON_STRING || t->len == 0) return DLOCK_ESERVER;
    char *tok = strdup(t->s);
    if (!tok) return DLOCK_ENOMEM;
    pthread_mutex_lock(&g->mu);
    free(g->token);
    g->token = tok;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

static int copy_url(dlock__gw *g, const dlock__etcd_url *u)
{
    g->u.tls = u->tls;
    g->u.n_endpoints = u->n_endpoints;
    g->u.endpoints = calloc(u->n_endpoints, sizeof(*g->u.endpoints));
    g->base = calloc(u->n_endpoints, sizeof(*g->base));
    if (!g->u.endpoints || !g->base) return DLOCK_ENOMEM;
    for (size_t i = 0; i < u->n_endpoints; i++) {
        const dlock__hostport *hp = &u->endpoints[i];
        g->u.endpoints[i].host = strdup(hp->host);
        g->u.endpoints[i].port = hp->port;
        size_t n = strlen(hp->host) + 32;
        g->base[i] = malloc(n);
        if (!g->u.endpoints[i].host || !g->base[i]) return DLOCK_ENOMEM;
        bool v6 = strchr(hp->host, ':') != NULL;
        snprintf(g->base[i], n, "%s://%s%s%s:%d", u->tls ? "https" : "http", v6 ? "[" : "", hp->host,
                 v6 ? "]" : "", hp->port);
    }
    const char *const src[6] = {u->user, u->password, u->cacert, u->cert, u->key, u->prefix ? u->prefix : "/"};
    char **dst[6] = {&g->u.user, &g->u.password, &g->u.cacert, &g->u.cert, &g->u.key, &g->u.prefix};
    for (int i = 0; i < 6; i++)
        if (src[i] && !(*dst[i] = strdup(src[i]))) return DLOCK_ENOMEM;
    return 0;
}

/* First contact: authenticate (if a user is given) on the first endpoint
 * that answers, then one cheap read proves the credentials work. */
static int first_contact(dlock__gw *g, char *err, size_t errlen)
{
    dlock__gw_reply r = {0};
    int rc = DLOCK_ECONN;
    for (size_t ep = 0; g->u.user && ep < g->u.n_endpoints; ep++) {
        dlock__gw_reply_free(&r);
        rc = authenticate(g, ep, &r);
        if (rc != DLOCK_ECONN) break;
    }
    if (!g->u.user || rc == 0) {
        dlock__gw_reply_free(&r);
        dlock__buf b = {0};
        DLOCK__BUF_LIT(&b, "{");
        dlock__gw_put_b64(&b, "key", g->u.prefix, strlen(g->u.prefix));
        DLOCK__BUF_LIT(&b, ",\"count_only\":true}");
        rc = dlock__gw_call_buf(g, "/v3/kv/range", &b, DLOCK__GW_RETRY, &r);
    }
    if (rc == DLOCK_EUNKNOWN) rc = DLOCK_ECONN; /* a read that got no answer: nothing reachable */
    if (rc) snprintf(err, errlen, "%s", r.msg[0] ? r.msg : dlock_strerror(rc));
    dlock__gw_reply_free(&r);
    return rc;
}

int dlock__gw_open(const dlock__etcd_url *u, const dlock__gw_opts *o, dlock__gw **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    if (!u || !o || u->n_endpoints == 0 || o->pool_size < 1) return DLOCK_EINVAL;
    pthread_once(&curl_once, init_curl);
    if (curl_init_rc != CURLE_OK) return DLOCK_ENOMEM;
    dlock__gw *g = calloc(1, sizeof(*g));
    if (!g) return DLOCK_ENOMEM;
    g->o = *o;
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g);
        return DLOCK_ENOMEM;
    }
    g->idle = calloc((size_t)o->pool_size, sizeof(*g->idle));
    int rc = g->idle ? copy_url(g, u) : DLOCK_ENOMEM;
    if (rc == 0) rc = first_contact(g, err, errlen);
    if (rc) {
        dlock__gw_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

void dlock__gw_close(dlock__gw *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_idle; i++) curl_easy_cleanup(g->idle[i]);
    free(g->idle);
    for (size_t i = 0; g->base && i < g->u.n_endpoints; i++) free(g->base[i]);
    free(g->base);
    free(g->token);
    dlock__etcd_url_free(&g->u);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* ---- reading answers -------------------------------------------------------- */

const dlock__json_val *dlock__gw_get(const dlock__json_doc *d, const dlock__json_val *obj, const char *name)
{
    if (!obj) return NULL;
    const dlock__json_val *v = dlock__json_get(d, obj, name);
    if (v || !strchr(name, '_')) return v;
    char camel[64];
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 1 < sizeof(camel); i++) {
        if (name[i] == '_' && name[i + 1]) camel[j++] = (char)(name[++i] - 'a' + 'A');
        else camel[j++] = name[i];
    }
    camel[j] = '\0';
    return dlock__json_get(d, obj, camel);
}

int64_t dlock__gw_int(const dlock__json_doc *d, const dlock__json_val *obj, const char *name)
{
    const dlock__json_val *v = dlock__gw_get(d, obj, name);
    if (!v) return 0;
    if (v->type == DLOCK__JSON_NUMBER && v->is_int) return v->i;
    if (v->type != DLOCK__JSON_STRING || v->len == 0 || v->len > 20) return 0;
    char *end = NULL;
    long long x = strtoll(v->s, &end, 10);
    return end && *end == '\0' ? (int64_t)x : 0;
}

bool dlock__gw_bool(const dlock__json_doc *d, const dlock__json_val *obj, const char *name)
{
    const dlock__json_val *v = dlock__gw_get(d, obj, name);
    return v && v->type == DLOCK__JSON_BOOL && v->b;
}

int dlock__gw_b64(const dlock__json_doc *d, const dlock__json_val *obj, const char *name, char *out,
                  size_t outlen, size_t *len_out)
{
    size_t len = 0;
    if (outlen) out[0] = '\0';
    const dlock__json_val *v = dlock__gw_get(d, obj, name);
    if (v && (v->type != DLOCK__JSON_STRING || v->len / 4 * 3 + 1 > outlen ||
              dlock__b64_decode(v->s, v->len, (unsigned char *)out, &len) != 0))
        return DLOCK_ESERVER;
    if (len_out) *len_out = len;
    return 0;
}

const dlock__json_val *dlock__gw_at(const dlock__json_doc *d, const dlock__json_val *obj, const char *name,
                                    int i)
{
    const dlock__json_val *a = dlock__gw_get(d, obj, name);
    if (!a || a->type != DLOCK__JSON_ARRAY) return NULL;
    int c = a->first;
    while (c >= 0 && i-- > 0) c = d->nodes[c].next;
    return c >= 0 ? &d->nodes[c] : NULL;
}

void dlock__gw_put_b64(dlock__buf *b, const char *name, const char *s, size_t n)
{
    size_t cap = dlock__b64_encoded_size(n);
    char small[512];
    char *enc = cap <= sizeof(small) ? small : malloc(cap);
    if (!enc) {
        b->oom = true;
        return;
    }
    dlock__b64_encode(s, n, enc);
    dlock__buf_printf(b, "\"%s\":\"%s\"", name, enc);
    if (enc != small) free(enc);
}

/* ---- watching for a deletion ------------------------------------------------ */

struct dlock__gw_wait {
    pthread_mutex_t mu;
    bool canceled;
    CURLM *multi; /* the running watch, for curl_multi_wakeup */
};

int dlock__gw_wait_new(dlock__gw_wait **out)
{
    dlock__gw_wait *w = calloc(1, sizeof(*w));
    if (!w || pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w);
        return DLOCK_ENOMEM;
    }
    *out = w;
    return 0;
}

void dlock__gw_wait_cancel(dlock__gw_wait *w)
{
    pthread_mutex_lock(&w->mu);
    w->canceled = true;
    if (w->multi) curl_multi_wakeup(w->multi);
    pthread_mutex_unlock(&w->mu);
}

void dlock__gw_wait_reset(dlock__gw_wait *w)
{
    pthread_mutex_lock(&w->mu);
    w->canceled = false;
    pthread_mutex_unlock(&w->mu);
}

void dlock__gw_wait_free(dlock__gw_wait *w)
{
    if (!w) return;
    pthread_mutex_destroy(&w->mu);
    free(w);
}

typedef struct watch_state {
    dlock__buf buf;  /* bytes of the stream not yet parsed */
    const char *key;
    size_t keylen;
    int outcome;     /* 1 deleted, -1 canceled/compacted/error answer, 0 waiting */
} watch_state;

/* True when the event deletes our key ("type" absent means PUT). */
static bool is_our_delete(const dlock__json_doc *d, const dlock__json_val *ev, const watch_state *ws)
{
    const dlock__json_val *t = dlock__gw_get(d, ev, "type");
    if (!t || t->type != DLOCK__JSON_STRING || strcmp(t->s, "DELETE") != 0) return false;
    char key[16384]; /* longer than any key the backend builds */
    size_t n = 0;
    const dlock__json_val *kv = dlock__gw_get(d, ev, "kv");
    return dlock__gw_b64(d, kv, "key", key, sizeof(key), &n) == 0 && n == ws->keylen &&
           memcmp(key, ws->key, n) == 0;
}

/* One stream message: {"result": {created | events | canceled...}}. */
static void watch_message(watch_state *ws, const char *line, size_t n)
{
    dlock__json_doc d = {0};
    if (dlock__json_parse(line, n, &d, NULL, 0) != 0) {
        ws->outcome = -1; /* garbage on the stream: re-check from scratch */
        return;
    }
    const dlock__json_val *res = dlock__json_get(&d, &d.nodes[0], "result");
    if (!res || dlock__json_get(&d, &d.nodes[0], "error") || dlock__gw_bool(&d, res, "canceled") ||
        dlock__gw_int(&d, res, "compact_revision") > 0)
        ws->outcome = -1;
    for (int i = 0; ws->outcome == 0; i++) {
        const dlock__json_val *ev = dlock__gw_at(&d, res, "events", i);
        if (!ev) break;
        if (is_our_delete(&d, ev, ws)) ws->outcome = 1;
    }
    dlock__json_free(&d);
}

static size_t on_stream(char *p, size_t size, size_t n, void *ud)
{
    watch_state *ws = ud;
    size_t len = size * n;
    if (ws->buf.len + len > MAX_ANSWER) return 0;
    dlock__buf_append(&ws->buf, p, len);
    if (ws->buf.oom) return 0;
    char *start = ws->buf.data, *nl;
    while (ws->outcome == 0 && (nl = memchr(start, '\n', ws->buf.len - (size_t)(start - ws->buf.data)))) {
        if (nl > start) watch_message(ws, start, (size_t)(nl - start));
        start = nl + 1;
    }
    size_t left = ws->buf.len - (size_t)(start - ws->buf.data);
    memmove(ws->buf.data, start, left);
    ws->buf.len = left;
    ws->buf.data[left] = '\0';
    return len;
}

static char *watch_body(const char *key, size_t keylen, int64_t from_rev)
{
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{\"create_request\":{");
    dlock__gw_put_b64(&b, "key", key, keylen);
    dlock__buf_printf(&b, ",\"start_revision\":\"%lld\"}}", (long long)from_rev);
    if (b.oom) dlock__buf_free(&b);
    return b.data;
}

/* Registers (or, with m NULL, unregisters) the running watch for cancel;
 * false when a cancel is already pending. */
static bool wait_attach(dlock__gw_wait *w, CURLM *m)
{
    pthread_mutex_lock(&w->mu);
    bool ok = !w->canceled;
    w->multi = ok ? m : NULL;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* The transfer ended: ECONN, and when it never connected the next call
 * uses the next endpoint. */
static int watch_ended(dlock__gw *g, CURLM *m, size_t ep)
{
    int left = 0;
    CURLMsg *msg = curl_multi_info_read(m, &left);
    if (msg && msg->msg == CURLMSG_DONE && transport_rc(msg->easy_handle, msg->data.result) == DLOCK_ECONN) {
        pthread_mutex_lock(&g->mu);
        if (g->current == ep) g->current = (ep + 1) % g->u.n_endpoints;
        pthread_mutex_unlock(&g->mu);
    }
    return DLOCK_ECONN;
}

static int watch_loop(dlock__gw *g, dlock__gw_wait *w, CURLM *m, watch_state *ws, size_t ep,
                      int64_t until_ms, int64_t tick_ms, int (*tick)(void *ud), void *ud)
{
    int64_t next_tick = dlock__now_ms() + tick_ms;
    for (;;) {
        int running = 0;
        if (curl_multi_perform(m, &running) != CURLM_OK) return DLOCK_ECONN;
        if (ws->outcome) return ws->outcome == 1 ? 0 : DLOCK_ECONN;
        if (!running) return watch_ended(g, m, ep);
        if (!wait_attach(w, m)) return DLOCK_ECANCELED;
        int64_t now = dlock__now_ms();
        if (now >= until_ms) return DLOCK_ETIMEOUT;
        if (tick && now >= next_tick) {
            int rc = tick(ud);
            if (rc) return rc;
            next_tick = dlock__now_ms() + tick_ms;
        }
        int64_t wake = until_ms < next_tick ? until_ms : next_tick;
        int64_t wait = wake - dlock__now_ms();
        wait = wait < 1 ? 1 : wait > 1000 ? 1000 : wait;
        curl_multi_poll(m, NULL, 0, (int)wait, NULL);
    }
}

int dlock__gw_watch_delete(dlock__gw *g, dlock__gw_wait *w, const char *key, size_t keylen,
                           int64_t from_rev, int64_t until_ms, int64_t tick_ms, int (*tick)(void *ud),
                           void *ud)
{
    char *body = watch_body(key, keylen, from_rev);
    CURL *h = body ? new_handle(g) : NULL;
    struct curl_slist *hs = h ? headers(g) : NULL;
    /* etcd's "require leader": a member cut off from the leader ends the
     * stream instead of keeping a watch that can see no event. */
    struct curl_slist *more = hs ? curl_slist_append(hs, "Grpc-Metadata-hasleader: true") : NULL;
    if (!more) {
        curl_slist_free_all(hs);
        hs = NULL;
    }
    CURLM *m = hs ? curl_multi_init() : NULL;
    watch_state ws = {.key = key, .keylen = keylen};
    int rc = DLOCK_ENOMEM;
    if (m) {
        pthread_mutex_lock(&g->mu);
        size_t ep = g->current;
        pthread_mutex_unlock(&g->mu);
        char url[600];
        snprintf(url, sizeof(url), "%s/v3/watch", g->base[ep]);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &ws);
        curl_multi_add_handle(m, h);
        rc = wait_attach(w, m) ? watch_loop(g, w, m, &ws, ep, until_ms, tick_ms, tick, ud) : DLOCK_ECANCELED;
        wait_attach(w, NULL);
        if (rc == DLOCK_ECANCELED) dlock__gw_wait_reset(w);
        curl_multi_remove_handle(m, h);
    }
    curl_multi_cleanup(m);
    if (h) curl_easy_cleanup(h);
    curl_slist_free_all(hs);
    dlock__buf_free(&ws.buf);
    free(body);
    return rc;
}
