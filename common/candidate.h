/* common/candidate.h — run a third-party candidate `CMD IN OUT` on one input file and read
 * back its output as hostile input (docs/certification.md "The candidate protocol").
 *
 * Used by `dpcert certify` (conformance/) and `dpcert audit --candidate` (attacks/), so it
 * lives in common/ (attacks/ links below conformance/). The candidate is never trusted:
 *   - it runs as /bin/sh -c 'CMD "$@"' sh IN OUT in its own process group, stdin from
 *     /dev/null, stdout+stderr to a log, with a time limit (SIGTERM, then SIGKILL to the
 *     group), RLIMIT_FSIZE (so it cannot write a 10 GiB file) and RLIMIT_AS;
 *   - OUT is removed before the run, must afterwards be a regular file (lstat: not a link)
 *     no larger than the file limit, and is parsed by the strict safetensors reader;
 *   - the expected tensors are checked for presence, shape and dtype class.
 * Every way a candidate can misbehave becomes an outcome with a message, never a crash or
 * a hang of dpcert. */
#ifndef DP_CANDIDATE_H
#define DP_CANDIDATE_H
#include <stddef.h>
#include <stdint.h>
#include "proc.h"
#include "status.h"
#include "tensor.h"

/* What became of one run, ordered: FAILED outcomes (the candidate misbehaved) and
 * INCOMPLETE ones (a required check cannot run). */
typedef enum {
    DP_CAND_OK = 0,
    DP_CAND_MISSING,     /* INCOMPLETE: a required output tensor is absent */
    DP_CAND_TIMEOUT,     /* INCOMPLETE: killed at the time limit */
    DP_CAND_INTERRUPTED, /* INCOMPLETE: dpcert received SIGINT/SIGTERM/SIGHUP (caller exits 128+sig) */
    DP_CAND_EXIT,        /* FAILED: exited non-zero, or was killed by a signal (crash, file limit) */
    DP_CAND_NO_OUTPUT,   /* FAILED: exited 0 but OUT is absent, not a regular file, or too large */
    DP_CAND_BAD_OUTPUT,  /* FAILED: OUT is not a valid safetensors file (garbage, truncated, huge header) */
    DP_CAND_BAD_SHAPE    /* FAILED: an output tensor has the wrong shape or dtype class */
} dp_cand_outcome;
/* "OK", "MISSING", "TIMEOUT", "INTERRUPTED", "EXIT", "NO_OUTPUT", "BAD_OUTPUT", "BAD_SHAPE" */
const char *dp_cand_outcome_name(dp_cand_outcome o);
/* 1 for outcomes that make a verdict INCOMPLETE (MISSING, TIMEOUT, INTERRUPTED), 0 otherwise. */
int dp_cand_outcome_incomplete(dp_cand_outcome o);

typedef enum { DP_CAND_FLOAT = 0, DP_CAND_INT = 1 } dp_cand_kind;
/* One expected output tensor. ndim < 0: any shape. `prefix` = 1: every tensor whose name
 * starts with `name` is checked against the shape (none present counts as missing). */
typedef struct {
    const char *name;
    int required;
    dp_cand_kind kind;
    int ndim;
    int64_t shape[DP_MAX_DIMS];
} dp_cand_expect;

typedef struct {
    double timeout_s;            /* per run; default 120 */
    uint64_t max_file_bytes;     /* RLIMIT_FSIZE and the largest OUT read; default 1 GiB */
    uint64_t max_memory_bytes;   /* RLIMIT_AS; default 0 (none: JIT runtimes reserve large address ranges) */
    const char *log_path;        /* candidate stdout+stderr; NULL: /dev/null */
    const char *const *env_set;  /* extra environment, NULL-terminated, or NULL */
} dp_cand_opts;
void dp_cand_opts_default(dp_cand_opts *o);

typedef struct {
    dp_cand_outcome outcome;
    dp_proc_result proc;
    char msg[512];               /* why, for anything but OK (names the tensor, the file, the exit) */
} dp_cand_result;

/* Runs `cmd in_path out_path` and, when it exits 0, reads out_path into *out (initialised
 * here; it keeps what was read when only the shape/presence checks fail (MISSING, BAD_SHAPE);
 * freed by the caller in every case) and checks it against exp[0..nexp).
 * DP_OK whenever the candidate ran (whatever it did: see res->outcome); an error status only
 * when dpcert itself could not start it (fork failure, log not creatable). */
dp_status dp_candidate_run(dp_cand_result *res, dp_tensor_set *out, const char *cmd, const char *in_path,
                           const char *out_path, const dp_cand_expect *exp, size_t nexp, const dp_cand_opts *o);
/* The checks of dp_candidate_run on an already-read set (also used to re-check stored outputs). */
void dp_candidate_validate(dp_cand_result *res, const dp_tensor_set *out, const dp_cand_expect *exp, size_t nexp);
#endif
