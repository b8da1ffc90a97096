/* reference/dpzo.c — the exact CPU reference of DP-ZO (docs/dpzo.md).
 * Naive textbook loops in double; every convention is pinned in docs/dpzo.md. */
#include "reference/dpzo.h"
#include "common/alloc.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/fsutil.h"
#include "common/hash.h"
#include "common/tensor.h"

/* [nparams][numel] zeroed host arrays (the directions and perturbed parameters of a
 * release, the exports' copies); NULL when out of memory. */
double **ref_dpzo_arrays_alloc(const int64_t *numel, int nparams) {
    double **a = dp_calloc((size_t)(nparams > 0 ? nparams : 1), sizeof *a);
    if (!a) return NULL;
    for (int p = 0; p < nparams; p++)
        if (!(a[p] = dp_calloc((size_t)(numel[p] > 0 ? numel[p] : 1), sizeof(double)))) {
            ref_dpzo_arrays_free(a, p);
            return NULL;
        }
    return a;
}

void ref_dpzo_arrays_free(double **a, int nparams) {
    if (!a) return;
    for (int p = 0; p < nparams; p++) dp_free(a[p]);
    dp_free(a);
}

dp_status ref_dpzo_check(const ref_dpzo_hparams *hp) {
    if (hp->n_data < 1) return dp_error(DP_ERR_INVALID, "--dataset-size must be >= 1 (got %" PRId64 ")", hp->n_data);
    DP_TRY(dp_check_range("--q", hp->q, 0.0, 0, 1.0, 1));
    if (hp->steps < 1) return dp_error(DP_ERR_INVALID, "--steps must be >= 1 (got %" PRId64 ")", hp->steps);
    if (hp->steps > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "--steps must be < 2^32 (the step is the 32-bit RNG stream id)");
    DP_TRY(dp_check_min("--clip", hp->clip, 0.0, 0));
    DP_TRY(dp_check_min("--sigma", hp->sigma, 0.0, 1));
    DP_TRY(dp_check_min("--phi", hp->phi, 0.0, 0));
    DP_TRY(dp_check_min("--lr", hp->lr, 0.0, 1));
    DP_TRY(dp_check_min("--weight-decay", hp->weight_decay, 0.0, 1));
    if (hp->n_spsa < 1 || hp->n_spsa > REF_DPZO_MAX_N)
        return dp_error(DP_ERR_INVALID, "--n-spsa must be in [1, %d] (got %d)", REF_DPZO_MAX_N, hp->n_spsa);
    if (hp->mech != REF_DPZO_GAUSSIAN && hp->mech != REF_DPZO_LAPLACE)
        return dp_error(DP_ERR_INVALID, "--noise must be gaussian or laplace");
    double den = ref_dpzo_denominator(hp);
    if (!(den >= DBL_MIN) || !isfinite(den))
        return dp_error(DP_ERR_INVALID, "--q, --dataset-size and --phi give (q N) 2 phi = %g: it must be a normal finite "
                        "number (>= %g) so that the released scalar is finite", den, DBL_MIN);
    if (!isfinite(hp->phi * REF_DPZO_GAUSS_MAX))
        return dp_error(DP_ERR_INVALID, "--phi %g: phi z overflows for the largest direction element %g", hp->phi,
                        REF_DPZO_GAUSS_MAX);
    double sb = ref_dpzo_scalar_bound(hp);
    if (!isfinite(sb))
        return dp_error(DP_ERR_INVALID, "--clip %g, --sigma %g, --phi %g, --q %g and N = %" PRId64 " allow a released scalar "
                        "(N C + max|Z|) / ((q N) 2 phi) that is not finite", hp->clip, hp->sigma, hp->phi, hp->q, hp->n_data);
    return DP_OK;
}

double ref_dpzo_scalar_bound(const ref_dpzo_hparams *hp) {
    double zmax = hp->mech == REF_DPZO_GAUSSIAN
                      ? ((hp->sigma * hp->clip) * sqrt((double)hp->n_spsa)) * REF_DPZO_GAUSS_MAX
                      : ((hp->sigma * hp->clip) * (double)hp->n_spsa) * REF_DPZO_LAPLACE_MAX;
    return ((double)hp->n_data * hp->clip + zmax) / ref_dpzo_denominator(hp);
}

/* ---- the model as a DP-ZO problem ---- */
static dp_status model_loss(double *loss, void *ctx, double *const *params, int64_t i) {
    ref_dpzo_model_ctx *c = ctx;
    return ref_example_loss(loss, c->m, params, c->d, i);
}

dp_status ref_dpzo_problem_model(ref_dpzo_problem *pb, ref_dpzo_model_ctx *ctx, ref_model *m,
                                 const ref_dataset *d) {
    memset(pb, 0, sizeof *pb);
    if (m->nparams < 1 || m->nparams > REF_DPZO_MAX_PARAMS)
        return dp_error(DP_ERR_INVALID, "DP-ZO needs 1..%d parameter tensors (got %d)", REF_DPZO_MAX_PARAMS,
                        m->nparams);
    pb->numel = dp_calloc((size_t)m->nparams, sizeof *pb->numel);
    pb->theta = dp_calloc((size_t)m->nparams, sizeof *pb->theta);
    if (!pb->numel || !pb->theta) { ref_dpzo_problem_free(pb); return DP_ERR_NOMEM; }
    for (int p = 0; p < m->nparams; p++) {
        pb->numel[p] = m->params[p].numel;
        pb->theta[p] = m->params[p].data;
    }
    pb->nparams = m->nparams;
    ctx->m = m;
    ctx->d = d;
    pb->loss = model_loss;
    pb->ctx = ctx;
    return DP_OK;
}

void ref_dpzo_problem_free(ref_dpzo_problem *pb) {
    dp_free(pb->numel);
    dp_free(pb->theta);
    pb->numel = NULL;
    pb->theta = NULL;
}

/* ---- RNG conventions ---- */
dp_status ref_dpzo_direction(double *z, dp_seed seed, int64_t step, int p, int j, int64_t numel) {
    if (p < 0 || p >= REF_DPZO_MAX_PARAMS || j < 0 || j >= REF_DPZO_MAX_N)
        return dp_error(DP_ERR_INVALID, "DP-ZO direction lane out of range (param %d, direction %d)", p, j);
    if (step < 0 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " out of range", step);
    dp_stream s;
    DP_TRY(dp_stream_public(&s, seed, DP_PURPOSE_DPZO_DIR, (uint32_t)step, (uint32_t)p | ((uint32_t)j << 16)));
    dp_rng_fill_gaussian(z, &s, 0, (size_t)numel); /* z: [numel] */
    return DP_OK;
}

dp_status ref_dpzo_poisson(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n) {
    if (step < 0 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " out of range", step);
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, key, DP_PURPOSE_SAMPLING, (uint32_t)step, 0));
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (dp_rng_uniform(&s, (uint64_t)i) < q) idx[k++] = i; /* included iff u_i < q */
    *b = k;
    return DP_OK;
}

double ref_dpzo_denominator(const ref_dpzo_hparams *hp) {
    return ((hp->q * (double)hp->n_data) * 2.0) * hp->phi;
}

dp_status ref_dpzo_noise(double *noise, const ref_dpzo_hparams *hp, int64_t step, int j) {
    if (step < 0 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " out of range", step);
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, hp->key, DP_PURPOSE_DPZO_NOISE, (uint32_t)step, 0));
    if (hp->mech == REF_DPZO_GAUSSIAN) /* N(0, n sigma^2 C^2): l2 sensitivity of the n sums is sqrt(n) C */
        *noise = ((hp->sigma * hp->clip) * sqrt((double)hp->n_spsa)) * dp_rng_gaussian(&s, (uint64_t)j);
    else /* Laplace(scale n sigma C): l1 sensitivity of the n sums is n C */
        *noise = ((hp->sigma * hp->clip) * (double)hp->n_spsa) * dp_rng_laplace(&s, (uint64_t)j);
    return DP_OK;
}

double ref_dpzo_clip(double d, double c) {
    return d > c ? c : d < -c ? -c : d;
}

double ref_dpzo_laplace_eps0(double q, double sigma) {
    if (sigma == 0) return INFINITY;
    return log1p(q * expm1(1.0 / sigma));
}

/* The sampler returns |x| <= B = 52 ln 2 (docs/rng.md), so e^-B = 2^-52 and
 * q n (1/2) e^-(B - 1/sigma) = q n 2^-53 e^(1/sigma) (docs/dpzo.md "Privacy conventions"). */
double ref_dpzo_laplace_delta_impl(double q, double sigma, int n) {
    if (sigma == 0) return INFINITY;
    return ((q * (double)n) * 0x1p-53) * exp(1.0 / sigma);
}

/* Losses of the batch at `params`: out[k] = L_{idx[k]}(params), k < b. */
dp_status ref_dpzo_release_losses_(double *out, const ref_dpzo_problem *pb, double *const *params, const int64_t *idx,
                              int64_t b) {
    for (int64_t k = 0; k < b; k++) DP_TRY(pb->loss(&out[k], pb->ctx, params, idx[k]));
    return DP_OK;
}

/* Given l+ and l- for direction j ([b] each), fill diff_clipped, sum, noise, scalar. */
dp_status ref_dpzo_finish_direction_(ref_dpzo_step_out *out, const ref_dpzo_hparams *hp, int64_t step, int j) {
    int64_t b = out->b;
    double *lp = out->loss_plus + (size_t)j * (size_t)b, *lm = out->loss_minus + (size_t)j * (size_t)b;
    double *dc = out->diff_clipped + (size_t)j * (size_t)b;
    double sum = 0.0;
    if (j == 0) out->ndropped = 0;
    for (int64_t k = 0; k < b; k++) {
        double d = lp[k] - lm[k];
        if (!isfinite(d)) { /* dropped: contributes 0 (sensitivity stays C), counted and reported */
            dc[k] = 0.0;
            out->ndropped++;
        } else {
            dc[k] = ref_dpzo_clip(d, hp->clip);
        }
        sum += dc[k]; /* in increasing example order */
    }
    out->sum[j] = sum;
    DP_TRY(ref_dpzo_noise(&out->noise[j], hp, step, j));
    return ref_dpzo_scalar_(&out->scalar[j], hp, sum, out->noise[j], step, j);
}

dp_status ref_dpzo_scalar_(double *s, const ref_dpzo_hparams *hp, double sum, double noise, int64_t step, int j) {
    *s = (sum + noise) / ref_dpzo_denominator(hp);
    if (!isfinite(*s))
        return dp_error(DP_ERR_INVALID, "step %" PRId64 ", direction %d: the released scalar is not finite "
                        "(sum %g, noise %g, (q N) 2 phi %g): --clip, --sigma, --phi or --q too extreme", step, j, sum, noise,
                        ref_dpzo_denominator(hp));
    return DP_OK;
}

void ref_dpzo_finish_loss_(ref_dpzo_step_out *out) {
    int64_t b = out->b;
    double acc = 0.0;
    int64_t kept = 0;
    for (int j = 0; j < out->n; j++)
        for (int64_t k = 0; k < b; k++) {
            double lp = out->loss_plus[(size_t)j * (size_t)b + (size_t)k];
            double lm = out->loss_minus[(size_t)j * (size_t)b + (size_t)k];
            if (!isfinite(lp - lm)) continue; /* dropped pair */
            acc += 0.5 * (lp + lm);
            kept++;
        }
    out->loss = kept ? acc / (double)kept : NAN;
}

static dp_status check_out(ref_dpzo_step_out *out, const ref_dpzo_hparams *hp, int64_t step) {
    if (out->cap_n_data < hp->n_data || out->n != hp->n_spsa)
        return dp_error(DP_ERR_INTERNAL, "DP-ZO step output allocated for N=%" PRId64 ", n=%d; need N=%" PRId64 ", n=%d",
                        out->cap_n_data, out->n, hp->n_data, hp->n_spsa);
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " outside 1..2^32-1", step);
    out->step = step;
    return DP_OK;
}

dp_status ref_dpzo_release(ref_dpzo_step_out *out, const ref_dpzo_problem *pb, const ref_dpzo_hparams *hp,
                           int64_t step) {
    DP_TRY(ref_dpzo_check(hp));
    DP_TRY(check_out(out, hp, step));
    DP_TRY(ref_dpzo_poisson(out->idx, &out->b, hp->key, step, hp->q, hp->n_data));
    int P = pb->nparams;
    double **z = ref_dpzo_arrays_alloc(pb->numel, P);  /* [P][numel] */
    double **tp = ref_dpzo_arrays_alloc(pb->numel, P); /* theta + phi z */
    double **tm = ref_dpzo_arrays_alloc(pb->numel, P); /* theta - phi z */
    dp_status st = (z && tp && tm) ? DP_OK : DP_ERR_NOMEM;
    for (int j = 0; st == DP_OK && j < hp->n_spsa; j++) {
        for (int p = 0; st == DP_OK && p < P; p++) {
            st = ref_dpzo_direction(z[p], hp->seed, step, p, j, pb->numel[p]);
            for (int64_t e = 0; st == DP_OK && e < pb->numel[p]; e++) {
                tp[p][e] = pb->theta[p][e] + hp->phi * z[p][e]; /* theta + phi z (a copy) */
                tm[p][e] = pb->theta[p][e] - hp->phi * z[p][e]; /* theta - phi z (a copy) */
            }
        }
        size_t off = (size_t)j * (size_t)out->b;
        if (st == DP_OK) st = ref_dpzo_release_losses_(out->loss_plus + off, pb, tp, out->idx, out->b);
        if (st == DP_OK) st = ref_dpzo_release_losses_(out->loss_minus + off, pb, tm, out->idx, out->b);
        if (st == DP_OK) st = ref_dpzo_finish_direction_(out, hp, step, j);
    }
    if (st == DP_OK) ref_dpzo_finish_loss_(out);
    ref_dpzo_arrays_free(z, P); ref_dpzo_arrays_free(tp, P); ref_dpzo_arrays_free(tm, P);
    return st;
}

dp_status ref_dpzo_update(double *const *theta, const int64_t *numel, int nparams, dp_seed seed, int64_t step,
                          const double *scalar, int n, double lr, double weight_decay) {
    if (n < 1 || n > REF_DPZO_MAX_N) return dp_error(DP_ERR_INVALID, "n-spsa %d out of range", n);
    for (int p = 0; p < nparams; p++) {
        double *u = dp_calloc((size_t)numel[p], sizeof(double));   /* [numel] sum_j s_j z_j */
        double *z = dp_calloc((size_t)numel[p], sizeof(double));   /* [numel] */
        if (!u || !z) { dp_free(u); dp_free(z); return DP_ERR_NOMEM; }
        dp_status st = DP_OK;
        for (int j = 0; st == DP_OK && j < n; j++) {
            st = ref_dpzo_direction(z, seed, step, p, j, numel[p]);
            for (int64_t e = 0; st == DP_OK && e < numel[p]; e++) u[e] += scalar[j] * z[e];
        }
        for (int64_t e = 0; st == DP_OK && e < numel[p]; e++) {
            theta[p][e] = theta[p][e] - lr * (u[e] / (double)n + weight_decay * theta[p][e]);
            if (!isfinite(theta[p][e]))
                st = dp_error(DP_ERR_INVALID, "step %" PRId64 ": parameter %d element %" PRId64 " became non-finite in the "
                              "update theta - lr (sum_j s_j z_j / n + wd theta) (lr %g, weight decay %g, s_0 %g): the "
                              "hyperparameters (--lr, --phi, --clip, --sigma, --weight-decay) or the log's lr and scalars "
                              "overflow", step, p, e, lr, weight_decay, scalar[0]);
        }
        dp_free(u); dp_free(z);
        DP_TRY(st);
    }
    return DP_OK;
}

dp_status ref_dpzo_step(ref_dpzo_step_out *out, ref_dpzo_problem *pb, const ref_dpzo_hparams *hp, int64_t step) {
    DP_TRY(ref_dpzo_release(out, pb, hp, step));
    return ref_dpzo_update(pb->theta, pb->numel, pb->nparams, hp->seed, step, out->scalar, hp->n_spsa, hp->lr,
                           hp->weight_decay);
}

/* ---- update log ---- */
#define LOG_MAGIC "# dpcert dpzo update log v3"
#define LOG_MAX_BYTES ((size_t)1 << 30) /* an update log longer than 1 GiB is refused before reading on */

dp_status ref_dpzo_model_desc(char *buf, size_t cap, const ref_model_config *c) {
    int r;
    if (c->kind == REF_MLP) {
        char h[256] = "";
        for (int k = 0; k < c->nhidden; k++) {
            size_t l = strlen(h);
            snprintf(h + l, sizeof h - l, "%s%d", k ? "," : "", c->hidden[k]);
        }
        r = snprintf(buf, cap, "mlp in %d hidden %s classes %d", c->in, c->nhidden ? h : "none", c->classes);
    } else {
        r = snprintf(buf, cap, "llama vocab %d dim %d layers %d heads %d ffn %d seq %d tied %d rope_theta %a norm_eps %a",
                     c->vocab, c->dim, c->layers, c->heads, c->ffn, c->seq, c->tied, c->rope_theta, c->norm_eps);
    }
    if (r < 0 || (size_t)r >= cap) return dp_error(DP_ERR_INTERNAL, "model description too long");
    return DP_OK;
}

/* A failed write of the update log (to memory: out of memory; to a stream: a lost result). */
static dp_status log_write_error(void) {
    int e = errno ? errno : EIO;
    return dp_error(e == ENOMEM ? DP_ERR_NOMEM : DP_ERR_SYSIO, "writing the update log failed: %s", strerror(e));
}

dp_status ref_dpzo_log_header(FILE *f, const ref_dpzo_hparams *hp, const ref_model_config *mc, const char *theta0_hex,
                              int64_t total_params) {
    char desc[512];
    DP_TRY(ref_dpzo_model_desc(desc, sizeof desc, mc));
    if (fprintf(f,
                "%s\nseed %" PRIu64 " n_spsa %d lr %a weight_decay %a params %" PRId64 "\ntheta0_sha256 %s\nmodel %s\n"
                "record q %a clip %a sigma %a noise %s phi %a dataset_size %" PRId64 "\n",
                LOG_MAGIC, hp->seed.k, hp->n_spsa, hp->lr, hp->weight_decay, total_params, theta0_hex, desc, hp->q,
                hp->clip, hp->sigma, ref_dpzo_mech_name(hp->mech), hp->phi, hp->n_data) < 0)
        return log_write_error();
    return DP_OK;
}

dp_status ref_dpzo_log_step(FILE *f, const ref_dpzo_hparams *hp, int64_t step, const double *scalar) {
    int r = fprintf(f, "step %" PRId64 " seed %" PRIu64 " s", step, hp->seed.k);
    for (int j = 0; r >= 0 && j < hp->n_spsa; j++) r = fprintf(f, " %a", scalar[j]);
    if (r >= 0) r = fputc('\n', f);
    if (r < 0 || fflush(f) != 0) return log_write_error();
    return DP_OK;
}

/* The end record: "end steps T sha256 H\n", H = SHA-256 of every byte before this line
 * (body[0..body_len), what f has written). */
dp_status ref_dpzo_log_end(FILE *f, const void *body, size_t body_len, int64_t nsteps) {
    char hex[DP_SHA256_HEX_LEN];
    if (fflush(f) != 0 || ferror(f)) return log_write_error();
    DP_TRY(dp_sha256_buf_hex(hex, body, body_len));
    if (fprintf(f, "end steps %" PRId64 " sha256 %s\n", nsteps, hex) < 0 || fflush(f) != 0)
        return log_write_error();
    return DP_OK;
}

/* Read the whole log (at most LOG_MAX_BYTES, also from a pipe or device) and check its frame:
 * no NUL byte, the last line is the end record and its digest matches the bytes before it.
 * *body_len receives the length of the part before the end record; *end_steps its T. */
static dp_status log_frame(size_t *body_len, int64_t *end_steps, const uint8_t *p, size_t n, const char *path) {
    dp_status st = DP_OK;
    const uint8_t *nul = st == DP_OK ? memchr(p, 0, n) : NULL;
    if (st == DP_OK && nul) st = dp_error(DP_ERR_FORMAT, "%s: a NUL byte at offset %zu (an update log is text)", path, (size_t)(nul - p));
    if (st == DP_OK && (n == 0 || p[n - 1] != '\n'))
        st = dp_error(DP_ERR_FORMAT, "%s: does not end with a complete line (cut short?)", path);
    size_t ls = 0;
    if (st == DP_OK) {
        ls = n - 1;
        while (ls > 0 && p[ls - 1] != '\n') ls--;
        char line[160], hex[DP_SHA256_HEX_LEN], want[DP_SHA256_HEX_LEN];
        size_t ll = n - 1 - ls;
        long long T = -1;
        int used = 0;
        if (ll < sizeof line) { memcpy(line, p + ls, ll); line[ll] = 0; }
        if (ll >= sizeof line || sscanf(line, "end steps %lld sha256 %64[0-9a-f]%n", &T, want, &used) != 2 ||
            (size_t)used != ll || strlen(want) != 64 || T < 0)
            st = dp_error(DP_ERR_FORMAT, "%s: the last line is not the end record 'end steps T sha256 <64 hex digits>' "
                          "(cut short, or bytes appended?)", path);
        else if ((st = dp_sha256_buf_hex(hex, p, ls)) == DP_OK && strcmp(hex, want) != 0)
            st = dp_error(DP_ERR_FORMAT, "%s: content digest %s differs from the end record's %s (the log was "
                          "changed after it was written)", path, hex, want);
        *end_steps = T;
    }
    if (st != DP_OK) return st;
    *body_len = ls;
    return DP_OK;
}

/* Parse a finite double written by %a (or decimal); the whole token must parse. */
static int parse_num(double *v, const char *tok) {
    if (!tok) return 0;
    if (dp_parse_double(v, "log value", tok) != DP_OK) { dp_clear_error(); return 0; } /* finite, no ERANGE */
    return 1;
}

void ref_dpzo_log_free(ref_dpzo_log *log) {
    dp_free(log->step);
    dp_free(log->scalar);
    memset(log, 0, sizeof *log);
}

dp_status ref_dpzo_log_read(ref_dpzo_log *log, const char *path) {
    memset(log, 0, sizeof *log);
    char *img = NULL;
    size_t n = 0;
    DP_TRY(dp_read_file_max(&img, &n, "update log", path, LOG_MAX_BYTES));
    dp_status st = ref_dpzo_log_parse(log, (const uint8_t *)img, n, path);
    dp_free(img);
    return st;
}

dp_status ref_dpzo_log_parse(ref_dpzo_log *log, const uint8_t *img, size_t n, const char *path) {
    memset(log, 0, sizeof *log);
    size_t body = 0;
    int64_t end_steps = 0;
    DP_TRY(log_frame(&body, &end_steps, img, n, path));
    FILE *f = body ? fmemopen((void *)img, body, "r") : NULL;
    if (!f) return dp_error(DP_ERR_FORMAT, "%s: missing header (5 lines)", path);
    char line[65536];
    dp_status st = DP_OK;
    int64_t lineno = 0, cap = 0;
    while (st == DP_OK && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            st = dp_error(DP_ERR_FORMAT, "%s:%" PRId64 ": line too long", path, lineno);
            break;
        }
        if (len && line[len - 1] == '\n') line[--len] = '\0';
        if (lineno == 4) { /* "model <desc>": kept verbatim, compared by --replay */
            if (strncmp(line, "model ", 6) != 0 || len - 6 >= sizeof log->model || len == 6) {
                st = dp_error(DP_ERR_FORMAT, "%s:4: malformed model line (expected 'model <configuration>')", path);
                break;
            }
            memcpy(log->model, line + 6, len - 6 + 1);
            continue;
        }
        if (lineno == 1) {
            if (strcmp(line, LOG_MAGIC) != 0)
                st = dp_error(DP_ERR_FORMAT, "%s:1: not a dpcert DP-ZO update log (expected '%s')", path, LOG_MAGIC);
            continue;
        }
        char *save = NULL, *tok[4 + REF_DPZO_MAX_N + 2];
        int nt = 0;
        for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            if (nt >= (int)(sizeof tok / sizeof tok[0])) { nt = -1; break; }
            tok[nt++] = t;
        }
        if (lineno == 2) {
            double lr, wd;
            int64_t n = 0, total = 0;
            if (nt != 10 || strcmp(tok[0], "seed") || strcmp(tok[2], "n_spsa") || strcmp(tok[4], "lr") ||
                strcmp(tok[6], "weight_decay") || strcmp(tok[8], "params") ||
                dp_parse_u64(&log->seed.k, "seed", tok[1]) != DP_OK || dp_parse_i64(&n, "n_spsa", tok[3]) != DP_OK ||
                !parse_num(&lr, tok[5]) || !parse_num(&wd, tok[7]) || dp_parse_i64(&total, "params", tok[9]) != DP_OK ||
                n < 1 || n > REF_DPZO_MAX_N || lr < 0 || wd < 0 || total < 1) {
                st = dp_error(DP_ERR_FORMAT, "%s:2: malformed header (expected 'seed S n_spsa N lr X weight_decay X params P')", path);
                continue;
            }
            log->n_spsa = (int)n;
            log->lr = lr;
            log->weight_decay = wd;
            log->total_params = total;
            continue;
        }
        if (lineno == 3) {
            int okh = nt == 2 && strcmp(tok[0], "theta0_sha256") == 0 && strlen(tok[1]) == 64;
            for (int k = 0; okh && k < 64; k++) okh = strchr("0123456789abcdef", tok[1][k]) != NULL;
            if (!okh) { st = dp_error(DP_ERR_FORMAT, "%s:3: malformed line (expected 'theta0_sha256 <64 hex digits>')", path); break; }
            memcpy(log->theta0, tok[1], 65);
            continue;
        }
        if (lineno == 5) {
            int64_t nd = 0;
            if (nt != 13 || strcmp(tok[0], "record") || strcmp(tok[1], "q") || strcmp(tok[3], "clip") ||
                strcmp(tok[5], "sigma") || strcmp(tok[7], "noise") || strcmp(tok[9], "phi") ||
                strcmp(tok[11], "dataset_size") || !parse_num(&log->q, tok[2]) || !parse_num(&log->clip, tok[4]) ||
                !parse_num(&log->sigma, tok[6]) || (strcmp(tok[8], "gaussian") && strcmp(tok[8], "laplace")) ||
                !parse_num(&log->phi, tok[10]) || dp_parse_i64(&nd, "dataset_size", tok[12]) != DP_OK) {
                st = dp_error(DP_ERR_FORMAT, "%s:5: malformed record line (expected 'record q X clip X sigma X noise "
                              "gaussian|laplace phi X dataset_size N')", path);
                break;
            }
            log->mech = strcmp(tok[8], "laplace") == 0 ? REF_DPZO_LAPLACE : REF_DPZO_GAUSSIAN;
            log->n_data = nd;
            continue;
        }
        int64_t step = 0;
        uint64_t seed = 0;
        if (nt != 5 + log->n_spsa || strcmp(tok[0], "step") || strcmp(tok[2], "seed") || strcmp(tok[4], "s") ||
            dp_parse_i64(&step, "step", tok[1]) != DP_OK || dp_parse_u64(&seed, "seed", tok[3]) != DP_OK) {
            st = dp_error(DP_ERR_FORMAT, "%s:%" PRId64 ": malformed step line (expected 'step T seed S s X1 .. Xn' with n = %d)",
                          path, lineno, log->n_spsa);
            break;
        }
        if (seed != log->seed.k) {
            st = dp_error(DP_ERR_FORMAT, "%s:%" PRId64 ": seed %" PRIu64 " differs from the header's %" PRIu64, path, lineno,
                          seed, log->seed.k);
            break;
        }
        if (step != log->nsteps + 1) {
            st = dp_error(DP_ERR_FORMAT, "%s:%" PRId64 ": step %" PRId64 " out of sequence (expected %" PRId64 ")", path,
                          lineno, step, log->nsteps + 1);
            break;
        }
        if (log->nsteps == cap) {
            cap = cap ? 2 * cap : 64;
            int64_t *ns = dp_realloc(log->step, (size_t)cap * sizeof *ns);
            if (ns) log->step = ns;
            double *nsc = dp_realloc(log->scalar, (size_t)cap * (size_t)log->n_spsa * sizeof *nsc);
            if (nsc) log->scalar = nsc;
            if (!ns || !nsc) { st = dp_error(DP_ERR_NOMEM, "out of memory reading '%s'", path); break; }
        }
        double abs_sum = 0.0; /* sum_j |s_j| */
        for (int j = 0; j < log->n_spsa; j++) {
            double *sj = &log->scalar[(size_t)log->nsteps * (size_t)log->n_spsa + (size_t)j];
            if (!parse_num(sj, tok[5 + j])) {
                st = dp_error(DP_ERR_FORMAT, "%s:%" PRId64 ": scalar '%s' is not a finite number", path, lineno, tok[5 + j]);
                break;
            }
            abs_sum += fabs(*sj);
        }
        /* the update forms u = sum_j s_j z_j with |z| <= REF_DPZO_GAUSS_MAX, then lr u / n:
         * neither may overflow */
        if (st == DP_OK && (!isfinite(abs_sum * REF_DPZO_GAUSS_MAX) || !isfinite(log->lr * (abs_sum * REF_DPZO_GAUSS_MAX))))
            st = dp_error(DP_ERR_FORMAT, "%s:%" PRId64 ": lr %g and the scalars (sum of |s_j| %g) overflow the update "
                          "lr sum_j s_j z_j (|z| <= %g)", path, lineno, log->lr, abs_sum, REF_DPZO_GAUSS_MAX);
        if (st != DP_OK) break;
        log->step[log->nsteps++] = step;
    }
    if (st == DP_OK && ferror(f)) st = dp_error(DP_ERR_IO, "reading '%s' failed", path);
    if (st == DP_OK && lineno < 5) st = dp_error(DP_ERR_FORMAT, "%s: missing header (5 lines)", path);
    if (st == DP_OK && log->nsteps != end_steps)
        st = dp_error(DP_ERR_FORMAT, "%s: %" PRId64 " step lines but the end record says %" PRId64, path, log->nsteps,
                      end_steps);
    fclose(f);
    if (st != DP_OK) ref_dpzo_log_free(log);
    return st;
}

/* ---- SHA-256 of theta ---- */
dp_status ref_dpzo_theta_sha256(char hex[65], double *const *theta, const int64_t *numel, int nparams) {
    int64_t total = 0;
    for (int p = 0; p < nparams; p++) total += numel[p];
    uint8_t *buf = dp_malloc((size_t)total * 8); /* little-endian f64 bytes, parameters in order */
    if (!buf) return DP_ERR_NOMEM;
    size_t k = 0;
    for (int p = 0; p < nparams; p++)
        for (int64_t e = 0; e < numel[p]; e++) {
            uint64_t bits;
            memcpy(&bits, &theta[p][e], 8);
            for (int b = 0; b < 8; b++) buf[k++] = (uint8_t)(bits >> (8 * b));
        }
    dp_status st = dp_sha256_buf_hex(hex, buf, k);
    dp_free(buf);
    return st;
}
