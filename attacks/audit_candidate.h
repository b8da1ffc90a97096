/* attacks/audit_candidate.h — a third-party candidate as the release under audit
 * (audit_candidate.c, docs/audits.md "Candidates"). */
#ifndef AUDIT_CANDIDATE_H
#define AUDIT_CANDIDATE_H

#include "attacks/audit.h"

/* Writes the two step vectors DIR/audit-D.safetensors and DIR/audit-Dprime.safetensors. */
dp_status audit_candidate_prepare(const audit_setup *s, const char *dir);
/* Release instance of thread `tid` (its own OUT file in the work directory). */
dp_status audit_candidate_make(audit_release *r, const audit_setup *s, int tid);
/* `dpcert audit reference-candidate IN OUT`. */
int audit_cmd_reference_candidate(int argc, char **argv);

#endif
