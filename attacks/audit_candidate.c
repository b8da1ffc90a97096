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
#include "common/alloc.h"
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

dp_status audit_step_vector_write(const char *path, const ref_model_config *mc, const ref_model *m,
                                  const ref_dataset *d, double clip, double sigma, double qn, const char *name) {
    dp_tensor_set v;
    dp_tset_init(&v);
    dp_status st = DP_OK;
    char pg[4096] = "";
    size_t pl = 0;
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        char nm[160];
        snprintf(nm, sizeof nm, "params.%s", m->params[p].name);
        st = dp_tset_add_f64(&v, nm, m->params[p].data, m->params[p].ndim, m->params[p].shape);
        if (pl < sizeof pg) pl += (size_t)snprintf(pg + pl, sizeof pg - pl, "%s%s:all", p ? ";" : "", m->params[p].name);
    }
    if (st == DP_OK && pl >= sizeof pg) st = dp_error(DP_ERR_INVALID, "step vector %s: too many parameters", name);
    int64_t xs[2] = {d->n, d->in}, ys[1] = {d->n};
    static const double none_x = 0;
    static const int32_t none_y = 0;
    if (st == DP_OK) st = dp_tset_add_f64(&v, "batch.x", d->n ? d->x : &none_x, 2, xs);
    if (st == DP_OK) st = dp_tset_add_raw(&v, "batch.y", DP_I32, d->n ? (const void *)d->y : &none_y, 1, ys);
    char h[128] = "";
    size_t k = 0;
    for (int i = 0; i < mc->nhidden; i++) k += (size_t)snprintf(h + k, sizeof h - k, "%s%d", i ? "," : "", mc->hidden[i]);
    const char *kv[][2] = {{"format", "dpcert-vector/1"}, {"kind", "step"},       {"algorithm", "dpsgd"},
                           {"model", "mlp"},              {"hidden", h},          {"clipping", "flat"},
                           {"clip_fn", "abadi"},          {"optimizer", "none"},  {"name", name},
                           {"param_groups", pg}};
    for (size_t i = 0; st == DP_OK && i < sizeof kv / sizeof kv[0]; i++) st = dp_tset_set_meta(&v, kv[i][0], kv[i][1]);
    char th[64];
    snprintf(th, sizeof th, "all:%.17g", clip);
    if (st == DP_OK) st = dp_tset_set_meta(&v, "group_thresholds", th);
    if (st == DP_OK) st = meta_num(&v, "in", mc->in);
    if (st == DP_OK) st = meta_num(&v, "classes", mc->classes);
    if (st == DP_OK) st = meta_num(&v, "clip", clip);
    if (st == DP_OK) st = meta_num(&v, "c_total", clip);
    if (st == DP_OK) st = meta_num(&v, "sigma", sigma);
    if (st == DP_OK) st = meta_num(&v, "expected_batch_size", qn);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st == DP_OK) st = dp_st_serialize(&buf, &len, &v);
    if (st == DP_OK) st = dp_write_file_atomic("step vector", path, buf, len);
    dp_free(buf);
    dp_tset_free(&v);
    return st;
}

dp_status audit_cand_io_init(audit_cand_io *io, const ref_model *m, double timeout_s) {
    memset(io, 0, sizeof *io);
    io->nexp = m->nparams;
    io->exp = dp_calloc((size_t)io->nexp, sizeof *io->exp);
    io->names = dp_calloc((size_t)io->nexp, sizeof *io->names);
    if (!io->exp || !io->names) { audit_cand_io_free(io); return DP_ERR_NOMEM; }
    for (int p = 0; p < io->nexp; p++) {
        const ref_param *pp = &m->params[p];
        snprintf(io->names[p], sizeof io->names[p], "step.private_grad.%s", pp->name);
        io->exp[p] = (dp_cand_expect){.name = io->names[p], .required = 1, .kind = DP_CAND_FLOAT, .ndim = pp->ndim};
        for (int d = 0; d < pp->ndim; d++) io->exp[p].shape[d] = pp->shape[d];
    }
    dp_cand_opts_default(&io->opts);
    io->opts.timeout_s = timeout_s;
    return DP_OK;
}

dp_status audit_cand_io_persistent(audit_cand_io *io, const char *cmd, const char *work, const char *tag) {
    io->sess = dp_calloc(1, sizeof *io->sess);
    if (!io->sess) return DP_ERR_NOMEM;
    snprintf(io->logfmt, sizeof io->logfmt, "%.1000s/%.100s.p%%d.log", work, tag);
    dp_cand_session_init(io->sess, cmd, &io->opts, io->logfmt, 0);
    return DP_OK;
}

void audit_cand_io_free(audit_cand_io *io) {
    if (io->sess) {
        dp_cand_session_close(io->sess);
        for (int k = 1; k <= io->sess->nstarted; k++) { /* the logs go with the work directory */
            char p[1300];
            snprintf(p, sizeof p, io->logfmt, k);
            unlink(p);
        }
        dp_free(io->sess);
        io->sess = NULL;
    }
    dp_free(io->exp);
    dp_free(io->names);
    io->exp = NULL;
    io->names = NULL;
}

dp_status audit_cand_private_grad(double *const *g, const audit_cand_io *io, const char *cmd, const char *in,
                                  const char *out_path, const ref_model *m) {
    dp_cand_result res;
    dp_tensor_set out;
    if (io->sess) DP_TRY(dp_cand_session_run(io->sess, &res, &out, in, out_path, io->exp, (size_t)io->nexp));
    else DP_TRY(dp_candidate_run(&res, &out, cmd, in, out_path, io->exp, (size_t)io->nexp, &io->opts));
    unlink(out_path);
    if (res.outcome != DP_CAND_OK) {
        dp_tset_free(&out);
        return dp_error(DP_ERR_CHECK_FAILED, "the candidate failed on %s: %s: %s", in, dp_cand_outcome_name(res.outcome),
                        res.msg);
    }
    dp_status st = DP_OK;
    for (int p = 0; st == DP_OK && p < io->nexp; p++) {
        const dp_tensor *t = dp_tset_find(&out, io->names[p]);
        for (int64_t e = 0; t && e < m->params[p].numel; e++) {
            g[p][e] = dp_tensor_get(t, e);
            if (!isfinite(g[p][e]))
                st = dp_error(DP_ERR_CHECK_FAILED, "the candidate's %s[%lld] is not finite on %s", io->names[p],
                              (long long)e, in);
        }
    }
    dp_tset_free(&out);
    return st;
}

dp_status audit_work_tmpdir(char *dir, size_t n, const char *cmd) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, n, "%s/dpcert-%s-XXXXXX", t && t[0] ? t : "/tmp", cmd);
    if (mkdtemp(dir)) return DP_OK;
    dir[0] = 0;
    return dp_error(DP_ERR_IO, "cannot create a temporary work directory for --candidate");
}

dp_status audit_flat_buffers(double ***g, const ref_model *m) {
    *g = dp_calloc((size_t)m->nparams, sizeof **g);
    if (!*g) return DP_ERR_NOMEM;
    (*g)[0] = dp_calloc((size_t)(m->total > 0 ? m->total : 1), sizeof(double));
    if (!(*g)[0]) { dp_free(*g); *g = NULL; return DP_ERR_NOMEM; }
    for (int p = 1; p < m->nparams; p++) (*g)[p] = (*g)[p - 1] + m->params[p - 1].numel;
    return DP_OK;
}

typedef struct {
    char in[2][4400], out[4400];
    audit_cand_io io;
    double **g;
} cand_ctx;

static dp_status cand_run(double *stat, audit_release *r, int side, dp_noise_key key) {
    (void)key; /* the candidate draws its own noise */
    cand_ctx *x = r->ctx;
    const audit_setup *s = r->s;
    DP_TRY(audit_cand_private_grad(x->g, &x->io, s->cfg.candidate, x->in[side], x->out, &s->m0));
    double acc = 0;
    int64_t off = 0;
    for (int p = 0; p < s->m0.nparams; p++) {
        for (int64_t e = 0; e < s->m0.params[p].numel; e++) acc += x->g[p][e] * s->dir[off + e];
        off += s->m0.params[p].numel;
    }
    *stat = (side ? (double)s->d1.n : (double)s->d0.n) * acc;
    return DP_OK;
}

static void cand_destroy(audit_release *r) {
    cand_ctx *x = r->ctx;
    if (!x) return;
    unlink(x->out);
    audit_cand_io_free(&x->io);
    if (x->g) dp_free(x->g[0]);
    dp_free(x->g);
    dp_free(x);
    r->ctx = NULL;
}

dp_status audit_candidate_prepare(const audit_setup *s, const char *dir) {
    char p[4400];
    const audit_config *c = &s->cfg;
    DP_TRY(dp_mkdir_p("--work", dir)); /* at most DP_MAX_DIR_LEN bytes: the names below fit p */
    snprintf(p, sizeof p, "%s/audit-D.safetensors", dir);
    DP_TRY(audit_step_vector_write(p, &c->mc, &s->m0, &s->d0, c->clip, c->sigma, (double)s->d0.n, "audit-D"));
    snprintf(p, sizeof p, "%s/audit-Dprime.safetensors", dir);
    return audit_step_vector_write(p, &c->mc, &s->m0, &s->d1, c->clip, c->sigma, (double)s->d1.n, "audit-Dprime");
}

dp_status audit_candidate_make(audit_release *r, const audit_setup *s, int tid) {
    cand_ctx *x = audit_release_ctx(r, sizeof *x, cand_run, cand_destroy);
    if (!x) return DP_ERR_NOMEM;
    const char *dir = s->cfg.work;
    snprintf(x->in[0], sizeof x->in[0], "%s/audit-D.safetensors", dir);
    snprintf(x->in[1], sizeof x->in[1], "%s/audit-Dprime.safetensors", dir);
    snprintf(x->out, sizeof x->out, "%s/out-%d.safetensors", dir, tid);
    DP_TRY(audit_cand_io_init(&x->io, &s->m0, s->cfg.timeout_s));
    if (s->cfg.candidate_persistent) {
        char tag[32];
        snprintf(tag, sizeof tag, "candidate-%d", tid);
        DP_TRY(audit_cand_io_persistent(&x->io, s->cfg.candidate, dir, tag));
    }
    return audit_flat_buffers(&x->g, &s->m0);
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
    if (st == DP_OK && d.n > 0) st = ref_dpsgd_init(&ds, &rc, &m);
    if (st == DP_OK && d.n > 0) st = ref_dpsgd_step(&out, &m, &ds, &d, 1);
    for (int p = 0; st == DP_OK && p < m.nparams; p++) {
        char nm[160];
        double *g = dp_malloc((size_t)m.params[p].numel * sizeof *g);
        if (!g) { st = DP_ERR_NOMEM; break; }
        for (int64_t e = 0; e < m.params[p].numel; e++) /* an empty batch (B = 0): pure noise */
            g[e] = (d.n > 0 ? out.clipped_sum[p][e] + out.noise[p][e]
                            : sigma * clip * ref_dpsgd_noise_z(rc.key, 1, p, e)) / qn;
        snprintf(nm, sizeof nm, "step.private_grad.%s", m.params[p].name);
        st = dp_tset_add_f64(&o, nm, g, m.params[p].ndim, m.params[p].shape);
        dp_free(g);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st == DP_OK) st = dp_st_serialize(&buf, &len, &o);
    if (st == DP_OK) st = dp_write_file_atomic("OUT", out_path, buf, len);
    dp_free(buf);
    ref_dpsgd_step_free(&out);
    ref_dpsgd_free(&ds);
    ref_model_free(&m);
    ref_dataset_free(&d);
    dp_tset_free(&v);
    dp_tset_free(&o);
    return st;
}

int audit_cmd_reference_candidate(int argc, char **argv) {
    for (int i = 0; i < argc; i++) /* --help among the words describes, never runs (found by common/tests/cli_fuzz.py) */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: dpcert audit reference-candidate IN OUT\n"
                   "  the reference's DP-SGD step as a candidate of the protocol (docs/audits.md)\n");
            return 0;
        }
    const char *mode = getenv("DPCERT_CANDIDATE_MODE");
    if (argc == 0 && mode && strcmp(mode, "persistent") == 0) { /* --candidate-mode persistent */
        dp_status st = dp_cand_serve(refcand);
        return st == DP_OK ? 0 : dp_cli_fail("audit reference-candidate", st);
    }
    if (argc != 2)
        return dp_cli_fail("audit reference-candidate", dp_error(DP_ERR_USAGE, "expected IN OUT (usage: dpcert audit "
                                                                 "reference-candidate IN OUT), got %d word(s)", argc));
    dp_status st = refcand(argv[0], argv[1]);
    return st == DP_OK ? 0 : dp_cli_fail("audit reference-candidate", st);
}
