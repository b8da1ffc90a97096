/* optimized/bench/bench_gpu_step.c — G4 (issue 25; docs/gpu-results.md "G4"): seconds per
 * whole DP-SGD step of the llama on the CUDA backend, side by side in one run, with the
 * ratios to the engine's own non-private step on the same batch:
 *   fused-single   per-layer clipping, strategy fused, the single-pass kernel
 *                  (DPCERT_CUDA_FUSED=single; layers it cannot hold take the chunked path)
 *   fused-chunked  the same with the previous path (DPCERT_CUDA_FUSED=chunked)
 *   flat           flat clipping, strategy mixed-ghost
 *   non-dp         forward + backward, summed gradients, SGD (bench_nondp.h)
 * Each configuration gets its own backend (so its memory ledger holds its own peak) and the
 * same model, data and batch (N = B, q = 1: every step has exactly B examples; C = 1,
 * sigma = 1, SGD lr 0.1). Every timed step ends with the backend's barrier (a device
 * synchronisation), so the wall-clock median of the steps is the device time of a step plus
 * the host's share; W warm-up steps first, then R timed.
 *
 * One iteration: one step and the device synchronisation after it. Rows (common/bench.h,
 * docs/benchmarks.md): non-dp (the baseline) first, then fused-single, fused-chunked, flat.
 *
 * Usage: bench_gpu_step [-w W] [-n N] [--backend cuda|cuda-emu|host] [--dtype f32|f64|bf16]
 *          [--dim D] [--layers L] [--heads H] [--ffn F] [--seq T] [--batch B] [--vocab V]
 *          [--quick] [--budget SECONDS]
 * --quick: a small shape (D 256, L 2, H 4, F 704, T 128, B 4, V 1024; -w 1 -n 5 unless given).
 * --budget S: each configuration stops taking timed steps once it has used S / 4 seconds (at
 * least 3 timed steps; RESULT says how many it took), so that a device call with a time limit
 * keeps every configuration's line. --dtype bf16: the CUDA backend computes in f32 or f64 only
 * (mixed precision on CUDA is issue 24's), so f32 runs and the output says so. The defaults
 * are G4's shape (D 1024, L 8, H 16, F 2816, T 1024, B 8, V 32000, -w 3 -n 20).
 * Output: the harness header; per configuration its row and one "RESULT tool=dpcert
 * strategy=NAME ..." line (median_s, min_s, max_s, ledger_peak_bytes: the engine's memory
 * ledger, docs/memory.md; the format ci/peers/gpu_step.sh reads), then the "RATIO" lines of
 * G4 with their targets, and the reproduce line. Exit 0; 77 when the backend has no device
 * (no GPU); 3 when a configuration fails (the others still run); 2 on bad usage.
 * On cuda-emu the numbers are the CPU emulation's, never a GPU measurement.
 * Reproduce (on a GPU): make bench-gpu, or DPCERT_CUDA_PLUGIN=build/libdpcert_cuda.so
 * build/bench/optimized_bench_gpu_step -w 3 -n 20 --backend cuda */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench.h"
#include "optimized/bench/bench_nondp.h"
#include "optimized/bench/bench_util.h"
#include "optimized/dpsgd.h"
#include "optimized/ledger.h"
#include "optimized/opt_mem.h"

/* the baseline first: every later row's ratio is to it */
enum { CFG_NONDP, CFG_SINGLE, CFG_CHUNKED, CFG_FLAT, CFG_COUNT };
static const char *const cfg_names[CFG_COUNT] = {"non-dp", "fused-single", "fused-chunked", "flat"};

typedef struct {
    int reps;                /* timed steps taken (fewer than asked when --budget ran out) */
    double median, min, max; /* seconds, as printed (%.9g): the ratios are those of the printed values */
    dp_bench_stats stats;    /* median, p10, p90 of the timed steps (the row) */
    double bytes;            /* bytes sent per timed step (< 0: n/a) */
    unsigned long long peak;  /* the engine ledger's peak, bytes */
    int ok;
} cfg_result;

static double as_printed(double x) {
    char b[64];
    snprintf(b, sizeof b, "%.9g", x);
    return strtod(b, NULL);
}

static int strategy_index(const char *name) {
    for (int k = 0; opt_strategy_names[k]; k++)
        if (strcmp(opt_strategy_names[k], name) == 0) return k;
    return -1;
}

/* W + R steps of configuration k on a fresh backend; t[] receives the R timed seconds */
static dp_status run_cfg(cfg_result *r, int k, const opt_backend_config *bc, const dp_model *m, const dp_dataset *d,
                         int64_t B, int warm, int reps, double budget) {
    const double t_start = dp_bench_now();
    /* the configuration's share of --budget: after the warm-up, no new timed step once spent
     * (at least 3 timed steps, or the ones asked for) */
#define OUT_OF_TIME(i) (budget > 0 && (i) >= warm + (reps < 3 ? reps : 3) && dp_bench_now() - t_start > budget)
    setenv("DPCERT_CUDA_FUSED", k == CFG_CHUNKED ? "chunked" : "single", 1);
    opt_backend *be = NULL;
    dp_status st = opt_backend_create(&be, bc);
    unsetenv("DPCERT_CUDA_FUSED");
    if (st != DP_OK) return st;
    opt_mem_note_run(be, d, m, 1);
    double *t = malloc(sizeof(double) * (size_t)(warm + reps));
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = B; c.q = 1.0; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2;
    c.style = k == CFG_FLAT ? DP_CLIP_FLAT : DP_CLIP_PER_LAYER;
    if (k != CFG_NONDP) {
        int s = strategy_index(k == CFG_FLAT ? "mixed-ghost" : "fused");
        opt_dp_options o = {.strategy = (opt_strategy)s, .mixed_rule = OPT_MIXED_FLOP, .noise_mode = OPT_NOISE_SINGLE,
                            .bug = OPT_BUG_NONE, .no_step_vectors = 1};
        opt_dpsgd sd;
        if (s < 0) st = dp_error(DP_ERR_INTERNAL, "bench_gpu_step: no strategy for %s", cfg_names[k]);
        else if ((st = opt_dpsgd_init(&sd, be, &c, &o, m)) == DP_OK) {
            dp_dpsgd_step_out out;
            memset(&out, 0, sizeof out);
            for (int i = 0; i < warm + reps && st == DP_OK; i++) {
                if (OUT_OF_TIME(i)) { reps = i - warm; break; }
                if (i == warm) opt_bench_sent_bytes(be); /* the timed steps' bytes only */
                double t0 = dp_bench_now();
                st = opt_dpsgd_step(&out, &sd, d, i + 1);
                if (st == DP_OK) st = be->ops.barrier(be->ctx, NULL);
                t[i] = dp_bench_now() - t0;
            }
            dp_dpsgd_step_free(&out);
            opt_dpsgd_free(&sd);
        }
    } else {
        opt_bench_nondp nd;
        if ((st = opt_bench_nondp_init(&nd, be, m, B)) == DP_OK) {
            for (int i = 0; i < warm + reps && st == DP_OK; i++) {
                if (OUT_OF_TIME(i)) { reps = i - warm; break; }
                if (i == warm) opt_bench_sent_bytes(be);
                double t0 = dp_bench_now();
                st = opt_bench_nondp_run(&nd, d);
                if (st == DP_OK) st = be->ops.barrier(be->ctx, NULL);
                t[i] = dp_bench_now() - t0;
            }
            opt_bench_nondp_free(&nd);
        }
    }
    if (st == DP_OK) {
        r->bytes = reps > 0 ? opt_bench_sent_bytes(be) / reps : -1;
        dp_bench_stats_of(&r->stats, t + warm, reps); /* sorts t[warm..] */
        opt_mem_report mr;
        opt_mem_get(&mr, be);
        r->reps = reps;
        r->median = as_printed(r->stats.median);
        r->min = as_printed(t[warm]);
        r->max = as_printed(t[warm + reps - 1]);
        r->peak = (unsigned long long)mr.peak_total;
        r->ok = 1;
    }
    free(t);
    opt_backend_destroy(be);
    return st;
}

/* --quick among the arguments (it sets the defaults of -w and -n, before they are parsed) */
static int quick_given(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) return 1;
    return 0;
}
static void ratio(const char *what, const cfg_result *a, const cfg_result *b, double target, int mem) {
    if (!a->ok || !b->ok) {
        printf("RATIO %-58s n/a (a configuration failed)\n", what);
        return;
    }
    double x = mem ? (double)a->peak / (double)b->peak : a->median / b->median;
    if (target > 0) printf("RATIO %-58s %.3f (G4 target <= %.2f: %s)\n", what, x, target, x <= target ? "met" : "not met");
    else printf("RATIO %-58s %.3f\n", what, x);
}

int main(int argc, char **argv) {
    const int quick = quick_given(argc, argv);
    const char *backend = "cuda", *dt = "f32", *budget_s = "0";
    opt_bench_llama la = {.dim = quick ? "256" : "1024", .layers = quick ? "2" : "8", .heads = quick ? "4" : "16",
                          .ffn = quick ? "704" : "2816", .seq = quick ? "128" : "1024", .vocab = quick ? "1024" : "32000",
                          .batch = quick ? "4" : "8"};
    int quick_set = 0;
    const dp_bench_flag flags[] = {{"--backend", &backend, NULL}, {"--dtype", &dt, NULL}, {"--budget", &budget_s, NULL},
                                   {"--quick", NULL, &quick_set}, OPT_BENCH_LLAMA_FLAGS(la)};
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse_flags(&bo, &help, argc, argv, quick ? 1 : 3, quick ? 5 : 20,
                             "[--backend cuda|cuda-emu|host] [--dtype f32|f64|bf16] " OPT_BENCH_LLAMA_USAGE
                             " [--quick] [--budget SECONDS]",
                             flags, (int)(sizeof flags / sizeof flags[0])) != DP_OK) {
        fprintf(stderr, "bench_gpu_step: %s\n", dp_last_error());
        return 2;
    }
    if (help) return 0;
    const int warm = bo.warmup, reps = bo.iters;
    dp_model_config mc;
    int64_t B = 0;
    const double budget = atof(budget_s);
    if (opt_bench_llama_config(&mc, &B, &la) != DP_OK || !(budget >= 0) ||
        (strcmp(dt, "f32") && strcmp(dt, "f64") && strcmp(dt, "bf16"))) {
        fprintf(stderr, "bench_gpu_step: %s\n", dp_last_error()[0] ? dp_last_error() : "bad --budget or --dtype");
        return 2;
    }
    if (strcmp(dt, "bf16") == 0) {
        printf("NOTE: --dtype bf16: the CUDA backend computes in f32 or f64 (mixed precision on CUDA is issue 24's); "
               "measuring f32\n");
        dt = "f32";
    }
    opt_backend_config bc = {backend, strcmp(dt, "f32") == 0 ? DP_F32 : DP_F64, 1, 0};
    opt_backend *probe = NULL; /* fail fast without a device, before building the model */
    if (opt_backend_create(&probe, &bc) != DP_OK) {
        printf("SKIP: backend %s: %s\n", backend, dp_last_error());
        return 77;
    }
    opt_backend_destroy(probe);
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = B; c.seed.k = 2;
    dp_model m;
    dp_dataset d;
    const int mrc = opt_bench_model_data(&m, &d, &mc, &c, "bench_gpu_step");
    if (mrc != 0) return mrc;
    char what[240];
    snprintf(what, sizeof what, "one DP-SGD step (or the non-private one) of the llama D=%d L=%d H=%d F=%d T=%d B=%lld "
             "V=%d and the device synchronisation after it%s", mc.dim, mc.layers, mc.heads, mc.ffn, mc.seq, (long long)B,
             mc.vocab, strcmp(backend, "cuda-emu") == 0 ? " (the CPU emulation: not a GPU)" : "");
    dp_bench_header("bench_gpu_step", what, backend, dt, 1, 1, &bo);
    cfg_result res[CFG_COUNT];
    memset(res, 0, sizeof res);
    int rc = 0;
    for (int k = 0; k < CFG_COUNT; k++) {
        dp_status st = run_cfg(&res[k], k, &bc, &m, &d, B, warm, reps, budget / CFG_COUNT);
        if (st != DP_OK) {
            fprintf(stderr, "bench_gpu_step: %s: %s\n", cfg_names[k], dp_last_error());
            rc = 3;
            continue;
        }
        dp_bench_row(cfg_names[k], &res[k].stats, k == CFG_NONDP || !res[CFG_NONDP].ok ? 0 : res[CFG_NONDP].stats.median,
                     k == CFG_NONDP, res[k].bytes, (double)res[k].peak);
        printf("RESULT tool=dpcert strategy=%s backend=%s dtype=%s D=%d L=%d H=%d F=%d T=%d B=%lld V=%d warmup=%d reps=%d "
               "median_s=%.9g min_s=%.9g max_s=%.9g ledger_peak_bytes=%llu\n",
               cfg_names[k], backend, dt, mc.dim, mc.layers, mc.heads, mc.ffn, mc.seq, (long long)B, mc.vocab, warm, res[k].reps,
               res[k].median, res[k].min, res[k].max, res[k].peak);
        fflush(stdout);
    }
    printf("# G4 side by side (one run, backend %s, %s; median of up to %d steps after %d warm-up, device synchronised after "
           "each):\n", backend, dt, reps, warm);
    ratio("per-layer fused, single pass / non-DP", &res[CFG_SINGLE], &res[CFG_NONDP], 1.15, 0);
    ratio("per-layer fused, chunked (previous path) / non-DP", &res[CFG_CHUNKED], &res[CFG_NONDP], 1.15, 0);
    ratio("single pass / chunked", &res[CFG_SINGLE], &res[CFG_CHUNKED], 0, 0);
    ratio("flat (mixed-ghost) / non-DP", &res[CFG_FLAT], &res[CFG_NONDP], 1.35, 0);
    ratio("peak memory (engine ledger), fused single pass / non-DP", &res[CFG_SINGLE], &res[CFG_NONDP], 1.05, 1);
    ratio("peak memory (engine ledger), flat / non-DP", &res[CFG_FLAT], &res[CFG_NONDP], 1.05, 1);
    if (res[CFG_SINGLE].ok && res[CFG_FLAT].ok && res[CFG_NONDP].ok)
        printf("NOTE: G4 per-layer fused (single pass) / non-DP %.3f, flat / non-DP %.3f, single pass / chunked %s\n",
               res[CFG_SINGLE].median / res[CFG_NONDP].median, res[CFG_FLAT].median / res[CFG_NONDP].median,
               res[CFG_CHUNKED].ok ? "see RATIO" : "n/a");
    if (strcmp(backend, "cuda-emu") == 0) printf("NOTE: cuda-emu is the CPU emulation: these are not GPU measurements\n");
    dp_bench_reproduce(argv[0], &bo);
    dp_dataset_free(&d);
    dp_model_free(&m);
    return rc;
}
