/* engine_health.c: what the engine tells /healthz about Redis, and why.
 * Invariant: a refusal is reported until the engine has seen it cured (a
 * reply without error on a new connection, a write that succeeded), and
 * each state change is logged once, not once per command.
 *
 * States (sk_redis_health, engine.h), first match wins:
 * - AUTH_REFUSED: the server refused the credentials: WRONGPASS (or any
 *   error) to the AUTH of redis_async.c, or NOAUTH / WRONGPASS to a command
 *   (no password in the URL, or the server's password changed). The
 *   connection is dropped and opened again with the reconnect backoff
 *   (50 ms doubling to reconnect_max_ms, jittered: engine.c); the backoff
 *   starts again from 50 ms only once a connection is proven, i.e. a
 *   command got a reply without error. That proof also clears the state.
 * - DOWN: not connected; the reason is the last failure.
 * - WRITES_REFUSED: connected, but a command was refused with OOM
 *   (maxmemory with noeviction), READONLY (a replica), MISCONF (failed
 *   RDB save with stop-writes-on-bgsave-error) or NOREPLICAS
 *   (min-replicas-to-write): every purchase answers 503. Cleared when a
 *   write succeeds: while refused, every PROBE_MS the engine sends
 *   SET seckill:health:<instance> 1 PX 5000, a write that needs memory, so
 *   it is refused exactly when a purchase would be.
 * - OK otherwise. */
#include <stdio.h>
#include <string.h>

#include "dlock/dlock.h"
#include "engine_health.h"
#include "redis_io.h"

#define PROBE_MS 500

/* msg is the error `code` ("OOM ..."), or a pre-7 server's wrapping of a
 * script's error ("ERR Error running script ...: -OOM ..."). */
static bool error_is(const char *msg, const char *code)
{
    size_t n = strlen(code);
    if (strncmp(msg, code, n) == 0 && (msg[n] == ' ' || msg[n] == '\0')) return true;
    if (strncmp(msg, "ERR Error running script", 24) != 0) return false;
    for (const char *p = strstr(msg, " -"); p; p = strstr(p + 1, " -"))
        if (strncmp(p + 2, code, n) == 0 && p[2 + n] == ' ') return true;
    return false;
}

static bool is_auth_refusal(const char *msg) { return error_is(msg, "NOAUTH") || error_is(msg, "WRONGPASS"); }

static bool is_write_refusal(const char *msg)
{
    return error_is(msg, "OOM") || error_is(msg, "READONLY") || error_is(msg, "MISCONF") ||
           error_is(msg, "NOREPLICAS");
}

/* "AUTH refused: WRONGPASS ..." -> "WRONGPASS ..." (the server's own text). */
static const char *server_text(const char *s)
{
    const char *p = strstr(s, ": ");
    return p ? p + 2 : s;
}

/* The one-line reason: the user name (printable bytes only), never the
 * password. */
static void auth_reason(const dlock__url *u, const char *server, char *out, size_t cap)
{
    if (!u->user && !u->password) {
        snprintf(out, cap, "redis auth refused: the server requires a password and redis-url has none (%s)", server);
        return;
    }
    char user[65] = "default";
    if (u->user) {
        size_t n = 0;
        for (const char *p = u->user; *p && n < sizeof(user) - 1; p++) user[n++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
        user[n] = '\0';
    }
    snprintf(out, cap, "redis auth refused for user '%s': %s", user, server);
}

static void note_auth_refused(sk__health *h, const char *server)
{
    auth_reason(h->url, server, h->auth_why, sizeof(h->auth_why));
    if (!h->auth_refused)
        sk__wire_log(h->w, DLOCK_LOG_ERROR, "%s (reconnecting with backoff: 50 ms doubling to %lld ms)",
                     h->auth_why, (long long)h->reconnect_max_ms);
    h->auth_refused = true;
}

void sk__health_init(sk__health *h, sk__wire *w, const dlock__url *url,
                     const char *instance, int64_t reconnect_max_ms)
{
    memset(h, 0, sizeof(*h));
    h->w = w;
    h->url = url;
    h->reconnect_max_ms = reconnect_max_ms;
    snprintf(h->probe_key, sizeof(h->probe_key), "seckill:health:%s", instance);
}

bool sk__health_error(sk__health *h, const char *msg, const char *conn_refusal)
{
    if (is_auth_refusal(msg)) {
        /* after a refused AUTH every command says NOAUTH: the AUTH's own
         * answer (WRONGPASS ...) is the reason */
        note_auth_refused(h, conn_refusal ? server_text(conn_refusal) : msg);
        h->drop_due = true;
        return true;
    }
    if (!is_write_refusal(msg)) return false;
    snprintf(h->writes_why, sizeof(h->writes_why), "redis refuses writes: %s", msg);
    if (!h->writes_refused) {
        sk__wire_log(h->w, DLOCK_LOG_ERROR, "%s (purchases and /healthz answer 503 until a write succeeds)",
                     h->writes_why);
        h->probe_ms = sk__wire_now_ms(h->w);
    }
    h->writes_refused = true;
    return false;
}

bool sk__health_good(sk__health *h, bool conn_refused)
{
    /* A connection whose AUTH or SELECT was refused is going away even if
     * commands after it work (AUTH sent to a server without a password). */
    if (h->proven || conn_refused) return false;
    h->proven = true;
    h->down_why[0] = '\0';
    if (h->auth_refused) sk__wire_log(h->w, DLOCK_LOG_INFO, "redis accepts the credentials again");
    h->auth_refused = false;
    sk__wire_log(h->w, DLOCK_LOG_INFO, "redis connected");
    return true;
}

void sk__health_up(sk__health *h)
{
    h->proven = false;
    h->drop_due = false;
    h->probe_busy = false;
}

void sk__health_down(sk__health *h, const char *refusal, bool auth, const char *what, const char *why)
{
    if (refusal) why = refusal;
    if (refusal && auth) note_auth_refused(h, server_text(refusal));
    snprintf(h->down_why, sizeof(h->down_why), "%s: %s", what, why ? why : "?");
    /* a refused credential was said once; each retry is not news */
    sk__wire_log(h->w, h->auth_refused ? DLOCK_LOG_DEBUG : DLOCK_LOG_WARN, "%s", h->down_why);
}

static void on_probe(const dlock__reply *r, int err, void *priv)
{
    sk__health *h = priv;
    h->probe_busy = false;
    if (err || !r || dlock__reply_kind(r) == DLOCK__R_ERROR) return; /* classified by sk__health_error */
    if (h->writes_refused) sk__wire_log(h->w, DLOCK_LOG_INFO, "redis accepts writes again");
    h->writes_refused = false;
}

bool sk__health_tick(sk__health *h, bool connected)
{
    if (!connected) return false;
    if (h->drop_due) return true;
    int64_t now = sk__wire_now_ms(h->w);
    if (!h->writes_refused || h->probe_busy || now - h->probe_ms < PROBE_MS) return false;
    const char *argv[] = {"SET", h->probe_key, "1", "PX", "5000"};
    h->probe_ms = now;
    if (sk__wire_cmd(h->w, 0, -1, 5, argv, on_probe, h) == 0) h->probe_busy = true;
    return false;
}

sk_redis_health sk__health_state(const sk__health *h, bool connected, const char **why_out)
{
    sk_redis_health st = SK_REDIS_OK;
    const char *why = "";
    if (h->auth_refused) {
        st = SK_REDIS_AUTH_REFUSED;
        why = h->auth_why;
    } else if (!connected || h->drop_due) {
        st = SK_REDIS_DOWN;
        why = h->down_why[0] ? h->down_why : "connecting to redis";
    } else if (h->writes_refused) {
        st = SK_REDIS_WRITES_REFUSED;
        why = h->writes_why;
    }
    if (why_out) *why_out = why;
    return st;
}

int sk_engine_check_auth(const char *redis_url, int64_t timeout_ms, char *err, size_t errlen)
{
    dlock__url u;
    if (dlock__url_parse(redis_url ? redis_url : "redis://127.0.0.1:6379", &u, err, errlen)) return SK_EINVAL;
    dlock__conn_opts co = {.connect_timeout_ms = timeout_ms, .command_timeout_ms = timeout_ms};
    dlock__conn *c = NULL;
    char why[256] = "";
    int rc = dlock__conn_open(&u, &co, &c, why, sizeof(why));
    dlock__conn_close(c);
    if (rc == DLOCK__EAUTH) auth_reason(&u, server_text(why), err, errlen);
    dlock__url_free(&u);
    return rc == DLOCK__EAUTH ? DLOCK_EAUTH : 0;
}
