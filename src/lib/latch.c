/* latch.c: distributed countdown latch (see dlock/latch.h).
 *
 * Key layout, for key = prefix + name:
 *   key             string: the remaining count (absent = open); optional
 *                   PEXPIRE opens it by itself
 *   {key}:latch:ch  channel: "open" when the count reaches zero or the
 *                   latch is deleted
 * Scripts: lua/latch_*.lua. Awaiting subscribes first, then reads PTTL of
 * the key (-2: open), then sleeps on the channel, capped by the key's
 * remaining expiry. Invariant: the key exists only with a count >= 1.
 */
#include "dlock/latch.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "family.h"

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h) */
extern const dlock__script dlock__script_latch_set;
extern const dlock__script dlock__script_latch_count_down;
extern const dlock__script dlock__script_latch_delete;

enum { K_KEY, K_CHAN, K_N };

struct dlock_latch {
    dlock_client *c;
    char keys[K_N][DLOCK__KEY_MAX];
    bool sharded; /* K_CHAN (dlock__client_sharded) */
    dlock__waitctl ctl;
};

DLOCK_API int dlock_latch_new(dlock_client *client, const char *name, dlock_latch **latch_out)
{
    if (!client || !latch_out) return DLOCK_EINVAL;
    *latch_out = NULL;
    int offered = dlock__client_offers(client, DLOCK__OBJ_LATCH, "latch");
    if (offered) return offered;
    dlock_latch *l = calloc(1, sizeof(*l));
    if (!l) return DLOCK_ENOMEM;
    static const char *const sfx[K_N - 1] = {":latch:ch"};
    int rc = dlock__fam_keys(client, name, K_N - 1, sfx, l->keys);
    if (rc == 0) rc = dlock__waitctl_init(&l->ctl);
    if (rc) {
        free(l);
        return rc;
    }
    l->c = client;
    l->sharded = dlock__client_sharded(client, l->keys[K_KEY], l->keys[K_CHAN]);
    *latch_out = l;
    return 0;
}

DLOCK_API int dlock_latch_try_set_count(dlock_latch *latch, int64_t count, int64_t expire_ms,
                                        bool *armed_out)
{
    if (!latch || count < 1 || expire_ms < 0) return DLOCK_EINVAL;
    char n[24], px[24];
    dlock__fam_fmt_i64(n, sizeof(n), count);
    dlock__fam_fmt_i64(px, sizeof(px), expire_ms);
    const char *keys[1] = {latch->keys[K_KEY]};
    const char *args[2] = {n, px};
    long long armed = 0;
    int rc = dlock__fam_eval(latch->c, &dlock__script_latch_set, 1, keys, 2, args, &armed, NULL, NULL);
    if (rc == 0 && armed_out) *armed_out = armed == 1;
    return rc;
}

DLOCK_API int dlock_latch_count_down(dlock_latch *latch, int64_t *left_out)
{
    if (!latch) return DLOCK_EINVAL;
    const char *keys[1] = {latch->keys[K_KEY]};
    const char *args[2] = {latch->keys[K_CHAN], dlock__pub_cmd(latch->sharded)};
    long long left = 0;
    int rc = dlock__fam_eval(latch->c, &dlock__script_latch_count_down, 1, keys, 2, args, &left, NULL, NULL);
    if (rc == 0 && left_out) *left_out = left < 0 ? 0 : left;
    return rc;
}

static int simple_int(dlock_client *c, const char *cmd, const char *key, long long *v_out)
{
    const char *argv[2] = {cmd, key};
    dlock__reply *r = NULL;
    int rc = dlock__client_cmd(c, 2, argv, NULL, &r);
    if (rc) return rc;
    rc = DLOCK_ESERVER;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) {
        *v_out = dlock__reply_int(r);
        rc = 0;
    } else if (dlock__reply_kind(r) == DLOCK__R_NIL) {
        *v_out = 0;
        rc = 0;
    } else if (dlock__reply_kind(r) == DLOCK__R_STRING) {
        char *end = NULL;
        const char *s = dlock__reply_str(r, NULL);
        *v_out = strtoll(s, &end, 10);
        if (end != s && *end == '\0') rc = 0;
    }
    dlock__reply_free(r);
    return rc;
}

DLOCK_API int dlock_latch_get_count(dlock_latch *latch, int64_t *count_out)
{
    if (!latch || !count_out) return DLOCK_EINVAL;
    long long v = 0;
    int rc = simple_int(latch->c, "GET", latch->keys[K_KEY], &v);
    if (rc == 0) *count_out = v < 0 ? 0 : v;
    return rc;
}

static int latch_attempt(void *ctx, int64_t *hint_ms)
{
    dlock_latch *l = ctx;
    long long pttl = 0;
    int rc = simple_int(l->c, "PTTL", l->keys[K_KEY], &pttl);
    if (rc) return rc;
    if (pttl == -2) return 1; /* no key: open */
    *hint_ms = pttl > 0 ? pttl : -1;
    return 0;
}

static const char *latch_channel(void *ctx, bool *sharded_out)
{
    *sharded_out = ((dlock_latch *)ctx)->sharded;
    return ((dlock_latch *)ctx)->keys[K_CHAN];
}

DLOCK_API int dlock_latch_await(dlock_latch *latch, int64_t wait_ms)
{
    if (!latch || wait_ms < -1) return DLOCK_EINVAL;
    dlock__wait_spec sp = {.c = latch->c, .ctl = &latch->ctl, .attempt = latch_attempt,
                           .channel = latch_channel, .ctx = latch, .wait_ms = wait_ms,
                           .max_nap_ms = 5000};
    return dlock__fam_wait(&sp);
}

DLOCK_API int dlock_latch_delete(dlock_latch *latch, bool *existed_out)
{
    if (!latch) return DLOCK_EINVAL;
    const char *keys[1] = {latch->keys[K_KEY]};
    const char *args[2] = {latch->keys[K_CHAN], dlock__pub_cmd(latch->sharded)};
    long long n = 0;
    int rc = dlock__fam_eval(latch->c, &dlock__script_latch_delete, 1, keys, 2, args, &n, NULL, NULL);
    if (rc == 0 && existed_out) *existed_out = n == 1;
    return rc;
}

DLOCK_API void dlock_latch_cancel(dlock_latch *latch)
{
    if (latch) dlock__waitctl_cancel(&latch->ctl);
}

DLOCK_API void dlock_latch_free(dlock_latch *latch)
{
    if (!latch) return;
    dlock__waitctl_destroy(&latch->ctl);
    free(latch);
}
