/* persist_thread.h: a seckill-persist worker (sk_persist_run) on a thread
 * of the test, for the pipeline tests that run one beside the engine, or
 * two at once. One pt_worker per thread; start and stop from the test's
 * main thread only. */
#ifndef SK_TEST_PERSIST_THREAD_H
#define SK_TEST_PERSIST_THREAD_H

#include <pthread.h>
#include <stdatomic.h>

#include "persist.h"

typedef struct pt_worker {
    sk_persist_opts o;   /* set by pt_init; adjust before pt_start */
    sk_persist_stats st; /* the run's figures, after pt_stop */
    atomic_int stop;
    int rc;              /* sk_persist_run's code, after pt_stop */
    pthread_t th;
} pt_worker;

/* The tests' usual options: redis_url and database_url (copied pointers:
 * they must outlive the worker), campaign (NULL: every campaign), BLOCK
 * 50 ms, a sweep every 100 ms, no payment timeout, stop on w->stop. */
void pt_init(pt_worker *w, const char *redis_url, const char *database_url, const char *campaign);
/* 0, or pthread_create's error. */
int pt_start(pt_worker *w);
/* Stops and joins the worker; returns its sk_persist_run code. */
int pt_stop(pt_worker *w);

#endif
