/* etcd_url.h: parses the etcd endpoint URLs libdlock accepts:
 *   etcd://[user:password@]host:port[,host:port...][/prefix]
 *   etcds://...same...[?cacert=PATH&cert=PATH&key=PATH]   (TLS)
 * A parsed dlock__etcd_url owns all its strings. Parsing never touches the
 * network and rejects what it cannot fully understand, naming it in err. */
#ifndef DLOCK_COMMON_ETCD_URL_H
#define DLOCK_COMMON_ETCD_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "url.h"

#define DLOCK__ETCD_DEFAULT_PORT 2379
#define DLOCK__ETCD_DEFAULT_PREFIX "/dlock"

typedef struct dlock__etcd_url {
    bool tls;                   /* etcds:// */
    dlock__hostport *endpoints; /* at least one, in the order given */
    size_t n_endpoints;
    char *user, *password;      /* NULL when absent (percent-decoded) */
    char *prefix;               /* "/x/y" (leading '/', no trailing '/'), default "/dlock" */
    char *cacert, *cert, *key;  /* etcds:// options, NULL when absent */
} dlock__etcd_url;

/* True when s starts with etcd:// or etcds://. */
bool dlock__etcd_url_is(const char *s);

/* Parses s into *out (zeroed first). Returns 0, DLOCK__EURL (err says why),
 * DLOCK__EINVAL for NULL, DLOCK__ENOMEM. On failure nothing is left to free. */
int dlock__etcd_url_parse(const char *s, dlock__etcd_url *out, char *err, size_t errlen);

void dlock__etcd_url_free(dlock__etcd_url *u);

#endif
