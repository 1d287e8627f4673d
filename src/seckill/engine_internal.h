/* engine_internal.h: what engine.c, coalesce.c and campaign.c share: the
 * engine struct, per-campaign state and the script-call helper. Every
 * Redis command goes through sk__call_script/sk__call_cmd, which track it
 * in a FIFO so a late reply (command_timeout_ms) drops the connection. */
#ifndef SK_ENGINE_INTERNAL_H
#define SK_ENGINE_INTERNAL_H

#include <event2/event.h>

#include "engine.h"
#include "orderid.h"
#include "redis_async.h"
#include "url.h"

enum { SK__LUA_PURCHASE = 0, SK__LUA_HEAT, SK__LUA_INFO, SK__LUA_LEASE, SK__NLUA };

/* Reply handler: reply is NULL when err != 0 and no reply came (err is
 * DLOCK_EUNKNOWN when sent, SK_EUNAVAIL when never sent); an ERROR reply
 * comes with err = DLOCK_ESERVER. */
typedef void (*sk__reply_fn)(sk_engine *e, const dlock__reply *reply, int err, void *priv);

typedef struct sk__call {
    sk_engine *e;
    sk__reply_fn fn;
    void *priv;
    int64_t sent_ms;
    struct sk__call *prev, *next; /* in-flight FIFO */
    int script;                   /* SK__LUA_* or -1 */
    int argc;
    const char **argv;            /* owned (same allocation) */
    size_t *lens;
} sk__call;

typedef struct sk__preq sk__preq;

typedef struct sk__camp {
    struct sk_engine *e;
    char id[65];
    char prefix[80];       /* "{c:<id>}:" */
    struct sk__camp *next; /* hash chain */
    bool soldout;          /* local flag: answer sold-out without Redis */
    bool polling;          /* a stock GET for the flag is in flight */
    sk__preq **pending;    /* queued, not yet sent */
    int npending;
    int inflight;          /* script calls in flight */
    struct event *linger;
    bool linger_armed;
    int64_t idle_since_ms; /* for dropping entries of unknown campaigns */
    bool unknown;          /* last answer was "not found" */
} sk__camp;

#define SK__CAMP_BUCKETS 256

struct sk_engine {
    struct event_base *base;
    dlock__url url;
    sk_engine_opts o;
    dlock__aconn *ac;       /* current connection (NULL while reconnecting) */
    dlock__aconn *dead_ac;  /* went down inside a callback: closed by the timer */
    bool up;
    bool ever_up;
    bool freeing;
    int attempt;
    struct event *reconnect_ev;
    struct event *tick_ev;
    sk__call *head, *tail;  /* in flight, oldest first */
    char sha[SK__NLUA][41];
    /* order-id worker lease */
    char instance[33];
    int lease_n;
    int lease_tries;
    bool lease_busy;        /* a lease command is in flight */
    bool lease_held;
    int64_t lease_ok_ms;    /* monotonic time of the last successful take/renew */
    sk_orderid_gen gen;
    int64_t last_poll_ms;
    sk__camp *camps[SK__CAMP_BUCKETS];
    size_t pending;         /* purchases queued or in flight */
    struct sk__batch *failed; /* batches to fail from the loop (fail_ev) */
    struct event *fail_ev;
    sk_engine_stats st;
};

/* Sends a script (EVALSHA; EVAL again on NOSCRIPT). args = numkeys, keys,
 * argv as strings (lens may be NULL for NUL-terminated strings). Returns 0
 * (fn will run) or SK_EUNAVAIL / DLOCK_ENOMEM (fn will not). */
int sk__call_script(sk_engine *e, int script, int nargs, const char **args, const size_t *lens,
                    sk__reply_fn fn, void *priv);
int sk__call_cmd(sk_engine *e, int argc, const char **argv, const size_t *lens, sk__reply_fn fn,
                 void *priv);
void sk__log(sk_engine *e, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

sk__camp *sk__camp_find(sk_engine *e, const char *id, bool create);
void sk__camp_free(sk__camp *c);
/* Unlinks c from the table (it must be idle) and frees it. */
void sk__camp_drop(sk_engine *e, sk__camp *c);
/* coalesce.c: fails every queued purchase (engine shutting down). */
void sk__coalesce_fail_all(sk_engine *e, int err);
/* coalesce.c: the periodic re-check of locally sold-out campaigns. */
void sk__soldout_poll(sk_engine *e);
bool sk__ready(const sk_engine *e);
/* coalesce.c: fail_ev handler: fails the batches queued on e->failed. */
void sk__deliver_failed(evutil_socket_t fd, short what, void *arg);

#endif
