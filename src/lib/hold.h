/* hold.h: the one hold state machine of libdlock. Every handle that can
 * hold server state (lock on Redis or etcd, fair lock, read-write lock,
 * semaphore, multi-lock) embeds a dlock__hold and changes state only here:
 *
 *   FREE --begin--> HELD --end--> FREE
 *   HELD --watchdog finds it gone, or its validity deadline passes--> LOST
 *   LOST --take_lost--> FREE
 *   FREE --acquire outcome unknown--> UNKNOWN --resolved--> FREE or HELD
 *   any --client destroyed--> orphaned (FREE, never touches the client again)
 *
 * A hold is registered with its client for the handle's whole life, so
 * dlock_client_destroy reports every held object of every kind and
 * orphans every handle, and dlock__hold_free is safe before or after the
 * client is gone. The hold's mutex is a leaf: no call out is made while
 * it is held.
 * Every HELD hold has a validity deadline (the rule in dlock.h), set by
 * begin and moved by renewals: dlock__hold_valid is what every "do I hold
 * it" answer of every object reads, so belief ends at the deadline even
 * before the watchdog's deadline thread declared the loss. Internal only. */
#ifndef DLOCK_LIB_HOLD_H
#define DLOCK_LIB_HOLD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client_internal.h"

typedef enum dlock__hold_state {
    DLOCK__HOLD_FREE = 0,
    DLOCK__HOLD_HELD = 1,
    DLOCK__HOLD_LOST = 2,    /* the watchdog found it gone; the owner has not seen it yet */
    DLOCK__HOLD_UNKNOWN = 3, /* the last acquire's answer was lost; queries resolve it */
} dlock__hold_state;

typedef struct dlock__hold dlock__hold;
typedef void (*dlock__any_fn)(void); /* a function pointer of any type, cast back before a call */

/* What an object tells its hold. renew is required for watchdog mode;
 * prepare/finish batch renewals (see dlock__renewable); lost, if set, runs
 * on a watchdog thread after HELD became LOST (log, user callback);
 * describe writes "rwlock orders (read 1, write 0)" for reports. */
typedef struct dlock__hold_ops {
    int (*renew)(dlock__hold *h, int64_t lease_ms);
    int (*prepare)(dlock__hold *h, int64_t lease_ms, dlock__renew_cmd *cmd);
    int (*finish)(dlock__hold *h, const dlock__reply *reply);
    void (*lost)(dlock__hold *h, int reason);
    void (*describe)(const dlock__hold *h, char *buf, size_t len);
} dlock__hold_ops;

struct dlock__hold {
    dlock_client *c;            /* not to be used once orphaned */
    const dlock__hold_ops *ops;
    dlock__renewable wd;        /* the watchdog's view */
    dlock__held reg;            /* the client registry's view */
    pthread_mutex_t mu;         /* guards the fields below; a leaf */
    dlock__hold_state state;
    bool watched;               /* in the watchdog's list */
    bool dropped;               /* the watchdog dropped it (loss): remove before reuse */
    bool orphaned;              /* the client was destroyed */
    int64_t since_ms;           /* when the current hold began */
    dlock__any_fn user_lost;    /* dlock__hold_set_user_lost */
    void *user_lost_ud;
};

/* Registers h with c for the handle's life. 0 or DLOCK_ENOMEM. */
int dlock__hold_init(dlock__hold *h, dlock_client *c, const dlock__hold_ops *ops);
/* FREE/UNKNOWN/LOST -> HELD by a command sent at sent_ms that set a lease
 * of lease_ms on the server: valid until dlock__client_valid_until(sent_ms,
 * lease_ms). With watchdog, renewals start. A no-op while already HELD
 * (the earlier, shorter validity stays). */
void dlock__hold_begin(dlock__hold *h, bool watchdog, int64_t sent_ms, int64_t lease_ms);
/* A command sent at sent_ms set the lease to lease_ms again (extend,
 * re-entry): the deadline follows it, earlier or later; on a watched hold
 * it only moves later (the watchdog's renewals set the same lease). Only
 * while HELD and still valid: a hold past its deadline stays past it. */
void dlock__hold_renewed(dlock__hold *h, int64_t sent_ms, int64_t lease_ms);
/* HELD and before its validity deadline. */
bool dlock__hold_valid(dlock__hold *h);
/* Milliseconds of validity left: > 0 while dlock__hold_valid, else 0. */
int64_t dlock__hold_validity_ms(dlock__hold *h);
/* The object's user callback for a loss, kept with the hold (so the
 * watchdog threads read it under the hold's mutex): fn is the object's own
 * public callback type, cast; the object casts it back to call it. */
void dlock__hold_set_user_lost(dlock__hold *h, dlock__any_fn fn, void *ud);
dlock__any_fn dlock__hold_user_lost(dlock__hold *h, void **ud_out);
/* Whatever the state -> FREE, renewals stopped; a released HELD records
 * its hold time. */
void dlock__hold_end(dlock__hold *h, bool released);
/* LOST -> FREE: true when the hold was lost (the caller reports ELOST). */
bool dlock__hold_take_lost(dlock__hold *h);
/* FREE <-> UNKNOWN (an acquire whose outcome is not known). */
void dlock__hold_set_unknown(dlock__hold *h, bool unknown);
/* The state as recorded (a HELD hold may be past its deadline: use
 * dlock__hold_valid for belief). */
dlock__hold_state dlock__hold_get(dlock__hold *h);
bool dlock__hold_watched(dlock__hold *h);
/* Stops renewals of a HELD hold for a while (extend changes the lease):
 * true if it was watched. */
bool dlock__hold_unwatch(dlock__hold *h);
/* Renewals again (an extend failed), if still HELD. */
void dlock__hold_rewatch(dlock__hold *h);
/* For the handle's destructor: stops renewals, unregisters and, when it
 * still holds something, warns that it is not released but expires on its
 * lease. Safe before or after the client is destroyed. */
void dlock__hold_free(dlock__hold *h, const char *what);

/* The hold that contains wd / reg. */
dlock__hold *dlock__hold_of(dlock__renewable *wd);
const dlock__hold *dlock__hold_of_reg(const dlock__held *reg);

#endif
