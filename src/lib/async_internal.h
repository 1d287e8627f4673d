/* async_internal.h: the parts of libdlock's asynchronous half (async.h)
 * and how they call each other, each file using only those below it:
 *
 *   async_lock.c      the lock handles (public dlock_async_lock_*)
 *     |
 *   async_wait.c      the acquire driver (try, wait in a channel's FIFO,
 *     |               recheck, deadline, cancel) and the hold's watchdog
 *     |               on loop timers under the validity rule
 *   async_client.c    the client: options, the command connection, requests
 *     |               with reply deadlines, scripts (EVALSHA, EVAL once on
 *     |               NOSCRIPT), handle registry, enter/leave, free
 *   async_sub.c       the pub/sub connections: channels, their FIFO of waiters
 *     |               (on a Cluster, one connection per master a channel
 *     |               lives on, sharded channels with SSUBSCRIBE)
 *   async_cluster.c   a redis-cluster:// URL's requests: the slot map loaded
 *     |               on the loop, a connection per master, MOVED / ASK
 *     |               followed, reply deadlines per node
 *   async_sentinel.c  the master of a redis-sentinel:// URL: resolution,
 *     |               +switch-master
 *   async_loop.c      the host loop's table: timers, the connection's view
 *
 * Everything runs on the loop thread; nothing here locks or blocks.
 * Internal only. */
#ifndef DLOCK_LIB_ASYNC_INTERNAL_H
#define DLOCK_LIB_ASYNC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/async.h"
#include "client_internal.h"
#include "redis_loop.h"
#include "script.h"
#include "url.h"

/* ---- async_loop.c ---------------------------------------------------------- */

/* 0 when every function of the table is set and size covers them, else
 * DLOCK_EINVAL. */
int dlock__aloop_check(const dlock_async_loop *l);
/* The connection's view of the loop (redis_loop.h). */
void dlock__aloop_evloop(const dlock_async_loop *l, dlock__evloop *out);
/* A one-shot timer (NULL on failure); start (ms < 0: 0), stop, free (NULL ok). */
void *dlock__atimer_new(const dlock_async_loop *l, dlock_async_timer_fn fn, void *arg);
void dlock__atimer_start(const dlock_async_loop *l, void *t, int64_t after_ms);
void dlock__atimer_stop(const dlock_async_loop *l, void *t);
void dlock__atimer_free(const dlock_async_loop *l, void *t);

/* ---- async_sentinel.c ------------------------------------------------------------ */

typedef struct dlock__asent dlock__asent;

/* url (a SENTINEL URL) and o are kept: they must outlive it. changed runs
 * on the loop after each resolution (ok: a master is known) and after a
 * +switch-master for this master (ok). 0 or ENOMEM. */
int dlock__asent_new(const dlock_async_loop *loop, const dlock__url *url, const dlock_client_options *o,
                     void (*changed)(void *priv, bool ok), void *priv, dlock__asent **out);
void dlock__asent_free(dlock__asent *s);
/* Forgets the master and asks the sentinels again (on the loop's next
 * pass); a no-op while a resolution runs. */
void dlock__asent_resolve(dlock__asent *s);
bool dlock__asent_resolving(const dlock__asent *s);
/* The master's address while one is known (valid until the next change). */
bool dlock__asent_master(const dlock__asent *s, const char **host_out, int *port_out);

/* ---- async_cluster.c ------------------------------------------------------------ */

typedef struct dlock__acl dlock__acl;

/* A command's outcome: rc 0 with reply (any kind, error replies too, once
 * redirects were followed), or rc DLOCK_EUNKNOWN (sent, no answer before
 * the deadline or the connection dropped), DLOCK_ECONN (never sent: no
 * map or node within the deadline), DLOCK_ECLOSED (being freed) and
 * reply NULL. */
typedef void (*dlock__acl_fn)(void *priv, const dlock__reply *reply, int rc);

/* url (a CLUSTER URL, copied) and o (kept: must outlive it); starts
 * loading the map on the loop. 0 or ENOMEM. */
int dlock__acl_new(const dlock_async_loop *loop, const dlock__url *url, const dlock_client_options *o,
                   dlock__acl **out);
/* Closes every connection: each command pending ends DLOCK_ECLOSED (now,
 * or when hiredis returns); the memory goes after the last. NULL ok. */
void dlock__acl_free(dlock__acl *a);
/* Sends argv (copied) to slot's master (slot -1: keyless), following
 * redirects. 0 (fn will run once, never inside this call) or
 * DLOCK_ECONN / DLOCK_ENOMEM / DLOCK_EINVAL / DLOCK_ECLOSED (fn will not). */
int dlock__acl_cmd(dlock__acl *a, int slot, int argc, const char **argv, const size_t *lens, dlock__acl_fn fn,
                   void *priv);
/* The master of slot while the map is known (valid until the next change). */
bool dlock__acl_node_of(const dlock__acl *a, int slot, const char **host_out, int *port_out);
/* Asks for the map again, in the background (after a slot moved). */
void dlock__acl_refresh(dlock__acl *a);

/* ---- async_sub.c --------------------------------------------------------------- */

typedef struct dlock__asub dlock__asub;
typedef struct dlock__achan dlock__achan;

/* Why the head (the longest waiting) of a channel's FIFO gets a turn:
 * TRY: it should try again (its channel's subscription was confirmed,
 * first or again after a reconnect; a message came; it became head after
 * the previous head left without holding); it may leave or join anything.
 * SEND: the same, inside a call of the user's (a release this client is
 * sending, dlock__asub_release_sent): its try goes out now, behind the
 * release, and a send that fails is dealt with from the loop, so no
 * callback runs and nothing leaves or joins. WAIT: it became head because
 * the previous head now holds the name alone (dlock__asub_leave_holding):
 * no release was seen, so it only arms its recheck. */
typedef enum dlock__turn { DLOCK__TURN_TRY = 0, DLOCK__TURN_SEND, DLOCK__TURN_WAIT } dlock__turn;

typedef struct dlock__await {
    dlock__achan *ch; /* NULL: not in a queue */
    struct dlock__await *prev, *next;
    void (*turn)(struct dlock__await *w, dlock__turn why);
} dlock__await;

/* url: redis://, unix://, redis-sentinel:// or redis-cluster:// (copied).
 * o: the client's options (kept: must outlive the subscriber). acl: a
 * Cluster URL's driver (where each channel's slot lives; kept), else
 * NULL. 0 or ENOMEM. Connects when first needed. */
int dlock__asub_new(const dlock_async_loop *loop, const dlock__url *url, const dlock_client_options *o,
                    dlock__acl *acl, dlock__asub **out);
/* Closes the connection and frees every channel; waiters still queued are
 * dropped from their queues without a turn. NULL ok. */
void dlock__asub_free(dlock__asub *s);
/* Puts w at the tail of channel's queue (subscribing when it is the
 * first; sharded: SSUBSCRIBE on the master of its slot, Cluster URLs
 * only, see dlock__ac_sharded). 0, ENOMEM or ECONN (nothing queued). */
int dlock__asub_join(dlock__asub *s, const char *channel, bool sharded, dlock__await *w);
/* Takes w out of its queue (no-op if in none); the next becomes head and
 * gets its turn on the loop's next pass. */
void dlock__asub_leave(dlock__await *w);
/* The same for a head that just acquired the name exclusively (a lock, a
 * write lock): the next head's try would only find it busy, so it gets a
 * WAIT turn, now, and waits for the holder's release. */
void dlock__asub_leave_holding(dlock__await *w);
bool dlock__asub_is_head(const dlock__await *w);
/* A release by this client that will publish on channel was just queued
 * on the command connection. When the channel is subscribed and has a
 * head, the head gets a SEND turn now, so its try goes out behind the
 * release on the same connection, in the same write, and Redis runs it
 * after the release (one round trip per handoff, not two), and the
 * message, when it comes, is not handed out again. True when that was
 * done (counted). */
bool dlock__asub_release_sent(dlock__asub *s, const char *channel);
/* The release's answer: published says whether the script published (an
 * unknown outcome counts as not). counted: release_sent's answer. A
 * counted release that did not publish is uncounted (its message will not
 * come); one that was not counted but published gives the head its turn
 * now, as the message will. */
void dlock__asub_release_done(dlock__asub *s, const char *channel, bool counted, bool published);
/* For a redis-sentinel:// URL: the master to connect to (copied); a
 * different one drops the current connection (it reconnects there and
 * subscribes again). Until the first, nothing connects. */
void dlock__asub_set_master(dlock__asub *s, const char *host, int port);
/* Figures for tests and benchmarks: channels subscribed, waiters queued. */
void dlock__asub_counts(const dlock__asub *s, size_t *channels_out, size_t *waiters_out);

/* ---- async_client.c --------------------------------------------------------------- */

/* A handle as the client's registry sees it: orphan ends its pending
 * operation with DLOCK_ECLOSED, stops its timers and forgets the client
 * (called by dlock_async_client_free, which then never touches it). */
typedef struct dlock__aobj {
    void (*orphan)(struct dlock__aobj *o);
    struct dlock__aobj *prev, *next;
} dlock__aobj;

/* A reply for a request: rc 0 with reply (never an error reply: those are
 * rc DLOCK_ESERVER, or DLOCK_EAUTH for NOAUTH/WRONGPASS, and reply is
 * NULL), or a code with reply NULL: DLOCK_EUNKNOWN (sent, no answer before
 * the deadline or the connection dropped), DLOCK_ECONN (never sent),
 * DLOCK_ECLOSED (the client is being freed). tag: as given. */
typedef void (*dlock__areply_fn)(void *priv, const dlock__reply *reply, int rc, uint64_t tag);

const dlock_client_options *dlock__ac_options(const dlock_async_client *c);
const dlock_async_loop *dlock__ac_loop(const dlock_async_client *c);
dlock__asub *dlock__ac_sub(dlock_async_client *c);
bool dlock__ac_closing(const dlock_async_client *c);
/* Whether channel, a release channel of key, is a sharded channel: on a
 * redis-cluster:// URL when it hashes to key's slot (the blocking
 * client's rule, dlock__client_sharded); its publish command for the
 * scripts is dlock__pub_cmd(sharded). */
bool dlock__ac_sharded(const dlock_async_client *c, const char *key, const char *channel);
/* A fresh number for default owners ("<client id>:a<n>"). */
uint64_t dlock__ac_serial(dlock_async_client *c);
/* Runs script s: EVALSHA, and EVAL once when the server answers NOSCRIPT.
 * 0 (fn will run once) or DLOCK_ECONN / DLOCK_ENOMEM / DLOCK_ECLOSED
 * (fn will not). Arguments are copied. */
int dlock__ac_eval(dlock_async_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                   int nargs, const char *const *args, dlock__areply_fn fn, void *priv, uint64_t tag);
/* The validity deadline of a hold acquired or renewed by a command sent
 * at sent_ms with lease_ms (the rule of dlock.h, this client's drift). */
int64_t dlock__ac_valid_until(const dlock_async_client *c, int64_t sent_ms, int64_t lease_ms);
void dlock__ac_add_obj(dlock_async_client *c, dlock__aobj *o);
void dlock__ac_remove_obj(dlock_async_client *c, dlock__aobj *o);
/* Around every entry from the loop into a handle (its timers): a client
 * freed meanwhile is released only at the outermost leave. */
void dlock__ac_enter(dlock_async_client *c);
void dlock__ac_leave(dlock_async_client *c);
void dlock__ac_log(const dlock_async_client *c, dlock_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- async_wait.c ------------------------------------------------------------------ */

/* The acquire driver, one per handle. The object implements try_send
 * (send its acquire script with dlock__ac_eval, tag = the tag given;
 * 0 or the send's code) and done (the final outcome: call the user's
 * callback); its reply handler passes each try's outcome back with
 * dlock__aop_result. */
typedef struct dlock__aop dlock__aop;
typedef struct dlock__aop_ops {
    int (*try_send)(dlock__aop *op, uint64_t tag);
    void (*done)(dlock__aop *op, int rc);
} dlock__aop_ops;

struct dlock__aop {
    dlock_async_client *c;
    const dlock__aop_ops *ops;
    const char *channel;   /* the object's wake channel */
    bool sharded;          /* channel is sharded (dlock__ac_sharded) */
    int64_t recheck_max_ms;
    void *timer;           /* made on first wait */
    dlock__await w;
    uint64_t gen;          /* the current acquire's tag; replies of older tries are stale */
    int64_t deadline_ms;   /* monotonic; -1: no bound */
    int64_t recheck_ms;    /* the next recheck interval (grows) */
    int64_t next_try_ms;   /* when the head's timer tries again */
    bool active;           /* an acquire is pending */
    bool waits;            /* wait_ms != 0 */
    bool exclusive;        /* an acquisition excludes every other holder (set by the object) */
    bool in_flight;        /* a try is out */
    bool again;            /* woken while a try was out: try once more */
};

void dlock__aop_init(dlock__aop *op, dlock_async_client *c, const dlock__aop_ops *ops, const char *channel,
                     bool sharded, int64_t recheck_max_ms);
/* Starts an acquire: the first try is sent now. 0 or the send's code
 * (nothing pending then). */
int dlock__aop_start(dlock__aop *op, int64_t wait_ms);
/* A try's outcome: acquired (0), busy (DLOCK_EBUSY; ttl_ms: the holder's
 * remaining lease, < 0 unknown), or another code. A stale tag is ignored
 * and false returned (the object then undoes an acquisition it got). */
bool dlock__aop_result(dlock__aop *op, uint64_t tag, int rc, int64_t ttl_ms);
/* Ends a pending acquire with rc (done called); false when none was. */
bool dlock__aop_end(dlock__aop *op, int rc);
/* Frees the timer, leaves the queue (not the object). */
void dlock__aop_dispose(dlock__aop *op);

/* A hold's validity and watchdog on the loop's timers. The object
 * implements renew_send (its owner-checked renewal script, tag given) and
 * lost (declare the loss: log, user callback); its renewal reply handler
 * calls dlock__ahold_renewed. */
typedef struct dlock__ahold dlock__ahold;
typedef struct dlock__ahold_ops {
    int (*renew_send)(dlock__ahold *h, int64_t lease_ms, uint64_t tag);
    void (*lost)(dlock__ahold *h);
} dlock__ahold_ops;

struct dlock__ahold {
    dlock_async_client *c;
    const dlock__ahold_ops *ops;
    void *timer;
    uint64_t gen;          /* this hold's renewals' tag */
    bool held, watchdog, renewing;
    int64_t lease_ms;
    int64_t valid_until_ms; /* the validity deadline (dlock.h) */
    int64_t next_renew_ms;
    int64_t renew_sent_ms;
};

void dlock__ahold_init(dlock__ahold *h, dlock_async_client *c, const dlock__ahold_ops *ops);
/* Held from a command sent at sent_ms that set lease_ms; watchdog: renew
 * every third of the lease. A held hold is only renewed (re-entry). 0 or
 * DLOCK_ENOMEM (no timer: not held). */
int dlock__ahold_begin(dlock__ahold *h, bool watchdog, int64_t sent_ms, int64_t lease_ms);
/* A renewal's reply: rc 0 renewed, DLOCK_ELOST gone or taken (the loss is
 * declared now), another code (tried again soon, within the validity). */
void dlock__ahold_renewed(dlock__ahold *h, uint64_t tag, int rc);
void dlock__ahold_end(dlock__ahold *h);
bool dlock__ahold_valid(const dlock__ahold *h);
int64_t dlock__ahold_validity_ms(const dlock__ahold *h);
void dlock__ahold_dispose(dlock__ahold *h);

#endif
