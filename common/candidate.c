/* common/candidate.c — see candidate.h. */
#include "candidate.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

const char *dp_cand_outcome_name(dp_cand_outcome o) {
    static const char *const n[] = {"OK", "MISSING", "TIMEOUT", "INTERRUPTED", "EXIT", "NO_OUTPUT", "BAD_OUTPUT", "BAD_SHAPE"};
    return (unsigned)o < sizeof n / sizeof n[0] ? n[o] : "?";
}

int dp_cand_outcome_incomplete(dp_cand_outcome o) {
    return o == DP_CAND_MISSING || o == DP_CAND_TIMEOUT || o == DP_CAND_INTERRUPTED;
}

void dp_cand_opts_default(dp_cand_opts *o) {
    memset(o, 0, sizeof *o);
    o->timeout_s = 120;
    o->max_file_bytes = (uint64_t)1 << 30;
}

/* "N: NAME)" for the message of a shell-reported signal (static buffer: single-threaded use) */
static const char *sig_name(int sig) {
    static char b[64];
    snprintf(b, sizeof b, "%d, %s)", sig, strsignal(sig));
    return b;
}

static int is_int(dp_dtype d) { return d == DP_I32 || d == DP_I64; }

static int shape_ok(const dp_tensor *t, const dp_cand_expect *e) {
    if (e->ndim < 0) return 1;
    if (t->ndim != e->ndim) return 0;
    for (int d = 0; d < e->ndim; d++)
        if (t->shape[d] != e->shape[d]) return 0;
    return 1;
}

static void shape_str(char *buf, size_t len, const dp_cand_expect *e) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < e->ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", d ? ", " : "", (long long)e->shape[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* One tensor against its expectation: 0 ok, else res is set. */
static int check_one(dp_cand_result *res, const char *name, const dp_tensor *t, const dp_cand_expect *e) {
    char a[96], b[96];
    if ((e->kind == DP_CAND_INT) != is_int(t->dtype)) {
        res->outcome = DP_CAND_BAD_SHAPE;
        snprintf(res->msg, sizeof res->msg, "output %s has dtype %s, expected %s", name, dp_dtype_name(t->dtype),
                 e->kind == DP_CAND_INT ? "an integer dtype (I32/I64)" : "a float dtype (F64/F32/BF16/F16)");
        return 1;
    }
    if (!shape_ok(t, e)) {
        shape_str(b, sizeof b, e);
        res->outcome = DP_CAND_BAD_SHAPE;
        snprintf(res->msg, sizeof res->msg, "output %s has shape %s, expected %s", name, dp_shape_str(a, sizeof a, t), b);
        return 1;
    }
    return 0;
}

void dp_candidate_validate(dp_cand_result *res, const dp_tensor_set *out, const dp_cand_expect *exp, size_t nexp) {
    res->outcome = DP_CAND_OK;
    res->msg[0] = '\0';
    const char *missing = NULL;
    for (size_t k = 0; k < nexp; k++) {
        const dp_cand_expect *e = &exp[k];
        if (strchr(e->name, '*')) { /* "prefix*": every tensor starting with the prefix */
            size_t pl = (size_t)(strchr(e->name, '*') - e->name);
            int any = 0;
            for (size_t i = 0; i < out->n; i++) {
                if (strncmp(out->items[i].name, e->name, pl) != 0) continue;
                any = 1;
                if (check_one(res, out->items[i].name, &out->items[i].t, e)) return;
            }
            if (!any && e->required && !missing) missing = e->name;
            continue;
        }
        const dp_tensor *t = dp_tset_find(out, e->name);
        if (!t) {
            if (e->required && !missing) missing = e->name;
            continue;
        }
        if (check_one(res, e->name, t, e)) return;
    }
    if (missing) {
        res->outcome = DP_CAND_MISSING;
        snprintf(res->msg, sizeof res->msg, "required output %s is absent", missing);
    }
}

dp_status dp_candidate_run(dp_cand_result *res, dp_tensor_set *out, const char *cmd, const char *in_path,
                           const char *out_path, const dp_cand_expect *exp, size_t nexp, const dp_cand_opts *o) {
    memset(res, 0, sizeof *res);
    dp_tset_init(out);
    dp_cand_opts dflt;
    if (!o) { dp_cand_opts_default(&dflt); o = &dflt; }
    if (unlink(out_path) != 0 && errno != ENOENT)
        return dp_error(DP_ERR_IO, "cannot remove a stale candidate output %s: %s", out_path, strerror(errno));
    dp_proc_opts po;
    memset(&po, 0, sizeof po);
    po.timeout_s = o->timeout_s;
    po.log_path = o->log_path;
    po.env_set = o->env_set;
    po.max_file_bytes = o->max_file_bytes;
    po.max_memory_bytes = o->max_memory_bytes;
    DP_TRY(dp_proc_run_shell(&res->proc, cmd, (char *const[]){(char *)in_path, (char *)out_path, NULL}, &po));
    const dp_proc_result *p = &res->proc;
    if (p->interrupted) {
        res->outcome = DP_CAND_INTERRUPTED;
        snprintf(res->msg, sizeof res->msg, "interrupted by signal %d", dp_proc_interrupted());
        return DP_OK;
    }
    if (p->timed_out) {
        res->outcome = DP_CAND_TIMEOUT;
        snprintf(res->msg, sizeof res->msg, "candidate killed after the time limit of %.0f s", o->timeout_s);
        return DP_OK;
    }
    if (p->exit_code != 0) {
        res->outcome = DP_CAND_EXIT;
        if (p->signal)
            snprintf(res->msg, sizeof res->msg, "candidate killed by signal %d (%s)%s", p->signal, strsignal(p->signal),
                     p->signal == SIGXFSZ ? ": it exceeded the output file size limit" : "");
        else
            snprintf(res->msg, sizeof res->msg, "candidate exited with status %d%s%s%s", p->exit_code,
                     p->exit_code == 127 ? " (command not found)" : "",
                     p->exit_code > 128 && p->exit_code < 160 ? " (its shell reports signal " : "",
                     p->exit_code > 128 && p->exit_code < 160 ? (p->exit_code == 128 + SIGXFSZ ? "25, SIGXFSZ: the output file size limit)" : sig_name(p->exit_code - 128)) : "");
        return DP_OK;
    }
    struct stat sb;
    if (lstat(out_path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        res->outcome = DP_CAND_NO_OUTPUT;
        snprintf(res->msg, sizeof res->msg, "candidate exited 0 but wrote no regular file %s", out_path);
        return DP_OK;
    }
    if ((uint64_t)sb.st_size > o->max_file_bytes) {
        res->outcome = DP_CAND_NO_OUTPUT;
        snprintf(res->msg, sizeof res->msg, "candidate output %s is %lld bytes, over the limit of %llu", out_path,
                 (long long)sb.st_size, (unsigned long long)o->max_file_bytes);
        return DP_OK;
    }
    dp_status st = dp_st_read(out, out_path);
    if (st == DP_ERR_NOMEM || st == DP_ERR_SYSIO) return st; /* the system failed, not the candidate: exit 3 */
    if (st != DP_OK) {
        res->outcome = DP_CAND_BAD_OUTPUT;
        snprintf(res->msg, sizeof res->msg, "candidate output is not a valid safetensors file: %s", dp_last_error());
        dp_tset_init(out);
        return DP_OK;
    }
    dp_candidate_validate(res, out, exp, nexp);
    return DP_OK;
}
