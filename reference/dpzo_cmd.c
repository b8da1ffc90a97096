/* reference/dpzo_cmd.c — `dpcert reference dpzo ...`: the exact DP-ZO reference on
 * the reference models, with per-step safetensors exports, the update log, replay
 * from the log, and the in-place (Algorithm 2) drift measurement. docs/dpzo.md. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>

#include "common/fsutil.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/safetensors.h"
#include "common/tensor.h"
#include "reference/dpzo.h"
#include "reference/mem_estimate.h"

#define CMD "reference dpzo"

dp_status ref_dpzo_cli_finish(ref_model_config *mc, ref_dpzo_hparams *hp, const ref_dpzo_cli *c) {
    return dp_dpzo_cli_finish(mc, hp, c, ref_dpzo_check);
}

dp_status ref_dpzo_cli_dataset(ref_dataset *d, ref_dpzo_hparams *hp, const ref_model_config *mc,
                               const ref_dpzo_cli *c) {
    return dp_dpzo_cli_dataset(d, hp, mc, c, ref_dpzo_check);
}

dp_status ref_dpzo_export_set(dp_tensor_set *ts, const ref_model *m, const ref_dpzo_hparams *hp, int key_given,
                              int data_file, double *const *before, double *const *after, const ref_dpzo_step_out *o) {
    return dp_dpzo_export_set(ts, m, hp, key_given, data_file, before, after, o, ref_dpzo_direction);
}

static dp_status make_dir(const char *dir) {
    return dp_mkdir_p("--export", dir);
}

static double max_abs_diff_inplace(const ref_dpzo_inplace *ip, double *const *theta) {
    double m = 0.0;
    for (int p = 0; p < ip->nparams; p++)
        for (int64_t e = 0; e < ip->numel[p]; e++) {
            double d = fabs(ref_dpzo_inplace_get(ip, p, e) - theta[p][e]);
            if (d > m) m = d;
        }
    return m;
}

typedef struct {
    ref_dpzo_cli z;
    const char *export_dir, *log, *replay, *inplace;
} opts_t;

static dp_status run_replay(const opts_t *oo, const ref_model_config *cfg) {
    const ref_dpzo_cli *o = &oo->z;
    static const char *const forbidden[] = {"--data", "--dataset-size", "--q", "--steps", "--clip", "--sigma", "--noise", "--phi",
                                            "--noise-key", "--log", "--inplace"};
    const int seen[] = {o->m.seen_data, o->m.seen_n, o->seen_q, o->seen_steps, o->seen_clip, o->seen_sigma,
                        o->seen_noise, o->seen_phi, o->seen_key, oo->log != NULL, oo->inplace != NULL};
    for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
        if (seen[k]) return dp_error(DP_ERR_USAGE, "%s is not used with --replay (the log holds the released scalars)", forbidden[k]);
    ref_dpzo_log log;
    DP_TRY(ref_dpzo_log_read(&log, oo->replay));
    dp_status st = DP_OK;
    uint64_t seed = 0;
    if (o->seen_seed && dp_parse_u64(&seed, "--seed", o->seed) == DP_OK && seed != log.seed.k)
        st = dp_error(DP_ERR_INVALID, "--seed %" PRIu64 " differs from the log's seed %" PRIu64, seed, log.seed.k);
    else if (o->seen_seed && dp_parse_u64(&seed, "--seed", o->seed) != DP_OK) st = DP_ERR_INVALID;
    if (st == DP_OK && o->seen_lr && o->lr != log.lr) st = dp_error(DP_ERR_INVALID, "--lr %g differs from the log's %g", o->lr, log.lr);
    if (st == DP_OK && o->seen_wd && o->wd != log.weight_decay)
        st = dp_error(DP_ERR_INVALID, "--weight-decay %g differs from the log's %g", o->wd, log.weight_decay);
    if (st == DP_OK && o->seen_n_spsa && o->n_spsa != log.n_spsa)
        st = dp_error(DP_ERR_INVALID, "--n-spsa %" PRId64 " differs from the log's %d", o->n_spsa, log.n_spsa);
    char desc[512];
    if (st == DP_OK) st = ref_dpzo_model_desc(desc, sizeof desc, cfg);
    if (st == DP_OK && strcmp(desc, log.model) != 0)
        st = dp_error(DP_ERR_INVALID, "the model flags give '%s' but the log '%s' was written for '%s'", desc, oo->replay,
                      log.model);
    ref_model m;
    memset(&m, 0, sizeof m);
    if (st == DP_OK) st = ref_model_init(&m, cfg, log.seed);
    if (st == DP_OK && m.total != log.total_params)
        st = dp_error(DP_ERR_INVALID, "the model has %" PRId64 " parameters but the log was written for %" PRId64
                      " (model flags differ)", m.total, log.total_params);
    double **theta = st == DP_OK ? dp_calloc((size_t)m.nparams, sizeof *theta) : NULL;
    int64_t *numel = st == DP_OK ? dp_calloc((size_t)m.nparams, sizeof *numel) : NULL;
    if (st == DP_OK && (!theta || !numel)) st = DP_ERR_NOMEM;
    for (int p = 0; st == DP_OK && p < m.nparams; p++) { theta[p] = m.params[p].data; numel[p] = m.params[p].numel; }
    char hex0[65];
    if (st == DP_OK) st = ref_dpzo_theta_sha256(hex0, theta, numel, m.nparams);
    if (st == DP_OK && strcmp(hex0, log.theta0) != 0)
        st = dp_error(DP_ERR_INVALID, "theta_0 (SHA-256 %s) differs from the log's theta_0 (%s): another model "
                      "initialisation than the log's run", hex0, log.theta0);
    if (st == DP_OK && oo->export_dir) st = make_dir(oo->export_dir);
    for (int64_t k = 0; st == DP_OK && k < log.nsteps; k++) {
        int64_t t = log.step[k];
        const double *s = log.scalar + (size_t)k * (size_t)log.n_spsa;
        dp_tensor_set ts;
        dp_tset_init(&ts);
        if (oo->export_dir) {
            st = dp_dpzo_export_params(&ts, "params", &m, theta);
            if (st == DP_OK) st = dp_dpzo_export_directions(&ts, &m, log.seed, t, log.n_spsa, ref_dpzo_direction);
            if (st == DP_OK) st = dp_dpzo_export_vec(&ts, "step.scalar", s, log.n_spsa);
        }
        if (st == DP_OK) st = ref_dpzo_update(theta, numel, m.nparams, log.seed, t, s, log.n_spsa, log.lr, log.weight_decay);
        if (st == DP_OK && oo->export_dir) {
            char b[32];
            st = dp_dpzo_export_params(&ts, "params_after", &m, theta);
            if (st == DP_OK) st = dp_tset_set_meta(&ts, "algorithm", "dpzo-replay");
            if (st == DP_OK) st = dp_dpzo_meta_int(&ts, "step", t);
            if (st == DP_OK) st = dp_dpzo_meta_model(&ts, cfg);
            snprintf(b, sizeof b, "%" PRIu64, log.seed.k);
            if (st == DP_OK) st = dp_tset_set_meta(&ts, "seed", b);
            if (st == DP_OK) st = dp_dpzo_meta_num(&ts, "lr", log.lr);
            if (st == DP_OK) st = dp_dpzo_meta_num(&ts, "weight_decay", log.weight_decay);
            if (st == DP_OK) st = dp_dpzo_meta_int(&ts, "n_spsa", log.n_spsa);
            if (st == DP_OK) st = ref_dpzo_export_write(oo->export_dir, t, &ts);
        }
        dp_tset_free(&ts);
        if (st == DP_OK) {
            printf("replay step %" PRId64 " scalar ", t);
            dp_dpzo_print_scalars(s, log.n_spsa);
            printf("\n");
        }
    }
    char hex[65];
    if (st == DP_OK) st = ref_dpzo_theta_sha256(hex, theta, numel, m.nparams);
    if (st == DP_OK) printf("theta_T sha256 %s (after %" PRId64 " steps)\n", hex, log.nsteps);
    dp_free(theta);
    dp_free(numel);
    ref_model_free(&m);
    ref_dpzo_log_free(&log);
    return st;
}

static dp_status run_train(const opts_t *o, const ref_model_config *cfg, ref_dpzo_hparams hp) {
    int inplace = -1;
    if (o->inplace) {
        static const char *const dts[] = {"f32", "bf16", NULL};
        DP_TRY(dp_parse_choice(&inplace, "--inplace", o->inplace, dts));
    }

    ref_model m;
    ref_dataset d;
    memset(&d, 0, sizeof d);
    const int exporting = o->export_dir != NULL || inplace >= 0;
    /* memory pre-check (docs/memory.md): before the model; with --data again once N is known */
    DP_TRY(ref_model_cli_mem_check(&o->z.m, ref_mem_dpzo(cfg, &hp, o->z.m.seen_data ? 0 : (double)hp.n_data, exporting),
                                   "the run"));
    DP_TRY(ref_model_init(&m, cfg, hp.seed));
    dp_status st = ref_dpzo_cli_dataset(&d, &hp, cfg, &o->z);
    if (st == DP_OK && o->z.m.seen_data)
        st = ref_model_cli_mem_check(&o->z.m, ref_mem_dpzo(cfg, &hp, (double)d.n, exporting), "the run");
    ref_dpzo_model_ctx ctx;
    ref_dpzo_problem pb;
    memset(&pb, 0, sizeof pb);
    ref_dpzo_step_out out, out2;
    memset(&out, 0, sizeof out);
    memset(&out2, 0, sizeof out2);
    ref_dpzo_inplace ip;
    memset(&ip, 0, sizeof ip);
    FILE *logf = NULL;   /* the update log is built in memory and written at the end (atomically) */
    char *logbuf = NULL;
    size_t loglen = 0;
    double **before = NULL;
    if (st == DP_OK) st = ref_dpzo_problem_model(&pb, &ctx, &m, &d);
    if (st == DP_OK) st = ref_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa);
    if (st == DP_OK && inplace >= 0) st = ref_dpzo_step_out_alloc(&out2, hp.n_data, hp.n_spsa);
    if (st == DP_OK && inplace >= 0) st = ref_dpzo_inplace_init(&ip, (ref_dpzo_store)inplace, &pb);
    if (st == DP_OK && o->export_dir) {
        st = make_dir(o->export_dir);
        if (st == DP_OK && !(before = ref_dpzo_arrays_alloc(pb.numel, pb.nparams))) st = DP_ERR_NOMEM;
    }
    if (st == DP_OK && o->log) {
        if (!(logf = open_memstream(&logbuf, &loglen))) st = dp_error(DP_ERR_NOMEM, "--log: out of memory");
        char hex0[65];
        if (st == DP_OK) st = ref_dpzo_theta_sha256(hex0, pb.theta, pb.numel, pb.nparams);
        if (st == DP_OK) st = ref_dpzo_log_header(logf, &hp, cfg, hex0, m.total);
    }
    if (st == DP_OK)
        printf("dpzo: model %s, %" PRId64 " parameters, N=%" PRId64 ", q=%g (expected batch %g), K=%" PRId64
               ", C=%g, sigma=%g (%s), phi=%g, lr=%g, weight decay=%g, n-spsa=%d, seed=%" PRIu64 "\n",
               cfg->kind == REF_MLP ? "mlp" : "llama", m.total, hp.n_data, hp.q, hp.q * (double)hp.n_data, hp.steps,
               hp.clip, hp.sigma, ref_dpzo_mech_name(hp.mech), hp.phi, hp.lr, hp.weight_decay, hp.n_spsa, hp.seed.k);
    for (int64_t t = 1; st == DP_OK && t <= hp.steps; t++) {
        if (before)
            for (int p = 0; p < m.nparams; p++) memcpy(before[p], pb.theta[p], (size_t)pb.numel[p] * sizeof(double));
        double rdrift = 0.0;
        int64_t viol = 0;
        if (inplace >= 0) st = ref_dpzo_inplace_step(&out2, &rdrift, &viol, &ip, &pb, &hp, t, NULL);
        if (st == DP_OK) st = ref_dpzo_step(&out, &pb, &hp, t);
        if (st == DP_OK && before) {
            dp_tensor_set ts;
            st = ref_dpzo_export_set(&ts, &m, &hp, REF_DPZO_KEY_EXPORTED(&o->z), o->z.m.seen_data, before, pb.theta,
                                     &out);
            if (st == DP_OK) st = dp_dpzo_meta_model(&ts, cfg);
            if (st == DP_OK) st = ref_dpzo_export_write(o->export_dir, t, &ts);
            dp_tset_free(&ts);
        }
        if (st == DP_OK && logf) st = ref_dpzo_log_step(logf, &hp, t, out.scalar);
        if (st != DP_OK) break;
        ref_dpzo_print_step(&out);
        if (inplace >= 0)
            printf("  inplace %s: restore drift %.3e (%" PRId64 " elements beyond the bound), |theta_inplace - theta| max %.3e\n",
                   inplace ? "bf16" : "f32", rdrift, viol, max_abs_diff_inplace(&ip, pb.theta));
    }
    if (st == DP_OK) {
        char hex[65];
        st = ref_dpzo_theta_sha256(hex, pb.theta, pb.numel, pb.nparams);
        if (st == DP_OK) printf("theta_T sha256 %s (after %" PRId64 " steps)\n", hex, hp.steps);
        if (st == DP_OK && hp.mech == REF_DPZO_LAPLACE) {
            double e0 = ref_dpzo_laplace_eps0(hp.q, hp.sigma);
            printf("pure DP (Laplace): epsilon_0 = log(1 + q (e^(1/sigma) - 1)) = %.17g per step; "
                   "T epsilon_0 = %.17g over T = %" PRId64 " steps (basic composition)\n", e0, (double)hp.steps * e0, hp.steps);
            double di = ref_dpzo_laplace_delta_impl(hp.q, hp.sigma, hp.n_spsa);
            printf("implemented sampler (Laplace): the epsilon_0 above holds for the ideal continuous Laplace; dpcert's "
                   "sampler (inversion of a 52-bit uniform, docs/rng.md) outputs |x| <= 52 ln 2 = 36.04365338911715 scale "
                   "units, so each step is (epsilon_0, delta_impl)-DP with delta_impl <= q n 2^-53 e^(1/sigma) = "
                   "q n 0.5 e^-(52 ln 2 - 1/sigma) = %.17g (T delta_impl = %.17g); floating-point porosity (Mironov 2012) "
                   "is not covered\n", di, (double)hp.steps * di);
        }
    }
    if (logf && st == DP_OK && fflush(logf) != 0) st = dp_error(DP_ERR_NOMEM, "--log: out of memory");
    if (logf && st == DP_OK) st = ref_dpzo_log_end(logf, logbuf, loglen, hp.steps);
    if (logf && fclose(logf) != 0 && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "--log: out of memory");
    if (logf && st == DP_OK) st = dp_write_file_atomic("--log", o->log, logbuf, loglen);
    dp_free(logbuf); /* open_memstream's buffer */
    ref_dpzo_arrays_free(before, m.nparams);
    ref_dpzo_inplace_free(&ip);
    ref_dpzo_step_out_free(&out);
    ref_dpzo_step_out_free(&out2);
    ref_dpzo_problem_free(&pb);
    ref_dataset_free(&d);
    ref_model_free(&m);
    return st;
}

static dp_status run(int argc, char **argv) {
    opts_t o;
    memset(&o, 0, sizeof o);
    ref_dpzo_cli_init(&o.z);
    dp_opt opts[REF_DPZO_NOPTS + 4];
    size_t n = 0;
    DP_TRY(ref_dpzo_cli_add_opts(opts, &n, REF_DPZO_NOPTS + 4, &o.z));
    opts[n++] = (dp_opt){"--export", DP_OPT_STRING, &o.export_dir, NULL, "DIR: write DIR/step-NNNNNN.safetensors"};
    opts[n++] = (dp_opt){"--log", DP_OPT_STRING, &o.log, NULL, "FILE: append (step seed, released scalars) per step"};
    opts[n++] = (dp_opt){"--replay", DP_OPT_STRING, &o.replay, NULL, "FILE: rebuild theta_T from an update log, without data"};
    opts[n++] = (dp_opt){"--inplace", DP_OPT_STRING, &o.inplace, NULL,
                         "f32 | bf16: also run Algorithm 2 in place and report its drift"};
    int help = 0;
    DP_TRY(dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, &help));
    if (help) {
        printf("usage: dpcert reference dpzo --model mlp|llama [model flags] (--dataset-size N | --data FILE) --q Q\n"
               "       --steps K --clip C --sigma S [--noise gaussian|laplace] --phi PHI --lr LR [--n-spsa n] --seed SEED\n"
               "       [--noise-key KEY] [--weight-decay WD] [--export DIR] [--log FILE] [--inplace f32|bf16]\n"
               "   or: dpcert reference dpzo --model ... [model flags] --replay LOG [--export DIR]\n"
               "DP-ZO (docs/dpzo.md): one line per step (step, batch size, released scalar(s), loss).\n");
        dp_opts_print_help(opts, n);
        return DP_OK;
    }
    ref_model_config cfg;
    if (o.replay) {
        DP_TRY(ref_model_cli_finish(&cfg, &o.z.m));
        ref_dpzo_hparams none;
        memset(&none, 0, sizeof none);
        none.n_spsa = 1;
        DP_TRY(ref_model_cli_mem_check(&o.z.m, ref_mem_dpzo(&cfg, &none, 0, o.export_dir != NULL), "the replay"));
        return run_replay(&o, &cfg);
    }
    ref_dpzo_hparams hp;
    DP_TRY(ref_dpzo_cli_finish(&cfg, &hp, &o.z));
    if (o.z.reveal_key && !o.z.seen_key) dp_cli_reveal_noise_key("reference dpzo", hp.key.k);
    return run_train(&o, &cfg, hp);
}

int dp_cmd_reference_dpzo(int argc, char **argv) {
    dp_status st = run(argc, argv);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    return 0;
}
