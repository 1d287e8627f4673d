/* persist_backlog.c: the pipeline's backlog per campaign and per table of
 * streams (persist_backlog.h). Invariant: it only reads, one stream at a
 * time through sk_stream_backlog (layout.c), which owns the stream keys. */
#include "persist_backlog.h"

#include <stdlib.h>

#include "dlock/dlock.h"
#include "layout.h"
#include "persist_discovery.h"
#include "sk_err.h"

int sk_persist_backlog(dlock__conn *rc, const char *campaign, int64_t *pending_out, int64_t *lag_out)
{
    *pending_out = *lag_out = 0;
    sk_buckets *lay = malloc(sizeof(*lay));
    if (!lay) return DLOCK_ENOMEM;
    int err = sk_layout_read(rc, campaign, lay);
    if (err == SK_ENOTFOUND) sk_buckets_single(campaign, lay), err = 0; /* not heated: today's stream */
    for (int j = 0; !err && j < lay->k; j++) {
        char key[128];
        int64_t p = 0, l = 0;
        sk_bucket_key(lay, j, "orders", key, sizeof(key));
        err = sk_stream_backlog(rc, key, &p, &l);
        *pending_out += p;
        *lag_out += l;
    }
    free(lay);
    return err;
}

bool sk__persist_drained(dlock__conn *rc, const sk_pcamps *cs)
{
    for (size_t i = 0; i < cs->n; i++) {
        int64_t pending = 0, lag = 0;
        if (sk_stream_backlog(rc, cs->v[i].key, &pending, &lag) || pending || lag) return false;
    }
    return true;
}
