/* optimized/tests/test_opt_cost.c — the analytic cost models (docs/models-of-cost.md)
 * against values computed by hand: the released parameter counts of the Llama 3
 * models, the ZeRO paper's per-parameter formulas and its Table 2 model sizes, shard
 * lengths, per-example buffers of each strategy, ring collective volumes. */
#include <string.h>

#include "common/test.h"
#include "optimized/opt_cost.h"

static void test_params(void) {
    /* released counts: 1 235 814 400, 3 212 749 824, 8 030 261 248 */
    T_CHECK(opt_cost_llama_params(&OPT_COST_LLAMA32_1B) == 1235814400LL, "1B %lld",
            (long long)opt_cost_llama_params(&OPT_COST_LLAMA32_1B));
    T_CHECK(opt_cost_llama_params(&OPT_COST_LLAMA32_3B) == 3212749824LL, "3B %lld",
            (long long)opt_cost_llama_params(&OPT_COST_LLAMA32_3B));
    T_CHECK(opt_cost_llama_params(&OPT_COST_LLAMA31_8B) == 8030261248LL, "8B %lld",
            (long long)opt_cost_llama_params(&OPT_COST_LLAMA31_8B));
    opt_cost_linear lin[8 * 7 + 1];
    opt_cost_llama m = {"t", 64, 32, 2, 4, 2, 64, 0};
    T_OK(opt_cost_llama_check(&m));
    int n = opt_cost_llama_linears(lin, &m, 57);
    T_CHECK(n == 15 && lin[1].p == 16 && lin[1].d == 32 && lin[6].p == 32 && lin[6].d == 64 && lin[14].p == 64,
            "linears %d", n);
    opt_cost_llama bad = {"bad", 64, 30, 2, 4, 2, 64, 0};
    T_CHECK(opt_cost_llama_check(&bad) == DP_ERR_INVALID, "heads not dividing dim accepted");
}

static void test_states(void) {
    const opt_cost_dtypes *mx = &OPT_COST_MIXED_ADAM;
    T_CLOSE(opt_cost_states_per_param(mx, 0, 64), 16, 0);
    T_CLOSE(opt_cost_states_per_param(mx, 1, 64), 4 + 12.0 / 64, 1e-15);
    T_CLOSE(opt_cost_states_per_param(mx, 2, 64), 2 + 14.0 / 64, 1e-15);
    T_CLOSE(opt_cost_states_per_param(mx, 3, 64), 16.0 / 64, 1e-15);
    T_CLOSE(opt_cost_states_per_param(&OPT_COST_F32_ADAM, 0, 1), 16, 0, "f32 Adam without master");
    /* ZeRO paper Table 2: 64 V100 (32 GB) fit 7.6 / 14.4 / 128 B parameters */
    T_CLOSE(32 / opt_cost_states_per_param(mx, 1, 64), 7.6, 0.05);
    T_CLOSE(32 / opt_cost_states_per_param(mx, 2, 64), 14.4, 0.05);
    T_CLOSE(32 / opt_cost_states_per_param(mx, 3, 64), 128, 1e-9);
    /* shards: ceil(n/N) each, the rest on the last ones, summing to n */
    int64_t sum = 0;
    for (int r = 0; r < 4; r++) sum += opt_cost_shard_len(10, 4, r);
    T_CHECK(sum == 10 && opt_cost_shard_len(10, 4, 0) == 3 && opt_cost_shard_len(10, 4, 3) == 1, "shards");
    T_CHECK(opt_cost_shard_len(2, 4, 3) == 0 && opt_cost_shard_len(2, 0, 0) == 0, "empty shards");
    opt_cost_states st;
    T_OK(opt_cost_model_states(&st, 10, mx, 2, 4, 3));
    T_CLOSE(st.params, 20, 0);
    T_CLOSE(st.grads, 2, 0);
    T_CLOSE(st.master + st.optim, 12, 0);
    T_CHECK(opt_cost_model_states(&st, 10, mx, 4, 4, 0) == DP_ERR_INVALID, "stage 4 accepted");
    T_CHECK(opt_cost_model_states(&st, 10, mx, 1, 4, 4) == DP_ERR_INVALID, "rank 4 of 4 accepted");
}

static void test_per_example(void) {
    const opt_cost_linear lin[2] = {{8, 4}, {100, 50}};
    opt_cost_perex pe;
    T_OK(opt_cost_per_example(&pe, OPT_COST_GRAD_SAMPLE, OPT_COST_RULE_FLOP, lin, 2, 3, 5, 4, 2));
    T_CLOSE(pe.persistent, 3.0 * (32 + 5000) * 4, 0);
    T_CLOSE(pe.norms, 3.0 * 2 * 8, 0);
    T_OK(opt_cost_per_example(&pe, OPT_COST_GHOST, OPT_COST_RULE_FLOP, lin, 2, 3, 5, 4, 1));
    T_CLOSE(pe.persistent, 0, 0);
    T_CLOSE(pe.transient, 3.0 * 2 * 25 * 4, 0);
    /* flop rule: layer 0: T (p+d) = 60 >= 32 -> instantiate (3*32*4 = 384); layer 1 ghost (600) */
    T_CHECK(!opt_cost_mixed_ghost(&lin[0], 5, OPT_COST_RULE_FLOP) && opt_cost_mixed_ghost(&lin[1], 5, OPT_COST_RULE_FLOP),
            "flop rule");
    T_CHECK(!opt_cost_mixed_ghost(&lin[0], 5, OPT_COST_RULE_MEMORY), "memory rule: 50 > 32");
    T_OK(opt_cost_per_example(&pe, OPT_COST_BOOK_KEEPING, OPT_COST_RULE_FLOP, lin, 2, 3, 5, 4, 1));
    T_CLOSE(pe.persistent, 3.0 * 5 * (8 + 100) * 4, 0);
    T_CLOSE(pe.transient, 600, 0);
    T_OK(opt_cost_per_example(&pe, OPT_COST_FUSED, OPT_COST_RULE_FLOP, lin, 2, 3, 5, 4, 1));
    T_CLOSE(pe.transient, 5000 * 4, 0);
    opt_cost_strategy s;
    T_CHECK(opt_cost_strategy_parse(&s, "book-keeping") && s == OPT_COST_BOOK_KEEPING, "parse");
    T_CHECK(!opt_cost_strategy_parse(&s, "bk"), "unknown strategy accepted");
}

static void test_collectives(void) {
    T_CLOSE(opt_cost_coll_sent(OPT_COST_ALL_REDUCE, 1000, 4), 1500, 0);
    T_CLOSE(opt_cost_coll_sent(OPT_COST_REDUCE_SCATTER, 1000, 4), 750, 0);
    T_CLOSE(opt_cost_coll_sent(OPT_COST_ALL_GATHER, 1000, 1), 0, 0);
    double c[OPT_COST_N_COLLECTIVES];
    T_OK(opt_cost_step_collectives(c, 100, 4, 2, 3, 0, 2));
    T_CLOSE(c[OPT_COST_REDUCE_SCATTER], 400, 0);
    T_CLOSE(c[OPT_COST_ALL_GATHER], 400, 0);
    T_CLOSE(c[OPT_COST_ALL_REDUCE], 0, 0);
    T_OK(opt_cost_step_collectives(c, 100, 8, 8, 0, 1, 2));
    T_CLOSE(c[OPT_COST_ALL_REDUCE], 1600, 0, "gradient + noise shares");
    /* LongShield §3.2: input-stationary does not grow with T, output-stationary does */
    opt_cost_linear l = {4096, 4096};
    T_CLOSE(opt_cost_cp_input_stationary(&l, 1, 2, 8), 4096.0 * 4096 * 2 * 7 / 8, 1e-6);
    T_CHECK(opt_cost_cp_output_stationary(&l, 1, 262144, 2, 8) > 2 * opt_cost_cp_output_stationary(&l, 1, 131072, 2, 8) - 1,
            "output-stationary linear in T");
}

static void test_peak(void) {
    /* 1B, infinitely many ranks, ZeRO-3, no DP: states vanish, peak = activations + gathered unit */
    opt_cost_setup s = {3, 0, 1, 0, OPT_COST_MIXED_GHOST, OPT_COST_RULE_MEMORY, 0, OPT_COST_MIXED_ADAM, {2, 0, 0, 8}};
    opt_cost_peak pk;
    T_OK(opt_cost_llama_peak(&pk, &OPT_COST_LLAMA32_1B, &s, 1, 1024));
    T_CLOSE(pk.states, 0, 0);
    T_CLOSE(pk.total, pk.activations + pk.gathered, 0);
    /* doubling B doubles activations */
    opt_cost_peak pk2;
    T_OK(opt_cost_llama_peak(&pk2, &OPT_COST_LLAMA32_1B, &s, 2, 1024));
    T_CLOSE(pk2.activations, 2 * pk.activations, 1e-3);
    /* checkpointing lowers activations; max T is monotone in capacity */
    s.act.checkpoint = 1;
    T_OK(opt_cost_llama_peak(&pk2, &OPT_COST_LLAMA32_1B, &s, 1, 1024));
    {   /* saving = tokens ((L - 1) block - L D act_bytes) */
        const opt_cost_llama *m = &OPT_COST_LLAMA32_1B;
        double blk = opt_cost_llama_block_act_per_token(m, &s.act, 1024);
        T_CLOSE(pk.activations - pk2.activations, 1024.0 * ((m->layers - 1) * blk - m->layers * m->dim * 2.0), 1e-3,
                "checkpointing saving");
    }
    int64_t a = opt_cost_llama_max_T(&OPT_COST_LLAMA32_1B, &s, 1, 40e9), b = opt_cost_llama_max_T(&OPT_COST_LLAMA32_1B, &s, 1, 80e9);
    T_CHECK(a > 0 && b >= a && (b & (b - 1)) == 0, "max T %lld %lld", (long long)a, (long long)b);
    s.cp = 3;
    T_CHECK(opt_cost_llama_peak(&pk2, &OPT_COST_LLAMA32_1B, &s, 1, 1024) == DP_ERR_INVALID, "cp not dividing T");
}

/* the engine's layout: the mlp 7-9-5-4 (P = 146), AdamW, f64, model states per rank
 * (replicated, zero1, zero2, zero3 at N = 1, 2, 4), derived by hand from docs/models-of-cost.md §8 */
static void test_engine(void) {
    const int64_t hidden[2] = {9, 5};
    int64_t numel[8];
    unsigned char rd[8];
    int n = opt_cost_engine_mlp_numel(numel, rd, 8, 7, hidden, 2, 4);
    T_CHECK(n == 6 && numel[0] == 63 && numel[5] == 4, "mlp tensors");
    /* zero3 includes the full model loaded once at start (P e = 1168 bytes on top of docs/zero.md's 4168, 2728) */
    const double want[3][4] = {{7008, 7008, 7008, 8176}, {7008, 5256, 4672, 5336}, {7008, 4424, 3536, 3896}};
    const int64_t ranks[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < 4; s++) {
            opt_cost_states st;
            T_OK(opt_cost_engine_states(&st, numel, n, 8, 2, s, ranks[i]));
            T_CHECK(st.total == want[i][s], "N %lld stage %d: %.0f, want %.0f", (long long)ranks[i], s, st.total,
                    want[i][s]);
        }
    double c[OPT_COST_N_COLLECTIVES];
    /* zero2 N=2: c = 73 elements, (N-1) c e = 584 for the reduce-scatter; the all-gather of the
     * parameters and of the private gradient 2 x 584 */
    T_OK(opt_cost_engine_step_sent(c, numel, rd, n, 8, 2, 2, 1));
    T_CLOSE(c[OPT_COST_REDUCE_SCATTER], 584, 0);
    T_CLOSE(c[OPT_COST_ALL_GATHER], 2 * 584, 0);
    T_CLOSE(c[OPT_COST_ALL_REDUCE], 0, 0);
    /* zero3 N=2: C = 75 (32 + 5 + 23 + 3 + 10 + 2); the backward reads W1, W2 (23 + 10); 2 passes */
    T_CHECK(rd[0] == 0 && rd[1] == 0 && rd[2] == 1 && rd[4] == 1 && rd[5] == 0, "backward reads");
    T_OK(opt_cost_engine_step_sent(c, numel, rd, n, 8, 3, 2, 2));
    T_CLOSE(c[OPT_COST_ALL_GATHER], (2.0 * (75 + 33) + 2 * 75) * 8, 0);
    T_OK(opt_cost_engine_step_sent(c, numel, rd, n, 8, 0, 4, 1));
    T_CLOSE(c[OPT_COST_ALL_REDUCE], 2.0 * 146 * 8 * 3, 0);
    int64_t ln[64];
    T_CHECK(opt_cost_engine_llama_numel(ln, NULL, 64, 64, 32, 2, 64, 0) == 21, "default llama: 21 tensors");
    int64_t tot = 0;
    for (int i = 0; i < 21; i++) tot += ln[i];
    T_CHECK(tot == 24736, "default llama: 24 736 elements, got %lld", (long long)tot);
}

int main(void) {
    test_engine();
    test_params();
    test_states();
    test_per_example();
    test_collectives();
    test_peak();
    return t_finish();
}
