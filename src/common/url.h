/* url.h: parses the Redis endpoint URLs every dlock program accepts.
 * A parsed dlock__url owns all its strings; dlock__url_free releases them.
 * Parsing never touches the network and rejects anything it cannot fully
 * understand, naming the problem in err. */
#ifndef DLOCK_COMMON_URL_H
#define DLOCK_COMMON_URL_H

#include <stddef.h>

typedef enum dlock__url_kind {
    DLOCK__URL_TCP = 0,      /* redis://[user[:pass]@]host[:port][/db] */
    DLOCK__URL_UNIX = 1,     /* unix:///path/to.sock[?db=N] */
    DLOCK__URL_SENTINEL = 2, /* redis-sentinel://[user:pass@]h:p[,h:p...]/master[?db=N] */
    DLOCK__URL_CLUSTER = 3,  /* redis-cluster://[user[:pass]@]h:p[,h:p...][?db=0] */
} dlock__url_kind;

typedef struct dlock__hostport {
    char *host;
    int port;
} dlock__hostport;

typedef struct dlock__url {
    dlock__url_kind kind;
    char *host;     /* TCP: host name or address (IPv6 without brackets) */
    int port;       /* TCP: default 6379 */
    char *path;     /* UNIX: socket path */
    char *user;     /* NULL when absent */
    char *password; /* NULL when absent; percent-decoded */
    int db;         /* default 0 */
    dlock__hostport *sentinels; /* SENTINEL: at least one */
    size_t n_sentinels;
    char *master_name;          /* SENTINEL */
    dlock__hostport *seeds;     /* CLUSTER: seed nodes, at least one (default port 6379) */
    size_t n_seeds;
} dlock__url;

/* Parses s into *out (zeroed first). Returns 0, DLOCK__EURL (err says why),
 * DLOCK__ETLS for rediss://, DLOCK__EINVAL for NULL, DLOCK__ENOMEM. */
int dlock__url_parse(const char *s, dlock__url *out, char *err, size_t errlen);

/* Deep copy; returns 0 or DLOCK__ENOMEM. */
int dlock__url_copy(const dlock__url *src, dlock__url *dst);

void dlock__url_free(dlock__url *u);

/* The AUTH command for u's credentials, into argv; returns its argc: 3
 * "AUTH user password" when a user is given (password "" when the URL has
 * none: a `nopass` ACL user accepts it, any other refuses it), 2 "AUTH
 * password" for a password alone, 0 when there is nothing to send. */
int dlock__url_auth_argv(const dlock__url *u, const char *argv[3]);

/* Writes a password-free description ("127.0.0.1:7001", "unix:/p.sock",
 * "sentinel mymaster") for log lines. */
void dlock__url_describe(const dlock__url *u, char *buf, size_t len);

/* ---- shared with etcd_url.c ---- */
/* host[:port] or [v6]:port of [s, s+n) into hp (default_port if absent). */
int dlock__url_hostport(const char *s, size_t n, dlock__hostport *hp, int default_port, char *err,
                        size_t errlen);
/* [user[:password]@] at the start of the authority [*auth, *auth+*alen);
 * advances past it; percent-decoded copies (NULL when absent) on success. */
int dlock__url_userinfo(const char **auth, size_t *alen, char **user_out, char **password_out,
                        char *err, size_t errlen);
/* Percent-decodes [s, s+n) into a new string; NULL and *bad on a bad
 * escape or %00, NULL alone when out of memory. */
char *dlock__url_decode(const char *s, size_t n, int *bad);

#endif
