/* attacks/audit_candidate.c — the white-box step audit of a third-party candidate through
 * the certification protocol (common/candidate.h: `CMD IN OUT`, OUT read as hostile
 * input), with the step vectors of docs/certification.md ("dpcert-vector/1", kind "step"):
 * the audit writes two vectors, D (the |D| generated examples) and D' (D plus the input
 * canary), with the model at theta_0, flat abadi clipping at C, sigma, and
 * expected_batch_size = |D_side| (the batch is given: q = 1). Each trial runs the candidate
 * on one of them; the statistic is expected_batch_size * <step.private_grad, dir>. The
 * candidate draws its own noise, so trials are not reproducible from the audit key.
 *
 * `dpcert audit reference-candidate IN OUT` is the reference as such a candidate (the
 * protocol's self-test; fresh OpenSSL noise key per run). With DPCERT_TEST_INJECT=1 and
 * DPCERT_AUDIT_CANDIDATE_BUG=half-noise it halves its noise, with =no-clip it clips at 1e6 C
 * with the noise of C (broken candidates for tests). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attacks/audit.h"
#include "attacks/audit_candidate.h"
#include "common/candidate.h"
#include "common/fsutil.h"
#include "common/safetensors.h"
#include "reference/dpsgd.h"

static dp_status meta_num(dp_tensor_set *s, const char *k, double v) {
    char b[64];
    snprintf(b, sizeof b, "%.17g", v);
    return dp_tset_set_meta(s, k, b);
}

static dp_status write_vector(const char *path, const audit_setup *s, const ref_dataset *d, const char *name) {
    const audit_config *c = &s->cfg;
    const ref_model *m = &s->m0;
    dp_tensor_set v;
    dp_tset_init(&v);
    dp_status st = DP_OK;
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        char nm[160];
        snprintf(nm, sizeof nm, "params.%s", m->params[p].name);
        st = dp_tset_add_f64(&v, nm, m->params[p].data, m->params[p].ndim, m->params[p].shape);
    }
    int64_t xs[2] = {d->n, d->in}, ys[1] = {d->n};
    if (st == DP_OK) st = dp_tset_add_f64(&v, "batch.x", d->x, 2, xs);
    if (st == DP_OK) st = dp_tset_add_raw(&v, "batch.y", DP_I32, d->y, 1, ys);
    char h[128] = "";
    size_t k = 0;
    for (int i = 0; i < c->mc.nhidden; i++) k += (size_t)snprintf(h + k, sizeof h - k, "%s%d", i ? "," : "", c->mc.hidden[i]);
    const char *kv[][2] = {{"format", "dpcert-vector/1"}, {"kind", "step"},       {"algorithm", "dpsgd"},
                           {"model", "mlp"},              {"hidden", h},          {"clipping", "flat"},
                           {"clip_fn", "abadi"},          {"optimizer", "none"},  {"name", name}};
    for (size_t i = 0; st == DP_OK && i < sizeof kv / sizeof kv[0]; i++) st = dp_tset_set_meta(&v, kv[i][0], kv[i][1]);
    if (st == DP_OK) st = meta_num(&v, "in", c->mc.in);
    if (st == DP_OK) st = meta_num(&v, "classes", c->mc.classes);
    if (st == DP_OK) st = meta_num(&v, "clip", c->clip);
    if (st == DP_OK) st = meta_num(&v, "sigma", c->sigma);
    if (st == DP_OK) st = meta_num(&v, "expected_batch_size", (double)d->n);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st == DP_OK) st = dp_st_serialize(&buf, &len, &v);
    if (st == DP_OK) st = dp_write_file_atomic("audit vector", path, buf, len);
    free(buf);
    dp_tset_free(&v);
    return st;
}

typedef struct {
    char in[2][1024], out[1100];
    dp_cand_expect *exp;
    char (*names)[160];
    int nexp;
    dp_cand_opts opts;
} cand_ctx;

static dp_status cand_run(double *stat, audit_release *r, int side, dp_noise_key key) {
    (void)key; /* the candidate draws its own noise */
    cand_ctx *x = r->ctx;
    const audit_setup *s = r->s;
    dp_cand_result res;
    dp_tensor_set out;
    dp_status st = dp_candidate_run(&res, &out, s->cfg.candidate, x->in[side], x->out, x->exp, (size_t)x->nexp,
                                    &x->opts);
    if (st != DP_OK) return st;
    if (res.outcome != DP_CAND_OK) {
        dp_tset_free(&out);
        return dp_error(DP_ERR_CHECK_FAILED, "the candidate failed on %s: %s: %s", x->in[side],
                        dp_cand_outcome_name(res.outcome), res.msg);
    }
    double acc = 0;
    int64_t off = 0;
    for (int p = 0; p < x->nexp; p++) {
        const dp_tensor *t = dp_tset_find(&out, x->names[p]);
        for (int64_t e = 0; t && e < s->m0.params[p].numel; e++) acc += dp_tensor_get(t, e) * s->dir[off + e];
        off += s->m0.params[p].numel;
    }
    dp_tset_free(&out);
    *stat = (side ? (double)s->d1.n : (double)s->d0.n) * acc;
    if (!isfinite(*stat))
        return dp_error(DP_ERR_CHECK_FAILED, "the candidate's private gradient is not finite on %s", x->in[side]);
    return DP_OK;
}

static void cand_destroy(audit_release *r) {
    cand_ctx *x = r->ctx;
    if (!x) return;
    unlink(x->out);
    free(x->exp);
    free(x->names);
    free(x);
    r->ctx = NULL;
}

dp_status audit_candidate_prepare(const audit_setup *s, const char *dir) {
    char p[1024];
    DP_TRY(dp_mkdir_p("--work", dir));
    snprintf(p, sizeof p, "%s/audit-D.safetensors", dir);
    DP_TRY(write_vector(p, s, &s->d0, "audit-D"));
    snprintf(p, sizeof p, "%s/audit-Dprime.safetensors", dir);
    return write_vector(p, s, &s->d1, "audit-Dprime");
}

dp_status audit_candidate_make(audit_release *r, const audit_setup *s, int tid) {
    cand_ctx *x = audit_release_ctx(r, sizeof *x, cand_run, cand_destroy);
    if (!x) return DP_ERR_NOMEM;
    const char *dir = s->cfg.work;
    snprintf(x->in[0], sizeof x->in[0], "%s/audit-D.safetensors", dir);
    snprintf(x->in[1], sizeof x->in[1], "%s/audit-Dprime.safetensors", dir);
    snprintf(x->out, sizeof x->out, "%s/out-%d.safetensors", dir, tid);
    x->nexp = s->m0.nparams;
    x->exp = dp_calloc((size_t)x->nexp, sizeof *x->exp);
    x->names = dp_calloc((size_t)x->nexp, sizeof *x->names);
    if (!x->exp || !x->names) return DP_ERR_NOMEM;
    for (int p = 0; p < x->nexp; p++) {
        const ref_param *pp = &s->m0.params[p];
        snprintf(x->names[p], sizeof x->names[p], "step.private_grad.%s", pp->name);
        x->exp[p] = (dp_cand_expect){.name = x->names[p], .required = 1, .kind = DP_CAND_FLOAT, .ndim = pp->ndim};
        for (int d = 0; d < pp->ndim; d++) x->exp[p].shape[d] = pp->shape[d];
    }
    dp_cand_opts_default(&x->opts);
    x->opts.timeout_s = s->cfg.timeout_s;
    return DP_OK;
}

/* ---------------------------------------------------- the reference as a candidate ---- */
static dp_status meta_get(double *v, const dp_tensor_set *s, const char *k) {
    const char *t = dp_tset_meta(s, k);
    if (!t) return dp_error(DP_ERR_FORMAT, "vector metadata '%s' missing", k);
    return dp_parse_double(v, k, t);
}

static dp_status refcand(const char *in_path, const char *out_path) {
    dp_tensor_set v, o;
    dp_tset_init(&o);
    DP_TRY(dp_st_read(&v, in_path));
    ref_model_config mc;
    ref_config_default(&mc, REF_MLP);
    double in = 0, classes = 0, clip = 0, sigma = 0, qn = 0;
    dp_status st = DP_OK;
    const char *model = dp_tset_meta(&v, "model"), *hidden = dp_tset_meta(&v, "hidden");
    if (!model || strcmp(model, "mlp") != 0 || !hidden)
        st = dp_error(DP_ERR_FORMAT, "%s: the reference candidate takes mlp step vectors", in_path);
    if (st == DP_OK) st = meta_get(&in, &v, "in");
    if (st == DP_OK) st = meta_get(&classes, &v, "classes");
    if (st == DP_OK) st = meta_get(&clip, &v, "clip");
    if (st == DP_OK) st = meta_get(&sigma, &v, "sigma");
    if (st == DP_OK) st = meta_get(&qn, &v, "expected_batch_size");
    mc.in = (int)in;
    mc.classes = (int)classes;
    mc.nhidden = 0;
    for (const char *h = hidden; st == DP_OK && h && *h && mc.nhidden < REF_MAX_HIDDEN;) {
        char *end;
        mc.hidden[mc.nhidden++] = (int)strtol(h, &end, 10);
        h = *end == ',' ? end + 1 : end;
        if (end == h && *end) st = dp_error(DP_ERR_FORMAT, "vector metadata 'hidden' = '%s'", hidden);
    }
    ref_model m = {0};
    ref_dataset d = {0};
    if (st == DP_OK) st = ref_model_init(&m, &mc, (dp_seed){0});
    for (int p = 0; st == DP_OK && p < m.nparams; p++) {
        char nm[160];
        snprintf(nm, sizeof nm, "params.%s", m.params[p].name);
        const dp_tensor *t = dp_tset_find(&v, nm);
        if (!t || dp_tensor_numel(t) != m.params[p].numel) { st = dp_error(DP_ERR_FORMAT, "tensor %s missing or mis-shaped", nm); break; }
        for (int64_t e = 0; e < m.params[p].numel; e++) m.params[p].data[e] = dp_tensor_get(t, e);
    }
    const dp_tensor *bx = dp_tset_find(&v, "batch.x"), *by = dp_tset_find(&v, "batch.y");
    if (st == DP_OK && (!bx || !by || bx->ndim != 2 || bx->shape[1] != mc.in || by->shape[0] != bx->shape[0]))
        st = dp_error(DP_ERR_FORMAT, "batch.x / batch.y missing or mis-shaped");
    if (st == DP_OK) {
        d.kind = REF_MLP;
        d.n = bx->shape[0];
        d.in = mc.in;
        d.x = dp_malloc((size_t)(d.n * d.in) * sizeof *d.x);
        d.y = dp_malloc((size_t)d.n * sizeof *d.y);
        if (!d.x || !d.y) st = DP_ERR_NOMEM;
        for (int64_t i = 0; st == DP_OK && i < d.n * d.in; i++) d.x[i] = dp_tensor_get(bx, i);
        for (int64_t i = 0; st == DP_OK && i < d.n; i++) d.y[i] = (int32_t)dp_tensor_get(by, i);
    }
    const char *bug = getenv("DPCERT_AUDIT_CANDIDATE_BUG"), *inj = getenv("DPCERT_TEST_INJECT");
    int broken = bug && inj && strcmp(inj, "1") == 0;
    if (broken && strcmp(bug, "half-noise") == 0) sigma /= 2; /* THE BUGS (tests only) */
    if (broken && strcmp(bug, "no-clip") == 0) { sigma /= 1e6; clip *= 1e6; } /* same noise, nothing clipped */
    ref_dpsgd_config rc;
    ref_dpsgd_config_default(&rc);
    rc.n = d.n;
    rc.q = 1.0;
    rc.clip = clip;
    rc.sigma = sigma;
    rc.lr = 0;
    ref_dpsgd_state ds = {0};
    ref_dpsgd_step_out out = {0};
    if (st == DP_OK) st = dp_noise_key_random(&rc.key);
    if (st == DP_OK) st = ref_dpsgd_init(&ds, &rc, &m);
    if (st == DP_OK) st = ref_dpsgd_step(&out, &m, &ds, &d, 1);
    for (int p = 0; st == DP_OK && p < m.nparams; p++) {
        char nm[160];
        double *g = dp_malloc((size_t)m.params[p].numel * sizeof *g);
        if (!g) { st = DP_ERR_NOMEM; break; }
        for (int64_t e = 0; e < m.params[p].numel; e++) g[e] = (out.clipped_sum[p][e] + out.noise[p][e]) / qn;
        snprintf(nm, sizeof nm, "step.private_grad.%s", m.params[p].name);
        st = dp_tset_add_f64(&o, nm, g, m.params[p].ndim, m.params[p].shape);
        free(g);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st == DP_OK) st = dp_st_serialize(&buf, &len, &o);
    if (st == DP_OK) st = dp_write_file_atomic("OUT", out_path, buf, len);
    free(buf);
    ref_dpsgd_step_free(&out);
    ref_dpsgd_free(&ds);
    ref_model_free(&m);
    ref_dataset_free(&d);
    dp_tset_free(&v);
    dp_tset_free(&o);
    return st;
}

int audit_cmd_reference_candidate(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dpcert audit reference-candidate IN OUT\n");
        return 2;
    }
    dp_status st = refcand(argv[0], argv[1]);
    return st == DP_OK ? 0 : dp_cli_fail("audit reference-candidate", st);
}
