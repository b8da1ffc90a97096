/* optimized/train_cmd.c — `dpcert train dpsgd|dpzo --impl optimized --backend host|cuda
 * --strategy NAME ...` (docs/engine.md "The train command").
 *
 * Same model, dataset, DP and export options as `dpcert reference dpsgd|dpzo` (the option
 * groups of reference/model_cli.h, reference/dpsgd.h and reference/dpzo.h), plus the
 * engine's own. Run under `mpirun -n R` for R ranks (MPI is
 * initialised when the process was started by mpirun, i.e. OMPI_COMM_WORLD_SIZE or
 * PMIX_RANK is set; a plain start is one rank without MPI). Rank 0 prints one line per
 * step and writes DIR/step-NNNNNN.safetensors with exactly the reference's tensor names. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/safetensors.h"
#include "optimized/dpsgd.h"
#include "optimized/dpzo.h"
#include "optimized/ledger.h"
#include "optimized/opt_spec.h"
#include "optimized/cuda_plugin.h"
#include "optimized/opt_agree.h"
#include "optimized/opt_mem.h"
#include "optimized/backend_decl.h"
#include "optimized/train.h"

/* the binary in the configuration digest (set by the Makefile) */
#if defined(DPCERT_VERSION) && defined(DPCERT_GIT_REV)
#define OPT_BINARY_ID DPCERT_VERSION " " DPCERT_GIT_REV
#else
#define OPT_BINARY_ID "unknown"
#endif

static int opt_mpi_inited_here = 0;
/* --collective-timeout of the command being run: set by opt_train_parse, applied to the
 * backend by opt_train_start before its first collective */
static double opt_collective_timeout_ = OPT_COLLECTIVE_TIMEOUT_DEFAULT;
/* 1 when every rank failed the same collective check (the configuration digest): the
 * ranks then finalize normally instead of aborting each other mid-message. */
static int opt_failed_together = 0;

/* Initialise MPI when started by a launcher. *use_mpi = 1 then. */
dp_status opt_mpi_start(int *use_mpi) {
    *use_mpi = 0;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK")) return DP_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return dp_error(DP_ERR_DEVICE, "MPI_Init failed");
        opt_mpi_inited_here = 1;
    }
    *use_mpi = 1;
    return DP_OK;
}

void opt_mpi_stop(int failed) {
    if (!opt_mpi_inited_here) return;
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* a rank that fails alone would leave the others waiting in a collective */
    if (failed && size > 1 && !opt_failed_together) MPI_Abort(MPI_COMM_WORLD, failed);
    MPI_Finalize();
    opt_mpi_inited_here = 0;
}

/* The cores this process may run on (its affinity mask) divided by the ranks started on
 * this node (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, or MPI_LOCALNRANKS), in [1, 256]. */
int opt_default_threads(void) {
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!ls || !*ls) ls = getenv("MPI_LOCALNRANKS");
    long local = ls && *ls ? strtol(ls, NULL, 10) : 1;
    int t = local > 1 ? (int)(cores / local) : cores;
    return t < 1 ? 1 : t > 256 ? 256 : t;
}

dp_status opt_train_parse(opt_backend_config *bc, opt_dp_options *o, const opt_train_cli *t, int algo_dpzo) {
    if (strcmp(t->impl, "optimized") != 0)
        return dp_error(DP_ERR_USAGE, "--impl must be 'optimized' (got '%s'; the reference is 'dpcert reference')",
                        t->impl);
    int k;
    static char backend[4200]; /* the canonical name (plugin:ABSOLUTE-PATH), checked before MPI starts */
    DP_TRY(opt_backend_name_check(backend, sizeof backend, t->backend));
    bc->name = backend;
    /* --precision, and --dtype its alias (docs/precision.md) */
    if (t->seen_precision && t->seen_dtype && strcmp(t->precision, t->dtype) != 0)
        return dp_error(DP_ERR_USAGE, "--dtype %s and --precision %s disagree (--dtype is an alias of --precision)",
                        t->dtype, t->precision);
    const int prk = t->seen_precision ? 1 : 0;
    DP_TRY(dp_parse_choice(&k, prk ? "--precision" : "--dtype", prk ? t->precision : t->dtype, opt_prec_names));
    const opt_prec prec = (opt_prec)k;
    bc->dtype = opt_prec_backend_dtype(prec);
    /* half precision runs on every backend: its rounding points go through the backend's
     * half_convert, or its memory operations (docs/precision.md sections 1 and 8) */
    if (t->seen_threads) DP_TRY(dp_check_range("--threads", (double)t->threads, 1, 1, 256, 1));
    bc->threads = t->seen_threads ? (int)t->threads : opt_default_threads();
    cpu_set_t aff;
    const int cpus = sched_getaffinity(0, sizeof aff, &aff) == 0 ? CPU_COUNT(&aff) : bc->threads;
    if (t->seen_threads && bc->threads > cpus)
        /* not an error (results are the same for any thread count), but the time is that of
         * fewer cores: mpirun binds each rank to one core by default (docs/performance.md) */
        fprintf(stderr, "dpcert train: note: --threads %d but this process may run on %d CPU(s) only (its affinity "
                        "mask; under mpirun use --bind-to none, or --map-by slot:PE=%d)\n", bc->threads, cpus, bc->threads);
    memset(o, 0, sizeof *o);
    o->prec = prec;
    DP_TRY(dp_parse_choice(&k, "--strategy", t->strategy, opt_strategy_names));
    o->strategy = (opt_strategy)k;
    if (algo_dpzo && t->seen_strategy)
        return dp_error(DP_ERR_USAGE, "--strategy does not apply to dpzo (no per-example gradients)");
    if (algo_dpzo && t->seen_noise_mode)
        return dp_error(DP_ERR_USAGE, "--noise-mode does not apply to dpzo (one noise draw per direction)");
    DP_TRY(dp_parse_choice(&k, "--noise-mode", t->noise_mode, opt_noise_mode_names));
    o->noise_mode = (opt_noise_mode)k;
    DP_TRY(dp_parse_choice(&k, "--mixed-rule", t->mixed_rule, opt_mixed_rule_names));
    /* the layer rule is used by mixed-ghost and by book-keeping (its per-layer choice of
     * ghost norm vs instantiation, docs/engine.md); any other strategy would ignore it */
    if (t->seen_mixed_rule && (algo_dpzo || (o->strategy != OPT_STRAT_MIXED_GHOST && o->strategy != OPT_STRAT_BOOK_KEEPING)))
        return dp_error(DP_ERR_USAGE, "--mixed-rule applies to --strategy mixed-ghost or book-keeping only (got --strategy %s)",
                        algo_dpzo ? "none: dpzo" : opt_strategy_names[o->strategy]);
    o->mixed_rule = (opt_mixed_rule)k;
    DP_TRY(dp_parse_choice(&k, "--inject-bug", t->bug, opt_bug_names));
    if (algo_dpzo) DP_TRY(opt_dpzo_bug_check((opt_bug)k));
    if (t->seen_bug) {
        /* test-only switch that breaks DP (e.g. removes per-example clipping): refused in
         * production unless the test environment asks for it explicitly */
        const char *env = getenv("DPCERT_TEST_INJECT");
        if (!env || strcmp(env, "1") != 0)
            return dp_error(DP_ERR_USAGE, "--inject-bug is a test-only switch that breaks differential privacy; "
                                          "it is refused unless DPCERT_TEST_INJECT=1 is set in the environment");
        fprintf(stderr, "dpcert train: WARNING: --inject-bug %s: this run deliberately breaks DP-SGD "
                        "(test-only negative control; its outputs are NOT private)\n", t->bug);
    }
    o->bug = (opt_bug)k;
    o->keep_per_sample = t->seen_export;
    o->no_step_vectors = !t->seen_export; /* the step's host P-vectors feed the export only */
    DP_TRY(dp_parse_choice(&k, "--sharding", t->sharding, opt_sharding_names));
    if (algo_dpzo && (t->seen_sharding || t->seen_dp || t->seen_cp || t->memory_report))
        return dp_error(DP_ERR_USAGE, "--sharding, --dp, --cp and --memory-report apply to dpsgd only");
    o->sharding = (opt_sharding)k;
    if (t->seen_dp) DP_TRY(dp_check_range("--dp", (double)t->dp, 1, 1, 65536, 1));
    DP_TRY(dp_check_range("--cp", (double)t->cp, 1, 1, 65536, 1));
    if (algo_dpzo && t->cp != 1) return dp_error(DP_ERR_USAGE, "--cp applies to dpsgd only (got --cp %lld)", (long long)t->cp);
    o->dp = (int)t->dp;
    o->cp = (int)t->cp;
    if ((t->seen_cp_attention || t->seen_cp_pattern || t->seen_cp_overlap) && algo_dpzo)
        return dp_error(DP_ERR_USAGE, "--cp-attention, --cp-pattern and --cp-overlap apply to dpsgd only");
    /* --cp 1 with a --cp-* option: the context-parallel path with one CP rank */
    o->cp_path = t->cp > 1 || t->seen_cp_attention || t->seen_cp_pattern || t->seen_cp_overlap;
    DP_TRY(dp_parse_choice(&k, "--cp-overlap", t->cp_overlap, opt_cp_overlap_names));
    o->cp_no_overlap = k == 1;
    if (t->seen_checkpoint && algo_dpzo) return dp_error(DP_ERR_USAGE, "--checkpoint applies to dpsgd only");
    DP_TRY(dp_parse_choice(&k, "--checkpoint", t->checkpoint, opt_checkpoint_names));
    o->checkpoint = k == 1;
    DP_TRY(dp_parse_choice(&k, "--cp-attention", t->cp_attention, opt_cp_attention_names));
    o->cp_ring = k == 1;
    DP_TRY(dp_parse_choice(&k, "--cp-pattern", t->cp_pattern, opt_cp_pattern_names));
    o->cp_output = k == 1;
    if (!(t->collective_timeout > 0) || t->collective_timeout > 1e6)
        return dp_error(DP_ERR_USAGE, "--collective-timeout must be in (0, 1e6] seconds (got %g)", t->collective_timeout);
    opt_collective_timeout_ = t->collective_timeout;
    if (algo_dpzo && t->seen_loss_scale) /* docs/precision.md "DP-ZO": no backward pass, nothing to scale */
        return dp_error(DP_ERR_USAGE, "--loss-scale applies to dpsgd only (DP-ZO has no backward pass: the loss scale "
                        "protects small gradients from underflow, and a zeroth-order method computes none)");
    DP_TRY(opt_loss_scale_parse(&o->ls, t->loss_scale));
    return DP_OK;
}

dp_status opt_train_add_opts(dp_opt *opts, size_t *n, size_t cap, opt_train_cli *t) {
    /* every entry checks the room left (OPT_TRAIN_NOPTS is kept by hand) */
#define ADD_(...)                                                                                        \
    do {                                                                                             \
        if (*n >= cap) return dp_error(DP_ERR_INTERNAL, "dpcert train: option table full (OPT_TRAIN_NOPTS)"); \
        opts[(*n)++] = (dp_opt)__VA_ARGS__;                                                          \
    } while (0)
    ADD_({"--impl", DP_OPT_STRING, &t->impl, NULL, "optimized (the only implementation here)"});
    ADD_({"--backend", DP_OPT_STRING, &t->backend, NULL, "host | cuda | cuda-emu | plugin:PATH (host; cuda-emu: the CUDA backend on the CPU emulation; docs/plugin-abi.md)"});
    ADD_({"--strategy", DP_OPT_STRING, &t->strategy, &t->seen_strategy,
                            "grad-sample | ghost | mixed-ghost | book-keeping | fused (grad-sample)"});
    ADD_({"--noise-mode", DP_OPT_STRING, &t->noise_mode, &t->seen_noise_mode,
                            "single (rank 0 adds all noise) | shares (each rank N(0, s^2 C^2 / R)) (single)"});
    ADD_({"--mixed-rule", DP_OPT_STRING, &t->mixed_rule, &t->seen_mixed_rule,
                            "mixed-ghost/book-keeping layer rule: flop (T < pd/(p+d)) | memory (2T^2 <= pd) (flop)"});
    ADD_({"--dtype", DP_OPT_STRING, &t->dtype, &t->seen_dtype, "alias of --precision (f64)"});
    ADD_({"--precision", DP_OPT_STRING, &t->precision, &t->seen_precision,
                            "f64 | f32 | bf16 | fp16: bf16/fp16 = half storage, f32 compute and master weights; dpsgd and dpzo, docs/precision.md (f64)"});
    ADD_({"--threads", DP_OPT_INT, &t->threads, &t->seen_threads,
                            "host threads, 1 to 256 (the cores available / ranks on this node)"});
    ADD_({"--inject-bug", DP_OPT_STRING, &t->bug, &t->seen_bug,
                            "TEST ONLY (needs DPCERT_TEST_INJECT=1): clip-after-sum | noise-every-rank | realized-batch-divisor"});
    ADD_({"--export", DP_OPT_STRING, &t->export_dir, &t->seen_export,
                            "write DIR/step-NNNNNN.safetensors (rank 0)"});
    ADD_({"--sharding", DP_OPT_STRING, &t->sharding, &t->seen_sharding,
                            "replicated | zero1 | zero2 | zero3 (DP-ZeRO stages, docs/zero.md) (replicated)"});
    ADD_({"--dp", DP_OPT_INT, &t->dp, &t->seen_dp, "data-parallel ranks N (world size / M)"});
    ADD_({"--cp", DP_OPT_INT, &t->cp, &t->seen_cp, "context-parallel ranks M, N M = world size; llama sequence sharding, docs/longshield.md (1)"});
    ADD_({"--cp-attention", DP_OPT_STRING, &t->cp_attention, &t->seen_cp_attention,
                            "attention across CP shards: allgather | ring (allgather)"});
    ADD_({"--cp-pattern", DP_OPT_STRING, &t->cp_pattern, &t->seen_cp_pattern,
                            "per-sample gradients under CP: input (reduce-scatter of partials) | output (gather, then slices) (input)"});
    ADD_({"--cp-overlap", DP_OPT_STRING, &t->cp_overlap, &t->seen_cp_overlap,
                            "post each layer's reduce-scatter during the backward: on | off (after it) (on)"});
    ADD_({"--checkpoint", DP_OPT_STRING, &t->checkpoint, &t->seen_checkpoint,
                            "DP-safe activation checkpointing: none | block (llama blocks recomputed in the backward) (none)"});
    ADD_({"--collective-timeout", DP_OPT_DOUBLE, &t->collective_timeout, NULL,
                            "seconds a collective waits for the other ranks before the run fails (600)"});
    ADD_({"--loss-scale", DP_OPT_STRING, &t->loss_scale, &t->seen_loss_scale,
                            "none | static:S | dynamic[:S0[:K]] (S a power of two; docs/precision.md) (none)"});
    ADD_({"--memory-report", DP_OPT_FLAG, &t->memory_report, NULL,
                            "print every rank's memory ledger and communicated bytes at the end (rank 0, stderr)"});
    return DP_OK;
#undef ADD_
}

void opt_train_cli_init(opt_train_cli *t) {
    memset(t, 0, sizeof *t);
    t->impl = "optimized"; t->backend = "host"; t->strategy = "grad-sample"; t->noise_mode = "single";
    t->dtype = "f64"; t->precision = "f64"; t->bug = "none"; t->mixed_rule = "flop"; t->threads = 1;
    t->sharding = "replicated"; t->cp = 1; t->cp_attention = "allgather"; t->cp_pattern = "input"; t->cp_overlap = "on"; t->checkpoint = "none"; t->loss_scale = "none"; t->collective_timeout = OPT_COLLECTIVE_TIMEOUT_DEFAULT;
}

dp_status opt_make_dir(const char *dir) {
    return dp_mkdir_p("--export", dir);
}

dp_status opt_check_backend_built(const opt_backend_config *bc) {
    opt_backend_create_fn fn = NULL;
    if (opt_backend_is_cuda(bc->name)) {
        const int emu = strcmp(bc->name, "cuda-emu") == 0;
        if (!opt_backend_cuda_create || opt_cuda_linked_is_emulated() != emu) return opt_cuda_plugin_load(&fn, emu);
    }
    return DP_OK;
}

dp_status opt_share_key(opt_backend *be, dp_noise_key *key) {
    if (be->comm.size == 1) return DP_OK;
    uint64_t k = key->k;
    void *all = NULL;
    size_t len = 0;
    DP_TRY(OPT_CALL(be, allgatherv_bytes, &all, &len, &k, sizeof k));
    if (len != sizeof k * (size_t)be->comm.size) {
        dp_free(all);
        return dp_error(DP_ERR_INTERNAL, "noise key exchange: got %zu bytes from %d ranks", len, be->comm.size);
    }
    memcpy(&key->k, all, sizeof k); /* rank 0's */
    dp_free(all);
    return DP_OK;
}

void opt_train_meta_fill(opt_train_meta *tm, const opt_backend *be) {
    snprintf(tm->ranks, sizeof tm->ranks, "%d", be->comm.size);
    snprintf(tm->threads, sizeof tm->threads, "%d", be->threads);
    opt_decl_meta(tm->arith, sizeof tm->arith, tm->arith_u, tm->arith_u_in, be);
}

dp_status opt_train_start(opt_backend **be, opt_backend_config *bc, dp_noise_key *key, int *use_mpi) {
    /* backend before MPI so that --backend cuda fails cleanly everywhere */
    DP_TRY(opt_check_backend_built(bc));
    DP_TRY(opt_mpi_start(use_mpi));
    bc->use_mpi = *use_mpi;
    DP_TRY(opt_backend_create(be, bc));
    dp_status st = DP_OK;
    if ((*be)->ops.set_collective_timeout) st = (*be)->ops.set_collective_timeout((*be)->ctx, opt_collective_timeout_);
    if (st == DP_OK) st = opt_share_key(*be, key);
    if (st != DP_OK) { opt_backend_destroy(*be); *be = NULL; }
    return st;
}

dp_status opt_memory_report(opt_backend *be, FILE *f) {
    typedef struct { opt_mem_report mem; opt_comm_stats comm; int have_comm; } rank_report;
    rank_report mine;
    memset(&mine, 0, sizeof mine);
    opt_mem_get(&mine.mem, be);
    mine.have_comm = be->ops.comm_stats && be->ops.comm_stats(be->ctx, &mine.comm, 0) == DP_OK;
    void *all = NULL;
    size_t len = 0;
    DP_TRY(OPT_CALL(be, allgatherv_bytes, &all, &len, &mine, sizeof mine));
    if (be->comm.rank == 0) {
        const rank_report *r = all;
        for (int i = 0; i < (int)(len / sizeof mine); i++) {
            char pre[32];
            snprintf(pre, sizeof pre, "rank %d: ", i);
            opt_mem_print(f, &r[i].mem, pre);
            if (!r[i].have_comm) { fprintf(f, "%scommunicated bytes: not counted by backend '%s'\n", pre, be->name); continue; }
            fprintf(f, "%scommunicated bytes          calls           sent       received\n", pre);
            for (int k = 0; k < OPT_COLL_COUNT; k++)
                fprintf(f, "%s  %-20s %10llu %14llu %14llu\n", pre, opt_coll_names[k], (unsigned long long)r[i].comm.calls[k],
                        (unsigned long long)r[i].comm.sent[k], (unsigned long long)r[i].comm.recv[k]);
        }
        fflush(f);
    }
    dp_free(all);
    return DP_OK;
}

/* Every rank's overlap of the step's CP reduce-scatters (opt_dpsgd_comm_overlap):
 * *all [2 R] (hidden, total per rank; rank 0 holds them). Collective. */
static dp_status opt_overlap_gather(opt_backend *be, opt_dpsgd *s, double **all, size_t *n) {
    double mine[2];
    size_t len = 0;
    opt_dpsgd_comm_overlap(s, &mine[0], &mine[1]);
    DP_TRY(OPT_CALL(be, allgatherv_bytes, (void **)all, &len, mine, sizeof mine));
    *n = len / sizeof mine;
    return DP_OK;
}

static void opt_overlap_print(FILE *f, int64_t step, const double *all, size_t n) {
    for (size_t i = 0; all && i < n; i++)
        fprintf(f, "rank %zu: step %lld reduce-scatter overlap: hidden fraction %.4f (hidden %.6f s of %.6f s)\n", i,
                (long long)step, all[2 * i + 1] > 0 ? all[2 * i] / all[2 * i + 1] : 0.0, all[2 * i], all[2 * i + 1]);
}

dp_status opt_train_agree(opt_backend *be, const char *algo, const dp_opt *opts, size_t n,
                          const dp_model_config *mc) {
    /* per-rank by design (docs/ranks.md): --threads (results are bit-identical for any
     * thread count), --noise-key and --reveal-noise-key (secret; rank 0's key is
     * broadcast), --max-memory (each rank's own host) */
    static const char *const skip[] = {"--threads", "--noise-key", "--reveal-noise-key", "--max-memory", NULL};
    static const char *const hashed[] = {"--data", NULL};
    static const char *const presence[] = {"--export", NULL};
    opt_canon c;
    opt_canon_init(&c);
    dp_status st = opt_canon_line(&c, "dpcert", "%s", OPT_BINARY_ID);
    if (st == DP_OK) st = opt_canon_line(&c, "command", "train %s", algo);
    if (st == DP_OK) st = opt_canon_options(&c, opts, n, skip, hashed, presence);
    if (st == DP_OK) st = opt_canon_model(&c, mc);
    if (st == DP_OK) {
        st = opt_config_agree(be, &c);
        if (st == DP_ERR_INVALID) {
            opt_failed_together = 1;
            dp_error_context(st, "rank %d of %d", be->comm.rank, be->comm.size);
        }
    }
    opt_canon_free(&c);
    return st;
}

#define CMD "train"

static dp_status run_dpsgd(int argc, char **argv, int *help, int *use_mpi) {
    dp_dpsgd_cli cli;
    dp_dpsgd_cli_init(&cli);
    opt_train_cli t;
    opt_train_cli_init(&t);
    dp_opt opts[DP_DPSGD_NOPTS + OPT_TRAIN_NOPTS];
    size_t n = 0;
    DP_TRY(dp_dpsgd_cli_add_opts(opts, &n, DP_DPSGD_NOPTS + OPT_TRAIN_NOPTS, &cli));
    DP_TRY(opt_train_add_opts(opts, &n, sizeof opts / sizeof opts[0], &t));
    DP_TRY(dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, help));
    if (*help) {
        printf("usage: dpcert train dpsgd --impl optimized --backend host|cuda|plugin:PATH --strategy NAME [options]\n"
               "The optimized engine (docs/engine.md); run under mpirun -n R for R ranks. Prints one line per\n"
               "step (as 'dpcert reference dpsgd') and with --export writes the reference's tensors.\n\n");
        dp_opts_print_help(opts, n);
        return DP_OK;
    }
    opt_backend_config bc;
    opt_dp_options o;
    DP_TRY(opt_train_parse(&bc, &o, &t, 0));
    dp_model_config mc;
    dp_dpsgd_config c;
    DP_TRY(dp_dpsgd_cli_finish(&mc, &c, &cli, opt_dpsgd_config_check));
    if (c.precision != DP_PREC_DOUBLE)
        return dp_error(DP_ERR_USAGE, "--precision mpfr is reference-only");
    opt_backend *be = NULL;
    DP_TRY(opt_train_start(&be, &bc, &c.key, use_mpi));
    int rank = be->comm.rank;
    dp_status st = opt_train_agree(be, "dpsgd", opts, n, &mc);
    /* memory pre-check (docs/memory.md); with --data again once N is known */
    const double es = (double)opt_backend_esize(be);
    if (st == DP_OK)
        st = dp_model_cli_mem_check(&cli.m, opt_mem_dpsgd(&mc, &c, &o, es, be->comm.size,
                                                           cli.m.seen_data ? 0 : (double)c.n, t.seen_export), "the run");
    if (st != DP_OK) { opt_backend_destroy(be); return st; }
    if (rank == 0 && cli.reveal_key && !cli.seen_key) dp_cli_reveal_noise_key("train dpsgd", c.key.k);
    if (t.seen_export && rank == 0) st = opt_make_dir(t.export_dir);
    dp_dataset d;
    memset(&d, 0, sizeof d);
    dp_model m, before;
    memset(&m, 0, sizeof m); memset(&before, 0, sizeof before);
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    if (st == DP_OK) st = dp_dpsgd_cli_dataset(&d, &mc, &c, &cli, opt_dpsgd_config_check);
    if (st == DP_OK) st = opt_prec_check_data(&o, &d, cli.m.seen_data ? cli.m.data : "the generated dataset");
    if (st == DP_OK && cli.m.seen_data)
        st = dp_model_cli_mem_check(&cli.m, opt_mem_dpsgd(&mc, &c, &o, es, be->comm.size, (double)d.n, t.seen_export),
                                    "the run");
    if (st == DP_OK) st = dp_model_init(&m, &mc, c.seed);
    /* The update check (opt_check_update_finite) compares with the parameters before the
     * step only where some are not finite: a model finite at the start stays finite after
     * every step that passes the check, so the copy is needed only then, or to export it. */
    int need_before = t.seen_export;
    for (int p = 0; st == DP_OK && !need_before && p < m.nparams; p++)
        for (int64_t e = 0; e < m.params[p].numel && !need_before; e++) need_before = !isfinite(m.params[p].data[e]);
    /* the data set, the host model (and its copy before each step), in the ledger */
    if (st == DP_OK) opt_mem_note_run(be, &d, &m, need_before ? 2 : 1);
    if (st == DP_OK) st = opt_dpsgd_init(&s, be, &c, &o, &m);
    if (st == DP_OK && t.memory_report && rank == 0) opt_cp_describe(stdout, &s);
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    double **host = dp_calloc((size_t)(m.nparams + 1), sizeof(double *));
    if (!host && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "out of memory");
    for (int p = 0; host && p < m.nparams; p++) host[p] = m.params[p].data;
    char peak_ms[32] = "0", peak_tot[32] = "0"; /* peaks: rank 0's ledger so far */
    char ls_desc[96], ls_used[40] = "1", ls_skip[4] = "0"; /* --loss-scale and this step's S / skip */
    opt_ls_describe(ls_desc, sizeof ls_desc, &o.ls);
    opt_train_meta tm;
    opt_train_meta_fill(&tm, be);
    const char *extra[] = {"impl", "optimized", "backend", be->name, "arithmetic", tm.arith, "arith_u", tm.arith_u,
                           "arith_u_in", tm.arith_u_in,
                           "strategy", opt_strategy_names[o.strategy],
                           "noise_mode", opt_noise_mode_names[o.noise_mode], "mixed_rule",
                           opt_mixed_rule_names[o.mixed_rule], "dtype", opt_prec_names[o.prec],
                           "ranks", tm.ranks, "threads", tm.threads, "inject_bug", opt_bug_names[o.bug],
                           "sharding", opt_sharding_names[o.sharding], "memory_peak_model_states", peak_ms,
                           "memory_peak_total", peak_tot, "loss_scale", ls_desc, "loss_scale_used", ls_used,
                           "loss_scale_skipped", ls_skip, NULL};
    for (int64_t step = 1; st == DP_OK && step <= c.steps; step++) {
        if (need_before) { /* every rank: the update check compares with it */
            dp_model_free(&before);
            st = dp_model_copy(&before, &m);
            if (st != DP_OK) break;
        }
        st = opt_dpsgd_step(&out, &s, &d, step);
        if (st == DP_OK) st = opt_dpsgd_get_params(&s, host);
        if (st == DP_OK) st = opt_check_update_finite(&m, need_before ? &before : NULL, step);
        double *ovl = NULL;
        size_t novl = 0;
        if (st == DP_OK && t.memory_report && o.cp > 1) st = opt_overlap_gather(be, &s, &ovl, &novl);
        if (st != DP_OK || rank != 0) { dp_free(ovl); continue; }
        dp_dpsgd_print_step(&out);
        opt_overlap_print(stdout, step, ovl, novl);
        dp_free(ovl);
        if (s.ls_skipped) /* the step log shows the skip (a data-dependent release, docs/precision.md) */
            printf("step %lld skipped: overflow at loss scale %.17g (dynamic), no update; next scale %.17g\n",
                   (long long)step, s.ls_used, s.ls_S);
        fflush(stdout);
        opt_mem_report mr;
        opt_mem_get(&mr, be);
        snprintf(peak_ms, sizeof peak_ms, "%llu", (unsigned long long)mr.peak_model_states);
        snprintf(peak_tot, sizeof peak_tot, "%llu", (unsigned long long)mr.peak_total);
        snprintf(ls_used, sizeof ls_used, "%.17g", s.ls_used);
        snprintf(ls_skip, sizeof ls_skip, "%d", s.ls_skipped);
        if (t.seen_export)
            st = dp_dpsgd_export_write(t.export_dir, &mc, &c, &s.groups, &before, &m, &d, &out,
                                        extra);
    }
    if (st == DP_OK && t.memory_report) st = opt_memory_report(be, stderr);
    dp_dpsgd_step_free(&out);
    dp_free(host);
    opt_dpsgd_free(&s);
    dp_model_free(&before);
    dp_model_free(&m);
    dp_dataset_free(&d);
    opt_backend_destroy(be);
    return st;
}

/* ---------------------------------------------------------------- train dpzo */

static dp_status run_dpzo(int argc, char **argv, int *help, int *use_mpi) {
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
        printf("usage: dpcert train dpzo --impl optimized --backend host|cuda|plugin:PATH [--precision f64|f32|bf16|fp16]\n"
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
    if (st == DP_OK) st = opt_dpzo_set_precision(&s, eo.prec, eo.bug);
    if (st == DP_OK) st = dp_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa);
    if (st == DP_OK && t.seen_export) {
        if (rank == 0) st = opt_make_dir(t.export_dir);
        before = opt_f64_arrays_alloc(s.numel, s.nparams);
        if (!before && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "out of memory");
    }
    opt_train_meta tm;
    opt_train_meta_fill(&tm, be);
    const char *extra[] = {"impl", "optimized", "backend", be->name, "arithmetic", tm.arith, "arith_u", tm.arith_u,
                           "arith_u_in", tm.arith_u_in,
                           "dtype", opt_prec_names[eo.prec], "ranks", tm.ranks, "threads", tm.threads, NULL};
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

int dp_cmd_train(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fprintf(argc < 1 ? stderr : stdout,
                "usage: dpcert train dpsgd|dpzo --impl optimized --backend host|cuda|plugin:PATH [--strategy NAME] [options]\n"
                "       (dpcert train dpsgd --help for every option)\n");
        return argc < 1 ? 2 : 0;
    }
    int help = 0, use_mpi = 0;
    dp_status st;
    if (strcmp(argv[0], "dpsgd") == 0) st = run_dpsgd(argc - 1, argv + 1, &help, &use_mpi);
    else if (strcmp(argv[0], "dpzo") == 0) st = run_dpzo(argc - 1, argv + 1, &help, &use_mpi);
    else {
        dp_error(DP_ERR_USAGE, "unknown algorithm '%s' (expected dpsgd or dpzo)", argv[0]);
        fprintf(stderr, "dpcert train: %s\n", dp_last_error());
        return 2;
    }
    int rc = st == DP_OK ? 0 : dp_cli_fail(CMD, st);
    opt_mpi_stop(rc == 0 ? 0 : rc);
    return rc;
}
