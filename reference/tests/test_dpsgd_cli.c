/* reference/tests/test_dpsgd_cli.c — `dpcert reference dpsgd` (called through
 * dp_cmd_reference_dpsgd): exit codes for bad input, the export holds exactly the
 * tensors of docs/dpsgd.md ("Exports") with the documented metadata, the noise key is
 * exported only when given, --data files, and the timing requirement (one DP-SGD step on
 * the default tiny llama with a batch of about 8 in under a second on one core; best of 5). */
#include <string.h>
#include <time.h>

#include "common/safetensors.h"
#include "common/test.h"
#include "reference/dpsgd.h"

static int run_cmd(const char *line) {
    char buf[2048], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *s = strtok(buf, " "); s && argc < 64; s = strtok(NULL, " ")) argv[argc++] = s;
    fflush(stdout);
    int rc = dp_cmd_reference_dpsgd(argc, argv);
    fflush(stdout);
    fflush(stderr);
    return rc;
}

static void test_bad_options(void) {
    const char *bad[] = {
        "--model llama --clip 0", "--model llama --clip -1", "--model llama --sigma -0.5", "--model llama --q 0",
        "--model llama --q 1.5", "--model llama --q nan", "--model llama --dataset-size 0", "--model llama --steps 0",
        "--model llama --heads 5", "--model llama --dim 12 --heads 4", "--model llama --bogus 1", "--model gpt",
        "--model llama --clipping rows", "--model llama --clip-fn soft", "--model llama --optimizer lion",
        "--model llama --precision half", "--model llama --sigma", "--model llama --sigma inf", "--q 0.5",
        "--model mlp --vocab 10", "--model llama --hidden 3,4", "--model llama --groups tensor",
        "--model llama --clipping group", "--model llama --clipping group --groups a=tok_emb:1",
        "--model llama --gamma 0.1", "--model llama --momentum 0.9 --optimizer adamw", "--model llama --beta1 0.5",
        "--model llama --micro-batches 0", "--model mlp --data no_such_file.safetensors",
        "--model llama --lr -1", "--model llama --clip 1 --clip 2", "--model mlp --hidden 3,x",
        /* too large: N * T = 2^32-1 * 16 and N * in = (2^32-1) * 1 elements > 2^31 */
        "--model llama --dataset-size 4294967295", "--model mlp --in 1 --dataset-size 4294967295",
        NULL};
    for (int k = 0; bad[k]; k++) {
        int rc = run_cmd(bad[k]);
        T_CHECK(rc == 2, "'%s' exited %d (want 2)", bad[k], rc);
    }
    T_CHECK(run_cmd("--help") == 0, "--help exits 0");
    /* negative control: a valid command line exits 0 */
    T_CHECK(run_cmd("--model mlp --dataset-size 8 --q 0.5 --noise-key 1") == 0, "valid command exits 0");
}

/* The exact tensor list of docs/dpsgd.md, in order. */
static int expected_names(char names[][96], const ref_model *m, int flat, const ref_clip_groups *g) {
    int n = 0;
    for (int p = 0; p < m->nparams; p++) snprintf(names[n++], 96, "params.%s", m->params[p].name);
    snprintf(names[n++], 96, "batch.indices");
    if (m->cfg.kind == REF_LLAMA) snprintf(names[n++], 96, "batch.tokens");
    else { snprintf(names[n++], 96, "batch.x"); snprintf(names[n++], 96, "batch.y"); }
    snprintf(names[n++], 96, "per_sample.loss");
    snprintf(names[n++], 96, "per_sample.norm");
    if (flat) snprintf(names[n++], 96, "per_sample.clip_factor");
    else {
        for (int k = 0; k < g->ngroups; k++) snprintf(names[n++], 96, "per_sample.norm.%s", g->name[k]);
        for (int k = 0; k < g->ngroups; k++) snprintf(names[n++], 96, "per_sample.clip_factor.%s", g->name[k]);
    }
    const char *pre[5] = {"per_sample.grad.", "step.clipped_sum.", "step.noise.", "step.private_grad.", "params_after."};
    for (int k = 0; k < 5; k++)
        for (int p = 0; p < m->nparams; p++) snprintf(names[n++], 96, "%s%s", pre[k], m->params[p].name);
    return n;
}

static void check_export(const char *path, const ref_model_config *mc, const ref_dpsgd_config *c, int key_given,
                         long step) {
    dp_tensor_set s;
    T_OK(dp_st_read(&s, path));
    ref_model m;
    T_OK(ref_model_init(&m, mc, c->seed));
    ref_clip_groups g;
    T_OK(ref_clip_groups_make(&g, c, &m));
    static char names[512][96];
    int n = expected_names(names, &m, c->style == REF_CLIP_FLAT, &g);
    T_CHECK((int)s.n == n, "%s: %zu tensors, expected %d", path, s.n, n);
    int same = 1;
    for (int k = 0; k < n && k < (int)s.n; k++)
        if (strcmp(s.items[k].name, names[k]) != 0) {
            same = 0;
            fprintf(stderr, "  tensor %d is %s, expected %s\n", k, s.items[k].name, names[k]);
            break;
        }
    T_CHECK(same, "%s: tensor names/order differ from docs/dpsgd.md", path);
    const dp_tensor *idx = dp_tset_find(&s, "batch.indices"), *gr = dp_tset_find(&s, "per_sample.grad.tok_emb");
    if (mc->kind == REF_LLAMA) {
        T_CHECK(idx && idx->dtype == DP_I64 && gr && gr->ndim == 3 && gr->shape[0] == idx->shape[0] &&
                    gr->shape[1] == mc->vocab && gr->dtype == DP_F64, "per-sample grad shape [b, V, D]");
    }
    const char *k = dp_tset_meta(&s, "noise_key");
    T_CHECK(key_given ? k != NULL : k == NULL, "noise_key in metadata iff given (%s)", k ? k : "absent");
    const char *st = dp_tset_meta(&s, "step"), *eb = dp_tset_meta(&s, "expected_batch_size");
    T_CHECK(st && atol(st) == step, "step metadata %s", st ? st : "absent");
    T_CHECK(eb && atof(eb) == c->q * (double)c->n, "expected_batch_size %s", eb ? eb : "absent");
    const char *keys[] = {"seed", "q", "sigma", "clip", "clipping", "clip_fn", "optimizer", "lr", "micro_batches",
                          "dataset_size", "steps", "model", "dpcert_version", "precision", NULL};
    for (int j = 0; keys[j]; j++) T_CHECK(dp_tset_meta(&s, keys[j]) != NULL, "metadata '%s' missing", keys[j]);
    /* the exported private gradient is (clipped_sum + noise) / (q N) */
    const dp_tensor *cs = dp_tset_find(&s, "step.clipped_sum.final_norm"), *nz = dp_tset_find(&s, "step.noise.final_norm"),
                    *pg = dp_tset_find(&s, "step.private_grad.final_norm");
    if (mc->kind == REF_LLAMA && cs && nz && pg) {
        int ok = 1;
        for (int64_t e = 0; e < dp_tensor_numel(pg); e++)
            ok &= dp_tensor_get(pg, e) == (dp_tensor_get(cs, e) + dp_tensor_get(nz, e)) / (c->q * (double)c->n);
        T_CHECK(ok, "exported private gradient formula");
    }
    ref_clip_groups_free(&g);
    ref_model_free(&m);
    dp_tset_free(&s);
}

static void test_exports(void) {
    T_CHECK(run_cmd("--model llama --dataset-size 16 --q 0.5 --steps 2 --seed 3 --noise-key 9 --export ex1") == 0,
            "llama run");
    ref_model_config mc;
    ref_config_default(&mc, REF_LLAMA);
    ref_dpsgd_config c;
    ref_dpsgd_config_default(&c);
    c.n = 16; c.q = 0.5; c.seed.k = 3;
    check_export("ex1/step-000001.safetensors", &mc, &c, 1, 1);
    check_export("ex1/step-000002.safetensors", &mc, &c, 1, 2);
    /* params_after of step 1 = params of step 2 */
    dp_tensor_set a, b;
    T_OK(dp_st_read(&a, "ex1/step-000001.safetensors"));
    T_OK(dp_st_read(&b, "ex1/step-000002.safetensors"));
    const dp_tensor *x = dp_tset_find(&a, "params_after.layers.1.wo"), *y = dp_tset_find(&b, "params.layers.1.wo");
    T_CHECK(x && y && memcmp(x->data, y->data, dp_tensor_nbytes(x)) == 0, "params_after(1) == params(2)");
    dp_tset_free(&a);
    dp_tset_free(&b);

    T_CHECK(run_cmd("--model llama --dataset-size 16 --q 0.5 --seed 3 --clipping per-layer --groups block "
                    "--export ex2") == 0, "per-layer run without a key");
    c.style = REF_CLIP_PER_LAYER;
    snprintf(c.groups, sizeof c.groups, "block");
    check_export("ex2/step-000001.safetensors", &mc, &c, 0, 1);

    /* --data: write a dataset, train the mlp on it */
    ref_model_config mm;
    ref_config_default(&mm, REF_MLP);
    ref_dataset d;
    T_OK(ref_dataset_generate(&d, &mm, 12, (dp_seed){5}));
    dp_tensor_set ds;
    dp_tset_init(&ds);
    int64_t sx[2] = {12, mm.in}, sy[1] = {12};
    T_OK(dp_tset_add_raw(&ds, "x", DP_F64, d.x, 2, sx));
    T_OK(dp_tset_add_raw(&ds, "y", DP_I32, d.y, 1, sy));
    T_OK(dp_st_write("mlp_data.safetensors", &ds));
    dp_tset_free(&ds);
    T_CHECK(run_cmd("--model mlp --data mlp_data.safetensors --q 0.5 --optimizer adamw --noise-key 2 "
                    "--clipping group --groups w=*.weight:0.5;b=*.bias:0.1 --export ex3") == 0, "mlp --data run");
    ref_dpsgd_config cm;
    ref_dpsgd_config_default(&cm);
    cm.n = 12; cm.q = 0.5; cm.style = REF_CLIP_GROUP;
    snprintf(cm.groups, sizeof cm.groups, "w=*.weight:0.5;b=*.bias:0.1");
    check_export("ex3/step-000001.safetensors", &mm, &cm, 1, 1);
    dp_tensor_set e;
    T_OK(dp_st_read(&e, "ex3/step-000001.safetensors"));
    const dp_tensor *bi = dp_tset_find(&e, "batch.indices"), *bx = dp_tset_find(&e, "batch.x");
    int ok = bi && bx;
    for (int64_t i = 0; ok && i < bi->shape[0]; i++)
        ok &= memcmp((double *)bx->data + i * mm.in, d.x + ((int64_t *)bi->data)[i] * mm.in, sizeof(double) * mm.in) == 0;
    T_CHECK(ok, "batch.x rows are the dataset rows of batch.indices");
    dp_tset_free(&e);
    T_CHECK(run_cmd("--model mlp --data mlp_data.safetensors --dataset-size 13") == 2, "--dataset-size != file");
    ref_dataset_free(&d);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void test_timing(uint64_t seed) {
    ref_model_config mc;
    ref_config_default(&mc, REF_LLAMA);
    ref_dpsgd_config c;
    ref_dpsgd_config_default(&c); /* N 64, q 0.125: expected batch 8 */
    c.seed.k = seed;
    c.key.k = seed + 1;
    ref_model m;
    ref_dataset d;
    ref_dpsgd_state st;
    ref_dpsgd_step_out o;
    memset(&o, 0, sizeof o);
    T_OK(ref_model_init(&m, &mc, c.seed));
    T_OK(ref_dataset_generate(&d, &mc, c.n, c.seed));
    T_OK(ref_dpsgd_init(&st, &c, &m));
    double best = 1e9;
    int64_t bsum = 0;
    for (int s = 1; s <= 5; s++) {
        double t0 = now();
        T_OK(ref_dpsgd_step(&o, &m, &st, &d, s));
        double t = now() - t0;
        if (t < best) best = t;
        bsum += o.b;
    }
    printf("timing: DP-SGD step on the default tiny llama, mean batch %.1f: best of 5 = %.4f s (limit 1 s)\n",
           bsum / 5.0, best);
    T_CHECK(best < 1.0, "DP-SGD step took %.3f s", best);
    ref_dpsgd_step_free(&o);
    ref_dpsgd_free(&st);
    ref_dataset_free(&d);
    ref_model_free(&m);
}

int main(void) {
    uint64_t seed = t_seed(11);
    test_bad_options();
    test_exports();
    test_timing(seed);
    return t_finish();
}
