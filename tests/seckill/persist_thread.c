/* persist_thread.c: see persist_thread.h. */
#include "persist_thread.h"

#include <string.h>

static void *run(void *p)
{
    pt_worker *w = p;
    char err[256];
    w->rc = sk_persist_run(&w->o, &w->st, err, sizeof(err));
    return NULL;
}

void pt_init(pt_worker *w, const char *redis_url, const char *database_url, const char *campaign)
{
    memset(w, 0, sizeof(*w));
    sk_persist_opts_init(&w->o);
    w->o.redis_url = redis_url;
    w->o.database_url = database_url;
    w->o.campaign = campaign;
    w->o.block_ms = 50;
    w->o.sweep_interval_ms = 100;
    w->o.pay_timeout_ms = 0;
    w->o.stop = &w->stop;
}

int pt_start(pt_worker *w)
{
    atomic_store(&w->stop, 0);
    return pthread_create(&w->th, NULL, run, w);
}

int pt_stop(pt_worker *w)
{
    atomic_store(&w->stop, 1);
    pthread_join(w->th, NULL);
    return w->rc;
}
