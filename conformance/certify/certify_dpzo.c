/* conformance/certify/certify_dpzo.c — DP-ZO vectors in `dpcert certify` (docs/certification.md
 * "DP-ZO"): the reference of a DP-ZO step given the candidate's directions (docs/dpzo.md
 * step 2), the deterministic checks of what those directions determine (clipped loss
 * differences, and the released scalar minus an exported noise) under compare's DP-ZO
 * bounds, and the black-box tests of the directions (z ~ N(0, I), independent, fresh) and of
 * the released scalars' noise (s_j (qN 2 phi) - S_ref_j ~ iid N(0, n sigma^2 C^2)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/alloc.h"
#include "conformance/certify/certify_int.h"
#include "reference/dpzo.h"

void cert_dpzo_ref_free(cert_dpzo_ref *r) {
    dp_free(r->lp); dp_free(r->lm); dp_free(r->dc); dp_free(r->S);
    memset(r, 0, sizeof *r);
}

dp_status cert_dpzo_reference(cert_dpzo_ref *r, const ref_model *m, const ref_dataset *d, double *const *z, int n,
                              double phi, double clip) {
    memset(r, 0, sizeof *r);
    const int64_t B = d->n;
    const int P = m->nparams;
    size_t nb = (size_t)n * (size_t)(B ? B : 1);
    r->B = B;
    r->n = n;
    r->lp = dp_calloc(nb, sizeof(double));
    r->lm = dp_calloc(nb, sizeof(double));
    r->dc = dp_calloc(nb, sizeof(double));
    r->S = dp_calloc((size_t)n, sizeof(double));
    double **tp = dp_calloc((size_t)P, sizeof *tp), **tm = dp_calloc((size_t)P, sizeof *tm);
    dp_status st = (r->lp && r->lm && r->dc && r->S && tp && tm) ? DP_OK : DP_ERR_NOMEM;
    for (int p = 0; p < P && st == DP_OK; p++) {
        tp[p] = dp_malloc((size_t)m->params[p].numel * sizeof(double));
        tm[p] = dp_malloc((size_t)m->params[p].numel * sizeof(double));
        if (!tp[p] || !tm[p]) st = DP_ERR_NOMEM;
    }
    for (int j = 0; j < n && st == DP_OK; j++) {
        for (int p = 0; p < P; p++) { /* docs/dpzo.md step 2.2 */
            const int64_t ne = m->params[p].numel;
            const double *th = m->params[p].data, *zj = z[p] + (int64_t)j * ne;
            for (int64_t e = 0; e < ne; e++) {
                tp[p][e] = th[e] + phi * zj[e];
                tm[p][e] = th[e] - phi * zj[e];
            }
        }
        double S = 0.0;
        for (int64_t i = 0; i < B && st == DP_OK; i++) {
            double *lp = &r->lp[j * B + i], *lm = &r->lm[j * B + i];
            if ((st = ref_example_loss(lp, m, tp, d, i)) != DP_OK) break;
            if ((st = ref_example_loss(lm, m, tm, d, i)) != DP_OK) break;
            double dd = *lp - *lm, l = 0.0;
            if (isfinite(dd)) l = ref_dpzo_clip(dd, clip);
            else r->dropped++; /* a dropped pair: contributes 0 */
            r->dc[j * B + i] = l;
            S += l;
        }
        r->S[j] = S;
    }
    for (int p = 0; tp && p < P; p++) dp_free(tp[p]);
    for (int p = 0; tm && p < P; p++) dp_free(tm[p]);
    dp_free(tp);
    dp_free(tm);
    if (st != DP_OK) cert_dpzo_ref_free(r);
    return st;
}

void cert_dpzo_pools_free(cert_dpzo_pools *pl) {
    cert_pool *p[7] = {&pl->dir, &pl->dcoord, &pl->dpair, &pl->drep, &pl->noise, &pl->ncoord, &pl->nrep};
    for (int i = 0; i < 7; i++) cert_pool_free(p[i]);
    memset(pl, 0, sizeof *pl);
}

/* The DP-ZO parameters of a vector's metadata. */
static dp_status dpzo_params_read(cert_dpzo_params *q, const dp_tensor_set *v, const char *name) {
    double nd = 0;
    if (!conf_meta_double(v, "sigma", &q->sigma) || !conf_meta_double(v, "clip", &q->clip) ||
        !conf_meta_double(v, "phi", &q->phi) || !conf_meta_double(v, "expected_batch_size", &q->qn) ||
        !conf_meta_double(v, "n_spsa", &nd))
        return dp_error(DP_ERR_FORMAT, "dpzo vector %s: sigma, clip, phi, expected_batch_size and n_spsa required", name);
    const char *noise = dp_tset_meta(v, "noise");
    if (!(q->sigma > 0 && q->clip > 0 && q->phi > 0 && q->qn > 0) || nd != floor(nd) || nd < 1 || nd > 256 ||
        (noise && strcmp(noise, "gaussian") != 0))
        return dp_error(DP_ERR_FORMAT, "dpzo vector %s: sigma, clip, phi, expected_batch_size > 0, n_spsa in [1, 256], "
                                       "noise gaussian required", name);
    q->n = (int)nd;
    q->den = ((q->qn * 2.0) * q->phi); /* docs/dpzo.md step 2.6 */
    return DP_OK;
}

/* The reference export (names of docs/dpzo.md "Exports") of one repeat for cert_compare_outputs:
 * the candidate's directions, the reference's losses and clipped differences under them, and
 * the noise / scalar pair — the candidate's noise with (S_ref + Z) / den when it exports its
 * noise (then the scalar is judged), else the residual and the candidate's own scalar. */
static dp_status dpzo_export(dp_tensor_set *R, const dp_tensor_set *v, const dp_tensor_set *out, const ref_model *m,
                             const cert_dpzo_ref *ref, double *const *z, const cert_dpzo_params *q) {
    dp_tset_init(R);
    dp_status st = DP_OK;
    char nm[200], buf[64];
    int64_t n = q->n, B = ref->B, snb[2] = {n, B}, sn[1] = {n};
    for (size_t i = 0; i < v->n && st == DP_OK; i++)
        if (strncmp(v->items[i].name, "params.", 7) == 0 || strncmp(v->items[i].name, "batch.", 6) == 0)
            st = dp_tset_add(R, v->items[i].name, &v->items[i].t);
    for (int p = 0; p < m->nparams && st == DP_OK; p++) {
        const ref_param *P = &m->params[p];
        int64_t sz[DP_MAX_DIMS] = {n};
        for (int d = 0; d < P->ndim; d++) sz[d + 1] = P->shape[d];
        snprintf(nm, sizeof nm, "dpzo.z.%s", P->name);
        st = dp_tset_add_f64(R, nm, z[p], P->ndim + 1, sz);
    }
    if (st == DP_OK) st = dp_tset_add_f64(R, "per_sample.loss_plus", ref->lp, 2, snb);
    if (st == DP_OK) st = dp_tset_add_f64(R, "per_sample.loss_minus", ref->lm, 2, snb);
    if (st == DP_OK) st = dp_tset_add_f64(R, "per_sample.diff_clipped", ref->dc, 2, snb);
    const dp_tensor *cs = dp_tset_find(out, "step.scalar"), *cz = dp_tset_find(out, "step.noise");
    double *nz = dp_malloc((size_t)n * sizeof *nz), *sc = dp_malloc((size_t)n * sizeof *sc);
    if (!nz || !sc) st = DP_ERR_NOMEM;
    for (int64_t j = 0; j < n && st == DP_OK; j++) {
        if (cz) {
            nz[j] = dp_tensor_get(cz, j);
            sc[j] = (ref->S[j] + nz[j]) / q->den;
        } else {
            sc[j] = dp_tensor_get(cs, j);
            nz[j] = sc[j] * q->den - ref->S[j];
        }
    }
    if (st == DP_OK) st = dp_tset_add_f64(R, "step.noise", nz, 1, sn);
    if (st == DP_OK) st = dp_tset_add_f64(R, "step.scalar", sc, 1, sn);
    dp_free(nz);
    dp_free(sc);
    static const char *const keys[] = {"n_spsa", "sigma", "clip", NULL};
    for (int k = 0; keys[k] && st == DP_OK; k++) st = dp_tset_set_meta(R, keys[k], dp_tset_meta(v, keys[k]));
    snprintf(buf, sizeof buf, "%.17g", q->den);
    if (st == DP_OK) st = dp_tset_set_meta(R, "denominator", buf);
    if (st == DP_OK) st = dp_tset_set_meta(R, "lr", "0");
    if (st == DP_OK) st = dp_tset_set_meta(R, "algorithm", "dpzo");
    if (st == DP_OK) st = dp_tset_set_meta(R, "step", "1");
    if (st != DP_OK) dp_tset_free(R);
    return st;
}

/* The digest of repeat k's bytes; a FAIL `check` when an earlier repeat had the same. */
static dp_status fresh(cert_result *r, char (*dig)[65], int64_t k, const uint8_t *bytes, size_t nb, const char *check,
                       const char *what, const char *sc) {
    DP_TRY(dp_sha256_buf_hex(dig[k - 1], bytes, nb));
    for (int64_t a = 1; a < k; a++)
        if (dig[a - 1][0] && strcmp(dig[a - 1], dig[k - 1]) == 0) {
            char m[200];
            snprintf(m, sizeof m, "repeats %lld and %lld released identical %s", (long long)a, (long long)k, what);
            return cert_push(r, CERT_FAIL, check, sc, m);
        }
    return DP_OK;
}

/* One repeat: directions pooled, reference under them, deterministic checks, residuals. */
static dp_status eval_repeat(cert_result *r, cert_dpzo_pools *pl, double *zprev, double *wprev, int *have_prev,
                             char (*dz)[65], char (*ds)[65], int64_t k, const ref_model *m, const ref_dataset *d,
                             const dp_tensor_set *v, const dp_tensor_set *out, const cert_dpzo_params *q, const char *sc) {
    dp_dtype dt;
    const char *dts = dp_tset_meta(out, "dtype");
    if (!cert_parse_dtype(&dt, dts)) return cert_push(r, CERT_FAIL, "declared conventions", sc, "output metadata: dtype must be f64, f32 or bf16");
    cert_note_convention(r, sc, NULL, dts ? dts : "f64");
    const int P = m->nparams, n = q->n;
    double **z = dp_calloc((size_t)P, sizeof *z), *w = dp_malloc((size_t)n * sizeof *w);
    uint8_t *zb = NULL;
    size_t nzb = 0;
    dp_status st = (z && w) ? DP_OK : DP_ERR_NOMEM;
    int bad = 0;
    int64_t off = 0;
    for (int p = 0; p < P && st == DP_OK; p++) {
        char nm[200];
        snprintf(nm, sizeof nm, "dpzo.z.%s", m->params[p].name);
        const dp_tensor *t = dp_tset_find(out, nm);
        int64_t ne = m->params[p].numel;
        size_t tb = dp_tensor_nbytes(t);
        uint8_t *nbuf = dp_realloc(zb, nzb + tb + 1);
        if (nbuf) zb = nbuf;
        if (!nbuf || !(z[p] = dp_malloc((size_t)(n * ne) * sizeof **z))) { st = DP_ERR_NOMEM; break; }
        memcpy(zb + nzb, t->data, tb);
        nzb += tb;
        for (int64_t e = 0; e < n * ne; e++) {
            z[p][e] = dp_tensor_get(t, e);
            bad |= !isfinite(z[p][e]);
        }
    }
    if (st == DP_OK && bad) st = cert_push(r, CERT_FAIL, "dpzo directions finite", sc, "a dpzo.z element is not finite");
    if (st == DP_OK && !bad) {
        /* directions: all elements; coordinate pairs within a direction; direction 2a vs 2a+1;
           this repeat against the previous one (same direction, same coordinate) */
        for (int p = 0; p < P && st == DP_OK; p++) {
            int64_t ne = m->params[p].numel;
            for (int j = 0; j < n && st == DP_OK; j++) {
                const double *zj = z[p] + (int64_t)j * ne;
                for (int64_t e = 0; e < ne && st == DP_OK; e++) st = cert_pool_push(&pl->dir, zj[e]);
                for (int64_t e = 0; e + 1 < ne && st == DP_OK; e += 2) st = cert_pair_push(&pl->dcoord, zj[e], zj[e + 1]);
                for (int64_t e = 0; j % 2 == 0 && j + 1 < n && e < ne && st == DP_OK; e++)
                    st = cert_pair_push(&pl->dpair, zj[e], zj[e + ne]);
            }
        }
        off = 0;
        for (int p = 0; p < P && st == DP_OK; p++) {
            int64_t ne = (int64_t)n * m->params[p].numel;
            for (int64_t e = 0; e < ne && st == DP_OK; e++) {
                if (*have_prev) st = cert_pair_push(&pl->drep, z[p][e], zprev[off + e]);
                zprev[off + e] = z[p][e];
            }
            off += ne;
        }
        if (st == DP_OK) st = fresh(r, dz, k, zb, nzb, "dpzo direction freshness", "directions (dpzo.z)", sc);
    }
    cert_dpzo_ref ref;
    memset(&ref, 0, sizeof ref);
    if (st == DP_OK && !bad) st = cert_dpzo_reference(&ref, m, d, z, n, q->phi, q->clip);
    dp_tensor_set R;
    if (st == DP_OK && !bad && (st = dpzo_export(&R, v, out, m, &ref, z, q)) == DP_OK) {
        st = cert_compare_outputs(r, &R, out, dt, sc);
        dp_tset_free(&R);
    }
    /* the released scalars' noise: w_j = (s_j den - S_ref_j) / (sigma C sqrt(n)) ~ iid N(0, 1) */
    const dp_tensor *s = dp_tset_find(out, "step.scalar");
    int wbad = 0;
    for (int j = 0; st == DP_OK && !bad && j < n; j++) {
        w[j] = (dp_tensor_get(s, j) * q->den - ref.S[j]) / (q->sigma * q->clip * sqrt((double)n));
        wbad |= !isfinite(w[j]);
    }
    if (st == DP_OK && !bad && wbad) st = cert_push(r, CERT_FAIL, "dpzo scalar finite", sc, "a released scalar is not finite");
    else if (st == DP_OK && !bad) {
        for (int j = 0; j < n && st == DP_OK; j++) st = cert_pool_push(&pl->noise, w[j]);
        for (int j = 0; j + 1 < n && st == DP_OK; j += 2) st = cert_pair_push(&pl->ncoord, w[j], w[j + 1]);
        for (int j = 0; j < n && st == DP_OK && *have_prev; j++) st = cert_pair_push(&pl->nrep, w[j], wprev[j]);
        memcpy(wprev, w, (size_t)n * sizeof *w);
        if (st == DP_OK) st = fresh(r, ds, k, s->data, dp_tensor_nbytes(s), "dpzo noise freshness", "scalars: the noise is not fresh", sc);
    }
    /* the repeat-to-repeat pairs need both repeats readable and finite */
    *have_prev = st == DP_OK && !bad && !wbad;
    cert_dpzo_ref_free(&ref);
    for (int p = 0; z && p < P; p++) dp_free(z[p]);
    dp_free(z);
    dp_free(w);
    dp_free(zb);
    return st;
}

void cert_dpzo_track_free(cert_dpzo_track *t) {
    dp_free(t->z); dp_free(t->w); dp_free(t->dz); dp_free(t->ds);
    ref_model_free(&t->m);
    ref_dataset_free(&t->d);
    memset(t, 0, sizeof *t);
}

dp_status cert_dpzo_track_init(cert_dpzo_track *t, const dp_tensor_set *v, const char *name, int64_t repeats) {
    memset(t, 0, sizeof *t);
    ref_model_config mc;
    DP_TRY(dpzo_params_read(&t->q, v, name));
    DP_TRY(cert_vector_model(&mc, v));
    int64_t B = 0;
    dp_status st = cert_vector_load(&t->m, &t->d, &B, &mc, v);
    for (int p = 0; st == DP_OK && p < t->m.nparams; p++) t->nz += t->q.n * t->m.params[p].numel;
    if (st == DP_OK) {
        t->z = dp_malloc((size_t)(t->nz + 1) * sizeof *t->z);
        t->w = dp_malloc((size_t)t->q.n * sizeof *t->w);
        t->dz = dp_calloc((size_t)repeats, sizeof *t->dz);
        t->ds = dp_calloc((size_t)repeats, sizeof *t->ds);
        if (!t->z || !t->w || !t->dz || !t->ds) st = DP_ERR_NOMEM;
    }
    if (st != DP_OK) cert_dpzo_track_free(t);
    return st;
}

dp_status cert_dpzo_track_repeat(cert_result *r, cert_dpzo_pools *pl, cert_dpzo_track *t, int64_t k,
                                 const dp_tensor_set *v, const dp_tensor_set *out, const char *sc) {
    return eval_repeat(r, pl, t->z, t->w, &t->valid, t->dz, t->ds, k, &t->m, &t->d, v, out, &t->q, sc);
}

dp_status cert_eval_dpzo(cert_result *r, cert_dpzo_pools *pl, const char *bundle, const char *name,
                         const dp_tensor_set *v, const cert_opts *o) {
    cert_dpzo_track t;
    DP_TRY(cert_dpzo_track_init(&t, v, name, o->repeats));
    pl->vectors++;
    dp_status st = DP_OK;
    for (int64_t k = 1; k <= o->repeats && st == DP_OK; k++) {
        char sc[160];
        dp_tensor_set out;
        if (!cert_read_repeat(r, &st, &out, sc, sizeof sc, bundle, name, k, v)) { t.valid = 0; continue; }
        st = cert_dpzo_track_repeat(r, pl, &t, k, v, &out, sc);
        dp_tset_free(&out);
    }
    cert_dpzo_track_free(&t);
    return st;
}

dp_status cert_dpzo_finish(cert_result *r, const cert_dpzo_pools *pl, const cert_opts *o) {
    if (!pl->vectors) return DP_OK;
    const char *sc = "all dpzo vectors and repeats";
    DP_TRY(cert_push_normal(r, NULL, &pl->dir, "dpzo direction", sc, o->alpha));
    DP_TRY(cert_push_products(r, &pl->dcoord, "dpzo direction independence across coordinates", sc, o->alpha));
    DP_TRY(cert_push_products(r, &pl->dpair, "dpzo direction independence across directions", sc, o->alpha));
    DP_TRY(cert_push_products(r, &pl->drep, "dpzo direction independence across repeats", sc, o->alpha));
    cert_check var;
    var.n = 0;
    DP_TRY(cert_push_normal(r, &var, &pl->noise, "dpzo scalar noise", sc, o->alpha));
    if (var.n > 0) { /* the implied epsilon of the DP-ZO noise (docs/certification.md "What a verdict implies") */
        r->dpzo_n = var.n;
        r->dpzo_ratio = sqrt(var.statistic);
        cert_std_ratio_interval(&r->dpzo_lo, &r->dpzo_hi, var.statistic, var.n, 1e-3);
    }
    DP_TRY(cert_push_products(r, &pl->ncoord, "dpzo scalar noise independence across directions", sc, o->alpha));
    return cert_push_products(r, &pl->nrep, "dpzo scalar noise independence across repeats", sc, o->alpha);
}
