/* reference/tests/test_dpzo_core.c — deterministic tests of the DP-ZO reference
 * (docs/dpzo.md, "Tests"): sensitivity under add-one with an adversarial example,
 * stream separation (public seed vs secret noise key), bit-identical determinism,
 * replay from the update log, pure-epsilon bookkeeping (against MPFR), option
 * checks, NaN handling, and per-example losses equal to the model's loss at
 * theta +- phi z (mlp and llama). Each check has a negative control showing it can
 * fail. */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/safetensors.h"
#include "common/test.h"
#include "reference/dpsgd.h"
#include "reference/dpzo.h"

static const double U = 1.0 / 9007199254740992.0; /* 2^-53 */

static void mlp_config(ref_model_config *cfg) {
    ref_config_default(cfg, REF_MLP);
    cfg->in = 4;
    cfg->nhidden = 1;
    cfg->hidden[0] = 8;
    cfg->classes = 3;
}

/* ---- sensitivity: adding one adversarial example moves the clipped sum by <= C ---- */
static void test_sensitivity(uint64_t seed) {
    ref_model_config cfg;
    mlp_config(&cfg);
    cfg.nhidden = 0; /* softmax regression: logits are linear in x, so huge inputs give huge loss differences */
    ref_model m;
    ref_dataset d, d2;
    const int64_t N = 10;
    T_OK(ref_model_init(&m, &cfg, (dp_seed){seed}));
    T_OK(ref_dataset_generate(&d, &cfg, N, (dp_seed){seed}));
    /* D' = D plus one adversarial example (index N) with inputs of size 1e4 */
    d2 = d;
    d2.n = N + 1;
    d2.x = malloc((size_t)(N + 1) * cfg.in * sizeof(double));
    d2.y = malloc((size_t)(N + 1) * sizeof(int32_t));
    memcpy(d2.x, d.x, (size_t)N * cfg.in * sizeof(double));
    memcpy(d2.y, d.y, (size_t)N * sizeof(int32_t));
    for (int k = 0; k < cfg.in; k++) d2.x[N * cfg.in + k] = (k & 1 ? -1e4 : 1e4);
    d2.y[N] = 1;
    d2.tokens = NULL;
    for (int variant = 0; variant < 2; variant++) { /* 0: q = 1, sigma = 0;  1: q = 0.6, sigma = 1 */
        ref_dpzo_hparams hp = {.n_data = N, .q = variant ? 0.6 : 1.0, .steps = 20, .clip = 0.5,
                               .sigma = variant ? 1.0 : 0.0, .mech = REF_DPZO_GAUSSIAN, .phi = 0.05, .lr = 0.0,
                               .n_spsa = 2, .seed = {seed}, .key = {seed ^ 0x77}};
        ref_dpzo_hparams hp2 = hp;
        hp2.n_data = N + 1;
        ref_dpzo_hparams hp_noclip = hp2;
        hp_noclip.clip = 1e300;
        ref_dpzo_model_ctx c1, c2;
        ref_dpzo_problem p1, p2;
        T_OK(ref_dpzo_problem_model(&p1, &c1, &m, &d));
        T_OK(ref_dpzo_problem_model(&p2, &c2, &m, &d2));
        ref_dpzo_step_out o1, o2, o3;
        T_OK(ref_dpzo_step_out_alloc(&o1, N, 2));
        T_OK(ref_dpzo_step_out_alloc(&o2, N + 1, 2));
        T_OK(ref_dpzo_step_out_alloc(&o3, N + 1, 2));
        int ok = 1, same_batch = 1, same_noise = 1, adv_in = 0, control_fails = 0;
        double max_raw = 0.0;
        for (int t = 1; t <= 20; t++) {
            T_OK(ref_dpzo_release(&o1, &p1, &hp, t));
            T_OK(ref_dpzo_release(&o2, &p2, &hp2, t));
            T_OK(ref_dpzo_release(&o3, &p2, &hp_noclip, t));
            /* the Poisson draw of example i does not depend on N: B' = B or B + {N} */
            int64_t extra = o2.b - o1.b;
            if (!(extra == 0 || (extra == 1 && o2.idx[o2.b - 1] == N))) same_batch = 0;
            for (int64_t k = 0; k < o1.b && same_batch; k++) if (o1.idx[k] != o2.idx[k]) same_batch = 0;
            if (extra == 1) adv_in++;
            for (int j = 0; j < 2; j++) {
                if (o1.noise[j] != o2.noise[j]) same_noise = 0;
                double ds = fabs(o2.sum[j] - o1.sum[j]);
                /* the adversarial example is last in index order, so S' = fl(S + l*):
                 * |S' - S| <= C + u (|S| + C) */
                if (ds > hp.clip + U * (fabs(o1.sum[j]) + hp.clip)) ok = 0;
                if (extra == 1) {
                    double raw = o2.loss_plus[j * o2.b + o2.b - 1] - o2.loss_minus[j * o2.b + o2.b - 1];
                    if (fabs(raw) > max_raw) max_raw = fabs(raw);
                    /* negative control: without clipping the same check fails */
                    if (fabs(o3.sum[j] - o1.sum[j]) > hp.clip + U * (fabs(o1.sum[j]) + hp.clip)) control_fails = 1;
                }
            }
        }
        printf("sensitivity (q=%g): adversarial example in %d of 20 batches, max raw |L+ - L-| = %.3g (C = %g)\n", hp.q,
               adv_in, max_raw, hp.clip);
        T_CHECK(ok, "adding one example changed the clipped sum by more than C");
        T_CHECK(same_batch, "Poisson batch of D' restricted to D differs from the batch of D");
        T_CHECK(same_noise, "noise depends on the dataset");
        T_CHECK(adv_in > 0 && max_raw > 100 * hp.clip, "the added example is not adversarial (raw diff %g)", max_raw);
        T_CHECK(control_fails, "negative control: the unclipped sum moved by <= C");
        ref_dpzo_step_out_free(&o1); ref_dpzo_step_out_free(&o2); ref_dpzo_step_out_free(&o3);
        ref_dpzo_problem_free(&p1); ref_dpzo_problem_free(&p2);
    }
    free(d2.x);
    free(d2.y);
    ref_dataset_free(&d);
    ref_model_free(&m);
}

/* ---- a short run, recording everything ---- */
typedef struct {
    int64_t b[8];
    int64_t idx[8][64];
    double noise[8][4], scalar[8][4], dir0[8];
    ref_model m;
} run_rec;

static void run(run_rec *r, uint64_t seed, uint64_t key, int K, int n) {
    ref_model_config cfg;
    mlp_config(&cfg);
    ref_dataset d;
    T_OK(ref_model_init(&r->m, &cfg, (dp_seed){seed}));
    T_OK(ref_dataset_generate(&d, &cfg, 64, (dp_seed){seed}));
    ref_dpzo_hparams hp = {.n_data = 64, .q = 0.5, .steps = K, .clip = 1.0, .sigma = 1.0, .mech = REF_DPZO_GAUSSIAN,
                           .phi = 1e-2, .lr = 0.05, .weight_decay = 0.01, .n_spsa = n, .seed = {seed}, .key = {key}};
    ref_dpzo_model_ctx ctx;
    ref_dpzo_problem pb;
    ref_dpzo_step_out o;
    T_OK(ref_dpzo_problem_model(&pb, &ctx, &r->m, &d));
    T_OK(ref_dpzo_step_out_alloc(&o, 64, n));
    for (int t = 1; t <= K; t++) {
        T_OK(ref_dpzo_step(&o, &pb, &hp, t));
        r->b[t - 1] = o.b;
        memcpy(r->idx[t - 1], o.idx, (size_t)o.b * sizeof(int64_t));
        memcpy(r->noise[t - 1], o.noise, (size_t)n * sizeof(double));
        memcpy(r->scalar[t - 1], o.scalar, (size_t)n * sizeof(double));
        double z[1];
        T_OK(ref_dpzo_direction(z, hp.seed, t, 0, 0, 1));
        r->dir0[t - 1] = z[0];
    }
    ref_dpzo_step_out_free(&o);
    ref_dpzo_problem_free(&pb);
    ref_dataset_free(&d);
}

static int same_theta(const ref_model *a, const ref_model *b) {
    for (int p = 0; p < a->nparams; p++)
        if (memcmp(a->params[p].data, b->params[p].data, (size_t)a->params[p].numel * sizeof(double))) return 0;
    return 1;
}

static int batches_equal(const run_rec *a, const run_rec *b, int t) {
    return a->b[t] == b->b[t] && !memcmp(a->idx[t], b->idx[t], (size_t)a->b[t] * sizeof(int64_t));
}

/* What DPZero does (peers-and-pitfalls.md): noise drawn from the public seed. */
static double buggy_noise(uint64_t seed, int t, int j) {
    dp_stream s;
    dp_stream_public(&s, (dp_seed){seed}, DP_PURPOSE_DPZO_DIR, (uint32_t)t, 0xFFFF);
    return dp_rng_gaussian(&s, (uint64_t)j);
}

static void test_streams_and_determinism(uint64_t seed) {
    const int K = 3, n = 2;
    static run_rec A, A2, B, C;
    run(&A, seed, seed + 101, K, n);
    run(&A2, seed, seed + 101, K, n);  /* same seed, same key   */
    run(&B, seed, seed + 202, K, n);   /* same seed, other key  */
    run(&C, seed + 1, seed + 101, K, n); /* other seed, same key */
    /* determinism: bit-identical */
    int det = same_theta(&A.m, &A2.m);
    for (int t = 0; t < K; t++)
        det = det && batches_equal(&A, &A2, t) && !memcmp(A.noise[t], A2.noise[t], sizeof A.noise[t]) &&
              !memcmp(A.scalar[t], A2.scalar[t], sizeof A.scalar[t]);
    T_CHECK(det, "same seed and noise key did not give bit-identical results");
    /* same public seed, different noise keys: same directions, other noise and batches */
    int batch_diff = 0, noise_all_diff = 1;
    for (int t = 0; t < K; t++) {
        if (!batches_equal(&A, &B, t)) batch_diff = 1;
        for (int j = 0; j < n; j++) if (A.noise[t][j] == B.noise[t][j]) noise_all_diff = 0;
        T_CHECK(A.dir0[t] == B.dir0[t], "directions depend on the noise key");
    }
    T_CHECK(batch_diff, "different noise keys gave the same batches in all %d steps", K);
    T_CHECK(noise_all_diff, "different noise keys gave an equal noise value");
    T_CHECK(!same_theta(&A.m, &B.m), "different noise keys gave the same theta_T");
    /* nothing secret is a function of the public seed: other seed, same key ->
     * same batches and same noise; directions differ */
    int sec_same = 1, dir_diff = 0;
    for (int t = 0; t < K; t++) {
        sec_same = sec_same && batches_equal(&A, &C, t) && !memcmp(A.noise[t], C.noise[t], sizeof A.noise[t]);
        if (A.dir0[t] != C.dir0[t]) dir_diff = 1;
    }
    T_CHECK(sec_same, "batches or noise changed with the public seed");
    T_CHECK(dir_diff, "directions did not change with the public seed");
    /* negative control: noise drawn from the public seed (the DPZero bug) is equal for
     * A and B, so the 'different noise' check above would fail for it */
    int bug_detected = 0;
    for (int t = 1; t <= K; t++)
        for (int j = 0; j < n; j++) if (buggy_noise(seed, t, j) == buggy_noise(seed, t, j)) bug_detected = 1;
    T_CHECK(bug_detected, "negative control: public-seed noise not detected");
    /* a key numerically equal to the seed still gives noise unrelated to the directions */
    ref_dpzo_hparams hp = {.n_data = 4, .q = 1, .steps = 1, .clip = 1, .sigma = 1, .mech = REF_DPZO_GAUSSIAN, .phi = 1,
                           .lr = 0, .n_spsa = 1, .seed = {seed}, .key = {seed}};
    double nz, z[2];
    T_OK(ref_dpzo_noise(&nz, &hp, 1, 0));
    T_OK(ref_dpzo_direction(z, hp.seed, 1, 0, 0, 2));
    T_CHECK(nz != z[0] && nz != z[1], "noise equals a direction element when key == seed");
    ref_model_free(&A.m); ref_model_free(&A2.m); ref_model_free(&B.m); ref_model_free(&C.m);
}

/* ---- replay ---- */
/* Write body + the end record (steps = number of "step " lines, SHA-256 of body), then damage it:
 * mode 0 none, 1 cut inside the last scalar line (no end record), 2 junk line appended, 3 a NUL and
 * junk appended, 4 one byte of the body changed, 5 the end record's step count off by one. */
static void write_framed(const char *path, const char *body, int mode) {
    char hex[DP_SHA256_HEX_LEN];
    size_t n = strlen(body);
    int steps = 0;
    for (const char *p = body; (p = strstr(p, "\nstep ")); p++) steps++;
    dp_sha256_buf_hex(hex, body, n);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (mode == 1) { fwrite(body, 1, n - 3, f); fclose(f); return; }
    if (mode == 4) {
        char *c = strdup(body);
        c[n - 2] = c[n - 2] == '0' ? '1' : '0';
        fputs(c, f);
        free(c);
    } else fputs(body, f);
    fprintf(f, "end steps %d sha256 %s\n", mode == 5 ? steps + 1 : steps, hex);
    if (mode == 2) fputs("step 2 seed 1 s 0x1p+0\n", f);
    if (mode == 3) fwrite("\0junk\n", 1, 6, f);
    fclose(f);
}

static void test_replay(uint64_t seed) {
    char path[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/dpzo-test-log-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    T_CHECK(fd >= 0, "mkstemp failed");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    ref_model_config cfg;
    mlp_config(&cfg);
    ref_model m, m2, m3;
    ref_dataset d;
    T_OK(ref_model_init(&m, &cfg, (dp_seed){seed}));
    T_OK(ref_dataset_generate(&d, &cfg, 32, (dp_seed){seed}));
    ref_dpzo_hparams hp = {.n_data = 32, .q = 0.25, .steps = 6, .clip = 2.0, .sigma = 0.8, .mech = REF_DPZO_LAPLACE,
                           .phi = 1e-3, .lr = 1e-3, .weight_decay = 0.1, .n_spsa = 3, .seed = {seed}, .key = {seed + 9}};
    ref_dpzo_model_ctx ctx;
    ref_dpzo_problem pb;
    ref_dpzo_step_out o;
    T_OK(ref_dpzo_problem_model(&pb, &ctx, &m, &d));
    T_OK(ref_dpzo_step_out_alloc(&o, 32, 3));
    char hex0[65];
    T_OK(ref_dpzo_theta_sha256(hex0, pb.theta, pb.numel, pb.nparams));
    T_OK(ref_dpzo_log_header(f, &hp, &cfg, hex0, m.total));
    for (int t = 1; t <= 6; t++) {
        T_OK(ref_dpzo_step(&o, &pb, &hp, t));
        T_OK(ref_dpzo_log_step(f, &hp, t, o.scalar));
    }
    {
        uint8_t *body = NULL;
        size_t blen = 0;
        T_CHECK(fflush(f) == 0, "flush");
        T_OK(dp_read_file(&body, &blen, path));
        T_OK(ref_dpzo_log_end(f, body, blen, 6));
        free(body);
    }
    fclose(f);
    ref_dpzo_log log;
    T_OK(ref_dpzo_log_read(&log, path));
    T_CHECK(log.nsteps == 6 && log.n_spsa == 3 && log.seed.k == seed && log.lr == hp.lr && log.weight_decay == hp.weight_decay &&
            log.total_params == m.total, "log header/steps not read back");
    {
        char desc[512];
        T_OK(ref_dpzo_model_desc(desc, sizeof desc, &cfg));
        T_CHECK(strcmp(log.theta0, hex0) == 0 && strcmp(log.model, desc) == 0 && log.q == hp.q && log.clip == hp.clip &&
                    log.sigma == hp.sigma && log.phi == hp.phi && log.mech == hp.mech && log.n_data == hp.n_data,
                "log theta0/model/record not read back ('%s' vs '%s')", log.model, desc);
    }
    /* replay from theta_0, without the data */
    T_OK(ref_model_init(&m2, &cfg, log.seed));
    T_OK(ref_model_init(&m3, &cfg, log.seed));
    double *th2[16], *th3[16];
    int64_t numel[16];
    for (int p = 0; p < m2.nparams; p++) { th2[p] = m2.params[p].data; th3[p] = m3.params[p].data; numel[p] = m2.params[p].numel; }
    for (int64_t k = 0; k < log.nsteps; k++) {
        double s[3];
        memcpy(s, log.scalar + k * 3, sizeof s);
        T_OK(ref_dpzo_update(th2, numel, m2.nparams, log.seed, log.step[k], s, 3, log.lr, log.weight_decay));
        if (k == log.nsteps - 1) s[2] = nextafter(s[2], INFINITY); /* negative control: one ulp */
        T_OK(ref_dpzo_update(th3, numel, m3.nparams, log.seed, log.step[k], s, 3, log.lr, log.weight_decay));
    }
    T_CHECK(same_theta(&m, &m2), "replay did not reproduce theta_T bit-identically");
    T_CHECK(!same_theta(&m, &m3), "negative control: a one-ulp change of one scalar went unnoticed");
    char h1[65], h2[65];
    T_OK(ref_dpzo_theta_sha256(h1, pb.theta, pb.numel, pb.nparams));
    T_OK(ref_dpzo_theta_sha256(h2, th2, numel, m2.nparams));
    T_CHECK(strcmp(h1, h2) == 0, "theta_T digests differ: %s vs %s", h1, h2);
    ref_dpzo_log_free(&log);
    /* malformed logs are format errors */
#define Z64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    const char *bad[] = {"garbage\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 2 seed 1 s 0x1p+0\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 2 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 1 seed 1 s 0x1p+0\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 1 seed 2 s 0x1p+0\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 1 seed 1 s nan\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr -1 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n",
                         /* overflowing lr |s| (the replay would end with an infinite theta) */
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 1 seed 1 s 1e308\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 1e308 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 1 seed 1 s 0x1p+0\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 1 seed 1 s inf\n",
                         /* v1 header, bad digest, missing model, malformed record */
                         "# dpcert dpzo update log v1\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\nstep 1 seed 1 s 0x1p+0\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 XYZ\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nstep 1 seed 1 s 0x1p+0\n",
                         "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp\nrecord q nan\n"};
    /* control: the well-formed v3 log these are made from is accepted (framed: end record + digest) */
    write_framed(path, "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\n" "step 1 seed 1 s 0x1p+0\n", 0);
    T_OK(ref_dpzo_log_read(&log, path));
    ref_dpzo_log_free(&log);
    /* issue 15 class 9: the frame. A cut log, junk or a NUL appended, a changed byte, a wrong
     * step count in the end record: each refused (the control above is the same log framed right) */
    static const char *const good = "# dpcert dpzo update log v3\nseed 1 n_spsa 1 lr 0x1p-3 weight_decay 0 params 5\ntheta0_sha256 " Z64 "\nmodel mlp in 2 hidden none classes 2\nrecord q 0x1p-1 clip 0x1p+0 sigma 0x1p+0 noise gaussian phi 0x1p-3 dataset_size 4\nstep 1 seed 1 s 0x1p+0\n";
    for (int mode = 1; mode <= 5; mode++) {
        write_framed(path, good, mode);
        dp_status st = ref_dpzo_log_read(&log, path);
        T_CHECK(st == DP_ERR_FORMAT, "framing damage %d accepted (status %d)", mode, st);
        dp_clear_error();
    }
    write_framed(path, good, 0);
    T_OK(ref_dpzo_log_read(&log, path));
    ref_dpzo_log_free(&log);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_framed(path, bad[k], 0); /* framed right: the content itself must be refused */
        int st = ref_dpzo_log_read(&log, path);
        T_CHECK(st == DP_ERR_FORMAT, "malformed log %zu accepted (status %d)", k, st);
    }
    T_CHECK(ref_dpzo_log_read(&log, "/nonexistent/dpzo.log") == DP_ERR_IO, "missing log is not an I/O error");
    unlink(path);
    ref_dpzo_step_out_free(&o);
    ref_dpzo_problem_free(&pb);
    ref_dataset_free(&d);
    ref_model_free(&m); ref_model_free(&m2); ref_model_free(&m3);
}

/* ---- pure-epsilon bookkeeping against MPFR (256 bits) ----
 * eps0 = log1p(q expm1(1/sigma)): 1/sigma (0.5 ulp), expm1 (< 1 ulp, relative error
 * of its argument amplified by at most x e^x/(e^x - 1) <= 1 + x), product (0.5 ulp),
 * log1p (< 1 ulp, condition number <= 1): relative error below (4 + 1/sigma) u. */
static void test_eps0(void) {
    double qs[] = {1e-3, 0.016, 0.5, 1.0}, sigmas[] = {0.25, 1.0, 3.7, 50.0};
    mpfr_t a, b;
    mpfr_inits2(256, a, b, (mpfr_ptr)0);
    int ok = 1;
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++) {
            double got = ref_dpzo_laplace_eps0(qs[i], sigmas[k]);
            mpfr_set_d(a, sigmas[k], MPFR_RNDN);
            mpfr_ui_div(a, 1, a, MPFR_RNDN);
            mpfr_exp(a, a, MPFR_RNDN);
            mpfr_sub_ui(a, a, 1, MPFR_RNDN);
            mpfr_mul_d(a, a, qs[i], MPFR_RNDN);
            mpfr_log1p(b, a, MPFR_RNDN);
            double want = mpfr_get_d(b, MPFR_RNDN);
            double tol = (4.0 + 1.0 / sigmas[k]) * 2 * U * fabs(want);
            if (fabs(got - want) > tol) { ok = 0; printf("eps0(q=%g, sigma=%g) = %.17g, MPFR %.17g\n", qs[i], sigmas[k], got, want); }
        }
    mpfr_clears(a, b, (mpfr_ptr)0);
    T_CHECK(ok, "epsilon_0 differs from MPFR beyond the derived bound");
    T_CHECK(isinf(ref_dpzo_laplace_eps0(0.5, 0.0)), "sigma = 0 must give infinite epsilon");
    /* the paper's q = 16/1000: eps0 is between q (e^(1/sigma) - 1) (1 - x/2) and q (e^(1/sigma) - 1) */
    double x = 0.016 * expm1(1.0);
    double e = ref_dpzo_laplace_eps0(0.016, 1.0);
    T_CHECK(e <= x && e >= x - x * x / 2, "eps0 outside [x - x^2/2, x]: %g", e);
    /* negative control: the formula without subsampling (1/sigma) is far away */
    T_CHECK(fabs(ref_dpzo_laplace_eps0(0.016, 1.0) - 1.0) > 0.5, "negative control");
}

/* ---- option checks, clipping and NaN ---- */
static dp_status nan_loss(double *loss, void *ctx, double *const *params, int64_t i) {
    (void)ctx;
    *loss = i == 1 ? NAN : i == 2 ? (params[0][0] > 1.0 ? INFINITY : 0.0) : params[0][0] * (double)(i + 1);
    return DP_OK;
}

static void test_checks(void) {
    ref_dpzo_hparams good = {.n_data = 4, .q = 0.5, .steps = 2, .clip = 1, .sigma = 1, .mech = REF_DPZO_GAUSSIAN,
                             .phi = 0.1, .lr = 0.1, .weight_decay = 0, .n_spsa = 1, .seed = {1}, .key = {2}};
    T_OK(ref_dpzo_check(&good));
    ref_dpzo_hparams h;
#define BAD(field, val)                                                                              \
    do {                                                                                             \
        h = good;                                                                                    \
        h.field = val;                                                                               \
        int st_ = ref_dpzo_check(&h);                                                                \
        T_CHECK(st_ == DP_ERR_INVALID, #field " = " #val " accepted (status %d)", st_);              \
        printf("  rejected " #field " = " #val ": %s\n", dp_last_error());                           \
    } while (0)
    BAD(phi, 0.0); BAD(phi, -1.0); BAD(phi, NAN); BAD(clip, 0.0); BAD(clip, -2.0); BAD(sigma, -0.1);
    BAD(sigma, NAN); BAD(q, 0.0); BAD(q, 1.5); BAD(n_spsa, 0); BAD(n_spsa, 257); BAD(steps, 0);
    BAD(n_data, 0); BAD(lr, -1.0); BAD(weight_decay, -1.0); BAD(mech, (ref_dpzo_mech)7);
    /* the released scalar or phi z could not be finite: a subnormal (q N) 2 phi (the scalar
     * was inf and theta NaN), phi z overflowing, N C + max|Z| overflowing */
    BAD(phi, 1e-320); BAD(phi, 1e308); BAD(clip, 1e308); BAD(sigma, 1e308);
#undef BAD
    T_CHECK(ref_dpzo_clip(INFINITY, 2.0) == 2.0 && ref_dpzo_clip(-INFINITY, 2.0) == -2.0 &&
            ref_dpzo_clip(1.5, 2.0) == 1.5 && ref_dpzo_clip(-3.0, 2.0) == -2.0, "clip");
    /* a non-finite loss difference (NaN for example 1, +inf - L- for example 2) is dropped:
     * it contributes 0 (not C), is counted, and the step succeeds (no data-dependent abort) */
    double th[1] = {1.5}, *tp[1] = {th};
    int64_t numel[1] = {1};
    ref_dpzo_problem pb = {.nparams = 1, .numel = numel, .theta = tp, .loss = nan_loss, .ctx = NULL};
    good.q = 1.0;
    good.sigma = 0.0;
    good.clip = 100.0;
    ref_dpzo_step_out o;
    T_OK(ref_dpzo_step_out_alloc(&o, 4, 1));
    int st = ref_dpzo_release(&o, &pb, &good, 1);
    T_CHECK(st == DP_OK, "non-finite loss difference: status %d, '%s'", st, dp_last_error());
    if (st == DP_OK) {
        T_CHECK(o.b == 4 && o.ndropped == 2 && o.diff_clipped[1] == 0.0 && o.diff_clipped[2] == 0.0,
                "dropped: b %lld ndropped %lld diff %g %g", (long long)o.b, (long long)o.ndropped, o.diff_clipped[1],
                o.diff_clipped[2]);
        double want = o.diff_clipped[0] + o.diff_clipped[3];
        T_CHECK(o.sum[0] == want && isfinite(o.scalar[0]) && isfinite(o.loss), "sum %g (want %g), s %g, loss %g", o.sum[0],
                want, o.scalar[0], o.loss);
        /* the loss is the mean over the two kept examples */
        double l0 = 0.5 * (o.loss_plus[0] + o.loss_minus[0]), l3 = 0.5 * (o.loss_plus[3] + o.loss_minus[3]);
        T_CHECK(o.loss == (0.0 + l0 + l3) / 2.0, "loss %g over kept pairs, want %g", o.loss, (l0 + l3) / 2.0);
        /* negative control: clipping +inf to C (the old rule) would have added C = 100 */
        T_CHECK(fabs(o.sum[0] - want - good.clip) > 1.0, "negative control");
    }
    T_CHECK(th[0] == 1.5, "theta changed by a release");
    /* an update that overflows theta is an error naming the hyperparameters, not an infinite theta */
    double sbig[1] = {1e300};
    st = ref_dpzo_update(tp, numel, 1, good.seed, 1, sbig, 1, 1e300, 0.0);
    T_CHECK(st == DP_ERR_INVALID && strstr(dp_last_error(), "--lr"), "overflowing update: status %d '%s'", st,
            dp_last_error());
    double sc;
    T_CHECK(ref_dpzo_scalar_(&sc, &good, 1e308, 1e308, 1, 0) == DP_ERR_INVALID, "infinite scalar accepted");
    th[0] = 1.0;
    good.sigma = 1.0;
    good.clip = 1.0;
    /* an output allocated for a smaller dataset is refused */
    good.n_data = 8;
    T_CHECK(ref_dpzo_step(&o, &pb, &good, 1) == DP_ERR_INTERNAL, "undersized output accepted");
    ref_dpzo_step_out_free(&o);
}

/* ---- per-example losses are the model's losses at theta +- phi z (mlp and llama) ---- */
static void test_losses_match_model(uint64_t seed, ref_model_kind kind) {
    ref_model_config cfg;
    if (kind == REF_MLP) mlp_config(&cfg);
    else {
        ref_config_default(&cfg, REF_LLAMA);
        cfg.vocab = 16; cfg.dim = 8; cfg.layers = 1; cfg.heads = 2; cfg.ffn = 16; cfg.seq = 4;
    }
    ref_model m, mp;
    ref_dataset d;
    T_OK(ref_model_init(&m, &cfg, (dp_seed){seed}));
    T_OK(ref_model_init(&mp, &cfg, (dp_seed){seed}));
    T_OK(ref_dataset_generate(&d, &cfg, 6, (dp_seed){seed}));
    ref_dpzo_hparams hp = {.n_data = 6, .q = 0.7, .steps = 1, .clip = 0.01, .sigma = 0.5, .mech = REF_DPZO_GAUSSIAN,
                           .phi = 1e-2, .lr = 0.1, .n_spsa = 1, .seed = {seed}, .key = {seed + 5}};
    ref_dpzo_model_ctx ctx;
    ref_dpzo_problem pb;
    ref_dpzo_step_out o;
    T_OK(ref_dpzo_problem_model(&pb, &ctx, &m, &d));
    T_OK(ref_dpzo_step_out_alloc(&o, 6, 1));
    T_OK(ref_dpzo_release(&o, &pb, &hp, 1));
    /* theta + phi z built independently through the model's own parameter array */
    int ok = 1, clipped = 0;
    for (int sign = -1; sign <= 1; sign += 2) {
        double *pp[64];
        for (int p = 0; p < mp.nparams; p++) {
            double *z = malloc((size_t)mp.params[p].numel * sizeof(double));
            T_OK(ref_dpzo_direction(z, hp.seed, 1, p, 0, mp.params[p].numel));
            for (int64_t e = 0; e < mp.params[p].numel; e++) mp.params[p].data[e] = m.params[p].data[e] + sign * hp.phi * z[e];
            pp[p] = mp.params[p].data;
            free(z);
        }
        for (int64_t k = 0; k < o.b; k++) {
            double l;
            T_OK(ref_example_loss(&l, &m, pp, &d, o.idx[k]));
            if (l != (sign > 0 ? o.loss_plus[k] : o.loss_minus[k])) ok = 0;
        }
    }
    for (int64_t k = 0; k < o.b; k++) {
        double raw = o.loss_plus[k] - o.loss_minus[k];
        if (o.diff_clipped[k] != ref_dpzo_clip(raw, hp.clip)) ok = 0;
        if (fabs(raw) > hp.clip) clipped++;
    }
    printf("%s: batch %lld, %d of them clipped, scalar %.6g\n", kind == REF_MLP ? "mlp" : "llama", (long long)o.b, clipped, o.scalar[0]);
    T_CHECK(ok, "%s: per-example losses differ from the model's loss at theta +- phi z", kind == REF_MLP ? "mlp" : "llama");
    T_CHECK(o.b > 0 && isfinite(o.scalar[0]), "empty batch or non-finite scalar");
    ref_dpzo_step_out_free(&o);
    ref_dpzo_problem_free(&pb);
    ref_dataset_free(&d);
    ref_model_free(&m);
    ref_model_free(&mp);
}

/* ---- the same noise key draws the same Poisson batches in DP-ZO and DP-SGD ---- */
static void test_same_batches_as_dpsgd(uint64_t seed) {
    int64_t a[200], b[200], na = 0, nb = 0;
    int same = 1, differs_other_key = 0;
    for (int t = 1; t <= 50; t++) {
        T_OK(ref_dpzo_poisson(a, &na, (dp_noise_key){seed}, t, 0.3, 200));
        T_OK(ref_dpsgd_poisson(b, &nb, (dp_noise_key){seed}, t, 0.3, 200));
        if (na != nb || memcmp(a, b, (size_t)na * sizeof *a)) same = 0;
        /* negative control: another key gives other batches */
        T_OK(ref_dpsgd_poisson(b, &nb, (dp_noise_key){seed + 1}, t, 0.3, 200));
        if (na != nb || memcmp(a, b, (size_t)na * sizeof *a)) differs_other_key = 1;
    }
    T_CHECK(same, "DP-ZO and DP-SGD draw different batches from the same noise key");
    T_CHECK(differs_other_key, "negative control: batches did not depend on the key");
}

int main(void) {
    uint64_t seed = t_seed(4242);
    test_sensitivity(seed);
    test_streams_and_determinism(seed);
    test_replay(seed);
    test_eps0();
    test_same_batches_as_dpsgd(seed);
    test_checks();
    test_losses_match_model(seed, REF_MLP);
    test_losses_match_model(seed, REF_LLAMA);
    return t_finish();
}
