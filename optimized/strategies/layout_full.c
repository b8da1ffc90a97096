/* optimized/strategies/layout_full.c — the full layout (optimized/shard.h opt_layout): the
 * rank's gradient vector holds every parameter whole, in tensor order (voff = off, vlen =
 * numel, nvec = total); the DP-ZeRO ranges of docs/zero.md cut it anywhere. */
#include <string.h>

#include "optimized/ledger.h"
#include "optimized/clip/clip.h"

static dp_status full_setup(opt_dpsgd *s) {
    s->voff = s->off;
    s->vlen = s->om.numel;
    s->nvec = s->total;
    return DP_OK;
}

static void full_teardown(opt_dpsgd *s) {
    s->voff = s->vlen = NULL;
}

/* a segment is its tensor: one run */
static int full_run(const opt_dpsgd *s, int p, int64_t x0, int64_t x1, int64_t k, int64_t *u, int64_t *e, int64_t *n) {
    (void)s; (void)p;
    if (k > 0 || x1 <= x0) return 0;
    *u = *e = x0;
    *n = x1 - x0;
    return 1;
}

static dp_status full_to_host(opt_dpsgd *s, double *host, const void *dev) {
    return OPT_CALL(s->be, download_f64, host, dev, s->total);
}

/* host[0..total) = the positions of a device buffer whose element 0 is the global
 * position dev_lo and whose partition [lo, hi) is valid on each rank */
static dp_status full_ranges_to_host(opt_dpsgd *s, double *host, const void *dev, int64_t dev_lo) {
    opt_backend *be = s->be;
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

/* Allgather of every rank's [lo, hi) parameter positions over the DP group (bf16/fp16:
 * the half bytes, strategies/half_params.c). */
static dp_status full_sync_ranges(opt_dpsgd *s) {
    if (s->half_state) return opt_half_params_allgather(s);
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

/* every rank holds its parameters whole already */
static dp_status full_sync_params(opt_dpsgd *s) { (void)s; return DP_OK; }

static dp_status full_assemble(opt_dpsgd *s, int p, void *seg, void **w) {
    (void)s; (void)p;
    *w = seg; /* the segment (followed by the gather's padding) is the tensor */
    return DP_OK;
}

static void full_disassemble(opt_dpsgd *s, int p, void *seg, void *w) { (void)s; (void)p; (void)seg; (void)w; }

static dp_status full_vec_to_host(opt_dpsgd *s, double *host, const double *hvec) {
    memcpy(host, hvec, sizeof(double) * (size_t)s->total);
    return DP_OK;
}

const opt_layout opt_layout_full = {"full", full_setup, full_teardown, full_run, full_to_host, full_ranges_to_host,
                                    full_sync_ranges, full_sync_params, full_assemble, full_disassemble,
                                    full_vec_to_host, 1, &opt_source_local};
