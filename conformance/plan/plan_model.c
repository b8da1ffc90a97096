/* conformance/plan/plan_model.c — the projection of one DP-SGD step on a layout (conformance/plan/plan.h,
 * docs/plan.md): memory per device, bytes per collective and group, the step's operations and
 * their work, and the step time on a device. The engine profile evaluates the formulas that
 * equal the engine's ledger and byte counters (optimized/opt_cost.h, docs/models-of-cost.md §8,
 * docs/longshield.md §6); the framework profile the papers' model (§2-§7). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/plan/plan.h"
#include "common/alloc.h"

#define N_(id, name, unit, what) name,
#define U_(id, name, unit, what) unit,
static const char *const OP_NAMES[] = {PLAN_OPS(N_)};
static const char *const OP_UNITS[] = {PLAN_OPS(U_)};
#undef N_
#undef U_
const char *plan_op_name(plan_op k) { return (unsigned)k < PLAN_N_OPS ? OP_NAMES[k] : "?"; }
const char *plan_op_unit(plan_op k) { return (unsigned)k < PLAN_N_OPS ? OP_UNITS[k] : "?"; }
#define S_(n) #n,
const char *const plan_mem_names[PLAN_N_MEMS] = {PLAN_MEMS(S_)};
const char *const plan_coll_names[PLAN_N_COLLS] = {REPRO_COLLS(S_)};
#undef S_

#define MAXT 4096 /* tensors of the engine's llama: 1 + 9 L + 2 */

int64_t plan_chunk(int64_t batch, int64_t dp, int64_t micro_batches) {
    const int64_t share = (batch + dp - 1) / dp;
    return (share + micro_batches - 1) / micro_batches;
}

dp_status plan_job_check(const plan_job *job, plan_profile prof) {
    const opt_cost_llama *m = &job->model;
    DP_TRY(opt_cost_llama_check(m));
    if (prof == PLAN_ENGINE && m->kv_heads != m->heads)
        return dp_error(DP_ERR_INVALID, "--kv-heads: the engine's llama has kv_heads = heads (got %lld of %lld); use "
                        "--profile framework for grouped-query attention", (long long)m->kv_heads, (long long)m->heads);
    if (prof == PLAN_ENGINE && 9 * m->layers + 3 > MAXT)
        return dp_error(DP_ERR_INVALID, "--layers: at most %d for the engine profile", (MAXT - 3) / 9);
    if (job->batch < 1 || job->batch > ((int64_t)1 << 40))
        return dp_error(DP_ERR_INVALID, "--batch must be in [1, 2^40] (got %lld)", (long long)job->batch);
    if (job->seq < 1 || job->seq > ((int64_t)1 << 24))
        return dp_error(DP_ERR_INVALID, "--seq must be in [1, 2^24] (got %lld)", (long long)job->seq);
    if (job->micro_batches < 1 || job->micro_batches > job->batch)
        return dp_error(DP_ERR_INVALID, "--micro-batches must be in [1, batch] (got %lld)", (long long)job->micro_batches);
    if (job->elem_bytes != 2 && job->elem_bytes != 4 && job->elem_bytes != 8)
        return dp_error(DP_ERR_INVALID, "element size must be 2, 4 or 8 bytes (got %d)", job->elem_bytes);
    if (job->n_states < 0 || job->n_states > 2)
        return dp_error(DP_ERR_INVALID, "optimizer states must be 0..2 (got %d)", job->n_states);
    return DP_OK;
}

/* ------------------------------------------------------------------ layouts ---- */
/* The engine's refusals (docs/longshield.md §1, docs/zero.md §1): why it does not run a layout. */
static int engine_refuses(char *why, size_t n, const plan_job *job, const plan_layout *lay,
                          const int64_t *numel, int nt) {
    if (lay->cp > 1 && lay->zero == 3) return snprintf(why, n, "--cp with zero3 is refused by the engine"), 1;
    if (lay->cp > 1 && job->strategy != OPT_COST_GRAD_SAMPLE)
        return snprintf(why, n, "--cp needs --strategy grad-sample in the engine"), 1;
    if (lay->cp > job->seq) return snprintf(why, n, "--cp %lld exceeds --seq %lld", (long long)lay->cp, (long long)job->seq), 1;
    if (job->checkpoint && (job->strategy != OPT_COST_GRAD_SAMPLE || lay->zero == 3))
        return snprintf(why, n, "--checkpoint block needs grad-sample and no zero3 in the engine"), 1;
    if (job->checkpoint && lay->cp > 1) return snprintf(why, n, "--checkpoint with --cp is not modelled here"), 1;
    if (lay->cp > 1 && (job->model.tied || job->model.ffn <= job->model.dim || job->model.vocab < job->model.dim))
        return snprintf(why, n, "the engine's --cp bytes are modelled for an untied llama with F > D and V >= D"), 1;
    if (lay->cp > 1 && job->micro_batches != 1) return snprintf(why, n, "--cp with micro-batches is not modelled"), 1;
    if (lay->zero == 3)
        for (int i = 0; i < nt; i++)
            if (numel[i] < lay->dp) return snprintf(why, n, "zero3: a tensor has %lld elements, fewer than %lld shards",
                                                    (long long)numel[i], (long long)lay->dp), 1;
    if (lay->zero > 0 && lay->dp > ((int64_t)1 << 16)) return snprintf(why, n, "the engine's --dp is at most 65536"), 1;
    return 0;
}

/* ------------------------------------------------------- the engine's memory ---- */
/* Mixed-ghost choice of the engine (docs/engine.md §4): the flop rule. */
static int layer_inst(const plan_job *job, int64_t T, int64_t p, int64_t d) {
    const opt_cost_linear l = {p, d};
    switch (job->strategy) {
    case OPT_COST_GRAD_SAMPLE: return 1;
    case OPT_COST_MIXED_GHOST:
    case OPT_COST_BOOK_KEEPING: return !opt_cost_mixed_ghost(&l, T, OPT_COST_RULE_FLOP);
    default: return 0;
    }
}

/* The engine's linear parameters in canonical tensor order: -1 for a direct one (gains, the
 * untied embedding), else [p, d]; the tied embedding/head is instantiated (M_INST). */
static void engine_linear(int64_t *p, int64_t *d, const plan_job *job, int t) {
    const int64_t D = job->model.dim, F = job->model.ffn, V = job->model.vocab, L = job->model.layers;
    *p = *d = -1;
    if (t == 0) { if (job->model.tied) { *p = V; *d = D; } return; }
    if (t == 1 + 9 * L) return; /* final norm */
    if (t == 2 + 9 * L) { *p = V; *d = D; return; } /* untied lm_head */
    const int j = (t - 1) % 9;
    if (j == 0 || j == 5) return; /* gains */
    if (j <= 4) { *p = D; *d = D; } else if (j <= 7) { *p = F; *d = D; } else { *p = D; *d = F; }
}

/* zero3's gathered tensors: the current unit and the prefetched next one, over the forward
 * (embedding, blocks, final norm, head) and backward (head, final norm, blocks) orders. */
static double gathered_peak(const int64_t *numel, int nt, int64_t N, int64_t L, int tied, int e) {
    double unit[MAXT];
    int nu = 0;
    unit[nu++] = (double)(N * ((numel[0] + N - 1) / N));
    for (int64_t l = 0; l < L; l++) {
        double s = 0;
        for (int j = 0; j < 9; j++) s += (double)(N * ((numel[1 + 9 * l + j] + N - 1) / N));
        unit[nu++] = s;
    }
    unit[nu++] = (double)(N * ((numel[1 + 9 * L] + N - 1) / N)); /* final norm */
    unit[nu++] = (double)(N * ((numel[tied ? 0 : nt - 1] + N - 1) / N)); /* the head (tied: the embedding again) */
    double peak = 0;
    for (int i = 0; i + 1 < nu; i++)
        if (unit[i] + unit[i + 1] > peak) peak = unit[i] + unit[i + 1];
    return peak * e;
}

static void engine_memory(plan_result *r, const plan_job *job, const plan_layout *lay,
                          const int64_t *numel, int nt) {
    const opt_cost_llama *m = &job->model;
    const int e = job->elem_bytes;
    const int64_t N = lay->dp, Bc = r->chunk, T = job->seq;
    opt_cost_states st;
    opt_cost_engine_states(&st, numel, nt, e, job->n_states, lay->zero, N);
    opt_cost_parts pt;
    opt_cost_engine_parts(&pt, numel, nt, N);
    r->mem[PLAN_MEM_params] = st.params;
    r->mem[PLAN_MEM_grads] = st.grads;
    r->mem[PLAN_MEM_optimizer_state] = st.optim;
    r->mem[PLAN_MEM_master_weights] = 0;
    /* ghost's weighted second backward: ghost and mixed-ghost, flat clipping, not under zero3 */
    const int second = job->dp && (job->strategy == OPT_COST_GHOST || job->strategy == OPT_COST_MIXED_GHOST) &&
                       lay->zero != 3;
    r->mem[PLAN_MEM_activations] =
        opt_cost_engine_llama_tape(Bc, T, m->vocab, m->dim, m->layers, m->heads, m->ffn, e, second, lay->zero == 3);
    double inst = 0;
    for (int t = 0; t < nt; t++) {
        int64_t p, d;
        engine_linear(&p, &d, job, t);
        if (p > 0 && layer_inst(job, T, p, d)) inst += (double)numel[t];
        else if (p > 0 && m->tied && t == 0) inst += (double)numel[t]; /* tied: instantiated whatever the rule */
    }
    r->mem[PLAN_MEM_per_example] = job->dp ? (double)Bc * inst * e : 0;
    r->mem[PLAN_MEM_workspace] = job->dp ? 2.0 * e * ((double)Bc + 1) : 0; /* [G, Bc] norms and factors, G = 1 */
    r->mem[PLAN_MEM_comm_buffers] = lay->zero == 3 ? (double)(N * pt.C) * e
                                    : lay->zero > 0 ? (double)(pt.c + N * pt.c) * e : 0;
    r->mem[PLAN_MEM_gathered_params] = lay->zero == 3 ? gathered_peak(numel, nt, N, m->layers, m->tied, e) : 0;
}

/* ---------------------------------------------------- the framework's memory ---- */
static dp_status framework_memory(plan_result *r, const plan_job *job, const plan_layout *lay) {
    /* FSDP over every device (dp x cp, TorchTitan's sharding), bf16 + f32 AdamW, flash attention,
     * logits upcast to f32, book-keeping with fastDP's memory rule, V2's per-example sharding
     * under CP (docs/models-of-cost.md §2-§7; the setup of conformance/reproduce/repro_memory.c) */
    opt_cost_setup s = {lay->zero, lay->dp * lay->cp, lay->cp, lay->cp > 1, job->strategy, OPT_COST_RULE_MEMORY,
                        job->dp, OPT_COST_MIXED_ADAM, {2, job->checkpoint, 0, 8}};
    if (job->n_states != 2) { s.dt.n_states = job->n_states; }
    opt_cost_peak pk;
    const int64_t T = (job->seq + lay->cp - 1) / lay->cp * lay->cp; /* cp divides T in the model */
    DP_TRY(opt_cost_llama_peak(&pk, &job->model, &s, r->chunk, T));
    opt_cost_states st;
    DP_TRY(opt_cost_model_states(&st, opt_cost_llama_params(&job->model), &s.dt, lay->zero, lay->dp * lay->cp, 0));
    r->mem[PLAN_MEM_params] = st.params;
    r->mem[PLAN_MEM_grads] = st.grads;
    r->mem[PLAN_MEM_master_weights] = st.master;
    r->mem[PLAN_MEM_optimizer_state] = st.optim;
    r->mem[PLAN_MEM_activations] = pk.activations;
    r->mem[PLAN_MEM_per_example] = pk.per_example;
    r->mem[PLAN_MEM_gathered_params] = pk.gathered;
    return DP_OK;
}

/* ------------------------------------------------------------ communication ---- */
/* Ring steps of a collective over G ranks: all-reduce 2 (G - 1), the others G - 1 (docs/plan.md §6). */
static double coll_steps(plan_coll k, int64_t G, int ring) {
    if (G <= 1) return 0;
    if (k == REPRO_COLL_allreduce_sum && ring) return 2.0 * (double)(G - 1);
    if (k == REPRO_COLL_send) return 1;
    return (double)(G - 1);
}

static void engine_bytes(plan_result *r, const plan_job *job, const plan_layout *lay,
                         const int64_t *numel, const unsigned char *rd, int nt) {
    const int e = job->elem_bytes;
    const int64_t N = lay->dp, M = lay->cp, k = job->micro_batches;
    if (M == 1) {
        double s[OPT_COST_N_COLLECTIVES];
        opt_cost_engine_step_sent(s, numel, rd, nt, e, lay->zero, N, k);
        r->sent_dp[REPRO_COLL_allreduce_sum] = s[OPT_COST_ALL_REDUCE];
        r->sent_dp[REPRO_COLL_reduce_scatter_sum] = s[OPT_COST_REDUCE_SCATTER];
        r->sent_dp[REPRO_COLL_allgather] = s[OPT_COST_ALL_GATHER];
        /* calls per step: replicated 1 all-reduce; zero1 + 4 all-gathers; zero2 a reduce-scatter and
         * 4 all-gathers; zero3 a reduce-scatter, per chunk one gather per tensor of the forward and of
         * the backward, and the 4 step gathers (docs/zero.md §5) */
        int nb = 0;
        for (int t = 0; t < nt; t++) nb += rd[t];
        if (lay->zero <= 1) r->calls_dp[REPRO_COLL_allreduce_sum] = 1;
        if (lay->zero == 1 || lay->zero == 2) r->calls_dp[REPRO_COLL_allgather] = 4;
        if (lay->zero >= 2) r->calls_dp[REPRO_COLL_reduce_scatter_sum] = 1;
        if (lay->zero == 3) r->calls_dp[REPRO_COLL_allgather] = (double)k * (nt + nb) + 4;
        /* a tied head is gathered again at the end of every forward (optimized/engine.c: the embedding
         * unit, then the head unit), which opt_cost_engine_step_sent does not count */
        if (lay->zero == 3 && job->model.tied) {
            r->sent_dp[REPRO_COLL_allgather] += (double)k * (double)((numel[0] + N - 1) / N) * (double)(N - 1) * e;
            r->calls_dp[REPRO_COLL_allgather] += (double)k;
        }
        return;
    }
    /* CP (docs/longshield.md §6): the CP group's bytes of CP rank 1 for the rank's examples, and the
     * DP group's on the packed slices L (§5 and §6's table) */
    const opt_cost_llama *m = &job->model;
    const int64_t b = r->chunk * k, V = m->vocab, D = m->dim, L = m->layers, F = m->ffn, T = job->seq;
    double s[OPT_COST_N_COLLECTIVES];
    opt_cost_engine_cp_sent(s, V, D, L, F, b, T, M, lay->cp_output, e);
    r->sent_cp[REPRO_COLL_reduce_scatter_sum] = s[OPT_COST_REDUCE_SCATTER];
    r->sent_cp[REPRO_COLL_allgather] = s[OPT_COST_ALL_GATHER];
    r->sent_cp[REPRO_COLL_alltoall] = s[OPT_COST_ALL_TO_ALL];
    const int64_t Bq = (b + M - 1) / M, rounds = (b + Bq - 1) / Bq;
    const int nlin = (int)(7 * L + 1);
    r->calls_cp[REPRO_COLL_reduce_scatter_sum] = (double)(lay->cp_output ? 2 * L + 2 : nt) * (double)rounds;
    r->calls_cp[REPRO_COLL_allgather] = 4.0 * (double)L + 4 + (lay->cp_output ? 4.0 * (double)L + 1 : 0);
    r->calls_cp[REPRO_COLL_alltoall] = lay->cp_output ? nlin : 0;
    r->calls_cp[REPRO_COLL_allreduce_sum] = 1 + nt; /* per-example losses, then squared norms per parameter */
    if (N > 1) {
        /* packed slice elements: rows ceil(R_p / M) c_p (down by columns under the output pattern) */
        const double CD = (double)((D + M - 1) / M), CF = (double)((F + M - 1) / M), CV = (double)((V + M - 1) / M);
        const double Lpk = (double)(2 * L + 1) * CD + 2 * CV * (double)D +
                           (double)L * (4 * CD * (double)D + 2 * CF * (double)D +
                                        (lay->cp_output ? (double)D * CF : CD * (double)F));
        const double c = ceil(Lpk / (double)N), f = (double)(N - 1) * e;
        if (lay->zero == 0) { r->sent_dp[REPRO_COLL_allreduce_sum] = 2 * Lpk * f; r->calls_dp[REPRO_COLL_allreduce_sum] = 1; }
        if (lay->zero == 1) {
            r->sent_dp[REPRO_COLL_allreduce_sum] = 2 * Lpk * f;
            r->sent_dp[REPRO_COLL_allgather] = 2 * c * f;
            r->calls_dp[REPRO_COLL_allreduce_sum] = 1;
            r->calls_dp[REPRO_COLL_allgather] = 2;
        }
        if (lay->zero == 2) {
            r->sent_dp[REPRO_COLL_reduce_scatter_sum] = c * f;
            r->sent_dp[REPRO_COLL_allgather] = 4 * c * f;
            r->calls_dp[REPRO_COLL_reduce_scatter_sum] = 1;
            r->calls_dp[REPRO_COLL_allgather] = 4;
        }
    }
}

/* Ring collectives of a framework step (docs/models-of-cost.md §5-§6): FSDP over dp x cp, the CP
 * group's KV ring and the per-example gradients' reduce-scatter (input-stationary). */
static dp_status framework_bytes(plan_result *r, const plan_job *job, const plan_layout *lay) {
    const opt_cost_llama *m = &job->model;
    const int64_t W = lay->dp * lay->cp, M = lay->cp, Psi = opt_cost_llama_params(m);
    double pay[OPT_COST_N_COLLECTIVES];
    opt_cost_step_collectives(pay, Psi, 2, 2, lay->zero, 0, W);
    const double chunks = (double)job->micro_batches;
    r->sent_dp[REPRO_COLL_allreduce_sum] = opt_cost_coll_sent(OPT_COST_ALL_REDUCE, pay[OPT_COST_ALL_REDUCE], W);
    r->sent_dp[REPRO_COLL_reduce_scatter_sum] = opt_cost_coll_sent(OPT_COST_REDUCE_SCATTER, pay[OPT_COST_REDUCE_SCATTER], W);
    r->sent_dp[REPRO_COLL_allgather] = chunks * opt_cost_coll_sent(OPT_COST_ALL_GATHER, pay[OPT_COST_ALL_GATHER], W);
    const double units = (double)m->layers + 2;
    r->calls_dp[REPRO_COLL_allreduce_sum] = lay->zero == 0 && W > 1 ? units : 0; /* bucketed per unit */
    r->calls_dp[REPRO_COLL_reduce_scatter_sum] = lay->zero > 0 && W > 1 ? units : 0;
    r->calls_dp[REPRO_COLL_allgather] = lay->zero > 0 && W > 1 ? (lay->zero == 3 ? 2 * chunks : 1) * units : 0;
    if (M > 1) {
        /* ring attention: k and v blocks [B, T/M, K] passed M - 1 times forward, twice that backward */
        const double K = (double)(m->dim / m->heads * m->kv_heads), Tl = (double)((job->seq + M - 1) / M);
        const double kv = 2.0 * (double)r->chunk * Tl * K * 2;
        r->sent_cp[REPRO_COLL_send] = chunks * (double)m->layers * 3.0 * kv * (double)(M - 1);
        r->calls_cp[REPRO_COLL_send] = chunks * (double)m->layers * 3.0 * (double)(M - 1);
        if (job->dp && job->strategy == OPT_COST_GRAD_SAMPLE) { /* V2: per-example gradients reduce-scattered */
            const int cap = (int)m->layers * 7 + 1;
            opt_cost_linear *lin = dp_malloc(sizeof *lin * (size_t)cap);
            if (!lin) return DP_ERR_NOMEM; /* never a silently smaller byte count */
            double sum = 0;
            int n = opt_cost_llama_linears(lin, m, cap);
            for (int i = 0; i < n; i++) sum += opt_cost_cp_input_stationary(&lin[i], r->chunk, 2, M);
            dp_free(lin);
            r->sent_cp[REPRO_COLL_reduce_scatter_sum] = chunks * sum;
            r->calls_cp[REPRO_COLL_reduce_scatter_sum] = chunks * (double)(7 * m->layers + 1);
        }
    }
    return DP_OK;
}

/* ------------------------------------------------------------- the operations ---- */
/* Work of one chunk of Bc examples of Tl positions on one device (docs/plan.md §4). */
static dp_status step_work(double *w, const plan_job *job, int64_t Bc, int64_t Tl, int64_t Tq, int64_t Tatt, int zero3,
                      plan_profile prof) {
    const opt_cost_llama *m = &job->model;
    const double B = (double)Bc, r = B * (double)Tl, D = (double)m->dim, F = (double)m->ffn, V = (double)m->vocab,
                 L = (double)m->layers, K = (double)(m->dim / m->heads * m->kv_heads), Ta = (double)Tatt;
    const double S = L * (2 * D * D + 2 * D * K + 3 * D * F) + V * D; /* sum p d of the linear layers */
    /* forward + input gradients (every linear, lm_head included; tok_emb is a lookup) */
    w[PLAN_OP_GEMM] += 4 * r * S;
    w[PLAN_OP_ATTN] += 12 * B * (double)Tq * Ta * D * L;
    /* activation passes: per block 2 norms fwd + 2 bwd (D), rope 2 + 2 (D), 2 + 2 adds (D), swiglu
     * fwd + bwd (3 F), the head's norm (2 D), cross-entropy fwd + bwd (2 V), the embedding (2 D) */
    w[PLAN_OP_ELEM] += r * (L * (12 * D + 3 * F) + 4 * D + 2 * V);
    if (!job->dp) { w[PLAN_OP_GEMM] += 2 * r * S; return DP_OK; }
    /* the weighted second backward: the engine's (not under zero3, whose per-layer gathers every rank
     * must walk); a framework's ghost clipping always (Li et al.'s second backpropagation) */
    const int second = (job->strategy == OPT_COST_GHOST || job->strategy == OPT_COST_MIXED_GHOST) &&
                       (!zero3 || prof == PLAN_FRAMEWORK);
    const int cap = (int)m->layers * 7 + 1;
    opt_cost_linear *lin = dp_malloc(sizeof *lin * (size_t)cap);
    if (!lin) return DP_ERR_NOMEM; /* never a silently smaller work */
    const int n = opt_cost_llama_linears(lin, m, cap);
    for (int i = 0; i < n; i++) {
        const double p = (double)lin[i].p, d = (double)lin[i].d, pd = p * d;
        const int inst = job->strategy == OPT_COST_GRAD_SAMPLE ||
                         ((job->strategy == OPT_COST_MIXED_GHOST || job->strategy == OPT_COST_BOOK_KEEPING) &&
                          !opt_cost_mixed_ghost(&lin[i], Tl, prof == PLAN_ENGINE ? OPT_COST_RULE_FLOP
                                                                                      : OPT_COST_RULE_MEMORY));
        if (inst) { /* G_b^T A_b per example, its squared norm, its clipped sum */
            w[PLAN_OP_BGEMM] += 2 * r * pd;
            w[PLAN_OP_PEELEM] += 2 * B * pd;
            if (second) continue;
        } else if (job->strategy == OPT_COST_FUSED) {
            w[PLAN_OP_BGEMM] += 2 * r * pd; /* streaming per-example blocks for the norms */
            w[PLAN_OP_GEMM] += 2 * r * pd;  /* bk_gemm */
        } else {
            w[PLAN_OP_GHOST] += 2 * B * (double)Tl * (double)Tl * (p + d) + B * (double)Tl * (double)Tl;
            if (!second) w[PLAN_OP_GEMM] += 2 * r * pd; /* bk_gemm */
        }
    }
    dp_free(lin);
    /* direct per-example rows (gains; the untied embedding table [B, V, D]): norms and clipped sums */
    w[PLAN_OP_PEELEM] += 2 * B * ((2 * L + 1) * D + (m->tied ? 0 : V * D));
    if (second) { /* the weighted second backward: input and summed weight gradients again */
        w[PLAN_OP_GEMM] += 4 * r * S;
        w[PLAN_OP_ATTN] += 8 * B * (double)Tq * Ta * D * L;
        w[PLAN_OP_ELEM] += r * (L * (6 * D + 2 * F) + 2 * D + V);
    }
    return DP_OK;
}

/* ------------------------------------------------------------------- time ---- */
static double op_seconds(const plan_device *dev, plan_op k, double work, int elem_bytes) {
    if (work <= 0) return 0;
    if (dev->measured) return work * dev->sec_per_unit[k];
    /* roofline: FLOPs at the GEMM or attention rate; element passes at the memory bandwidth
     * (elementwise: 3 accesses per element; per-example passes: 2; noise: 1 write; optimizer:
     * read gradient, parameter and states, write parameter and states: 2 (2 + n_states)
     * accesses of 4 bytes; allocation: first touch, one write per byte) */
    switch (k) {
    case PLAN_OP_ATTN: return work / dev->flops_attn;
    case PLAN_OP_GEMM: case PLAN_OP_BGEMM: case PLAN_OP_GHOST: return work / dev->flops;
    case PLAN_OP_ELEM: return work * 3.0 * elem_bytes / dev->mem_bw;
    case PLAN_OP_PEELEM: return work * 2.0 * elem_bytes / dev->mem_bw;
    case PLAN_OP_NOISE: return work * 4.0 / dev->mem_bw;
    case PLAN_OP_OPTIM: return work * 4.0 * 8.0 / dev->mem_bw;
    case PLAN_OP_ALLOC: return work / dev->mem_bw;
    default: return 0;
    }
}

/* The link a group of G consecutive-stride ranks uses: inside a node when the whole group fits
 * in one (CP ranks are consecutive world ranks; a DP group strides by M). */
static const plan_link *group_link(const plan_device *dev, int64_t G, int64_t stride) {
    const int64_t dpn = dev->devices_per_node > 0 ? dev->devices_per_node : 1;
    return G * stride <= dpn ? &dev->intra : &dev->inter;
}

static double comm_seconds(const double *sent, const double *calls, int64_t G, const plan_link *lk, int ring) {
    double t = 0;
    for (int k = 0; k < PLAN_N_COLLS; k++)
        if (calls[k] > 0 || sent[k] > 0) t += sent[k] / lk->bw + calls[k] * coll_steps((plan_coll)k, G, ring) * lk->lat;
    return t;
}

dp_status plan_project(plan_result *out, const plan_job *job, const plan_layout *lay,
                            const plan_device *dev, plan_profile prof) {
    memset(out, 0, sizeof *out);
    DP_TRY(plan_job_check(job, prof));
    if (lay->dp < 1 || lay->cp < 1 || lay->dp > ((int64_t)1 << 24) || lay->cp > ((int64_t)1 << 24) || lay->zero < 0 ||
        lay->zero > 3)
        return dp_error(DP_ERR_INVALID, "layout: need 1 <= dp, cp <= 2^24 and zero 0..3");
    const opt_cost_llama *m = &job->model;
    out->supported = 1;
    out->chunk = plan_chunk(job->batch, lay->dp, job->micro_batches);
    out->tokens_local = (job->seq + lay->cp - 1) / lay->cp;
    int64_t numel[MAXT];
    unsigned char rd[MAXT];
    int nt = 0;
    if (prof == PLAN_ENGINE) {
        nt = opt_cost_engine_llama_numel(numel, rd, MAXT, m->vocab, m->dim, m->layers, m->ffn, m->tied);
        if (engine_refuses(out->why, sizeof out->why, job, lay, numel, nt)) { out->supported = 0; return DP_OK; }
        if (lay->cp == 1) engine_memory(out, job, lay, numel, nt);
        engine_bytes(out, job, lay, numel, rd, nt);
    } else {
        if (lay->cp > 1 && job->seq % lay->cp) {
            snprintf(out->why, sizeof out->why, "--cp %lld must divide --seq %lld in the framework model",
                     (long long)lay->cp, (long long)job->seq);
            out->supported = 0;
            return DP_OK;
        }
        DP_TRY(framework_memory(out, job, lay));
        DP_TRY(framework_bytes(out, job, lay));
    }
    if (prof == PLAN_ENGINE && lay->cp > 1) {
        snprintf(out->why, sizeof out->why, "the engine's CP activations are not modelled: memory shows the states only");
        opt_cost_states st;
        opt_cost_engine_states(&st, numel, nt, job->elem_bytes, job->n_states, 0, 1);
        out->mem[PLAN_MEM_params] = st.params;
    }
    for (int i = 0; i < PLAN_N_MEMS; i++) out->mem_total += out->mem[i];
    out->fits = dev->capacity <= 0 || out->mem_total <= dev->capacity;

    /* work per device per step: every chunk of the rank's share */
    const int64_t share = (job->batch + lay->dp - 1) / lay->dp;
    /* attention queries per device: the framework's ring attention T / M; the engine's all-gather
     * attention computes the whole sequence on every CP rank (docs/longshield.md §3) */
    const int64_t Tl = out->tokens_local, Tq = prof == PLAN_FRAMEWORK ? Tl : job->seq;
    DP_TRY(step_work(out->work, job, share, Tl, Tq, job->seq, lay->zero == 3, prof));
    if (prof == PLAN_FRAMEWORK) out->work[PLAN_OP_ATTN] *= 0.5; /* flash attention skips the masked half */
    const double P = (double)opt_cost_llama_params(m);
    double shard = P;
    if (lay->zero >= 1) shard = ceil(P / (double)(prof == PLAN_FRAMEWORK ? lay->dp * lay->cp : lay->dp));
    if (prof == PLAN_ENGINE && lay->cp > 1) shard = ceil(P / (double)lay->cp);
    /* noise: replicated and zero1 draw the whole gradient on one rank (single mode); zero2 and zero3
     * their shard. The update: the shard; the engine also copies S and Z to the host every step */
    out->work[PLAN_OP_NOISE] = job->dp ? (lay->zero >= 2 ? shard : P) : 0;
    out->work[PLAN_OP_OPTIM] = shard + (prof == PLAN_ENGINE ? 2 * P : 0);
    out->work[PLAN_OP_ALLOC] = (double)job->micro_batches *
                               (out->mem[PLAN_MEM_activations] + out->mem[PLAN_MEM_per_example] +
                                out->mem[PLAN_MEM_workspace]);
    for (int k = 0; k < PLAN_N_OPS; k++) {
        out->t_op[k] = op_seconds(dev, (plan_op)k, out->work[k], job->elem_bytes);
        out->t_compute += out->t_op[k];
    }
    /* host ranks sharing cores: their compute is stretched by ranks / cores on a node */
    const int64_t dpn = dev->devices_per_node > 0 ? dev->devices_per_node : 1;
    const double ranks_per_node = (double)(lay->dp * lay->cp < dpn ? lay->dp * lay->cp : dpn);
    if (dev->cores > 0 && ranks_per_node > dev->cores) out->t_compute *= ranks_per_node / dev->cores;
    /* collectives: the DP group strides by M, the CP group is M consecutive ranks */
    out->t_comm_dp = comm_seconds(out->sent_dp, out->calls_dp, lay->dp, group_link(dev, lay->dp, lay->cp), dev->ring);
    out->t_comm_cp = comm_seconds(out->sent_cp, out->calls_cp, lay->cp, group_link(dev, lay->cp, 1), dev->ring);
    /* overlap (docs/plan.md §6): the engine's host collectives block (all exposed); a framework
     * overlaps its collectives with the compute (FSDP prefetch, bucketed reduce-scatter, the KV
     * ring with attention): what exceeds the compute is exposed */
    const double comm = out->t_comm_dp + out->t_comm_cp;
    out->t_exposed = prof == PLAN_ENGINE ? comm : fmax(0.0, comm - out->t_compute);
    out->t_step = out->t_compute + out->t_exposed;
    out->tokens_per_s = out->t_step > 0 ? (double)job->batch * (double)job->seq / out->t_step / (double)(lay->dp * lay->cp)
                                        : 0;
    return DP_OK;
}
