/* conformance/tests/test_fuzz_corpora.c — replays the seed corpora of the parser fuzz targets
 * (issue 15, class 9) with the ordinary compiler (and under `make SANITIZE=1` with ASan+UBSan):
 *   conformance/tests/data/cases-corpus    -> conformance/fuzz/fuzz_cases.c    (case files)
 *   reference/tests/data/dpzo-log-corpus   -> reference/fuzz/fuzz_dpzo_log.c   (DP-ZO update logs)
 *   accountant/tests/data/claims-corpus    -> accountant/fuzz/fuzz_claims.c    (claims CSV/JSON)
 * The fuzz targets' property functions are included (DP_FUZZ_NO_MAIN), so the replay checks
 * exactly what the fuzzers check. Per file: the properties; the name convention (valid_*:
 * accepted with no invalid row; bad_*: rejected with DP_ERR_FORMAT and a message; invalid_*
 * claims: accepted with at least one INVALID row); then every prefix and two one-byte mutations
 * (bit 0 flipped, byte set to 0xff) at each of the first 512 bytes: a deterministic mini-fuzz.
 * Crash reproducers found by `make fuzz` are added to the corpus directories (bad_*). Negative
 * control: each bad_* file is the damaged form of a valid_* one and must be rejected. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DP_FUZZ_NO_MAIN
#include "accountant/fuzz/fuzz_claims.c"
#include "conformance/fuzz/fuzz_cases.c"
#include "reference/fuzz/fuzz_dpzo_log.c"

#include "common/fsutil.h"
#include "common/test.h"

typedef int (*prop_fn)(const uint8_t *, size_t);

/* 1 accepted, 0 rejected with DP_ERR_FORMAT, -1 other; *ninv: INVALID claim rows */
static int accepted(int kind, const uint8_t *p, size_t n, int *ninv) {
    dp_status st;
    *ninv = 0;
    if (kind == 0) {
        conf_case c;
        st = conf_case_parse(&c, (const char *)p, n, "corpus");
        if (st == DP_OK) conf_case_free(&c);
    } else if (kind == 1) {
        ref_dpzo_log l;
        st = ref_dpzo_log_parse(&l, p, n, "corpus");
        if (st == DP_OK) ref_dpzo_log_free(&l);
    } else {
        int nc;
        st = acct_claims_parse(&nc, ninv, (const char *)p, n, "corpus");
    }
    dp_clear_error();
    return st == DP_OK ? 1 : st == DP_ERR_FORMAT ? 0 : -1;
}

static void replay(const char *sub, int kind, prop_fn prop) {
    const char *root = getenv("DPCERT_ROOT");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", root ? root : ".", sub);
    DIR *d = opendir(dir);
    T_CHECK(d != NULL, "cannot open %s (set DPCERT_ROOT)", dir);
    if (!d) return;
    int nfiles = 0, nvalid = 0, nbad = 0;
    long viol = 0, variants = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *buf;
        size_t n;
        if (dp_read_file_max(&buf, &n, "corpus file", path, 1 << 20) != DP_OK) { T_CHECK(0, "%s", dp_last_error()); continue; }
        nfiles++;
        const uint8_t *p = (const uint8_t *)buf;
        T_CHECK(prop(p, n), "%s: property violated", e->d_name);
        int ninv, a = accepted(kind, p, n, &ninv);
        if (!strncmp(e->d_name, "valid_", 6)) { nvalid++; T_CHECK(a == 1 && ninv == 0, "%s: not accepted (%d, %d invalid rows)", e->d_name, a, ninv); }
        else if (!strncmp(e->d_name, "bad_", 4)) { nbad++; T_CHECK(a == 0, "%s: not rejected as a format error (%d)", e->d_name, a); }
        else if (!strncmp(e->d_name, "invalid_", 8)) T_CHECK(a == 1 && ninv > 0, "%s: expected INVALID rows (%d, %d)", e->d_name, a, ninv);
        uint8_t *m = malloc(n ? n : 1);
        if (m) {
            for (size_t k = 0; k < n; k++, variants++) if (!prop(p, k) && viol++ < 5) fprintf(stderr, "%s: prefix %zu\n", e->d_name, k);
            for (size_t i = 0; i < n && i < 512; i++)
                for (int mode = 0; mode < 2; mode++, variants++) {
                    memcpy(m, p, n);
                    m[i] = mode ? 0xff : (uint8_t)(m[i] ^ 1);
                    if (!prop(m, n) && viol++ < 5) fprintf(stderr, "%s: mutation %d at %zu\n", e->d_name, mode, i);
                }
            free(m);
        }
        free(buf);
    }
    closedir(d);
    T_CHECK(nvalid >= 2 && nbad >= 2, "%s: the corpus needs valid_* and bad_* seeds (%d, %d)", sub, nvalid, nbad);
    T_CHECK(viol == 0, "%s: %ld of %ld prefixes/mutations violate a property", sub, viol, variants);
    printf("%s: %d files, %ld prefixes and mutations\n", sub, nfiles, variants);
}

int main(void) {
    replay("conformance/tests/data/cases-corpus", 0, fuzz_check_case);
    replay("reference/tests/data/dpzo-log-corpus", 1, fuzz_check_dpzo_log);
    replay("accountant/tests/data/claims-corpus", 2, fuzz_check_claims);
    return t_finish();
}
