/* accountant/fuzz/fuzz_claims.c — libFuzzer target for the claims-file reader of
 * `audit-accounting` (CSV or JSON, docs/accounting.md §8): acct_claims_parse.
 *
 *   make fuzz; build/fuzz/accountant/fuzz/fuzz_claims -max_total_time=60 CORPUS accountant/tests/data/claims-corpus
 *
 * Properties: DP_OK (claims read, some possibly INVALID), or DP_ERR_FORMAT with a message
 * (DP_ERR_NOMEM tolerated); never a crash; a CSV with a NUL byte is never accepted. Replayed
 * in `make test` by conformance/tests/test_fuzz_corpora.c (DP_FUZZ_NO_MAIN). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/fuzz/fuzz.h"
#include "accountant/acct.h"

static int fuzz_check_claims(const uint8_t *data, size_t size) {
    int n = -1, bad = -1;
    dp_clear_error();
    dp_status st = acct_claims_parse(&n, &bad, (const char *)data, size, "fuzz.csv");
    if (st == DP_ERR_NOMEM) return 1;
    if (st != DP_OK) return (st == DP_ERR_FORMAT || st == DP_ERR_INVALID) && dp_last_error()[0] != '\0';
    size_t i = 0;
    while (i < size && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')) i++;
    int is_json = i < size && (data[i] == '[' || data[i] == '{');
    return n >= 0 && bad >= 0 && bad <= n && (is_json || !memchr(data, 0, size));
}

DP_FUZZ_TARGET(fuzz_check_claims)
