/* optimized/strategies/layout_cp.c — the CP layout of context parallelism (optimized/shard.h
 * opt_layout, docs/longshield.md "Sharded state"): each CP rank's gradient vector holds
 * its slice of every parameter (opt_cp_geom_of: rows, or columns of a linear parameter
 * under --cp-pattern output), packed (opt_cp_state): the clipped sums S, the noise Z, the
 * private gradient and the optimizer states; the sharding strategies (replicated, zero1,
 * zero2) partition that vector over the DP group as they partition the full one. After
 * the update the parameters are all-gathered over the CP group for the next forward. The
 * layout also shards the model's sequence (om.cp, om.t0, om.Tl) and picks its attention
 * (--cp-attention allgather|ring). Selected by --cp M > 1 (or --cp 1 with a --cp-* option). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ledger.h"
#include "common/alloc.h"
#include "optimized/clip/clip.h"

dp_status opt_cp_check(const dp_dpsgd_config *cfg, const opt_dp_options *o, const dp_model *m) {
    (void)cfg;
    if (m->cfg.kind != DP_LLAMA)
        return dp_error(DP_ERR_USAGE, "--cp %d: context parallelism shards the sequence of the llama; the mlp has no "
                        "positions and no attention (use --cp 1)", o->cp);
    if (o->cp > m->cfg.seq)
        return dp_error(DP_ERR_USAGE, "--cp %d is larger than --seq %d: every CP rank needs at least one position", o->cp,
                        m->cfg.seq);
    if (o->noise_mode != OPT_NOISE_SINGLE)
        return dp_error(DP_ERR_USAGE, "--cp %d: --noise-mode shares is not supported with context parallelism", o->cp);
    return DP_OK;
}

static opt_cp_state *state(const opt_dpsgd *s) { return (opt_cp_state *)s->layout_state; }

int opt_cp_by_columns(const opt_dpsgd *s, int p) {
    const int64_t P = s->om.shape[p][0], d = s->om.numel[p] / P;
    return s->o.cp_output && s->om.src[p] == OPT_SRC_LINEAR && P < d;
}

void opt_cp_geom_of(opt_cp_geom *g, const opt_dpsgd *s, int p, int j) {
    const int M = s->par.cp;
    const int64_t R = s->om.shape[p][0], c = s->om.numel[p] / R;
    g->cols = opt_cp_by_columns(s, p);
    if (g->cols) {
        g->e0 = c * j / M;
        g->w = c * (j + 1) / M - g->e0;
        g->nseg = R;
        g->stride = c;
    } else {
        g->e0 = R * j / M * c;
        g->w = R * (j + 1) / M * c - g->e0;
        g->nseg = 1;
        g->stride = 0;
    }
}

int opt_cp_geom_run(int64_t *u, int64_t *e, int64_t *n, const opt_cp_geom *g, int64_t u0, int64_t u1, int64_t k) {
    if (g->w <= 0 || u1 <= u0) return 0;
    const int64_t sg = u0 / g->w + k, a = sg * g->w > u0 ? sg * g->w : u0, b = (sg + 1) * g->w < u1 ? (sg + 1) * g->w : u1;
    if (sg >= g->nseg || b <= a) return 0;
    *u = a;
    *e = g->e0 + sg * g->stride + (a - sg * g->w);
    *n = b - a;
    return 1;
}

dp_status opt_cp_geom_copy(const opt_dpsgd *s, const opt_cp_geom *g, void *tensor, void *packed, int64_t u0, int64_t u1,
                           int to_tensor) {
    const size_t es = opt_backend_esize(s->be);
    int64_t u, e, n;
    for (int64_t k = 0; opt_cp_geom_run(&u, &e, &n, g, u0, u1, k); k++)
        DP_TRY(to_tensor ? OPT_CALL(s->be, copy, opt_dev_at(s, tensor, e), opt_dev_at(s, packed, u - u0), es * (size_t)n)
                         : OPT_CALL(s->be, copy, opt_dev_at(s, packed, u - u0), opt_dev_at(s, tensor, e), es * (size_t)n));
    return DP_OK;
}

static dp_status cp_setup(opt_dpsgd *s) {
    const opt_model *om = &s->om;
    opt_cp_state *cs = dp_calloc(1, sizeof *cs);
    if (!cs) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    cs->poff = dp_calloc((size_t)om->np, sizeof *cs->poff);
    cs->pmax = dp_calloc((size_t)om->np, sizeof *cs->pmax);
    s->layout_state = cs;
    if (!cs->poff || !cs->pmax) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    const int M = s->par.cp;
    cs->cp.g = s->par.cp_group;
    cs->cp.M = M;
    cs->cp.r = s->par.cp_rank;
    cs->cp.T = om->cfg.seq;
    cs->cp.Tmax = (cs->cp.T + M - 1) / M;
    cs->cp.ring = s->o.cp_ring;
    cs->output = s->o.cp_output;
    opt_cp_shard(&cs->cp.t0, &cs->cp.Tl, cs->cp.T, M, cs->cp.r);
    for (int p = 0; p < om->np; p++) {
        cs->poff[p] = cs->L;
        for (int j = 0; j < M; j++) {
            opt_cp_geom g;
            opt_cp_geom_of(&g, s, p, j);
            if (g.nseg * g.w > cs->pmax[p]) cs->pmax[p] = g.nseg * g.w;
        }
        cs->L += cs->pmax[p];
    }
    s->voff = cs->poff;
    s->vlen = cs->pmax;
    s->nvec = cs->L;
    /* the model runs on the rank's sequence shard, its attention across the CP group */
    s->om.cp = &cs->cp;
    s->om.t0 = cs->cp.t0;
    s->om.Tl = cs->cp.Tl;
    s->om.attn = cs->cp.ring ? &opt_attn_cp_ring : &opt_attn_cp_allgather;
    return DP_OK;
}

static void cp_teardown(opt_dpsgd *s) {
    opt_cp_state *cs = state(s);
    if (!cs) return;
    s->om.cp = NULL;
    s->om.t0 = 0;
    s->om.Tl = s->om.T;
    s->om.attn = &opt_attn_local;
    s->voff = s->vlen = NULL;
    dp_free(cs->poff); dp_free(cs->pmax); dp_free(cs);
    s->layout_state = NULL;
}

/* the runs of this CP rank's slice (the slice geometry) */
static int cp_run(const opt_dpsgd *s, int p, int64_t x0, int64_t x1, int64_t k, int64_t *u, int64_t *e, int64_t *n) {
    opt_cp_geom g;
    opt_cp_geom_of(&g, s, p, state(s)->cp.r);
    return opt_cp_geom_run(u, e, n, &g, x0, x1, k);
}

/* host [total] (global positions) = every CP rank's packed slices of dev [L]. */
static dp_status cp_gather_host(opt_dpsgd *s, double *host, const void *dev) {
    opt_backend *be = s->be;
    opt_cp_state *cs = state(s);
    const int M = cs->cp.M;
    const size_t es = opt_backend_esize(be);
    void *recv = NULL;
    double *h = dp_malloc(sizeof(double) * (size_t)(M * cs->L + 1));
    dp_status st = h ? opt_mem_alloc(be, &recv, es * (size_t)(M * cs->L), OPT_MEM_COMM)
                     : dp_error(DP_ERR_NOMEM, "engine: out of memory");
    if (st == DP_OK) st = OPT_CALL(be, allgather, cs->cp.g, recv, dev, cs->L, NULL);
    if (st == DP_OK) st = OPT_CALL(be, download_f64, h, recv, M * cs->L);
    for (int j = 0; st == DP_OK && j < M; j++)
        for (int p = 0; p < s->om.np; p++) {
            opt_cp_geom g;
            int64_t u, e, n;
            opt_cp_geom_of(&g, s, p, j);
            for (int64_t k = 0; opt_cp_geom_run(&u, &e, &n, &g, 0, g.nseg * g.w, k); k++)
                memcpy(host + s->off[p] + e, h + j * cs->L + cs->poff[p] + u, sizeof(double) * (size_t)n);
        }
    opt_mem_free(be, recv);
    dp_free(h);
    return st;
}

/* Every CP rank's parameter slices into every rank's whole parameters. */
static dp_status cp_allgather_params(opt_dpsgd *s) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    opt_cp_state *cs = state(s);
    const int M = cs->cp.M;
    const size_t es = opt_backend_esize(be);
    void *send = NULL, *recv = NULL;
    dp_status st = opt_mem_alloc(be, &send, es * (size_t)cs->L, OPT_MEM_COMM);
    if (st == DP_OK) st = opt_mem_alloc(be, &recv, es * (size_t)(M * cs->L), OPT_MEM_COMM);
    for (int p = 0; st == DP_OK && p < om->np; p++) {
        opt_cp_geom g;
        opt_cp_geom_of(&g, s, p, cs->cp.r);
        st = opt_cp_geom_copy(s, &g, om->w[p], opt_dev_at(s, send, cs->poff[p]), 0, g.nseg * g.w, 0);
    }
    if (st == DP_OK) st = OPT_CALL(be, allgather, cs->cp.g, recv, send, cs->L, NULL);
    for (int j = 0; st == DP_OK && j < M; j++)
        for (int p = 0; st == DP_OK && p < om->np; p++) {
            opt_cp_geom g;
            opt_cp_geom_of(&g, s, p, j);
            st = opt_cp_geom_copy(s, &g, om->w[p], opt_dev_at(s, recv, j * cs->L + cs->poff[p]), 0, g.nseg * g.w, 1);
        }
    opt_mem_free(be, send);
    opt_mem_free(be, recv);
    return st;
}

/* zero1, zero2: every DP rank's updated range [lo_d, hi_d) of the packed slices,
 * all-gathered over the DP group, into this rank's slices of the parameters. */
static dp_status cp_sync_ranges(opt_dpsgd *s) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    opt_cp_state *cs = state(s);
    const size_t es = opt_backend_esize(be);
    void *send = NULL, *recv = NULL;
    dp_status st = opt_mem_alloc(be, &send, es * (size_t)s->chunk, OPT_MEM_COMM);
    if (st == DP_OK) st = opt_mem_alloc(be, &recv, es * (size_t)(s->chunk * s->par.dp), OPT_MEM_COMM);
    for (int dir = 0; dir < 2 && st == DP_OK; dir++) {
        if (dir == 1) st = OPT_CALL(be, allgather, s->par.dp_group, recv, send, s->chunk, NULL);
        for (int p = 0; st == DP_OK && p < om->np; p++) {
            opt_cp_geom g;
            opt_cp_geom_of(&g, s, p, cs->cp.r);
            const int64_t n = g.nseg * g.w;
            /* dir 0: this rank's range of the slice into send; dir 1: the whole slice back */
            int64_t x0 = dir ? cs->poff[p] : (cs->poff[p] > s->lo ? cs->poff[p] : s->lo);
            int64_t x1 = dir ? cs->poff[p] + n : (cs->poff[p] + n < s->hi ? cs->poff[p] + n : s->hi);
            if (x1 <= x0) continue;
            st = dir ? opt_cp_geom_copy(s, &g, om->w[p], opt_dev_at(s, recv, x0), 0, n, 1)
                     : opt_cp_geom_copy(s, &g, om->w[p], opt_dev_at(s, send, x0 - s->lo), x0 - cs->poff[p],
                                        x1 - cs->poff[p], 0);
        }
    }
    opt_mem_free(be, send);
    opt_mem_free(be, recv);
    return st;
}

void opt_dpsgd_comm_overlap(opt_dpsgd *s, double *hidden, double *total) {
    *hidden = *total = 0.0;
    if (!opt_shard_is_cp(s) || !s->layout_state) return;
    opt_cp_state *cs = state(s);
    *hidden = cs->ovl_hidden;
    *total = cs->ovl_total;
    cs->ovl_hidden = cs->ovl_total = 0.0;
}

void opt_cp_describe(FILE *f, const opt_dpsgd *s) {
    if (!opt_shard_is_cp(s) || !s->layout_state) return;
    for (int p = 0; p < s->om.np; p++) {
        const int64_t R = s->om.shape[p][0], c = s->om.numel[p] / R;
        opt_cp_geom g;
        opt_cp_geom_of(&g, s, p, 0);
        fprintf(f, "cp slice %s [%lld, %lld]: %s", s->om.name[p], (long long)R, (long long)c, g.cols ? "columns" : "rows");
        for (int j = 0; j < s->par.cp; j++) {
            opt_cp_geom_of(&g, s, p, j);
            const int64_t div = g.cols ? 1 : c;
            fprintf(f, " [%lld, %lld)", (long long)(g.e0 / div), (long long)((g.e0 + g.w) / div));
        }
        fputc('\n', f);
    }
    fflush(f);
}

/* host [total] = the packed [L] whose DP rank's range [lo, hi) is at dev + (lo - dev_lo)
 * on every rank of the DP group: all-gathered over the DP group, then over the CP group. */
static dp_status cp_gather_ranges(opt_dpsgd *s, double *host, const void *dev, int64_t dev_lo) {
    const void *range = opt_dev_at(s, (void *)dev, s->lo - dev_lo);
    void *full = NULL;
    dp_status st = opt_mem_alloc(s->be, &full, opt_backend_esize(s->be) * (size_t)(s->chunk * s->par.dp), OPT_MEM_COMM);
    if (st == DP_OK) st = OPT_CALL(s->be, allgather, s->par.dp_group, full, range, s->chunk, NULL);
    if (st == DP_OK) st = cp_gather_host(s, host, full);
    opt_mem_free(s->be, full);
    return st;
}

/* zero3: the whole tensor from the rank's slice seg [pmax]: every CP rank's slice
 * all-gathered over the CP group ([M, pmax], comm_buffers) and unpacked into w [numel]
 * (gathered_params, freed by cp_disassemble) */
static dp_status cp_assemble(opt_dpsgd *s, int p, void *seg, void **w) {
    opt_backend *be = s->be;
    opt_cp_state *cs = state(s);
    const int M = cs->cp.M;
    const size_t es = opt_backend_esize(be);
    void *recv = NULL;
    dp_status st = opt_mem_alloc(be, w, es * (size_t)s->om.numel[p], OPT_MEM_GATHERED);
    if (st == DP_OK) st = opt_mem_alloc(be, &recv, es * (size_t)(M * cs->pmax[p]), OPT_MEM_COMM);
    if (st == DP_OK) st = OPT_CALL(be, allgather, cs->cp.g, recv, seg, cs->pmax[p], NULL);
    for (int j = 0; st == DP_OK && j < M; j++) {
        opt_cp_geom g;
        opt_cp_geom_of(&g, s, p, j);
        st = opt_cp_geom_copy(s, &g, *w, opt_dev_at(s, recv, j * cs->pmax[p]), 0, g.nseg * g.w, 1);
    }
    opt_mem_free(be, recv);
    if (st != DP_OK) { opt_mem_free(be, *w); *w = NULL; }
    return st;
}

static void cp_disassemble(opt_dpsgd *s, int p, void *seg, void *w) {
    (void)p;
    if (w != seg) opt_mem_free(s->be, w);
}

/* host [total] = every CP rank's vector (host) hvec [L]: uploaded, then gathered as a
 * device vector */
static dp_status cp_vec_to_host(opt_dpsgd *s, double *host, const double *hvec) {
    void *dev = NULL;
    dp_status st = opt_mem_alloc(s->be, &dev, opt_backend_esize(s->be) * (size_t)state(s)->L, OPT_MEM_COMM);
    if (st == DP_OK) st = OPT_CALL(s->be, upload_f64, dev, hvec, state(s)->L);
    if (st == DP_OK) st = cp_gather_host(s, host, dev);
    opt_mem_free(s->be, dev);
    return st;
}

const opt_layout opt_layout_cp = {"cp", cp_setup, cp_teardown, cp_run, cp_gather_host, cp_gather_ranges,
                                  cp_sync_ranges, cp_allgather_params, cp_assemble, cp_disassemble,
                                  cp_vec_to_host, 0, &opt_source_cp};

int opt_shard_is_cp(const opt_dpsgd *s) { return s->layout == &opt_layout_cp; }
