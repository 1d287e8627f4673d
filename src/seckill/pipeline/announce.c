/* announce.c: the announcement stream and the persister's waiter thread.
 * Invariant: every id XADDed to seckill:announce after sk_announce_start
 * is queued once (the waiter reads on from the last id it saw, from the
 * stream's last id at start), and while the queue is not empty the waiter
 * keeps unblocking the persister (CLIENT UNBLOCK ... TIMEOUT, every 5 ms),
 * so an unblock sent just before the persister blocked is not lost. The
 * periodic discovery stays the safety net (a waiter that lost Redis, a
 * trimmed announcement). */
#include "announce.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "redis_connect.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

#define QUEUE_MAX 1024
#define BLOCK_MS "500"
#define UNBLOCK_EVERY_MS 5

struct sk_announce {
    dlock__conn *rc;
    pthread_t th;
    atomic_int stop;
    atomic_llong target;
    pthread_mutex_t mu;
    char (*q)[65];
    size_t n;
    char last[48]; /* last stream id read (thread only) */
};

int sk_announce_campaign(dlock__conn *rc, const char *campaign)
{
    const char *argv[] = {"XADD", SK_ANNOUNCE_STREAM, "MAXLEN", "~", "1000", "*", "campaign", campaign};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 8, argv, NULL, &r));
    if (!err && dlock__reply_kind(r) == DLOCK__R_ERROR) err = DLOCK_ESERVER;
    dlock__reply_free(r);
    return err;
}

static void queue_push(sk_announce *a, const char *id)
{
    if (!sk_valid_campaign_id(id)) return;
    pthread_mutex_lock(&a->mu);
    if (a->n < QUEUE_MAX) snprintf(a->q[a->n++], 65, "%s", id);
    pthread_mutex_unlock(&a->mu);
}

size_t sk_announce_queued(sk_announce *a)
{
    pthread_mutex_lock(&a->mu);
    size_t n = a->n;
    pthread_mutex_unlock(&a->mu);
    return n;
}

size_t sk_announce_take(sk_announce *a, char (*ids)[65], size_t max)
{
    pthread_mutex_lock(&a->mu);
    size_t n = a->n < max ? a->n : max;
    memcpy(ids, a->q, n * sizeof(*ids));
    memmove(a->q, a->q + n, (a->n - n) * sizeof(*a->q));
    a->n -= n;
    pthread_mutex_unlock(&a->mu);
    return n;
}

void sk_announce_set_target(sk_announce *a, int64_t client_id) { atomic_store(&a->target, client_id); }

/* Queues the campaigns of one XREAD reply; remembers the last id. */
static void take_entries(sk_announce *a, const dlock__reply *r)
{
    const dlock__reply *s = dlock__reply_count(r) ? dlock__reply_at(r, 0) : NULL;
    const dlock__reply *es = s ? dlock__reply_at(s, 1) : NULL;
    for (size_t i = 0; es && i < dlock__reply_count(es); i++) {
        const dlock__reply *e = dlock__reply_at(es, i);
        const char *id = dlock__reply_str(dlock__reply_at(e, 0), NULL);
        if (id) snprintf(a->last, sizeof(a->last), "%s", id);
        const dlock__reply *f = dlock__reply_at(e, 1);
        for (size_t k = 0; f && k + 1 < dlock__reply_count(f); k += 2) {
            const char *name = dlock__reply_str(dlock__reply_at(f, k), NULL);
            if (name && strcmp(name, "campaign") == 0) queue_push(a, dlock__reply_str(dlock__reply_at(f, k + 1), NULL));
        }
    }
}

/* While announcements wait, wakes the persister's blocking read. */
static void wake_persister(sk_announce *a)
{
    for (int i = 0; i < 200 && sk_announce_queued(a) && !atomic_load(&a->stop); i++) {
        long long target = atomic_load(&a->target);
        if (target > 0) {
            char id[24];
            snprintf(id, sizeof(id), "%lld", target);
            const char *argv[] = {"CLIENT", "UNBLOCK", id, "TIMEOUT"};
            dlock__reply *r = NULL;
            if (dlock__conn_cmd(a->rc, 4, argv, NULL, &r) == 0) dlock__reply_free(r);
        }
        dlock__sleep_ms(UNBLOCK_EVERY_MS);
    }
}

static void *waiter_main(void *arg)
{
    sk_announce *a = arg;
    while (!atomic_load(&a->stop)) {
        const char *argv[] = {"XREAD", "COUNT", "100", "BLOCK", BLOCK_MS, "STREAMS", SK_ANNOUNCE_STREAM, a->last};
        dlock__reply *r = NULL;
        int err = sk_err_from_common(dlock__conn_cmd(a->rc, 8, argv, NULL, &r));
        if (err || dlock__reply_kind(r) == DLOCK__R_ERROR) {
            dlock__reply_free(r);
            dlock__sleep_ms(200); /* Redis away: the periodic discovery covers the gap */
            continue;
        }
        if (dlock__reply_kind(r) == DLOCK__R_ARRAY) take_entries(a, r);
        dlock__reply_free(r);
        wake_persister(a);
    }
    return NULL;
}

/* The stream's last id now ("0-0" when empty): the waiter reads after it. */
static int last_id(sk_announce *a)
{
    const char *argv[] = {"XREVRANGE", SK_ANNOUNCE_STREAM, "+", "-", "COUNT", "1"};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(a->rc, 6, argv, NULL, &r));
    if (err) return err;
    snprintf(a->last, sizeof(a->last), "0-0");
    if (dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) == 1) {
        const char *id = dlock__reply_str(dlock__reply_at(dlock__reply_at(r, 0), 0), NULL);
        if (id) snprintf(a->last, sizeof(a->last), "%s", id);
    }
    dlock__reply_free(r);
    return 0;
}

int sk_announce_start(const char *redis_url, sk_announce **out, char *err, size_t errlen)
{
    *out = NULL;
    sk_announce *a = calloc(1, sizeof(*a));
    if (!a || !(a->q = calloc(QUEUE_MAX, sizeof(*a->q)))) {
        free(a);
        snprintf(err, errlen, "out of memory");
        return DLOCK_ENOMEM;
    }
    pthread_mutex_init(&a->mu, NULL);
    int rc = sk_err_from_common(dlock__conn_open_url(redis_url, 5000, &a->rc, err, errlen));
    if (!rc) rc = last_id(a);
    if (!rc && pthread_create(&a->th, NULL, waiter_main, a) != 0) rc = DLOCK_ENOMEM;
    if (rc) {
        dlock__conn_close(a->rc);
        pthread_mutex_destroy(&a->mu);
        free(a->q);
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void sk_announce_stop(sk_announce *a)
{
    if (!a) return;
    atomic_store(&a->stop, 1);
    pthread_join(a->th, NULL);
    dlock__conn_close(a->rc);
    pthread_mutex_destroy(&a->mu);
    free(a->q);
    free(a);
}
