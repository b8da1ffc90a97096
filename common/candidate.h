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
    DP_CAND_BAD_SHAPE,   /* FAILED: an output tensor has the wrong shape or dtype class */
    DP_CAND_PROTOCOL,    /* FAILED: a persistent candidate's reply is wrong (not its request's, malformed) */
    DP_CAND_INPUT_MODIFIED /* FAILED: the candidate changed its input file */
} dp_cand_outcome;
/* "OK", "MISSING", "TIMEOUT", "INTERRUPTED", "EXIT", "NO_OUTPUT", "BAD_OUTPUT", "BAD_SHAPE",
 * "PROTOCOL", "INPUT_MODIFIED" */
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
/* The outcome named `name` (dp_cand_outcome_name); DP_CAND_EXIT for an unknown name. */
dp_cand_outcome dp_cand_outcome_parse(const char *name);

/* The last `lines` non-empty lines of a log from byte `from` on (at most the last 64 KiB
 * read), joined with " | ", each cut to 160 characters, into buf (empty when none). The
 * candidate's stderr goes to its log: a failed call quotes it (docs/certification.md). */
void dp_cand_log_tail(char *buf, size_t len, const char *log_path, long long from, int lines);

/* ---- persistent mode (docs/certification.md "Persistent candidates") ----
 * One candidate process serves many requests: dpcert starts `/bin/sh -c 'CMD'` (no IN OUT)
 * with DPCERT_CANDIDATE_MODE=persistent and DPCERT_REPLY_FD=3, in the same sandbox as a
 * one-call run (process group, RLIMIT_FSIZE / RLIMIT_AS, log). The candidate writes `READY`
 * on fd 3 when it is initialised; dpcert writes requests `SEQ<TAB>IN<TAB>OUT` on its stdin,
 * one line each; the candidate answers each with one line `SEQ OK` or `SEQ ERROR <message>` on
 * fd 3. Start-up and each request have the time limit opts.timeout_s; the session has a
 * deadline (whole-run limit). A crash, a time-out or a wrong reply ends that process (the
 * request gets the outcome, naming it) and the next request starts a fresh one. */
typedef struct {
    const char *cmd;
    dp_cand_opts opts;
    double deadline;          /* dp_proc_now() seconds after which no request runs (0: none) */
    const char *log_fmt;      /* printf format with one %d (the process number) for its log, or NULL */
    dp_proc_child child;
    int running, nstarted;
    long long seq;
    char log_path[4096];
    char buf[4096];           /* reply bytes not yet consumed */
    size_t blen;
} dp_cand_session;
void dp_cand_session_init(dp_cand_session *s, const char *cmd, const dp_cand_opts *o, const char *log_fmt,
                          double deadline);
/* One request: the same outcomes, messages and output checks as dp_candidate_run. */
dp_status dp_cand_session_run(dp_cand_session *s, dp_cand_result *res, dp_tensor_set *out, const char *in_path,
                              const char *out_path, const dp_cand_expect *exp, size_t nexp);
/* Ends the process (end of requests, then the group is killed after a grace time). */
void dp_cand_session_close(dp_cand_session *s);

/* --candidate-mode NAME: "one-call" -> 0, "persistent" -> 1; else DP_ERR_USAGE naming `what`. */
dp_status dp_cand_mode_parse(int *persistent, const char *what, const char *name);

/* The persistent loop of a candidate written in C (`dpcert audit reference-candidate`): READY,
 * then each request through fn(in, out) (DP_OK: `SEQ OK`, else `SEQ ERROR <dp_last_error>`)
 * until stdin ends. */
dp_status dp_cand_serve(dp_status (*fn)(const char *in_path, const char *out_path));
#endif
