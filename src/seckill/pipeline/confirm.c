/* confirm.c: marks the Idempotency-Key answers of persisted orders
 * (confirm.h). Invariant: an answer is marked only for an order the
 * database holds persisted (or paid, cancelled: the promise was kept), so
 * a marked replay's 201 is never a promise the system of record lacks. */
#include "confirm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "release.h"
#include "sk_err.h"

extern const dlock__script sk_script_idem_confirm; /* lua/idem_confirm.lua */

#define KEY_MAX 320 /* a bucket tag and "iu:" user "/" key */

/* Does the database hold order o as a kept promise? */
static bool held(sk_db *db, const sk_order_in *o, int result)
{
    if (result == SK_APPLY_PERSISTED) return true;
    if (result != SK_APPLY_DUPLICATE) return false;
    sk_order_row row;
    if (sk_db_order_get(db, o->order_id, &row) != 0) return false;
    return strcmp(row.status, "persisted") == 0 || strcmp(row.status, "paid") == 0 ||
           strcmp(row.status, "cancelled") == 0;
}

int sk_confirm_answers(dlock__conn *rc, sk_db *db, const sk_buckets *lay, int j, const sk_order_in *orders,
                       const int *results, size_t n)
{
    const char **keys = calloc(n ? 2 * n : 1, sizeof(*keys));
    const char **args = calloc(n ? n : 1, sizeof(*args));
    char *kbuf = malloc((n ? 2 * n : 1) * KEY_MAX), *abuf = malloc((n ? n : 1) * 24);
    int m = 0, err = DLOCK_ENOMEM;
    if (!keys || !args || !kbuf || !abuf) goto out;
    for (size_t i = 0; i < n; i++) {
        const sk_order_in *o = &orders[i];
        if (!o->idem || !o->idem[0] || !held(db, o, results[i])) continue;
        /* the key's two names (purchase.lua): its first user's, another user's */
        char part[160];
        snprintf(part, sizeof(part), "idem:%s", o->idem);
        sk_bucket_key(lay, j, part, kbuf + (size_t)(2 * m) * KEY_MAX, KEY_MAX);
        snprintf(part, sizeof(part), "iu:%s/%s", o->user, o->idem);
        sk_bucket_key(lay, j, part, kbuf + (size_t)(2 * m + 1) * KEY_MAX, KEY_MAX);
        snprintf(abuf + (size_t)m * 24, 24, "%" PRIu64, o->order_id);
        keys[2 * m] = kbuf + (size_t)(2 * m) * KEY_MAX;
        keys[2 * m + 1] = kbuf + (size_t)(2 * m + 1) * KEY_MAX;
        args[m] = abuf + (size_t)m * 24;
        m++;
    }
    err = 0;
    if (m > 0) {
        dlock__reply *r = NULL;
        err = sk__eval_script(rc, &sk_script_idem_confirm, 2 * m, keys, m, args, &r);
        if (!err && dlock__reply_kind(r) != DLOCK__R_INTEGER) err = DLOCK_ESERVER;
        dlock__reply_free(r);
    }
out:
    free(keys);
    free(args);
    free(kbuf);
    free(abuf);
    return err ? err : m;
}
