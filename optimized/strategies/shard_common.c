/* optimized/strategies/shard_common.c — pieces shared by the sharding strategies
 * (docs/zero.md): shard ranges, noise at global positions, the parameter all-gather. */
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

dp_status opt_shard_allgather_params(opt_dpsgd *s) {
    if (s->half_state) return opt_half_params_allgather(s); /* bf16/fp16: the half bytes */
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const int N = s->par.dp;
    size_t es = opt_backend_esize(be);
    void *send = NULL, *recv = NULL;
    dp_status st = opt_mem_alloc(be, &send, es * (size_t)s->chunk, OPT_MEM_COMM);
    if (st == DP_OK) st = opt_mem_alloc(be, &recv, es * (size_t)(s->chunk * N), OPT_MEM_COMM);
    /* send [chunk] = my positions [lo, hi) */
    for (int p = 0; st == DP_OK && p < om->np; p++) {
        int64_t a = s->off[p] > s->lo ? s->off[p] : s->lo, b = s->off[p] + om->numel[p] < s->hi ? s->off[p] + om->numel[p] : s->hi;
        if (a < b)
            st = OPT_CALL(be, copy, opt_dev_at(s, send, a - s->lo), opt_dev_at(s, om->w[p], a - s->off[p]), es * (size_t)(b - a));
    }
    if (st == DP_OK) st = OPT_CALL(be, allgather, s->par.dp_group, recv, send, s->chunk, NULL);
    for (int p = 0; st == DP_OK && p < om->np; p++)
        st = OPT_CALL(be, copy, om->w[p], opt_dev_at(s, recv, s->off[p]), es * (size_t)om->numel[p]);
    opt_mem_free(be, send);
    opt_mem_free(be, recv);
    return st;
}

/* host[0..total) = the positions of a device buffer whose element 0 is the global
 * position dev_lo and whose partition [lo, hi) is valid on each rank (replicated: the
 * whole buffer, dev_lo = 0). */
static dp_status gather_positions(opt_dpsgd *s, double *host, const void *dev, int64_t dev_lo) {
    opt_backend *be = s->be;
    if (!s->shard->shard_states) return OPT_CALL(be, download_f64, host, dev, s->total);
    size_t es = opt_backend_esize(be);
    const int N = s->par.dp;
    void *recv = NULL, *send = NULL;
    dp_status st = opt_mem_alloc(be, &recv, es * (size_t)(s->chunk * N), OPT_MEM_COMM);
    if (st == DP_OK) st = opt_mem_alloc(be, &send, es * (size_t)s->chunk, OPT_MEM_COMM);
    if (st == DP_OK) st = OPT_CALL(be, copy, send, (const char *)dev + es * (size_t)(s->lo - dev_lo), es * (size_t)(s->hi - s->lo));
    if (st == DP_OK) st = OPT_CALL(be, allgather, s->par.dp_group, recv, send, s->chunk, NULL);
    if (st == DP_OK) st = OPT_CALL(be, download_f64, host, recv, s->total);
    opt_mem_free(be, recv);
    opt_mem_free(be, send);
    return st;
}

/* The optimizer on the parameter positions of partition `owner` (s->hooks; correct: this
 * rank's [lo, hi)) with the private gradient and states of [lo, hi): elementwise, so
 * the same bits as one call per parameter. */
static dp_status update_partition(opt_dpsgd *s) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const dp_dpsgd_config *c = &s->cfg;
    int64_t tlo = s->lo, thi = s->hi;
    if (s->shard->shard_states) opt_shard_range(&tlo, &thi, s->total, s->chunk, s->hooks->update_owner(s));
    if (thi - tlo > s->hi - s->lo) thi = tlo + (s->hi - s->lo);
    for (int p = 0; p < om->np; p++) {
        int64_t a = s->off[p] > tlo ? s->off[p] : tlo, e = s->off[p] + om->numel[p] < thi ? s->off[p] + om->numel[p] : thi;
        if (a >= e) continue;
        void *g = opt_dev_at(s, s->pgrad, a - tlo), *m1 = opt_dev_at(s, s->m1, a - tlo);
        /* mixed precision: the optimizer runs on the f32 master weights, then the half
         * parameters are re-derived from them */
        void *wu = s->master ? opt_dev_at(s, s->master, a - tlo) : opt_dev_at(s, om->w[p], a - s->off[p]);
        if (c->opt == DP_OPT_SGD)
            DP_TRY(OPT_CALL(be, sgd_momentum, wu, m1, g, c->lr, c->momentum, 0.0, s->t, e - a));
        else
            DP_TRY(OPT_CALL(be, adamw, wu, m1, opt_dev_at(s, s->m2, a - tlo), g, c->lr, c->beta1, c->beta2, c->adam_eps,
                            c->weight_decay, s->t, e - a));
        if (s->master) DP_TRY(opt_master_bug(s, wu, e - a));
        if (s->master) DP_TRY(opt_half_params_store(s, p, a - s->off[p], wu, e - a));
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

dp_status opt_master_bug(opt_dpsgd *s, void *master_at, int64_t n) {
    if (!s->hooks->master_half) return DP_OK;
    /* BUG (test-only): the master weights lose what the half type cannot hold */
    return opt_prec_round_dev(s->be, s->om.prec, master_at, n, NULL);
}

dp_status opt_master_store(opt_dpsgd *s, void *w, void *master_at, int64_t n) {
    opt_backend *be = s->be;
    DP_TRY(opt_master_bug(s, master_at, n));
    DP_TRY(OPT_CALL(be, copy, w, master_at, opt_backend_esize(be) * (size_t)n));
    return opt_prec_round_dev(be, s->om.prec, w, n, NULL);
}

dp_status opt_shard_range_update(opt_dpsgd *s, double div) {
    opt_backend *be = s->be;
    int64_t nown = s->hi - s->lo;
    DP_TRY(OPT_CALL(be, add, s->pgrad, opt_dev_at(s, s->flat, s->lo), opt_dev_at(s, s->flat, s->zoff + s->lo - s->zlo), nown));
    DP_TRY(OPT_CALL(be, div_scalar, s->pgrad, s->pgrad, div, nown));
    DP_TRY(update_partition(s));
    if (!s->shard->shard_states || s->hooks->skip_param_sync) return DP_OK;
    return opt_shard_allgather_params(s);
}

dp_status opt_shard_range_gather_sums(opt_dpsgd *s, double *hS) {
    DP_TRY(gather_positions(s, hS, s->flat, 0));
    return gather_positions(s, hS + s->total, opt_dev_at(s, s->flat, s->zoff), s->zlo);
}

dp_status opt_shard_range_gather_pgrad(opt_dpsgd *s, double *hp) { return gather_positions(s, hp, s->pgrad, s->lo); }

dp_status opt_shard_range_setup(opt_dpsgd *s) { return opt_master_setup_range(s); }
void opt_shard_range_teardown(opt_dpsgd *s) { opt_half_params_teardown(s); }
