/* conformance/certify/vecref.c — the vector format and its reference, the bottom of
 * certification with result.c (docs/certification.md): suite names, a vector's digest and
 * step count, the model and batch a vector holds, and the reference of a step vector: per
 * example loss, gradient (ref_example_grad), group norms (ref_norms_double), clip factors
 * under a convention, and clipped sums (Neumaier, ascending example order), exactly as
 * reference/dpsgd.c computes a step, minus the sampling and the noise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/safetensors.h"
#include "common/alloc.h"
#include "conformance/certify/certify.h"
#include "conformance/certify/certify_int.h"

static dp_status need_d(const dp_tensor_set *v, const char *key, double *x) {
    if (!conf_meta_double(v, key, x)) return dp_error(DP_ERR_FORMAT, "vector metadata '%s' missing or not a finite number", key);
    return DP_OK;
}

static dp_status need_i(const dp_tensor_set *v, const char *key, int *x, int lo, int hi) {
    double t;
    DP_TRY(need_d(v, key, &t));
    if (t != floor(t) || t < lo || t > hi) return dp_error(DP_ERR_FORMAT, "vector metadata '%s' = %g out of [%d, %d]", key, t, lo, hi);
    *x = (int)t;
    return DP_OK;
}

dp_status cert_vector_model(ref_model_config *mc, const dp_tensor_set *v) {
    const char *model = dp_tset_meta(v, "model");
    if (!model || (strcmp(model, "mlp") != 0 && strcmp(model, "llama") != 0))
        return dp_error(DP_ERR_FORMAT, "vector metadata 'model' must be mlp or llama");
    ref_config_default(mc, strcmp(model, "mlp") == 0 ? REF_MLP : REF_LLAMA);
    if (mc->kind == REF_MLP) {
        DP_TRY(need_i(v, "in", &mc->in, 1, 1 << 20));
        DP_TRY(need_i(v, "classes", &mc->classes, 2, 1 << 20));
        const char *h = dp_tset_meta(v, "hidden");
        if (!h) return dp_error(DP_ERR_FORMAT, "vector metadata 'hidden' missing");
        mc->nhidden = 0;
        for (const char *p = h; *p;) {
            char *end;
            long w = strtol(p, &end, 10);
            if (end == p || w < 1 || w > (1 << 20) || mc->nhidden >= REF_MAX_HIDDEN)
                return dp_error(DP_ERR_FORMAT, "vector metadata 'hidden' = '%s' is not a list of widths", h);
            mc->hidden[mc->nhidden++] = (int)w;
            p = *end == ',' ? end + 1 : end;
            if (*end && *end != ',') return dp_error(DP_ERR_FORMAT, "vector metadata 'hidden' = '%s'", h);
        }
    } else {
        DP_TRY(need_i(v, "vocab", &mc->vocab, 2, 1 << 20));
        DP_TRY(need_i(v, "dim", &mc->dim, 2, 1 << 16));
        DP_TRY(need_i(v, "layers", &mc->layers, 1, 64));
        DP_TRY(need_i(v, "heads", &mc->heads, 1, 1 << 10));
        DP_TRY(need_i(v, "ffn", &mc->ffn, 1, 1 << 20));
        DP_TRY(need_i(v, "seq", &mc->seq, 2, 1 << 16));
        DP_TRY(need_i(v, "tied", &mc->tied, 0, 1));
    }
    return ref_config_check(mc);
}

dp_status cert_vector_config(ref_model_config *mc, ref_dpsgd_config *c, double *qn, const dp_tensor_set *v) {
    const char *kind = dp_tset_meta(v, "kind");
    if (!kind || strcmp(kind, "step") != 0) return dp_error(DP_ERR_FORMAT, "not a step vector (metadata 'kind')");
    DP_TRY(cert_vector_model(mc, v));
    ref_dpsgd_config_default(c);
    DP_TRY(need_d(v, "clip", &c->clip));
    DP_TRY(need_d(v, "sigma", &c->sigma));
    DP_TRY(need_d(v, "expected_batch_size", qn));
    if (!(c->clip > 0) || !(c->sigma >= 0) || !(*qn > 0))
        return dp_error(DP_ERR_FORMAT, "vector metadata: clip > 0, sigma >= 0, expected_batch_size > 0 required");
    const char *style = dp_tset_meta(v, "clipping"), *fn = dp_tset_meta(v, "clip_fn"), *gs = dp_tset_meta(v, "groups");
    if (!style || !fn) return dp_error(DP_ERR_FORMAT, "vector metadata 'clipping' or 'clip_fn' missing");
    c->style = strcmp(style, "flat") == 0 ? REF_CLIP_FLAT : strcmp(style, "per-layer") == 0 ? REF_CLIP_PER_LAYER
             : strcmp(style, "group") == 0 ? REF_CLIP_GROUP : (ref_clip_style)-1;
    if ((int)c->style < 0) return dp_error(DP_ERR_FORMAT, "vector metadata 'clipping' = '%s'", style);
    if (gs) snprintf(c->groups, sizeof c->groups, "%s", gs);
    c->clip_fn = strcmp(fn, "automatic") == 0 ? REF_CLIPFN_AUTOMATIC : REF_CLIPFN_ABADI;
    if (c->clip_fn == REF_CLIPFN_AUTOMATIC) DP_TRY(need_d(v, "gamma", &c->gamma));
    c->lr = 0;
    return DP_OK;
}

static dp_status load_batch(ref_dataset *d, int64_t *B, const ref_model_config *mc, const dp_tensor_set *v) {
    memset(d, 0, sizeof *d);
    d->kind = mc->kind;
    if (mc->kind == REF_MLP) {
        const dp_tensor *x = dp_tset_find(v, "batch.x"), *y = dp_tset_find(v, "batch.y");
        if (!x || !y || x->ndim != 2 || x->shape[1] != mc->in || y->ndim != 1 || y->shape[0] != x->shape[0])
            return dp_error(DP_ERR_FORMAT, "vector: batch.x [B, %d] and batch.y [B] required", mc->in);
        *B = x->shape[0];
        d->n = *B;
        d->in = mc->in;
        d->x = dp_malloc((size_t)(*B ? *B : 1) * (size_t)mc->in * sizeof *d->x);
        d->y = dp_malloc((size_t)(*B ? *B : 1) * sizeof *d->y);
        if (!d->x || !d->y) return DP_ERR_NOMEM;
        for (int64_t i = 0; i < *B * mc->in; i++) d->x[i] = dp_tensor_get(x, i); /* NaN kept: a dropped example */
        for (int64_t i = 0; i < *B; i++) {
            double t = dp_tensor_get(y, i);
            if (!(t >= 0 && t < mc->classes)) return dp_error(DP_ERR_FORMAT, "vector: batch.y[%lld] out of range", (long long)i);
            d->y[i] = (int32_t)t;
        }
    } else {
        const dp_tensor *t = dp_tset_find(v, "batch.tokens");
        if (!t || t->ndim != 2 || t->shape[1] != mc->seq)
            return dp_error(DP_ERR_FORMAT, "vector: batch.tokens [B, %d] required", mc->seq);
        *B = t->shape[0];
        d->n = *B;
        d->seq = mc->seq;
        d->tokens = dp_malloc((size_t)(*B ? *B : 1) * (size_t)mc->seq * sizeof *d->tokens);
        if (!d->tokens) return DP_ERR_NOMEM;
        for (int64_t i = 0; i < *B * mc->seq; i++) {
            double x = dp_tensor_get(t, i);
            if (!(x >= 0 && x < mc->vocab)) return dp_error(DP_ERR_FORMAT, "vector: batch.tokens out of range");
            d->tokens[i] = (int32_t)x;
        }
    }
    return DP_OK;
}

void cert_vecref_free(cert_vecref *r) {
    if (r->grad)
        for (int p = 0; p < r->m.nparams; p++) dp_free(r->grad[p]);
    if (r->sum)
        for (int p = 0; p < r->m.nparams; p++) dp_free(r->sum[p]);
    dp_free(r->grad); dp_free(r->sum);
    dp_free(r->loss); dp_free(r->norm); dp_free(r->gnorm); dp_free(r->cf); dp_free(r->dropped);
    ref_clip_groups_free(&r->g);
    ref_model_free(&r->m);
    ref_dataset_free(&r->d);
    memset(r, 0, sizeof *r);
}

dp_status cert_vector_load(ref_model *m, ref_dataset *d, int64_t *B, const ref_model_config *mc, const dp_tensor_set *v) {
    DP_TRY(ref_model_init(m, mc, (dp_seed){0}));
    for (int p = 0; p < m->nparams; p++) {
        char nm[160];
        snprintf(nm, sizeof nm, "params.%s", m->params[p].name);
        const dp_tensor *t = dp_tset_find(v, nm);
        if (!t || dp_tensor_numel(t) != m->params[p].numel) return dp_error(DP_ERR_FORMAT, "vector: %s missing or of the wrong size", nm);
        for (int64_t e = 0; e < m->params[p].numel; e++) m->params[p].data[e] = dp_tensor_get(t, e);
    }
    return load_batch(d, B, mc, v);
}

static dp_status compute(cert_vecref *r, const dp_tensor_set *v, const conf_clip_conv *cv) {
    DP_TRY(cert_vector_config(&r->mc, &r->c, &r->qn, v));
    DP_TRY(cert_vector_load(&r->m, &r->d, &r->B, &r->mc, v));
    DP_TRY(ref_clip_groups_make(&r->g, &r->c, &r->m));
    if (cv) r->conv = *cv;
    else DP_TRY(conf_clip_conv_parse(&r->conv, "vector clip_fn", dp_tset_meta(v, "clip_fn")));
    if (!cv && r->conv.automatic) r->conv.eps = r->c.gamma;
    const int64_t B = r->B, P = r->m.nparams;
    const int G = r->G = r->g.ngroups;
    size_t b1 = (size_t)(B ? B : 1);
    r->loss = dp_calloc(b1, sizeof(double));
    r->norm = dp_calloc(b1, sizeof(double));
    r->gnorm = dp_calloc(b1 * (size_t)G, sizeof(double));
    r->cf = dp_calloc(b1 * (size_t)G, sizeof(double));
    r->dropped = dp_calloc(b1, sizeof(int));
    r->grad = dp_calloc((size_t)P, sizeof(double *));
    r->sum = dp_calloc((size_t)P, sizeof(double *));
    double **gi = dp_calloc((size_t)P, sizeof(double *)), **comp = dp_calloc((size_t)P, sizeof(double *));
    dp_status st = (!r->loss || !r->norm || !r->gnorm || !r->cf || !r->dropped || !r->grad || !r->sum || !gi || !comp) ? DP_ERR_NOMEM : DP_OK;
    for (int p = 0; p < P && st == DP_OK; p++) {
        int64_t n = r->m.params[p].numel;
        r->grad[p] = dp_calloc(b1 * (size_t)n, sizeof(double));
        r->sum[p] = dp_calloc((size_t)n, sizeof(double));
        comp[p] = dp_calloc((size_t)n, sizeof(double));
        if (!r->grad[p] || !r->sum[p] || !comp[p]) st = DP_ERR_NOMEM;
    }
    for (int64_t i = 0; i < B && st == DP_OK; i++) {
        for (int p = 0; p < P; p++) gi[p] = r->grad[p] + i * r->m.params[p].numel; /* [numel] */
        if ((st = ref_example_grad(&r->loss[i], gi, &r->m, &r->d, i)) != DP_OK) break;
        int fin = isfinite(r->loss[i]);
        for (int p = 0; p < P && fin; p++)
            for (int64_t e = 0; e < r->m.params[p].numel; e++) fin &= isfinite(gi[p][e]) != 0;
        if ((st = ref_norms_double(&r->norm[i], r->gnorm + i * G, &r->m, &r->g, gi, fin)) != DP_OK) break;
        r->dropped[i] = !fin;
        for (int k = 0; k < G; k++)
            r->cf[i * G + k] = fin ? conf_clip_conv_factor(&r->conv, r->gnorm[i * G + k], r->g.thresh[k]) : 0.0;
        if (!fin) continue;
        for (int p = 0; p < P; p++) { /* Neumaier, ascending example order */
            double c = r->cf[i * G + r->g.group_of[p]];
            for (int64_t e = 0; e < r->m.params[p].numel; e++) {
                double x = c * gi[p][e], s = r->sum[p][e], t = s + x;
                comp[p][e] += fabs(s) >= fabs(x) ? (s - t) + x : (x - t) + s;
                r->sum[p][e] = t;
            }
        }
    }
    for (int p = 0; p < P && st == DP_OK; p++)
        for (int64_t e = 0; e < r->m.params[p].numel; e++) r->sum[p][e] += comp[p][e];
    for (int p = 0; comp && p < P; p++) dp_free(comp[p]);
    dp_free(comp);
    dp_free(gi);
    return st;
}

dp_status cert_vecref_compute(cert_vecref *r, const dp_tensor_set *v, const conf_clip_conv *cv) {
    memset(r, 0, sizeof *r);
    dp_status st = compute(r, v, cv);
    if (st != DP_OK) cert_vecref_free(r);
    return st;
}

dp_status cert_vecref_export(dp_tensor_set *s, const cert_vecref *r, const dp_tensor_set *v, const char *clip_fn) {
    dp_tset_init(s);
    dp_status st = DP_OK;
    char nm[200], buf[64];
    int64_t B = r->B, sb[1] = {B};
    for (size_t i = 0; i < v->n && st == DP_OK; i++)
        if (strncmp(v->items[i].name, "params.", 7) == 0 || strncmp(v->items[i].name, "batch.", 6) == 0)
            st = dp_tset_add(s, v->items[i].name, &v->items[i].t);
    if (st == DP_OK) st = dp_tset_add_f64(s, "per_sample.loss", r->loss, 1, sb);
    if (st == DP_OK) st = dp_tset_add_f64(s, "per_sample.norm", r->norm, 1, sb);
    double *col = dp_calloc((size_t)(B ? B : 1), sizeof *col);
    if (!col) st = DP_ERR_NOMEM;
    for (int k = 0; k < r->G && st == DP_OK; k++) {
        for (int64_t i = 0; i < B; i++) col[i] = r->cf[i * r->G + k];
        if (r->c.style == REF_CLIP_FLAT) snprintf(nm, sizeof nm, "per_sample.clip_factor");
        else snprintf(nm, sizeof nm, "per_sample.clip_factor.%s", r->g.name[k]);
        st = dp_tset_add_f64(s, nm, col, 1, sb);
        if (st != DP_OK || r->c.style == REF_CLIP_FLAT) continue;
        for (int64_t i = 0; i < B; i++) col[i] = r->gnorm[i * r->G + k];
        snprintf(nm, sizeof nm, "per_sample.norm.%s", r->g.name[k]);
        st = dp_tset_add_f64(s, nm, col, 1, sb);
    }
    dp_free(col);
    for (int p = 0; p < r->m.nparams && st == DP_OK; p++) {
        const ref_param *P = &r->m.params[p];
        int64_t gs[DP_MAX_DIMS] = {B, P->shape[0], P->shape[1], P->shape[2]};
        snprintf(nm, sizeof nm, "per_sample.grad.%s", P->name);
        if ((st = dp_tset_add_f64(s, nm, r->grad[p], 1 + P->ndim, gs)) != DP_OK) break;
        snprintf(nm, sizeof nm, "step.clipped_sum.%s", P->name);
        st = dp_tset_add_f64(s, nm, r->sum[p], P->ndim, P->shape);
    }
    static const char *const copy[] = {"clip", "sigma", "c_total", "expected_batch_size", "group_thresholds", NULL};
    for (int k = 0; copy[k] && st == DP_OK; k++)
        if (dp_tset_meta(v, copy[k])) st = dp_tset_set_meta(s, copy[k], dp_tset_meta(v, copy[k]));
    if (st == DP_OK) st = dp_tset_set_meta(s, "clip_fn", clip_fn);
    snprintf(buf, sizeof buf, "%d", 1);
    if (st == DP_OK) st = dp_tset_set_meta(s, "step", buf);
    if (st != DP_OK) dp_tset_free(s);
    return st;
}

dp_status cert_suite_parse(cert_suite *s, const char *what, const char *name) {
    if (name && strcmp(name, "ci") == 0) { *s = CERT_SUITE_CI; return DP_OK; }
    if (name && strcmp(name, "certify") == 0) { *s = CERT_SUITE_CERTIFY; return DP_OK; }
    if (name && strcmp(name, "strict") == 0) { *s = CERT_SUITE_STRICT; return DP_OK; }
    return dp_error(DP_ERR_INVALID, "%s must be ci, certify or strict, got '%s'", what, name ? name : "");
}

const char *cert_suite_name(cert_suite s) { return s == CERT_SUITE_CI ? "ci" : s == CERT_SUITE_CERTIFY ? "certify" : "strict"; }

dp_status cert_vector_digest(char hex[65], const dp_tensor_set *v) {
    dp_tensor_set c;
    dp_tset_init(&c);
    dp_status st = DP_OK;
    for (size_t i = 0; i < v->n && st == DP_OK; i++) st = dp_tset_add(&c, v->items[i].name, &v->items[i].t);
    for (size_t i = 0; i < v->nmeta && st == DP_OK; i++)
        if (strcmp(v->meta[i].key, "vector_sha256") != 0) st = dp_tset_set_meta(&c, v->meta[i].key, v->meta[i].value);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st == DP_OK) st = dp_st_serialize(&buf, &len, &c);
    if (st == DP_OK) st = dp_sha256_buf_hex(hex, buf, len);
    dp_free(buf);
    dp_tset_free(&c);
    return st;
}

void cert_traj_out_name(char *buf, size_t len, int k, const char *nm) {
    if (strncmp(nm, "step.", 5) == 0) snprintf(buf, len, "step.%d.%s", k, nm + 5);
    else snprintf(buf, len, "step.%d.%s", k, nm);
}

dp_status cert_traj_steps(int *K, const dp_tensor_set *v) {
    double k = 0;
    if (!conf_meta_double(v, "steps", &k) || k != floor(k) || k < 2 || k > 256)
        return dp_error(DP_ERR_FORMAT, "trajectory vector: steps must be an integer in [2, 256]");
    *K = (int)k;
    return DP_OK;
}
