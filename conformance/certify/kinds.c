/* conformance/certify/kinds.c — the vector kinds as a table {kind, write, eval, finish}
 * (CERT_VECTOR_KINDS in certify_int.h; docs/certification.md "Vectors"): writing a suite
 * (each vector by its kind's writer), and each kind's evaluation of one vector and its pooled
 * tests after the last. The driver (certify.c) looks a vector's kind up here instead of
 * comparing strings. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fsutil.h"
#include "conformance/certify/certify.h"
#include "conformance/certify/certify_int.h"

const cert_vector_kind cert_vector_kinds[CERT_VK_COUNT] = {
#define CERT_VK_ROW_(id, name, w, e, f) [CERT_VK_##id] = {name, w, e, f},
    CERT_VECTOR_KINDS(CERT_VK_ROW_)
#undef CERT_VK_ROW_
};

const cert_vector_kind *cert_vector_kind_of(const char *kind) {
    for (int i = 0; kind && i < CERT_VK_COUNT; i++)
        if (strcmp(kind, cert_vector_kinds[i].kind) == 0) return &cert_vector_kinds[i];
    return &cert_vector_kinds[CERT_VK_STEP];
}

/* ---- evaluation of one vector ---- */
dp_status cert_kind_sampling_eval(cert_eval_ctx *c, const char *name, const dp_tensor_set *v) {
    return cert_eval_sampling(c->r, c->bundle, name, v, c->o);
}

dp_status cert_kind_dpzo_eval(cert_eval_ctx *c, const char *name, const dp_tensor_set *v) {
    return cert_eval_dpzo(c->r, &c->dz, c->bundle, name, v, c->o);
}

dp_status cert_kind_traj_eval(cert_eval_ctx *c, const char *name, const dp_tensor_set *v) {
    const char *alg = dp_tset_meta(v, "algorithm");
    if (alg && strcmp(alg, "dpzo") == 0) /* a DP-ZO trajectory: the DP-ZO pools */
        return cert_eval_traj_dpzo(c->r, &c->dz, c->bundle, name, v, c->o);
    c->nstep++;
    return cert_eval_traj(c->r, &c->all, &c->rep, &c->fams, c->bundle, name, v, c->o);
}

static void free_prev(cert_eval_ctx *c) {
    if (c->prev) { for (int64_t k = 0; k < c->o->repeats; k++) dp_free(c->prev[k]); dp_free(c->prev); }
    c->prev = NULL;
}

dp_status cert_kind_step_eval(cert_eval_ctx *c, const char *name, const dp_tensor_set *v) {
    double **zs = NULL;
    int64_t zn = 0;
    c->nstep++;
    dp_status st = cert_eval_step(c->r, &c->all, &c->coord, &c->rep, &c->fams, &zs, &zn, c->bundle, name, v, c->o);
    /* independence across steps (vectors): repeat k of this vector against repeat k of the previous */
    for (int64_t k = 0; st == DP_OK && zs && c->prev && k < c->o->repeats; k++)
        for (int64_t e = 0; e < zn && e < c->prevn && zs[k] && c->prev[k] && st == DP_OK; e++)
            st = cert_pair_push(&c->across, zs[k][e], c->prev[k][e]);
    free_prev(c);
    c->prev = zs;
    c->prevn = zn;
    return st;
}

/* ---- pooled tests after the last vector ---- */
/* Step and trajectory vectors: the pooled iid N(0, 1) tests (also when no vector of any kind
 * was evaluated: an INCOMPLETE check), the families, the independence tests, and the implied
 * epsilons at the claimed and at the supported noise. */
dp_status cert_kind_step_finish(cert_eval_ctx *c, dp_status st) {
    cert_result *r = c->r;
    free_prev(c);
    if (st == DP_OK && (c->nstep > 0 || !c->dz.vectors)) {
        cert_check k;
        k.n = 0;
        st = cert_push_normal(r, &k, &c->all, NULL, "all step vectors and repeats", c->o->alpha);
        if (k.n > 0) {
            r->noise_n = c->all.n;
            cert_figs_residuals(&r->figs, c->all.z, c->all.n);
            r->sigma_eff_ratio = sqrt(k.statistic);
            /* 1 - 1e-3 interval for the std ratio: invert the variance test's region at 1e-3 */
            cert_std_ratio_interval(&r->ratio_lo, &r->ratio_hi, k.statistic, c->all.n, 1e-3);
        }
        if (st == DP_OK && c->nstep > 0) st = cert_fams_finish(r, &c->fams, c->o->alpha);
        const char *what[3] = {"noise independence across coordinates", "noise independence across repeats",
                               "noise independence across steps"};
        cert_pool *pp[3] = {&c->coord, &c->rep, &c->across};
        for (int j = 0; j < 3 && st == DP_OK; j++)
            st = cert_push_products(r, pp[j], what[j], "all step vectors", c->o->alpha);
    }
    /* the implied epsilons, once, for every report and printout */
    if (st == DP_OK) st = cert_implied_epsilon(&r->eps_claimed, 1.0);
    r->eps_supported = NAN;
    if (st == DP_OK && r->noise_n) st = cert_implied_epsilon(&r->eps_supported, r->ratio_lo);
    return st;
}

dp_status cert_kind_dpzo_finish(cert_eval_ctx *c, dp_status st) {
    cert_result *r = c->r;
    if (st == DP_OK) st = cert_dpzo_finish(r, &c->dz, c->o);
    r->dpzo_eps_supported = NAN;
    if (st == DP_OK && r->dpzo_n) st = cert_implied_epsilon(&r->dpzo_eps_supported, r->dpzo_lo);
    return st;
}

void cert_eval_ctx_free(cert_eval_ctx *c) {
    free_prev(c);
    cert_pool_free(&c->all); cert_pool_free(&c->coord); cert_pool_free(&c->rep); cert_pool_free(&c->across);
    cert_fams_free(&c->fams);
    cert_dpzo_pools_free(&c->dz);
}

/* ---- writing a suite ---- */
dp_status cert_vectors_write(const char *dir, cert_suite suite, char ***names, size_t *n) {
    DP_TRY(dp_mkdir_p("--out", dir));
    int mask = suite == CERT_SUITE_CI ? CERT_S_CI : CERT_S_CERT;
    size_t cnt = 0, ns = 0;
    const cert_vec_spec *specs = cert_vec_specs(&ns);
    char **v = names ? dp_calloc(ns, sizeof *v) : NULL;
    if (names && !v) return DP_ERR_NOMEM;
    dp_status st = DP_OK;
    for (size_t i = 0; i < ns && st == DP_OK; i++) {
        const cert_vec_spec *sp = &specs[i];
        if (!(sp->suites & mask)) continue;
        dp_tensor_set s;
        dp_tset_init(&s);
        st = cert_vector_kinds[sp->kind].write(&s, sp, 1300 + i);
        if (st == DP_OK) st = dp_tset_set_meta(&s, "name", sp->name);
        if (st == DP_OK) st = cert_vector_finish_write(&s, dir, sp->name);
        dp_tset_free(&s);
        if (st == DP_OK && v) {
            size_t l = strlen(sp->name) + 13;
            v[cnt] = dp_malloc(l);
            if (!v[cnt]) st = DP_ERR_NOMEM;
            else snprintf(v[cnt], l, "%s.safetensors", sp->name);
        }
        if (st == DP_OK) cnt++;
        else st = dp_error_context(st, "vector %s", sp->name);
    }
    if (names) { *names = v; *n = cnt; }
    return st;
}
