/* conformance/certify/vectors.c — the test vectors of `dpcert vectors` and `dpcert certify`
 * (docs/certification.md "Vectors"): one safetensors file per vector holding the model
 * (params.<name>), the batch, and the declared configuration in __metadata__, with a
 * vector_sha256. Everything is derived from public seeds: nothing secret is in a vector. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "common/alloc.h"
#include "common/hash.h"
#include "common/safetensors.h"
#include "conformance/certify/certify.h"
#include "conformance/certify/certify_int.h"
#include "reference/dpzo.h"

enum { SP_NONE = 0, SP_ADVERSARIAL, SP_NONFINITE, SP_NEAR, SP_CONFIDENT };

/* X(name, suites, kind, model, B, clipping, clip_fn, special, sigma, nz) — model: "mlp" (in 16,
 * hidden 32,32, classes 10), "lin" (the mlp without hidden layers: gradient norm linear in
 * the input), "llama" (the default tiny llama with T = 8). Sampling vectors: B = N, nz = K (the
 * steps), q of the define below: sized so that every sampling test's acceptance region is
 * non-vacuous and a rate 1.1 q is caught (docs/certification.md "Sampling"). DP-ZO vectors:
 * nz = n, the directions per step. Trajectory vectors: B per step, nz = K steps; a trajectory
 * without a clipping style is a DP-ZO one (CERT_TRAJ_DPZO_N directions per step). Group
 * clipping ("group"): one group per layer (weight and bias), each threshold the median of its
 * group norms over the batch. New vectors go last: a vector's public seed is its row. */
#define CERT_VECTORS(X)                                                                       \
    X("step-mlp-flat-abadi", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 32, "flat", "abadi", SP_NONE, 1.0, 0) \
    X("step-mlp-perlayer-abadi", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 32, "per-layer", "abadi", SP_NONE, 1.0, 0) \
    X("step-mlp-flat-automatic", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 32, "flat", "automatic", SP_NONE, 0.8, 0) \
    X("step-mlp-batch1", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 1, "flat", "abadi", SP_NONE, 1.0, 0)     \
    X("step-mlp-empty", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 0, "flat", "abadi", SP_NONE, 1.0, 0)      \
    X("step-lin-adversarial", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "lin", 16, "flat", "abadi", SP_ADVERSARIAL, 1.0, 0) \
    X("step-mlp-nonfinite", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 16, "flat", "abadi", SP_NONFINITE, 1.0, 0) \
    X("step-mlp-near-threshold", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 16, "flat", "abadi", SP_NEAR, 1.0, 0) \
    X("step-mlp-confident", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 24, "flat", "abadi", SP_CONFIDENT, 1.2, 0) \
    X("step-llama-flat-abadi", CERT_S_CERT, CERT_VK_STEP, "llama", 8, "flat", "abadi", SP_NONE, 1.0, 0)  \
    X("step-llama-perlayer-abadi", CERT_S_CERT, CERT_VK_STEP, "llama", 8, "per-layer", "abadi", SP_NONE, 1.0, 0) \
    X("traj-mlp", CERT_S_CI | CERT_S_CERT, CERT_VK_TRAJ, "mlp", 32, "flat", "abadi", SP_NONE, 1.0, 16)         \
    X("dpzo-mlp", CERT_S_CI | CERT_S_CERT, CERT_VK_DPZO, "mlp", 32, "", "", SP_NONE, 1.0, 256)                 \
    X("dpzo-mlp-nonfinite", CERT_S_CI | CERT_S_CERT, CERT_VK_DPZO, "mlp", 16, "", "", SP_NONFINITE, 0.8, 64)     \
    X("dpzo-llama", CERT_S_CERT, CERT_VK_DPZO, "llama", 4, "", "", SP_NONE, 1.0, 16)                       \
    X("sampling-ci", CERT_S_CI, CERT_VK_SAMPLING, "", 400, "", "", SP_NONE, 0, 250)                        \
    X("sampling-certify", CERT_S_CERT, CERT_VK_SAMPLING, "", 800, "", "", SP_NONE, 0, 300)                \
    X("step-mlp-group-abadi", CERT_S_CI | CERT_S_CERT, CERT_VK_STEP, "mlp", 32, "group", "abadi", SP_NONE, 1.0, 0) \
    X("dpzo-traj-lin", CERT_S_CI | CERT_S_CERT, CERT_VK_TRAJ, "lin", 8, "", "", SP_NONE, 1.0, 12)

static const cert_vec_spec g_specs[] = {
#define X(n, s, k, m, b, cl, fn, sp, sg, nz) {n, s, k, m, b, cl, fn, sp, sg, nz},
    CERT_VECTORS(X)
#undef X
};

#define CERT_LR 0.5          /* step vectors: the SGD learning rate (params_after) */
#define CERT_DPZO_PHI 1e-3  /* DP-ZO vectors: the perturbation scale phi */
#define CERT_QN 32.0        /* expected batch size declared by every step vector */
#define CERT_SAMPLING_Q 0.1 /* sampling vectors: q */
#define CERT_TRAJ_DPZO_N 256 /* DP-ZO trajectory vectors: directions per step (power against noise reused across steps) */
#define CERT_TRAJ_DPZO_CDIRS 16 /* ... and the reference directions its C (a median over all K B examples) is taken over */
#define CERT_TRAJ_EPOCH 10.0 /* trajectory vectors: steps per epoch (dataset_size = CERT_TRAJ_EPOCH qN) */
#define CERT_AUTO_GAMMA 0.05 /* automatic clipping vectors: gamma (not the 0.01 a plain `automatic` parser default gives) */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static dp_status meta(dp_tensor_set *s, const char *k, const char *fmt, double v) {
    char b[64];
    snprintf(b, sizeof b, fmt, v);
    return dp_tset_set_meta(s, k, b);
}

dp_status cert_vector_finish_write(dp_tensor_set *s, const char *dir, const char *name) {
    char hex[65], path[4096];
    DP_TRY(cert_vector_digest(hex, s));
    DP_TRY(dp_tset_set_meta(s, "vector_sha256", hex));
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    uint8_t *buf = NULL;
    size_t len = 0;
    DP_TRY(dp_st_serialize(&buf, &len, s));
    dp_status st = dp_write_file_atomic("--out", path, buf, len);
    dp_free(buf);
    return st;
}

static dp_status sampling_vector(dp_tensor_set *s, const cert_vec_spec *sp) {
    int64_t shp[1] = {2}, kn[2] = {sp->nz, sp->b};
    DP_TRY(dp_tset_add_raw(s, "sampling.shape", DP_I64, kn, 1, shp));
    DP_TRY(dp_tset_set_meta(s, "kind", "sampling"));
    DP_TRY(meta(s, "dataset_size", "%.0f", (double)sp->b));
    DP_TRY(meta(s, "q", "%.17g", CERT_SAMPLING_Q));
    DP_TRY(meta(s, "steps", "%.0f", (double)sp->nz));
    return DP_OK;
}

/* Model config metadata (the keys cert_vector_config reads). */
static dp_status model_meta(dp_tensor_set *s, const ref_model_config *mc) {
    if (mc->kind == REF_MLP) {
        char h[128] = "";
        size_t k = 0;
        for (int i = 0; i < mc->nhidden; i++) k += (size_t)snprintf(h + k, sizeof h - k, "%s%d", i ? "," : "", mc->hidden[i]);
        DP_TRY(dp_tset_set_meta(s, "model", "mlp"));
        DP_TRY(meta(s, "in", "%.0f", mc->in));
        DP_TRY(dp_tset_set_meta(s, "hidden", h));
        return meta(s, "classes", "%.0f", mc->classes);
    }
    DP_TRY(dp_tset_set_meta(s, "model", "llama"));
    const char *k[] = {"vocab", "dim", "layers", "heads", "ffn", "seq", "tied"};
    const int v[] = {mc->vocab, mc->dim, mc->layers, mc->heads, mc->ffn, mc->seq, mc->tied};
    for (int i = 0; i < 7; i++) DP_TRY(meta(s, k[i], "%.0f", v[i]));
    DP_TRY(meta(s, "rope_theta", "%.17g", mc->rope_theta));
    return meta(s, "norm_eps", "%.17g", mc->norm_eps);
}

/* The model (params.*) and the batch of a step or DP-ZO vector, from the public seed. */
static dp_status model_and_batch(dp_tensor_set *s, ref_model_config *mcp, const cert_vec_spec *sp, uint64_t seed) {
    ref_model_config mc;
    ref_config_default(&mc, strcmp(sp->model, "llama") == 0 ? REF_LLAMA : REF_MLP);
    if (strcmp(sp->model, "lin") == 0) mc.nhidden = 0;
    if (mc.kind == REF_LLAMA) mc.seq = 8;
    ref_model m;
    ref_dataset d;
    DP_TRY(ref_model_init(&m, &mc, (dp_seed){seed}));
    dp_status st = ref_dataset_generate(&d, &mc, sp->b > 0 ? sp->b : 1, (dp_seed){seed});
    if (st != DP_OK) { ref_model_free(&m); return st; }
    if (mc.kind == REF_MLP) { /* spread the norms: a larger output layer */
        ref_param *wo = &m.params[2 * mc.nhidden];
        for (int64_t e = 0; e < wo->numel; e++) wo->data[e] *= 20;
        if (sp->special == SP_CONFIDENT) {
            m.params[2 * mc.nhidden + 1].data[0] = 16; /* class 0 confident: losses ~ 1e-6 */
            for (int64_t i = 0; i < d.n; i += 3) d.y[i] = 0;
        }
        if (sp->special == SP_NONFINITE) d.x[3 * d.in] = NAN; /* example 3: a non-finite loss */
    }
    for (int p = 0; p < m.nparams && st == DP_OK; p++) {
        char nm[160];
        snprintf(nm, sizeof nm, "params.%s", m.params[p].name);
        st = dp_tset_add_f64(s, nm, m.params[p].data, m.params[p].ndim, m.params[p].shape);
    }
    int64_t B = sp->b;
    if (st == DP_OK && mc.kind == REF_MLP) {
        int64_t xs[2] = {B, mc.in}, ys[1] = {B};
        st = dp_tset_add_f64(s, "batch.x", d.x, 2, xs);
        if (st == DP_OK) st = dp_tset_add_raw(s, "batch.y", DP_I32, d.y, 1, ys);
    } else if (st == DP_OK) {
        int64_t ts[2] = {B, mc.seq};
        st = dp_tset_add_raw(s, "batch.tokens", DP_I32, d.tokens, 2, ts);
    }
    ref_model_free(&m);
    ref_dataset_free(&d);
    *mcp = mc;
    return st;
}

/* A DP-ZO vector (docs/certification.md "DP-ZO vectors"): C is the median |loss difference|
 * of the reference's own directions (ref_dpzo_direction, public seed), so about half of the
 * differences are clipped. */
dp_status cert_write_dpzo(dp_tensor_set *s, const cert_vec_spec *sp, uint64_t seed) {
    ref_model_config mc;
    DP_TRY(model_and_batch(s, &mc, sp, seed));
    DP_TRY(dp_tset_set_meta(s, "format", CERT_VECTOR_FORMAT));
    DP_TRY(dp_tset_set_meta(s, "kind", "dpzo"));
    DP_TRY(dp_tset_set_meta(s, "algorithm", "dpzo"));
    DP_TRY(model_meta(s, &mc));
    DP_TRY(meta(s, "sigma", "%.17g", sp->sigma));
    DP_TRY(meta(s, "phi", "%.17g", CERT_DPZO_PHI));
    DP_TRY(meta(s, "n_spsa", "%.0f", (double)sp->nz));
    DP_TRY(dp_tset_set_meta(s, "noise", "gaussian"));
    DP_TRY(meta(s, "expected_batch_size", "%.17g", CERT_QN));
    ref_model m;
    ref_dataset d;
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    int64_t B = 0;
    double **z = NULL, C = 1.0;
    cert_dpzo_ref r = {0};
    dp_status st = cert_vector_load(&m, &d, &B, &mc, s);
    if (st == DP_OK && !(z = dp_calloc((size_t)m.nparams, sizeof *z))) st = DP_ERR_NOMEM;
    for (int p = 0; st == DP_OK && p < m.nparams; p++) {
        int64_t ne = m.params[p].numel;
        if (!(z[p] = dp_malloc((size_t)(sp->nz * ne) * sizeof **z))) st = DP_ERR_NOMEM;
        for (int j = 0; j < sp->nz && st == DP_OK; j++) st = ref_dpzo_direction(z[p] + j * ne, (dp_seed){seed}, 1, p, j, ne);
    }
    if (st == DP_OK) st = cert_dpzo_reference(&r, &m, &d, z, sp->nz, CERT_DPZO_PHI, INFINITY);
    int64_t k = 0;
    for (int64_t i = 0; st == DP_OK && i < (int64_t)sp->nz * B; i++) /* |d| of the kept pairs */
        if (isfinite(r.lp[i] - r.lm[i])) r.dc[k++] = fabs(r.lp[i] - r.lm[i]);
    if (st == DP_OK && k) {
        qsort(r.dc, (size_t)k, sizeof *r.dc, cmp_double);
        C = r.dc[k / 2];
    }
    cert_dpzo_ref_free(&r);
    for (int p = 0; z && p < m.nparams; p++) dp_free(z[p]);
    dp_free(z);
    ref_model_free(&m);
    ref_dataset_free(&d);
    if (st == DP_OK) st = meta(s, "clip", "%.17g", C);
    return st;
}

/* Group clipping (docs/certification.md "Vectors"): metadata `groups`, the spec of
 * docs/dpsgd.md "Clipping groups" with one group per layer of the mlp ("layers.i" =
 * layers.i.weight and layers.i.bias). r == NULL: the draft (every threshold 1); else each
 * threshold is the median of its group's finite norms over the batch (r's B examples), so
 * about half of every group is clipped, with thresholds that differ from group to group. */
static dp_status group_spec(dp_tensor_set *s, const ref_model_config *mc, const cert_vecref *r, int64_t B) {
    char spec[DP_MAX_SPEC];
    size_t len = 0;
    const int L = mc->nhidden + 1;
    if (mc->kind != REF_MLP) return dp_error(DP_ERR_INTERNAL, "group clipping vectors: mlp only");
    double *nv = dp_malloc((size_t)(B > 0 ? B : 1) * sizeof *nv);
    if (!nv) return DP_ERR_NOMEM;
    for (int l = 0; l < L && len < sizeof spec; l++) {
        double R = 1.0;
        int64_t k = 0;
        for (int64_t i = 0; r && l < r->G && i < B; i++)
            if (isfinite(r->gnorm[i * r->G + l])) nv[k++] = r->gnorm[i * r->G + l];
        if (k) {
            qsort(nv, (size_t)k, sizeof *nv, cmp_double);
            R = nv[k / 2];
        }
        len += (size_t)snprintf(spec + len, sizeof spec - len, "%slayers.%d=layers.%d.*:%.17g", l ? ";" : "", l, l, R);
    }
    dp_free(nv);
    if (len >= sizeof spec) return dp_error(DP_ERR_INTERNAL, "group clipping spec too long");
    return dp_tset_set_meta(s, "groups", spec);
}

/* The draft vector (clip not final), its reference norms, then the final clip and specials. */
dp_status cert_write_step(dp_tensor_set *s, const cert_vec_spec *sp, uint64_t seed) {
    ref_model_config mc;
    int64_t B = sp->b;
    dp_status st = model_and_batch(s, &mc, sp, seed);
    if (st == DP_OK) st = dp_tset_set_meta(s, "format", CERT_VECTOR_FORMAT);
    if (st == DP_OK) st = dp_tset_set_meta(s, "kind", "step");
    if (st == DP_OK) st = dp_tset_set_meta(s, "algorithm", "dpsgd");
    if (st == DP_OK) st = model_meta(s, &mc);
    if (st == DP_OK) st = dp_tset_set_meta(s, "clipping", sp->clipping);
    if (st == DP_OK) st = dp_tset_set_meta(s, "clip_fn", sp->clip_fn);
    if (st == DP_OK && strcmp(sp->clip_fn, "automatic") == 0) st = meta(s, "gamma", "%.15g", CERT_AUTO_GAMMA);
    if (st == DP_OK) st = meta(s, "clip", "%.17g", 1.0);
    if (st == DP_OK && strcmp(sp->clipping, "group") == 0) st = group_spec(s, &mc, NULL, 0); /* draft thresholds */
    if (st == DP_OK) st = meta(s, "sigma", "%.17g", sp->sigma);
    if (st == DP_OK) st = meta(s, "expected_batch_size", "%.17g", CERT_QN);
    if (st == DP_OK) st = dp_tset_set_meta(s, "optimizer", "sgd"); /* params_after = params - lr G may replace G */
    if (st == DP_OK) st = meta(s, "lr", "%.17g", CERT_LR);
    if (st != DP_OK) return st;
    /* C from the reference norms: the median finite norm (half the batch clipped), or just
       above example 0's norm (near-threshold); the adversarial example is scaled to 1e6 C. */
    cert_vecref r;
    conf_clip_conv abadi = {0, 0};
    if (B > 0) {
        DP_TRY(cert_vecref_compute(&r, s, &abadi));
        double *nv = dp_malloc((size_t)B * sizeof *nv);
        int64_t k = 0;
        if (!nv) { cert_vecref_free(&r); return DP_ERR_NOMEM; }
        for (int64_t i = 0; i < B; i++)
            if (isfinite(r.norm[i])) nv[k++] = r.norm[i];
        double C = 1.0;
        if (k) {
            for (int64_t i = 1; i < k; i++) /* insertion sort: B is small */
                for (int64_t j = i; j > 0 && nv[j - 1] > nv[j]; j--) { double t = nv[j]; nv[j] = nv[j - 1]; nv[j - 1] = t; }
            C = nv[k / 2];
            if (sp->special == SP_NEAR) C = r.norm[0] * (1 + ldexp(1.0, -40));
            if (sp->special == SP_ADVERSARIAL) {
                dp_tensor *x = NULL;
                for (size_t i = 0; i < s->n; i++)
                    if (strcmp(s->items[i].name, "batch.x") == 0) x = &s->items[i].t;
                for (int64_t j = 0; x && j < mc.in; j++) ((double *)x->data)[j] *= 1e6 * C / r.norm[0];
            }
        }
        dp_free(nv);
        dp_status sg = strcmp(sp->clipping, "group") == 0 ? group_spec(s, &mc, &r, B) : DP_OK;
        cert_vecref_free(&r);
        DP_TRY(sg);
        DP_TRY(meta(s, "clip", "%.17g", C));
    }
    /* groups and their thresholds, as the reference resolves them */
    ref_model_config mc2;
    ref_dpsgd_config c;
    double qn;
    DP_TRY(cert_vector_config(&mc2, &c, &qn, s));
    ref_model m2;
    DP_TRY(ref_model_init(&m2, &mc2, (dp_seed){seed}));
    ref_clip_groups g;
    st = ref_clip_groups_make(&g, &c, &m2);
    if (st == DP_OK) {
        char buf[4096];
        size_t len = 0;
        for (int k = 0; k < g.ngroups && len < sizeof buf; k++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s:%.17g", k ? ";" : "", g.name[k], g.thresh[k]);
        st = dp_tset_set_meta(s, "group_thresholds", buf);
        len = 0;
        for (int p = 0; p < m2.nparams && len < sizeof buf && st == DP_OK; p++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s:%s", p ? ";" : "", m2.params[p].name, g.name[g.group_of[p]]);
        if (st == DP_OK) st = dp_tset_set_meta(s, "param_groups", buf);
        if (st == DP_OK) st = meta(s, "c_total", "%.17g", g.c_total);
        ref_clip_groups_free(&g);
    }
    ref_model_free(&m2);
    return st;
}

/* A trajectory vector (docs/certification.md "Trajectory vectors"): K consecutive steps of one
 * training run at fixed parameters (optimizer none), batch k = examples k B .. (k + 1) B - 1 of
 * K B generated ones, C the median norm (DP-SGD; DP-ZO: the median |loss difference|) over all
 * of them; `dataset_size` = CERT_TRAJ_EPOCH qN, so an epoch is 10 steps (a generator reseeded
 * each epoch repeats within K > 10 steps). A DP-SGD trajectory has a clipping style; a DP-ZO
 * one (no clipping style) has the metadata of a DP-ZO vector with CERT_TRAJ_DPZO_N directions
 * (its C from CERT_TRAJ_DPZO_CDIRS directions: generating a vector stays cheap). */
dp_status cert_write_traj(dp_tensor_set *s, const cert_vec_spec *sp, uint64_t seed) {
    cert_vec_spec big = *sp;
    big.b = sp->b * sp->nz;
    const int zo = sp->clipping[0] == '\0';
    if (zo) big.nz = CERT_TRAJ_DPZO_CDIRS;
    dp_tensor_set all;
    dp_tset_init(&all);
    dp_status st = zo ? cert_write_dpzo(&all, &big, seed) : cert_write_step(&all, &big, seed);
    for (size_t i = 0; i < all.n && st == DP_OK; i++) {
        const char *nm = all.items[i].name;
        const dp_tensor *t = &all.items[i].t;
        if (strncmp(nm, "params.", 7) == 0) { st = dp_tset_add(s, nm, t); continue; }
        if (strncmp(nm, "batch.", 6) != 0) continue;
        size_t row = dp_tensor_nbytes(t) / (size_t)(t->shape[0] ? t->shape[0] : 1);
        for (int k = 0; k < sp->nz && st == DP_OK; k++) { /* rows k B .. (k + 1) B - 1 */
            char bn[64];
            snprintf(bn, sizeof bn, "batch.%d.%s", k, nm + 6);
            int64_t shp[DP_MAX_DIMS];
            for (int d = 0; d < t->ndim; d++) shp[d] = t->shape[d];
            shp[0] = sp->b;
            st = dp_tset_add_raw(s, bn, t->dtype, (const uint8_t *)t->data + (size_t)k * (size_t)sp->b * row, t->ndim, shp);
        }
    }
    for (size_t i = 0; i < all.nmeta && st == DP_OK; i++) {
        const char *k = all.meta[i].key;
        if (strcmp(k, "kind") == 0) st = dp_tset_set_meta(s, "kind", "trajectory");
        else if (strcmp(k, "optimizer") == 0) st = dp_tset_set_meta(s, "optimizer", "none");
        else if (strcmp(k, "lr") != 0) st = dp_tset_set_meta(s, k, all.meta[i].value);
    }
    if (st == DP_OK) st = meta(s, "steps", "%.0f", (double)sp->nz);
    if (st == DP_OK && zo) st = meta(s, "n_spsa", "%.0f", (double)CERT_TRAJ_DPZO_N);
    if (st == DP_OK) st = meta(s, "dataset_size", "%.0f", CERT_TRAJ_EPOCH * CERT_QN);
    dp_tset_free(&all);
    return st;
}

/* A sampling vector: the format first (the other kinds set it in model_and_batch). */
dp_status cert_write_sampling(dp_tensor_set *s, const cert_vec_spec *sp, uint64_t seed) {
    (void)seed; /* nothing drawn: the vector holds the sampling's shape, N, q and K */
    DP_TRY(dp_tset_set_meta(s, "format", CERT_VECTOR_FORMAT));
    return sampling_vector(s, sp);
}

const cert_vec_spec *cert_vec_specs(size_t *n) {
    *n = sizeof g_specs / sizeof g_specs[0];
    return g_specs;
}
