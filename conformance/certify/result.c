/* conformance/certify/result.c — the bottom of certification (docs/certification.md): a
 * result and its checks (verdict names, pushing, the checks' JSON), the outputs a vector
 * expects and reading one stored output back from the bundle, and the pooled "iid N(0, 1)"
 * and product tests pushed as checks. The driver (certify.c), the evaluators
 * (certify_eval.c, certify_traj.c, certify_dpzo.c, certify_noise.c) and the reports build on
 * it; it calls none of them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/fsutil.h"
#include "common/safetensors.h"
#include "conformance/certify/certify.h"
#include "conformance/certify/certify_int.h"


const char *cert_verdict_name(int v) { return v == CERT_PASS ? "CERTIFIED" : v == CERT_FAIL ? "FAILED" : "INCOMPLETE"; }

void cert_result_init(cert_result *r) { memset(r, 0, sizeof *r); }

void cert_result_free(cert_result *r) { dp_free(r->items); cert_figs_free(&r->figs); memset(r, 0, sizeof *r); }

dp_status cert_result_push(cert_result *r, const cert_check *k) {
    DP_TRY(DP_GROW(r->items, r->cap, r->n + 1, 64, "checks"));
    r->items[r->n++] = *k;
    if (k->status > r->verdict) {
        r->verdict = k->status;
        snprintf(r->first, sizeof r->first, "%.80s [%.120s]: %.319s", k->name, k->scope, k->msg);
    }
    return DP_OK;
}

void cert_expect_free(cert_expect_list *x) {
    for (size_t i = 0; i < x->nowned; i++) dp_free(x->owned[i]);
    dp_free(x->owned);
    dp_free(x->e);
    memset(x, 0, sizeof *x);
}

static dp_status expect_add(cert_expect_list *x, const char *prefix, const char *name, int req, dp_cand_kind k, int ndim,
                            const int64_t *shape) {
    dp_cand_expect *p = dp_realloc(x->e, (x->n + 1) * sizeof *p);
    char **o = dp_realloc(x->owned, (x->nowned + 1) * sizeof *o);
    if (p) x->e = p;
    if (o) x->owned = o;
    if (!p || !o) return dp_error(DP_ERR_NOMEM, "out of memory");
    size_t l = strlen(prefix) + strlen(name) + 1;
    char *s = dp_malloc(l);
    if (!s) return dp_error(DP_ERR_NOMEM, "out of memory");
    snprintf(s, l, "%s%s", prefix, name);
    x->owned[x->nowned++] = s;
    dp_cand_expect *e = &x->e[x->n++];
    memset(e, 0, sizeof *e);
    e->name = s;
    e->required = req;
    e->kind = k;
    e->ndim = ndim;
    for (int d = 0; d < ndim && d < DP_MAX_DIMS; d++) e->shape[d] = shape[d];
    return DP_OK;
}

/* docs/certification.md "Outputs of a DP-ZO vector", for batch size B; k >= 0: step k of a
 * DP-ZO trajectory (names of cert_traj_out_name). */
static dp_status expect_dpzo(cert_expect_list *x, const dp_tensor_set *v, int64_t B, int k) {
    double nd = 0;
    if (!conf_meta_double(v, "n_spsa", &nd) || nd != floor(nd) || nd < 1 || nd > 256)
        return dp_error(DP_ERR_FORMAT, "dpzo vector: n_spsa must be an integer in [1, 256]");
    int64_t n = (int64_t)nd, sn[1] = {n}, snb[2] = {n, B};
    char nm[240], tn[260];
#define EXPECT_NAME(s) (k < 0 ? (s) : (cert_traj_out_name(tn, sizeof tn, k, (s)), tn))
    for (size_t i = 0; i < v->n; i++) {
        const dp_tensor *t = &v->items[i].t;
        if (strncmp(v->items[i].name, "params.", 7) != 0) continue;
        if (t->ndim + 1 > DP_MAX_DIMS) return dp_error(DP_ERR_FORMAT, "dpzo vector: %s has too many dimensions", v->items[i].name);
        int64_t sz[DP_MAX_DIMS] = {n};
        for (int d = 0; d < t->ndim; d++) sz[d + 1] = t->shape[d];
        snprintf(nm, sizeof nm, "dpzo.z.%s", v->items[i].name + 7);
        DP_TRY(expect_add(x, "", EXPECT_NAME(nm), 1, DP_CAND_FLOAT, t->ndim + 1, sz));
    }
    DP_TRY(expect_add(x, "", EXPECT_NAME("step.scalar"), 1, DP_CAND_FLOAT, 1, sn));
    DP_TRY(expect_add(x, "", EXPECT_NAME("step.noise"), 0, DP_CAND_FLOAT, 1, sn));
    DP_TRY(expect_add(x, "", EXPECT_NAME("per_sample.diff_clipped"), 0, DP_CAND_FLOAT, 2, snb));
    DP_TRY(expect_add(x, "", EXPECT_NAME("per_sample.loss_plus"), 0, DP_CAND_FLOAT, 2, snb));
    DP_TRY(expect_add(x, "", EXPECT_NAME("per_sample.loss_minus"), 0, DP_CAND_FLOAT, 2, snb));
#undef EXPECT_NAME
    return DP_OK;
}

/* docs/certification.md "Outputs". */
dp_status cert_expectations(cert_expect_list *x, const dp_tensor_set *v) {
    memset(x, 0, sizeof *x);
    const char *kind = dp_tset_meta(v, "kind");
    if (kind && strcmp(kind, "sampling") == 0) {
        const dp_tensor *s = dp_tset_find(v, "sampling.shape");
        if (!s || dp_tensor_numel(s) != 2) return dp_error(DP_ERR_FORMAT, "sampling vector without sampling.shape [2]");
        int64_t kn[2] = {(int64_t)dp_tensor_get(s, 0), (int64_t)dp_tensor_get(s, 1)};
        return expect_add(x, "", "sampling.mask", 1, DP_CAND_INT, 2, kn);
    }
    const char *alg = dp_tset_meta(v, "algorithm");
    if (kind && strcmp(kind, "trajectory") == 0 && alg && strcmp(alg, "dpzo") == 0) { /* a DP-ZO trajectory */
        int K = 0;
        DP_TRY(cert_traj_steps(&K, v));
        for (int k = 0; k < K; k++) {
            char bn[48];
            snprintf(bn, sizeof bn, "batch.%d.x", k);
            const dp_tensor *bx = dp_tset_find(v, bn);
            snprintf(bn, sizeof bn, "batch.%d.tokens", k);
            const dp_tensor *bt = dp_tset_find(v, bn);
            if (!bx && !bt) return dp_error(DP_ERR_FORMAT, "trajectory vector: step %d has no batch.%d.x or batch.%d.tokens", k, k, k);
            DP_TRY(expect_dpzo(x, v, bx ? bx->shape[0] : bt->shape[0], k));
        }
        return DP_OK;
    }
    if (kind && strcmp(kind, "trajectory") == 0) { /* docs/certification.md "Trajectory vectors" */
        int K = 0;
        DP_TRY(cert_traj_steps(&K, v));
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < v->n; i++) {
                const char *nm = v->items[i].name;
                if (strncmp(nm, "params.", 7) != 0) continue;
                char pre[48];
                snprintf(pre, sizeof pre, "step.%d.private_grad.", k);
                DP_TRY(expect_add(x, pre, nm + 7, 1, DP_CAND_FLOAT, v->items[i].t.ndim, v->items[i].t.shape));
            }
        return DP_OK;
    }
    int64_t B = -1;
    const dp_tensor *bx = dp_tset_find(v, "batch.x"), *bt = dp_tset_find(v, "batch.tokens");
    B = bx ? bx->shape[0] : bt ? bt->shape[0] : -1;
    if (B < 0) return dp_error(DP_ERR_FORMAT, "step vector without batch.x or batch.tokens");
    int64_t sb[1] = {B};
    double lr = NAN;
    const char *opt = dp_tset_meta(v, "optimizer");
    int sgd = opt && strcmp(opt, "sgd") == 0 && conf_meta_double(v, "lr", &lr) && lr != 0; /* params_after may replace G */
    if (kind && strcmp(kind, "dpzo") == 0) return expect_dpzo(x, v, B, -1);
    for (size_t i = 0; i < v->n; i++) {
        const char *nm = v->items[i].name;
        if (strncmp(nm, "params.", 7) != 0) continue;
        const dp_tensor *t = &v->items[i].t;
        DP_TRY(expect_add(x, "step.private_grad.", nm + 7, !sgd, DP_CAND_FLOAT, t->ndim, t->shape));
        if (sgd) DP_TRY(expect_add(x, "params_after.", nm + 7, 0, DP_CAND_FLOAT, t->ndim, t->shape));
        DP_TRY(expect_add(x, "step.clipped_sum.", nm + 7, 0, DP_CAND_FLOAT, t->ndim, t->shape));
        DP_TRY(expect_add(x, "step.noise.", nm + 7, 0, DP_CAND_FLOAT, t->ndim, t->shape));
    }
    DP_TRY(expect_add(x, "", "per_sample.norm*", 0, DP_CAND_FLOAT, 1, sb));
    DP_TRY(expect_add(x, "", "per_sample.clip_factor*", 0, DP_CAND_FLOAT, 1, sb));
    DP_TRY(expect_add(x, "", "per_sample.loss", 0, DP_CAND_FLOAT, 1, sb));
    return DP_OK;
}

void cert_out_path(char *p, size_t len, const char *bundle, const char *vec, int64_t r, const char *ext) {
    snprintf(p, len, "%s/outputs/%s.r%lld.%s", bundle, vec, (long long)r, ext);
}

dp_status cert_read_output(dp_cand_result *res, dp_tensor_set *out, const char *bundle, const char *name, int64_t r,
                           const dp_tensor_set *v) {
    memset(res, 0, sizeof *res);
    dp_tset_init(out);
    char op[4096], sp[4096];
    cert_out_path(op, sizeof op, bundle, name, r, "safetensors");
    cert_out_path(sp, sizeof sp, bundle, name, r, "status");
    struct stat sb;
    if (lstat(sp, &sb) == 0) { /* a recorded run failure */
        uint8_t *buf = NULL;
        size_t len = 0;
        DP_TRY(dp_read_file(&buf, &len, sp));
        char w[24] = "";
        sscanf((const char *)buf, "%23s", w);
        res->outcome = dp_cand_outcome_parse(w);
        size_t skip = strlen(w) + 1 < len ? strlen(w) + 1 : len;
        snprintf(res->msg, sizeof res->msg, "%.*s", (int)(len - skip), (const char *)buf + skip);
        size_t l = strlen(res->msg);
        if (l && res->msg[l - 1] == '\n') res->msg[l - 1] = '\0';
        dp_free(buf);
        return DP_OK;
    }
    if (lstat(op, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        res->outcome = DP_CAND_MISSING;
        snprintf(res->msg, sizeof res->msg, "output %.400s absent from the bundle", op);
        return DP_OK;
    }
    dp_status st = dp_st_read(out, op);
    if (st == DP_ERR_NOMEM || st == DP_ERR_SYSIO) return st; /* the system failed, not the candidate: exit 3 */
    if (st != DP_OK) {
        dp_tset_init(out);
        res->outcome = DP_CAND_BAD_OUTPUT;
        snprintf(res->msg, sizeof res->msg, "candidate output is not a valid safetensors file: %s", dp_last_error());
        return DP_OK;
    }
    cert_expect_list ex;
    st = cert_expectations(&ex, v); /* ex is freed whole even when it fails half way */
    if (st == DP_OK) dp_candidate_validate(res, out, ex.e, ex.n);
    cert_expect_free(&ex);
    if (st != DP_OK) dp_tset_free(out); /* out of memory: the output read is not kept */
    return st;
}

/* ---- evaluation ---- */
dp_status cert_push_normal(cert_result *r, cert_check *var, const cert_pool *p, const char *label, const char *scope,
                           double alpha) {
    cert_check k;
    if (p->n == 0) {
        memset(&k, 0, sizeof k);
        snprintf(k.name, sizeof k.name, "%s", label ? label : "noise");
        snprintf(k.scope, sizeof k.scope, "%s", scope);
        k.status = CERT_INCOMPLETE;
        snprintf(k.msg, sizeof k.msg, "no %s could be read: not tested", label ? "output" : "private gradient");
        return cert_result_push(r, &k);
    }
    static const char *const suffix[3] = {"variance", "mean", "normality (Kolmogorov-Smirnov)"};
    for (int j = 0; j < 3; j++) {
        if (j == 0) cert_test_variance(&k, p->z, p->n, alpha);
        else if (j == 1) cert_test_mean(&k, p->z, p->n, alpha);
        else cert_test_ks(&k, p->z, p->n, alpha);
        if (j == 0 && var) *var = k;
        if (label) snprintf(k.name, sizeof k.name, "%s %s", label, suffix[j]);
        snprintf(k.scope, sizeof k.scope, "%s", scope);
        DP_TRY(cert_result_push(r, &k));
    }
    return DP_OK;
}

dp_status cert_push_products(cert_result *r, const cert_pool *p, const char *name, const char *scope, double alpha) {
    cert_check k;
    cert_test_products(&k, p->pa, p->pb, p->np, alpha);
    snprintf(k.name, sizeof k.name, "%s", name);
    snprintf(k.scope, sizeof k.scope, "%s", scope);
    if (p->np == 0) {
        k.status = CERT_INCOMPLETE;
        snprintf(k.msg, sizeof k.msg, "no pairs (needs >= 2 repeats / vectors / directions)");
    }
    return cert_result_push(r, &k);
}

json_t *cert_checks_json(const cert_result *r) {
    json_t *a = json_array();
    for (size_t i = 0; i < r->n; i++) {
        const cert_check *k = &r->items[i];
        json_t *c = json_object();
        json_object_set_new(c, "check", json_string(k->name));
        json_object_set_new(c, "scope", json_string(k->scope));
        json_object_set_new(c, "status", json_string(cert_status_name(k->status)));
        json_object_set_new(c, "statistic", conf_json_num(k->statistic));
        json_object_set_new(c, "accept_lo", conf_json_num(k->lo));
        json_object_set_new(c, "accept_hi", conf_json_num(k->hi));
        json_object_set_new(c, "alpha", json_real(k->alpha));
        json_object_set_new(c, "n", json_integer(k->n));
        json_object_set_new(c, "message", json_string(k->msg));
        json_array_append_new(a, c);
    }
    return a;
}
