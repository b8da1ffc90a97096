/* optimized/tests/test_zero_memory.c — the memory ledger's peak bytes of the model states
 * per rank match the ZeRO formulas of docs/zero.md "Memory" exactly (the ledger records
 * requested bytes: the allocator overhead is 0 by definition), for replicated, zero1 and
 * zero2, sgd-momentum (k = 1 state) and AdamW (k = 2), f64, f32, bf16 and fp16 (f32 master
 * weights of the optimizer state's size and layout, docs/precision.md). Run alone: N = 1;
 * optimized/tests/mpi_zero.sh runs it under mpirun -n 2 and -n 4. With e the element
 * size, P the parameters, c = ceil(P / N):
 *   replicated: params P e, grads (2 P + P) e,        optimizer state k P e
 *   zero1:      params P e, grads (2 N c + c) e,      optimizer state k c e
 *   zero2:      params P e, grads (N c + c + c) e,    optimizer state k c e
 *   zero3:      params C e, grads (P + C + C) e,      optimizer state k C e,
 *               C = sum_p ceil(n_p / N) (per-tensor partitions); plus the per-layer
 *               gathered parameters (tag gathered_params), released after each use
 * Also: the zero1/zero2 optimizer state at N > 1 is smaller than the replicated one
 * (the claim the formulas make), and every tag is back to 0 after opt_dpsgd_free. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/tests/mpi_test.h"
#include "optimized/dpsgd.h"
#include "optimized/ledger.h"
#include "optimized/tests/opt_test_tiny.h"

static void expect_bytes(uint64_t got, uint64_t want, const char *what, const char *shard, const char *optn,
                         const char *dt, int N) {
    T_CHECK(got == want, "%s %s %s %s N=%d: ledger peak %llu bytes, formula %llu", shard, optn, dt, what, N,
            (unsigned long long)got, (unsigned long long)want);
}

static void run(int use_mpi, opt_prec prec, opt_sharding sh, dp_optimizer optz, uint64_t seed) {
    const dp_dtype dt = opt_prec_backend_dtype(prec);
    dp_model_config mc;
    dp_model_config_default(&mc, DP_MLP);
    mc.in = 7; mc.hidden[0] = 9; mc.hidden[1] = 5; mc.classes = 4;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 24; c.q = 0.3; c.steps = 2; c.clip = 0.5; c.sigma = 0.7;
    c.seed.k = seed; c.key.k = seed ^ 0x5eedULL; c.opt = optz;
    if (optz == DP_OPT_SGD) c.momentum = 0.5;
    dp_model m;
    dp_dataset d;
    T_OK(dp_model_init(&m, &mc, c.seed));
    T_OK(dp_dataset_generate(&d, &mc, c.n, c.seed));
    opt_backend_config bc = {.name = "host", .dtype = dt, .threads = 1, .use_mpi = use_mpi};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    if (!be) { dp_model_free(&m); dp_dataset_free(&d); return; }
    opt_dp_options o = {.strategy = OPT_STRAT_GHOST, .sharding = sh, .prec = prec};
    opt_dpsgd s;
    T_OK(opt_dpsgd_init(&s, be, &c, &o, &m));
    /* peaks over the training steps (zero3's init loads the full model once, then keeps
     * only its partition: docs/zero.md "Memory") */
    opt_mem_reset_peaks(be);
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    for (int64_t k = 1; k <= c.steps; k++) T_OK(opt_dpsgd_step(&out, &s, &d, k));
    opt_mem_report r;
    opt_mem_get(&r, be);
    const uint64_t e = opt_backend_esize(be), P = (uint64_t)m.total, N = (uint64_t)be->comm.size;
    const uint64_t cc = (P + N - 1) / N, kst = optz == DP_OPT_SGD ? 1 : 2;
    uint64_t C3 = 0; /* zero3: sum_p ceil(n_p / N) */
    for (int p = 0; p < m.nparams; p++) C3 += ((uint64_t)m.params[p].numel + N - 1) / N;
    uint64_t grads = sh == OPT_SHARD_REPLICATED ? 3 * P
                     : sh == OPT_SHARD_ZERO1    ? 2 * N * cc + cc
                     : sh == OPT_SHARD_ZERO2    ? N * cc + 2 * cc
                                                : P + 2 * C3;
    uint64_t states = sh == OPT_SHARD_REPLICATED ? kst * P : kst * (sh == OPT_SHARD_ZERO3 ? C3 : cc);
    uint64_t params = sh == OPT_SHARD_ZERO3 ? C3 : P;
    /* bf16/fp16 (docs/precision.md "Memory"): f32 master weights laid out as the optimizer
     * state (sharded by zero1-3); the parameters are 2-byte half tensors (replicated, zero1,
     * zero2) or zero3's partition in f32 containers */
    uint64_t master = !opt_prec_is_half(prec) ? 0 : sh == OPT_SHARD_REPLICATED ? P : sh == OPT_SHARD_ZERO3 ? C3 : cc;
    const uint64_t pbytes = opt_prec_is_half(prec) && sh != OPT_SHARD_ZERO3 ? 2 * P : params * e;
    const char *sn = opt_sharding_names[sh], *on = optz == DP_OPT_SGD ? "sgd" : "adamw", *dn = opt_prec_names[prec];
    expect_bytes(r.peak[OPT_MEM_PARAMS], pbytes, "params", sn, on, dn, (int)N);
    expect_bytes(r.peak[OPT_MEM_GRADS], grads * e, "grads", sn, on, dn, (int)N);
    expect_bytes(r.peak[OPT_MEM_OPTSTATE], states * e, "optimizer_state", sn, on, dn, (int)N);
    expect_bytes(r.peak[OPT_MEM_MASTER], master * e, "master_weights", sn, on, dn, (int)N);
    expect_bytes(r.peak_model_states, pbytes + (grads + states + master) * e, "model_states", sn, on, dn, (int)N);
    if (N > 1 && sh != OPT_SHARD_REPLICATED && master)
        T_CHECK(master < P, "%s %s N=%llu: master weights %llu not below the replicated %llu", sn, dn,
                (unsigned long long)N, (unsigned long long)master, (unsigned long long)P);
    /* the mixed-precision model-state saving (DP-ZeRO): half parameters + sharded f32
     * master below the f32 run's parameters once N > 2 (zero1, zero2: 2 P + 4 ceil(P/N) < 4 P) */
    if (N > 2 && master && (sh == OPT_SHARD_ZERO1 || sh == OPT_SHARD_ZERO2))
        T_CHECK(pbytes + master * e < 4 * P, "%s %s N=%llu: half parameters + master %llu bytes not below the f32 "
                "parameters %llu", sn, dn, (unsigned long long)N, (unsigned long long)(pbytes + master * e),
                (unsigned long long)(4 * P));
    /* zero3: layers gathered and released (visible in the ledger), none left after a step;
     * at most two layers' tensors alive at once (the current one and the prefetch) */
    if (sh == OPT_SHARD_ZERO3) {
        uint64_t two = 0; /* an upper bound: the two largest layers of the mlp = all its tensors */
        for (int p = 0; p < m.nparams; p++) two += ((uint64_t)m.params[p].numel + N - 1) / N * N;
        T_CHECK(r.peak[OPT_MEM_GATHERED] > 0 && r.peak[OPT_MEM_GATHERED] <= two * e && r.cur[OPT_MEM_GATHERED] == 0,
                "zero3 %s %s N=%d: gathered parameters peak %llu (expected in (0, %llu]), current %llu (expected 0)", on,
                dn, (int)N, (unsigned long long)r.peak[OPT_MEM_GATHERED], (unsigned long long)(two * e),
                (unsigned long long)r.cur[OPT_MEM_GATHERED]);
    } else
        T_CHECK(r.peak[OPT_MEM_GATHERED] == 0, "%s: gathered parameters without zero3", sn);
    if (N > 1 && sh != OPT_SHARD_REPLICATED)
        T_CHECK(states < kst * P, "%s N=%llu: optimizer state %llu not below the replicated %llu", sn,
                (unsigned long long)N, (unsigned long long)states, (unsigned long long)(kst * P));
    T_CHECK(r.peak[OPT_MEM_ACTIVATIONS] > 0 && r.peak[OPT_MEM_PER_EXAMPLE] == 0,
            "%s: activations %llu (> 0 expected), per-example %llu (0 expected with ghost norms)", sn,
            (unsigned long long)r.peak[OPT_MEM_ACTIVATIONS], (unsigned long long)r.peak[OPT_MEM_PER_EXAMPLE]);
    if (be->comm.rank == 0)
        printf("%-10s %-5s %s N=%llu: model states %llu bytes per rank (params %llu, master %llu, grads %llu, "
               "optimizer %llu)\n", sn, on, dn, (unsigned long long)N, (unsigned long long)r.peak_model_states,
               (unsigned long long)r.peak[OPT_MEM_PARAMS], (unsigned long long)r.peak[OPT_MEM_MASTER],
               (unsigned long long)r.peak[OPT_MEM_GRADS], (unsigned long long)r.peak[OPT_MEM_OPTSTATE]);
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    opt_mem_get(&r, be);
    /* the backend's own scratch (GEMM workspaces) lives until the backend is destroyed */
    T_CHECK(r.cur_total == r.cur[OPT_MEM_SCRATCH], "%s: %llu bytes still recorded after opt_dpsgd_free", sn,
            (unsigned long long)(r.cur_total - r.cur[OPT_MEM_SCRATCH]));
    opt_backend_destroy(be);
    dp_model_free(&m);
    dp_dataset_free(&d);
}

/* zero1..3 with a backend lacking all-gather: a usage error naming the operation. */
static void check_no_allgather(void) {
    dp_model_config mc;
    dp_dpsgd_config c;
    dp_model m;
    opt_backend *be;
    if (!opt_test_tiny(&m, &mc, &c, &be, DP_F64)) return;
    be->ops.allgather = NULL;
    for (int sh = OPT_SHARD_ZERO1; sh < OPT_SHARD_COUNT; sh++) {
        opt_dp_options o = {.sharding = (opt_sharding)sh};
        opt_dpsgd s;
        dp_status st = opt_dpsgd_init(&s, be, &c, &o, &m);
        T_CHECK(st == DP_ERR_USAGE && strstr(dp_last_error(), "allgather"), "%s without allgather: status %d (%s)",
                opt_sharding_names[sh], (int)st, dp_last_error());
        if (st == DP_OK) opt_dpsgd_free(&s);
    }
    opt_dp_options o = {.sharding = OPT_SHARD_REPLICATED}; /* control: replicated needs no all-gather */
    opt_dpsgd s;
    T_OK(opt_dpsgd_init(&s, be, &c, &o, &m));
    opt_dpsgd_free(&s);
    opt_backend_destroy(be);
    dp_model_free(&m);
}

int main(void) {
    int use_mpi = t_mpi_start();
    if (use_mpi < 0) return 1;
    uint64_t seed = t_seed(31);
    if (!use_mpi) check_no_allgather();
    for (int sh = 0; sh < OPT_SHARD_COUNT; sh++)
        for (int pr = 0; pr < OPT_PREC_COUNT; pr++)
            for (int op = 0; op < 2; op++)
                run(use_mpi, (opt_prec)pr, (opt_sharding)sh, op ? DP_OPT_ADAMW : DP_OPT_SGD, seed);
    return t_mpi_finish(use_mpi);
}
