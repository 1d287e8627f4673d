/* announce.h: new campaigns reach the persisters at once. Whoever creates a
 * campaign XADDs it to the stream seckill:announce (sk_announce_campaign);
 * every persister runs a waiter thread blocked on that stream (its own
 * connection) that queues each announced id and wakes the persister's
 * blocking XREADGROUP with CLIENT UNBLOCK, so the new campaign is consumed
 * within a round trip instead of at the next periodic discovery.
 * Thread-safety: sk_announce_take / sk_announce_set_target may be called
 * from the persister's thread while the waiter runs; start/stop from one
 * thread. */
#ifndef SK_ANNOUNCE_H
#define SK_ANNOUNCE_H

#include <stddef.h>
#include <stdint.h>

#include "redis_io.h"

#define SK_ANNOUNCE_STREAM "seckill:announce"

typedef struct sk_announce sk_announce;

/* XADD seckill:announce MAXLEN ~ 1000 * campaign <id> on rc. 0 or a code. */
int sk_announce_campaign(dlock__conn *rc, const char *campaign);

/* Starts a waiter on redis_url (its own connection); announcements from
 * now on are queued. 0 or a dlock code (err says why). */
int sk_announce_start(const char *redis_url, sk_announce **out, char *err, size_t errlen);
/* Stops the thread and frees; NULL ok. */
void sk_announce_stop(sk_announce *a);
/* The CLIENT ID of the connection the persister blocks on (0: none): the
 * waiter unblocks it while announcements are queued. */
void sk_announce_set_target(sk_announce *a, int64_t client_id);
/* Moves up to max queued campaign ids into ids; returns how many. */
size_t sk_announce_take(sk_announce *a, char (*ids)[65], size_t max);
/* Announcements queued and not yet taken. */
size_t sk_announce_queued(sk_announce *a);

#endif
