/* optimized/strategies/shard_common.c — pieces shared by the sharding strategies
 * (docs/zero.md): shard ranges, noise at global positions, the parameter all-gather. */
#include <string.h>

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

dp_status opt_shard_allgather_params(opt_dpsgd *s) {
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
