/* consumer.c: a program outside the tree, built against an installed
 * libdlock through pkg-config and through find_package(dlock). It checks
 * that the public header and the exported symbols are usable. */
#include <dlock/dlock.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    dlock_client_options opts;
    dlock_client_options_init(&opts);
    opts.url = "rediss://127.0.0.1:1"; /* refused before any network I/O */
    dlock_client *c = NULL;
    int rc = dlock_client_create(&opts, &c);
    printf("dlock %s: %s\n", DLOCK_VERSION, dlock_strerror(rc));
    return rc == DLOCK_ETLS && c == NULL && strcmp(dlock_strerror(DLOCK_OK), "success") == 0 ? 0 : 1;
}
