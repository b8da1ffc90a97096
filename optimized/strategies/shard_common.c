/* optimized/strategies/shard_common.c — pieces shared by the sharding strategies
 * (docs/zero.md): shard ranges of the layout's vector, noise at global positions through
 * the layout's runs, the range update and gathers, the master weights. */
#include <string.h>

#include "optimized/dpsgd.h"

#include "optimized/ledger.h"
#include "optimized/shard.h"

void *opt_dev_at(const opt_dpsgd *s, void *base, int64_t elem) {
    return (char *)base + (size_t)elem * opt_backend_esize(s->be);
}

void opt_shard_range(int64_t *lo, int64_t *hi, int64_t total, int64_t chunk, int r) {
    *lo = chunk * r < total ? chunk * r : total;
    *hi = chunk * (r + 1) < total ? chunk * (r + 1) : total;
}

dp_status opt_shard_noise(opt_dpsgd *s, int64_t step, int64_t lo, int64_t hi) {
    double std = s->cfg.sigma * s->groups.c_total;
    if (!(s->cfg.sigma > 0) || hi <= lo) return DP_OK;
    return s->hooks->noise(s, opt_dev_at(s, s->flat, s->zoff), s->zlo, step, lo, hi, std);
}

dp_status opt_noise_runs(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi, double std) {
    for (int p = 0; p < s->om.np; p++) {
        const int64_t a = s->voff[p] > lo ? s->voff[p] : lo;
        const int64_t b = s->voff[p] + s->vlen[p] < hi ? s->voff[p] + s->vlen[p] : hi;
        int64_t u, e, n;
        for (int64_t k = 0; a < b && s->layout->run(s, p, a - s->voff[p], b - s->voff[p], k, &u, &e, &n); k++) {
            const int64_t x = s->voff[p] + u; /* the run's vector position */
            DP_TRY(OPT_CALL(s->be, noise_add, opt_dev_at(s, z, x - zlo), s->cfg.key, (uint32_t)step, (uint32_t)p, std,
                            (uint64_t)s->hooks->noise_elem(p, x, u, e, lo), n));
        }
    }
    return DP_OK;
}

dp_status opt_shard_reduce_scatter_sums(opt_dpsgd *s) {
    opt_backend *be = s->be;
    size_t es = opt_backend_esize(be);
    void *part = NULL;
    dp_status st = opt_mem_alloc(be, &part, es * (size_t)s->chunk, OPT_MEM_COMM);
    if (st == DP_OK) st = OPT_CALL(be, reduce_scatter_sum, s->par.dp_group, part, s->flat, s->chunk, NULL);
    if (st == DP_OK) st = OPT_CALL(be, copy, opt_dev_at(s, s->flat, s->lo), part, es * (size_t)(s->hi - s->lo));
    opt_mem_free(be, part);
    return st;
}

/* The optimizer on the vector positions of partition `owner` (s->hooks; correct: this
 * rank's [lo, hi)) with the private gradient and states of [lo, hi): elementwise, one call
 * per run of a parameter's segment (the layout's), so the same bits as one call per
 * parameter. */
static dp_status update_partition(opt_dpsgd *s) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const dp_dpsgd_config *c = &s->cfg;
    int64_t tlo = s->lo, thi = s->hi;
    if (s->shard->shard_states) opt_shard_range(&tlo, &thi, s->nvec, s->chunk, s->hooks->update_owner(s));
    if (thi - tlo > s->hi - s->lo) thi = tlo + (s->hi - s->lo);
    for (int p = 0; p < om->np; p++) {
        const int64_t a = s->voff[p] > tlo ? s->voff[p] : tlo;
        const int64_t b = s->voff[p] + s->vlen[p] < thi ? s->voff[p] + s->vlen[p] : thi;
        int64_t u, e, n;
        for (int64_t k = 0; a < b && s->layout->run(s, p, a - s->voff[p], b - s->voff[p], k, &u, &e, &n); k++) {
            const int64_t x = s->voff[p] + u - tlo; /* the run's position in pgrad, m1, m2 (and master) */
            void *g = opt_dev_at(s, s->pgrad, x), *m1 = opt_dev_at(s, s->m1, x);
            /* mixed precision: the optimizer runs on the f32 master weights, then the half
             * parameters are re-derived from them */
            void *wu = s->master ? opt_dev_at(s, s->master, x) : opt_dev_at(s, om->w[p], e);
            if (c->opt == DP_OPT_SGD)
                DP_TRY(OPT_CALL(be, sgd_momentum, wu, m1, g, c->lr, c->momentum, 0.0, s->t, n));
            else
                DP_TRY(OPT_CALL(be, adamw, wu, m1, opt_dev_at(s, s->m2, x), g, c->lr, c->beta1, c->beta2, c->adam_eps,
                                c->weight_decay, s->t, n));
            if (s->master) DP_TRY(s->hooks->master_store(s, wu, n));
            if (s->master) DP_TRY(opt_half_params_store(s, p, e, wu, n));
        }
    }
    return DP_OK;
}

dp_status opt_master_setup_range(opt_dpsgd *s) {
    opt_model *om = &s->om;
    if (!opt_prec_is_half(om->prec)) return DP_OK;
    opt_backend *be = s->be;
    size_t es = opt_backend_esize(be);
    DP_TRY(opt_mem_alloc(be, &s->master, es * (size_t)(s->chunk > 0 ? s->chunk : 1), OPT_MEM_MASTER));
    for (int p = 0; p < om->np; p++) {
        int64_t a = s->off[p] > s->lo ? s->off[p] : s->lo, b = s->off[p] + om->numel[p] < s->hi ? s->off[p] + om->numel[p] : s->hi;
        if (a < b)
            DP_TRY(OPT_CALL(be, copy, opt_dev_at(s, s->master, a - s->lo), opt_dev_at(s, om->w[p], a - s->off[p]),
                            es * (size_t)(b - a)));
    }
    return opt_half_params_setup(s); /* the parameters become half tensors (half_params.c) */
}

dp_status opt_master_setup_packed(opt_dpsgd *s, void *wpart, int64_t n) {
    if (!opt_prec_is_half(s->om.prec)) return DP_OK;
    opt_backend *be = s->be;
    size_t es = opt_backend_esize(be);
    DP_TRY(opt_mem_alloc(be, &s->master, es * (size_t)(n > 0 ? n : 1), OPT_MEM_MASTER));
    DP_TRY(OPT_CALL(be, copy, s->master, wpart, es * (size_t)n));
    return opt_prec_round_dev(be, s->om.prec, wpart, n, NULL);
}

dp_status opt_master_store(opt_dpsgd *s, void *w, void *master_at, int64_t n) {
    opt_backend *be = s->be;
    DP_TRY(s->hooks->master_store(s, master_at, n));
    DP_TRY(OPT_CALL(be, copy, w, master_at, opt_backend_esize(be) * (size_t)n));
    return opt_prec_round_dev(be, s->om.prec, w, n, NULL);
}

/* The parameter sync of the range shardings: every DP rank's range, then (CP) the CP
 * group's slices; replicated: the CP group's slices only. */
static dp_status range_sync(opt_dpsgd *s) {
    if (s->shard->shard_states) DP_TRY(s->layout->sync_ranges(s));
    return s->layout->sync_params(s);
}

dp_status opt_shard_range_update(opt_dpsgd *s, double div) {
    opt_backend *be = s->be;
    int64_t nown = s->hi - s->lo;
    DP_TRY(OPT_CALL(be, add, s->pgrad, opt_dev_at(s, s->flat, s->lo), opt_dev_at(s, s->flat, s->zoff + s->lo - s->zlo), nown));
    DP_TRY(OPT_CALL(be, div_scalar, s->pgrad, s->pgrad, div, nown));
    DP_TRY(update_partition(s));
    return s->hooks->param_sync(s, range_sync);
}

/* the vector dev with element 0 at position dev_lo: by DP ranges, or whole */
static dp_status gather_vector(opt_dpsgd *s, double *host, const void *dev, int64_t dev_lo, int ranged) {
    return ranged ? s->layout->ranges_to_host(s, host, dev, dev_lo) : s->layout->to_host(s, host, dev);
}

dp_status opt_shard_range_gather_sums(opt_dpsgd *s, double *hS) {
    DP_TRY(gather_vector(s, hS, s->flat, 0, s->sums_ranged));
    return gather_vector(s, hS + s->total, opt_dev_at(s, s->flat, s->zoff), s->zlo, s->sums_ranged);
}

dp_status opt_shard_range_gather_pgrad(opt_dpsgd *s, double *hp) {
    return gather_vector(s, hp, s->pgrad, s->lo, s->shard->shard_states);
}

dp_status opt_shard_range_setup(opt_dpsgd *s) { return opt_master_setup_range(s); }
void opt_shard_range_teardown(opt_dpsgd *s) { opt_half_params_teardown(s); }
