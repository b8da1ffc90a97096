/* optimized/tests/test_dpzo_data.c — `--data FILE` of `reference dpzo` and `train dpzo`
 * (docs/dpzo.md "Data", docs/engine.md), in process.
 *
 * A dataset generated from the seed and written to safetensors (mlp: x F64 [N, in],
 * y I32 [N]; llama: tokens I32 [N, T]) and loaded with --data gives exports whose tensors
 * are bit-identical to the run that generated it (--dataset-size N, same seed), and whose
 * metadata differ only in data=file instead of data=generated, for both commands.
 * Mismatched files exit 2: --dataset-size differing from the file's count, an mlp file
 * with the wrong input width, llama tokens >= --vocab, a file without the tensors, a
 * malformed file. Deterministic (no statistical check); the seed is printed and settable
 * (DPCERT_TEST_SEED). Negative control: a file with one changed input gives other
 * exports (the comparison can fail). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "common/test.h"
#include "reference/dpzo.h"

int dp_cmd_train(int argc, char **argv);

/* Runs "reference dpzo ..." or "train dpzo ..." (words separated by single spaces). */
static int run(const char *line) {
    char buf[2048], *argv[128];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok(buf, " "); w && argc < 128; w = strtok(NULL, " ")) argv[argc++] = w;
    if (argc >= 2 && strcmp(argv[0], "reference") == 0) return dp_cmd_reference_dpzo(argc - 2, argv + 2);
    return dp_cmd_train(argc - 1, argv + 1);
}

/* 1 when every tensor of A and B is bit-identical (names, order, dtype, shape, bytes) and
 * the metadata agree except data=generated (A) against data=file (B). */
static int same_exports(const char *a, const char *b, int want_same_tensors) {
    dp_tensor_set x, y;
    if (dp_st_read(&x, a) != DP_OK) return 0;
    if (dp_st_read(&y, b) != DP_OK) { dp_tset_free(&x); return 0; }
    int ok = x.n == y.n && x.nmeta == y.nmeta;
    int tensors_same = ok;
    for (size_t i = 0; ok && i < x.n; i++) {
        const dp_tensor *s = &x.items[i].t, *t = &y.items[i].t;
        ok &= strcmp(x.items[i].name, y.items[i].name) == 0 && s->dtype == t->dtype && s->ndim == t->ndim;
        for (int k = 0; ok && k < s->ndim; k++) ok &= s->shape[k] == t->shape[k];
        if (ok) tensors_same &= memcmp(s->data, t->data, dp_tensor_nbytes(s)) == 0;
    }
    int data_keys = 0;
    for (size_t i = 0; ok && i < x.nmeta; i++) {
        ok &= strcmp(x.meta[i].key, y.meta[i].key) == 0;
        if (ok && strcmp(x.meta[i].key, "data") == 0) {
            ok &= strcmp(x.meta[i].value, "generated") == 0 && strcmp(y.meta[i].value, "file") == 0;
            data_keys++;
        } else if (ok) {
            ok &= strcmp(x.meta[i].value, y.meta[i].value) == 0;
        }
    }
    dp_tset_free(&x);
    dp_tset_free(&y);
    return ok && data_keys == 1 && tensors_same == want_same_tensors;
}

/* The metadata value of KEY in file A as an integer (-1 when absent or unreadable). */
static long long meta_int(const char *a, const char *key) {
    dp_tensor_set x;
    if (dp_st_read(&x, a) != DP_OK) return -1;
    long long v = -1;
    for (size_t i = 0; i < x.nmeta; i++)
        if (strcmp(x.meta[i].key, key) == 0) v = atoll(x.meta[i].value);
    dp_tset_free(&x);
    return v;
}

/* 1 when the export A follows the drop rule on its own per-example losses: for every pair
 * (j, k), d = loss_plus - loss_minus; diff_clipped = 0 when d is not finite, clip(d, C)
 * otherwise; s_j = (sum_k diff_clipped + noise_j) / denominator bit for bit; the metadata
 * `dropped` equals the number of non-finite d. *ndropped receives that number. */
static int follows_drop_rule(const char *a, double clip, double den, long long *ndropped) {
    dp_tensor_set x;
    *ndropped = -1;
    if (dp_st_read(&x, a) != DP_OK) return 0;
    const dp_tensor *lp = dp_tset_find(&x, "per_sample.loss_plus"), *lm = dp_tset_find(&x, "per_sample.loss_minus");
    const dp_tensor *dc = dp_tset_find(&x, "per_sample.diff_clipped"), *nz = dp_tset_find(&x, "step.noise");
    const dp_tensor *sc = dp_tset_find(&x, "step.scalar");
    int ok = lp && lm && dc && nz && sc && lp->ndim == 2 && nz->ndim == 1;
    long long nd = 0;
    for (int64_t j = 0; ok && j < lp->shape[0]; j++) {
        double sum = 0.0;
        int64_t b = lp->shape[1];
        const double *P = (const double *)lp->data + j * b, *M = (const double *)lm->data + j * b;
        const double *Dc = (const double *)dc->data + j * b;
        for (int64_t k = 0; k < b; k++) {
            double d = P[k] - M[k], want = !isfinite(d) ? 0.0 : d > clip ? clip : d < -clip ? -clip : d;
            if (!isfinite(d)) nd++;
            ok &= Dc[k] == want;
            sum += want;
        }
        ok &= ((const double *)sc->data)[j] == (sum + ((const double *)nz->data)[j]) / den;
    }
    dp_tset_free(&x);
    *ndropped = nd;
    return ok && meta_int(a, "dropped") == nd;
}

/* Non-finite loss differences (docs/dpzo.md step 2.3): phi = 2e307 on a 32-wide mlp makes
 * some L(theta +- phi z) overflow. Both commands drop those pairs (contribution 0, counted
 * in the metadata `dropped` and the step line) instead of failing with exit 3 (the old
 * rule). The two model implementations round these overflowing losses differently
 * (reference/model.c vs the engine: a few ulp near DBL_MAX, 0 vs NaN), so the check is
 * that each export follows the rule on its own losses bit for bit. */
static void check_dropped(void) {
    const char *a = "--model mlp --in 4 --hidden 32 --classes 3 --dataset-size 3 --q 1 --steps 2 --clip 1 --sigma 1 "
                    "--phi 2e307 --lr 0 --noise-key 9 --n-spsa 2 --seed 7";
    char line[1024];
    snprintf(line, sizeof line, "reference dpzo %s --export drop-ref", a);
    T_CHECK(run(line) == 0, "reference dpzo with overflowing losses exits 0");
    snprintf(line, sizeof line, "train dpzo --impl optimized --backend host %s --export drop-train", a);
    T_CHECK(run(line) == 0, "train dpzo with overflowing losses exits 0");
    const double den = ((1.0 * 3.0) * 2.0) * 2e307;
    long long tot[2] = {0, 0};
    for (int t = 1; t <= 2; t++) {
        char x[128], y[128];
        long long nx, ny;
        snprintf(x, sizeof x, "drop-ref/step-%06d.safetensors", t);
        snprintf(y, sizeof y, "drop-train/step-%06d.safetensors", t);
        T_CHECK(follows_drop_rule(x, 1.0, den, &nx), "step %d: reference export breaks the drop rule", t);
        T_CHECK(follows_drop_rule(y, 1.0, den, &ny), "step %d: train export breaks the drop rule", t);
        tot[0] += nx;
        tot[1] += ny;
    }
    printf("dropped pairs over 2 steps: reference %lld, train %lld\n", tot[0], tot[1]);
    T_CHECK(tot[0] > 0 && tot[1] > 0, "the case does not exercise the drop rule");
    /* control: the rule check can fail (a wrong denominator) */
    long long nd;
    T_CHECK(!follows_drop_rule("drop-ref/step-000001.safetensors", 1.0, den * 2.0, &nd), "control");
}

static void write_mlp(const char *path, const ref_dataset *d, int in, int64_t n) {
    dp_tensor_set s;
    dp_tset_init(&s);
    int64_t sx[2] = {n, in}, sy[1] = {n};
    T_OK(dp_tset_add_raw(&s, "x", DP_F64, d->x, 2, sx));
    T_OK(dp_tset_add_raw(&s, "y", DP_I32, d->y, 1, sy));
    T_OK(dp_st_write(path, &s));
    dp_tset_free(&s);
}

static void write_tokens(const char *path, const int32_t *tok, int64_t n, int seq) {
    dp_tensor_set s;
    dp_tset_init(&s);
    int64_t st[2] = {n, seq};
    T_OK(dp_tset_add_raw(&s, "tokens", DP_I32, tok, 2, st));
    T_OK(dp_st_write(path, &s));
    dp_tset_free(&s);
}

static void check_pair(const char *cmd, const char *model, const char *file, int64_t n, uint64_t seed,
                       const char *tag) {
    char line[2048], a[256], b[256];
    const char *hp = "--q 0.5 --steps 2 --clip 1 --sigma 1 --phi 0.01 --lr 0.05 --noise-key 9 --n-spsa 2";
    snprintf(line, sizeof line, "%s %s --dataset-size %lld %s --seed %llu --export gen-%s", cmd, model, (long long)n, hp,
             (unsigned long long)seed, tag);
    T_CHECK(run(line) == 0, "%s: generated run", tag);
    snprintf(line, sizeof line, "%s %s --data %s %s --seed %llu --export file-%s", cmd, model, file, hp,
             (unsigned long long)seed, tag);
    T_CHECK(run(line) == 0, "%s: --data run", tag);
    for (int t = 1; t <= 2; t++) {
        snprintf(a, sizeof a, "gen-%s/step-%06d.safetensors", tag, t);
        snprintf(b, sizeof b, "file-%s/step-%06d.safetensors", tag, t);
        T_CHECK(same_exports(a, b, 1), "%s step %d: --data export equals the generated one but for data=file", tag, t);
    }
    /* --dataset-size equal to the file's count is accepted, a different one is not */
    snprintf(line, sizeof line, "%s %s --data %s --dataset-size %lld %s --seed %llu", cmd, model, file, (long long)n, hp,
             (unsigned long long)seed);
    T_CHECK(run(line) == 0, "%s: --data with the matching --dataset-size", tag);
    snprintf(line, sizeof line, "%s %s --data %s --dataset-size %lld %s --seed %llu", cmd, model, file,
             (long long)n + 1, hp, (unsigned long long)seed);
    T_CHECK(run(line) == 2, "%s: --dataset-size differing from the file exits 2", tag);
}

int main(void) {
    uint64_t seed = t_seed(7);
    const char *cmds[2] = {"reference dpzo", "train dpzo --impl optimized --backend host"};
    const char *tags[2] = {"ref", "train"};
    check_dropped();

    /* mlp */
    ref_model_config mc;
    ref_config_default(&mc, REF_MLP);
    mc.in = 4; mc.nhidden = 1; mc.hidden[0] = 6; mc.classes = 3;
    const char *mlp = "--model mlp --in 4 --hidden 6 --classes 3";
    const int64_t n = 10;
    ref_dataset d;
    T_OK(ref_dataset_generate(&d, &mc, n, (dp_seed){seed}));
    write_mlp("mlp.safetensors", &d, mc.in, n);
    for (int c = 0; c < 2; c++) {
        char tag[32];
        snprintf(tag, sizeof tag, "mlp-%s", tags[c]);
        check_pair(cmds[c], mlp, "mlp.safetensors", n, seed, tag);
    }
    /* negative control: one changed input changes the exports */
    d.x[0] += 1.0;
    write_mlp("mlp-changed.safetensors", &d, mc.in, n);
    char line[1024];
    snprintf(line, sizeof line, "reference dpzo %s --data mlp-changed.safetensors --q 1 --steps 1 --clip 1 --sigma 1 "
             "--phi 0.01 --lr 0.05 --noise-key 9 --n-spsa 2 --seed %llu --export changed", mlp, (unsigned long long)seed);
    T_CHECK(run(line) == 0, "changed-data run");
    snprintf(line, sizeof line, "reference dpzo %s --dataset-size %lld --q 1 --steps 1 --clip 1 --sigma 1 --phi 0.01 "
             "--lr 0.05 --noise-key 9 --n-spsa 2 --seed %llu --export unchanged", mlp, (long long)n, (unsigned long long)seed);
    T_CHECK(run(line) == 0, "q = 1 generated run");
    T_CHECK(same_exports("unchanged/step-000001.safetensors", "changed/step-000001.safetensors", 0),
            "control: a changed example changes the exported tensors");
    /* an mlp file of the wrong input width */
    write_mlp("mlp-wide.safetensors", &d, mc.in, n / 2); /* x read as [5, 4]: fine, then a narrower model */
    for (int c = 0; c < 2; c++) {
        snprintf(line, sizeof line, "%s --model mlp --in 8 --hidden 6 --classes 3 --data mlp.safetensors --q 0.5 "
                 "--steps 1 --clip 1 --sigma 1 --phi 0.01 --lr 0.05 --seed 1", cmds[c]);
        T_CHECK(run(line) == 2, "%s: --in differing from the file's width exits 2", tags[c]);
        snprintf(line, sizeof line, "%s %s --data mlp-wide.safetensors --dataset-size 10 --q 0.5 --steps 1 --clip 1 "
                 "--sigma 1 --phi 0.01 --lr 0.05 --seed 1", cmds[c], mlp);
        T_CHECK(run(line) == 2, "%s: --dataset-size 10 with a 5-example file exits 2", tags[c]);
    }
    ref_dataset_free(&d);

    /* llama */
    ref_model_config lc;
    ref_config_default(&lc, REF_LLAMA);
    lc.vocab = 16; lc.dim = 8; lc.layers = 1; lc.heads = 2; lc.ffn = 16; lc.seq = 4;
    const char *llama = "--model llama --vocab 16 --dim 8 --layers 1 --heads 2 --ffn 16 --seq 4";
    T_OK(ref_dataset_generate(&d, &lc, 6, (dp_seed){seed + 1}));
    write_tokens("llama.safetensors", d.tokens, 6, lc.seq);
    for (int c = 0; c < 2; c++) {
        char tag[32];
        snprintf(tag, sizeof tag, "llama-%s", tags[c]);
        check_pair(cmds[c], llama, "llama.safetensors", 6, seed + 1, tag);
    }
    d.tokens[3] = lc.vocab; /* out of range */
    write_tokens("llama-bad.safetensors", d.tokens, 6, lc.seq);
    ref_dataset_free(&d);
    /* a file without the model's tensors, and bytes that are not safetensors */
    FILE *f = fopen("garbage.safetensors", "wb");
    T_CHECK(f != NULL, "create garbage file");
    if (f) { fputs("not a safetensors file", f); fclose(f); }
    for (int c = 0; c < 2; c++) {
        const char *bad[3][2] = {{llama, "llama-bad.safetensors"}, {llama, "mlp.safetensors"}, {mlp, "garbage.safetensors"}};
        const char *why[3] = {"token >= vocab", "mlp file for a llama model", "malformed file"};
        for (int k = 0; k < 3; k++) {
            snprintf(line, sizeof line, "%s %s --data %s --q 0.5 --steps 1 --clip 1 --sigma 1 --phi 0.01 --lr 0.05 "
                     "--seed 1", cmds[c], bad[k][0], bad[k][1]);
            T_CHECK(run(line) == 2, "%s: %s exits 2", tags[c], why[k]);
        }
    }
    return t_finish();
}
