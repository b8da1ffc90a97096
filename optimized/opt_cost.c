/* optimized/opt_cost.c — analytic memory and communication models (docs/models-of-cost.md). */
#include "optimized/opt_cost.h"
#include "common/alloc.h"

#include "optimized/cuda/cu_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* config.json of meta-llama/Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B */
const opt_cost_llama OPT_COST_LLAMA32_1B = {"Llama 3.2 1B", 128256, 2048, 16, 32, 8, 8192, 1};
const opt_cost_llama OPT_COST_LLAMA32_3B = {"Llama 3.2 3B", 128256, 3072, 28, 24, 8, 8192, 1};
const opt_cost_llama OPT_COST_LLAMA31_8B = {"Llama 3.1 8B", 128256, 4096, 32, 32, 8, 14336, 0};

/* bf16 working parameters and gradients, f32 master weights and 2 f32 AdamW states (16 B/param) */
const opt_cost_dtypes OPT_COST_MIXED_ADAM = {2, 2, 4, 4, 2};
/* f32 parameters, gradients and 2 AdamW states, no master copy (16 B/param) */
const opt_cost_dtypes OPT_COST_F32_ADAM = {4, 4, 0, 4, 2};

dp_status opt_cost_llama_check(const opt_cost_llama *m) {
    if (m->vocab < 2 || m->dim < 1 || m->layers < 1 || m->heads < 1 || m->kv_heads < 1 || m->ffn < 1)
        return dp_error(DP_ERR_INVALID, "cost model %s: every dimension must be positive (vocab >= 2)", m->name);
    if (m->dim % m->heads || m->heads % m->kv_heads)
        return dp_error(DP_ERR_INVALID, "cost model %s: heads must divide dim and kv_heads must divide heads",
                        m->name);
    if (m->dim > (1 << 20) || m->ffn > (1 << 22) || m->vocab > (1 << 24) || m->layers > 4096)
        return dp_error(DP_ERR_INVALID, "cost model %s: a dimension is out of range", m->name);
    return DP_OK;
}

static int64_t kv_dim(const opt_cost_llama *m) { return m->dim / m->heads * m->kv_heads; }

int opt_cost_llama_linears(opt_cost_linear *out, const opt_cost_llama *m, int cap) {
    int n = 0;
    const int64_t D = m->dim, K = kv_dim(m), F = m->ffn;
    const opt_cost_linear blk[7] = {{D, D}, {K, D}, {K, D}, {D, D}, {F, D}, {F, D}, {D, F}};
    for (int64_t l = 0; l < m->layers; l++)
        for (int j = 0; j < 7; j++, n++)
            if (n < cap) out[n] = blk[j];
    if (n < cap) out[n] = (opt_cost_linear){m->vocab, D};
    return n + 1;
}

int64_t opt_cost_llama_block_params(const opt_cost_llama *m) {
    const int64_t D = m->dim, K = kv_dim(m), F = m->ffn;
    return 2 * D + 2 * D * D + 2 * D * K + 3 * D * F;
}

int64_t opt_cost_llama_params(const opt_cost_llama *m) {
    return m->vocab * m->dim * (m->tied ? 1 : 2) + m->layers * opt_cost_llama_block_params(m) + m->dim;
}

/* ------------------------------------------------------------- model states ---- */
int64_t opt_cost_shard_len(int64_t n, int64_t n_ranks, int64_t rank) {
    if (n_ranks <= 0) return 0;
    int64_t c = (n + n_ranks - 1) / n_ranks, lo = rank * c, hi = lo + c < n ? lo + c : n;
    return hi > lo ? hi - lo : 0;
}

dp_status opt_cost_model_states(opt_cost_states *out, int64_t n_params, const opt_cost_dtypes *dt, int zero_stage,
                                int64_t n_ranks, int64_t rank) {
    if (zero_stage < 0 || zero_stage > 3)
        return dp_error(DP_ERR_INVALID, "cost model: ZeRO stage must be 0..3, got %d", zero_stage);
    if (n_params < 0 || n_ranks < 0 || (n_ranks > 0 && (rank < 0 || rank >= n_ranks)))
        return dp_error(DP_ERR_INVALID, "cost model: need n_params >= 0, n_ranks >= 0 and 0 <= rank < n_ranks");
    const double full = (double)n_params, shard = (double)opt_cost_shard_len(n_params, n_ranks, rank);
    out->params = (zero_stage >= 3 ? shard : full) * dt->param_bytes;
    out->grads = (zero_stage >= 2 ? shard : full) * dt->grad_bytes;
    out->master = (zero_stage >= 1 ? shard : full) * dt->master_bytes;
    out->optim = (zero_stage >= 1 ? shard : full) * dt->state_bytes * dt->n_states;
    out->total = out->params + out->grads + out->master + out->optim;
    return DP_OK;
}

double opt_cost_states_per_param(const opt_cost_dtypes *dt, int zero_stage, double n_ranks) {
    const double inv = isinf(n_ranks) ? 0.0 : 1.0 / n_ranks;
    const double k = (double)dt->master_bytes + (double)dt->state_bytes * dt->n_states;
    return dt->param_bytes * (zero_stage >= 3 ? inv : 1.0) + dt->grad_bytes * (zero_stage >= 2 ? inv : 1.0) +
           k * (zero_stage >= 1 ? inv : 1.0);
}

/* -------------------------------------------------------------- activations ---- */
double opt_cost_llama_block_act_per_token(const opt_cost_llama *m, const opt_cost_act *a, int64_t T) {
    const double D = (double)m->dim, K = (double)kv_dim(m), F = (double)m->ffn, H = (double)m->heads;
    /* h, a, q, o, h2, m: 6D; k, v: 2K; gate, up, silu(gate)*up: 3F (act_bytes each);
     * f32: 2 RMSNorm reciprocals + one softmax log-sum-exp per head */
    double b = (6 * D + 2 * K + 3 * F) * a->act_bytes + (2 + H) * 4;
    if (a->attn_probs) b += H * (double)T * a->act_bytes;
    return b;
}

/* head: final-norm input and output (2D), its reciprocal, logits (act + extra) */
static double head_act_per_token(const opt_cost_llama *m, const opt_cost_act *a) {
    return 2 * (double)m->dim * a->act_bytes + 4 + (double)m->vocab * (a->act_bytes + a->logits_extra);
}

double opt_cost_llama_activations(const opt_cost_llama *m, const opt_cost_act *a, int64_t B, int64_t T) {
    const double tok = (double)B * (double)T, L = (double)m->layers, D = (double)m->dim;
    const double blk = opt_cost_llama_block_act_per_token(m, a, T);
    const double head = head_act_per_token(m, a);
    const double body = a->checkpoint ? L * D * a->act_bytes + blk : L * blk;
    return tok * (body + head);
}

/* ------------------------------------------------------ per-example buffers ---- */
const char *opt_cost_strategy_name(opt_cost_strategy s) {
    return (unsigned)s < OPT_COST_N_STRATEGIES ? opt_norm_strategies[s]->name : "?";
}
const char *opt_cost_strategy_what(opt_cost_strategy s) {
    return (unsigned)s < OPT_COST_N_STRATEGIES ? opt_norm_strategies[s]->what : "?";
}
int opt_cost_strategy_parse(opt_cost_strategy *out, const char *name) {
    for (int i = 0; i < OPT_COST_N_STRATEGIES; i++)
        if (strcmp(name, opt_norm_strategies[i]->name) == 0) { *out = (opt_cost_strategy)i; return 1; }
    return 0;
}

int opt_cost_mixed_ghost(const opt_cost_linear *l, int64_t T, opt_cost_rule rule) {
    return opt_mixed_pick_ghost(rule, T, l->d, l->p);
}

dp_status opt_cost_per_example(opt_cost_perex *out, opt_cost_strategy s, opt_cost_rule rule,
                               const opt_cost_linear *lin, int n, int64_t B, int64_t T, int elem_bytes,
                               int64_t n_groups) {
    if ((unsigned)s >= OPT_COST_N_STRATEGIES || n < 0 || B < 0 || T < 1 || elem_bytes < 1 || n_groups < 1)
        return dp_error(DP_ERR_INVALID, "cost model: per-example buffers need a strategy, B >= 0, T >= 1, "
                                        "elem_bytes >= 1 and n_groups >= 1");
    const opt_norm_strategy *ns = opt_norm_strategies[s];
    const double b = (double)B, e = elem_bytes;
    double persistent = 0, transient = 0;
    for (int i = 0; i < n; i++) { /* the strategy's buffers of each layer (its descriptor) */
        double tr = 0;
        ns->cost_layer(&persistent, &tr, b, T, lin[i].p, lin[i].d, e, rule);
        if (tr > transient) transient = tr;
    }
    out->persistent = persistent;
    out->transient = transient;
    out->norms = b * (double)n_groups * 8;
    out->total = persistent + transient + out->norms;
    return DP_OK;
}

/* -------------------------------------------------------------- collectives ---- */
#define COLL_NAME_(id, name) name,
static const char *const COLL_NAMES[] = {OPT_COST_COLLECTIVES(COLL_NAME_)};
const char *opt_cost_coll_name(opt_cost_coll c) { return (unsigned)c < OPT_COST_N_COLLECTIVES ? COLL_NAMES[c] : "?"; }

double opt_cost_coll_sent(opt_cost_coll c, double bytes, int64_t n_ranks) {
    if (n_ranks <= 1) return 0;
    const double f = (double)(n_ranks - 1) / (double)n_ranks;
    switch (c) {
    case OPT_COST_ALL_REDUCE: return 2 * f * bytes;
    case OPT_COST_REDUCE_SCATTER:
    case OPT_COST_ALL_GATHER:
    case OPT_COST_ALL_TO_ALL: return f * bytes;
    case OPT_COST_BROADCAST: return bytes;
    default: return 0;
    }
}

dp_status opt_cost_step_collectives(double out[OPT_COST_N_COLLECTIVES], int64_t n_params, int grad_bytes,
                                    int param_bytes, int zero_stage, int noise_shares, int64_t n_ranks) {
    if (zero_stage < 0 || zero_stage > 3 || n_params < 0 || n_ranks < 1)
        return dp_error(DP_ERR_INVALID, "cost model: collectives need ZeRO stage 0..3, n_params >= 0, ranks >= 1");
    for (int i = 0; i < OPT_COST_N_COLLECTIVES; i++) out[i] = 0;
    if (n_ranks == 1) return DP_OK;
    const double g = (double)n_params * grad_bytes * (noise_shares ? 2 : 1), p = (double)n_params * param_bytes;
    if (zero_stage == 0) { out[OPT_COST_ALL_REDUCE] = g; return DP_OK; }
    out[OPT_COST_REDUCE_SCATTER] = g;
    out[OPT_COST_ALL_GATHER] = zero_stage == 3 ? 2 * p : p;
    return DP_OK;
}

/* ---------------------------------------------------- context parallelism ---- */
double opt_cost_cp_input_stationary(const opt_cost_linear *l, int64_t B, int elem_bytes, int64_t c) {
    /* reduce-scatter of the partial per-example gradients [B, p, d] */
    return opt_cost_coll_sent(OPT_COST_REDUCE_SCATTER, (double)B * (double)l->p * (double)l->d * elem_bytes, c);
}

double opt_cost_cp_output_stationary(const opt_cost_linear *l, int64_t B, int64_t T, int elem_bytes, int64_t c) {
    if (c <= 1) return 0;
    const double big = (double)(l->p > l->d ? l->p : l->d), small = (double)(l->p > l->d ? l->d : l->p);
    const double local = (double)B * (double)T / (double)c * elem_bytes;
    /* all-to-all of the larger of A [B, T, d] and G [B, T, p]; all-gather of the smaller */
    return local * big * (double)(c - 1) / (double)c + local * small * (double)(c - 1);
}

/* The engine's --cp M per step (docs/longshield.md §6): every parameter of the engine's
 * untied llama as rows x columns and whether a GEMM forms its per-example gradient. */
dp_status opt_cost_engine_cp_sent(double out[OPT_COST_N_COLLECTIVES], int64_t V, int64_t D, int64_t L, int64_t F,
                                  int64_t b, int64_t T, int64_t M, int output_stationary, int elem_bytes) {
    if (V < D || F <= D || D < 1 || L < 1 || b < 0 || M < 1 || T < M || elem_bytes < 1)
        return dp_error(DP_ERR_INVALID, "cost model (engine CP): need V >= D >= 1, F > D, L >= 1, 1 <= M <= T");
    for (int i = 0; i < OPT_COST_N_COLLECTIVES; i++) out[i] = 0;
#define CEIL_(x) (((x) + M - 1) / M)
    const double e1 = (double)elem_bytes * (double)(M - 1), Tmax = (double)CEIL_(T);
    /* packed slice elements L_pk = sum_p pmax_p and the reduce-scattered part of it */
    const double gains = (double)(2 * L + 1) * (double)CEIL_(D), emb = (double)CEIL_(V) * (double)D;
    const double lin_rows = (double)L * (4.0 * (double)CEIL_(D) * (double)D + 2.0 * (double)CEIL_(F) * (double)D) +
                            (double)CEIL_(V) * (double)D;                      /* q k v o gate up, lm_head */
    const double down = output_stationary ? (double)D * (double)CEIL_(F) : (double)CEIL_(D) * (double)F;
    const double Lpk = gains + emb + lin_rows + (double)L * down;
    const double att = 4.0 * (double)L * (double)b * Tmax * (double)D; /* q, k, v forward; dy backward */
    if (!output_stationary) {
        out[OPT_COST_REDUCE_SCATTER] = (double)b * Lpk * e1;
        out[OPT_COST_ALL_GATHER] = (att + 4 * Lpk) * e1; /* + parameters and the three step outputs */
    } else {
        out[OPT_COST_REDUCE_SCATTER] = (double)b * (gains + emb) * e1;
        /* gathered: a (q, k, v), y (o), m (gate, up), down's G per layer; the final norm's output (lm_head) */
        out[OPT_COST_ALL_GATHER] = (att + (double)b * Tmax * (double)D * (4.0 * (double)L + 1) + 4 * Lpk) * e1;
        out[OPT_COST_ALL_TO_ALL] =
            (double)b * Tmax * ((double)L * (4.0 * (double)CEIL_(D) + 3.0 * (double)CEIL_(F)) + (double)CEIL_(V)) * e1;
    }
#undef CEIL_
    return DP_OK;
}

/* -------------------------------------------------- the engine's fused strategy ---- */
int64_t opt_cost_cuda_fused_chunk(int64_t B, int64_t p, int64_t d, int elem_bytes) {
    if (B < 1 || p < 1 || d < 1 || elem_bytes < 1) return B > 0 ? B : 0;
    return cu_fused_chunk(CU_FUSED_WS_BYTES * 4 / elem_bytes, (int)B, p, d);
}

dp_status opt_cost_engine_fused(opt_cost_fused *out, const opt_cost_linear *lin, int n_lin, const int64_t *direct,
                                int n_direct, int64_t emb_numel, int tied, int64_t B, int64_t n_groups, int elem_bytes,
                                int64_t threads) {
    if (n_lin < 0 || n_direct < 0 || emb_numel < 0 || B < 1 || B > INT32_MAX || n_groups < 1 || elem_bytes < 1 ||
        threads < 0)
        return dp_error(DP_ERR_INVALID, "cost model (engine fused): need B >= 1, G >= 1, e >= 1, threads >= 0");
    const double e = elem_bytes, b = (double)B;
    double blocks = 0, rows = b * (double)emb_numel * e;
    for (int i = 0; i < n_lin; i++) {
        const double pd = (double)lin[i].p * (double)lin[i].d;
        const double x = threads ? (double)threads * (pd + 1) * e
                                 : (double)opt_cost_cuda_fused_chunk(B, lin[i].p, lin[i].d, elem_bytes) * pd * e;
        if (x > blocks) blocks = x;
    }
    for (int i = 0; i < n_direct; i++) rows += b * (double)direct[i] * e;
    out->blocks = blocks;
    out->tape_rows = rows;
    out->per_example = tied ? b * (double)emb_numel * e : 0;
    out->workspace = 2 * e * ((double)n_groups * b + 1);
    out->total = out->blocks + out->tape_rows + out->per_example + out->workspace;
    return DP_OK;
}

/* --------------------------------------------------------------------- FLOPs ---- */
double opt_cost_linear_flops(const opt_cost_linear *lin, int n, int64_t B, int64_t T) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)lin[i].p * (double)lin[i].d;
    return 2 * (double)B * (double)T * s;
}

double opt_cost_dp_clip_flops(const opt_cost_linear *lin, int n, int64_t B, int64_t T, int footnote7) {
    const double b = (double)B, t = (double)T;
    double s = 0;
    for (int i = 0; i < n; i++) {
        const double p = (double)lin[i].p, d = (double)lin[i].d;
        const double ghost = 2 * b * t * t * (p + d), inst = 2 * b * t * p * d;
        if (footnote7) s += 2 * t * t < p * d ? ghost : 0;
        else s += ghost < inst ? ghost : inst;
    }
    return s;
}

double opt_cost_llama_forward_act(const opt_cost_llama *m, const opt_cost_act *a, int64_t B, int64_t T) {
    return (double)B * (double)T * (opt_cost_llama_block_act_per_token(m, a, T) + head_act_per_token(m, a));
}

/* ------------------------------------------------------- the engine's layout ---- */
#define PUSH_(v, r)                                         \
    do {                                                    \
        if (n < cap) {                                      \
            out[n] = (v);                                   \
            if (bwd_reads) bwd_reads[n] = (unsigned char)(r); \
        }                                                   \
        n++;                                                \
    } while (0)
int opt_cost_engine_mlp_numel(int64_t *out, unsigned char *bwd_reads, int cap, int64_t in, const int64_t *hidden,
                              int n_hidden, int64_t classes) {
    int n = 0;
    for (int i = 0; i <= n_hidden; i++) {
        const int64_t o = i < n_hidden ? hidden[i] : classes, k = i == 0 ? in : hidden[i - 1];
        PUSH_(o * k, i > 0); /* layers.i.weight: read for the input gradient of layers >= 1 */
        PUSH_(o, 0);         /* layers.i.bias: its gradient is the rows of G */
    }
    return n;
}

int opt_cost_engine_llama_numel(int64_t *out, unsigned char *bwd_reads, int cap, int64_t vocab, int64_t dim,
                                int64_t layers, int64_t ffn, int tied) {
    int n = 0;
    PUSH_(vocab * dim, tied); /* tok_emb: the lookup's gradient reads no weight (tied: it is the head) */
    for (int64_t l = 0; l < layers; l++) {
        PUSH_(dim, 1);                                              /* attn_norm */
        for (int j = 0; j < 4; j++) PUSH_(dim * dim, 1);            /* wq wk wv wo */
        PUSH_(dim, 1);                                              /* mlp_norm */
        PUSH_(ffn * dim, 1); PUSH_(ffn * dim, 1); PUSH_(dim * ffn, 1); /* w_gate w_up w_down */
    }
    PUSH_(dim, 1); /* final_norm */
    if (!tied) PUSH_(vocab * dim, 1);
    return n;
}
#undef PUSH_

void opt_cost_engine_parts(opt_cost_parts *out, const int64_t *numel, int n, int64_t n_ranks) {
    out->P = out->C = 0;
    for (int i = 0; i < n; i++) {
        out->P += numel[i];
        out->C += (numel[i] + n_ranks - 1) / n_ranks;
    }
    out->c = (out->P + n_ranks - 1) / n_ranks;
}

dp_status opt_cost_engine_states(opt_cost_states *out, const int64_t *numel, int n, int elem_bytes, int n_states,
                                 int zero_stage, int64_t n_ranks) {
    if (zero_stage < 0 || zero_stage > 3 || n_ranks < 1 || n < 1 || elem_bytes < 1 || n_states < 0)
        return dp_error(DP_ERR_INVALID, "cost model (engine): need ZeRO stage 0..3, ranks >= 1, tensors, e >= 1");
    opt_cost_parts pt;
    opt_cost_engine_parts(&pt, numel, n, n_ranks);
    const double e = elem_bytes, P = (double)pt.P, c = (double)pt.c, C = (double)pt.C, N = (double)n_ranks;
    double params = P, grads = 3 * P, opt = P;           /* replicated: [S | Z] (2P) + private gradient (P) */
    if (zero_stage == 1) { grads = 2 * N * c + c; opt = c; }
    if (zero_stage == 2) { grads = N * c + 2 * c; opt = c; }
    if (zero_stage == 3) { params = P + C; grads = P + 2 * C; opt = C; }
    out->params = params * e;
    out->grads = grads * e;
    out->master = 0;
    out->optim = opt * e * n_states;
    out->total = out->params + out->grads + out->optim;
    return DP_OK;
}

dp_status opt_cost_engine_step_sent(double out[OPT_COST_N_COLLECTIVES], const int64_t *numel,
                                    const unsigned char *bwd_reads, int n, int elem_bytes, int zero_stage,
                                    int64_t n_ranks, int64_t passes) {
    if (zero_stage < 0 || zero_stage > 3 || n_ranks < 1 || n < 1 || elem_bytes < 1 || passes < 0)
        return dp_error(DP_ERR_INVALID, "cost model (engine): need ZeRO stage 0..3, ranks >= 1, tensors, e >= 1");
    for (int i = 0; i < OPT_COST_N_COLLECTIVES; i++) out[i] = 0;
    opt_cost_parts pt;
    opt_cost_engine_parts(&pt, numel, n, n_ranks);
    const double f = (double)(n_ranks - 1) * elem_bytes;
    double Cb = 0; /* chunks of the tensors the backward reads */
    for (int i = 0; i < n; i++)
        if (!bwd_reads || bwd_reads[i]) Cb += (double)((numel[i] + n_ranks - 1) / n_ranks);
    switch (zero_stage) {
    case 0: out[OPT_COST_ALL_REDUCE] = 2 * (double)pt.P * f; break;
    case 1: /* the updated parameters + the private gradient (the engine's finiteness check) */
        out[OPT_COST_ALL_REDUCE] = 2 * (double)pt.P * f;
        out[OPT_COST_ALL_GATHER] = 2 * (double)pt.c * f;
        break;
    case 2: out[OPT_COST_REDUCE_SCATTER] = (double)pt.c * f; out[OPT_COST_ALL_GATHER] = 2 * (double)pt.c * f; break;
    default: /* per pass: forward gathers + backward gathers; then the private gradient + params_after */
        out[OPT_COST_REDUCE_SCATTER] = (double)pt.C * f;
        out[OPT_COST_ALL_GATHER] = ((double)passes * ((double)pt.C + Cb) + 2 * (double)pt.C) * f;
    }
    return DP_OK;
}

double opt_cost_engine_llama_tape(int64_t B, int64_t T, int64_t vocab, int64_t dim, int64_t layers, int64_t heads,
                                  int64_t ffn, int elem_bytes, int second_pass, int walk_empty) {
    const double b = (double)B, r = (double)B * (double)T, V = (double)vocab, D = (double)dim, L = (double)layers,
                 H = (double)heads, F = (double)ffn, t = (double)T, mx = D > F ? D : F;
#define E_(n) (((n) > 0 ? (n) : 1.0) * elem_bytes) /* the arena allocates at least one element */
    double total = E_(b);                              /* per-example losses */
    if (B == 0 && !walk_empty) return total;
    total += 2 * (r + 1) * 4;                          /* int32 tokens and targets */
    const double bwd = E_(r * V) + 2 * E_(r * D) + E_(r * mx) + L * (3 * E_(r * F) + 9 * E_(r * D));
    total += E_(r * D)                                                               /* embedding output */
             + L * (8 * E_(r * D) + 2 * E_(r) + 3 * E_(r * F) + E_(b * H * t * t)) /* blocks */
             + E_(r * D) + 3 * E_(r) + E_(r * V)                                    /* head, weights, losses */
             + bwd                                                                  /* backward buffers */
             + (2 * L + 1) * E_(b * D) + E_(b * V * D);                             /* direct per-example rows */
    if (second_pass) total += E_(r) + bwd;
#undef E_
    return total;
}

/* --------------------------------------------------------------- step peak ---- */
dp_status opt_cost_llama_peak(opt_cost_peak *out, const opt_cost_llama *m, const opt_cost_setup *s, int64_t B,
                              int64_t T) {
    DP_TRY(opt_cost_llama_check(m));
    if (B < 1 || T < 1 || s->cp < 1 || T % s->cp)
        return dp_error(DP_ERR_INVALID, "cost model: need B >= 1, T >= 1 and cp dividing T");
    opt_cost_states st;
    DP_TRY(opt_cost_model_states(&st, opt_cost_llama_params(m), &s->dt, s->zero_stage, s->n_ranks, 0));
    const int64_t Tl = T / s->cp; /* positions held by one rank */
    out->states = st.total;
    out->activations = opt_cost_llama_activations(m, &s->act, B, Tl);
    out->per_example = 0;
    if (s->dp) {
        const int cap = (int)m->layers * 7 + 1;
        opt_cost_linear *lin = dp_malloc(sizeof *lin * (size_t)cap);
        if (!lin) return DP_ERR_NOMEM;
        int n = opt_cost_llama_linears(lin, m, cap);
        opt_cost_perex pe;
        dp_status st2 = opt_cost_per_example(&pe, s->strategy, s->rule, lin, n, B, Tl, s->dt.grad_bytes, 1);
        dp_free(lin);
        if (st2 != DP_OK) return st2;
        out->per_example = (s->cp_shard_grads ? pe.persistent / (double)s->cp : pe.persistent) + pe.transient +
                           pe.norms;
    }
    out->gathered = 0;
    if (s->zero_stage == 3) { /* current + prefetched unit: the largest of a block and the embeddings */
        double unit = (double)opt_cost_llama_block_params(m), emb = (double)m->vocab * (double)m->dim;
        out->gathered = 2 * (unit > emb ? unit : emb) * s->dt.param_bytes;
    }
    out->total = out->states + out->activations + out->per_example + out->gathered;
    return DP_OK;
}

int64_t opt_cost_llama_max_T(const opt_cost_llama *m, const opt_cost_setup *s, int64_t B, double capacity) {
    int64_t best = 0;
    for (int64_t T = 2; T <= ((int64_t)1 << 24); T *= 2) {
        if (T % s->cp) continue;
        opt_cost_peak pk;
        if (opt_cost_llama_peak(&pk, m, s, B, T) != DP_OK) { dp_clear_error(); break; }
        if (pk.total > capacity) break;
        best = T;
    }
    return best;
}
