/* optimized/ops/ops_cases_coll.c — harness cases of the collectives and process groups,
 * on the world of the run: one rank alone, or R ranks under mpirun (every rank draws every
 * rank's inputs from the same stream, so each knows the expected result without
 * communicating). Sums over ranks are bounded in any order; gathers, scatters, broadcasts
 * and point-to-point transfers are exact (definitions: optimized/backend.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ops/ops.h"
#include "common/alloc.h"

typedef struct { int64_t n; int async, root; } coll_p;

/* every rank's input [R, m] (drawn in rank order, the same on every rank) */
static double *all_inputs(opt_ops_h *h, int64_t m) {
    double *x = dp_malloc(sizeof(double) * (size_t)(h->size * m + 1));
    for (int64_t i = 0; x && i < h->size * m; i++) x[i] = opt_ops_round(h, opt_ops_draw_normal(h));
    return x;
}

/* complete an asynchronous call with wait (async != NULL only when the backend has wait) */
static dp_status finish_async(opt_backend *be, dp_status st, opt_async *a) {
    if (st == DP_OK && a) st = OPS_CALL(be, wait, a);
    return st;
}

static dp_status coll_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const coll_p *p = c->params;
    opt_async *a = NULL, **ap = p->async ? &a : NULL;
    dp_status st;
    switch (c->op) {
    case OPT_OP_ALLREDUCE_SUM: case OPT_OP_WAIT: st = OPS_CALL(be, allreduce_sum, NULL, d[0], p->n, ap); break;
    case OPT_OP_REDUCE_SCATTER_SUM: st = OPS_CALL(be, reduce_scatter_sum, NULL, d[0], d[1], p->n, ap); break;
    case OPT_OP_ALLGATHER: st = OPS_CALL(be, allgather, NULL, d[0], d[1], p->n, ap); break;
    case OPT_OP_ALLTOALL: st = OPS_CALL(be, alltoall, NULL, d[0], d[1], p->n, ap); break;
    case OPT_OP_BROADCAST: st = OPS_CALL(be, broadcast, NULL, d[0], p->n, p->root, ap); break;
    default: { /* send / recv: a ring (rank r sends to r + 1, receives from r - 1), or a refused peer on one rank */
        int R = be->comm.size, r = be->comm.rank;
        if (R == 1) return c->op == OPT_OP_SEND ? OPS_CALL(be, send, NULL, d[1], p->n, 1, 7, NULL)
                                                : OPS_CALL(be, recv, NULL, d[0], p->n, 1, 7, NULL);
        opt_async *s = NULL;
        st = OPS_CALL(be, send, NULL, d[1], p->n, (r + 1) % R, 7, be->ops.wait ? &s : NULL);
        if (st == DP_OK) st = OPS_CALL(be, recv, NULL, d[0], p->n, (r + R - 1) % R, 7, NULL);
        return finish_async(be, st, s);
    }
    }
    return finish_async(be, st, a);
}

static dp_status coll_one(opt_ops_h *h, opt_op op, coll_p p) {
    const int R = h->size, me = h->rank;
    opt_ops_case c;
    opt_ops_case_init(&c, h, op, "%d rank%s, n=%lld%s root=%d", R, R > 1 ? "s" : "", (long long)p.n,
                      p.async ? " async+wait" : "", p.root);
    if (p.async && !opt_ops_has(h, OPT_OP_WAIT)) { opt_ops_skip(&c, "asynchronous calls need 'wait'"); return DP_OK; }
    if ((op == OPT_OP_SEND && !opt_ops_has(h, OPT_OP_RECV) && R > 1) || (op == OPT_OP_RECV && !opt_ops_has(h, OPT_OP_SEND) && R > 1)) {
        opt_ops_skip(&c, "the ring needs both 'send' and 'recv'");
        return DP_OK;
    }
    if (op == OPT_OP_WAIT && !opt_ops_has(h, OPT_OP_ALLREDUCE_SUM)) { opt_ops_skip(&c, "'wait' is checked on 'allreduce_sum'"); return DP_OK; }
    const int64_t n = p.n;
    const int64_t m = (op == OPT_OP_REDUCE_SCATTER_SUM || op == OPT_OP_ALLTOALL) ? R * n : n; /* send size */
    double *all = all_inputs(h, m);
    if (!all) return DP_ERR_NOMEM;
    const double *mine = all + (int64_t)me * m;
    const opt_rd_env *e = &h->env;
    double *b0 = NULL, *b1 = NULL;
    int onebuf = op == OPT_OP_ALLREDUCE_SUM || op == OPT_OP_WAIT || op == OPT_OP_BROADCAST;
    if (onebuf) b0 = opt_ops_buf_f(&c, "buf", OPT_OPS_INOUT, n, OPT_FILL_ZERO, 1);
    else {
        int64_t nr = (op == OPT_OP_ALLGATHER || op == OPT_OP_ALLTOALL) ? R * n : n;
        b0 = opt_ops_buf_f(&c, "recv", OPT_OPS_OUT, nr, R == 1 && (op == OPT_OP_SEND || op == OPT_OP_RECV) ? OPT_FILL_ZERO : OPT_FILL_POISON, 1);
        b1 = opt_ops_buf_f(&c, "send", OPT_OPS_IN, m, OPT_FILL_ZERO, 1);
    }
    if (!b0 || (!onebuf && !b1)) { dp_free(all); return DP_ERR_NOMEM; }
    memcpy(onebuf ? b0 : b1, mine, sizeof(double) * (size_t)m);
    if (R == 1 && (op == OPT_OP_SEND || op == OPT_OP_RECV)) c.expect = DP_ERR_INVALID; /* no peer on one rank */
    c.invoke = coll_inv;
    c.params = &p;
    dp_status st = opt_ops_exec(&c);
    if (st != DP_OK) { dp_free(all); return st; }
    opt_rd *t = dp_malloc(sizeof(opt_rd) * (size_t)(R + 1));
    if (!t) { dp_free(all); return DP_ERR_NOMEM; }
    for (int64_t j = 0; c.expect == DP_OK && j < n; j++) {
        switch (op) {
        case OPT_OP_ALLREDUCE_SUM: case OPT_OP_WAIT: case OPT_OP_REDUCE_SCATTER_SUM: {
            int64_t at = op == OPT_OP_REDUCE_SCATTER_SUM ? (int64_t)me * n + j : j;
            for (int r = 0; r < R; r++) t[r] = opt_rd_x(all[(int64_t)r * m + at]);
            OPS_REF(&c, 0, j) = opt_rd_sum(e, t, R);
            break;
        }
        case OPT_OP_ALLGATHER:
            for (int r = 0; r < R; r++) OPS_REF(&c, 0, (int64_t)r * n + j) = opt_rd_x(all[(int64_t)r * m + j]);
            break;
        case OPT_OP_ALLTOALL:
            for (int r = 0; r < R; r++) OPS_REF(&c, 0, (int64_t)r * n + j) = opt_rd_x(all[(int64_t)r * m + (int64_t)me * n + j]);
            break;
        case OPT_OP_BROADCAST: OPS_REF(&c, 0, j) = opt_rd_x(all[(int64_t)p.root * m + j]); break;
        default: OPS_REF(&c, 0, j) = opt_rd_x(all[(int64_t)((me + R - 1) % R) * m + j]); break; /* send / recv ring */
        }
    }
    dp_free(t);
    dp_free(all);
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status coll_cases(opt_ops_h *h, opt_op op) {
    static const int64_t ns[] = {1, 7, 1031, 0};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) DP_TRY(coll_one(h, op, (coll_p){ns[i], 0, 0}));
    DP_TRY(coll_one(h, op, (coll_p){9, 1, 0}));
    if (op == OPT_OP_BROADCAST && h->size > 1) DP_TRY(coll_one(h, op, (coll_p){9, 0, h->size - 1}));
    return DP_OK;
}
static dp_status case_allreduce(opt_ops_h *h) { return coll_cases(h, OPT_OP_ALLREDUCE_SUM); }
static dp_status case_reduce_scatter(opt_ops_h *h) { return coll_cases(h, OPT_OP_REDUCE_SCATTER_SUM); }
static dp_status case_allgather(opt_ops_h *h) { return coll_cases(h, OPT_OP_ALLGATHER); }
static dp_status case_alltoall(opt_ops_h *h) { return coll_cases(h, OPT_OP_ALLTOALL); }
static dp_status case_broadcast(opt_ops_h *h) { return coll_cases(h, OPT_OP_BROADCAST); }
static dp_status case_send(opt_ops_h *h) { return coll_one(h, OPT_OP_SEND, (coll_p){7, 0, 0}); }
static dp_status case_recv(opt_ops_h *h) { return coll_one(h, OPT_OP_RECV, (coll_p){7, 0, 0}); }
static dp_status case_wait(opt_ops_h *h) {
    h->res[OPT_OP_WAIT].ncases++;
    dp_status st = OPS_CALL(h->be, wait, NULL); /* a NULL handle is complete */
    if (st == DP_OK) opt_ops_pass(h, OPT_OP_WAIT);
    else opt_ops_fail(h, OPT_OP_WAIT, "wait(NULL) returned '%s': %s", dp_status_name(st), dp_last_error());
    DP_TRY(coll_one(h, OPT_OP_WAIT, (coll_p){9, 1, 0}));
    return coll_one(h, OPT_OP_WAIT, (coll_p){1031, 1, 0});
}

/* ---- allgatherv_bytes (host bytes, rank order; *recv malloc'd) ---- */
static dp_status case_allgatherv(opt_ops_h *h) {
    for (int k = 0; k < 2; k++) {
        h->res[OPT_OP_ALLGATHERV_BYTES].ncases++;
        /* rank r sends r + 1 bytes (k = 0) or 3 r bytes (k = 1: rank 0 sends none) of the pattern 17 r + i */
        size_t total = 0, mine = 0, at = 0;
        for (int r = 0; r < h->size; r++) total += k ? 3 * (size_t)r : (size_t)r + 1;
        unsigned char *want = dp_malloc(total + 1), *send = NULL;
        if (!want) return DP_ERR_NOMEM;
        for (int r = 0; r < h->size; r++) {
            size_t len = k ? 3 * (size_t)r : (size_t)r + 1;
            if (r == h->rank) { send = want + at; mine = len; }
            for (size_t i = 0; i < len; i++) want[at++] = (unsigned char)(17 * r + (int)i);
        }
        void *got = NULL;
        size_t len = 0;
        dp_status st = OPS_CALL(h->be, allgatherv_bytes, &got, &len, send, mine);
        if (st != DP_OK)
            opt_ops_fail(h, OPT_OP_ALLGATHERV_BYTES, "%d ranks: returned '%s': %s", h->size, dp_status_name(st), dp_last_error());
        else if (len != total || (total && memcmp(got, want, total) != 0))
            opt_ops_fail(h, OPT_OP_ALLGATHERV_BYTES, "%d ranks, case %d: got %zu bytes, expected %zu (the rank-order concatenation)",
                         h->size, k, len, total);
        else opt_ops_pass(h, OPT_OP_ALLGATHERV_BYTES);
        dp_free(got);
        dp_free(want);
    }
    return DP_OK;
}

static dp_status case_barrier(opt_ops_h *h) {
    h->res[OPT_OP_BARRIER].ncases++;
    dp_status st = OPS_CALL(h->be, barrier, NULL);
    if (st == DP_OK) opt_ops_pass(h, OPT_OP_BARRIER);
    else opt_ops_fail(h, OPT_OP_BARRIER, "barrier returned '%s': %s", dp_status_name(st), dp_last_error());
    return DP_OK;
}

/* ---- process groups: color = rank % 2, key = -rank (ranks reversed inside a group) ---- */
static dp_status split_check(opt_ops_h *h, opt_op op, int with_sum) {
    h->res[op].ncases++;
    const int R = h->size, me = h->rank, color = me % 2;
    opt_group *g = NULL;
    dp_status st = OPS_CALL(h->be, group_split, &g, color, R - me);
    if (st != DP_OK || !g) {
        opt_ops_fail(h, op, "group_split(color %d, key %d) returned '%s': %s", color, R - me, dp_status_name(st), dp_last_error());
        return DP_OK;
    }
    int size = 0, rank = 0;
    for (int r = 0; r < R; r++)
        if (r % 2 == color) { size++; if (r > me) rank++; } /* larger world ranks have smaller keys */
    if (op == OPT_OP_GROUP_SPLIT) {
        if (g->size != size || g->rank != rank || g->color != color)
            opt_ops_fail(h, op, "%d ranks: group of world rank %d is rank %d of %d, color %d (expected %d of %d, color %d)", R,
                         me, g->rank, g->size, g->color, rank, size, color);
        else opt_ops_pass(h, op);
    }
    if (with_sum && opt_ops_has(h, OPT_OP_ALLREDUCE_SUM) && h->be->decl &&
        (h->be->decl->caps.collectives == DPCERT_COLLECTIVES_GROUPS || !opt_decl_is_own(h->be->decl, OPT_OP_ALLREDUCE_SUM))) {
        /* the group's sum of (world rank + 1): exact in every dtype */
        double v = me + 1, want = 0;
        for (int r = 0; r < R; r++) if (r % 2 == color) want += r + 1;
        const size_t es = dp_dtype_size(h->dtype);
        unsigned char buf[8];
        float f = (float)v;
        memcpy(buf, h->dtype == DP_F64 ? (const void *)&v : (const void *)&f, es);
        void *dev = NULL;
        st = opt_ops_dev_put(h, &dev, buf, es);
        if (st == DP_OK) st = OPS_CALL(h->be, allreduce_sum, g, dev, 1, NULL);
        if (st == DP_OK) st = opt_ops_dev_get(h, buf, dev, es);
        opt_ops_dev_free(h, dev);
        double got = 0;
        if (h->dtype == DP_F64) memcpy(&got, buf, 8);
        else { memcpy(&f, buf, 4); got = f; }
        if (st != DP_OK || got != want)
            opt_ops_fail(h, op, "allreduce_sum on the group of color %d: got %g (%s), expected %g", color, got,
                         st == DP_OK ? "ok" : dp_last_error(), want);
        else opt_ops_pass(h, op);
    }
    if (opt_ops_has(h, OPT_OP_GROUP_FREE)) OPS_CALL(h->be, group_free, g);
    if (op == OPT_OP_GROUP_FREE) opt_ops_pass(h, op); /* freed without a fault (the guard and sanitizers see the rest) */
    return DP_OK;
}
static dp_status case_group_split(opt_ops_h *h) { return split_check(h, OPT_OP_GROUP_SPLIT, 1); }
static dp_status case_group_free(opt_ops_h *h) {
    if (!opt_ops_has(h, OPT_OP_GROUP_SPLIT)) {
        opt_ops_case c;
        opt_ops_case_init(&c, h, OPT_OP_GROUP_FREE, "split and free");
        opt_ops_skip(&c, "group_free is checked on groups made by 'group_split'");
        return DP_OK;
    }
    return split_check(h, OPT_OP_GROUP_FREE, 0);
}

/* ---- comm_stats: the call counters count every call; reset zeroes them ---- */
static dp_status case_comm_stats(opt_ops_h *h) {
    opt_op op = OPT_OP_COMM_STATS;
    if (!opt_ops_has(h, OPT_OP_BARRIER)) {
        opt_ops_case c;
        opt_ops_case_init(&c, h, op, "counters");
        opt_ops_skip(&c, "comm_stats is checked by counting 'barrier' calls");
        return DP_OK;
    }
    h->res[op].ncases++;
    opt_comm_stats s;
    dp_status st = OPS_CALL(h->be, comm_stats, &s, 1);
    for (int i = 0; st == DP_OK && i < 3; i++) st = OPS_CALL(h->be, barrier, NULL);
    if (st == DP_OK) st = OPS_CALL(h->be, comm_stats, &s, 1);
    if (st != DP_OK) { opt_ops_fail(h, op, "returned '%s': %s", dp_status_name(st), dp_last_error()); return DP_OK; }
    if (s.calls[OPT_COLL_BARRIER] != 3 || s.sent[OPT_COLL_BARRIER] || s.recv[OPT_COLL_BARRIER])
        opt_ops_fail(h, op, "after 3 barriers: %llu calls, %llu/%llu bytes (expected 3 calls, 0 bytes)",
                     (unsigned long long)s.calls[OPT_COLL_BARRIER], (unsigned long long)s.sent[OPT_COLL_BARRIER],
                     (unsigned long long)s.recv[OPT_COLL_BARRIER]);
    else opt_ops_pass(h, op);
    st = OPS_CALL(h->be, comm_stats, &s, 0);
    if (st != DP_OK || s.calls[OPT_COLL_BARRIER] != 0)
        opt_ops_fail(h, op, "after a reset: %llu barrier calls (expected 0)", (unsigned long long)s.calls[OPT_COLL_BARRIER]);
    else opt_ops_pass(h, op);
    return DP_OK;
}

static dp_status case_set_timeout(opt_ops_h *h) {
    opt_op op = OPT_OP_SET_COLLECTIVE_TIMEOUT;
    h->res[op].ncases++;
    dp_status st = OPS_CALL(h->be, set_collective_timeout, 120.0);
    if (st != DP_OK) opt_ops_fail(h, op, "120 s refused: '%s': %s", dp_status_name(st), dp_last_error());
    else opt_ops_pass(h, op);
    const double bad[] = {0.0, -1.0, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = OPS_CALL(h->be, set_collective_timeout, bad[i]);
        if (st == DP_OK) opt_ops_fail(h, op, "accepted %g seconds (must be refused)", bad[i]);
        else opt_ops_pass(h, op);
    }
    return DP_OK;
}

const opt_ops_entry opt_ops_cases_coll[] = {
    {OPT_OP_ALLREDUCE_SUM, case_allreduce}, {OPT_OP_REDUCE_SCATTER_SUM, case_reduce_scatter},
    {OPT_OP_ALLGATHER, case_allgather}, {OPT_OP_ALLTOALL, case_alltoall}, {OPT_OP_BROADCAST, case_broadcast},
    {OPT_OP_SEND, case_send}, {OPT_OP_RECV, case_recv}, {OPT_OP_WAIT, case_wait},
    {OPT_OP_ALLGATHERV_BYTES, case_allgatherv}, {OPT_OP_BARRIER, case_barrier}, {OPT_OP_GROUP_SPLIT, case_group_split},
    {OPT_OP_GROUP_FREE, case_group_free}, {OPT_OP_COMM_STATS, case_comm_stats},
    {OPT_OP_SET_COLLECTIVE_TIMEOUT, case_set_timeout}, {OPT_OP_COUNT, NULL},
};
