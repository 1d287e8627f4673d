/* fuzz_sk_json.c: libFuzzer harness for the one JSON reader of every body
 * (src/common/json.c; clang only: -fsanitize=fuzzer,address,undefined).
 * Every input must parse or fail with DLOCK__EINVAL and a message; a parsed
 * document must be well linked and keep json.h's promises: no key holds
 * U+0000, no object has a key twice (each member is the one its key finds),
 * every number is an int64 or a finite double. CI runs it for a bounded
 * time on tests/common/json_corpus and the differential test's cases
 * (scripts/fuzz.sh). By hand:
 *   fuzz_sk_json -max_total_time=60 -max_len=9000 CORPUS_DIR */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common_err.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_members(const dlock__json_doc *d, const dlock__json_val *obj)
{
    int count = 0;
    for (int c = obj->first; c >= 0; c = d->nodes[c].next) {
        const dlock__json_val *m = &d->nodes[c];
        if (!m->key || memchr(m->key, '\0', m->key_len) || m->key[m->key_len] != '\0') abort();
        if (dlock__json_get(d, obj, m->key) != m) abort(); /* a key found twice would find the first */
        count++;
    }
    if (count != obj->count) abort();
}

static void check_doc(const dlock__json_doc *d)
{
    for (int i = 0; i < d->n; i++) {
        const dlock__json_val *v = &d->nodes[i];
        if (v->first >= d->n || v->next >= d->n) abort();
        if (v->type == DLOCK__JSON_OBJECT) check_members(d, v);
        if (v->type == DLOCK__JSON_NUMBER && (!isfinite(v->d) || (v->is_int && (double)v->i != v->d))) abort();
        if (v->type == DLOCK__JSON_STRING && (!v->s || v->s[v->len] != '\0')) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dlock__json_doc d;
    char err[128] = "";
    int rc = dlock__json_parse((const char *)data, size, &d, err, sizeof(err));
    if (rc == 0) {
        check_doc(&d);
        dlock__json_free(&d);
    } else if (rc != DLOCK__EINVAL || !err[0]) {
        abort();
    }
    return 0;
}
