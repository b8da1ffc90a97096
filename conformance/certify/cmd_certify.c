/* conformance/certify/cmd_certify.c — `dpcert vectors`, `dpcert certify`, `dpcert keygen`,
 * `dpcert verify-report` (docs/certification.md). */
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/candidate.h"
#include "common/cli.h"
#include "common/alloc.h"
#include "common/fsutil.h"
#include "common/proc.h"
#include "common/safetensors.h"
#include "conformance/certify/certify.h"

dp_status cert_verify_bundle(const char *bundle, const char *pubkey);

int dp_cmd_vectors(int argc, char **argv) {
    const char *suite = "ci", *out = NULL;
    int help = 0;
    dp_opt opts[] = {
        {"--suite", DP_OPT_STRING, &suite, NULL, "ci (default) | certify"},
        {"--out", DP_OPT_STRING, &out, NULL, "directory for the vector files (required)"},
    };
    dp_status st = dp_opts_parse(opts, 2, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail("vectors", st);
    if (help) {
        printf("usage: dpcert vectors --suite ci|certify --out DIR\n"
               "  one safetensors file per vector (docs/certification.md \"Vectors\")\n");
        dp_opts_print_help(opts, 2);
        return 0;
    }
    if (!out) return dp_cli_fail("vectors", dp_error(DP_ERR_USAGE, "--out DIR is required"));
    cert_suite s;
    if ((st = cert_suite_parse(&s, "--suite", suite)) != DP_OK) return dp_cli_fail("vectors", st);
    char **names = NULL;
    size_t n = 0;
    st = cert_vectors_write(out, s, &names, &n);
    for (size_t i = 0; i < n; i++) {
        if (st == DP_OK) printf("%s/%s\n", out, names[i]);
        dp_free(names[i]);
    }
    dp_free(names);
    if (st == DP_OK) st = dp_stdout_finish("vectors");
    return st == DP_OK ? 0 : dp_cli_fail("vectors", st);
}

int dp_cmd_certify(int argc, char **argv) {
    const char *suite = "ci", *cand = NULL, *report = NULL, *sign = NULL, *filter = NULL, *scope = "all";
    const char *mode = "one-call";
    int64_t repeats = 0;
    double timeout = 120, alpha = 0, run_timeout = 86400;
    int help = 0, verbose = 0, rep_seen = 0;
    dp_opt opts[] = {
        {"--candidate", DP_OPT_STRING, &cand, NULL, "the candidate command; run as CMD IN OUT (required)"},
        {"--suite", DP_OPT_STRING, &suite, NULL, "ci (default: seconds, alpha 1e-6) | certify (alpha 1e-9, power 0.999 at 0.97) | strict (0.99)"},
        {"--repeats", DP_OPT_INT, &repeats, &rep_seen, "runs per vector (default: ci 2, certify what the power claim needs)"},
        {"--report", DP_OPT_STRING, &report, NULL, "the bundle directory (default: a new $TMPDIR/dpcert-certify-XXXXXX)"},
        {"--sign", DP_OPT_STRING, &sign, NULL, "Ed25519 private key (PEM, from dpcert keygen) to sign report.json"},
        {"--timeout", DP_OPT_DOUBLE, &timeout, NULL, "seconds per candidate run or request (default 120)"},
        {"--candidate-mode", DP_OPT_STRING, &mode, NULL, "one-call (default: CMD IN OUT per run) | persistent (one process, "
                                                         "requests on its stdin)"},
        {"--run-timeout", DP_OPT_DOUBLE, &run_timeout, NULL, "seconds for the whole run (default 86400)"},
        {"--alpha", DP_OPT_DOUBLE, &alpha, NULL, "false-reject bound per test (default: ci 1e-6, certify 1e-9)"},
        {"--verbose", DP_OPT_FLAG, &verbose, NULL, "one line per candidate run, every check"},
        {"--filter", DP_OPT_STRING, &filter, NULL, "only the vectors matching this regex (verdict at best INCOMPLETE)"},
        {"--scope", DP_OPT_STRING, &scope, NULL, "all (default) | dpsgd (step, sampling vectors) | dpzo: what a verdict covers"},
    };
    const size_t no = sizeof opts / sizeof opts[0];
    dp_status st = dp_opts_parse(opts, no, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail("certify", st);
    if (help) {
        printf("usage: dpcert certify --candidate 'CMD ...' [--suite ci|certify|strict] [--candidate-mode one-call|persistent] [--repeats R] [--report DIR] [--sign KEY]\n"
               "  exit 0 CERTIFIED, 1 FAILED or INCOMPLETE, 2 bad usage (docs/certification.md)\n");
        dp_opts_print_help(opts, no);
        return 0;
    }
    if (!cand || !cand[0]) return dp_cli_fail("certify", dp_error(DP_ERR_USAGE, "--candidate CMD is required"));
    cert_opts o;
    memset(&o, 0, sizeof o);
    if ((st = cert_suite_parse(&o.suite, "--suite", suite)) != DP_OK) return dp_cli_fail("certify", st);
    if (rep_seen && (st = dp_check_range("--repeats", (double)repeats, 1, 1, 1000, 1)) != DP_OK) return dp_cli_fail("certify", st);
    if ((st = dp_check_range("--timeout", timeout, 0, 0, 86400, 1)) != DP_OK) return dp_cli_fail("certify", st);
    if ((st = dp_check_range("--run-timeout", run_timeout, 0, 0, 604800, 1)) != DP_OK) return dp_cli_fail("certify", st);
    if ((st = dp_cand_mode_parse(&o.persistent, "--candidate-mode", mode)) != DP_OK) return dp_cli_fail("certify", st);
    o.run_timeout_s = run_timeout;
    if (alpha != 0 && (st = dp_check_range("--alpha", alpha, 0, 0, 0.01, 1)) != DP_OK) return dp_cli_fail("certify", st);
    o.repeats = repeats;
    o.alpha = alpha;
    o.timeout_s = timeout;
    o.candidate = cand;
    o.filter = filter;
    if ((st = cert_scope_check(scope)) != DP_OK) return dp_cli_fail("certify", st);
    o.scope = scope;
    cert_suite_defaults(&o);
    regex_t re;
    if (filter && regcomp(&re, filter, REG_EXTENDED | REG_NOSUB) != 0)
        return dp_cli_fail("certify", dp_error(DP_ERR_INVALID, "--filter: invalid regular expression '%s'", filter));
    char tmpl[4096];
    if (!report) {
        const char *td = getenv("TMPDIR");
        snprintf(tmpl, sizeof tmpl, "%s/dpcert-certify-XXXXXX", td && td[0] ? td : "/tmp");
        if (!mkdtemp(tmpl)) {
            if (filter) regfree(&re);
            return dp_cli_fail("certify", dp_error(DP_ERR_IO, "cannot create %s", tmpl));
        }
        report = tmpl;
    }
    char vd[4200];
    snprintf(vd, sizeof vd, "%s/vectors", report);
    if ((st = dp_mkdir_p("--report", report)) != DP_OK || (st = cert_vectors_write(vd, o.suite, NULL, NULL)) != DP_OK) {
        if (filter) regfree(&re); /* (a leak on this path: found by fault_alloc.sh under LeakSanitizer) */
        return dp_cli_fail("certify", st);
    }
    if (filter || strcmp(scope, "all") != 0) { /* drop the vectors outside the scope or the filter */
        char **names = NULL;
        size_t nv = 0, kept = 0;
        if ((st = cert_list_vector_files(&names, &nv, vd)) != DP_OK) {
            if (filter) regfree(&re);
            return dp_cli_fail("certify", st);
        }
        for (size_t i = 0; i < nv; i++) {
            char p[4200];
            snprintf(p, sizeof p, "%.3000s/%.1000s.safetensors", vd, names[i]);
            if ((filter && regexec(&re, names[i], 0, NULL, 0) != 0) || !cert_scope_has(scope, names[i])) remove(p);
            else kept++;
            dp_free(names[i]);
        }
        dp_free(names);
        if (filter) regfree(&re);
        if (!kept) { /* bad usage leaves nothing behind: the emptied vectors/ and a temporary report */
            rmdir(vd);
            if (report == tmpl) rmdir(tmpl);
            return dp_cli_fail("certify", dp_error(DP_ERR_INVALID, "--filter '%s' --scope %s: no vector left",
                                                   filter ? filter : ".*", scope));
        }
    }
    const double pstd = cert_suite_power_std(o.suite);
    if (pstd > 0) { /* the power claim: std <= pstd of the claim caught with power >= 0.999 */
        int64_t per = 0;
        if ((st = cert_noise_draws(&per, vd)) != DP_OK) return dp_cli_fail("certify", st);
        int64_t need = cert_repeats_needed(per, o.alpha, pstd);
        if (rep_seen && repeats < need)
            return dp_cli_fail("certify", dp_error(DP_ERR_INVALID, "--repeats %lld is below the %lld the %s level needs "
                                                                   "(power 0.999 against std %g at alpha %.0e)",
                                                   (long long)repeats, (long long)need, cert_suite_name(o.suite), pstd,
                                                   o.alpha));
        if (!rep_seen) o.repeats = need;
    }
    dp_proc_install_signal_forwarding();
    fprintf(stderr, "dpcert certify: suite %s, %lld repeats, alpha %.0e per test, candidate mode %s, bundle %s\n",
            cert_suite_name(o.suite), (long long)o.repeats, o.alpha, o.persistent ? "persistent" : "one-call", report);
    if ((st = cert_run(report, &o, verbose)) != DP_OK) {
        if (dp_proc_interrupted()) return 128 + dp_proc_interrupted();
        return dp_cli_fail("certify", st);
    }
    cert_result r;
    cert_result_init(&r);
    if ((st = cert_evaluate(&r, report, &o)) != DP_OK) { cert_result_free(&r); return dp_cli_fail("certify", st); }
    char cmdline[8192] = "dpcert certify";
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(cmdline);
        snprintf(cmdline + l, sizeof cmdline - l, " '%s'", argv[i]);
    }
    st = cert_report_write(report, &r, &o, cmdline);
    if (st == DP_OK && sign) st = cert_sign(report, sign);
    if (st != DP_OK) { cert_result_free(&r); return dp_cli_fail("certify", st); }
    double asum = 0;
    for (size_t i = 0; i < r.n; i++) {
        asum += r.items[i].alpha;
        if (verbose || r.items[i].status != CERT_PASS)
            printf("%-10s %s [%s]: %s\n", cert_status_name(r.items[i].status), r.items[i].name, r.items[i].scope, r.items[i].msg);
    }
    if (r.noise_n)
        printf("noise: measured std / claimed %.5f (99.9%% interval [%.5f, %.5f]) over %lld draws\n", r.sigma_eff_ratio,
               r.ratio_lo, r.ratio_hi, (long long)r.noise_n);
    if (r.noise_n)
        printf("implied: claimed noise multiplier 1 (q 0.01, 1000 steps, delta 1e-5) gives epsilon %.4g; the measured "
               "noise (multiplier >= %.5f at 99.9%%) supports epsilon %.4g\n",
               r.eps_claimed, r.ratio_lo, r.eps_supported);
    if (r.noise_n)
        printf("power: noise std <= %.5f of the claim is FAILED with probability >= 0.999 (the smallest under-noising "
               "this run detects)\n", cert_detectable_std(r.noise_n, o.alpha, CERT_CERTIFY_POWER));
    if (r.dpzo_n)
        printf("implied (DP-ZO): scalar noise std / claimed %.5f (99.9%% interval [%.5f, %.5f], %lld draws) supports "
               "epsilon %.4g for the same reference run\n", r.dpzo_ratio, r.dpzo_lo, r.dpzo_hi, (long long)r.dpzo_n,
               r.dpzo_eps_supported);
    for (int i = 0; i < r.nspow; i++)
        printf("sampling power: %s: %s caught by '%s' with probability >= %.6g\n", r.spow[i].vector, r.spow[i].deviation,
               r.spow[i].test, r.spow[i].power);
    printf("declared conventions: %s\n", r.conventions[0] ? r.conventions : "(none)");
    printf("%zu checks, false-reject bound (union) %.3g\n", r.n, asum);
    printf("verdict: %s%s%s%s%s%s\nreport: %s/report.json%s\n", cert_verdict_name(r.verdict),
           strcmp(scope, "all") != 0 ? " (scope " : "", strcmp(scope, "all") != 0 ? scope : "",
           strcmp(scope, "all") != 0 ? ")" : "", r.first[0] ? " -- " : "", r.first, report, sign ? " (signed)" : "");
    int rc = r.verdict == CERT_PASS ? 0 : 1;
    cert_result_free(&r);
    st = dp_stdout_finish("certify");
    return st == DP_OK ? rc : dp_cli_fail("certify", st);
}

/* *out: the canonical name of a path that may not exist yet: realpath of its directory + its
 * last component (dp_malloc'd). */
static dp_status keygen_canonical(char **out, const char *path) {
    *out = NULL;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? dp_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : dp_strdup(".");
    if (!dir) return DP_ERR_NOMEM;
    char *real = realpath(dir, NULL); /* libc's buffer */
    int e = errno;
    dp_free(dir);
    if (!real) return dp_error(e == ENOMEM ? DP_ERR_NOMEM : dp_errno_status(e), "%s: cannot resolve its directory: %s",
                               path, strerror(e));
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(real) + strlen(base) + 2;
    *out = dp_malloc(n);
    if (*out) snprintf(*out, n, "%s/%s", real, base);
    dp_free(real);
    return *out ? DP_OK : DP_ERR_NOMEM;
}

/* Refusals before any key is made (issue 29 item 3): the two paths naming one file (after
 * resolving the directories, and by device and inode when it exists: a link or a hard link
 * counts), and an existing private key without --force. */
static dp_status keygen_check(const char *priv, const char *pub, int force) {
    struct stat a, b;
    int ea = stat(priv, &a) == 0, eb = stat(pub, &b) == 0;
    if (ea && eb && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return dp_error(DP_ERR_INVALID, "--private %s and --public %s are the same file: the public key would "
                        "overwrite the private key", priv, pub);
    char *cp = NULL, *cq = NULL;
    dp_status st = keygen_canonical(&cp, priv);
    if (st == DP_OK) st = keygen_canonical(&cq, pub);
    if (st == DP_OK && strcmp(cp, cq) == 0)
        st = dp_error(DP_ERR_INVALID, "--private %s and --public %s name the same file (%s): the public key would "
                      "overwrite the private key", priv, pub, cp);
    dp_free(cp);
    dp_free(cq);
    DP_TRY(st);
    struct stat l;
    if (!force && lstat(priv, &l) == 0)
        return dp_error(DP_ERR_INVALID, "--private %s exists: refusing to overwrite a private key (--force replaces it)",
                        priv);
    return DP_OK;
}

int dp_cmd_keygen(int argc, char **argv) {
    const char *priv = NULL, *pub = NULL;
    int help = 0, force = 0;
    dp_opt opts[] = {
        {"--private", DP_OPT_STRING, &priv, NULL, "private key file to write (PEM, mode 0600; an existing one needs --force)"},
        {"--public", DP_OPT_STRING, &pub, NULL, "public key file to write (PEM)"},
        {"--force", DP_OPT_FLAG, &force, NULL, "replace an existing private key file"},
    };
    const size_t no = sizeof opts / sizeof opts[0];
    dp_status st = dp_opts_parse(opts, no, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail("keygen", st);
    if (help) {
        printf("usage: dpcert keygen --private KEY.pem --public KEY.pub.pem [--force]   (Ed25519)\n");
        dp_opts_print_help(opts, no);
        return 0;
    }
    if (!priv || !pub) return dp_cli_fail("keygen", dp_error(DP_ERR_USAGE, "--private and --public are required"));
    if ((st = keygen_check(priv, pub, force)) != DP_OK) return dp_cli_fail("keygen", st);
    st = cert_keygen(priv, pub);
    return st == DP_OK ? 0 : dp_cli_fail("keygen", st);
}

int dp_cmd_verify_report(int argc, char **argv) {
    const char *pub = NULL;
    int help = 0, npos = 0;
    char *pos[1];
    dp_opt opts[] = {{"--pubkey", DP_OPT_STRING, &pub, NULL, "Ed25519 public key (PEM) of the signer (required)"}};
    dp_status st = dp_opts_parse(opts, 1, argc, argv, pos, 1, &npos, &help);
    if (st != DP_OK) return dp_cli_fail("verify-report", st);
    if (help) {
        printf("usage: dpcert verify-report DIR --pubkey FILE\n"
               "  exit 0 when the signature, every hash and every recomputed verdict agree, 1 otherwise\n");
        dp_opts_print_help(opts, 1);
        return 0;
    }
    if (npos != 1 || !pub) return dp_cli_fail("verify-report", dp_error(DP_ERR_USAGE, "expected DIR and --pubkey FILE"));
    st = cert_verify_bundle(pos[0], pub);
    if (st == DP_OK) st = dp_stdout_finish("verify-report");
    if (st == DP_ERR_CHECK_FAILED || st == DP_ERR_FORMAT) {
        fprintf(stderr, "dpcert verify-report: NOT VERIFIED: %s\n", dp_last_error());
        return 1;
    }
    return st == DP_OK ? 0 : dp_cli_fail("verify-report", st);
}
