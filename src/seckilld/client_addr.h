/* client_addr.h: which address a purchase comes from, for the per-address
 * rate limit: the peer itself, unless the peer is a trusted proxy; then the
 * rightmost X-Forwarded-For (or Forwarded: for=) entry not in the trusted
 * set. Every entry looked at must be an IPv4 or IPv6 address: anything
 * else is refused (never a key). Pure functions: thread-safe. */
#ifndef SK_CLIENT_ADDR_H
#define SK_CLIENT_ADDR_H

#include <stdbool.h>
#include <stddef.h>

#define SK_TRUSTED_MAX 32
#define SK_ADDR_MAX 46 /* INET6_ADDRSTRLEN */

typedef struct sk_cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int bits;
} sk_cidr;

typedef struct sk_trusted {
    sk_cidr v[SK_TRUSTED_MAX];
    int n; /* 0: no proxy trusted, the peer is the client */
} sk_trusted;

/* The private and loopback ranges --trust-forwarded (deprecated) trusts. */
#define SK_TRUSTED_PRIVATE "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"

/* "CIDR[,CIDR...]" (an address alone is a /32 or /128; "" is none) into
 * out: 0, or -1 with err saying which entry is wrong. */
int sk_trusted_parse(const char *list, sk_trusted *out, char *err, size_t errlen);
/* Whether the address text ip is in t (false when ip is no address). */
bool sk_trusted_has(const sk_trusted *t, const char *ip);

/* The client address of a request from peer with the n X-Forwarded-For
 * header values xff (in order) or, when n == 0, the m Forwarded values
 * fwd, into out (SK_ADDR_MAX, canonical text). 0, or -1 when an entry
 * looked at is not an address (the request is refused: 400). */
int sk_client_addr(const sk_trusted *t, const char *peer, const char *const *xff, size_t n,
                   const char *const *fwd, size_t m, char out[SK_ADDR_MAX]);

/* The key one client address counts under for the per-address limits
 * (connections, purchase rate): an IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) as its IPv4 address a.b.c.d; another IPv6 address as
 * its network of v6_prefix bits ("2001:db8:1:2::/64"; 128, or a value
 * outside 1..127: the address itself, canonical); IPv4 as it is; text that
 * is no address (a Unix socket's "unix") unchanged, cut to fit. One IPv6
 * host commonly holds a whole /64, so counting each /128 alone lets one
 * client take any number of shares. */
#define SK_IPV6_PREFIX_DEFAULT 64
void sk_addr_group(const char *ip, int v6_prefix, char out[SK_ADDR_MAX]);

#endif
