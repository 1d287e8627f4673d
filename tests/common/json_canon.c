/* json_canon.c: the server's JSON reader (src/common/json.c) as a filter for
 * the differential test (test_json_differential.py). Each stdin line is
 * one input in hex; each stdout line is its canonical form, or "REFUSED "
 * and the reader's message. The canonical form is the one the test writes
 * for Python's reading: n, t, f, I:<int64>, F:<%.17g>, S:<hex of the
 * decoded bytes>, A[v,...], O{<hex key>:v,...} in document order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static void put_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

static void put_val(const dlock__json_doc *d, const dlock__json_val *v)
{
    switch (v->type) {
    case DLOCK__JSON_NULL: fputs("n", stdout); return;
    case DLOCK__JSON_BOOL: fputs(v->b ? "t" : "f", stdout); return;
    case DLOCK__JSON_NUMBER:
        if (v->is_int) printf("I:%lld", (long long)v->i);
        else printf("F:%.17g", v->d);
        return;
    case DLOCK__JSON_STRING:
        fputs("S:", stdout);
        put_hex(v->s, v->len);
        return;
    default: break;
    }
    bool obj = v->type == DLOCK__JSON_OBJECT;
    fputs(obj ? "O{" : "A[", stdout);
    for (int c = v->first; c >= 0; c = d->nodes[c].next) {
        if (c != v->first) fputs(",", stdout);
        if (obj) {
            put_hex(d->nodes[c].key, d->nodes[c].key_len);
            fputs(":", stdout);
        }
        put_val(d, &d->nodes[c]);
    }
    fputs(obj ? "}" : "]", stdout);
}

static int unhex(const char *h, size_t n, char *out)
{
    for (size_t i = 0; i < n / 2; i++) {
        unsigned b;
        if (sscanf(h + 2 * i, "%2x", &b) != 1) return -1;
        out[i] = (char)b;
    }
    return 0;
}

int main(void)
{
    size_t cap = 0;
    char *line = NULL;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        size_t n = (size_t)got;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        /* exact-size copy: a read past the end shows under ASan */
        char *in = malloc(n / 2 ? n / 2 : 1);
        if (!in || n % 2 || unhex(line, n, in) != 0) {
            fprintf(stderr, "json_canon: bad hex line\n");
            return 2;
        }
        dlock__json_doc d;
        char err[160];
        if (dlock__json_parse(in, n / 2, &d, err, sizeof(err)) == 0) {
            put_val(&d, &d.nodes[0]);
            fputs("\n", stdout);
            dlock__json_free(&d);
        } else {
            printf("REFUSED %s\n", err);
        }
        free(in);
    }
    free(line);
    return 0;
}
