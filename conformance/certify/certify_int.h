/* conformance/certify/certify_int.h — internals of certification shared by its files: the
 * bottom (result.c), the evaluators and the driver (certify.c). */
#ifndef CONF_CERTIFY_INT_H
#define CONF_CERTIFY_INT_H
#include <stdlib.h>

#include "common/candidate.h"
#include "common/alloc.h"
#include "conformance/certify/certify.h"

/* Pooled standardized residuals z and pairs (a, b) for the independence tests. */
typedef struct {
    double *z; int64_t n, cap;
    double *pa, *pb; int64_t np, pcap;
} cert_pool;

static inline dp_status cert_pool_push(cert_pool *p, double x) {
    if (p->n == p->cap) {
        int64_t nc = p->cap ? 2 * p->cap : 4096;
        double *q = dp_realloc(p->z, (size_t)nc * sizeof *q);
        if (!q) return dp_error(DP_ERR_NOMEM, "out of memory (residuals)");
        p->z = q;
        p->cap = nc;
    }
    p->z[p->n++] = x;
    return DP_OK;
}
static inline dp_status cert_pair_push(cert_pool *p, double a, double b) {
    if (p->np == p->pcap) {
        int64_t nc = p->pcap ? 2 * p->pcap : 4096;
        double *x = dp_realloc(p->pa, (size_t)nc * sizeof *x);
        if (!x) return dp_error(DP_ERR_NOMEM, "out of memory (pairs)");
        p->pa = x;
        double *y = dp_realloc(p->pb, (size_t)nc * sizeof *y);
        if (!y) return dp_error(DP_ERR_NOMEM, "out of memory (pairs)");
        p->pb = y;
        p->pcap = nc;
    }
    p->pa[p->np] = a;
    p->pb[p->np++] = b;
    return DP_OK;
}
static inline void cert_pool_free(cert_pool *p) { dp_free(p->z); dp_free(p->pa); dp_free(p->pb); }

/* The noise variance families of certify_noise.c: sums of squares by tensor, clipping group
 * and parameter class; each family's tests share one alpha. */
typedef struct { char scope[200]; double ss; int64_t n; } cert_fam_item;
typedef struct { cert_fam_item *items; size_t n, cap; } cert_fam;
typedef struct { cert_fam tensor, group, pclass; } cert_noise_fams;
dp_status cert_fam_add(cert_fam *f, const char *scope, double ss, int64_t n);
/* Adds one step's standardized residuals z (all parameters in canonical order) of vector vec. */
dp_status cert_fams_add_step(cert_noise_fams *f, const char *vec, const ref_model *m, const dp_clip_groups *g,
                             const double *z);
dp_status cert_fams_finish(cert_result *r, const cert_noise_fams *f, double alpha);
void cert_fams_free(cert_noise_fams *f);

/* One step vector: deterministic checks per output, residuals pooled into `all`, coordinate
 * pairs into `coord`, repeat pairs into `rep`; *zs[k] = the standardized residuals of
 * repeat k (NULL when unreadable), *zn their count (for the across-steps pairs). */
dp_status cert_eval_step(cert_result *r, cert_pool *all, cert_pool *coord, cert_pool *rep, cert_noise_fams *fams,
                         double ***zs, int64_t *zn, const char *bundle, const char *name, const dp_tensor_set *v,
                         const cert_opts *o);
/* The step count of a trajectory vector (metadata "steps", an integer in [2, 256]; vecref.c). */
dp_status cert_traj_steps(int *K, const dp_tensor_set *v);
/* Trajectory vectors (certify_traj.c). */
/* The name in a trajectory's output of step k's output nm (a step or DP-ZO vector's output
 * name): "step.X" becomes "step.<k>.X", any other name N "step.<k>.N". */
void cert_traj_out_name(char *buf, size_t len, int k, const char *nm);
dp_status cert_eval_traj(cert_result *r, cert_pool *all, cert_pool *rep, cert_noise_fams *fams, const char *bundle,
                         const char *name, const dp_tensor_set *v, const cert_opts *o);
dp_status cert_sampling_power(cert_result *r, const char *name, int64_t K, int64_t N, double q, double alpha);
dp_status cert_eval_sampling(cert_result *r, const char *bundle, const char *name, const dp_tensor_set *v,
                             const cert_opts *o);
/* The expected outputs of a vector (docs/certification.md "Outputs"; names point into the
 * vector set; freed with cert_expect_free) (result.c). */
typedef struct { dp_cand_expect *e; size_t n; char **owned; size_t nowned; } cert_expect_list;
dp_status cert_expectations(cert_expect_list *x, const dp_tensor_set *v);
void cert_expect_free(cert_expect_list *x);
/* BUNDLE/outputs/VEC.rR.EXT: where repeat r of vector vec keeps its output, status or log. */
void cert_out_path(char *p, size_t len, const char *bundle, const char *vec, int64_t r, const char *ext);
/* Reads output `r` of vector `name` from the bundle: the stored status line, or the file
 * validated against the vector's expectations. res->outcome OK: *out holds it. */
dp_status cert_read_output(dp_cand_result *res, dp_tensor_set *out, const char *bundle, const char *name, int64_t r,
                           const dp_tensor_set *v);

/* Shared by the evaluators (certify_eval.c). */
dp_status cert_push(cert_result *r, int status, const char *name, const char *scope, const char *msg);
/* Repeat k's output of vector `name`: 1 with *out holding it when the run produced a valid
 * output; 0 when it did not (the failure is recorded as a check; *st carries errors). */
int cert_read_repeat(cert_result *r, dp_status *st, dp_tensor_set *out, char *sc, size_t sclen, const char *bundle,
                     const char *name, int64_t k, const dp_tensor_set *v);
/* Adds a declared convention to r->conventions (clip_fn NULL: DP-ZO, dtype only). */
void cert_note_convention(cert_result *r, const char *vec, const char *clip_fn, const char *dtype);
/* Output metadata dtype (NULL: f64) -> *dt; 0 when not f64, f32 or bf16. */
int cert_parse_dtype(dp_dtype *dt, const char *s);
/* The candidate's outputs against the reference export R under compare's derived bounds at
 * dtype dt; what the candidate does not export is copied from R and not judged. Pushes one
 * "deterministic" FAIL per failing tensor, or one PASS. */
dp_status cert_compare_outputs(cert_result *r, const dp_tensor_set *R, const dp_tensor_set *out, dp_dtype dt,
                               const char *scope);
/* The pooled tests of "iid N(0, 1)" (result.c): variance (*var receives it when var != NULL),
 * mean, normality; label != NULL renames them "<label> variance|mean|normality (KS)". An
 * empty pool gives one INCOMPLETE check. */
dp_status cert_push_normal(cert_result *r, cert_check *var, const cert_pool *p, const char *label, const char *scope,
                           double alpha);
/* The product test of the pool's pairs as check `name`; no pairs: INCOMPLETE. */
dp_status cert_push_products(cert_result *r, const cert_pool *p, const char *name, const char *scope, double alpha);

/* DP-ZO (certify_dpzo.c): directions (dir: all z; dcoord: coordinate pairs within a
 * direction; dpair: direction 2a against 2a+1; drep: repeat k against k-1) and the
 * standardized noise of the released scalars (noise; ncoord: scalar 2a against 2a+1; nrep:
 * repeat k against k-1), pooled over the DP-ZO vectors. */
typedef struct {
    int vectors;
    cert_pool dir, dcoord, dpair, drep, noise, ncoord, nrep;
} cert_dpzo_pools;
dp_status cert_eval_dpzo(cert_result *r, cert_dpzo_pools *pl, const char *bundle, const char *name,
                         const dp_tensor_set *v, const cert_opts *o);
/* One DP-ZO vector, or one step of a DP-ZO trajectory, followed across repeats: after each
 * cert_dpzo_track_repeat, valid says whether z (the repeat's directions, parameter after
 * parameter, each [n, numel]; nz elements) and w (its standardized scalar noise [n]) hold that
 * repeat's values (readable and finite); the next repeat is paired with them. */
typedef struct { double sigma, clip, phi, qn, den; int n; } cert_dpzo_params;
typedef struct {
    cert_dpzo_params q;
    ref_model m;
    ref_dataset d;
    int64_t nz;
    double *z, *w;
    int valid;
    char (*dz)[65], (*ds)[65]; /* digests of each repeat's directions and scalars (freshness) */
} cert_dpzo_track;
dp_status cert_dpzo_track_init(cert_dpzo_track *t, const dp_tensor_set *v, const char *name, int64_t repeats);
dp_status cert_dpzo_track_repeat(cert_result *r, cert_dpzo_pools *pl, cert_dpzo_track *t, int64_t k,
                                 const dp_tensor_set *v, const dp_tensor_set *out, const char *sc);
void cert_dpzo_track_free(cert_dpzo_track *t);
/* DP-ZO trajectory vectors (certify_traj.c): each step judged like a DP-ZO vector (pooled into
 * pl), and the steps' directions and scalar noise tested against each other. */
dp_status cert_eval_traj_dpzo(cert_result *r, cert_dpzo_pools *pl, const char *bundle, const char *name,
                              const dp_tensor_set *v, const cert_opts *o);
/* The pooled DP-ZO tests (nothing when no DP-ZO vector was evaluated). */
dp_status cert_dpzo_finish(cert_result *r, const cert_dpzo_pools *pl, const cert_opts *o);
void cert_dpzo_pools_free(cert_dpzo_pools *pl);
/* ---- vectors and their kinds ----
 * A vector of the suites (vectors.c, X-list CERT_VECTORS): its kind (an index of
 * CERT_VECTOR_KINDS), the suites it belongs to (CERT_S_* bits), model, batch size B,
 * clipping, clip_fn, special batch (SP_* of vectors.c), sigma and nz (kind-dependent). */
enum { CERT_S_CI = 1, CERT_S_CERT = 2 };
typedef struct {
    const char *name;
    int suites, kind;
    const char *model;
    int64_t b;
    const char *clipping, *clip_fn;
    int special;
    double sigma;
    int nz;
} cert_vec_spec;
/* The vectors of every suite, in writing order (a vector's seed is 1300 + its index). */
const cert_vec_spec *cert_vec_specs(size_t *n);
/* Sets "name", adds vector_sha256 and writes DIR/NAME.safetensors atomically. */
dp_status cert_vector_finish_write(dp_tensor_set *s, const char *dir, const char *name);

/* What one evaluation keeps across vectors (certify.c creates it, the kinds fill it). */
typedef struct {
    cert_result *r;
    const char *bundle;
    const cert_opts *o;
    cert_pool all, coord, rep, across; /* step and trajectory residuals; pairs across coordinates, repeats, steps */
    cert_noise_fams fams;              /* per tensor / group / parameter class sums of squares */
    cert_dpzo_pools dz;                /* the DP-ZO vectors' pools */
    size_t nstep;                      /* step and trajectory vectors evaluated */
    double **prev;                     /* the previous step vector's residuals per repeat (across steps) */
    int64_t prevn;
} cert_eval_ctx;
void cert_eval_ctx_free(cert_eval_ctx *c);

/* The vector kinds (docs/certification.md "Vectors"), one line each: id, the metadata "kind",
 * the writer (vectors.c), the evaluator of one vector and the finisher that pushes the pooled
 * tests after every vector (NULL: none), called in this order with the status so far (kinds.c). */
#define CERT_VECTOR_KINDS(X)                                                                      \
    X(STEP, "step", cert_write_step, cert_kind_step_eval, cert_kind_step_finish)                  \
    X(SAMPLING, "sampling", cert_write_sampling, cert_kind_sampling_eval, NULL)                   \
    X(DPZO, "dpzo", cert_write_dpzo, cert_kind_dpzo_eval, cert_kind_dpzo_finish)                  \
    X(TRAJ, "trajectory", cert_write_traj, cert_kind_traj_eval, NULL)
typedef enum {
#define CERT_VK_ID_(id, name, w, e, f) CERT_VK_##id,
    CERT_VECTOR_KINDS(CERT_VK_ID_)
#undef CERT_VK_ID_
    CERT_VK_COUNT
} cert_vk;
typedef struct {
    const char *kind; /* metadata "kind" */
    dp_status (*write)(dp_tensor_set *s, const cert_vec_spec *sp, uint64_t seed);
    dp_status (*eval)(cert_eval_ctx *c, const char *name, const dp_tensor_set *v);
    dp_status (*finish)(cert_eval_ctx *c, dp_status st);
} cert_vector_kind;
extern const cert_vector_kind cert_vector_kinds[CERT_VK_COUNT];
/* The kind of a vector from its metadata "kind"; a vector without one, or of a kind not in
 * the list, is evaluated as a step vector (its digest was checked: it is the suite's). */
const cert_vector_kind *cert_vector_kind_of(const char *kind);
#define CERT_VK_DECL_(id, name, w, e, f)                                                          \
    dp_status w(dp_tensor_set *s, const cert_vec_spec *sp, uint64_t seed);                        \
    dp_status e(cert_eval_ctx *c, const char *vname, const dp_tensor_set *v);
CERT_VECTOR_KINDS(CERT_VK_DECL_)
#undef CERT_VK_DECL_
dp_status cert_kind_step_finish(cert_eval_ctx *c, dp_status st);
dp_status cert_kind_dpzo_finish(cert_eval_ctx *c, dp_status st);

#endif
