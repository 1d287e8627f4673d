/* client_addr.c: trusted proxies and the forwarded client address
 * (client_addr.h). The entries of every X-Forwarded-For line (or every
 * Forwarded element's for=) form one list, read from the right: the first
 * one not trusted is the client; when all are trusted, the leftmost. */
#include "client_addr.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_HOPS 64

/* Text s (len bytes) as an address into c (bits = full length), as
 * written: ::ffff:a.b.c.d stays IPv6. */
static bool parse_ip(const char *s, size_t len, sk_cidr *c)
{
    char buf[SK_ADDR_MAX];
    if (len == 0 || len >= sizeof(buf)) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    memset(c, 0, sizeof(*c));
    if (inet_pton(AF_INET, buf, c->addr) == 1) {
        c->family = AF_INET;
        c->bits = 32;
        return true;
    }
    if (inet_pton(AF_INET6, buf, c->addr) == 1) {
        c->family = AF_INET6;
        c->bits = 128;
        return true;
    }
    return false;
}

/* An IPv4-mapped IPv6 address or range (::ffff:a.b.c.d, /96 or longer) as
 * the IPv4 one: a dual-stack socket shows an IPv4 peer that way, and a
 * proxy trusted as 10.0.0.0/8 must be trusted when it arrives so. */
static void unmap(sk_cidr *c)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (c->family != AF_INET6 || c->bits < 96 || memcmp(c->addr, mapped, sizeof(mapped)) != 0) return;
    memmove(c->addr, c->addr + 12, 4);
    memset(c->addr + 4, 0, 12);
    c->family = AF_INET;
    c->bits -= 96;
}

/* An address as it is compared and reported: mapped IPv4 as IPv4. */
static bool parse_addr(const char *s, size_t len, sk_cidr *c)
{
    if (!parse_ip(s, len, c)) return false;
    unmap(c);
    return true;
}

static bool in_cidr(const sk_cidr *net, const sk_cidr *a)
{
    if (net->family != a->family) return false;
    int full = net->bits / 8, rest = net->bits % 8;
    if (memcmp(net->addr, a->addr, (size_t)full) != 0) return false;
    if (!rest) return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (net->addr[full] & mask) == (a->addr[full] & mask);
}

static bool has(const sk_trusted *t, const sk_cidr *a)
{
    for (int i = 0; i < t->n; i++)
        if (in_cidr(&t->v[i], a)) return true;
    return false;
}

/* One "addr[/bits]" entry. */
static bool parse_cidr(const char *s, size_t len, sk_cidr *c)
{
    const char *slash = memchr(s, '/', len);
    if (!parse_ip(s, slash ? (size_t)(slash - s) : len, c)) return false;
    if (!slash) {
        unmap(c);
        return true;
    }
    size_t nd = len - (size_t)(slash - s) - 1;
    if (nd < 1 || nd > 3 || strspn(slash + 1, "0123456789") < nd) return false;
    int bits = 0;
    for (size_t i = 0; i < nd; i++) bits = bits * 10 + (slash[1 + i] - '0');
    if (bits > c->bits) return false;
    c->bits = bits;
    unmap(c);
    return true;
}

int sk_trusted_parse(const char *list, sk_trusted *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *p = list ? list : "";
    while (*p) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, " ,");
        if (!len) break;
        if (out->n == SK_TRUSTED_MAX) {
            snprintf(err, errlen, "more than %d trusted proxy ranges", SK_TRUSTED_MAX);
            return -1;
        }
        if (!parse_cidr(p, len, &out->v[out->n])) {
            snprintf(err, errlen, "'%.*s' is not an address or CIDR range", (int)(len > 60 ? 60 : len), p);
            return -1;
        }
        out->n++;
        p += len;
    }
    return 0;
}

bool sk_trusted_has(const sk_trusted *t, const char *ip)
{
    sk_cidr a;
    return parse_addr(ip, strlen(ip), &a) && has(t, &a);
}

/* The address inside a Forwarded for= value: "1.2.3.4", "1.2.3.4:80",
 * "[v6]" or "[v6]:80", quoted or not. */
static bool forwarded_node(const char *s, size_t len, sk_cidr *c)
{
    if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
        s++;
        len -= 2;
    }
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close) return false;
        size_t after = len - (size_t)(close - s) - 1;
        if (after && (close[1] != ':' || after < 2)) return false;
        if (!parse_ip(s + 1, (size_t)(close - s) - 1, c) || c->family != AF_INET6) return false;
        unmap(c);
        return true;
    }
    const char *colon = memchr(s, ':', len);
    return parse_addr(s, colon ? (size_t)(colon - s) : len, c) && c->family == AF_INET;
}

/* Appends the entries of one header value to hops; false on a bad one. */
static bool add_hops(const char *v, bool forwarded, sk_cidr *hops, size_t *nh)
{
    const char *p = v;
    for (;;) {
        p += strspn(p, " \t");
        size_t len = strcspn(p, ",");
        size_t tl = len;
        while (tl && (p[tl - 1] == ' ' || p[tl - 1] == '\t')) tl--;
        if (*nh == MAX_HOPS) return false;
        if (!forwarded) {
            if (!parse_addr(p, tl, &hops[*nh])) return false;
            (*nh)++;
        } else { /* pairs a=b;c=d: only for= counts, exactly once */
            const char *q = p, *end = p + tl;
            int seen = 0;
            while (q < end) {
                size_t pl = strcspn(q, ";");
                if (pl > (size_t)(end - q)) pl = (size_t)(end - q);
                while (pl && q[0] == ' ') q++, pl--;
                if (pl > 4 && strncasecmp(q, "for=", 4) == 0) {
                    if (seen++ || !forwarded_node(q + 4, pl - 4, &hops[*nh])) return false;
                }
                q += pl + 1;
            }
            if (seen != 1) return false;
            (*nh)++;
        }
        if (p[len] != ',') return true;
        p += len + 1;
    }
}

int sk_client_addr(const sk_trusted *t, const char *peer, const char *const *xff, size_t n,
                   const char *const *fwd, size_t m, char out[SK_ADDR_MAX])
{
    sk_cidr hops[MAX_HOPS + 1], *pick = NULL;
    size_t nh = 0;
    size_t pl = strnlen(peer, SK_ADDR_MAX - 1); /* the peer, cut to fit as snprintf would */
    memcpy(out, peer, pl);
    out[pl] = '\0';
    /* nothing forwarded, or no proxy trusted: the peer, without parsing it
     * (the path of every request that reaches seckilld directly) */
    if (t->n == 0 || (n == 0 && m == 0)) return 0;
    if (!parse_addr(peer, strlen(peer), &hops[0]) || !has(t, &hops[0])) return 0;
    for (size_t i = 0; i < (n ? n : m); i++)
        if (!add_hops(n ? xff[i] : fwd[i], n == 0, hops, &nh)) return -1;
    for (size_t i = nh; i-- > 0;) {
        pick = &hops[i];
        if (!has(t, pick)) break;
    }
    if (pick && !inet_ntop(pick->family, pick->addr, out, SK_ADDR_MAX)) return -1;
    return 0;
}

void sk_addr_group(const char *ip, int v6_prefix, char out[SK_ADDR_MAX])
{
    size_t n = strnlen(ip, SK_ADDR_MAX - 1);
    memcpy(out, ip, n);
    out[n] = '\0';
    /* IPv4 text (no ':') is its own key: inet_pton takes only canonical
     * dotted quads, so parsing and printing it back would change nothing
     * (the path of nearly every request: one scan, no inet_pton) */
    if (!memchr(ip, ':', n)) return;
    sk_cidr a;
    if (!parse_addr(ip, strlen(ip), &a)) return;
    if (a.family == AF_INET) { /* mapped IPv4 (::ffff:a.b.c.d) is its IPv4 */
        inet_ntop(AF_INET, a.addr, out, SK_ADDR_MAX);
        return;
    }
    char net[SK_ADDR_MAX], key[64];
    bool whole = v6_prefix < 1 || v6_prefix >= 128;
    if (!whole) {
        int full = v6_prefix / 8, rest = v6_prefix % 8;
        if (rest) a.addr[full++] &= (unsigned char)(0xff << (8 - rest));
        memset(a.addr + full, 0, (size_t)(16 - full));
    }
    if (!inet_ntop(AF_INET6, a.addr, net, sizeof(net))) return;
    if (whole) snprintf(key, sizeof(key), "%s", net);
    else snprintf(key, sizeof(key), "%s/%d", net, v6_prefix);
    n = strnlen(key, SK_ADDR_MAX - 1); /* at most 39 + "/127": always fits */
    memcpy(out, key, n);
    out[n] = '\0';
}
