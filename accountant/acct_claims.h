/* accountant/acct_claims.h — the claims files of `dpcert audit-accounting` (docs/accounting.md
 * section 8): one claimed (epsilon, delta) of a mechanism per row, read from CSV or JSON
 * (acct_claims.c) and judged against certified bounds (acct_audit_cmd.c). */
#ifndef ACCT_CLAIMS_H
#define ACCT_CLAIMS_H

#include "accountant/acct.h"

/* One claim; err non-empty: the row is INVALID (why). */
typedef struct {
    acct_segment seg;
    double delta, claim;
    int line; /* CSV: file line of the record (0 for JSON) */
    char label[128];
    char err[256];
} acct_claim;

/* The claims of a file image buf[0..len) (CSV with a header, or a JSON array); `path` for
 * messages. A row that does not parse is a claim with err set, not an error. */
dp_status acct_claims_read(acct_claim **out, int *n, const char *buf, size_t len, const char *path);
/* Where a claim is: "row N" (the N-th claim, from 1; header, blank and comment lines not
 * counted), plus " (line L)" for CSV (line > 0): the one convention of every audit message. */
void acct_claim_where(char *b, size_t n, int row, int line);

#endif
