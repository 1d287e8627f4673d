/* http_body.c: a request's JSON body, read once by the JSON reader
 * (json.h) for the routes that take one (campaigns, purchases).
 * Invariant: a body that is not JSON is answered 400 here and never
 * reaches a handler. */
#include <string.h>

#include "common_err.h"
#include "http_internal.h"
#include "json.h"

/* The JSON body parsed into doc: 0, 1 for an empty body (doc untouched),
 * or -1 when it has answered already (400 malformed, 500). Bodies over
 * max-body never get here: the HTTP layer answers 413 itself. */
int sk__http_read_json(hreq *q, dlock__json_doc *doc)
{
    char msg[200];
    size_t len = 0;
    const char *body = sk_hs_req_body(q->req, &len);
    int rc = len ? dlock__json_parse(body, len, doc, msg + 14, sizeof(msg) - 14) : 0;
    if (rc == DLOCK__EINVAL) {
        memcpy(msg, "invalid JSON: ", 14); /* the reader's refusal, json.h */
        sk__http_reply_error(q, 400, "bad_request", msg);
        return -1;
    }
    if (rc) {
        sk__http_reply_error(q, 500, "internal", "out of memory");
        return -1;
    }
    return len ? 0 : 1;
}

