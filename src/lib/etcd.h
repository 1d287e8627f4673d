/* etcd.h: libdlock's etcd v3 backend, behind the same public lock API.
 * Internal only. A client created from an etcd:// or etcds:// URL carries
 * a dlock__etcd (the gateway client and the key prefix) attached by the
 * etcd backend table (backend.h); lock_api.c sends the public dlock_lock_*
 * calls made on it to etcd_lock.c through that table.
 *
 * Key layout (docs/locks.md, "Redis or etcd"): the lock called N is the
 * key range  P/lock/E/  where P is the URL's prefix (default /dlock) and E
 * is key_prefix + N with '%' and '/' percent-encoded (so "a" and "a/b" are
 * distinct ranges). Each contender owns  P/lock/E/<lease id, 16 hex>,
 * attached to its own lease; the holder is the key with the lowest
 * create_revision, which is also its fencing token. A contender key's
 * value is the client id, then, when the hold has a label, one space and
 * the label (docs/locks.md, "Holder labels"). A fence guard
 * resource R is the key  P/fence/<key_prefix + R>.
 */
#ifndef DLOCK_LIB_ETCD_H
#define DLOCK_LIB_ETCD_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "client_internal.h"
#include "dlock/lock.h"
#include "etcd_gw.h"

typedef struct dlock__etcd dlock__etcd;

/* Longest etcd key the backend builds or reads: URL prefix + both names
 * percent-encoded (3 bytes per byte at worst) + a lease id. A longer one is
 * DLOCK_EINVAL (built) or DLOCK_ESERVER (read). */
#define DLOCK__ETCD_KEY_MAX (4096 + 6 * DLOCK__NAME_MAX + 64)

/* ---- the client side (etcd_client.c) ------------------------------------ */

/* Parses the client's URL (an etcd one), opens the gateway client and
 * checks the cluster. 0, or EURL/EAUTH/ECONN/ESERVER/ENOMEM (logged). */
int dlock__etcd_attach(dlock_client *c);
/* Closes what attach opened; safe on a Redis client. */
void dlock__etcd_detach(dlock_client *c);
/* The gateway of an etcd client, NULL for a Redis client. */
dlock__gw *dlock__etcd_gw(const dlock_client *c);

/* New string "P/lock/E/" for name (see top), or NULL (EINVAL/ENOMEM:
 * *rc_out says which). */
char *dlock__etcd_lock_dir(const dlock_client *c, const char *name, int *rc_out);

/* The first key in [dir, dir+1) by create_revision: the holder. *found_out
 * false when free. key_out receives the key, lease_out its
 * lease, rev_out its create_revision, count_out the number of contenders.
 * One round trip. */
typedef struct dlock__etcd_holder {
    bool found;
    char key[DLOCK__ETCD_KEY_MAX];
    int64_t lease;
    int64_t create_rev;
    int64_t count;
    char label[DLOCK_LABEL_MAX + 1]; /* the holder's label ("" none) */
} dlock__etcd_holder;
int dlock__etcd_holder_get(dlock__gw *g, const char *dir, dlock__etcd_holder *out);

/* The value a contender key gets: "<client id>[ <label>]" (label may be
 * NULL). A new string, NULL on ENOMEM. */
char *dlock__etcd_key_value(const dlock_client *c, const char *label);

/* Remaining TTL of lease in ms (-2: no such lease). */
int dlock__etcd_lease_ttl(dlock__gw *g, int64_t lease, int64_t *ttl_ms_out);
/* Revokes lease (deleting its keys). 0, ELOST (no such lease), or a
 * transport code (EUNKNOWN: sent, answer lost). */
int dlock__etcd_revoke(dlock__gw *g, int64_t lease);
/* Appends a range request over [dir, dir+1) to b (no braces around). */
void dlock__etcd_put_dir_range(dlock__buf *b, const char *dir);

/* Admin calls of lock.h on an etcd client. */
int dlock__etcd_force_unlock(dlock_client *c, const char *name, dlock_lock_kind kind, bool *removed_out);
int dlock__etcd_status_get(dlock_client *c, const char *name, dlock_lock_status *st, dlock__holder_extra *x);
int dlock__etcd_fence_guard(dlock_client *c, const char *resource, uint64_t token, uint64_t *highest_out);

/* The mutex (etcd_lock.c) is dlock__etcd_lock_ops of backend.h. */

#endif
