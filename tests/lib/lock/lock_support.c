/* lock_support.c: see lock_support.h. Messages are kept by tests/support/logcap.c. */
#include "lock_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logcap.h"

bool ls_log_contains(const char *needle) { return test_log_contains(needle); }

void ls_log_clear(void) { test_log_clear(); }

dlock_client *ls_client_opts(const test_server *srv, dlock_client_options *o)
{
    o->url = srv->url;
    o->key_prefix = test_prefix();
    o->log_fn = test_log_capture;
    o->log_level = DLOCK_LOG_DEBUG;
    dlock_client *c = NULL;
    int rc = dlock_client_create(o, &c);
    if (rc) fprintf(stderr, "dlock_client_create(%s): %s\n", srv->url, dlock_strerror(rc));
    return c;
}

dlock_client *ls_client(const test_server *srv, int64_t watchdog_ms)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.watchdog_timeout_ms = watchdog_ms > 0 ? watchdog_ms : 600;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    return ls_client_opts(srv, &o);
}

dlock_lock *ls_lock(dlock_client *c, const char *name, dlock_lock_kind kind)
{
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = kind;
    dlock_lock *l = NULL;
    int rc = dlock_lock_new(c, name, &lo, &l);
    if (rc) {
        fprintf(stderr, "dlock_lock_new(%s): %s\n", name, dlock_strerror(rc));
        abort();
    }
    return l;
}

const char *ls_key(const char *name)
{
    static __thread char buf[512];
    snprintf(buf, sizeof(buf), "%s%s", test_prefix(), name);
    return buf;
}

bool ls_exists(const test_server *srv, const char *key)
{
    char out[64] = "";
    const char *argv[2] = {"EXISTS", key};
    return lt_cmd(srv, out, sizeof(out), 2, argv) == 0 && strcmp(out, "1") == 0;
}

test_server ls_srv;
dlock_client *ls_cl;

int ls_setup(void **state)
{
    (void)state;
    test_prefix();
    if (lt_start(&ls_srv) != 0) return -1;
    ls_cl = ls_client(&ls_srv, 600);
    return ls_cl ? 0 : -1;
}

int ls_teardown(void **state)
{
    (void)state;
    dlock_client_destroy(ls_cl);
    lt_stop(&ls_srv);
    return 0;
}
