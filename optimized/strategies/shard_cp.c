/* optimized/strategies/shard_cp.c — the state layout of context parallelism
 * (docs/longshield.md "Sharded state"): each CP rank holds the slices of every parameter
 * (opt_cp_geom_of: rows, or columns of a linear parameter under --cp-pattern output) for
 * the clipped sums S, the noise Z, the private gradient and the optimizer states, packed
 * (opt_cp_state); the DP group sums S and Z slice by slice;
 * the optimizer updates the rank's slices and the parameters are all-gathered over the
 * CP group for the next forward. Selected by --cp M > 1 (not a --sharding name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ledger.h"
#include "common/alloc.h"
#include "optimized/shard.h"

dp_status opt_cp_check(const dp_dpsgd_config *cfg, const opt_dp_options *o, const dp_model *m) {
    (void)cfg;
    if (m->cfg.kind != DP_LLAMA)
        return dp_error(DP_ERR_USAGE, "--cp %d: context parallelism shards the sequence of the llama; the mlp has no "
                        "positions and no attention (use --cp 1)", o->cp);
    if (o->cp > m->cfg.seq)
        return dp_error(DP_ERR_USAGE, "--cp %d is larger than --seq %d: every CP rank needs at least one position", o->cp,
                        m->cfg.seq);
    if (o->sharding == OPT_SHARD_ZERO3)
        return dp_error(DP_ERR_USAGE, "--cp %d: --sharding zero3 is not supported with context parallelism: its parameters "
                        "would be gathered per layer over the DP group inside the CP forward, and the CP state is already "
                        "sliced (--sharding replicated, zero1 or zero2)", o->cp);
    if (o->sharding == OPT_SHARD_ZERO2 && (o->bug == OPT_BUG_NOISE_EVERY_RANK || o->bug == OPT_BUG_CP_FULL_NOISE))
        return dp_error(DP_ERR_USAGE, "--cp %d --sharding zero2: --inject-bug %s has no injection point (each DP rank "
                        "draws the noise of its own range)", o->cp, opt_bug_names[o->bug]);
    if (o->bug == OPT_BUG_CP_ZERO2_LOCAL_NOISE && o->sharding != OPT_SHARD_ZERO2)
        return dp_error(DP_ERR_USAGE, "--inject-bug %s applies to --sharding zero2 only", opt_bug_names[o->bug]);
    if (o->strategy != OPT_STRAT_GRAD_SAMPLE)
        return dp_error(DP_ERR_USAGE, "--cp %d: --strategy %s is not supported with context parallelism (the per-example "
                        "gradients are instantiated on row slices: --strategy grad-sample)", o->cp,
                        opt_strategy_names[o->strategy]);
    if (o->bug == OPT_BUG_CLIP_AFTER_SUM || o->bug == OPT_BUG_ZERO_NOISE_SAME_SEED || o->bug == OPT_BUG_ZERO_WRONG_SLICE ||
        o->bug == OPT_BUG_ZERO_STALE_PARAMS)
        return dp_error(DP_ERR_USAGE, "--cp %d: --inject-bug %s has no injection point under context parallelism",
                        o->cp, opt_bug_names[o->bug]);
    if (o->noise_mode != OPT_NOISE_SINGLE)
        return dp_error(DP_ERR_USAGE, "--cp %d: --noise-mode shares is not supported with context parallelism", o->cp);
    return DP_OK;
}

static opt_cp_state *state(const opt_dpsgd *s) { return (opt_cp_state *)s->shard_state; }

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
    s->shard_state = cs;
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
    s->om.cp = &cs->cp;
    s->chunk = cs->L; /* pgrad, m1, m2 [L]; flat = S [L] | Z [L] */
    s->lo = 0; s->hi = cs->L;
    if (s->o.sharding == OPT_SHARD_ZERO1 || s->o.sharding == OPT_SHARD_ZERO2) { /* pgrad, m1, m2: the DP rank's range [lo, hi) of the packed [L] */
        cs->zero1 = 1;
        s->chunk = (cs->L + s->par.dp - 1) / s->par.dp;
        opt_shard_range(&s->lo, &s->hi, cs->L, s->chunk, s->par.dp_rank);
    }
    s->zoff = cs->L;
    s->zlo = 0;
    if (s->o.sharding == OPT_SHARD_ZERO2) { /* flat = S [N c] (reduce-scattered) | Z [c] (the range [lo, hi)) */
        cs->zero2 = 1;
        s->zoff = s->chunk * s->par.dp;
        s->zlo = s->lo;
    }
    return DP_OK;
}

static void cp_teardown(opt_dpsgd *s) {
    opt_cp_state *cs = state(s);
    if (!cs) return;
    s->om.cp = NULL;
    dp_free(cs->poff); dp_free(cs->pmax); dp_free(cs);
    s->shard_state = NULL;
}

/* Noise of the rank's slices at their global (p, e) stream positions (DP rank 0; the
 * hooks' noise span otherwise), then S and Z summed over the DP group. */
static dp_status cp_reduce(opt_dpsgd *s, int64_t step) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    opt_cp_state *cs = state(s);
    const double std = s->cfg.sigma * s->groups.c_total;
    const size_t es = opt_backend_esize(be);
    int64_t lo = 0, hi = s->par.dp_rank == 0 ? s->total : 0;
    s->hooks->noise_span(s, &lo, &hi);
    void *Z = opt_dev_at(s, s->flat, s->zoff), *full = NULL;
    dp_status st = DP_OK;
    for (int p = 0; st == DP_OK && s->cfg.sigma > 0 && p < om->np; p++) {
        opt_cp_geom g;
        opt_cp_geom_of(&g, s, p, cs->cp.r);
        if (s->hooks->cp_full_noise) { /* negative control: the whole layer's noise on every CP rank, summed */
            st = opt_mem_alloc(be, &full, es * (size_t)om->numel[p], OPT_MEM_WORKSPACE);
            if (st == DP_OK && hi > lo)
                st = OPT_CALL(be, noise_add, full, s->cfg.key, (uint32_t)step, (uint32_t)p, std, 0, om->numel[p]);
            if (st == DP_OK) st = OPT_CALL(be, allreduce_sum, cs->cp.g, full, om->numel[p], NULL);
            if (st == DP_OK) st = opt_cp_geom_copy(s, &g, full, opt_dev_at(s, Z, cs->poff[p]), 0, g.nseg * g.w, 0);
            opt_mem_free(be, full);
            full = NULL;
            continue;
        }
        /* per run of the slice (tensor elements [e, e + n)): the part of
         * [off[p] + e, off[p] + e + n) inside the span [lo, hi) */
        int64_t u, e, n;
        for (int64_t k = 0; st == DP_OK && opt_cp_geom_run(&u, &e, &n, &g, 0, g.nseg * g.w, k); k++) {
            int64_t x = s->off[p] + e > lo ? s->off[p] + e : lo, y = s->off[p] + e + n < hi ? s->off[p] + e + n : hi;
            if (x < y)
                st = OPT_CALL(be, noise_add, opt_dev_at(s, Z, cs->poff[p] + u + x - s->off[p] - e), s->cfg.key,
                              (uint32_t)step, (uint32_t)p, std, (uint64_t)(x - s->off[p]), y - x);
        }
    }
    if (st != DP_OK) return st;
    return OPT_CALL(be, allreduce_sum, s->par.dp_group, s->flat, 2 * cs->L, NULL);
}

/* Noise of the packed elements [u0, u1) of this CP rank's slice of parameter p into
 * z[u - u0] at their global (p, e) stream positions (the slice geometry's packed -> tensor
 * element map, one call per contiguous run; under the test-only cp-zero2-local-noise bug,
 * at the slice-local packed position u instead). */
static dp_status cp_noise_packed(opt_dpsgd *s, void *z, int p, int64_t u0, int64_t u1, int64_t step, double std) {
    opt_cp_geom g;
    opt_cp_geom_of(&g, s, p, state(s)->cp.r);
    int64_t u, e, n;
    for (int64_t k = 0; opt_cp_geom_run(&u, &e, &n, &g, u0, u1, k); k++) {
        const int64_t e0 = s->hooks->cp_zero2_local_noise ? u : e; /* BUG (test-only) when the slice-local u */
        DP_TRY(OPT_CALL(s->be, noise_add, opt_dev_at(s, z, u - u0), s->cfg.key, (uint32_t)step, (uint32_t)p, std,
                        (uint64_t)e0, n));
    }
    return DP_OK;
}

/* zero2 (docs/longshield.md section 5): S reduce-scattered over the DP group, so the DP
 * rank keeps S of its range [lo, hi) of the packed slices; the rank draws the noise of
 * that range itself at the global (p, e) positions of the slice elements it covers. */
static dp_status cp_zero2_reduce(opt_dpsgd *s, int64_t step) {
    const opt_model *om = &s->om;
    opt_cp_state *cs = state(s);
    const double std = s->cfg.sigma * s->groups.c_total;
    dp_status st = opt_shard_reduce_scatter_sums(s);
    void *Z = opt_dev_at(s, s->flat, s->zoff);
    for (int p = 0; st == DP_OK && s->cfg.sigma > 0 && p < om->np; p++) {
        opt_cp_geom g;
        opt_cp_geom_of(&g, s, p, cs->cp.r);
        const int64_t n = g.nseg * g.w;
        /* the packed positions [x, y) of the slice inside the range [lo, hi) */
        int64_t x = cs->poff[p] > s->lo ? cs->poff[p] : s->lo, y = cs->poff[p] + n < s->hi ? cs->poff[p] + n : s->hi;
        if (x < y) st = cp_noise_packed(s, opt_dev_at(s, Z, x - s->zlo), p, x - cs->poff[p], y - cs->poff[p], step, std);
    }
    return st;
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

/* The private gradient (S + Z) / div and the optimizer on the rank's slices, then the
 * parameters all-gathered over the CP group. */
/* zero1: every DP rank's updated range [lo_d, hi_d) of the packed slices, all-gathered
 * over the DP group, into this rank's slices of the parameters. */
static dp_status cp_zero1_sync(opt_dpsgd *s) {
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

/* The private gradient (S + Z) / div and the optimizer on the rank's slices (zero1: on
 * the DP rank's range [lo, hi) of them, then re-assembled over the DP group), then the
 * parameters all-gathered over the CP group. */
static dp_status cp_update(opt_dpsgd *s, double div) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const dp_dpsgd_config *c = &s->cfg;
    opt_cp_state *cs = state(s);
    const int64_t lo = s->lo, hi = s->hi; /* [0, L) unless zero1 */
    if (hi > lo) {
        DP_TRY(OPT_CALL(be, add, s->pgrad, opt_dev_at(s, s->flat, lo), opt_dev_at(s, s->flat, s->zoff + lo - s->zlo), hi - lo));
        DP_TRY(OPT_CALL(be, div_scalar, s->pgrad, s->pgrad, div, hi - lo));
    }
    for (int p = 0; p < om->np; p++) {
        opt_cp_geom sg;
        opt_cp_geom_of(&sg, s, p, cs->cp.r);
        const int64_t n = sg.nseg * sg.w;
        int64_t x0 = cs->poff[p] > lo ? cs->poff[p] : lo, x1 = cs->poff[p] + n < hi ? cs->poff[p] + n : hi, u, e, len;
        /* element-wise, one call per contiguous run of the slice's elements [x0, x1) */
        for (int64_t k = 0; x1 > x0 && opt_cp_geom_run(&u, &e, &len, &sg, x0 - cs->poff[p], x1 - cs->poff[p], k); k++) {
            const int64_t x = cs->poff[p] + u - lo; /* the run's position in pgrad, m1, m2 */
            void *w = opt_dev_at(s, om->w[p], e), *g = opt_dev_at(s, s->pgrad, x), *m1 = opt_dev_at(s, s->m1, x);
            if (c->opt == DP_OPT_SGD)
                DP_TRY(OPT_CALL(be, sgd_momentum, w, m1, g, c->lr, c->momentum, 0.0, s->t, len));
            else
                DP_TRY(OPT_CALL(be, adamw, w, m1, opt_dev_at(s, s->m2, x), g, c->lr, c->beta1, c->beta2, c->adam_eps,
                                c->weight_decay, s->t, len));
        }
    }
    if (s->hooks->skip_param_sync) return DP_OK;
    if (cs->zero1) DP_TRY(cp_zero1_sync(s));
    return cp_allgather_params(s);
}

void opt_dpsgd_comm_overlap(opt_dpsgd *s, double *hidden, double *total) {
    *hidden = *total = 0.0;
    if (!opt_shard_is_cp(s) || !s->shard_state) return;
    opt_cp_state *cs = state(s);
    *hidden = cs->ovl_hidden;
    *total = cs->ovl_total;
    cs->ovl_hidden = cs->ovl_total = 0.0;
}

void opt_cp_describe(FILE *f, const opt_dpsgd *s) {
    if (!opt_shard_is_cp(s) || !s->shard_state) return;
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

/* host [total] = the packed [L] whose DP rank's range [lo, hi) is range [chunk] on every
 * rank of the DP group: all-gathered over the DP group, then over the CP group. */
static dp_status cp_gather_ranges(opt_dpsgd *s, double *host, const void *range) {
    void *full = NULL;
    dp_status st = opt_mem_alloc(s->be, &full, opt_backend_esize(s->be) * (size_t)(s->chunk * s->par.dp), OPT_MEM_COMM);
    if (st == DP_OK) st = OPT_CALL(s->be, allgather, s->par.dp_group, full, range, s->chunk, NULL);
    if (st == DP_OK) st = cp_gather_host(s, host, full);
    opt_mem_free(s->be, full);
    return st;
}

static dp_status cp_gather_sums(opt_dpsgd *s, double *hS) {
    if (state(s)->zero2) { /* S and Z of the DP ranks' ranges first */
        DP_TRY(cp_gather_ranges(s, hS, opt_dev_at(s, s->flat, s->lo)));
        return cp_gather_ranges(s, hS + s->total, opt_dev_at(s, s->flat, s->zoff));
    }
    DP_TRY(cp_gather_host(s, hS, s->flat));
    return cp_gather_host(s, hS + s->total, opt_dev_at(s, s->flat, s->zoff));
}

static dp_status cp_gather_pgrad(opt_dpsgd *s, double *hp) {
    opt_cp_state *cs = state(s);
    if (!cs->zero1) return cp_gather_host(s, hp, s->pgrad);
    return cp_gather_ranges(s, hp, s->pgrad); /* zero1, zero2: the DP ranks' ranges first */
}

const opt_shard_strategy opt_shard_cp = {"cp", 0, 0, cp_reduce, cp_update, cp_gather_sums, cp_gather_pgrad, cp_setup,
                                         cp_teardown};
/* noise_partition = 1: flat's Z part holds [chunk] elements (the DP rank's range) */
const opt_shard_strategy opt_shard_cp_zero2 = {"cp-zero2", 0, 1, cp_zero2_reduce, cp_update, cp_gather_sums,
                                               cp_gather_pgrad, cp_setup, cp_teardown};

int opt_shard_is_cp(const opt_dpsgd *s) { return s->shard == &opt_shard_cp || s->shard == &opt_shard_cp_zero2; }
