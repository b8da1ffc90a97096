/* conformance/certify/certify.c — the two phases of `dpcert certify` (docs/certification.md):
 * run (the candidate on every vector, R times, outputs kept in the bundle) and evaluate
 * (every check recomputed from the stored vectors and outputs; `verify-report` calls only
 * this phase). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/alloc.h"
#include "common/hash.h"
#include "common/safetensors.h"
#include "conformance/certify/certify.h"
#include "conformance/certify/certify_int.h"
#include "common/candidate.h"

void cert_suite_defaults(cert_opts *o) {
    if (o->suite == CERT_SUITE_CI) {
        if (!(o->alpha > 0)) o->alpha = 1e-6;
        if (o->repeats <= 0) o->repeats = 2;
    } else {
        if (!(o->alpha > 0)) o->alpha = 1e-9;
        if (o->repeats <= 0) o->repeats = 4; /* raised by cert_run/evaluate's power requirement */
    }
    if (!(o->timeout_s > 0)) o->timeout_s = 120;
}

/* ---- the bundle's files ---- */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
dp_status cert_list_vector_files(char ***names, size_t *n, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return dp_error(DP_ERR_IO, "cannot open %s", dir);
    char **v = NULL;
    size_t k = 0, cap = 0;
    struct dirent *e;
    dp_status st = DP_OK;
    while ((e = readdir(d)) && st == DP_OK) {
        size_t l = strlen(e->d_name);
        if (l < 13 || strcmp(e->d_name + l - 12, ".safetensors") != 0 || e->d_name[0] == '.') continue;
        if ((st = DP_GROW(v, cap, k + 1, 16, "vector list")) != DP_OK) break;
        if (!(v[k] = dp_strndup(e->d_name, l - 12))) st = dp_error(DP_ERR_NOMEM, "out of memory");
        else k++;
    }
    closedir(d);
    if (k) qsort(v, k, sizeof *v, cmp_str);
    *names = v;
    *n = k;
    return st;
}
static dp_status list_vectors(char ***names, size_t *n, const char *bundle) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/vectors", bundle);
    return cert_list_vector_files(names, n, dir);
}
static void free_names(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) dp_free(v[i]);
    dp_free(v);
}

/* The candidate never gets the bundle's vector: a read-only copy in a scratch folder, whose
 * SHA-256 is checked after every call (a candidate that overwrites its IN is FAILED with
 * outcome INPUT_MODIFIED, and the next call gets a fresh copy). */
static dp_status stage_input(char *hex, const char *src, const char *dst) {
    uint8_t *buf = NULL;
    size_t len = 0;
    DP_TRY(dp_read_file(&buf, &len, src));
    dp_status st = dp_sha256_buf_hex(hex, buf, len);
    chmod(dst, 0600); /* an earlier copy (made read-only) is replaced */
    if (st == DP_OK) st = dp_write_file_atomic("--report", dst, buf, len);
    if (st == DP_OK) chmod(dst, 0444);
    dp_free(buf);
    return st;
}

static void scratch_remove(const char *dir, char **names, size_t nv) {
    for (size_t i = 0; i < nv; i++) {
        char p[4300];
        snprintf(p, sizeof p, "%s/%s.safetensors", dir, names[i]);
        remove(p);
    }
    rmdir(dir);
}

dp_status cert_run(const char *bundle, const cert_opts *o, int verbose) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/outputs", bundle);
    DP_TRY(dp_mkdir_p("--report", dir));
    char **names = NULL;
    size_t nv = 0;
    DP_TRY(list_vectors(&names, &nv, bundle));
    const char *td = getenv("TMPDIR");
    char scratch[4096], logfmt[4200];
    snprintf(scratch, sizeof scratch, "%s/dpcert-in-XXXXXX", td && td[0] ? td : "/tmp");
    if (!mkdtemp(scratch)) { free_names(names, nv); return dp_error(DP_ERR_IO, "cannot create %s", scratch); }
    snprintf(logfmt, sizeof logfmt, "%.4000s/outputs/candidate.p%%d.log", bundle);
    dp_cand_opts co;
    dp_cand_opts_default(&co);
    co.timeout_s = o->timeout_s;
    const double deadline = o->run_timeout_s > 0 ? dp_proc_now() + o->run_timeout_s : 0;
    dp_cand_session sess;
    dp_cand_session_init(&sess, o->candidate, &co, logfmt, deadline);
    dp_status st = DP_OK;
    for (size_t i = 0; i < nv && st == DP_OK; i++) {
        char vp[4096], ip[4300], hex[65], hex2[65];
        snprintf(vp, sizeof vp, "%s/vectors/%s.safetensors", bundle, names[i]);
        snprintf(ip, sizeof ip, "%s/%s.safetensors", scratch, names[i]);
        dp_tensor_set v;
        if ((st = dp_st_read(&v, vp)) != DP_OK) break;
        cert_expect_list ex;
        st = cert_expectations(&ex, &v);
        dp_tset_free(&v);
        if (st == DP_OK) st = stage_input(hex, vp, ip);
        for (int64_t r = 1; r <= o->repeats && st == DP_OK; r++) {
            char op[4096], sp[4096], lp[4096];
            cert_out_path(op, sizeof op, bundle, names[i], r, "safetensors");
            cert_out_path(sp, sizeof sp, bundle, names[i], r, "status");
            cert_out_path(lp, sizeof lp, bundle, names[i], r, "log");
            dp_cand_result cr;
            dp_tensor_set out;
            if (o->persistent) {
                st = dp_cand_session_run(&sess, &cr, &out, ip, op, ex.e, ex.n);
            } else {
                double left = deadline > 0 ? deadline - dp_proc_now() : co.timeout_s;
                co.log_path = lp;
                co.timeout_s = left < o->timeout_s ? left : o->timeout_s;
                if (co.timeout_s > 0) {
                    st = dp_candidate_run(&cr, &out, o->candidate, ip, op, ex.e, ex.n, &co);
                } else {
                    memset(&cr, 0, sizeof cr);
                    dp_tset_init(&out);
                    cr.outcome = DP_CAND_TIMEOUT;
                    snprintf(cr.msg, sizeof cr.msg, "not run: the whole-run time limit of %.0f s was reached", o->run_timeout_s);
                }
            }
            dp_tset_free(&out);
            if (st != DP_OK) break;
            if (cr.outcome == DP_CAND_INTERRUPTED) {
                st = dp_error(DP_ERR_IO, "interrupted");
                break;
            }
            struct stat isb;
            if (lstat(ip, &isb) != 0 || !S_ISREG(isb.st_mode)) { /* removed or replaced: as modified */
                hex2[0] = '\0';
            } else if ((st = dp_sha256_file_hex(hex2, ip)) != DP_OK) { /* a read error is the system's: exit 3 */
                if (st != DP_ERR_NOMEM) st = dp_error_context(DP_ERR_SYSIO, "read error of the input copy %s", ip);
                break;
            }
            if (strcmp(hex, hex2) != 0) {
                cr.outcome = DP_CAND_INPUT_MODIFIED;
                snprintf(cr.msg, sizeof cr.msg, "the candidate modified its input %s.safetensors (SHA-256 %.12s... before, "
                         "%.12s... after): a candidate must not write to IN", names[i], hex, hex2[0] ? hex2 : "(gone)");
                if ((st = stage_input(hex, vp, ip)) != DP_OK) break;
            }
            /* outcomes the stored output cannot show again are recorded beside it */
            if (cr.outcome == DP_CAND_EXIT || cr.outcome == DP_CAND_TIMEOUT || cr.outcome == DP_CAND_NO_OUTPUT ||
                cr.outcome == DP_CAND_PROTOCOL || cr.outcome == DP_CAND_INPUT_MODIFIED) {
                remove(op);
                char line[700];
                int len = snprintf(line, sizeof line, "%s %s\n", dp_cand_outcome_name(cr.outcome), cr.msg);
                st = dp_write_file_atomic("--report", sp, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
            } else {
                remove(sp);
            }
            if (verbose)
                fprintf(stderr, "  %s r%lld: %s%s%s (%.2f s)\n", names[i], (long long)r, dp_cand_outcome_name(cr.outcome),
                        cr.msg[0] ? ": " : "", cr.msg, cr.proc.wall_s);
        }
        cert_expect_free(&ex);
    }
    dp_cand_session_close(&sess);
    scratch_remove(scratch, names, nv);
    free_names(names, nv);
    return st;
}

/* Every acceptance region must be able to reject on the sides its check relies on: a lower
 * bound at or below the least value the statistic can take (a negative bound for a count) makes
 * the check pass by construction (docs/certification.md "Acceptance regions"). */
static dp_status push_regions(cert_result *r) {
    size_t tested = 0, n = r->n;
    for (size_t i = 0; i < n; i++) {
        const cert_check *k = &r->items[i];
        if (k->status == CERT_INCOMPLETE || !(k->lo != 0 || k->hi != 0)) continue;
        tested++;
        int bad = k->vacuous & (k->need ? k->need : CERT_NEED_LO | CERT_NEED_HI);
        if (!bad) continue;
        char sc[160], m[320];
        snprintf(sc, sizeof sc, "%.60s [%.90s]", k->name, k->scope);
        snprintf(m, sizeof m, "the acceptance region [%.4g, %.4g] cannot reject on its %s side: the check has no power there "
                 "(more draws or steps are needed)", k->lo, k->hi, bad & CERT_NEED_LO ? "lower" : "upper");
        return cert_push(r, CERT_INCOMPLETE, "acceptance regions", sc, m);
    }
    char m[200];
    snprintf(m, sizeof m, "%zu acceptance regions, none vacuous on a side its check relies on", tested);
    return cert_push(r, CERT_PASS, "acceptance regions", "every statistical check", m);
}

/* When every call failed the same way before writing any output (the same outcome, the same
 * message or the same end of its log), the candidate could not start: say so first, with the
 * reason, rather than leave one FAIL per vector to be read (docs/certification.md "Run
 * outcomes"). */
static dp_status push_start_failure(cert_result *r, const char *bundle, char **names, size_t nv, const cert_opts *o) {
    char first[600] = "", sp[4096];
    size_t calls = 0;
    for (size_t i = 0; i < nv; i++)
        for (int64_t k = 1; k <= o->repeats; k++) {
            cert_out_path(sp, sizeof sp, bundle, names[i], k, "status");
            char *buf = NULL;
            size_t len = 0;
            if (dp_read_file_max(&buf, &len, "status", sp, 4096) != DP_OK) return DP_OK; /* a call that did not fail */
            char line[600];
            snprintf(line, sizeof line, "%.*s", (int)len, buf);
            dp_free(buf);
            line[strcspn(line, "\n")] = '\0';
            if ((strncmp(line, "EXIT ", 5) != 0 && strncmp(line, "NO_OUTPUT ", 10) != 0 && strncmp(line, "PROTOCOL ", 9) != 0) ||
                strstr(line, "during request") || strstr(line, "candidate replied ERROR") || strstr(line, "wrong reply"))
                return DP_OK; /* a persistent candidate that was ready: it started */
            const char *tl = strstr(line, "; its output ends:"), *tf = strstr(first, "; its output ends:");
            if (!calls) snprintf(first, sizeof first, "%s", line);
            else if (strcmp(first, line) != 0 && !(tl && tf && strcmp(tl, tf) == 0))
                return DP_OK;
            calls++;
        }
    if (!calls) return DP_OK;
    char m[320];
    snprintf(m, sizeof m, "every call (%zu) failed the same way before writing any output: the candidate could not start "
             "(an environment problem? interpreter, modules, path): %.150s", calls, first);
    return cert_push(r, CERT_FAIL, "candidate start", "every vector and repeat", m);
}

dp_status cert_evaluate(cert_result *r, const char *bundle, const cert_opts *o) {
    char **names = NULL;
    size_t nv = 0;
    DP_TRY(list_vectors(&names, &nv, bundle));
    dp_status st0 = push_start_failure(r, bundle, names, nv, o);
    if (st0 != DP_OK) { free_names(names, nv); return st0; }
    cert_eval_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.bundle = bundle;
    c.o = o;
    dp_status st = DP_OK;
    if (nv == 0) st = dp_error(DP_ERR_FORMAT, "no vectors in %s/vectors", bundle);
    for (size_t i = 0; i < nv && st == DP_OK; i++) {
        char vp[4096], hex[65];
        snprintf(vp, sizeof vp, "%s/vectors/%s.safetensors", bundle, names[i]);
        dp_tensor_set v;
        if ((st = dp_st_read(&v, vp)) != DP_OK) break;
        const char *decl = dp_tset_meta(&v, "vector_sha256");
        if ((st = cert_vector_digest(hex, &v)) == DP_OK && (!decl || strcmp(decl, hex) != 0))
            st = dp_error(DP_ERR_FORMAT, "vector %s: vector_sha256 does not match its content (tampered?)", names[i]);
        if (st == DP_OK) st = cert_vector_kind_of(dp_tset_meta(&v, "kind"))->eval(&c, names[i], &v);
        dp_tset_free(&v);
    }
    /* each kind's pooled tests, in the order of the kinds (kinds.c) */
    for (int k = 0; k < CERT_VK_COUNT; k++)
        if (cert_vector_kinds[k].finish) st = cert_vector_kinds[k].finish(&c, st);
    if (st == DP_OK) st = push_regions(r);
    if (st == DP_OK && o->filter) { /* a partial run certifies nothing (last: the first reason stays the real one) */
        cert_check k;
        memset(&k, 0, sizeof k);
        k.status = CERT_INCOMPLETE;
        snprintf(k.name, sizeof k.name, "coverage");
        snprintf(k.scope, sizeof k.scope, "%zu vectors", nv);
        snprintf(k.msg, sizeof k.msg, "vectors filtered by '%.200s': not every vector of the suite was run", o->filter);
        st = cert_result_push(r, &k);
    }
    if (st == DP_OK && o->scope && strcmp(o->scope, "all") != 0) { /* what the verdict covers, in every report */
        cert_check k;
        memset(&k, 0, sizeof k);
        k.status = CERT_PASS;
        snprintf(k.name, sizeof k.name, "scope");
        snprintf(k.scope, sizeof k.scope, "%zu vectors", nv);
        snprintf(k.msg, sizeof k.msg, "--scope %s: the verdict covers %s only", o->scope,
                 strcmp(o->scope, "dpsgd") == 0 ? "DP-SGD (step and sampling vectors), not DP-ZO"
                                                : "DP-ZO (dpzo vectors), not DP-SGD");
        st = cert_result_push(r, &k);
    }
    cert_eval_ctx_free(&c);
    free_names(names, nv);
    return st;
}

dp_status cert_noise_draws(int64_t *n, const char *dir) {
    *n = 0;
    char **names = NULL;
    size_t nv = 0;
    dp_status st = DP_OK;
    DP_TRY(cert_list_vector_files(&names, &nv, dir));
    for (size_t i = 0; i < nv && st == DP_OK; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%.3000s/%.1000s.safetensors", dir, names[i]);
        dp_tensor_set v;
        if ((st = dp_st_read(&v, p)) != DP_OK) break;
        const char *k = dp_tset_meta(&v, "kind"), *alg = dp_tset_meta(&v, "algorithm");
        int steps = 1;
        if (alg && strcmp(alg, "dpzo") == 0) k = NULL; /* a DP-ZO trajectory: no DP-SGD noise draws */
        if (k && strcmp(k, "trajectory") == 0 && (st = cert_traj_steps(&steps, &v)) != DP_OK) { dp_tset_free(&v); break; }
        for (size_t j = 0; k && (strcmp(k, "step") == 0 || strcmp(k, "trajectory") == 0) && j < v.n; j++)
            if (strncmp(v.items[j].name, "params.", 7) == 0) *n += steps * dp_tensor_numel(&v.items[j].t);
        dp_tset_free(&v);
    }
    for (size_t i = 0; i < nv; i++) dp_free(names[i]);
    dp_free(names);
    return st;
}

double cert_suite_power_std(cert_suite s) {
    return s == CERT_SUITE_CERTIFY ? CERT_CERTIFY_STD : s == CERT_SUITE_STRICT ? CERT_STRICT_STD : 0;
}

int64_t cert_repeats_needed(int64_t per_repeat, double alpha, double std) {
    if (per_repeat <= 0) return 2; /* no DP-SGD step vector (a filtered run): no noise power claim to meet */
    int64_t need = 1;
    while (need < 1000 && cert_power_variance(per_repeat * need, alpha, std) < CERT_CERTIFY_POWER) need++;
    return need < 2 ? 2 : need;
}

int cert_scope_has(const char *scope, const char *name) {
    if (!scope || strcmp(scope, "all") == 0) return 1;
    const int zo = strncmp(name, "dpzo-", 5) == 0;
    return strcmp(scope, "dpzo") == 0 ? zo : !zo;
}

dp_status cert_scope_check(const char *s) {
    if (s && strcmp(s, "all") != 0 && strcmp(s, "dpsgd") != 0 && strcmp(s, "dpzo") != 0)
        return dp_error(DP_ERR_USAGE, "--scope: unknown scope '%s' (all, dpsgd or dpzo)", s);
    return DP_OK;
}
