/* hs_req.c: what a handler reads from a request (method, target, headers,
 * body, peer) and the answer headers it adds. Strings point into the
 * request and live until it is answered. */
#include "hs_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlock/dlock.h"
#include "json.h"
#include "sk_err.h"
#include "util.h"

int sk_hs_req_method(const sk_hs_req *r) { return r->method; }
const char *sk_hs_req_method_name(const sk_hs_req *r) { return http_method_str((enum http_method)r->method); }
const char *sk_hs_req_path(const sk_hs_req *r) { return r->head ? r->head + r->path_off : "/"; }
const char *sk_hs_req_query(const sk_hs_req *r) { return r->query_off ? r->head + r->query_off : NULL; }
const char *sk_hs_req_peer(const sk_hs_req *r) { return r->peer; }
unsigned sk_hs_req_tag(const sk_hs_req *r) { return r->tag; }

/* Whether header i is called name (any case). The first byte, folded,
 * is compared before strcasecmp: most look-ups are for headers the
 * request does not have. */
static bool named(const sk_hs_req *r, size_t i, const char *name)
{
    const char *h = r->head + r->hdrs[i].name;
    return r->hdrs[i].value && (*h | 0x20) == (*name | 0x20) && strcasecmp(h, name) == 0;
}

const char *sk_hs_req_header(const sk_hs_req *r, const char *name)
{
    for (size_t i = 0; i < r->nhdrs; i++)
        if (named(r, i, name)) return r->head + r->hdrs[i].value;
    return NULL;
}

size_t sk_hs_req_headers(const sk_hs_req *r, const char *name, const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nhdrs; i++)
        if (named(r, i, name)) {
            if (n < max) out[n] = r->head + r->hdrs[i].value;
            n++;
        }
    return n;
}

const char *sk_hs_req_body(const sk_hs_req *r, size_t *len_out)
{
    *len_out = r->body_len;
    return r->body ? r->body : "";
}

static bool clean(const char *s, size_t *len_out)
{
    size_t n = strcspn(s, "\r\n");
    *len_out = n;
    return s[n] == '\0';
}

/* Room for n more bytes of answer headers. */
static int outh_room(sk_hs_req *r, size_t n)
{
    size_t need = r->outh_len + n;
    if (need <= r->outh_cap) return 0;
    size_t cap = r->outh_cap ? r->outh_cap * 2 : 128;
    while (cap < need) cap *= 2;
    char *p = realloc(r->outh, cap);
    if (!p) return DLOCK_ENOMEM;
    r->outh = p;
    r->outh_cap = cap;
    return 0;
}

int sk_hs_reply_header(sk_hs_req *r, const char *name, const char *value)
{
    size_t nl, vl;
    if (!clean(name, &nl) || !clean(value, &vl) || !nl || memchr(name, ':', nl)) return SK_EINVAL;
    if (outh_room(r, nl + vl + 4)) return DLOCK_ENOMEM;
    char *p = r->outh + r->outh_len;
    memcpy(p, name, nl);
    memcpy(p + nl, ": ", 2);
    memcpy(p + nl + 2, value, vl);
    memcpy(p + nl + 2 + vl, "\r\n", 2);
    r->outh_len += nl + vl + 4;
    return 0;
}

int sk_hs_reply_header_lines(sk_hs_req *r, const char *lines, size_t n)
{
    if (outh_room(r, n)) return DLOCK_ENOMEM;
    memcpy(r->outh + r->outh_len, lines, n);
    r->outh_len += n;
    return 0;
}

void sk_hs_error_body(dlock__buf *b, const char *code, const char *msg)
{
    dlock__buf_append(b, "{\"error\":", 9);
    dlock__json_put_str(b, code, strlen(code));
    dlock__buf_append(b, ",\"message\":", 11);
    dlock__json_put_str(b, msg, strlen(msg));
    dlock__buf_append(b, "}\n", 2);
}

void sk_hs_reply_error(sk_hs_req *r, int status, const char *code, const char *msg)
{
    dlock__buf b = {0};
    sk_hs_error_body(&b, code, msg);
    static const char lines[] = "Content-Type: application/json\r\nCache-Control: no-store\r\n";
    sk_hs_reply_header_lines(r, lines, sizeof(lines) - 1);
    if (b.oom) sk_hs_reply(r, 500, NULL, 0);
    else sk_hs_reply(r, status, b.data, b.len);
    dlock__buf_free(&b);
}
