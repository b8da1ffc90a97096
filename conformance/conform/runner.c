/* conformance/conform/runner.c — run one case: the reference (`dpcert reference ALG`) and the
 * optimized engine (`[mpirun -n R] dpcert train ALG --impl optimized ...`) as separate
 * processes with identical flags (seeds, noise keys) into temporary export directories,
 * then compare every step (compare.c) or run the statistical check (stats.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "common/proc.h"
#include "common/safetensors.h"
#include "conformance/conform/conform.h"

#define CONF_CASE_TIMEOUT_S 300

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs argv with stdout+stderr into `log` through common/proc.h (own process group, time
 * limit: SIGTERM then SIGKILL to the whole group; SIGINT/SIGTERM/SIGHUP received by conform
 * are forwarded to the group); returns the exit code (128+signal, 124 on timeout, 127 not
 * executable, -1 not started). `inject` 1: DPCERT_TEST_INJECT=1 in the child's environment
 * (negative controls use the test-only `dpcert train --inject-bug`, which refuses to run
 * without it); 0: removed, so a normal case can never run an injected bug. */
static int run_proc(char *const *argv, const char *log, int timeout_s, int inject) {
    static const char *const set_inject[] = {"DPCERT_TEST_INJECT=1", NULL};
    static const char *const unset_inject[] = {"DPCERT_TEST_INJECT", NULL};
    dp_proc_opts o = {0};
    o.timeout_s = timeout_s;
    o.log_path = log;
    o.env_set = inject ? set_inject : NULL;
    o.env_unset = inject ? NULL : unset_inject;
    dp_proc_result r;
    if (dp_proc_run(&r, argv, &o) != DP_OK) return -1;
    return r.exit_code;
}

/* The line of a log that best says what went wrong, for the report: the last line
 * starting "dpcert " (every dpcert error message does), else the last line that is not
 * decoration (mpirun frames its messages with lines of '-'). */
static void log_tail(char *buf, size_t len, const char *log) {
    buf[0] = '\0';
    FILE *f = fopen(log, "r");
    if (!f) return;
    char line[512], last[512] = "";
    int have_dpcert = 0;
    while (fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = '\0';
        size_t deco = strspn(line, "-=* \t");
        if (deco == l) continue;
        if (strncmp(line, "dpcert ", 7) == 0) { snprintf(buf, len, "%s", line); have_dpcert = 1; }
        snprintf(last, sizeof last, "%s", line);
    }
    fclose(f);
    if (!have_dpcert) snprintf(buf, len, "%s", last);
}

static int log_contains(const char *log, const char *needle) {
    FILE *f = fopen(log, "r");
    if (!f) return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* Exit 3 means "cannot run here" only when the log says so in one of the two forms the
 * binary prints (common/cli.c dp_cli_fail): a line "dpcert CMD[ SUB]: not supported: ..."
 * (DP_ERR_NOT_SUPPORTED), or "... not built into this binary" (a subcommand or backend
 * compiled out). Anything else with exit 3 is an internal error: FAIL. */
int conf_log_not_supported(int rc, const char *log) {
    if (rc != 3) return 0;
    if (log_contains(log, "not built into this binary")) return 1;
    FILE *f = fopen(log, "r");
    if (!f) return 0;
    regex_t re;
    if (regcomp(&re, "^dpcert [a-z-]+( [a-z]+)?: not supported: ", REG_EXTENDED | REG_NOSUB) != 0) { fclose(f); return 0; }
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = regexec(&re, line, 0, NULL, 0) == 0;
    regfree(&re);
    fclose(f);
    return found;
}

static int have_in_path(const char *prog) {
    const char *p = getenv("PATH");
    if (!p) return 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", p);
    for (char *sv = NULL, *d = strtok_r(buf, ":", &sv); d; d = strtok_r(NULL, ":", &sv)) {
        char full[4200];
        snprintf(full, sizeof full, "%s/%s", d, prog);
        if (access(full, X_OK) == 0) return 1;
    }
    return 0;
}

/* Remove a file or a directory tree; a symbolic link is removed, never followed. */
void conf_rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (!S_ISDIR(sb.st_mode)) { unlink(path); return; }
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            conf_rm_rf(p);
        }
        closedir(d);
    }
    rmdir(path);
}

typedef struct { char **v; size_t n, cap; } argvec;
static int av_push(argvec *a, const char *s) {
    if (DP_GROW(a->v, a->cap, a->n + 2, 64, "argument vector") != DP_OK) return -1;
    a->v[a->n++] = (char *)s;
    a->v[a->n] = NULL;
    return 0;
}

/* Every step's values of the tensors whose names start with `prefix` (f64), appended. */
static dp_status collect(double **vals, size_t *n, int64_t *batch_total, int64_t *nsteps, const char *dir,
                         const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return dp_error(DP_ERR_IO, "cannot open export directory %s", dir);
    struct dirent *e;
    dp_status st = DP_OK;
    while ((e = readdir(d)) && st == DP_OK) {
        if (strncmp(e->d_name, "step-", 5) != 0) continue;
        char p[4400];
        snprintf(p, sizeof p, "%.4000s/%s", dir, e->d_name);
        dp_tensor_set s;
        if ((st = dp_st_read(&s, p)) != DP_OK) break;
        (*nsteps)++;
        const dp_tensor *bi = dp_tset_find(&s, "batch.indices");
        if (bi) *batch_total += dp_tensor_numel(bi);
        for (size_t i = 0; i < s.n && st == DP_OK; i++) {
            if (!prefix || strncmp(s.items[i].name, prefix, strlen(prefix)) != 0) continue;
            int64_t m = dp_tensor_numel(&s.items[i].t);
            double *q = dp_realloc(*vals, (*n + (size_t)m + 1) * sizeof *q);
            if (!q) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
            *vals = q;
            for (int64_t k = 0; k < m; k++) q[(*n)++] = dp_tensor_get(&s.items[i].t, k);
        }
        dp_tset_free(&s);
    }
    closedir(d);
    return st;
}

/* Does the reference export in `dir` exercise the clip (docs/conformance.md "Clip coverage")?
 * Per step and per clip-factor tensor (flat, or one group):
 * - abadi: some example clipped by more than CONF_CLIP_MIX_MARGIN (c < 1 - m) and some not
 *   clipped (c == 1) in the same step, so a candidate that never or always clips fails;
 * - automatic (c = R / (n + gamma), no branch): the factors of one step spread by more than m
 *   (max > (1 + m) min) and some factor differs from 1 by more than m, so a candidate that
 *   does not scale, or scales every example by one shared factor, fails;
 * - DP-ZO: some |l+ - l-| > C (1 + m) (clipped) and some <= C (not clipped) in one step.
 * Returns 1 when exercised, 0 when not (msg says why), -1 when nothing to check (no factors). */
int conf_clip_mix_check(char *msg, size_t len, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { snprintf(msg, len, "cannot open %s", dir); return 0; }
    const double m = CONF_CLIP_MIX_MARGIN;
    struct dirent *e;
    int applies = -1, mixed = 0;
    const char *what = "abadi";
    int64_t na = 0, nb = 0; /* abadi/DP-ZO: clipped / unclipped; automatic: steps with spread / off 1 */
    while ((e = readdir(d)) && !mixed) {
        if (strncmp(e->d_name, "step-", 5) != 0) continue;
        char p[4400];
        snprintf(p, sizeof p, "%.4000s/%s", dir, e->d_name);
        dp_tensor_set s;
        if (dp_st_read(&s, p) != DP_OK) continue;
        const dp_tensor *lp = dp_tset_find(&s, "per_sample.loss_plus"), *lm = dp_tset_find(&s, "per_sample.loss_minus");
        const char *fn = dp_tset_meta(&s, "clip_fn"), *cs = dp_tset_meta(&s, "clip");
        if (lp && lm && cs && dp_tensor_numel(lp) == dp_tensor_numel(lm)) { /* DP-ZO */
            what = "dpzo";
            applies = 1;
            double C = 0; /* the export's metadata, parsed by the option rules (a bad value: C = 0, nothing clipped) */
            if (dp_parse_double(&C, "clip", cs) != DP_OK) { dp_clear_error(); C = 0; }
            int hi = 0, lo = 0;
            for (int64_t k = 0; k < dp_tensor_numel(lp); k++) {
                double df = fabs(dp_tensor_get(lp, k) - dp_tensor_get(lm, k));
                if (df > C * (1 + m)) { hi = 1; na++; }
                else if (df <= C) { lo = 1; nb++; }
            }
            mixed = hi && lo;
        } else if (fn) {
            int automatic = strcmp(fn, "automatic") == 0;
            if (automatic) what = "automatic";
            for (size_t i = 0; i < s.n && !mixed; i++) {
                if (strncmp(s.items[i].name, "per_sample.clip_factor", 22) != 0) continue;
                const dp_tensor *t = &s.items[i].t;
                if (applies < 0) applies = 1;
                int lo = 0, one = 0;
                double fmin = INFINITY, fmax = -INFINITY;
                for (int64_t k = 0; k < dp_tensor_numel(t); k++) {
                    double f = dp_tensor_get(t, k);
                    if (f < fmin) fmin = f;
                    if (f > fmax) fmax = f;
                    if (automatic) {
                        if (fabs(f - 1) > m) lo = 1;
                    } else if (f < 1 - m) { lo = 1; na++; }
                    else if (f == 1) { one = 1; nb++; }
                }
                if (automatic) {
                    one = dp_tensor_numel(t) >= 2 && fmax > (1 + m) * fmin;
                    na += one;
                    nb += lo;
                }
                mixed = lo && one;
            }
        }
        dp_tset_free(&s);
    }
    closedir(d);
    if (applies < 0) return -1;
    if (!mixed) {
        if (strcmp(what, "automatic") == 0)
            snprintf(msg, len, "no step whose automatic clip factors spread by more than %g and differ from 1 by more "
                     "than %g (%lld factor tensors spread, %lld off 1): retune 'clip' or the data", m, m,
                     (long long)na, (long long)nb);
        else
            snprintf(msg, len, "the reference never has clipped (by more than %g) and unclipped examples in one step "
                     "(%lld clipped, %lld unclipped over all steps): retune 'clip' so both branches are tested%s",
                     m, (long long)na, (long long)nb, strcmp(what, "dpzo") == 0 ? " (DP-ZO: |l+ - l-| against C)" : "");
    }
    return mixed;
}

/* The candidate's command: [mpirun -n R (R > 1)] DPCERT train ALGO --impl optimized --backend B
 * [--strategy S --noise-mode M] --dtype D ARGS CAND_ARGS --export DIR (rs: R in decimal). */
static void cand_argv(argvec *ca, const conf_case *c, int64_t ranks, const char *rs, const conf_run_opts *o,
                      const char *canddir) {
    if (ranks > 1) {
        av_push(ca, "mpirun"); av_push(ca, "-n"); av_push(ca, rs);
    }
    av_push(ca, o->dpcert); av_push(ca, "train"); av_push(ca, c->algorithm);
    av_push(ca, "--impl"); av_push(ca, "optimized");
    av_push(ca, "--backend"); av_push(ca, o->backend);
    if (strcmp(c->algorithm, "dpsgd") == 0) {
        av_push(ca, "--strategy"); av_push(ca, c->strategy);
        av_push(ca, "--noise-mode"); av_push(ca, c->noise_mode);
    }
    av_push(ca, "--dtype"); av_push(ca, c->dtype);
    for (size_t i = 0; i < c->nargs; i++) av_push(ca, c->args[i]);
    for (size_t i = 0; i < c->ncand; i++) av_push(ca, c->cand_args[i]);
    av_push(ca, "--export"); av_push(ca, canddir);
}

dp_status conf_run_case(conf_case_result *res, const conf_case *c, int64_t ranks, const conf_run_opts *o) {
    memset(res, 0, sizeof *res);
    conf_cmp_result_init(&res->cmp);
    snprintf(res->name, sizeof res->name, "%s@r%lld", c->name, (long long)ranks);
    snprintf(res->backend, sizeof res->backend, "%s", o->backend ? o->backend : "");
    double t0 = now_s();
    char wd[2048], refdir[2100], canddir[2100], reflog[2100], candlog[2100];
    if (strlen(o->work_dir) > 1800)
        return dp_error(DP_ERR_INVALID, "--work %s: a directory name of %zu bytes, longer than the 1800 a case's "
                        "work directory allows", o->work_dir, strlen(o->work_dir));
    snprintf(wd, sizeof wd, "%.1800s/%s", o->work_dir, res->name);
    conf_rm_rf(wd);
    if (mkdir(wd, 0755) != 0) return dp_error(DP_ERR_IO, "cannot create %s", wd);
    snprintf(refdir, sizeof refdir, "%s/ref", wd);
    snprintf(canddir, sizeof canddir, "%s/cand", wd);
    snprintf(reflog, sizeof reflog, "%s/ref.log", wd);
    snprintf(candlog, sizeof candlog, "%s/cand.log", wd);
    int need_ref = strcmp(c->kind, "compare") == 0;
    dp_status st = DP_OK;
    argvec ra = {0}, ca = {0};
    char rs[32];
    snprintf(rs, sizeof rs, "%lld", (long long)ranks);

    if (ranks > 1 && !have_in_path("mpirun")) {
        res->status = CONF_NOT_SUPPORTED;
        snprintf(res->detail, sizeof res->detail, "mpirun not found: %lld ranks cannot run", (long long)ranks);
        goto finish;
    }
    /* reference */
    if (need_ref) {
        av_push(&ra, o->dpcert); av_push(&ra, "reference"); av_push(&ra, c->algorithm);
        for (size_t i = 0; i < c->nargs; i++) av_push(&ra, c->args[i]);
        for (size_t i = 0; i < c->nref; i++) av_push(&ra, c->ref_args[i]);
        av_push(&ra, "--export"); av_push(&ra, refdir);
        if (!ra.v) { st = dp_error(DP_ERR_NOMEM, "out of memory"); goto finish; }
        int rc = run_proc(ra.v, reflog, CONF_CASE_TIMEOUT_S, 0);
        if (rc != 0) {
            char tail[300];
            log_tail(tail, sizeof tail, reflog);
            res->status = conf_log_not_supported(rc, reflog) ? CONF_NOT_SUPPORTED : CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "reference exited %d: %s", rc, tail);
            goto finish;
        }
    }
    if (dp_proc_interrupted()) { /* conform was interrupted: start nothing more */
        res->status = CONF_FAIL;
        snprintf(res->detail, sizeof res->detail, "interrupted by signal %d", dp_proc_interrupted());
        goto finish;
    }
    /* candidate */
    cand_argv(&ca, c, ranks, rs, o, canddir);
    if (!ca.v) { st = dp_error(DP_ERR_NOMEM, "out of memory"); goto finish; }
    {
        int rc = run_proc(ca.v, candlog, CONF_CASE_TIMEOUT_S, c->expect_fail);
        if (rc != 0) {
            char tail[300];
            log_tail(tail, sizeof tail, candlog);
            /* exit 3 with a "not supported: " / "not built into this binary" line: the backend cannot run this case */
            res->status = conf_log_not_supported(rc, candlog) ? CONF_NOT_SUPPORTED : CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "candidate exited %d: %s", rc, tail);
            goto finish;
        }
    }
    if (need_ref) {
        conf_cmp_opts co;
        conf_cmp_opts_default(&co);
        co.cand_dtype = strcmp(c->dtype, "f64") == 0 ? DP_F64 : DP_F32;
        co.mixed = strcmp(c->dtype, "bf16") == 0 || strcmp(c->dtype, "fp16") == 0; /* docs/precision.md */
        co.half_dtype = strcmp(c->dtype, "fp16") == 0 ? DP_F16 : DP_BF16;
        co.dtype_given = 1; /* the case's dtype: the candidate's export must declare the same */
        co.noise_statistical = strcmp(c->noise_mode, "shares") == 0;
        dp_status cs = conf_compare_paths(&res->cmp, refdir, canddir, &co);
        if (cs != DP_OK) {
            res->status = CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "comparison could not run: %s", dp_last_error());
            goto finish;
        }
        res->status = res->cmp.status;
        res->worst_frac = res->cmp.worst_frac;
        if (res->cmp.incomplete && res->status != CONF_FAIL) { /* never a pass by omission */
            res->status = CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "INCOMPLETE: %s", res->cmp.incomplete_why);
        }
        char why[400];
        if (!c->expect_fail && c->clip_mix && res->status != CONF_FAIL && conf_clip_mix_check(why, sizeof why, refdir) == 0) {
            res->status = CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "case does not exercise clipping: %s", why);
            goto finish;
        }
        if (res->cmp.first_fail[0]) {
            for (size_t i = 0; i < res->cmp.n; i++)
                if (strcmp(res->cmp.items[i].name, res->cmp.first_fail) == 0)
                    snprintf(res->detail, sizeof res->detail, "FAIL %s: %s", res->cmp.first_fail, res->cmp.items[i].msg);
        } else if (res->cmp.ncompared == 0) {
            res->status = CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "no tensor compared");
        }
    } else {
        double *vals = NULL;
        size_t nv = 0;
        int64_t btot = 0, nsteps = 0;
        int noise = strcmp(c->kind, "stat-noise") == 0;
        /* DP-SGD exports step.noise.<name>; DP-ZO a scalar or [n] step.noise */
        dp_status cs = collect(&vals, &nv, &btot, &nsteps, canddir, noise ? "step.noise" : NULL);
        if (cs != DP_OK) {
            dp_free(vals);
            res->status = CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "cannot read the candidate export: %s", dp_last_error());
            goto finish;
        }
        res->is_stat = 1;
        if (noise) conf_stat_noise_variance(&res->stat, vals, nv, c->sigma * c->sigma * c->clip * c->clip, c->alpha);
        else conf_stat_poisson(&res->stat, btot, c->n_data * nsteps, c->q, c->alpha);
        dp_free(vals);
        res->status = res->stat.status;
        snprintf(res->detail, sizeof res->detail, "%s: %s", res->stat.name, res->stat.msg);
    }
finish:
    /* a negative control passes when the check FAILs (naming the expected tensor) */
    if (st == DP_OK && c->expect_fail && res->status != CONF_NOT_SUPPORTED && res->status != CONF_SKIPPED) {
        int named = !c->expect_tensor[0] || strstr(res->cmp.first_fail, c->expect_tensor) != NULL;
        int ran = !strstr(res->detail, "exited");
        char d[360];
        snprintf(d, sizeof d, "%.350s", res->detail);
        if (res->status == CONF_FAIL && named && ran) {
            res->status = CONF_PASS;
            snprintf(res->detail, sizeof res->detail, "negative control failed as expected: %s", d);
        } else {
            res->status = CONF_FAIL;
            snprintf(res->detail, sizeof res->detail, "negative control NOT caught (expected a FAIL naming %s*): %s",
                     c->expect_tensor[0] ? c->expect_tensor : "a tensor", d);
        }
        res->worst_frac = 0;
    }
    res->seconds = now_s() - t0;
    dp_free(ra.v);
    dp_free(ca.v);
    if (!o->keep && st == DP_OK) conf_rm_rf(wd);
    return st;
}
