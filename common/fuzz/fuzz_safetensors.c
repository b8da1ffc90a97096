/* common/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors reader.
 *
 *   make fuzz            (clang -fsanitize=fuzzer,address,undefined; build/fuzz/common/fuzz/fuzz_safetensors)
 *   build/fuzz/common/fuzz/fuzz_safetensors -max_total_time=60 CORPUS_DIR common/tests/data/safetensors-corpus
 *
 * Properties checked on every input: dp_st_parse returns DP_OK or DP_ERR_FORMAT
 * (DP_ERR_NOMEM is tolerated) and never crashes; a rejection carries a message;
 * an accepted file re-serialises, re-parses to the same tensors and metadata, and
 * serialising that again is byte-identical. A violated property aborts (the
 * fuzzer reports it as a crash). Links only status.c tensor.c safetensors.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dp_tensor_set s, r;
    dp_clear_error();
    dp_status st = dp_st_parse(&s, data, size);
    if (st == DP_ERR_NOMEM) return 0;
    if (st != DP_OK) {
        if (st != DP_ERR_FORMAT || dp_last_error()[0] == '\0') abort();
        return 0;
    }
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    if (dp_st_serialize(&b1, &l1, &s) != DP_OK) abort(); /* a parsed set must be writable */
    if (dp_st_parse(&r, b1, l1) != DP_OK) abort();
    if (!dp_tset_equal(&s, &r)) abort();
    if (dp_st_serialize(&b2, &l2, &r) != DP_OK || l1 != l2 || memcmp(b1, b2, l1) != 0) abort();
    free(b1);
    free(b2);
    dp_tset_free(&r);
    dp_tset_free(&s);
    return 0;
}
