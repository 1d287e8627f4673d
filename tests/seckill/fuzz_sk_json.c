/* fuzz_sk_json.c: libFuzzer harness for the request-body JSON parser
 * (clang only: -fsanitize=fuzzer,address). Every input must parse or fail
 * with SK_EINVAL; a parsed document's nodes must be well linked. Run:
 *   fuzz_sk_json -runs=1000000 -max_len=9000 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "json.h"
#include "sk_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dlock__json_doc d;
    char err[128];
    int rc = dlock__json_parse((const char *)data, size, &d, err, sizeof(err));
    if (rc == 0) {
        for (int i = 0; i < d.n; i++) {
            const dlock__json_val *v = &d.nodes[i];
            if (v->first >= d.n || v->next >= d.n) abort();
            if (v->type == DLOCK__JSON_OBJECT) {
                for (int c = v->first; c >= 0; c = d.nodes[c].next)
                    if (!d.nodes[c].key) abort();
                if (v->first >= 0 && !dlock__json_get(&d, v, d.nodes[v->first].key)) abort();
            }
        }
        dlock__json_free(&d);
    } else if (rc != SK_EINVAL) {
        abort();
    }
    return 0;
}
