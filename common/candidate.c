/* common/candidate.c — see candidate.h. */
#include "candidate.h"
#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "safetensors.h"

const char *dp_cand_outcome_name(dp_cand_outcome o) {
    static const char *const n[] = {"OK", "MISSING", "TIMEOUT", "INTERRUPTED", "EXIT", "NO_OUTPUT", "BAD_OUTPUT", "BAD_SHAPE",
                                    "PROTOCOL", "INPUT_MODIFIED"};
    return (unsigned)o < sizeof n / sizeof n[0] ? n[o] : "?";
}

dp_cand_outcome dp_cand_outcome_parse(const char *name) {
    for (int o = DP_CAND_OK; o <= DP_CAND_INPUT_MODIFIED; o++)
        if (strcmp(name, dp_cand_outcome_name((dp_cand_outcome)o)) == 0) return (dp_cand_outcome)o;
    return DP_CAND_EXIT;
}

void dp_cand_log_tail(char *buf, size_t len, const char *log_path, long long from, int lines) {
    buf[0] = '\0';
    if (!log_path || len < 8) return;
    int fd = open(log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) { close(fd); return; }
    const long long cap = 65536;
    long long start = sb.st_size - cap > from ? sb.st_size - cap : from;
    if (start < 0) start = 0;
    size_t n = sb.st_size > start ? (size_t)(sb.st_size - start) : 0;
    char *t = dp_malloc(n + 1);
    ssize_t got = t && n ? pread(fd, t, n, (off_t)start) : 0;
    close(fd);
    if (!t || got <= 0) { dp_free(t); return; }
    t[got] = '\0';
    for (ssize_t i = 0; i < got; i++) { /* printable ASCII only: the tail goes into JSON and Markdown */
        unsigned char c = (unsigned char)t[i];
        if (c == '\0' || c == '\r' || c == '\t') t[i] = ' ';
        else if (c != '\n' && (c < 0x20 || c > 0x7e)) t[i] = '?';
        else if (c == '|' || c == '`') t[i] = '!'; /* " | " separates the lines; no Markdown table break */
    }
    /* the last `lines` non-empty lines, in order */
    const char *sel[16];
    size_t sl[16];
    int k = 0;
    char *e = t + got;
    while (e > t && k < lines && k < 16) {
        while (e > t && (e[-1] == '\n' || e[-1] == ' ')) e--;
        if (e == t) break;
        char *b = e;
        while (b > t && b[-1] != '\n') b--;
        sel[k] = b;
        sl[k++] = (size_t)(e - b);
        e = b;
    }
    size_t w = 0;
    for (int i = k - 1; i >= 0 && w + 1 < len; i--) {
        size_t l = sl[i] > 160 ? 160 : sl[i];
        int m = snprintf(buf + w, len - w, "%s%.*s%s", w ? " | " : "", (int)l, sel[i], sl[i] > 160 ? "..." : "");
        if (m < 0) break;
        w += (size_t)m < len - w ? (size_t)m : len - w - 1;
    }
    dp_free(t);
}

/* Bytes a candidate chose (its reply line) made printable ASCII for JSON and Markdown. */
static void clean_msg(char *m) {
    for (; *m; m++)
        if ((unsigned char)*m < 0x20 || (unsigned char)*m > 0x7e) *m = '?';
        else if (*m == '|' || *m == '`') *m = '!';
}

/* "; its output ends: ..." appended to a failed run's message (nothing when the log is empty). */
static void add_tail(dp_cand_result *res, const char *log_path, long long from) {
    char tail[360];
    dp_cand_log_tail(tail, sizeof tail, log_path, from, 2);
    size_t l = strlen(res->msg);
    if (tail[0] && l + 24 < sizeof res->msg) snprintf(res->msg + l, sizeof res->msg - l, "; its output ends: %s", tail);
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

/* DP_CAND_EXIT with the exit status or signal of p (`when`: e.g. " before it was ready"). */
static void exit_msg(dp_cand_result *res, const dp_proc_result *p, const char *when) {
    res->outcome = DP_CAND_EXIT;
    if (p->signal)
        snprintf(res->msg, sizeof res->msg, "candidate killed by signal %d (%s)%s%s", p->signal, strsignal(p->signal), when,
                 p->signal == SIGXFSZ ? ": it exceeded the output file size limit" : "");
    else
        snprintf(res->msg, sizeof res->msg, "candidate exited with status %d%s%s%s%s", p->exit_code, when,
                 p->exit_code == 127 ? " (command not found)" : "",
                 p->exit_code > 128 && p->exit_code < 160 ? " (its shell reports signal " : "",
                 p->exit_code > 128 && p->exit_code < 160 ? (p->exit_code == 128 + SIGXFSZ ? "25, SIGXFSZ: the output file size limit)" : sig_name(p->exit_code - 128)) : "");
}

/* After a run that ended well (exit 0 / reply OK): OUT must be a regular file within the limit,
 * a valid safetensors file, with the expected tensors. */
static dp_status read_output(dp_cand_result *res, dp_tensor_set *out, const char *out_path, const dp_cand_expect *exp,
                             size_t nexp, const dp_cand_opts *o, const char *log_path, long long from) {
    struct stat sb;
    if (lstat(out_path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        res->outcome = DP_CAND_NO_OUTPUT;
        snprintf(res->msg, sizeof res->msg, "candidate exited 0 but wrote no regular file %s", out_path);
        add_tail(res, log_path, from);
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
        add_tail(res, o->log_path, 0);
        return DP_OK;
    }
    if (p->exit_code != 0) {
        exit_msg(res, p, "");
        add_tail(res, o->log_path, 0);
        return DP_OK;
    }
    return read_output(res, out, out_path, exp, nexp, o, o->log_path, 0);
}

/* ---------------------------------------------------------------- persistent mode ---- */
void dp_cand_session_init(dp_cand_session *s, const char *cmd, const dp_cand_opts *o, const char *log_fmt,
                          double deadline) {
    memset(s, 0, sizeof *s);
    s->cmd = cmd;
    if (o) s->opts = *o;
    else dp_cand_opts_default(&s->opts);
    s->log_fmt = log_fmt;
    s->deadline = deadline;
    s->child.pid = -1;
    s->child.in_fd = s->child.rep_fd = -1;
}

static void session_kill(dp_cand_session *s) {
    dp_proc_result r;
    if (s->running) {
        kill(-s->child.pid, SIGKILL);
        dp_proc_child_stop(&s->child, &r, 0);
    }
    s->running = 0;
    s->blen = 0;
}

void dp_cand_session_close(dp_cand_session *s) {
    dp_proc_result r;
    if (s->running) dp_proc_child_stop(&s->child, &r, 5.0);
    s->running = 0;
    s->blen = 0;
}

static long long log_size(const char *path) {
    struct stat sb;
    return path[0] && stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

/* Reads one reply line (without '\n') into line[len] before `until`. 1: a line; 0: time
 * limit; -1: the process exited or closed fd 3 (res->proc filled when it exited); -2:
 * interrupted. */
static int read_line(dp_cand_session *s, char *line, size_t len, double until, dp_proc_result *pr) {
    for (;;) {
        char *nl = memchr(s->buf, '\n', s->blen);
        if (nl) {
            size_t l = (size_t)(nl - s->buf);
            snprintf(line, len, "%.*s", (int)(l < len - 1 ? l : len - 1), s->buf);
            memmove(s->buf, nl + 1, s->blen - l - 1);
            s->blen -= l + 1;
            return 1;
        }
        if (s->blen == sizeof s->buf) { /* a line longer than the buffer: a wrong reply */
            snprintf(line, len, "%.*s", (int)(len - 1 < 200 ? len - 1 : 200), s->buf);
            s->blen = 0;
            return 1;
        }
        if (dp_proc_interrupted()) return -2;
        double now = dp_proc_now();
        if (now > until) return 0;
        struct pollfd pf = {s->child.rep_fd, POLLIN, 0};
        int ms = (int)((until - now) * 1000) + 1;
        int r = poll(&pf, 1, ms < 50 ? ms : 50);
        if (r > 0) {
            ssize_t n = read(s->child.rep_fd, s->buf + s->blen, sizeof s->buf - s->blen);
            if (n > 0) { s->blen += (size_t)n; continue; }
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            /* EOF: wait for the exit status a little */
            for (int i = 0; i < 400; i++) {
                if (dp_proc_child_poll(&s->child, pr)) { s->running = 0; return -1; }
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            memset(pr, 0, sizeof *pr);
            pr->exit_code = -1;
            return -1;
        }
        if (dp_proc_child_poll(&s->child, pr)) { s->running = 0; return -1; }
    }
}

/* Starts a process and waits for READY. DP_OK with res->outcome OK when it is ready; else the
 * outcome (EXIT before ready, TIMEOUT, PROTOCOL, INTERRUPTED) is in res. */
static dp_status session_start(dp_cand_session *s, dp_cand_result *res, double until) {
    static const char *const env[] = {"DPCERT_CANDIDATE_MODE=persistent", "DPCERT_REPLY_FD=3", NULL};
    s->nstarted++;
    if (s->log_fmt) snprintf(s->log_path, sizeof s->log_path, s->log_fmt, s->nstarted);
    else s->log_path[0] = '\0';
    dp_proc_opts po;
    memset(&po, 0, sizeof po);
    po.log_path = s->log_path[0] ? s->log_path : NULL;
    po.env_set = env;
    po.max_file_bytes = s->opts.max_file_bytes;
    po.max_memory_bytes = s->opts.max_memory_bytes;
    DP_TRY(dp_proc_spawn_shell(&s->child, s->cmd, &po));
    s->running = 1;
    s->blen = 0;
    char line[256];
    dp_proc_result pr;
    memset(&pr, 0, sizeof pr);
    int r = read_line(s, line, sizeof line, until, &pr);
    res->outcome = DP_CAND_OK;
    if (r == 1 && strcmp(line, "READY") == 0) return DP_OK;
    if (r == -2) {
        res->outcome = DP_CAND_INTERRUPTED;
        snprintf(res->msg, sizeof res->msg, "interrupted by signal %d", dp_proc_interrupted());
    } else if (r == 0) {
        res->outcome = DP_CAND_TIMEOUT;
        snprintf(res->msg, sizeof res->msg, "persistent candidate not ready (no READY on fd 3) within the time limit of "
                 "%.0f s", s->opts.timeout_s);
    } else if (r == -1) {
        if (pr.exit_code == 0 && !pr.signal) {
            res->outcome = DP_CAND_PROTOCOL;
            snprintf(res->msg, sizeof res->msg, "persistent candidate exited 0 without READY on fd 3 (does it serve "
                     "--candidate-mode persistent? dpcert_adapter.run does)");
        } else {
            exit_msg(res, &pr, " before it was ready (persistent mode)");
        }
    } else {
        res->outcome = DP_CAND_PROTOCOL;
        snprintf(res->msg, sizeof res->msg, "persistent candidate's first line on fd 3 is '%.100s', expected READY", line);
        clean_msg(res->msg);
    }
    res->proc = pr;
    add_tail(res, s->log_path, 0);
    session_kill(s);
    return DP_OK;
}

dp_status dp_cand_session_run(dp_cand_session *s, dp_cand_result *res, dp_tensor_set *out, const char *in_path,
                              const char *out_path, const dp_cand_expect *exp, size_t nexp) {
    memset(res, 0, sizeof *res);
    dp_tset_init(out);
    if (strpbrk(in_path, "\t\n") || strpbrk(out_path, "\t\n"))
        return dp_error(DP_ERR_INVALID, "persistent mode: the path %s holds a tab or a newline (the request separators)",
                        strpbrk(in_path, "\t\n") ? in_path : out_path);
    if (unlink(out_path) != 0 && errno != ENOENT)
        return dp_error(DP_ERR_IO, "cannot remove a stale candidate output %s: %s", out_path, strerror(errno));
    double t0 = dp_proc_now();
    if (s->deadline > 0 && t0 > s->deadline) {
        res->outcome = DP_CAND_TIMEOUT;
        snprintf(res->msg, sizeof res->msg, "not run: the whole-run time limit was reached");
        return DP_OK;
    }
    double until = t0 + s->opts.timeout_s;
    if (s->deadline > 0 && s->deadline < until) until = s->deadline;
    if (!s->running) {
        DP_TRY(session_start(s, res, until));
        if (res->outcome != DP_CAND_OK) return DP_OK;
        t0 = dp_proc_now(); /* start-up is not the request's time */
        until = t0 + s->opts.timeout_s;
        if (s->deadline > 0 && s->deadline < until) until = s->deadline;
    }
    long long from = log_size(s->log_path);
    char req[8400];
    long long seq = ++s->seq;
    int len = snprintf(req, sizeof req, "%lld\t%s\t%s\n", seq, in_path, out_path);
    if (len <= 0 || (size_t)len >= sizeof req) return dp_error(DP_ERR_INVALID, "persistent mode: request paths too long");
    dp_proc_result pr;
    memset(&pr, 0, sizeof pr);
    int r;
    ssize_t w = 0;
    while (w < len) { /* the pipe holds 64 KiB; a request line is far less */
        ssize_t k = write(s->child.in_fd, req + w, (size_t)(len - w));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        w += k;
    }
    char line[600];
    if (w < len) { /* EPIPE: it died; read_line reports how */
        r = read_line(s, line, sizeof line, dp_proc_now() + 2, &pr);
        if (r == 1 || r == 0) r = -1;
    } else {
        r = read_line(s, line, sizeof line, until, &pr);
    }
    res->proc = pr;
    res->proc.wall_s = dp_proc_now() - t0;
    if (r == -2) {
        res->outcome = DP_CAND_INTERRUPTED;
        snprintf(res->msg, sizeof res->msg, "interrupted by signal %d", dp_proc_interrupted());
        session_kill(s);
        return DP_OK;
    }
    if (r == 0) {
        res->outcome = DP_CAND_TIMEOUT;
        res->proc.timed_out = 1;
        snprintf(res->msg, sizeof res->msg, "request %lld (%s): no reply within the %s of %.0f s", seq, in_path,
                 s->deadline > 0 && until >= s->deadline ? "whole-run time limit" : "time limit", s->opts.timeout_s);
        add_tail(res, s->log_path, from);
        session_kill(s);
        return DP_OK;
    }
    if (r == -1) {
        exit_msg(res, &pr, "");
        size_t l = strlen(res->msg);
        snprintf(res->msg + l, sizeof res->msg - l, " during request %lld (%s)", seq, in_path);
        add_tail(res, s->log_path, from);
        session_kill(s);
        return DP_OK;
    }
    char want[32];
    int wl = snprintf(want, sizeof want, "%lld ", seq);
    if (strncmp(line, want, (size_t)wl) != 0 || (strcmp(line + wl, "OK") != 0 && strncmp(line + wl, "ERROR", 5) != 0)) {
        res->outcome = DP_CAND_PROTOCOL;
        snprintf(res->msg, sizeof res->msg, "request %lld (%s): wrong reply '%.120s' (expected '%lld OK' or '%lld ERROR "
                 "message')", seq, in_path, line, seq, seq);
        clean_msg(res->msg);
        add_tail(res, s->log_path, from);
        session_kill(s);
        return DP_OK;
    }
    if (strncmp(line + wl, "ERROR", 5) == 0) {
        res->outcome = DP_CAND_EXIT;
        snprintf(res->msg, sizeof res->msg, "request %lld: candidate replied ERROR%.200s", seq, line + wl + 5);
        clean_msg(res->msg);
        add_tail(res, s->log_path, from);
        return DP_OK; /* the process serves on */
    }
    return read_output(res, out, out_path, exp, nexp, &s->opts, s->log_path, from);
}

dp_status dp_cand_serve(dp_status (*fn)(const char *in_path, const char *out_path)) {
    const char *fds = getenv("DPCERT_REPLY_FD");
    int fd = fds ? atoi(fds) : 3;
    FILE *rep = fdopen(fd, "w");
    if (!rep) return dp_error(DP_ERR_IO, "persistent mode: cannot open the reply descriptor %d", fd);
    fprintf(rep, "READY\n");
    fflush(rep);
    char line[8400];
    while (fgets(line, sizeof line, stdin)) {
        size_t l = strlen(line);
        if (l && line[l - 1] == '\n') line[--l] = '\0';
        if (!l) continue;
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2) { fprintf(rep, "0 ERROR malformed request\n"); fflush(rep); continue; }
        *t1 = *t2 = '\0';
        dp_status st = fn(t1 + 1, t2 + 1);
        if (st == DP_OK) fprintf(rep, "%s OK\n", line);
        else {
            char m[400];
            snprintf(m, sizeof m, "%s", dp_last_error());
            for (char *c = m; *c; c++) if (*c == '\n') *c = ' ';
            fprintf(stderr, "request %s: %s\n", line, m);
            fprintf(rep, "%s ERROR %s\n", line, m);
        }
        fflush(stderr);
        if (fflush(rep) != 0) return dp_error(DP_ERR_IO, "persistent mode: the reply descriptor closed");
    }
    fclose(rep);
    return DP_OK;
}

dp_status dp_cand_mode_parse(int *persistent, const char *what, const char *name) {
    if (name && strcmp(name, "one-call") == 0) { *persistent = 0; return DP_OK; }
    if (name && strcmp(name, "persistent") == 0) { *persistent = 1; return DP_OK; }
    return dp_error(DP_ERR_USAGE, "%s: unknown candidate mode '%s' (one-call or persistent)", what, name ? name : "");
}
