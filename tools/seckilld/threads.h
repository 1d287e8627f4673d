/* threads.h: seckilld --threads N: N event loops in one process, each
 * running the same serving body on its own thread with its own listener
 * (SO_REUSEPORT, one port), engine and Redis connection; what they share
 * (connection caps, /metrics, the one coalescer that decides every loop's
 * purchases) is handed to each in seckilld_shared. */
#ifndef SECKILLD_THREADS_H
#define SECKILLD_THREADS_H

#include "config.h"
#include "hserver.h"
#include "http.h"

typedef struct seckilld_shared {
    sk_http_group *group; /* /metrics over every loop */
    sk_hs_door *door;     /* max-connections and max-conns-per-addr over every loop */
    int stop_fd;          /* readable: stop accepting and drain (the main thread got SIGTERM/SIGINT) */
    int listen_fd;        /* this loop's listener (SO_REUSEPORT, bound by the main thread); the loop owns it */
    int port;             /* the port they share (also when --port 0 chose one) */
    int loop;             /* this loop's number, 1..n (its log lines say "loop N: ") */
    struct sk_relay *relay; /* every loop's purchases decided by loop 1's engine (relay.h) */
} seckilld_shared;

/* A loop's body: serves until drained; 0, 1 (runtime) or 2 (configuration). */
typedef int (*seckilld_loop_fn)(const seckilld_config *c, const seckilld_shared *sh);

/* The number of loops c asks for (0: one per online CPU). */
int seckilld_threads_wanted(const seckilld_config *c);
/* Binds n listeners on c's address and port (a bind error is printed once:
 * exit code 2), runs n loops of body and waits for them. SIGTERM/SIGINT
 * (taken by the calling thread) make every loop drain; a loop failing
 * stops the others. Returns the worst exit code (2 > 1 > 0). */
int seckilld_threads_run(const seckilld_config *c, int n, seckilld_loop_fn body);

#endif
