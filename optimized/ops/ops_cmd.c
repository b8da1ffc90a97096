/* optimized/ops/ops_cmd.c — `dpcert ops`: the operation harness (docs/engine.md "The
 * operation harness", docs/tolerances.md "Operation harness").
 *
 *   dpcert ops [--backend NAME] [--dtype f64|f32|bf16|fp16] [--threads N] [--filter REGEX] [--seed N]
 *   dpcert ops --support [--markdown] [--backends LIST]
 *   [mpirun -n R] dpcert ops ...     (collectives on R ranks)
 *
 * Runs the cases of every operation of OPT_BACKEND_OPS on one backend and prints one line
 * per operation: PASS, FAIL (the first failure), NOT_SUPPORTED (a NULL entry; never a
 * PASS), SKIPPED (every case needs an operation the backend lacks). An operation without
 * a case FAILs. Exit 0 when nothing failed and something passed, 1 on a FAIL, 2 bad usage
 * or a refused plugin, 3 an internal error or a crashing plugin operation (named), 77
 * when no operation could be judged. */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "optimized/ops/ops.h"
#include "optimized/plugin_loader.h"
#include "optimized/train.h"

#define CMD "ops"

static const opt_ops_entry *const opt_ops_groups[] = {opt_ops_cases_mem, opt_ops_cases_dense, opt_ops_cases_act,
                                                      opt_ops_cases_attn, opt_ops_cases_dp, opt_ops_cases_coll};

/* The case function of op, NULL when no group registers one. The test hook
 * DPCERT_OPS_DROP_CASE=NAME (with DPCERT_TEST_INJECT=1) hides one, to show that an
 * operation without a case FAILs. */
static opt_ops_case_fn find_case(opt_op op) {
    const char *drop = getenv("DPCERT_OPS_DROP_CASE"), *inj = getenv("DPCERT_TEST_INJECT");
    if (drop && inj && strcmp(inj, "1") == 0 && strcmp(drop, opt_op_name(op)) == 0) return NULL;
    for (size_t g = 0; g < sizeof opt_ops_groups / sizeof opt_ops_groups[0]; g++)
        for (const opt_ops_entry *e = opt_ops_groups[g]; e->fn; e++)
            if (e->op == op) return e->fn;
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- --support: ops x backends ---- */
static dp_status support_table(const char *list, int markdown, int use_mpi) {
    char buf[8192];
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf) return dp_error(DP_ERR_USAGE, "--backends: too long");
    enum { MAXB = 8 };
    char names[MAXB][64], notes[MAXB][300];
    unsigned char have[MAXB][OPT_OP_COUNT]; /* 0 none, 1 own, 2 inherited from the host backend */
    int nb = 0, ok[MAXB];
    for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        if (nb == MAXB) return dp_error(DP_ERR_USAGE, "--backends: at most %d names", MAXB);
        char canon[4200];
        DP_TRY(opt_backend_name_check(canon, sizeof canon, tok));
        opt_backend_decl probe;
        dp_dtype dt = DP_F32;
        if (strncmp(canon, "plugin:", 7) == 0 && opt_plugin_probe(canon + 7, &probe) == DP_OK &&
            !(probe.caps.dtypes & DPCERT_DTYPE_BIT(DPCERT_F32)))
            dt = DP_F64;
        opt_backend_config cfg = {canon, dt, 1, use_mpi};
        opt_backend *be = NULL;
        dp_status st = opt_backend_create(&be, &cfg);
        ok[nb] = st == DP_OK;
        snprintf(names[nb], sizeof names[nb], "%s", st == DP_OK ? be->name : tok);
        notes[nb][0] = '\0';
        if (st != DP_OK) snprintf(notes[nb], sizeof notes[nb], "%s", dp_last_error());
        for (int op = 0; op < OPT_OP_COUNT; op++)
            have[nb][op] = !ok[nb] ? 0 : opt_decl_is_own(be->decl, (opt_op)op) ? 1 : opt_backend_supports(be, (opt_op)op) ? 2 : 0;
        opt_backend_destroy(be);
        nb++;
    }
    static const char *const mark[3] = {"-", "yes", "host"};
    if (markdown) {
        printf("| operation |");
        for (int b = 0; b < nb; b++) printf(" %s |", names[b]);
        printf("\n|---|");
        for (int b = 0; b < nb; b++) printf("---|");
        printf("\n");
    } else {
        printf("%-22s", "operation");
        for (int b = 0; b < nb; b++) printf(" %-16s", names[b]);
        printf("\n");
    }
    for (int op = 0; op < OPT_OP_COUNT; op++) {
        printf(markdown ? "| `%s` |" : "%-22s", opt_op_name((opt_op)op));
        for (int b = 0; b < nb; b++) printf(markdown ? " %s |" : " %-16s", ok[b] ? mark[have[b][op]] : "?");
        printf("\n");
    }
    for (int b = 0; b < nb; b++)
        if (!ok[b]) printf("%s%s: not available here (%s)\n", markdown ? "\n" : "", names[b], notes[b]);
    return DP_OK;
}

/* ---- one operation's verdict, agreed over the ranks ---- */
typedef enum { V_PASS, V_FAIL, V_NOT_SUPPORTED, V_SKIPPED } verdict;
static const char *const vnames[] = {"PASS", "FAIL", "NOT_SUPPORTED", "SKIPPED"};

static verdict op_verdict(const opt_ops_result *r) {
    if (r->failed) return V_FAIL;
    if (r->ncases == r->nskipped || r->nchecked == 0) return V_SKIPPED;
    return V_PASS;
}

/* gather every rank's result of op into rank 0's (the first failing rank's detail wins) */
static void agree(opt_ops_h *h, opt_op op, int use_mpi) {
    if (!use_mpi || h->size == 1) return;
    opt_ops_result *r = &h->res[op];
    int failed = r->failed, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) return;
    char *all = h->rank == 0 ? dp_malloc((size_t)h->size * sizeof r->detail) : NULL;
    int *flags = h->rank == 0 ? dp_malloc(sizeof(int) * (size_t)h->size) : NULL;
    MPI_Gather(r->detail, (int)sizeof r->detail, MPI_CHAR, all, (int)sizeof r->detail, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(&failed, 1, MPI_INT, flags, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (h->rank == 0 && all && flags)
        for (int k = 0; k < h->size; k++)
            if (flags[k]) {
                char d[sizeof r->detail];
                snprintf(d, sizeof d, "rank %d: %s", k, all + (size_t)k * sizeof r->detail);
                memcpy(r->detail, d, sizeof d);
                r->failed = 1;
                break;
            }
    dp_free(all);
    dp_free(flags);
}

typedef struct {
    const char *backend, *dtype, *filter;
    int64_t threads;
    uint64_t seed;
} ops_opts;

static dp_status ops_setup(opt_ops_h *h, const ops_opts *o, int use_mpi, const char *canon) {
    memset(h, 0, sizeof *h);
    static const char *const dts[] = {"f64", "f32", "bf16", "fp16", NULL};
    static const dp_dtype vdt[] = {DP_F64, DP_F32, DP_BF16, DP_F16};
    int k;
    DP_TRY(dp_parse_choice(&k, "--dtype", o->dtype, dts));
    h->vdtype = vdt[k];
    h->dtype = k == 0 ? DP_F64 : DP_F32; /* half values live in f32 buffers (docs/precision.md) */
    opt_backend_config cfg = {canon, h->dtype, (int)o->threads, use_mpi};
    DP_TRY(opt_backend_create(&h->be, &cfg));
    h->rank = h->be->comm.rank;
    h->size = h->be->comm.size;
    h->det = h->be->decl ? h->be->decl->caps.determinism : DPCERT_DET_NONE;
    if (h->det == DPCERT_DET_BITWISE) { /* the same cases at another thread count */
        cfg.threads = o->threads == 1 ? 3 : 1;
        DP_TRY(opt_backend_create(&h->alt, &cfg));
    }
    if (h->be->ops.set_collective_timeout) DP_TRY(OPS_CALL(h->be, set_collective_timeout, 120.0));
    if (h->alt && h->alt->ops.set_collective_timeout) DP_TRY(OPS_CALL(h->alt, set_collective_timeout, 120.0));
    const opt_backend_decl *d = h->be->decl;
    dpcert_arith a = opt_decl_arith(d, h->dtype);
    h->env.u = opt_decl_u_eff(d, h->dtype) + dp_dtype_unit_roundoff(DP_F64);
    h->env.u_in = a.u_in;
    h->env.scal = h->dtype == DP_F64 ? 0 : dp_dtype_unit_roundoff(h->dtype);
    h->env.libm = 2 * a.libm_ulps;
    h->env.eta = h->dtype == DP_F64 ? ldexp(1.0, -1074) : ldexp(1.0, -149); /* the smallest subnormal */
    h->env.maxf = h->dtype == DP_F64 ? DBL_MAX : FLT_MAX;
    static const opt_op mem[] = {OPT_OP_ALLOC, OPT_OP_FREE, OPT_OP_TO_DEVICE, OPT_OP_TO_HOST};
    h->own_mem = 1;
    for (size_t i = 0; i < 4; i++) h->own_mem &= opt_backend_supports(h->be, mem[i]);
    if (!h->own_mem && (!d || d->caps.memory != DPCERT_MEMORY_HOST))
        return dp_error(DP_ERR_INVALID, "backend '%s' has device memory but not alloc, free, to_device and to_host: the "
                        "harness cannot move data", h->be->name);
    return dp_stream_public(&h->rng, (dp_seed){o->seed}, DP_PURPOSE_TEST, 0x6f7073u /* "ops" */, 0);
}

static dp_status ops_run(const ops_opts *o, int use_mpi, int *rc) {
    char canon[4200];
    DP_TRY(opt_backend_name_check(canon, sizeof canon, o->backend));
    regex_t re;
    if (o->filter && regcomp(&re, o->filter, REG_EXTENDED | REG_NOSUB) != 0)
        return dp_error(DP_ERR_USAGE, "--filter: invalid regular expression '%s'", o->filter);
    opt_ops_h *h = dp_calloc(1, sizeof *h);
    if (!h) { if (o->filter) regfree(&re); return DP_ERR_NOMEM; }
    dp_status st = ops_setup(h, o, use_mpi, canon);
    double t0 = now_s();
    int count[4] = {0}, ncases = 0, judged = 0;
    if (st == DP_OK && h->rank == 0) {
        char decl[4600];
        opt_decl_text(decl, sizeof decl, h->be->decl, h->dtype);
        printf("dpcert ops: backend %s, dtype %s%s, %d rank%s, %lld thread%s%s, seed %llu\n", h->be->name, o->dtype,
               h->vdtype != h->dtype ? " (half values in f32 buffers)" : "", h->size, h->size > 1 ? "s" : "",
               (long long)o->threads, o->threads > 1 ? "s" : "",
               h->alt ? (o->threads == 1 ? " (determinism also at 3 threads)" : " (determinism also at 1 thread)") : "",
               (unsigned long long)o->seed);
        printf("declaration: %s\n", decl);
        fflush(stdout);
    }
    for (int op = 0; st == DP_OK && op < OPT_OP_COUNT; op++) {
        const char *name = opt_op_name((opt_op)op);
        if (o->filter && regexec(&re, name, 0, NULL, 0) != 0) continue;
        opt_ops_result *r = &h->res[op];
        opt_ops_case_fn fn = find_case((opt_op)op);
        verdict v;
        if (!fn) {
            r->failed = 1;
            snprintf(r->detail, sizeof r->detail, "no case for this operation (every operation of OPT_BACKEND_OPS needs "
                     "one: optimized/ops/ops_cases_*.c)");
            v = V_FAIL;
        } else if (!opt_decl_is_own(h->be->decl, (opt_op)op)) {
            v = V_NOT_SUPPORTED;
            snprintf(r->detail, sizeof r->detail, opt_backend_supports(h->be, (opt_op)op)
                     ? "NULL in the plugin (train and conform use the host backend's: inherit_host)" : "NULL entry");
        } else {
            st = fn(h);
            if (st != DP_OK) break;
            agree(h, (opt_op)op, use_mpi);
            v = op_verdict(r);
        }
        count[v]++;
        ncases += r->ncases;
        judged += v == V_PASS || v == V_FAIL;
        if (h->rank != 0) continue;
        if (v == V_PASS)
            printf("  %-14s %-20s %4d cases %9lld checks  worst %.3g%% of its bound%s%s%s\n", vnames[v], name, r->ncases,
                   (long long)r->nchecked, 100 * r->worst, r->worst_case[0] ? " (" : "", r->worst_case,
                   r->worst_case[0] ? ")" : "");
        else printf("  %-14s %-20s %s\n", vnames[v], name, r->detail);
        if (v == V_PASS && r->nunchecked)
            printf("  %-14s %-20s (%lld elements not compared: an intermediate may overflow the dtype)\n", "", "",
                   (long long)r->nunchecked);
        fflush(stdout);
    }
    if (st == DP_OK && h->rank == 0)
        printf("ops: %d operations: %d PASS, %d FAIL, %d NOT_SUPPORTED, %d SKIPPED (%d cases, %.1f s)\n",
               count[V_PASS] + count[V_FAIL] + count[V_NOT_SUPPORTED] + count[V_SKIPPED], count[V_PASS], count[V_FAIL],
               count[V_NOT_SUPPORTED], count[V_SKIPPED], ncases, now_s() - t0);
    *rc = count[V_FAIL] ? 1 : judged == 0 ? 77 : 0;
    if (st == DP_OK && *rc == 77 && h->rank == 0)
        fprintf(stderr, "dpcert ops: no operation could be judged (exit 77): never a pass by omission\n");
    opt_backend_destroy(h->alt);
    opt_backend_destroy(h->be);
    dp_free(h);
    if (o->filter) regfree(&re);
    return st;
}

int dp_cmd_ops(int argc, char **argv) {
    ops_opts o = {"host", "f64", NULL, 1, 1};
    const char *backends = "host,cuda";
    int help = 0, support = 0, markdown = 0;
    dp_opt opts[] = {
        {"--backend", DP_OPT_STRING, &o.backend, NULL, "host (default) | cuda | plugin:PATH | plugin:NAME"},
        {"--dtype", DP_OPT_STRING, &o.dtype, NULL, "f64 (default) | f32 | bf16 | fp16 (half values in f32 buffers)"},
        {"--threads", DP_OPT_INT, &o.threads, NULL, "threads of the backend (default 1; the determinism check adds 3 or 1)"},
        {"--filter", DP_OPT_STRING, &o.filter, NULL, "only operations whose name matches this POSIX extended regex"},
        {"--seed", DP_OPT_U64, &o.seed, NULL, "seed of the generated inputs (public TEST stream; default 1)"},
        {"--support", DP_OPT_FLAG, &support, NULL, "print the support table (operations x backends) and exit"},
        {"--backends", DP_OPT_STRING, &backends, NULL, "with --support: comma-separated backend names (default host,cuda)"},
        {"--markdown", DP_OPT_FLAG, &markdown, NULL, "with --support: a markdown table (the one docs/engine.md includes)"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    if (help) {
        printf("usage: [mpirun -n R] dpcert ops [--backend NAME] [--dtype f64|f32|bf16|fp16] [--threads N] [--filter REGEX]\n"
               "       dpcert ops --support [--markdown] [--backends LIST]\n"
               "Generated cases for every backend operation, compared with an independent double-precision evaluation\n"
               "under the bounds of docs/tolerances.md \"Operation harness\". Exit 0 no FAIL, 1 a FAIL, 2 bad usage or a\n"
               "refused plugin, 3 internal error or a crashing plugin operation, 77 nothing could be judged.\n");
        dp_opts_print_help(opts, nopts);
        return 0;
    }
    if (o.threads < 1 || o.threads > 256)
        return dp_cli_fail(CMD, dp_error(DP_ERR_USAGE, "--threads must be in [1, 256] (got %lld)", (long long)o.threads));
    if (!support && (markdown || strcmp(backends, "host,cuda") != 0))
        return dp_cli_fail(CMD, dp_error(DP_ERR_USAGE, "--markdown and --backends go with --support"));
    int use_mpi = 0, rc = 0;
    if ((st = opt_mpi_start(&use_mpi)) != DP_OK) return dp_cli_fail(CMD, st);
    st = support ? support_table(backends, markdown, use_mpi) : ops_run(&o, use_mpi, &rc);
    if (st != DP_OK) rc = dp_cli_fail(CMD, st);
    opt_mpi_stop(rc == 1 || rc == 77 ? 0 : rc); /* a FAIL is agreed by every rank: finalize together */
    return rc;
}
