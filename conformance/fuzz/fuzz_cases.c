/* conformance/fuzz/fuzz_cases.c — libFuzzer target for the case-file parser (conf_case_parse).
 *
 *   make fuzz; build/fuzz/conformance/fuzz/fuzz_cases -max_total_time=60 CORPUS conformance/tests/data/cases-corpus
 *
 * Properties on every input: DP_OK, or DP_ERR_FORMAT with a message (DP_ERR_NOMEM tolerated);
 * never a crash. An accepted case has a name, options in "--name [value]" form, sizes in
 * range and no sentinel leaking into its arguments. A violated property aborts. The corpus
 * replay in `make test` (conformance/tests/test_fuzz_corpora.c) includes this file with
 * DP_FUZZ_NO_MAIN and checks the same properties. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/fuzz/fuzz.h"
#include "conformance/conform/conform.h"

static int fuzz_check_case(const uint8_t *data, size_t size) {
    conf_case c;
    dp_clear_error();
    dp_status st = conf_case_parse(&c, (const char *)data, size, "fuzz.json");
    if (st == DP_ERR_NOMEM) return 1;
    if (st != DP_OK) return st == DP_ERR_FORMAT && dp_last_error()[0] != '\0';
    int ok = c.name[0] != '\0' && c.micro_batches >= 1 && c.nranks >= 1 && c.alpha > 0 && c.alpha < 0.5;
    for (size_t i = 0; ok && i < c.nargs; i++) ok = c.args[i] != NULL;
    ok = ok && (c.nargs == 0 || strncmp(c.args[0], "--", 2) == 0);
    conf_case_free(&c);
    return ok;
}

DP_FUZZ_TARGET(fuzz_check_case)
