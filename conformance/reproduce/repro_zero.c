/* conformance/reproduce/repro_zero.c — the DP-ZeRO targets of `dpcert reproduce` other than loss
 * scaling: dp-zero-memory (the model-state formulas of section 3 and the sizes they imply,
 * the engine's ledger at small sizes) and dp-zero-time (Table 2's time complexity and
 * footnote 7, ZeRO3's extra communication measured by the engine's byte counters, the
 * PEFT and checkpointing arithmetic). docs/reproduce.md. */
#include <math.h>
#include <string.h>

#include "conformance/reproduce/repro.h"

static json_t *dz_row(repro_ctx *r, repro_kind kind, const char *claim, const char *paper, double model,
                      const char *unit, const char *verdict, const char *reason) {
    json_t *o = repro_row(r, kind, verdict, reason);
    json_object_set_new(o, "claim", json_string(claim));
    if (paper) json_object_set_new(o, "paper", json_string(paper));
    json_object_set_new(o, "model", repro_num(model));
    json_object_set_new(o, "unit", json_string(unit));
    return o;
}

/* The engine's model states on every rank of an N = 2 run at `stage` against
 * opt_cost_engine_states (ZeRO's partitions of the engine's layout, nothing for DP). The
 * small llama: V 16, D 8, L 1, F 12, untied (every tensor's numel even). */
#define DZ_LLAMA "--model llama --vocab 16 --dim 8 --layers 1 --heads 2 --ffn 12 --seq 8"
#define DZ_RUN "--impl optimized --backend host --threads 1 --dataset-size 16 --q 0.5 --steps 1 --clip 1 --sigma 1 " \
               "--seed 3 --noise-key 4 --optimizer adamw " DZ_LLAMA
static const char *const STAGE_NAMES[4] = {"replicated", "zero1", "zero2", "zero3"};

static int dz_tensors(int64_t *numel, unsigned char *rd) { return opt_cost_engine_llama_numel(numel, rd, 16, 16, 8, 1, 12, 0); }

static dp_status dz_measured_states(repro_ctx *r, int stage) {
    char args[512], claim[160];
    snprintf(args, sizeof args, "%s --sharding %s", DZ_RUN, STAGE_NAMES[stage]);
    snprintf(claim, sizeof claim, "DP-ZeRO%d adds no model state over ZeRO%d: engine ledger, both ranks of N = 2 "
             "(params + grads + optimizer state)", stage, stage);
    repro_run run;
    DP_TRY(repro_train(&run, r, 2, args));
    if (run.missing[0]) {
        dz_row(r, REPRO_KIND_MEASURED, claim, "same as ZeRO", NAN, "bytes per rank", "not run", run.missing);
        return DP_OK;
    }
    int64_t numel[16];
    int n = dz_tensors(numel, NULL);
    opt_cost_states st;
    DP_TRY(opt_cost_engine_states(&st, numel, n, 8, 2, stage, 2));
    int ok = 1;
    for (int k = 0; k < 2; k++)
        ok &= run.peak[k][REPRO_TAG_params] == st.params && run.peak[k][REPRO_TAG_master_weights] == 0 &&
              run.peak[k][REPRO_TAG_grads] == st.grads && run.peak[k][REPRO_TAG_optimizer_state] == st.optim;
    const double got = run.peak[1][REPRO_TAG_params] + run.peak[1][REPRO_TAG_grads] + run.peak[1][REPRO_TAG_optimizer_state];
    char why[200];
    snprintf(why, sizeof why, "the ledger's model states (rank 1: %.0f bytes) are not ZeRO's partition of the engine's "
             "layout (%.0f bytes, docs/zero.md section 4)", got, st.total);
    dz_row(r, REPRO_KIND_MEASURED, claim, "same as ZeRO", got, "bytes per rank (rank 1)", ok ? "match" : "differs",
           ok ? NULL : why);
    return DP_OK;
}

/* ------------------------------------------------------------- dp-zero-memory ---- */
dp_status repro_dp_zero_memory(repro_ctx *r) {
    static const char *const cols[] = {"claim", "paper", "model", "unit", "verdict", NULL};
    repro_columns(r, cols);
    const opt_cost_dtypes *mx = &OPT_COST_MIXED_ADAM;
    const double n64 = 64;
    struct { const char *claim, *paper; int stage; double n, want; } f[] = {
        {"data parallel model states per parameter", "16", 0, 64, 16},
        {"ZeRO1 per parameter, N = 64", "4 + 12/N = 4.1875", 1, 64, 4 + 12 / n64},
        {"ZeRO2 per parameter, N = 64", "2 + 14/N = 2.21875", 2, 64, 2 + 14 / n64},
        {"ZeRO3 per parameter, N = 64", "16/N = 0.25", 3, 64, 16 / n64},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        double v = opt_cost_states_per_param(mx, f[i].stage, f[i].n);
        dz_row(r, REPRO_KIND_ARITHMETIC, f[i].claim, f[i].paper, v, "bytes/param", v == f[i].want ? "match" : "differs",
               v == f[i].want ? NULL : "the per-parameter formula gives another value");
    }
    /* model sizes: ZeRO paper Table 2 (64 V100 32 GB), DataP in 80 GB (Remark 4.2), 2B in 32 GB (§1) */
    struct { const char *claim, *paper; int stage; double n, cap, printed, unit; } z[] = {
        {"largest model, ZeRO1, 64 x 32 GB", "7.6", 1, 64, 32, 7.6, 0.1},
        {"largest model, ZeRO2, 64 x 32 GB", "14.4", 2, 64, 32, 14.4, 0.1},
        {"largest model, ZeRO3, 64 x 32 GB", "128", 3, 64, 32, 128, 1},
        {"largest model, data parallel, 80 GB (any N)", "5", 0, 1, 80, 5, 1},
        {"Adam in 32 GB 'roughly' (one GPU)", "2", 0, 1, 32, 2, 1},
    };
    for (size_t i = 0; i < sizeof z / sizeof z[0]; i++) {
        double b = z[i].cap / opt_cost_states_per_param(mx, z[i].stage, z[i].n);
        const int ok = repro_rounds_to(b, z[i].printed, z[i].unit);
        dz_row(r, REPRO_KIND_ARITHMETIC, z[i].claim, z[i].paper, b, "billion params", ok ? "match" : "differs",
               ok ? NULL : "capacity / bytes per parameter does not round to the printed value");
    }
    /* section 4.2: "SGD requires only 1/3 optimizer states of Adam" (f32 master only vs master + 2 states) */
    {
        const double sgd = mx->master_bytes, adam = mx->master_bytes + (double)mx->state_bytes * mx->n_states;
        const int ok = sgd / adam == 1.0 / 3;
        dz_row(r, REPRO_KIND_ARITHMETIC, "SGD keeps 1/3 of Adam's optimizer states (f32 master vs master + m + v)",
               "1/3", sgd / adam, "ratio", ok ? "match" : "differs", ok ? NULL : "the state bytes give another ratio");
    }
    /* DP-ZeRO3 at the paper's sizes and GPU counts (Figure 8: 7-100B, up to 256 A100 80 GB): the paper prints
     * no per-GPU numbers */
    const double sizes[] = {7, 13, 26, 70, 100}, gpus[] = {8, 64, 256};
    for (int i = 0; i < 5; i++)
        for (int g = 0; g < 3; g++) {
            char c[96];
            snprintf(c, sizeof c, "DP-ZeRO3 model states per GPU, %gB params, %g GPUs", sizes[i], gpus[g]);
            dz_row(r, REPRO_KIND_NOT_IN_PAPER, c, NULL, sizes[i] * opt_cost_states_per_param(mx, 3, gpus[g]), "GB",
                   "n/a (computed)", NULL);
        }
    {   /* model states per GPU vs GPUs, per stage (7B, mixed AdamW) */
        json_t *p = dp_html_plot_new(json_object_get(r->root, "plots"), "line",
                                  "7B parameters, bf16 + f32 AdamW: model states per GPU vs GPUs (model)", "GPUs",
                                  "model states per GPU (GB)", 2, 10);
        static const char *const nm[4] = {"data parallel (DP-ZeRO0)", "DP-ZeRO1", "DP-ZeRO2", "DP-ZeRO3"};
        for (int st = 0; st < 4; st++) {
            double xs[9], ys[9];
            for (int k = 0; k < 9; k++) {
                xs[k] = (double)(1 << k);
                ys[k] = 7 * opt_cost_states_per_param(mx, st, xs[k]);
            }
            dp_html_plot_series(p, nm[st], xs, ys, 9, 0);
        }
    }
    /* section 3.3: DP-ZeRO is as memory-efficient as ZeRO: the engine's ledger holds ZeRO's partitions */
    for (int stage = 1; stage <= 3; stage++) DP_TRY(dz_measured_states(r, stage));
    /* mixed precision: the ~50% of section 2.3 */
    const double states_f32 = opt_cost_states_per_param(&OPT_COST_F32_ADAM, 0, 1), states_mx = opt_cost_states_per_param(mx, 0, 1);
    dz_row(r, REPRO_KIND_ARITHMETIC, "mixed precision saves ~50% memory: activations (bf16 vs f32)", "~50%",
           1 - 2.0 / 4.0, "fraction saved", "match", NULL);
    dz_row(r, REPRO_KIND_ARITHMETIC, "mixed precision saves ~50%: gradient communication (bf16 vs f32)", "~50%",
           1 - 2.0 / 4.0, "fraction saved", "match", NULL);
    dz_row(r, REPRO_KIND_ARITHMETIC, "mixed precision saves ~50%: model states with AdamW (f32 master + 2 states)",
           "~50%", 1 - states_mx / states_f32, "fraction saved", "differs",
           "with f32 master weights and AdamW both are 16 bytes/param (the paper's own section 2.2 formulas): the "
           "saving is in activations and traffic");
    repro_caveat(r, "model states only: activations depend on the batch and sequence length (DP-ZeRO footnote 4)");
    repro_caveat(r, "the formulas and sizes are the paper's (and ZeRO's) own arithmetic; the measured rows run "
                         "`mpirun -n 2 dpcert train dpsgd --sharding zeroK` on a small llama (V 16, D 8, L 1, F 12, "
                         "untied, AdamW, f64) and compare every rank's ledger with ZeRO's partition of the engine's "
                         "layout, which has no DP term");
    repro_caveat(r, "loss scaling (Tables 3 and 4) is the target dp-zero-losscale; time and communication the "
                         "target dp-zero-time");
    return DP_OK;
}

/* --------------------------------------------------------------- dp-zero-time ---- */
/* DP-ZeRO's settings: GPT models at T = 100 (Appendix D), the Figure 8 GPT models at
 * T = 2048 with LLaMA's configuration (LLaMA 7B: V 32000, D 4096, L 32, F 11008). */
static const opt_cost_llama LLAMA1_7B = {"LLaMA 7B", 32000, 4096, 32, 32, 32, 11008, 0};

static dp_status dz_overhead_rows(repro_ctx *r) {
    opt_cost_linear lin[48 * 4 + 1];
    struct { const char *name; int n; int64_t T; } set[2];
    opt_cost_linear *sets[2];
    opt_cost_linear l7[32 * 7 + 1];
    set[0].n = repro_gpt2_linears(lin, 3);
    set[0].name = "GPT2-XL, T = 100 (Appendix D)";
    set[0].T = 100;
    set[1].n = opt_cost_llama_linears(l7, &LLAMA1_7B, 32 * 7 + 1);
    set[1].name = "LLaMA 7B, T = 2048 (Figure 8)";
    set[1].T = 2048;
    sets[0] = lin;
    sets[1] = l7;
    json_t *p = dp_html_plot_new(json_object_get(r->root, "plots"), "line",
                              "DP clipping cost over the standard step vs sequence length (FLOPs; 11% = Table 2)",
                              "sequence length T", "percent of 6BT sum pd", 2, 0);
    for (int i = 0; i < 2; i++) {
        double xs[10], yf[10], ye[10], y11[10];
        for (int k = 0; k < 10; k++) {
            const int64_t T = (int64_t)32 << k;
            const double b = 3 * opt_cost_linear_flops(sets[i], set[i].n, 1, T);
            xs[k] = (double)T;
            yf[k] = 100 * opt_cost_dp_clip_flops(sets[i], set[i].n, 1, T, 1) / b;
            ye[k] = 100 * opt_cost_dp_clip_flops(sets[i], set[i].n, 1, T, 0) / b;
            y11[k] = 11;
        }
        char name[96];
        snprintf(name, sizeof name, "%s: footnote 7", i ? "LLaMA 7B" : "GPT2-XL");
        dp_html_plot_series(p, name, xs, yf, 10, 0);
        snprintf(name, sizeof name, "%s: cheaper per layer", i ? "LLaMA 7B" : "GPT2-XL");
        dp_html_plot_series(p, name, xs, ye, 10, 0);
        if (i) dp_html_plot_series(p, "paper: ~11%", xs, y11, 10, 1);
    }
    /* Table 2's forward 2BT Psi (and output and parameter gradients alike): the FLOPs of the
     * layers' matrix products per token and parameter, against the coefficient 2 (one
     * significant digit: 1.5 to 2.5). Psi: GPT2-XL with its position table, biases and norms */
    const double D = 1600, psi[2] = {50257 * D + 1024 * D + 48 * (12 * D * D + 13 * D) + 2 * D,
                                     (double)opt_cost_llama_params(&LLAMA1_7B)};
    for (int i = 0; i < 2; i++) {
        const double c = opt_cost_linear_flops(sets[i], set[i].n, 1, 1) / psi[i];
        const int ok = repro_rounds_to(c, 2, 1);
        char claim[160];
        snprintf(claim, sizeof claim, "Table 2: forward FLOPs per token and parameter (2 sum pd / Psi), %s", set[i].name);
        dz_row(r, REPRO_KIND_INDEPENDENT, claim, "2 (2BT Psi)", c, "FLOPs / token / param", ok ? "match" : "differs",
               "the layers' matrix products do not give 2 FLOPs per parameter and token");
    }
    for (int i = 0; i < 2; i++) {
        const double base = 3 * opt_cost_linear_flops(sets[i], set[i].n, 1, set[i].T); /* 6 B T sum p d */
        for (int f7 = 1; f7 >= 0; f7--) {
            const double x = opt_cost_dp_clip_flops(sets[i], set[i].n, 1, set[i].T, f7) / base;
            const int ok = repro_rounds_to(100 * x, 11, 1);
            char claim[200], why[240];
            snprintf(claim, sizeof claim, "DP clipping cost over the standard 6BTpd, %s: %s", set[i].name,
                     f7 ? "footnote 7's formula 2BT^2(p+d) 1(2T^2 < pd)" : "cheaper of ghost and instantiation per layer "
                                                                          "(the engine's flop rule)");
            snprintf(why, sizeof why, "%.1f%% at this setting, not the printed ~11%% (rounded to a percent)%s", 100 * x,
                     f7 ? ": the paper's 11% is empirical, its own formula gives another figure" : "");
            dz_row(r, f7 ? REPRO_KIND_ARITHMETIC : REPRO_KIND_INDEPENDENT, claim, "~11% (0.666/6)", 100 * x, "percent",
                   ok ? "match" : "differs", ok ? NULL : why);
        }
    }
    return DP_OK;
}

/* ZeRO3's +50% (section 3.2.2): the engine at N = 2, zero2 against zero3. ZeRO3 gathers
 * every tensor for the forward and, for the backward, the tensors the backward reads:
 * all but the untied embedding table (its lookup's gradient reads no weight). */
static dp_status dz_measured_comm(repro_ctx *r) {
    repro_run run[2];
    const int stages[2] = {2, 3};
    for (int k = 0; k < 2; k++) {
        char args[512];
        snprintf(args, sizeof args, "%s --sharding %s", DZ_RUN, STAGE_NAMES[stages[k]]);
        DP_TRY(repro_train(&run[k], r, 2, args));
        if (run[k].missing[0]) {
            dz_row(r, REPRO_KIND_MEASURED, "ZeRO3 sends 3 parameter volumes against ZeRO2's 2 (byte counters)",
                   "+50%", NAN, "ratio", "not run", run[k].missing);
            return DP_OK;
        }
    }
    int64_t numel[16];
    unsigned char rd[16];
    int n = dz_tensors(numel, rd);
    double sent[2][OPT_COST_N_COLLECTIVES], got[2], essential[2];
    opt_cost_parts pt;
    opt_cost_engine_parts(&pt, numel, n, 2);
    for (int k = 0; k < 2; k++) {
        DP_TRY(opt_cost_engine_step_sent(sent[k], numel, rd, n, 8, stages[k], 2, 1));
        const double model = sent[k][OPT_COST_REDUCE_SCATTER] + sent[k][OPT_COST_ALL_GATHER];
        int ok = 1;
        for (int q = 0; q < 2; q++)
            ok &= run[k].sent[q][REPRO_COLL_reduce_scatter_sum] == sent[k][OPT_COST_REDUCE_SCATTER] &&
                  run[k].sent[q][REPRO_COLL_allgather] == sent[k][OPT_COST_ALL_GATHER] &&
                  run[k].sent[q][REPRO_COLL_allreduce_sum] == 0;
        got[k] = run[k].sent[1][REPRO_COLL_reduce_scatter_sum] + run[k].sent[1][REPRO_COLL_allgather];
        /* the engine's own gathers without exports are not ZeRO's (docs/zero.md section 5): the
         * private gradient's finiteness check (zero2 and zero3) and zero3's params_after */
        essential[k] = got[k] - (stages[k] == 2 ? 1.0 * (double)pt.c : 2.0 * (double)pt.C) * 8;
        char claim[160], why[200];
        snprintf(claim, sizeof claim, "ZeRO%d bytes sent per step, N = 2 (reduce-scatter + all-gather, both ranks)",
                 stages[k]);
        snprintf(why, sizeof why, "the byte counters (rank 1: %.0f) are not the engine's formula (%.0f, "
                 "docs/zero.md section 5)", got[k], model);
        dz_row(r, REPRO_KIND_MEASURED, claim, stages[k] == 2 ? "2 Psi" : "3 Psi", got[k], "bytes (rank 1)",
               ok ? "match" : "differs", ok ? NULL : why);
    }
    const double ratio = essential[1] / essential[0];
    double cb = 0; /* chunks of the tensors the backward reads */
    for (int i = 0; i < n; i++) cb += rd[i] ? (double)((numel[i] + 1) / 2) : 0;
    char why[320];
    snprintf(why, sizeof why, "measured ZeRO3 / ZeRO2 traffic without the diagnostic gathers %.4f = (2 C + C_b) / 2 c "
             "= %.4f: the backward does not re-gather the untied embedding table (%lld of %lld elements); the "
             "parameters it re-gathers are exactly the +50%%", ratio, (2 * (double)pt.C + cb) / (2 * (double)pt.c),
             (long long)numel[0], (long long)pt.P);
    dz_row(r, REPRO_KIND_MEASURED, "ZeRO3 communication over ZeRO2 (measured; the step outputs' diagnostic gathers "
           "taken out)", "+50% (3 Psi / 2 Psi)", ratio, "ratio", ratio == 1.5 ? "match" : "differs",
           ratio == 1.5 ? NULL : why);
    return DP_OK;
}

dp_status repro_dp_zero_time(repro_ctx *r) {
    static const char *const cols[] = {"claim", "paper", "model", "unit", "verdict", NULL};
    repro_columns(r, cols);
    /* Table 2: forward 2BT Psi, output gradients 2BT Psi, parameter gradients 2BT Psi_train, DP 0.666BT Psi_train */
    const double dp = 0.666 / 6;
    dz_row(r, REPRO_KIND_ARITHMETIC, "Table 2: DP clipping and noise 0.666BT Psi over the standard 6BT Psi", "~11%",
           100 * dp, "percent", repro_rounds_to(100 * dp, 11, 1) ? "match" : "differs",
           "0.666 / 6 does not round to 11%");
    DP_TRY(dz_overhead_rows(r));
    {   /* section 3.2.3: PEFT (Psi_train = 0.1% Psi_model) */
        const double comm = 1 / 0.001, speed = 6.0 / 4.0; /* Table 2 with Psi_train -> 0: 6 -> 4 BT Psi */
        dz_row(r, REPRO_KIND_ARITHMETIC, "PEFT, Psi_train = 0.1% Psi: gradient communication O(Psi_train) reduced by",
               "1000x", comm, "factor", fabs(comm - 1000) < 1e-9 ? "match" : "differs", "1 / 0.001 is not 1000");
        dz_row(r, REPRO_KIND_ARITHMETIC, "PEFT: local computation faster (Table 2 with Psi_train ~ 0: 6BT Psi -> 4BT Psi)",
               "50%", 100 * (speed - 1), "percent", repro_rounds_to(100 * (speed - 1), 50, 1) ? "match" : "differs",
               "6 / 4 - 1 is not 50%");
    }
    {   /* section 3.2.2: checkpointing adds a forward, 2BT Psi on 6BT Psi */
        const double ac = 8.0 / 6.0 - 1;
        dz_row(r, REPRO_KIND_ARITHMETIC, "activation checkpointing: a second forward (Appendix B: 4BT Psi forward)",
               "33% slower", 100 * ac, "percent more FLOPs", repro_rounds_to(100 * ac, 33, 1) ? "match" : "differs",
               "8/6 - 1 is not 33%");
    }
    {   /* section 3.2.2: ZeRO3's all-gather, with ring algorithms (docs/models-of-cost.md §5) */
        double c2[OPT_COST_N_COLLECTIVES], c3[OPT_COST_N_COLLECTIVES];
        DP_TRY(opt_cost_step_collectives(c2, 1000000, 2, 2, 2, 0, 64));
        DP_TRY(opt_cost_step_collectives(c3, 1000000, 2, 2, 3, 0, 64));
        double v2 = 0, v3 = 0;
        for (int k = 0; k < OPT_COST_N_COLLECTIVES; k++) {
            v2 += opt_cost_coll_sent((opt_cost_coll)k, c2[k], 64);
            v3 += opt_cost_coll_sent((opt_cost_coll)k, c3[k], 64);
        }
        dz_row(r, REPRO_KIND_ARITHMETIC, "ZeRO3 over ZeRO2 communication volume, ring algorithms (ZeRO's 3 Psi vs "
               "2 Psi)", "+50%", v3 / v2, "ratio", fabs(v3 / v2 - 1.5) < 1e-12 ? "match" : "differs",
               "the ring volumes do not give 3/2");
    }
    DP_TRY(dz_measured_comm(r));
    repro_caveat(r, "Table 2's entries and sections 3.2.2-3.2.3 are the paper's own arithmetic (kind "
                         "arithmetic); footnote 7's formula evaluated at the paper's settings is arithmetic too, and "
                         "the engine's book-keeping cost (the cheaper of the ghost norm and instantiation per layer, "
                         "docs/engine.md section 4) at the same settings is independent");
    repro_caveat(r, "the measured rows run `mpirun -n 2 dpcert train dpsgd --sharding zero2|zero3` on a small "
                         "untied llama and compare every rank's byte counters with the engine's formulas "
                         "(docs/zero.md section 5); the engine also all-gathers the step's outputs for its exports' "
                         "diagnostics, which the +50% row takes out");
    repro_caveat(r, "throughput (Figures 4, 6-8) is not reproduced: GPU cluster measurements");
    return DP_OK;
}
