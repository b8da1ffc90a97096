/* optimized/tests/test_precision_memory.c — the half tape really halves what it holds
 * (docs/precision.md sections 2 and 6). One tape pass (opt_forward_backward) of B
 * examples on the host backend at f32, bf16 and fp16; the memory ledger's activation
 * bytes held after the pass:
 *   - f32 (mlp): exactly the sum of the tape's buffers derived from the shapes (4 bytes
 *     an element): losses B, inputs B in, labels (B + 1) int32, layer outputs
 *     B (Hs + K), loss weights and per-row losses 2 B, output gradients B (Hs + K)
 *     (a hidden layer's input gradient becomes the previous layer's output gradient:
 *     one buffer), per-example bias gradients B (Hs + K) (Hs = sum of the hidden
 *     widths, K classes);
 *   - bf16 and fp16: the f32 bytes minus 2 bytes per element of the half-stored tensors,
 *     derived from the shapes: mlp B (in + 3 Hs + 2 K) (the inputs of the L + 1 linear
 *     layers, their output gradients, the per-example bias gradients); llama
 *     rows (L (8 D + 3 F) + D + V) + B ((2 L + 1) D + V D) (per block the inputs a, y,
 *     m [D] and act [F] of the linear layers and the output gradients dh, dh1 [D], dgt,
 *     dup [F], dq, dk, dv [D]; the final norm's output [D] and the logits' gradient [V];
 *     the per-example gradients of the 2 L + 1 RMSNorm gains [D] and of the token
 *     embedding [V, D]), tied and untied;
 *   - no workspace is left after the pass (every decoded f32 copy is freed);
 *   - the peak of the pass at bf16 is below the f32 one;
 *   - two grad-sample DP-SGD steps (mlp and llama, same seed, so the same Poisson
 *     batches): every linear layer's per-example gradients are instantiated and held
 *     until the chunk's clipped sums (tag per_example), so the per_example peak at
 *     bf16 and fp16 is exactly half the f32 one (2 bytes against 4 an element).
 * Negative control: at f32 the tape is not half (tp.half = 0) and the difference is 0,
 * so a build that kept the f32 containers fails the bf16 equality by 2 S bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/dpsgd.h"
#include "optimized/ledger.h"

typedef struct {
    uint64_t cur, peak, ws;
    int half;
} pass_bytes;

static pass_bytes tape_pass(const dp_model_config *mc, opt_prec prec, int64_t B) {
    pass_bytes r = {0};
    dp_model m;
    dp_dataset d;
    dp_seed seed = {.k = 7};
    T_OK(dp_model_init(&m, mc, seed));
    T_OK(dp_dataset_generate(&d, mc, B, seed));
    opt_backend_config bc = {.name = "host", .dtype = DP_F32, .threads = 1, .use_mpi = 0};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    if (!be) { dp_model_free(&m); dp_dataset_free(&d); return r; }
    opt_model om;
    T_OK(opt_model_create(&om, be, &m));
    om.prec = prec;
    int64_t idx[64];
    for (int64_t b = 0; b < B; b++) idx[b] = b;
    opt_mem_reset_peaks(be);
    opt_mem_report before, after;
    opt_mem_get(&before, be);
    opt_tape tp;
    T_OK(opt_forward_backward(&tp, &om, &d, idx, B));
    opt_mem_get(&after, be);
    r.cur = after.cur[OPT_MEM_ACTIVATIONS] - before.cur[OPT_MEM_ACTIVATIONS];
    r.peak = after.peak[OPT_MEM_ACTIVATIONS] - before.cur[OPT_MEM_ACTIVATIONS];
    r.ws = after.cur[OPT_MEM_WORKSPACE];
    r.half = tp.half;
    opt_tape_free(&tp);
    opt_mem_get(&after, be);
    T_CHECK(after.cur[OPT_MEM_ACTIVATIONS] == before.cur[OPT_MEM_ACTIVATIONS], "%s: activations left after the tape",
            opt_prec_names[prec]);
    opt_model_free(&om);
    opt_backend_destroy(be);
    dp_model_free(&m);
    dp_dataset_free(&d);
    return r;
}

/* the activation bytes at f32 and at both half types: exact f32 formula (0 = not
 * derived) and saved elements S */
static void check(const char *name, const dp_model_config *mc, int64_t B, uint64_t f32_want, uint64_t S) {
    pass_bytes f = tape_pass(mc, OPT_PREC_F32, B);
    T_CHECK(!f.half, "%s f32: the tape is not half", name);
    if (f32_want)
        T_CHECK(f.cur == f32_want, "%s f32: activations %llu bytes, shapes give %llu", name, (unsigned long long)f.cur,
                (unsigned long long)f32_want);
    for (int pr = OPT_PREC_BF16; pr <= OPT_PREC_FP16; pr++) {
        pass_bytes h = tape_pass(mc, (opt_prec)pr, B);
        const char *pn = opt_prec_names[pr];
        T_CHECK(h.half, "%s %s: the tape is half", name, pn);
        T_CHECK(h.cur + 2 * S == f.cur, "%s %s: activations %llu bytes, f32 %llu - 2 x %llu half-stored elements = %llu",
                name, pn, (unsigned long long)h.cur, (unsigned long long)f.cur, (unsigned long long)S,
                (unsigned long long)(f.cur - 2 * S));
        T_CHECK(h.ws == 0, "%s %s: %llu workspace bytes left after the pass", name, pn, (unsigned long long)h.ws);
        T_CHECK(h.peak < f.peak, "%s %s: activation peak %llu not below f32's %llu", name, pn,
                (unsigned long long)h.peak, (unsigned long long)f.peak);
        printf("%s %s: activations held %llu bytes (f32 %llu, ratio %.3f), pass peak %llu (f32 %llu, ratio %.3f)\n",
               name, pn, (unsigned long long)h.cur, (unsigned long long)f.cur, (double)h.cur / (double)f.cur,
               (unsigned long long)h.peak, (unsigned long long)f.peak, (double)h.peak / (double)f.peak);
    }
}

/* per_example peak of two grad-sample steps */
static uint64_t pe_peak(const dp_model_config *mc, opt_prec prec) {
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 24; c.q = 0.4; c.steps = 2; c.clip = 0.5; c.sigma = 0.7;
    c.seed.k = 5; c.key.k = 6;
    dp_model m;
    dp_dataset d;
    T_OK(dp_model_init(&m, mc, c.seed));
    T_OK(dp_dataset_generate(&d, mc, c.n, c.seed));
    opt_backend_config bc = {.name = "host", .dtype = DP_F32, .threads = 1, .use_mpi = 0};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    uint64_t peak = 0;
    opt_dp_options o = {.strategy = OPT_STRAT_GRAD_SAMPLE, .prec = prec};
    opt_dpsgd s;
    if (be && opt_dpsgd_init(&s, be, &c, &o, &m) == DP_OK) {
        dp_dpsgd_step_out out;
        memset(&out, 0, sizeof out);
        for (int64_t k = 1; k <= c.steps; k++) T_OK(opt_dpsgd_step(&out, &s, &d, k));
        opt_mem_report r;
        opt_mem_get(&r, be);
        peak = r.peak[OPT_MEM_PER_EXAMPLE];
        dp_dpsgd_step_free(&out);
        opt_dpsgd_free(&s);
    } else T_CHECK(0, "grad-sample %s: init failed: %s", opt_prec_names[prec], dp_last_error());
    if (be) opt_backend_destroy(be);
    dp_model_free(&m);
    dp_dataset_free(&d);
    return peak;
}

static void check_pe(const char *name, const dp_model_config *mc) {
    const uint64_t f = pe_peak(mc, OPT_PREC_F32);
    T_CHECK(f > 0, "%s f32: no per-example gradients held", name);
    for (int pr = OPT_PREC_BF16; pr <= OPT_PREC_FP16; pr++) {
        const uint64_t h = pe_peak(mc, (opt_prec)pr);
        T_CHECK(2 * h == f, "%s %s grad-sample: per_example peak %llu bytes, f32 %llu / 2 = %llu", name,
                opt_prec_names[pr], (unsigned long long)h, (unsigned long long)f, (unsigned long long)(f / 2));
    }
}

int main(void) {
    const int64_t B = 6;
    dp_model_config mc;
    dp_model_config_default(&mc, DP_MLP);
    mc.in = 7; mc.nhidden = 2; mc.hidden[0] = 9; mc.hidden[1] = 5; mc.classes = 4;
    {
        const uint64_t in = 7, Hs = 14, K = 4, b = (uint64_t)B;
        const uint64_t f32 = 4 * (b + b * in + (b + 1) + b * (Hs + K) + 2 * b + b * (Hs + K) + b * (Hs + K));
        check("mlp", &mc, B, f32, b * (in + 3 * Hs + 2 * K));
        check_pe("mlp", &mc);
    }
    for (int tied = 0; tied < 2; tied++) {
        dp_model_config_default(&mc, DP_LLAMA);
        mc.vocab = 11; mc.dim = 8; mc.layers = 2; mc.heads = 2; mc.ffn = 12; mc.seq = 5; mc.tied = tied;
        const uint64_t rows = (uint64_t)B * 5, D = 8, F = 12, V = 11, L = 2;
        check(tied ? "llama-tied" : "llama", &mc, B, 0,
              rows * (L * (8 * D + 3 * F) + D + V) + (uint64_t)B * ((2 * L + 1) * D + V * D));
        check_pe(tied ? "llama-tied" : "llama", &mc);
    }
    return t_finish();
}
