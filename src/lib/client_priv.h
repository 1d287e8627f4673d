/* client_priv.h: the dlock_client structure, shared by the files that make
 * up the client (client.c, client_create.c, subscriber.c, watchdog.c,
 * metrics.c, errors.c) and the backends' attach (backend.c, etcd_client.c),
 * by nothing else. Lock objects use client_internal.h only. The subscriber
 * and the watchdog reach Redis through c->pool (pool.h), never through
 * client.c. Lock order: mu, pool.mu, sub_mu, wd_mu and m_mu are leaves
 * (never nested). */
#ifndef DLOCK_LIB_CLIENT_PRIV_H
#define DLOCK_LIB_CLIENT_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client_internal.h"
#include "pool.h"
#include "url.h"

#define DLOCK__HOLD_WINDOW 1024 /* hold-time samples kept for quantiles */

typedef struct dlock__chan dlock__chan;

struct dlock_client {
    dlock_client_options opts; /* strings point at the copies below */
    char *url_copy;
    char *prefix_copy;
    size_t prefix_len;
    dlock__url url;            /* as given */
    char id[33];

    dlock__pool pool;          /* master endpoint, connections, script shas */

    /* ---- held registry (mu) ---- */
    pthread_mutex_t mu;
    dlock__held *held;

    /* ---- subscriber (sub_mu) ---- */
    pthread_mutex_t sub_mu;
    pthread_cond_t sub_cv;     /* a subscription was confirmed */
    pthread_t sub_thread;
    bool sub_started;
    bool sub_stop;
    int wake_pipe[2];
    dlock__chan *chans;
    struct dlock__sub_node *sub_nodes; /* one connection per master; dispatcher thread only */

    /* ---- watchdog (wd_mu): the renewal thread and the deadline thread ---- */
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;      /* renewal thread's tick; a busy flag cleared */
    pthread_cond_t wd_dl_cv;   /* deadline thread: a registration came */
    pthread_t wd_thread;       /* renewals (I/O, bounded by the deadlines) */
    pthread_t wd_dl_thread;    /* losses at the deadline (never any I/O) */
    bool wd_started, wd_dl_started;
    bool wd_stop;
    dlock__renewable *wd_list;
    /* the validity rule's drift (dlock__client_valid_until) */
    _Atomic int64_t drift_ppm, drift_ms;

    /* ---- metrics (m_mu) ---- */
    pthread_mutex_t m_mu;
    uint64_t m_acquire, m_fail[3], m_renew, m_renew_fail, m_lost;
    uint64_t m_hold_count;
    double m_hold_sum_s;
    int64_t m_hold[DLOCK__HOLD_WINDOW]; /* ring of recent hold times (ms) */
    size_t m_hold_next;

    /* ---- backend (backend.h), chosen once at create ---- */
    const struct dlock__backend *be;
    void *be_state;            /* the backend's own state (etcd: etcd_client.c) */
};

int dlock__subscriber_start(dlock_client *c);
void dlock__subscriber_stop(dlock_client *c);
int dlock__watchdog_start(dlock_client *c);
void dlock__watchdog_stop(dlock_client *c);
void dlock__metrics_init(dlock_client *c);
/* At destroy, once the client's threads stopped: empties the held registry,
 * logging (WARN) each object that still holds something and orphaning it
 * (its orphan hook), so it can be freed after the client. */
void dlock__held_report(dlock_client *c);

#endif
