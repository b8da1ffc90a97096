/* optimized/dpzo.c — DP-ZO on the engine, data-parallel (docs/engine.md "DP-ZO"),
 * and `dpcert train dpzo`. */
#include "optimized/dpzo.h"
#include "common/alloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "optimized/dpsgd.h"
#include "optimized/opt_spec.h"
#include "optimized/opt_mem.h"
#include "optimized/precision.h"
#include "optimized/train.h"

dp_status opt_dpzo_init(opt_dpzo *s, opt_backend *be, const dp_dpzo_hparams *hp, const dp_model *m) {
    memset(s, 0, sizeof *s);
    DP_TRY(opt_dpzo_check(hp));
    if (m->nparams > DP_DPZO_MAX_PARAMS) return dp_error(DP_ERR_INVALID, "too many parameter tensors for DP-ZO lanes");
    s->be = be;
    s->hp = *hp;
    s->nparams = m->nparams;
    s->numel = dp_calloc((size_t)m->nparams, sizeof(int64_t));
    if (!s->numel) return dp_error(DP_ERR_NOMEM, "out of memory");
    for (int p = 0; p < m->nparams; p++) s->numel[p] = m->params[p].numel;
    s->theta = opt_f64_arrays_alloc(s->numel, s->nparams);
    s->work = opt_f64_arrays_alloc(s->numel, s->nparams);
    s->z = opt_f64_arrays_alloc(s->numel, s->nparams);
    if (!s->theta || !s->work || !s->z) { opt_dpzo_free(s); return dp_error(DP_ERR_NOMEM, "out of memory"); }
    for (int p = 0; p < m->nparams; p++) memcpy(s->theta[p], m->params[p].data, sizeof(double) * (size_t)s->numel[p]);
    dp_status st = opt_model_create(&s->om, be, m);
    if (st != DP_OK) { opt_dpzo_free(s); return st; }
    return DP_OK;
}

void opt_dpzo_free(opt_dpzo *s) {
    if (s->om.be) opt_model_free(&s->om);
    opt_f64_arrays_free(s->theta, s->nparams); opt_f64_arrays_free(s->work, s->nparams); opt_f64_arrays_free(s->z, s->nparams);
    dp_free(s->numel);
    memset(s, 0, sizeof *s);
}

dp_status opt_dpzo_set_precision(opt_dpzo *s, opt_prec p, int master_half) {
    if (master_half && !opt_prec_is_half(p))
        return dp_error(DP_ERR_USAGE, "--inject-bug master-half applies to --precision bf16 or fp16 only");
    s->prec = p;
    s->master_half = master_half;
    if (!opt_prec_is_half(p)) return DP_OK;
    if (s->be->dtype != DP_F32)
        return dp_error(DP_ERR_INTERNAL, "--precision %s needs an f32 backend (got %s)", opt_prec_names[p],
                        dp_dtype_name(s->be->dtype));
    for (int q = 0; q < s->nparams; q++) /* the f32 master weights */
        for (int64_t e = 0; e < s->numel[q]; e++) s->theta[q][e] = (double)(float)s->theta[q][e];
    s->om.prec = p;
    return DP_OK;
}

/* theta +- phi z of one element. Half precision (docs/precision.md "DP-ZO"): from the f32
 * master m in f32 arithmetic, round_h(m +- (phi z)), every operand f32. */
static double perturbed(const opt_dpzo *s, double m, double z, double sign) {
    if (!opt_prec_is_half(s->prec)) return sign > 0 ? m + s->hp.phi * z : m - s->hp.phi * z;
    float pz = (float)s->hp.phi * (float)z;
    float t = sign > 0 ? (float)m + pz : (float)m - pz;
    return (double)opt_prec_round_value(s->prec, t);
}

/* Losses of the share idx[0..nl) at theta + sign phi z (z of the current direction). */
static dp_status share_losses(double *out, opt_dpzo *s, const dp_dataset *d, const int64_t *idx, int64_t nl,
                              double sign) {
    for (int p = 0; p < s->nparams; p++)
        for (int64_t e = 0; e < s->numel[p]; e++) s->work[p][e] = perturbed(s, s->theta[p][e], s->z[p][e], sign);
    DP_TRY(opt_model_set_params(&s->om, s->work));
    return opt_forward_loss(out, &s->om, d, idx, nl);
}

static double r32_(double x, int f32) { return f32 ? (double)(float)x : x; }
static float bf16_round(float x) { return opt_prec_round_value(OPT_PREC_BF16, x); }
static float fp16_round(float x) { return opt_prec_round_value(OPT_PREC_FP16, x); }

dp_status opt_dpzo_step(dp_dpzo_step_out *out, opt_dpzo *s, const dp_dataset *d, int64_t step, int gather) {
    const dp_dpzo_hparams *hp = &s->hp;
    const int half = opt_prec_is_half(s->prec);
    opt_backend *be = s->be;
    const int n = hp->n_spsa, R = be->comm.size, rank = be->comm.rank;
    if (out->cap_n_data < hp->n_data || out->n != n)
        return dp_error(DP_ERR_INTERNAL, "DP-ZO step output allocated for the wrong sizes");
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " out of range", step);
    out->step = step;
    DP_TRY(opt_poisson(out->idx, &out->b, hp->key, step, hp->q, hp->n_data)); /* global */
    int64_t b = out->b, lo, hi;
    opt_rank_share(&lo, &hi, b, rank, R);
    int64_t nl = hi - lo;
    double *lp = dp_calloc((size_t)(n * nl + 1), sizeof(double)), *lm = dp_calloc((size_t)(n * nl + 1), sizeof(double));
    double *dc = dp_calloc((size_t)(n * nl + 1), sizeof(double));
    double *red = dp_calloc((size_t)(n + 2), sizeof(double)); /* [n clipped sums, loss sum, dropped count] */
    dp_status st = (lp && lm && dc && red) ? DP_OK : dp_error(DP_ERR_NOMEM, "out of memory");
    for (int j = 0; st == DP_OK && j < n; j++) {
        for (int p = 0; st == DP_OK && p < s->nparams; p++)
            st = opt_dpzo_direction(s->z[p], hp->seed, step, p, j, s->numel[p]); /* public DPZO_DIR stream */
        if (st == DP_OK && nl > 0) st = share_losses(lp + j * nl, s, d, out->idx + lo, nl, +1.0);
        if (st == DP_OK && nl > 0) st = share_losses(lm + j * nl, s, d, out->idx + lo, nl, -1.0);
        double sum = 0;
        for (int64_t k = 0; st == DP_OK && k < nl; k++) {
            /* half: the f32 losses' difference, clip at the f32 C and the sum in f32 */
            double df = r32_(lp[j * nl + k] - lm[j * nl + k], half);
            if (!isfinite(df)) { /* dropped as in the reference: contributes 0, counted */
                dc[j * nl + k] = 0.0;
                red[n + 1] += 1.0;
            } else {
                dc[j * nl + k] = opt_dpzo_clip(df, r32_(hp->clip, half));
                red[n] += 0.5 * (lp[j * nl + k] + lm[j * nl + k]);
            }
            sum = r32_(sum + dc[j * nl + k], half);
        }
        red[j] = sum;
    }
    /* the one all-reduce of the step: n + 2 doubles (sums, loss sum, dropped count), through the backend's host-byte
     * gather (f64 whatever --dtype is), summed in rank order */
    if (st == DP_OK && R > 1) {
        void *all = NULL;
        size_t len = 0;
        st = OPT_CALL(be, allgatherv_bytes, &all, &len, red, sizeof(double) * (size_t)(n + 2));
        if (st == DP_OK && len != sizeof(double) * (size_t)(R * (n + 2)))
            st = dp_error(DP_ERR_INTERNAL, "DP-ZO all-reduce: %zu bytes gathered", len);
        const double *a = all;
        for (int j = 0; st == DP_OK && j <= n + 1; j++) {
            double acc = a[j];
            for (int r = 1; r < R; r++) acc = r32_(acc + a[r * (n + 2) + j], half && j < n);
            red[j] = acc;
        }
        dp_free(all);
    }
    for (int j = 0; j < n; j++) out->sum[j] = red[j];
    if (st == DP_OK) st = opt_dpzo_noise(out->noise, hp, step); /* the single draw, same on every rank */
    for (int j = 0; half && j < n; j++) out->noise[j] = r32_(out->noise[j], 1); /* f32 noise */
    if (st == DP_OK) st = opt_dpzo_scalars(out->scalar, hp, out->sum, out->noise, step);
    for (int j = 0; half && j < n; j++) out->scalar[j] = r32_(out->scalar[j], 1); /* the f32 released scalar */
    out->ndropped = (int64_t)red[n + 1]; /* an exact integer count (< 2^53) */
    int64_t kept = b * (int64_t)n - out->ndropped;
    out->loss = kept ? red[n] / (double)kept : NAN;
    /* per-example arrays [n][b] in global order (exports) */
    if (st == DP_OK && gather) {
        double *arrs[3] = {lp, lm, dc}, *dst[3] = {out->loss_plus, out->loss_minus, out->diff_clipped};
        for (int a = 0; st == DP_OK && a < 3; a++)
            for (int j = 0; st == DP_OK && j < n; j++) {
                void *g = NULL;
                size_t len = 0;
                st = OPT_CALL(be, allgatherv_bytes, &g, &len, arrs[a] + j * nl, sizeof(double) * (size_t)nl);
                if (st == DP_OK && len != sizeof(double) * (size_t)b) st = dp_error(DP_ERR_INTERNAL, "DP-ZO gather size");
                if (st == DP_OK && b) memcpy(dst[a] + (size_t)j * (size_t)b, g, len);
                dp_free(g);
            }
    }
    /* the public update, identical on every rank */
    if (st == DP_OK && !half)
        st = opt_dpzo_update(s->theta, s->numel, s->nparams, hp->seed, step, out->scalar, n, hp->lr, hp->weight_decay);
    else if (st == DP_OK) /* the f32 master weights */
        st = opt_dpzo_update_f32(s->theta, s->numel, s->nparams, hp->seed, step, out->scalar, n, hp->lr,
                                 hp->weight_decay, !s->master_half ? NULL : s->prec == OPT_PREC_FP16 ? fp16_round : bf16_round);
    dp_free(lp); dp_free(lm); dp_free(dc); dp_free(red);
    return st;
}

/* ---------------------------------------------------------------- the command */

dp_status opt_dpzo_run_cmd(int argc, char **argv, int *help, int *use_mpi) {
    dp_dpzo_cli z;
    dp_dpzo_cli_init(&z);
    opt_train_cli t;
    opt_train_cli_init(&t);
    dp_opt opts[DP_DPZO_NOPTS + OPT_TRAIN_NOPTS];
    size_t nopts = 0;
    DP_TRY(dp_dpzo_cli_add_opts(opts, &nopts, DP_DPZO_NOPTS, &z));
    DP_TRY(opt_train_add_opts(opts, &nopts, sizeof opts / sizeof opts[0], &t));
    DP_TRY(dp_opts_parse(opts, nopts, argc, argv, NULL, 0, NULL, help));
    if (*help) {
        printf("usage: dpcert train dpzo --impl optimized --backend host|cuda [--precision f64|f32|bf16|fp16]\n"
               "       --model mlp|llama [model flags]\n"
               "       (--dataset-size N | --data FILE) --q Q --steps K --clip C --sigma S [--noise gaussian|laplace]\n"
               "       --phi PHI --lr LR [--n-spsa n] --seed SEED [--noise-key KEY] [--weight-decay WD] [--export DIR]\n"
               "DP-ZO on the engine, data-parallel under mpirun (docs/engine.md): one line per step as\n"
               "'dpcert reference dpzo'.\n\n");
        dp_opts_print_help(opts, nopts);
        return DP_OK;
    }
    opt_backend_config bc;
    opt_dp_options eo;
    DP_TRY(opt_train_parse(&bc, &eo, &t, 1));
    dp_model_config cfg;
    dp_dpzo_hparams hp;
    DP_TRY(dp_dpzo_cli_finish(&cfg, &hp, &z, opt_dpzo_check));
    opt_backend *be = NULL;
    DP_TRY(opt_train_start(&be, &bc, &hp.key, use_mpi));
    int rank = be->comm.rank;
    dp_status agree = opt_train_agree(be, "dpzo", opts, nopts, &cfg);
    /* memory pre-check (docs/memory.md); with --data again once N is known */
    const double es = (double)opt_backend_esize(be);
    if (agree == DP_OK)
        agree = dp_model_cli_mem_check(&z.m, opt_mem_dpzo(&cfg, &hp, es, be->comm.size,
                                                           z.m.seen_data ? 0 : (double)hp.n_data, t.seen_export), "the run");
    if (agree != DP_OK) { opt_backend_destroy(be); return agree; }
    if (rank == 0 && z.reveal_key && !z.seen_key) dp_cli_reveal_noise_key("train dpzo", hp.key.k);
    dp_model m;
    dp_dataset d;
    memset(&m, 0, sizeof m); memset(&d, 0, sizeof d);
    opt_dpzo s;
    memset(&s, 0, sizeof s);
    dp_dpzo_step_out out;
    memset(&out, 0, sizeof out);
    double **before = NULL;
    dp_status st = dp_model_init(&m, &cfg, hp.seed);
    if (st == DP_OK) st = dp_dpzo_cli_dataset(&d, &hp, &cfg, &z, opt_dpzo_check);
    if (st == DP_OK && z.m.seen_data)
        st = dp_model_cli_mem_check(&z.m, opt_mem_dpzo(&cfg, &hp, es, be->comm.size, (double)d.n, t.seen_export), "the run");
    if (st == DP_OK && opt_prec_is_half(eo.prec)) st = opt_prec_check(be, &eo, &m); /* fp16 range at load */
    if (st == DP_OK) st = opt_prec_check_data(&eo, &d, z.m.seen_data ? z.m.data : "the generated dataset");
    if (st == DP_OK) st = opt_dpzo_init(&s, be, &hp, &m);
    if (st == DP_OK) st = opt_dpzo_set_precision(&s, eo.prec, eo.bug == OPT_BUG_MASTER_HALF);
    if (st == DP_OK) st = dp_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa);
    if (st == DP_OK && t.seen_export) {
        if (rank == 0) st = opt_make_dir(t.export_dir);
        before = opt_f64_arrays_alloc(s.numel, s.nparams);
        if (!before && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "out of memory");
    }
    char nranks[32], nthreads[32];
    snprintf(nranks, sizeof nranks, "%d", be->comm.size);
    snprintf(nthreads, sizeof nthreads, "%d", be->threads);
    const char *extra[] = {"impl", "optimized", "backend", be->name, "dtype", opt_prec_names[eo.prec],
                           "ranks", nranks, "threads", nthreads, NULL};
    if (st == DP_OK && rank == 0)
        printf("dpzo (optimized, %s backend, %d rank%s): model %s, %" PRId64 " parameters, N=%" PRId64 ", q=%g, K=%" PRId64
               ", C=%g, sigma=%g (%s), phi=%g, lr=%g, n-spsa=%d, seed=%" PRIu64 "\n",
               be->name, be->comm.size, be->comm.size > 1 ? "s" : "", cfg.kind == DP_MLP ? "mlp" : "llama", m.total,
               hp.n_data, hp.q, hp.steps, hp.clip, hp.sigma, dp_dpzo_mech_name(hp.mech), hp.phi, hp.lr, hp.n_spsa,
               hp.seed.k);
    for (int64_t step = 1; st == DP_OK && step <= hp.steps; step++) {
        if (before)
            for (int p = 0; p < s.nparams; p++) memcpy(before[p], s.theta[p], sizeof(double) * (size_t)s.numel[p]);
        st = opt_dpzo_step(&out, &s, &d, step, t.seen_export);
        if (st != DP_OK || rank != 0) continue;
        if (before) {
            /* the reference's tensors and hyperparameter keys, then "model" and the engine's keys */
            dp_tensor_set ts;
            st = dp_dpzo_export_set(&ts, &m, &hp, DP_DPZO_KEY_EXPORTED(&z), z.m.seen_data, before, s.theta, &out,
                                   opt_dpzo_direction);
            if (st == DP_OK) st = dp_tset_set_meta(&ts, "model", cfg.kind == DP_MLP ? "mlp" : "llama");
            for (int k = 0; st == DP_OK && extra[k] && extra[k + 1]; k += 2)
                st = dp_tset_set_meta(&ts, extra[k], extra[k + 1]);
            if (st == DP_OK) st = dp_dpzo_export_write(t.export_dir, step, &ts);
            dp_tset_free(&ts);
        }
        dp_dpzo_print_step(&out);
        fflush(stdout);
    }
    if (st == DP_OK && rank == 0) {
        char hex[65];
        st = opt_theta_sha256(hex, s.theta, s.numel, s.nparams);
        if (st == DP_OK) printf("theta_T sha256 %s (after %" PRId64 " steps)\n", hex, hp.steps);
    }
    opt_f64_arrays_free(before, s.nparams);
    dp_dpzo_step_out_free(&out);
    opt_dpzo_free(&s);
    dp_dataset_free(&d);
    dp_model_free(&m);
    opt_backend_destroy(be);
    return st;
}
