/* conformance/certify/certify_report.c — the certification bundle's reports and signature
 * (docs/certification.md "Reports"): report.md, junit.xml (through report.c's writers),
 * report.json (version, git revision, command, options, SHA-256 of every file, every check,
 * the verdict), and the Ed25519 signature of report.json (OpenSSL EVP). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "common/fsutil.h"
#include "common/hash.h"
#include "common/safetensors.h"
#include "conformance/certify/certify.h"
#include "conformance/conform/conform.h"
#include "conformance/certify/certify_html.h"
#include "common/version.h"


/* "files": the SHA-256 of every entry of the bundle, every directory walked (docs/certification.md
 * §4: no file may be unlisted), keyed by its path relative to the bundle ("vectors/NAME",
 * "outputs/NAME", "report.md", "sub/dir/x" ...), names starting with '.' included; only the
 * top-level report.json and report.json.sig are outside (the signature covers report.json).
 * Nothing is followed or opened that could block: a regular file is hashed by content, a
 * symbolic link by "symlink:" + its target text, any other entry (FIFO, socket, device) by
 * "special:" + its kind; directories nest at most CERT_BUNDLE_DEPTH deep. */
#define CERT_BUNDLE_DEPTH 8
static dp_status hash_entry(json_t *files, const char *path, const char *key, int depth);

static dp_status hash_dir(json_t *files, const char *dir, const char *prefix, int depth) {
    if (depth > CERT_BUNDLE_DEPTH)
        return dp_error(DP_ERR_CHECK_FAILED, "bundle directory %s nests more than %d levels", dir, CERT_BUNDLE_DEPTH);
    DIR *d = opendir(dir);
    if (!d) return dp_error(dp_errno_status(errno), "cannot read the bundle directory %s: %s", dir, strerror(errno));
    struct dirent *e;
    dp_status st = DP_OK;
    while (st == DP_OK && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (depth == 0 && (strcmp(e->d_name, "report.json") == 0 || strcmp(e->d_name, "report.json.sig") == 0)) continue;
        size_t pl = strlen(dir) + strlen(e->d_name) + 2, kl = strlen(prefix) + strlen(e->d_name) + 2;
        char *p = dp_malloc(pl), *key = dp_malloc(kl);
        if (!p || !key) st = DP_ERR_NOMEM;
        if (st == DP_OK) {
            snprintf(p, pl, "%s/%s", dir, e->d_name);
            snprintf(key, kl, "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
            st = hash_entry(files, p, key, depth);
        }
        dp_free(p);
        dp_free(key);
    }
    closedir(d);
    return st;
}

static dp_status hash_entry(json_t *files, const char *path, const char *key, int depth) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return dp_error(dp_errno_status(errno), "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return hash_dir(files, path, key, depth + 1);
    char hex[65];
    if (S_ISREG(sb.st_mode)) {
        DP_TRY(dp_sha256_file_hex(hex, path));
    } else if (S_ISLNK(sb.st_mode)) {
        char t[4200] = "symlink:";
        ssize_t n = readlink(path, t + 8, sizeof t - 9);
        if (n < 0) return dp_error(dp_errno_status(errno), "%s: readlink: %s", path, strerror(errno));
        t[8 + n] = '\0';
        DP_TRY(dp_sha256_buf_hex(hex, t, strlen(t)));
    } else {
        const char *kind = S_ISFIFO(sb.st_mode) ? "special:fifo" : S_ISSOCK(sb.st_mode) ? "special:socket"
                         : S_ISCHR(sb.st_mode) ? "special:character-device" : "special:other";
        DP_TRY(dp_sha256_buf_hex(hex, kind, strlen(kind)));
    }
    if (json_object_set_new(files, key, json_string(hex)) != 0)
        return dp_error(DP_ERR_NOMEM, "out of memory listing the bundle");
    return DP_OK;
}

dp_status cert_report_files(json_t **out, const char *bundle);
dp_status cert_report_files(json_t **out, const char *bundle) {
    json_t *files = *out = json_object();
    if (!files) return dp_error(DP_ERR_NOMEM, "out of memory listing the bundle");
    dp_status st = hash_dir(files, bundle, "", 0);
    if (st != DP_OK) {
        json_decref(files);
        *out = NULL;
    }
    return st;
}


static double alpha_sum(const cert_result *r) {
    double s = 0;
    for (size_t i = 0; i < r->n; i++) s += r->items[i].alpha;
    return s;
}

/* What the measured noise implies (docs/certification.md "What a verdict implies"): the
 * RDP epsilon of a reference training run (q 0.01, 1000 steps, delta 1e-5) at the claimed noise
 * multiplier 1 and at 1 x the lower end of the measured std ratio's 99.9 % interval. */
#define CERT_ACCT_Q 0.01
#define CERT_ACCT_STEPS 1000
#define CERT_ACCT_DELTA 1e-5
dp_status cert_implied_epsilon(double *eps_out, double sigma) {
    *eps_out = INFINITY;
    if (!(sigma > 0)) return DP_OK;
    acct_schedule s;
    memset(&s, 0, sizeof s);
    s.n = 1;
    s.seg[0].mech = ACCT_GAUSSIAN;
    s.seg[0].q = CERT_ACCT_Q;
    s.seg[0].param = sigma;
    s.seg[0].steps = CERT_ACCT_STEPS;
    double orders[ACCT_MAX_ORDERS], eps = INFINITY, ord;
    size_t n = acct_orders_grid(orders, ACCT_GRID_DEFAULT);
    dp_status st = acct_rdp_epsilon(&eps, &ord, &s, orders, n, CERT_ACCT_DELTA, ACCT_CONV_BALLE);
    if (st == DP_ERR_NOMEM) return st;
    if (st != DP_OK) { dp_clear_error(); return DP_OK; } /* no finite bound: +inf */
    *eps_out = eps;
    return DP_OK;
}

static dp_status write_md(const char *path, const cert_result *r, const cert_opts *o) {
    dp_afile af;
    DP_TRY(dp_afile_open(&af, "--report", path));
    FILE *f = af.f;
    fprintf(f, "# dpcert certification: %s\n\n", cert_verdict_name(r->verdict));
    if (o->scope && strcmp(o->scope, "all") != 0) fprintf(f, "- scope: %s (`--scope`; the verdict covers these vectors only)\n", o->scope);
    fprintf(f, "- candidate: `%s`\n- suite: %s, repeats %lld, alpha per test %.1e, union bound of false rejects %.3g\n",
            o->candidate ? o->candidate : "", cert_suite_name(o->suite), (long long)o->repeats, o->alpha, alpha_sum(r));
    if (r->first[0]) fprintf(f, "- first %s: %s\n", r->verdict == CERT_FAIL ? "FAIL" : "INCOMPLETE", r->first);
    if (r->noise_n)
        fprintf(f, "- measured noise std / claimed: %.5f (99.9%% interval [%.5f, %.5f], %lld draws)\n", r->sigma_eff_ratio,
                r->ratio_lo, r->ratio_hi, (long long)r->noise_n);
    if (r->noise_n)
        fprintf(f, "- implied: a run claimed at noise multiplier 1 (q 0.01, 1000 steps, delta 1e-5) has epsilon %.4g; "
                   "the measured noise (multiplier >= %.5f at 99.9%%) supports epsilon %.4g\n",
                r->eps_claimed, r->ratio_lo, r->eps_supported);
    if (r->noise_n)
        fprintf(f, "- smallest under-noising this run detects: noise std <= %.5f of the claim is FAILED with probability "
                   ">= 0.999 (%lld pooled draws, alpha %.1e)\n",
                cert_detectable_std(r->noise_n, o->alpha, CERT_CERTIFY_POWER), (long long)r->noise_n, o->alpha);
    if (r->tensor_min_n)
        fprintf(f, "- per-tensor noise tests: the smallest tensor has %lld draws (alpha %.2g each); a tensor without noise "
                   "(std 1e-3 of the claim) is FAILED with probability >= %.6f, one at std 0.5 with >= %.6f\n",
                (long long)r->tensor_min_n, r->tensor_alpha, cert_power_variance(r->tensor_min_n, r->tensor_alpha, 1e-3),
                cert_power_variance(r->tensor_min_n, r->tensor_alpha, 0.5));
    if (r->dpzo_n)
        fprintf(f, "- DP-ZO scalar noise std / claimed: %.5f (99.9%% interval [%.5f, %.5f], %lld draws); implied: epsilon "
                   "%.4g claimed, %.4g supported (same reference run)\n",
                r->dpzo_ratio, r->dpzo_lo, r->dpzo_hi, (long long)r->dpzo_n, r->eps_claimed,
                r->dpzo_eps_supported);
    fprintf(f, "- declared conventions: %s\n\n", r->conventions[0] ? r->conventions : "(none)");
    if (r->nspow) {
        fprintf(f, "Sampling tests: guaranteed power against each deviation\n\n| vector | deviation | test | power >= |\n"
                   "|---|---|---|---|\n");
        for (int i = 0; i < r->nspow; i++)
            fprintf(f, "| %s | %s | %s | %.6g |\n", r->spow[i].vector, r->spow[i].deviation, r->spow[i].test, r->spow[i].power);
        fprintf(f, "\n");
    }
    fprintf(f, "| check | scope | status | statistic | accept | alpha | detail |\n|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < r->n; i++) {
        const cert_check *k = &r->items[i];
        fprintf(f, "| %s | %s | %s | %.6g | [%.6g, %.6g] | %.1e | %s |\n", k->name, k->scope, cert_status_name(k->status),
                k->statistic, k->lo, k->hi, k->alpha, k->msg);
    }
    return dp_afile_commit(&af);
}

/* junit.xml through report.c's writer: one testcase per check. */
static dp_status write_junit(const char *path, const cert_result *r, const char *suite) {
    conf_case_result *cr = dp_calloc(r->n ? r->n : 1, sizeof *cr);
    if (!cr) return DP_ERR_NOMEM;
    for (size_t i = 0; i < r->n; i++) {
        const cert_check *k = &r->items[i];
        snprintf(cr[i].name, sizeof cr[i].name, "%.60s [%.90s]", k->name, k->scope);
        cr[i].status = k->status == CERT_PASS ? CONF_PASS : k->status == CERT_FAIL ? CONF_FAIL : CONF_SKIPPED;
        snprintf(cr[i].detail, sizeof cr[i].detail, "%s%s", k->status == CERT_INCOMPLETE ? "INCOMPLETE: " : "", k->msg);
        conf_cmp_result_init(&cr[i].cmp);
    }
    dp_status st = conf_report_junit(path, suite, cr, r->n);
    dp_free(cr);
    return st;
}

dp_status cert_report_write(const char *bundle, const cert_result *r, const cert_opts *o, const char *command) {
    char p[4200];
    snprintf(p, sizeof p, "%s/report.md", bundle);
    DP_TRY(write_md(p, r, o));
    snprintf(p, sizeof p, "%s/junit.xml", bundle);
    DP_TRY(write_junit(p, r, cert_suite_name(o->suite)));
    json_t *plots = cert_plots_json(r); /* report.html before the hashes: the signed files list covers it */
    dp_status hs = plots ? cert_report_html(bundle, r, o, plots) : DP_ERR_NOMEM;
    json_t *root = json_object(), *files = NULL;
    if (hs == DP_OK) hs = cert_report_files(&files, bundle);
    if (hs == DP_OK && !root) hs = dp_error(DP_ERR_NOMEM, "out of memory building report.json");
    if (hs != DP_OK) {
        json_decref(root);
        json_decref(plots);
        return dp_error_context(hs, "the bundle %s", bundle);
    }
    json_object_set_new(root, "plots", plots);
    json_object_set_new(root, "format", json_string(CERT_REPORT_FORMAT));
    json_object_set_new(root, "dpcert_version", json_string(DPCERT_VERSION));
    json_object_set_new(root, "git_revision", json_string(DPCERT_GIT_REV));
    json_object_set_new(root, "command", json_string(command ? command : ""));
    json_object_set_new(root, "candidate", json_string(o->candidate ? o->candidate : ""));
    json_object_set_new(root, "suite", json_string(cert_suite_name(o->suite)));
    json_object_set_new(root, "filter", o->filter ? json_string(o->filter) : json_null());
    json_object_set_new(root, "scope", json_string(o->scope ? o->scope : "all"));
    json_object_set_new(root, "repeats", json_integer(o->repeats));
    json_object_set_new(root, "alpha_per_test", json_real(o->alpha));
    json_object_set_new(root, "alpha_union_bound", json_real(alpha_sum(r)));
    json_object_set_new(root, "timeout_s", json_real(o->timeout_s));
    json_object_set_new(root, "verdict", json_string(cert_verdict_name(r->verdict)));
    json_object_set_new(root, "first", json_string(r->first));
    json_object_set_new(root, "declared_conventions", json_string(r->conventions));
    json_t *nz = json_object();
    json_object_set_new(nz, "draws", json_integer(r->noise_n));
    json_object_set_new(nz, "std_ratio", conf_json_num(r->sigma_eff_ratio));
    json_object_set_new(nz, "std_ratio_lo_999", conf_json_num(r->ratio_lo));
    json_object_set_new(nz, "std_ratio_hi_999", conf_json_num(r->ratio_hi));
    json_t *im = json_object();
    json_object_set_new(im, "reference_run", json_string("Poisson q 0.01, 1000 steps, delta 1e-5, RDP (Balle et al. conversion)"));
    json_object_set_new(im, "claimed_noise_multiplier", json_real(1.0));
    json_object_set_new(im, "epsilon_claimed", conf_json_num(r->eps_claimed));
    json_object_set_new(im, "effective_noise_multiplier", conf_json_num(r->noise_n ? r->sigma_eff_ratio : NAN));
    json_object_set_new(im, "effective_noise_multiplier_lo_999", conf_json_num(r->noise_n ? r->ratio_lo : NAN));
    json_object_set_new(im, "epsilon_supported", conf_json_num(r->noise_n ? r->eps_supported : NAN));
    json_object_set_new(nz, "implied", im);
    json_object_set_new(root, "noise", nz);
    json_t *pw = json_object();
    if (r->noise_n) {
        json_object_set_new(pw, "variance_vs_std_0.9", json_real(cert_power_variance(r->noise_n, o->alpha, 0.9)));
        json_object_set_new(pw, "variance_vs_std_0.97", json_real(cert_power_variance(r->noise_n, o->alpha, 0.97)));
        json_object_set_new(pw, "variance_vs_std_0.99", json_real(cert_power_variance(r->noise_n, o->alpha, 0.99)));
        json_object_set_new(pw, "detectable_std_at_power_0.999",
                            json_real(cert_detectable_std(r->noise_n, o->alpha, CERT_CERTIFY_POWER)));
        json_object_set_new(pw, "ks_vs_uniform", json_real(cert_power_ks(r->noise_n, o->alpha, cert_ks_distance_alt(0, 0))));
        json_object_set_new(pw, "ks_vs_laplace", json_real(cert_power_ks(r->noise_n, o->alpha, cert_ks_distance_alt(1, 0))));
        json_object_set_new(pw, "ks_vs_discretised_h1", json_real(cert_power_ks(r->noise_n, o->alpha, cert_ks_distance_alt(2, 1.0))));
    }
    if (r->tensor_min_n) {
        json_object_set_new(pw, "per_tensor_min_draws", json_integer(r->tensor_min_n));
        json_object_set_new(pw, "per_tensor_vs_no_noise", json_real(cert_power_variance(r->tensor_min_n, r->tensor_alpha, 1e-3)));
        json_object_set_new(pw, "per_tensor_vs_std_0.5", json_real(cert_power_variance(r->tensor_min_n, r->tensor_alpha, 0.5)));
    }
    json_object_set_new(root, "power_lower_bounds", pw);
    json_t *sp = json_array();
    for (int i = 0; i < r->nspow; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "vector", json_string(r->spow[i].vector));
        json_object_set_new(e, "deviation", json_string(r->spow[i].deviation));
        json_object_set_new(e, "test", json_string(r->spow[i].test));
        json_object_set_new(e, "power", json_real(r->spow[i].power));
        json_array_append_new(sp, e);
    }
    json_object_set_new(root, "sampling_power", sp);
    if (r->dpzo_n) {
        json_t *dz = json_object();
        json_object_set_new(dz, "draws", json_integer(r->dpzo_n));
        json_object_set_new(dz, "std_ratio", conf_json_num(r->dpzo_ratio));
        json_object_set_new(dz, "std_ratio_lo_999", conf_json_num(r->dpzo_lo));
        json_object_set_new(dz, "std_ratio_hi_999", conf_json_num(r->dpzo_hi));
        json_object_set_new(dz, "epsilon_supported", conf_json_num(r->dpzo_eps_supported));
        json_object_set_new(root, "dpzo_noise", dz);
    }
    json_object_set_new(root, "checks", cert_checks_json(r));
    json_object_set_new(root, "files", files);
    char *txt = json_dumps(root, JSON_INDENT(1) | JSON_ENSURE_ASCII | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (!txt) return dp_error(DP_ERR_NOMEM, "cannot serialize report.json");
    snprintf(p, sizeof p, "%s/report.json", bundle);
    size_t len = strlen(txt);
    dp_status st = dp_write_file_atomic("--report", p, txt, len);
    dp_free(txt);
    snprintf(p, sizeof p, "%s/report.json.sig", bundle);
    if (st == DP_OK) remove(p); /* a signature of an older report is not valid for this one */
    return st;
}

/* ---- Ed25519 ---- */
static dp_status ossl_fail(const char *what) { return dp_error(DP_ERR_INTERNAL, "OpenSSL: %s failed", what); }

static dp_status write_pem(const char *path, EVP_PKEY *k, int priv) {
    dp_afile af;
    DP_TRY(dp_afile_open(&af, priv ? "private key" : "public key", path));
    if (priv && af.tmp && fchmod(af.fd, 0600) != 0) { dp_afile_abort(&af); return dp_error(DP_ERR_IO, "chmod %s", path); }
    int ok = priv ? PEM_write_PrivateKey(af.f, k, NULL, NULL, 0, NULL, NULL) : PEM_write_PUBKEY(af.f, k);
    if (!ok) { dp_afile_abort(&af); return ossl_fail("PEM write"); }
    return dp_afile_commit(&af);
}

dp_status cert_keygen(const char *priv_path, const char *pub_path) {
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    EVP_PKEY *k = NULL;
    if (!c || EVP_PKEY_keygen_init(c) <= 0 || EVP_PKEY_keygen(c, &k) <= 0) {
        EVP_PKEY_CTX_free(c);
        return ossl_fail("Ed25519 key generation");
    }
    EVP_PKEY_CTX_free(c);
    dp_status st = write_pem(priv_path, k, 1);
    if (st == DP_OK) st = write_pem(pub_path, k, 0);
    EVP_PKEY_free(k);
    return st;
}

/* report.json or report.json.sig of a bundle (verify-report reads what others sent): a regular
 * file only, read up to `max` bytes. A link, FIFO or device there is NOT VERIFIED (exit 1), never
 * followed or read until it ends (a link to /dev/zero, or a FIFO, hung verify-report: found by
 * issue 29's review of the tampering cases). A missing file is DP_ERR_IO (not a bundle, exit 2). */
#define CERT_MAX_REPORT_JSON ((size_t)1 << 30)
#define CERT_MAX_SIG 4096
static dp_status read_bundle_top(uint8_t **buf, size_t *len, const char *path, size_t max) {
    struct stat sb;
    *buf = NULL;
    *len = 0;
    if (lstat(path, &sb) != 0) return dp_error(dp_errno_status(errno), "cannot open '%s': %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return dp_error(DP_ERR_CHECK_FAILED, "%s is not a regular file (a link, FIFO or device: a bundle holds "
                                             "regular files only)", path);
    char *b = NULL;
    DP_TRY(dp_read_file_max(&b, len, "bundle file", path, max));
    *buf = (uint8_t *)b;
    return DP_OK;
}

static dp_status read_key(EVP_PKEY **k, const char *path, int priv) {
    FILE *f = fopen(path, "r");
    if (!f) return dp_error(DP_ERR_IO, "cannot open key file %s", path);
    *k = priv ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    if (!*k || EVP_PKEY_id(*k) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(*k);
        return dp_error(DP_ERR_FORMAT, "%s is not an Ed25519 %s key in PEM", path, priv ? "private" : "public");
    }
    return DP_OK;
}

dp_status cert_sign(const char *bundle, const char *priv_path) {
    EVP_PKEY *k;
    DP_TRY(read_key(&k, priv_path, 1));
    char p[4200];
    snprintf(p, sizeof p, "%s/report.json", bundle);
    uint8_t *buf = NULL, sig[64];
    size_t len = 0, sl = sizeof sig;
    dp_status st = read_bundle_top(&buf, &len, p, CERT_MAX_REPORT_JSON);
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (st == DP_OK && (!m || EVP_DigestSignInit(m, NULL, NULL, NULL, k) <= 0 || EVP_DigestSign(m, sig, &sl, buf, len) <= 0))
        st = ossl_fail("Ed25519 signing");
    EVP_MD_CTX_free(m);
    EVP_PKEY_free(k);
    dp_free(buf);
    if (st != DP_OK) return st;
    char hex[129];
    dp_hex(hex, sig, sl);
    hex[128] = '\n';
    snprintf(p, sizeof p, "%s/report.json.sig", bundle);
    return dp_write_file_atomic("--sign", p, hex, 129);
}

dp_status cert_verify_signature(const char *bundle, const char *pub_path) {
    EVP_PKEY *k;
    DP_TRY(read_key(&k, pub_path, 0));
    char p[4200];
    uint8_t *buf = NULL, *sh = NULL, sig[64];
    size_t len = 0, slen = 0;
    snprintf(p, sizeof p, "%s/report.json.sig", bundle);
    dp_status st = read_bundle_top(&sh, &slen, p, CERT_MAX_SIG);
    if (st != DP_OK && st != DP_ERR_NOMEM && st != DP_ERR_SYSIO && st != DP_ERR_CHECK_FAILED) /* a read error is the system's: exit 3 */
        st = dp_error_context(DP_ERR_CHECK_FAILED, "signature %s missing or unreadable", p);
    if (st == DP_OK && slen < 128) st = dp_error(DP_ERR_CHECK_FAILED, "signature %s is not 128 hex digits", p);
    for (int i = 0; st == DP_OK && i < 64; i++) {
        unsigned v;
        if (sscanf((const char *)sh + 2 * i, "%2x", &v) != 1) st = dp_error(DP_ERR_CHECK_FAILED, "signature %s is not hex", p);
        sig[i] = (uint8_t)v;
    }
    snprintf(p, sizeof p, "%s/report.json", bundle);
    if (st == DP_OK) st = read_bundle_top(&buf, &len, p, CERT_MAX_REPORT_JSON);
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (st == DP_OK) {
        if (!m || EVP_DigestVerifyInit(m, NULL, NULL, NULL, k) <= 0) st = ossl_fail("Ed25519 verify init");
        else if (EVP_DigestVerify(m, sig, 64, buf, len) != 1)
            st = dp_error(DP_ERR_CHECK_FAILED, "the signature does not verify report.json under %s", pub_path);
    }
    EVP_MD_CTX_free(m);
    EVP_PKEY_free(k);
    dp_free(buf);
    dp_free(sh);
    return st;
}
