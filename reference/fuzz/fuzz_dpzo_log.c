/* reference/fuzz/fuzz_dpzo_log.c — libFuzzer target for the DP-ZO update log reader
 * (ref_dpzo_log_parse: the v3 frame, then the lines; docs/dpzo.md).
 *
 *   make fuzz; build/fuzz/reference/fuzz/fuzz_dpzo_log -max_total_time=60 CORPUS reference/tests/data/dpzo-log-corpus
 *
 * Properties: DP_OK, or DP_ERR_FORMAT with a message (DP_ERR_NOMEM tolerated); never a crash.
 * An accepted log has steps 1..T in sequence, n_spsa in range, finite scalars whose update
 * cannot overflow, and its bytes end with the end record. Replayed in `make test` by
 * conformance/tests/test_fuzz_corpora.c (DP_FUZZ_NO_MAIN). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/fuzz/fuzz.h"
#include "reference/dpzo.h"

static int fuzz_check_dpzo_log(const uint8_t *data, size_t size) {
    ref_dpzo_log log;
    dp_clear_error();
    dp_status st = ref_dpzo_log_parse(&log, data, size, "fuzz.log");
    if (st == DP_ERR_NOMEM) return 1;
    if (st != DP_OK) return st == DP_ERR_FORMAT && dp_last_error()[0] != '\0';
    int ok = log.n_spsa >= 1 && log.n_spsa <= REF_DPZO_MAX_N && size > 0 && data[size - 1] == '\n' &&
             !memchr(data, 0, size);
    for (int64_t k = 0; ok && k < log.nsteps; k++) {
        ok = log.step[k] == k + 1;
        for (int j = 0; ok && j < log.n_spsa; j++) ok = isfinite(log.scalar[k * log.n_spsa + j]);
    }
    ref_dpzo_log_free(&log);
    return ok;
}

DP_FUZZ_TARGET(fuzz_check_dpzo_log)
