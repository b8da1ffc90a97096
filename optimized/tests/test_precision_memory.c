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
 *   - the peak of the pass at bf16 is below the f32 one.
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

int main(void) {
    const int64_t B = 6;
    dp_model_config mc;
    dp_model_config_default(&mc, DP_MLP);
    mc.in = 7; mc.nhidden = 2; mc.hidden[0] = 9; mc.hidden[1] = 5; mc.classes = 4;
    {
        const uint64_t in = 7, Hs = 14, K = 4, b = (uint64_t)B;
        const uint64_t f32 = 4 * (b + b * in + (b + 1) + b * (Hs + K) + 2 * b + b * (Hs + K) + b * (Hs + K));
        check("mlp", &mc, B, f32, b * (in + 3 * Hs + 2 * K));
    }
    for (int tied = 0; tied < 2; tied++) {
        dp_model_config_default(&mc, DP_LLAMA);
        mc.vocab = 11; mc.dim = 8; mc.layers = 2; mc.heads = 2; mc.ffn = 12; mc.seq = 5; mc.tied = tied;
        const uint64_t rows = (uint64_t)B * 5, D = 8, F = 12, V = 11, L = 2;
        check(tied ? "llama-tied" : "llama", &mc, B, 0,
              rows * (L * (8 * D + 3 * F) + D + V) + (uint64_t)B * ((2 * L + 1) * D + V * D));
    }
    return t_finish();
}
