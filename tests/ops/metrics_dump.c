/* metrics_dump.c: prints libdlock's Prometheus text after one acquire and
 * release on the given Redis URL, so the ops test can check the alert
 * rules and the dashboard against names a real client exports. */
#include <stdio.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: metrics_dump REDIS_URL\n", stderr);
        return 2;
    }
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = argv[1];
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char *text = NULL;
    int rc = dlock_client_create(&o, &c);
    if (rc == 0) rc = dlock_lock_new(c, "ops:metrics", NULL, &l);
    if (rc == 0) rc = dlock_lock_try_lock(l, 1000, 0, NULL);
    if (rc == 0) rc = dlock_lock_unlock(l);
    if (rc == 0) rc = dlock_metrics_render(c, &text);
    if (rc == 0) fputs(text, stdout);
    else fprintf(stderr, "metrics_dump: %s\n", dlock_strerror(rc));
    dlock_free(text);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    return rc == 0 ? 0 : 1;
}
