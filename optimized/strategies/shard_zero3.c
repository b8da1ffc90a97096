/* optimized/strategies/shard_zero3.c — DP-ZeRO stage 3 (docs/zero.md): also parameters.
 * Partitions are per segment of the layout's vector (optimized/shard.h opt_layout; the
 * full layout: per tensor): segment p of n_p = vlen[p] elements is cut into N chunks of
 * c_p = ceil(n_p / N); DP rank r holds elements [r c_p, min((r + 1) c_p, n_p)) of every
 * segment, packed in parameter order ("packed" layout, C = sum_p c_p elements per rank).
 * A segment is gathered by one equal-count all-gather of c_p elements over the DP group
 * (rank order = segment order), just before the layer that uses it, and the layout makes
 * the tensor of it (full: the segment is the tensor; CP: the CP slices all-gathered over
 * the CP group, docs/longshield.md section 5); it is released right after. The batched
 * passes prefetch the next layer's DP gather (optimized/engine.c, opt_params_use).
 * The clipped sums are packed and reduce-scattered (rank-order sums, as zero2); the noise
 * of the partition is drawn at the global (p, e) positions (the layout's runs). */
#include <stdlib.h>
#include <string.h>

#include "optimized/ledger.h"
#include "common/alloc.h"
#include "optimized/shard.h"

typedef struct {
    opt_dpsgd *s;
    int64_t *c, *poff, *own; /* per tensor: chunk, offset in the packed layout, elements this rank holds */
    void *wshard;            /* [C] this rank's parameters (packed) */
    void *wsrc;              /* [C] what the per-layer gathers read: wshard (the gather-source seam of
                                s->hooks; a test-only bug reads a copy taken before each update) */
    void **buf;              /* per tensor: gathered [N c_p], or NULL */
    opt_async **pending;     /* per tensor: a started gather */
    opt_param_fetch fetch;
} z3_state;

static int64_t piece(int64_t n, int64_t c, int r) { /* elements of rank r's chunk of a tensor */
    int64_t a = c * r;
    return a >= n ? 0 : (n - a < c ? n - a : c);
}

static dp_status z3_acquire(void *ctx, opt_model *om, int p, int prefetch) {
    z3_state *z = ctx;
    opt_dpsgd *s = z->s;
    if (om->w[p]) return DP_OK;
    opt_backend *be = s->be;
    if (!z->buf[p]) {
        DP_TRY(opt_mem_alloc(be, &z->buf[p], opt_backend_esize(be) * (size_t)(z->c[p] * s->par.dp), OPT_MEM_GATHERED));
        const void *src = opt_dev_at(s, z->wsrc, z->poff[p]);
        DP_TRY(OPT_CALL(be, allgather, s->par.dp_group, z->buf[p], src, z->c[p], prefetch ? &z->pending[p] : NULL));
    }
    if (prefetch) return DP_OK;
    if (z->pending[p]) {
        opt_async *a = z->pending[p];
        z->pending[p] = NULL;
        DP_TRY(OPT_CALL(be, wait, a));
    }
    return s->layout->assemble(s, p, z->buf[p], &om->w[p]);
}

static dp_status z3_release(void *ctx, opt_model *om, int p) {
    z3_state *z = ctx;
    opt_backend *be = z->s->be;
    if (z->pending[p]) {
        opt_async *a = z->pending[p];
        z->pending[p] = NULL;
        DP_TRY(OPT_CALL(be, wait, a));
    }
    if (om->w[p]) z->s->layout->disassemble(z->s, p, z->buf[p], om->w[p]);
    opt_mem_free(be, z->buf[p]);
    z->buf[p] = NULL;
    om->w[p] = NULL;
    return DP_OK;
}

static void z3_teardown(opt_dpsgd *s) {
    z3_state *z = s->shard_state;
    if (!z) return;
    for (int p = 0; z->buf && p < s->om.np; p++)
        if (z->buf[p] || z->pending[p]) (void)z3_release(z, &s->om, p);
    if (z->wsrc != z->wshard) opt_mem_free(s->be, z->wsrc);
    opt_mem_free(s->be, z->wshard);
    s->om.fetch = NULL;
    dp_free(z->c); dp_free(z->poff); dp_free(z->own); dp_free(z->buf); dp_free(z->pending);
    dp_free(z);
    s->shard_state = NULL;
}

static dp_status z3_setup(opt_dpsgd *s) {
    opt_model *om = &s->om;
    opt_backend *be = s->be;
    const int N = s->par.dp, r = s->par.dp_rank, np = om->np;
    size_t es = opt_backend_esize(be);
    for (int p = 0; p < np; p++)
        if (s->vlen[p] < N)
            return dp_error(DP_ERR_USAGE, "--sharding zero3 --dp %d: tensor '%s' has %lld elements%s, fewer than the %d "
                            "shards", N, om->name[p], (long long)s->vlen[p], s->vlen[p] < om->numel[p] ? " in a CP slice" : "",
                            N);
    z3_state *z = dp_calloc(1, sizeof *z);
    if (!z) return dp_error(DP_ERR_NOMEM, "zero3: out of memory");
    s->shard_state = z;
    z->s = s;
    z->c = dp_calloc((size_t)np, sizeof(int64_t)); z->poff = dp_calloc((size_t)np, sizeof(int64_t));
    z->own = dp_calloc((size_t)np, sizeof(int64_t));
    z->buf = dp_calloc((size_t)np, sizeof(void *)); z->pending = dp_calloc((size_t)np, sizeof(opt_async *));
    if (!z->c || !z->poff || !z->own || !z->buf || !z->pending) { z3_teardown(s); return dp_error(DP_ERR_NOMEM, "zero3: out of memory"); }
    int64_t C = 0;
    for (int p = 0; p < np; p++) {
        z->c[p] = (s->vlen[p] + N - 1) / N;
        z->own[p] = piece(s->vlen[p], z->c[p], r);
        z->poff[p] = C;
        C += z->c[p];
    }
    s->chunk = C;
    s->lo = s->hi = 0; /* no range partition */
    s->zoff = s->nvec;
    s->zlo = 0;
    dp_status st = opt_mem_alloc(be, &z->wshard, es * (size_t)C, OPT_MEM_PARAMS);
    /* keep this rank's chunks (the layout's runs of them), drop the full tensors */
    for (int p = 0; st == DP_OK && p < np; p++) {
        const int64_t x0 = z->c[p] * r;
        int64_t u, e, n;
        for (int64_t k = 0; st == DP_OK && z->own[p] && s->layout->run(s, p, x0, x0 + z->own[p], k, &u, &e, &n); k++)
            st = OPT_CALL(be, copy, opt_dev_at(s, z->wshard, z->poff[p] + u - x0), opt_dev_at(s, om->w[p], e),
                          es * (size_t)n);
    }
    if (st == DP_OK) st = s->hooks->gather_source(s, &z->wsrc, z->wshard, C);
    for (int p = 0; st == DP_OK && p < np; p++) { opt_mem_free(be, om->w[p]); om->w[p] = NULL; }
    if (st == DP_OK) st = opt_master_setup_packed(s, z->wshard, C); /* mixed precision: f32 master of the partition */
    if (st != DP_OK) { z3_teardown(s); return st; }
    z->fetch = (opt_param_fetch){z, z3_acquire, z3_release, 1};
    om->fetch = &z->fetch;
    return DP_OK;
}

static dp_status z3_reduce(opt_dpsgd *s, int64_t step) {
    z3_state *z = s->shard_state;
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const int N = s->par.dp, r = s->par.dp_rank;
    size_t es = opt_backend_esize(be);
    void *packed = NULL;
    dp_status st = opt_mem_alloc(be, &packed, es * (size_t)(s->chunk * N), OPT_MEM_COMM);
    for (int p = 0; st == DP_OK && p < om->np; p++)
        for (int q = 0; st == DP_OK && q < N; q++)
            st = OPT_CALL(be, copy, opt_dev_at(s, packed, q * s->chunk + z->poff[p]),
                          opt_dev_at(s, s->flat, s->voff[p] + z->c[p] * q), es * (size_t)piece(s->vlen[p], z->c[p], q));
    /* my packed partition of S = sum over ranks in rank order, into flat[0, C) */
    if (st == DP_OK) st = OPT_CALL(be, reduce_scatter_sum, s->par.dp_group, s->flat, packed, s->chunk, NULL);
    opt_mem_free(be, packed);
    /* noise of my elements of every tensor, at their global positions, into Z (packed) */
    double std = s->cfg.sigma * s->groups.c_total;
    void *Z = opt_dev_at(s, s->flat, s->zoff);
    for (int p = 0; st == DP_OK && s->cfg.sigma > 0 && p < om->np; p++) {
        int64_t lo = s->voff[p] + z->c[p] * r;
        if (z->own[p]) st = s->hooks->noise(s, Z, lo - z->poff[p], step, lo, lo + z->own[p], std);
    }
    return st;
}

static dp_status z3_update(opt_dpsgd *s, double div) {
    z3_state *z = s->shard_state;
    opt_backend *be = s->be;
    const dp_dpsgd_config *c = &s->cfg;
    const int64_t C = s->chunk;
    DP_TRY(OPT_CALL(be, add, s->pgrad, s->flat, opt_dev_at(s, s->flat, s->zoff), C));
    DP_TRY(OPT_CALL(be, div_scalar, s->pgrad, s->pgrad, div, C));
    DP_TRY(s->hooks->gather_source_update(s, z->wsrc, z->wshard, C));
    /* elementwise over the packed partition (padding stays 0: zero gradient, zero state) */
    /* mixed precision: the optimizer runs on the f32 master partition, the half partition
     * is re-derived from it */
    void *wu = s->master ? s->master : z->wshard;
    if (c->opt == DP_OPT_SGD) DP_TRY(OPT_CALL(be, sgd_momentum, wu, s->m1, s->pgrad, c->lr, c->momentum, 0.0, s->t, C));
    else DP_TRY(OPT_CALL(be, adamw, wu, s->m1, s->m2, s->pgrad, c->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay,
                         s->t, C));
    return s->master ? opt_master_store(s, z->wshard, s->master, C) : DP_OK;
}

/* host[0..total) from every rank's packed partition dev [C] */
static dp_status z3_gather(opt_dpsgd *s, double *host, const void *dev) {
    z3_state *z = s->shard_state;
    opt_backend *be = s->be;
    const int N = s->par.dp;
    void *recv = NULL;
    double *h = dp_malloc(sizeof(double) * (size_t)(s->chunk * N + 1)), *hv = dp_calloc((size_t)s->nvec + 1, sizeof(double));
    dp_status st = h && hv ? opt_mem_alloc(be, &recv, opt_backend_esize(be) * (size_t)(s->chunk * N), OPT_MEM_COMM)
                           : dp_error(DP_ERR_NOMEM, "zero3: out of memory");
    if (st == DP_OK) st = OPT_CALL(be, allgather, s->par.dp_group, recv, dev, s->chunk, NULL);
    if (st == DP_OK) st = OPT_CALL(be, download_f64, h, recv, s->chunk * N);
    /* hv [nvec]: the vector of this rank's layout, then its tensors (CP: the CP group's slices) */
    for (int p = 0; st == DP_OK && p < s->om.np; p++)
        for (int q = 0; q < N; q++)
            memcpy(hv + s->voff[p] + z->c[p] * q, h + q * s->chunk + z->poff[p],
                   sizeof(double) * (size_t)piece(s->vlen[p], z->c[p], q));
    opt_mem_free(be, recv);
    if (st == DP_OK) st = s->layout->vec_to_host(s, host, hv);
    dp_free(h);
    dp_free(hv);
    return st;
}

static dp_status z3_gather_sums(opt_dpsgd *s, double *hS) {
    DP_TRY(z3_gather(s, hS, s->flat));
    return z3_gather(s, hS + s->total, opt_dev_at(s, s->flat, s->zoff));
}

static dp_status z3_gather_pgrad(opt_dpsgd *s, double *hp) { return z3_gather(s, hp, s->pgrad); }

const opt_shard_strategy opt_shard_zero3 = {"zero3", 1, 1, z3_reduce, z3_update, z3_gather_sums, z3_gather_pgrad,
                                            z3_setup, z3_teardown};
