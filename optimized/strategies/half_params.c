/* optimized/strategies/half_params.c — the half parameters of --precision bf16|fp16 under
 * the range shardings (replicated, zero1, zero2; docs/precision.md section 3): every
 * parameter tensor is stored as 2-byte half elements (tag params); a layer's f32 working
 * copy (tag workspace) is decoded from them when the passes acquire it and freed when they
 * release it (a local, non-collective parameter fetch). The optimizer writes the f32
 * master weights, from which the rank's partition of the half parameters is re-encoded;
 * zero1/zero2 then all-gather the half bytes. */
#include <stdlib.h>
#include <string.h>

#include "optimized/ledger.h"
#include "common/alloc.h"
#include "optimized/shard.h"

typedef struct {
    opt_dpsgd *s;
    void **wh; /* [np] device half tensors, 2 bytes per element */
    opt_param_fetch fetch;
} half_state;

static dp_status hp_acquire(void *ctx, opt_model *om, int p, int prefetch) {
    half_state *h = ctx;
    if (om->w[p] || prefetch) return DP_OK;
    opt_backend *be = h->s->be;
    DP_TRY(opt_mem_alloc(be, &om->w[p], opt_backend_esize(be) * (size_t)om->numel[p], OPT_MEM_WORKSPACE));
    return opt_prec_from_half(be, om->prec, om->w[p], h->wh[p], om->numel[p]);
}

static dp_status hp_release(void *ctx, opt_model *om, int p) {
    half_state *h = ctx;
    opt_mem_free(h->s->be, om->w[p]);
    om->w[p] = NULL;
    return DP_OK;
}

void opt_half_params_teardown(opt_dpsgd *s) {
    half_state *h = s->half_state;
    if (!h) return;
    for (int p = 0; h->wh && p < s->om.np; p++) opt_mem_free(s->be, h->wh[p]);
    if (s->om.fetch == &h->fetch) s->om.fetch = NULL;
    dp_free(h->wh);
    dp_free(h);
    s->half_state = NULL;
}

dp_status opt_half_params_setup(opt_dpsgd *s) {
    opt_model *om = &s->om;
    opt_backend *be = s->be;
    half_state *h = dp_calloc(1, sizeof *h);
    if (h) h->wh = dp_calloc((size_t)om->np, sizeof(void *));
    if (!h || !h->wh) { dp_free(h); return dp_error(DP_ERR_NOMEM, "engine: out of memory (half parameters)"); }
    h->s = s;
    s->half_state = h;
    for (int p = 0; p < om->np; p++) {
        DP_TRY(opt_mem_alloc(be, &h->wh[p], 2 * (size_t)om->numel[p], OPT_MEM_PARAMS));
        DP_TRY(opt_prec_to_half(be, om->prec, h->wh[p], om->w[p], om->numel[p]));
        opt_mem_free(be, om->w[p]);
        om->w[p] = NULL;
    }
    h->fetch = (opt_param_fetch){h, hp_acquire, hp_release, 0};
    om->fetch = &h->fetch;
    return DP_OK;
}

dp_status opt_half_params_store(opt_dpsgd *s, int p, int64_t e0, const void *master_at, int64_t n) {
    half_state *h = s->half_state;
    if (!h) return dp_error(DP_ERR_INTERNAL, "engine: half parameters not set up");
    return opt_prec_to_half(s->be, s->om.prec, (char *)h->wh[p] + 2 * (size_t)e0, master_at, n);
}

/* Every rank's partition [lo, hi) of the half parameters to every rank: the partitions
 * are contiguous in rank order, so the rank-order concatenation is the flat positions
 * [0, total). Half precision runs without --cp, so the DP group is the world (the group
 * allgatherv_bytes runs on). */
dp_status opt_half_params_allgather(opt_dpsgd *s) {
    half_state *h = s->half_state;
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    if (s->par.cp > 1 || s->par.dp != be->comm.size)
        return dp_error(DP_ERR_INTERNAL, "engine: half parameter gather needs the DP group to be the world");
    uint16_t *mine = dp_malloc(2 * (size_t)(s->hi - s->lo + 1));
    if (!mine) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    dp_status st = DP_OK;
    for (int p = 0; st == DP_OK && p < om->np; p++) {
        int64_t a = s->off[p] > s->lo ? s->off[p] : s->lo, b = s->off[p] + om->numel[p] < s->hi ? s->off[p] + om->numel[p] : s->hi;
        if (a < b) st = OPT_CALL(be, to_host, mine + (a - s->lo), (const char *)h->wh[p] + 2 * (size_t)(a - s->off[p]),
                                 2 * (size_t)(b - a));
    }
    void *all = NULL;
    size_t len = 0;
    if (st == DP_OK) st = OPT_CALL(be, allgatherv_bytes, &all, &len, mine, 2 * (size_t)(s->hi - s->lo));
    if (st == DP_OK && len != 2 * (size_t)s->total)
        st = dp_error(DP_ERR_INTERNAL, "engine: half parameter gather returned %zu bytes, expected %lld", len,
                      (long long)(2 * s->total));
    for (int p = 0; st == DP_OK && p < om->np; p++)
        st = OPT_CALL(be, to_device, h->wh[p], (const char *)all + 2 * (size_t)s->off[p], 2 * (size_t)om->numel[p]);
    dp_free(all);
    dp_free(mine);
    return st;
}
