/* attacks/audit_candidate.h — a third-party candidate as the release under audit
 * (audit_candidate.c, docs/audits.md "Candidates"), and the step-vector pieces that
 * `dpcert mia --candidate` shares with it. */
#ifndef AUDIT_CANDIDATE_H
#define AUDIT_CANDIDATE_H

#include "attacks/audit.h"
#include "common/alloc.h"
#include "common/candidate.h"

/* Writes the two step vectors DIR/audit-D.safetensors and DIR/audit-Dprime.safetensors. */
dp_status audit_candidate_prepare(const audit_setup *s, const char *dir);
/* Release instance of thread `tid` (its own OUT file in the work directory). */
dp_status audit_candidate_make(audit_release *r, const audit_setup *s, int tid);
/* `dpcert audit reference-candidate IN OUT`. */
int audit_cmd_reference_candidate(int argc, char **argv);

/* A step vector of docs/certification.md (kind step, dpsgd, mlp, flat abadi clipping at
 * `clip`, one group "all") with the parameters of m and the batch d (d->n may be 0),
 * written atomically to path. */
dp_status audit_step_vector_write(const char *path, const ref_model_config *mc, const ref_model *m,
                                  const ref_dataset *d, double clip, double sigma, double qn, const char *name);

/* The expected outputs (step.private_grad.<name>, shapes of m) and the run options. */
typedef struct {
    dp_cand_expect *exp;
    char (*names)[160];
    int nexp;
    dp_cand_opts opts;
    dp_cand_session *sess;   /* persistent mode: the process serving this io's requests (NULL: one call each) */
    char logfmt[1200];
} audit_cand_io;
dp_status audit_cand_io_init(audit_cand_io *io, const ref_model *m, double timeout_s);
/* Persistent mode for cmd: requests go to one process (log WORK/<tag>.p<n>.log), closed by
 * audit_cand_io_free. */
dp_status audit_cand_io_persistent(audit_cand_io *io, const char *cmd, const char *work, const char *tag);
void audit_cand_io_free(audit_cand_io *io);
/* Runs `cmd in out_path` and reads its private gradient into g[p][e] (out_path removed
 * afterwards). A candidate that fails (any outcome but OK) or writes a non-finite value:
 * DP_ERR_CHECK_FAILED naming the outcome and the vector (callers make that INVALID). */
dp_status audit_cand_private_grad(double *const *g, const audit_cand_io *io, const char *cmd, const char *in,
                                  const char *out_path, const ref_model *m);
/* A fresh $TMPDIR/dpcert-CMD-XXXXXX (default /tmp) into dir[n] (dir[0] = 0 on failure). */
dp_status audit_work_tmpdir(char *dir, size_t n, const char *cmd);
/* g[p] -> one zeroed block of m->total doubles (dp_free(g[0]); dp_free(g)). */
dp_status audit_flat_buffers(double ***g, const ref_model *m);

#endif
