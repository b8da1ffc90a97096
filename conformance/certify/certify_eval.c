/* conformance/certify/certify_eval.c — the checks of one vector (docs/certification.md "Checks"):
 * step vectors (deterministic checks through `compare`, the residual r = qN G - S_ref
 * standardized by sigma C_total, freshness) and sampling vectors (inclusion masks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/alloc.h"
#include "conformance/certify/certify_int.h"

/* A private gradient derived from params_after is used when its subtraction bound (times qN)
 * is at most this fraction of the noise std (docs/certification.md "params_after"). */
#define CERT_PA_MAX_REL 1e-3

dp_status cert_push(cert_result *r, int status, const char *name, const char *scope, const char *msg) {
    cert_check k;
    memset(&k, 0, sizeof k);
    k.status = status;
    snprintf(k.name, sizeof k.name, "%s", name);
    snprintf(k.scope, sizeof k.scope, "%s", scope);
    snprintf(k.msg, sizeof k.msg, "%s", msg);
    return cert_result_push(r, &k);
}

static dp_status output_failed(cert_result *r, const dp_cand_result *cr, const char *scope) {
    char m[600];
    snprintf(m, sizeof m, "%s: %s", dp_cand_outcome_name(cr->outcome), cr->msg);
    return cert_push(r, dp_cand_outcome_incomplete(cr->outcome) ? CERT_INCOMPLETE : CERT_FAIL, "candidate output", scope, m);
}

int cert_read_repeat(cert_result *r, dp_status *st, dp_tensor_set *out, char *sc, size_t sclen, const char *bundle,
                       const char *name, int64_t k, const dp_tensor_set *v) {
    snprintf(sc, sclen, "%s r%lld", name, (long long)k);
    dp_cand_result cr;
    if ((*st = cert_read_output(&cr, out, bundle, name, k, v)) != DP_OK) { dp_tset_free(out); return 0; }
    if (cr.outcome == DP_CAND_OK) return 1;
    *st = output_failed(r, &cr, sc);
    dp_tset_free(out);
    return 0;
}

void cert_note_convention(cert_result *r, const char *vec, const char *clip_fn, const char *dtype) {
    char c[160];
    if (clip_fn) snprintf(c, sizeof c, "clip_fn=%s dtype=%s", clip_fn, dtype);
    else snprintf(c, sizeof c, "dtype=%s (DP-ZO)", dtype);
    if (strstr(r->conventions, c)) return;
    size_t l = strlen(r->conventions);
    snprintf(r->conventions + l, sizeof r->conventions - l, "%s%s", l ? "; " : "", c);
    (void)vec;
}

int cert_parse_dtype(dp_dtype *dt, const char *s) {
    if (!s || strcmp(s, "f64") == 0) { *dt = DP_F64; return 1; }
    if (strcmp(s, "f32") == 0) { *dt = DP_F32; return 1; }
    if (strcmp(s, "bf16") == 0) { *dt = DP_BF16; return 1; }
    return 0;
}

/* Deterministic checks: the candidate's optional outputs against the reference under the
 * declared convention, and (when it exports its noise) the private gradient minus its noise. */
static dp_status deterministic(cert_result *r, const cert_vecref *ref, const dp_tensor_set *v, const dp_tensor_set *out,
                               const char *clip_fn, dp_dtype dt, const char *scope) {
    dp_tensor_set R;
    DP_TRY(cert_vecref_export(&R, ref, v, clip_fn));
    dp_status st = DP_OK;
    for (int p = 0; p < ref->m.nparams && st == DP_OK; p++) { /* noise exported: G - Z/qN against S_ref/qN */
        char nz[200], pg[200];
        snprintf(nz, sizeof nz, "step.noise.%s", ref->m.params[p].name);
        snprintf(pg, sizeof pg, "step.private_grad.%s", ref->m.params[p].name);
        if (!dp_tset_find(out, nz)) continue;
        /* the reference side holds the candidate's own noise: (S_ref + Z_cand) / qN is what the
           private gradient must be (compare's noise-substitution rule) */
        const ref_param *P = &ref->m.params[p];
        const dp_tensor *cz = dp_tset_find(out, nz);
        if (dp_tensor_numel(cz) != P->numel) continue;
        double *z = dp_malloc((size_t)P->numel * sizeof *z), *g = dp_malloc((size_t)P->numel * sizeof *g);
        if (!z || !g) { dp_free(z); dp_free(g); st = DP_ERR_NOMEM; break; }
        for (int64_t e = 0; e < P->numel; e++) {
            z[e] = dp_tensor_get(cz, e);
            g[e] = (ref->sum[p][e] + z[e]) / ref->qn;
        }
        st = dp_tset_add_f64(&R, nz, z, P->ndim, P->shape);
        if (st == DP_OK) st = dp_tset_add_f64(&R, pg, g, P->ndim, P->shape);
        dp_free(z);
        dp_free(g);
    }
    if (st == DP_OK) st = cert_compare_outputs(r, &R, out, dt, scope);
    dp_tset_free(&R);
    return st;
}

dp_status cert_compare_outputs(cert_result *r, const dp_tensor_set *R, const dp_tensor_set *out, dp_dtype dt,
                               const char *scope) {
    dp_tensor_set C;
    dp_tset_init(&C);
    dp_status st = DP_OK;
    for (size_t i = 0; i < out->n && st == DP_OK; i++) st = dp_tset_add(&C, out->items[i].name, &out->items[i].t);
    /* what the candidate does not export is copied from the reference (so the bounds can be
       formed) and left out of the verdict */
    char **copied = dp_calloc(R->n + 1, sizeof *copied);
    size_t nc = 0;
    if (!copied) st = DP_ERR_NOMEM;
    for (size_t i = 0; i < R->n && st == DP_OK; i++)
        if (!dp_tset_find(&C, R->items[i].name)) {
            st = dp_tset_add(&C, R->items[i].name, &R->items[i].t);
            copied[nc++] = R->items[i].name;
        }
    conf_cmp_opts co;
    conf_cmp_opts_default(&co);
    co.cand_dtype = dt;
    co.noise_statistical = 1;
    conf_cmp_result cr;
    conf_cmp_result_init(&cr);
    if (st == DP_OK) st = conf_compare_sets(&cr, R, &C, &co, "");
    int npass = 0;
    double worst = 0;
    for (size_t i = 0; i < cr.n && st == DP_OK; i++) {
        const conf_tensor_result *t = &cr.items[i];
        int mine = strncmp(t->name, "params.", 7) != 0 && strncmp(t->name, "batch.", 6) != 0;
        for (size_t j = 0; j < nc && mine; j++) mine = strcmp(copied[j], t->name) != 0;
        if (!mine || t->status == CONF_SKIPPED || t->status == CONF_NOT_SUPPORTED) continue;
        if (t->status == CONF_FAIL) {
            char sc[200], m[400];
            snprintf(sc, sizeof sc, "%.60s %.130s", scope, t->name);
            snprintf(m, sizeof m, "%s", t->msg);
            st = cert_push(r, CERT_FAIL, "deterministic", sc, m);
        } else {
            npass++;
            if (t->worst_frac > worst) worst = t->worst_frac;
        }
    }
    if (st == DP_OK && npass) {
        char m[200];
        snprintf(m, sizeof m, "%d tensors within their derived bounds (worst fraction %.3g)", npass, worst);
        st = cert_push(r, CERT_PASS, "deterministic", scope, m);
    }
    conf_cmp_result_free(&cr);
    dp_free(copied);
    dp_tset_free(&C);
    return st;
}

/* params_after.<name> in place of step.private_grad.<name> (SGD vectors with a known lr;
 * docs/certification.md "params_after", bound in docs/tolerances.md "Private gradient from
 * params_after"): G~ = (theta - theta') / lr in double is added to *out as the private
 * gradient (the residual uses it); *dout (the deterministic checks' view of the output)
 * holds G~ moved toward (S_ref + Z) / qN by at most its subtraction bound b_sub when the
 * noise is exported (so compare's private-gradient bound is widened by exactly b_sub).
 * Both exported: |G~ - G| <= b_sub is checked. *ok = 0 when neither is there (INCOMPLETE). */
static dp_status from_params_after(cert_result *r, int *ok, dp_tensor_set *out, dp_tensor_set *dout, const cert_vecref *ref,
                                   const dp_tensor_set *v, double sigma_ctot, dp_dtype dt, const char *sc) {
    *ok = 1;
    dp_tset_init(dout);
    double lr = NAN, worst = 0, u = conf_unit_roundoff(dt) + conf_unit_roundoff(DP_F64), g3 = conf_gamma(3, u);
    const char *opt = dp_tset_meta(v, "optimizer");
    int sgd = opt && strcmp(opt, "sgd") == 0 && conf_meta_double(v, "lr", &lr) && lr != 0, derived = 0;
    dp_status st = DP_OK;
    for (int p = 0; p < ref->m.nparams && st == DP_OK; p++) {
        const ref_param *P = &ref->m.params[p];
        char pg[200], pa[200], nz[200], m[400];
        snprintf(pg, sizeof pg, "step.private_grad.%s", P->name);
        snprintf(pa, sizeof pa, "params_after.%s", P->name);
        snprintf(nz, sizeof nz, "step.noise.%s", P->name);
        const dp_tensor *G = dp_tset_find(out, pg), *A = sgd ? dp_tset_find(out, pa) : NULL, *Z = dp_tset_find(out, nz);
        if (!G && !A) {
            *ok = 0;
            snprintf(m, sizeof m, "MISSING: neither %.150s nor %.150s in the output", pg, pa);
            return cert_push(r, CERT_INCOMPLETE, "candidate output", sc, m);
        }
        if (!A) continue;
        double *g = dp_malloc((size_t)P->numel * sizeof *g), *gs = dp_malloc((size_t)P->numel * sizeof *gs);
        if (!g || !gs) { dp_free(g); dp_free(gs); return DP_ERR_NOMEM; }
        int64_t bad = -1;
        for (int64_t e = 0; e < P->numel; e++) {
            double th = P->data[e], ta = dp_tensor_get(A, e), d = th - ta;
            g[e] = d / lr;
            double b = g3 * (fabs(th) + fabs(ta) + fabs(d)) / fabs(lr) + u * fabs(g[e]);
            if (!(fabs(ref->qn * b) <= worst * sigma_ctot)) worst = ref->qn * b / sigma_ctot;
            if (G && !(fabs(g[e] - dp_tensor_get(G, e)) <= b) && bad < 0) bad = e;
            double gr = Z ? (ref->sum[p][e] + dp_tensor_get(Z, e)) / ref->qn : g[e];
            gs[e] = g[e] - fmax(-b, fmin(b, g[e] - gr)); /* NaN stays NaN */
        }
        if (G && bad >= 0) {
            snprintf(m, sizeof m, "element %lld: (params - params_after) / lr = %.17g, private gradient %.17g: they differ by "
                     "more than the subtraction bound", (long long)bad, g[bad], dp_tensor_get(G, bad));
            char s2[200];
            snprintf(s2, sizeof s2, "%.60s %.130s", sc, pa);
            st = cert_push(r, CERT_FAIL, "deterministic", s2, m);
        } else if (!G) {
            derived = 1;
            st = dp_tset_add_f64(out, pg, g, P->ndim, P->shape);
            if (st == DP_OK) st = dp_tset_add_f64(dout, pg, gs, P->ndim, P->shape);
        }
        dp_free(g);
        dp_free(gs);
    }
    for (size_t i = 0; i < out->n && st == DP_OK; i++)
        if (!dp_tset_find(dout, out->items[i].name)) st = dp_tset_add(dout, out->items[i].name, &out->items[i].t);
    if (st == DP_OK && derived) {
        cert_check k;
        memset(&k, 0, sizeof k);
        snprintf(k.name, sizeof k.name, "params_after precision");
        snprintf(k.scope, sizeof k.scope, "%s", sc);
        k.statistic = worst;
        k.hi = CERT_PA_MAX_REL;
        k.status = worst <= CERT_PA_MAX_REL ? CERT_PASS : CERT_INCOMPLETE;
        snprintf(k.msg, sizeof k.msg, "private gradient derived from params_after: its subtraction bound times qN is at most "
                 "%.3g of the noise std (%s %g)", worst, worst <= CERT_PA_MAX_REL ? "<=" : "> the resolvable", CERT_PA_MAX_REL);
        st = cert_result_push(r, &k);
    }
    return st;
}

dp_status cert_eval_step(cert_result *r, cert_pool *all, cert_pool *coord, cert_pool *rep, cert_noise_fams *fams,
                         double ***zs_out, int64_t *zn, const char *bundle, const char *name, const dp_tensor_set *v,
                         const cert_opts *o) {
    double sigma = 0, ctot = 0;
    if (!conf_meta_double(v, "sigma", &sigma) || !conf_meta_double(v, "c_total", &ctot) || !(sigma * ctot > 0))
        return dp_error(DP_ERR_FORMAT, "vector %s: sigma and c_total must be positive", name);
    double **zs = dp_calloc((size_t)o->repeats, sizeof *zs);
    char (*dig)[65] = dp_calloc((size_t)o->repeats, sizeof *dig);
    cert_pool mine = {0};
    if (!zs || !dig) { dp_free(zs); dp_free(dig); return DP_ERR_NOMEM; }
    *zs_out = zs;
    *zn = 0;
    dp_status st = DP_OK;
    for (int64_t k = 1; k <= o->repeats && st == DP_OK; k++) {
        char sc[160];
        dp_tensor_set out;
        if (!cert_read_repeat(r, &st, &out, sc, sizeof sc, bundle, name, k, v)) continue;
        const char *clip_fn = dp_tset_meta(&out, "clip_fn"), *dts = dp_tset_meta(&out, "dtype");
        if (!clip_fn) clip_fn = dp_tset_meta(v, "clip_fn");
        conf_clip_conv cv;
        dp_dtype dt = DP_F64;
        int ok = conf_clip_conv_parse(&cv, "output metadata clip_fn", clip_fn) == DP_OK;
        /* plain `automatic` (declared or the vector's own) means the vector's gamma
           (docs/certification.md "Outputs of a step vector"); `automatic:G` gives its own */
        if (ok && cv.automatic && strcmp(clip_fn, "automatic") == 0 && !conf_meta_double(v, "gamma", &cv.eps)) ok = 0;
        if (ok) ok = cert_parse_dtype(&dt, dts);
        if (!ok) {
            st = cert_push(r, CERT_FAIL, "declared conventions", sc, "output metadata: clip_fn must be abadi, abadi_eps:E or "
                                                                "automatic[:G]; dtype f64, f32 or bf16");
            dp_tset_free(&out);
            continue;
        }
        cert_note_convention(r, name, clip_fn, dts ? dts : "f64");
        cert_vecref ref;
        if ((st = cert_vecref_compute(&ref, v, &cv)) != DP_OK) { dp_tset_free(&out); break; }
        dp_tensor_set dout;
        int have = 1;
        st = from_params_after(r, &have, &out, &dout, &ref, v, sigma * ctot, dt, sc);
        if (st == DP_OK && have) st = deterministic(r, &ref, v, &dout, clip_fn, dt, sc);
        dp_tset_free(&dout);
        if (st != DP_OK || !have) { cert_vecref_free(&ref); dp_tset_free(&out); continue; }
        /* the residual and its digest (freshness) */
        int64_t n = 0;
        for (int p = 0; p < ref.m.nparams; p++) n += ref.m.params[p].numel;
        zs[k - 1] = dp_malloc((size_t)(n ? n : 1) * sizeof(double));
        uint8_t *bytes = NULL;
        size_t nb = 0;
        if (!zs[k - 1]) st = DP_ERR_NOMEM;
        int64_t j = 0, bad = -1;
        for (int p = 0; p < ref.m.nparams && st == DP_OK; p++) {
            char pg[200];
            snprintf(pg, sizeof pg, "step.private_grad.%s", ref.m.params[p].name);
            const dp_tensor *G = dp_tset_find(&out, pg);
            size_t tb = dp_tensor_nbytes(G);
            uint8_t *nbuf = dp_realloc(bytes, nb + tb + 1);
            if (!nbuf) { st = DP_ERR_NOMEM; break; }
            bytes = nbuf;
            memcpy(bytes + nb, G->data, tb);
            nb += tb;
            for (int64_t e = 0; e < ref.m.params[p].numel; e++, j++) {
                double z = (ref.qn * dp_tensor_get(G, e) - ref.sum[p][e]) / (sigma * ctot);
                if (!isfinite(z) && bad < 0) bad = j;
                zs[k - 1][j] = z;
            }
        }
        if (st == DP_OK && bad >= 0) {
            st = cert_push(r, CERT_FAIL, "private gradient finite", sc, "a private gradient element is not finite");
            dp_free(zs[k - 1]);
            zs[k - 1] = NULL;
        } else if (st == DP_OK) {
            *zn = n;
            st = cert_fams_add_step(fams, name, &ref.m, &ref.g, zs[k - 1]);
            for (int64_t e = 0; e < n && st == DP_OK; e++) st = cert_pool_push(all, zs[k - 1][e]);
            for (int64_t e = 0; e < n && st == DP_OK; e++) st = cert_pool_push(&mine, zs[k - 1][e]);
            for (int64_t e = 0; e + 1 < n && st == DP_OK; e += 2) st = cert_pair_push(coord, zs[k - 1][e], zs[k - 1][e + 1]);
            for (int64_t e = 0; k >= 2 && zs[k - 2] && e < n && st == DP_OK; e++) st = cert_pair_push(rep, zs[k - 1][e], zs[k - 2][e]);
            if (st == DP_OK) st = dp_sha256_buf_hex(dig[k - 1], bytes, nb);
            for (int64_t a = 1; a < k && st == DP_OK; a++)
                if (dig[a - 1][0] && strcmp(dig[a - 1], dig[k - 1]) == 0) {
                    char m[200];
                    snprintf(m, sizeof m, "repeats %lld and %lld released identical private gradients: the noise is not fresh",
                             (long long)a, (long long)k);
                    st = cert_push(r, CERT_FAIL, "noise freshness", sc, m);
                }
        }
        dp_free(bytes);
        cert_vecref_free(&ref);
        dp_tset_free(&out);
    }
    if (st == DP_OK && mine.n > 0) {
        cert_check k;
        cert_test_variance(&k, mine.z, mine.n, o->alpha);
        snprintf(k.scope, sizeof k.scope, "%s (all repeats)", name);
        st = cert_result_push(r, &k);
    }
    cert_pool_free(&mine);
    dp_free(dig);
    return st;
}

/* The power of each sampling test against the deviation it is there to catch, at this vector's
 * size (docs/certification.md "Sampling"): printed in the report. */
dp_status cert_sampling_power(cert_result *r, const char *name, int64_t K, int64_t N, double q, double alpha) {
    const struct { const char *dev, *test; double p; } t[] = {
        {"fixed-size batches (round(qN) drawn without replacement)", "batch sizes ~ Binomial(N, q) (dispersion)",
         cert_power_dispersion_fixed(K, N, q, alpha)},
        {"shuffled epochs (every example Kq times)", "per-example counts ~ Binomial(K, q) (dispersion)",
         cert_power_dispersion_fixed(N, K, q, alpha)},
        {"correlated inclusion (examples 2j, 2j+1 together)", "independence across examples (co-inclusion)",
         cert_power_count(K * (N / 2), q * q, alpha, q)},
        {"a fixed sampling seed (the same masks every run)", "fresh across repeats (co-inclusion)",
         cert_power_count(K * N, q * q, alpha, q)},
        {"a generator reseeded each epoch (batches repeat)", "independence across steps (every pair, worst)",
         cert_power_count(N, q * q, alpha / (double)(K * (K - 1) / 2), q)},
        {"sampling rate 1.1 q", "sampling rate q", cert_power_count(K * N, q, alpha, 1.1 * q)},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0] && r->nspow < CERT_MAX_SPOWER; i++) {
        cert_spower *w = &r->spow[r->nspow++];
        snprintf(w->vector, sizeof w->vector, "%s", name);
        snprintf(w->deviation, sizeof w->deviation, "%s", t[i].dev);
        snprintf(w->test, sizeof w->test, "%s", t[i].test);
        w->power = t[i].p;
    }
    return DP_OK;
}

dp_status cert_eval_sampling(cert_result *r, const char *bundle, const char *name, const dp_tensor_set *v,
                             const cert_opts *o) {
    const dp_tensor *sh = dp_tset_find(v, "sampling.shape");
    double q = 0;
    if (!sh || dp_tensor_numel(sh) != 2 || !conf_meta_double(v, "q", &q) || !(q > 0 && q < 1))
        return dp_error(DP_ERR_FORMAT, "sampling vector %s: sampling.shape and q in (0, 1) required", name);
    int64_t K = (int64_t)dp_tensor_get(sh, 0), N = (int64_t)dp_tensor_get(sh, 1);
    if (K < 2 || N < 2 || K > (1 << 20) || N > (1 << 24)) return dp_error(DP_ERR_FORMAT, "sampling vector %s: bad shape", name);
    uint8_t *prev = NULL, *cur = NULL;
    int64_t *cs = dp_calloc((size_t)K, sizeof *cs), *ce = dp_calloc((size_t)N, sizeof *ce);
    dp_status st = (!cs || !ce) ? DP_ERR_NOMEM : DP_OK;
    for (int64_t k = 1; k <= o->repeats && st == DP_OK; k++) {
        char sc[160];
        dp_tensor_set out;
        if (!cert_read_repeat(r, &st, &out, sc, sizeof sc, bundle, name, k, v)) continue;
        const dp_tensor *m = dp_tset_find(&out, "sampling.mask");
        dp_free(cur);
        cur = dp_malloc((size_t)(K * N));
        if (!cur) { dp_tset_free(&out); st = DP_ERR_NOMEM; break; }
        int bad = 0;
        for (int64_t i = 0; i < K * N; i++) {
            double x = dp_tensor_get(m, i);
            if (x != 0 && x != 1) bad = 1;
            cur[i] = x == 1;
        }
        dp_tset_free(&out);
        if (bad) { st = cert_push(r, CERT_FAIL, "sampling mask values", sc, "sampling.mask holds values other than 0 and 1"); continue; }
        memset(cs, 0, (size_t)K * sizeof *cs);
        memset(ce, 0, (size_t)N * sizeof *ce);
        int64_t tot = 0, pe = 0, ps = 0, worst = 0;
        for (int64_t s = 0; s < K; s++)
            for (int64_t i = 0; i < N; i++) {
                int x = cur[s * N + i];
                cs[s] += x; ce[i] += x; tot += x;
                if (i % 2 == 0 && i + 1 < N) pe += x && cur[s * N + i + 1];
                if (s % 2 == 0 && s + 1 < K) ps += x && cur[(s + 1) * N + i];
            }
        for (int64_t i = 1; i < N; i++)
            if (fabs((double)ce[i] - (double)K * q) > fabs((double)ce[worst] - (double)K * q)) worst = i;
        if ((st = cert_figs_batches(&r->figs, name, cs, K, N, q)) != DP_OK) break;
        cert_check c;
        cert_test_count(&c, tot, K * N, q, o->alpha);
        snprintf(c.name, sizeof c.name, "sampling rate q");
        snprintf(c.scope, sizeof c.scope, "%s", sc);
        if ((st = cert_result_push(r, &c)) != DP_OK) break;
        cert_test_count(&c, ce[worst], K, q, o->alpha / (double)N);
        c.alpha = o->alpha; /* union bound over the N examples */
        snprintf(c.name, sizeof c.name, "per-example inclusion rate (worst example)");
        snprintf(c.scope, sizeof c.scope, "%.120s example %lld", sc, (long long)worst);
        if ((st = cert_result_push(r, &c)) != DP_OK) break;
        cert_test_dispersion(&c, cs, K, N, q, o->alpha);
        c.need = CERT_NEED_LO;
        snprintf(c.name, sizeof c.name, "batch sizes ~ Binomial(N, q) (dispersion)");
        snprintf(c.scope, sizeof c.scope, "%s", sc);
        if ((st = cert_result_push(r, &c)) != DP_OK) break;
        cert_test_dispersion(&c, ce, N, K, q, o->alpha);
        c.need = CERT_NEED_LO;
        snprintf(c.name, sizeof c.name, "per-example counts ~ Binomial(K, q) (dispersion)");
        snprintf(c.scope, sizeof c.scope, "%s", sc);
        if ((st = cert_result_push(r, &c)) != DP_OK) break;
        cert_test_count(&c, pe, K * (N / 2), q * q, o->alpha);
        c.need = CERT_NEED_HI;
        snprintf(c.name, sizeof c.name, "independence across examples (co-inclusion)");
        snprintf(c.scope, sizeof c.scope, "%s", sc);
        if ((st = cert_result_push(r, &c)) != DP_OK) break;
        cert_test_count(&c, ps, (K / 2) * N, q * q, o->alpha);
        c.need = CERT_NEED_HI;
        snprintf(c.name, sizeof c.name, "independence across steps (co-inclusion)");
        snprintf(c.scope, sizeof c.scope, "%s", sc);
        if ((st = cert_result_push(r, &c)) != DP_OK) break;
        /* every pair of steps: a generator reseeded each epoch repeats its batches (the worst
           pair's co-inclusions, each pair at alpha / pairs) */
        int64_t pairs = K * (K - 1) / 2, wa = 0, wb = 1, wx = -1;
        for (int64_t a = 0; a < K; a++)
            for (int64_t b = a + 1; b < K; b++) {
                int64_t x = 0;
                const uint8_t *ra = cur + a * N, *rb = cur + b * N;
                for (int64_t i = 0; i < N; i++) x += ra[i] & rb[i];
                if (x > wx) { wx = x; wa = a; wb = b; }
            }
        cert_test_count(&c, wx, N, q * q, o->alpha / (double)pairs);
        c.alpha = o->alpha;
        c.need = CERT_NEED_HI;
        snprintf(c.name, sizeof c.name, "independence across steps (every pair, worst)");
        snprintf(c.scope, sizeof c.scope, "%.100s steps %lld and %lld", sc, (long long)wa, (long long)wb);
        if ((st = cert_result_push(r, &c)) != DP_OK) break;
        if (prev) {
            int64_t both = 0;
            for (int64_t i = 0; i < K * N; i++) both += prev[i] && cur[i];
            cert_test_count(&c, both, K * N, q * q, o->alpha);
            c.need = CERT_NEED_HI;
            snprintf(c.name, sizeof c.name, "fresh across repeats (co-inclusion)");
            snprintf(c.scope, sizeof c.scope, "%.120s vs r%lld", sc, (long long)(k - 1));
            if ((st = cert_result_push(r, &c)) != DP_OK) break;
        }
        dp_free(prev);
        prev = cur;
        cur = NULL;
    }
    dp_free(prev); dp_free(cur); dp_free(cs); dp_free(ce);
    if (st == DP_OK) st = cert_sampling_power(r, name, K, N, q, o->alpha);
    return st;
}
