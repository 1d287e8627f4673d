/* client_create.c: making and destroying a dlock_client, the top of
 * libdlock: validate and copy the options, choose the backend once from the
 * URL (backend.c) and attach it, start the watchdog; destroy stops them in
 * reverse and reports what is still held. Nothing in src/lib calls here.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "client_priv.h"
#include "opts_read.h"
#include "util.h"

DLOCK_API void dlock_client_options_init(dlock_client_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->url = "redis://127.0.0.1:6379";
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 2000;
    o->watchdog_timeout_ms = 30000;
    o->retry_attempts = 3;
    o->retry_delay_ms = 50;
    o->key_prefix = "";
    o->pool_size = 8;
    o->wait_replicas = 0;
    o->wait_replicas_timeout_ms = 100;
    o->log_level = DLOCK_LOG_INFO;
}

static int copy_options(dlock_client *c, const dlock_client_options *given)
{
    dlock_client_options_init(&c->opts);
    if (dlock__opts_read(&c->opts, sizeof(c->opts),
                         DLOCK__SIZE_TO(dlock_client_options, log_level), given) != 0)
        return DLOCK_EINVAL;
    const dlock_client_options *o = &c->opts;
    c->url_copy = strdup(o->url ? o->url : "redis://127.0.0.1:6379");
    c->prefix_copy = strdup(o->key_prefix ? o->key_prefix : "");
    if (!c->url_copy || !c->prefix_copy) return DLOCK_ENOMEM;
    c->opts.url = c->url_copy;
    c->opts.key_prefix = c->prefix_copy;
    c->prefix_len = strlen(c->prefix_copy);
    if (o->connect_timeout_ms <= 0 || o->command_timeout_ms <= 0 || o->watchdog_timeout_ms < 30 ||
        o->retry_attempts < 0 || o->retry_delay_ms < 0 || o->pool_size < 1 ||
        o->pool_size > 1024 || o->wait_replicas < 0 || o->wait_replicas_timeout_ms < 0 ||
        c->prefix_len > DLOCK__NAME_MAX)
        return DLOCK_EINVAL;
    return 0;
}

static int init_sync(dlock_client *c)
{
    int rc = pthread_mutex_init(&c->mu, NULL) || pthread_mutex_init(&c->sub_mu, NULL) ||
             pthread_mutex_init(&c->wd_mu, NULL) || pthread_mutex_init(&c->m_mu, NULL) ||
             dlock__cond_init(&c->sub_cv) || dlock__cond_init(&c->wd_cv) ||
             dlock__cond_init(&c->wd_dl_cv) || dlock__pool_init(&c->pool);
    return rc ? DLOCK_ENOMEM : 0;
}

DLOCK_API int dlock_client_create(const dlock_client_options *opts, dlock_client **client_out)
{
    if (!client_out) return DLOCK_EINVAL;
    *client_out = NULL;
    if (!opts) return DLOCK_EINVAL;
    dlock_client *c = calloc(1, sizeof(*c));
    if (!c) return DLOCK_ENOMEM;
    c->wake_pipe[0] = c->wake_pipe[1] = -1;
    atomic_init(&c->drift_ppm, DLOCK_DRIFT_PPM_DEFAULT);
    atomic_init(&c->drift_ms, DLOCK_DRIFT_MS_DEFAULT);
    int rc = init_sync(c);
    if (rc) {
        free(c);
        return rc;
    }
    dlock__metrics_init(c);
    rc = copy_options(c, opts);
    if (rc == 0) rc = dlock__err_from_common(dlock__random_hex(c->id, 16));
    c->be = dlock__backend_for_url(c->url_copy);
    if (rc == 0) rc = c->be->attach(c);
    if (rc == 0) rc = dlock__watchdog_start(c);
    if (rc) {
        dlock_client_destroy(c);
        return rc;
    }
    *client_out = c;
    return 0;
}

DLOCK_API void dlock_client_destroy(dlock_client *c)
{
    if (!c) return;
    if (c->be && c->be->quiesce) c->be->quiesce(c);
    dlock__watchdog_stop(c);
    dlock__held_report(c);
    if (c->be) c->be->detach(c);
    dlock__pool_destroy(&c->pool);
    dlock__url_free(&c->url);
    free(c->url_copy);
    free(c->prefix_copy);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->sub_mu);
    pthread_mutex_destroy(&c->wd_mu);
    pthread_mutex_destroy(&c->m_mu);
    pthread_cond_destroy(&c->sub_cv);
    pthread_cond_destroy(&c->wd_cv);
    pthread_cond_destroy(&c->wd_dl_cv);
    free(c);
}

