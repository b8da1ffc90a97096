/* optimized/tests/test_opt_cost.c — the analytic cost models (docs/models-of-cost.md)
 * against values computed by hand: the released parameter counts of the Llama 3
 * models, the ZeRO paper's per-parameter formulas and its Table 2 model sizes, shard
 * lengths, per-example buffers of each strategy, ring collective volumes; the engine's
 * fused strategy (GPT-2 small by hand, the CUDA chunk rule), the engine's --cp bytes
 * against docs/longshield.md section 6 and against the section 3.2 formulas, FLOPs. */
#include <string.h>

#include "common/test.h"
#include "optimized/cuda/cu_plan.h"
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

/* docs/models-of-cost.md section 4b, by hand for GPT-2 small at B = 1 and 8 (f32, one group) */
static void test_engine_fused(void) {
    const double V = 50257, D = 768, head = V * D * 4;
    /* the CUDA chunk: floor(2^30 / (4 p d)) = 6 blocks of the head, 1 at B = 1 */
    T_CHECK(opt_cost_cuda_fused_chunk(1, 50257, 768, 4) == 1 && opt_cost_cuda_fused_chunk(8, 50257, 768, 4) == 6,
            "CUDA chunk of the GPT-2 head: %lld, %lld", (long long)opt_cost_cuda_fused_chunk(1, 50257, 768, 4),
            (long long)opt_cost_cuda_fused_chunk(8, 50257, 768, 4));
    T_CHECK(opt_cost_cuda_fused_chunk(8, 50257, 768, 4) == cu_fused_chunk(CU_FUSED_WS_BYTES, 8, 50257, 768),
            "the rule of optimized/cuda/cu_plan.h");
    T_CHECK(opt_cost_cuda_fused_chunk(3, 1 << 16, 1 << 16, 4) == 1, "a block above the budget: one at a time");
    T_CHECK(opt_cost_cuda_fused_chunk(5, 10, 10, 8) == 5, "small blocks: the whole chunk");
    opt_cost_linear lin[2] = {{3 * 768, 768}, {50257, 768}};
    const int64_t direct[2] = {1024 * 768, 12 * 13 * 768 + 2 * 768};
    opt_cost_fused fu;
    for (int64_t B = 1; B <= 8; B *= 8) {
        T_OK(opt_cost_engine_fused(&fu, lin, 2, direct, 2, 50257 * 768, 1, B, 1, 4, 0));
        T_CLOSE(fu.blocks, (B == 1 ? 1 : 6) * head, 0, "blocks");
        T_CLOSE(fu.per_example, (double)B * head, 0);
        T_CLOSE(fu.tape_rows, (double)B * (V * D + 1024 * D + 12 * 13 * D + 2 * D) * 4, 0);
        T_CLOSE(fu.workspace, 2 * 4 * ((double)B + 1), 0);
        T_CLOSE(fu.total, fu.blocks + fu.per_example + fu.tape_rows + fu.workspace, 0);
    }
    T_OK(opt_cost_engine_fused(&fu, lin, 2, direct, 2, 50257 * 768, 0, 8, 1, 4, 2)); /* host, 2 threads, untied */
    T_CLOSE(fu.blocks, 2 * (V * D + 1) * 4, 0);
    T_CLOSE(fu.per_example, 0, 0);
    T_CHECK(opt_cost_engine_fused(&fu, lin, 2, direct, 2, 1, 0, 0, 1, 4, 0) == DP_ERR_INVALID, "B = 0 accepted");
    dp_clear_error();
}

/* the engine's --cp M bytes (docs/longshield.md section 6, optimized/tests/mpi_cp.sh's
 * formulas) for V 16, D 8, L 1, F 12 (P = 824 elements), b examples, T positions */
static void test_engine_cp(void) {
    double out[OPT_COST_N_COLLECTIVES];
    for (int64_t M = 2; M <= 4; M += 2)
        for (int64_t T = 64; T <= 1024; T *= 16) {
            const double b = 3, e = 8, Tmax = (double)((T + M - 1) / M), L = 824.0 / (double)M;
            T_OK(opt_cost_engine_cp_sent(out, 16, 8, 1, 12, 3, T, M, 0, 8));
            T_CLOSE(out[OPT_COST_REDUCE_SCATTER], b * L * e * (double)(M - 1), 0, "input rs");
            T_CLOSE(out[OPT_COST_ALL_GATHER], (4 * b * Tmax * 8 + 4 * L) * e * (double)(M - 1), 0);
            T_CLOSE(out[OPT_COST_ALL_TO_ALL], 0, 0);
            /* section 3.2's input-stationary formula summed over every parameter (M divides every row count) */
            const opt_cost_linear par[] = {{16, 8}, {8, 1}, {8, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 1},
                                           {12, 8}, {12, 8}, {8, 12}, {8, 1}, {16, 8}};
            double sum = 0;
            for (size_t i = 0; i < sizeof par / sizeof par[0]; i++) sum += opt_cost_cp_input_stationary(&par[i], 3, 8, M);
            T_CLOSE(out[OPT_COST_REDUCE_SCATTER], sum, 1e-9, "= the input-stationary formula over the parameters");
            const double cD = (double)((8 + M - 1) / M), cF = (double)((12 + M - 1) / M), cV = (double)((16 + M - 1) / M);
            T_OK(opt_cost_engine_cp_sent(out, 16, 8, 1, 12, 3, T, M, 1, 8));
            T_CLOSE(out[OPT_COST_REDUCE_SCATTER], b * (cV * 8 + 3 * cD) * e * (double)(M - 1), 0, "output rs");
            T_CLOSE(out[OPT_COST_ALL_TO_ALL], b * Tmax * (4 * cD + 3 * cF + cV) * e * (double)(M - 1), 0, "output a2a");
            T_CLOSE(out[OPT_COST_ALL_GATHER], (4 * b * Tmax * 8 + b * Tmax * 5 * 8 + 4 * L) * e * (double)(M - 1), 0);
            /* the all-to-all = the output-stationary formula's all-to-all terms (the larger dimension / M) */
            const opt_cost_linear lp[] = {{8, 8}, {8, 8}, {8, 8}, {8, 8}, {12, 8}, {12, 8}, {8, 12}, {16, 8}};
            double a2a = 0;
            for (size_t i = 0; i < sizeof lp / sizeof lp[0]; i++) {
                const double small = (double)(lp[i].p > lp[i].d ? lp[i].d : lp[i].p); /* the gathered side */
                a2a += opt_cost_cp_output_stationary(&lp[i], 3, T, 8, M) - b * Tmax * e * small * (double)(M - 1);
            }
            T_CLOSE(out[OPT_COST_ALL_TO_ALL], a2a, 1e-6, "= the output-stationary all-to-all terms");
        }
    T_CHECK(opt_cost_engine_cp_sent(out, 16, 8, 1, 6, 3, 64, 2, 0, 8) == DP_ERR_INVALID, "F < D accepted");
    dp_clear_error();
}

static void test_flops(void) {
    const opt_cost_linear lin[2] = {{100, 10}, {10, 1000}};
    T_CLOSE(opt_cost_linear_flops(lin, 2, 2, 5), 2.0 * 2 * 5 * (1000 + 10000), 0);
    /* T = 5: layer 0 ghost 2 B 25 110 = 11000 vs inst 2 B 5 1000 = 20000; layer 1 ghost 101000 > inst 200000? */
    const double g0 = 2 * 2 * 25 * 110.0, i0 = 2 * 2 * 5 * 1000.0, g1 = 2 * 2 * 25 * 1010.0, i1 = 2 * 2 * 5 * 10000.0;
    T_CLOSE(opt_cost_dp_clip_flops(lin, 2, 2, 5, 0), (g0 < i0 ? g0 : i0) + (g1 < i1 ? g1 : i1), 0);
    /* footnote 7: 2 T^2 = 50 < pd = 1000 and 10000: both ghost */
    T_CLOSE(opt_cost_dp_clip_flops(lin, 2, 2, 5, 1), g0 + g1, 0);
    T_CLOSE(opt_cost_dp_clip_flops(lin, 2, 2, 40, 1), 2 * 2 * 1600 * 1010.0, 0, "2 T^2 = 3200 >= 1000: no term");
    /* a forward without backward: one block and the head of B T tokens */
    const opt_cost_act a = {2, 0, 0, 4};
    const opt_cost_llama *m = &OPT_COST_LLAMA32_1B;
    T_CLOSE(opt_cost_llama_forward_act(m, &a, 2, 8),
            16.0 * (opt_cost_llama_block_act_per_token(m, &a, 8) + 2 * 2048 * 2 + 4 + 128256 * 6.0), 1e-6);
}

int main(void) {
    test_engine_fused();
    test_engine_cp();
    test_flops();
    test_engine();
    test_params();
    test_states();
    test_per_example();
    test_collectives();
    test_peak();
    return t_finish();
}
