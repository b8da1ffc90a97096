/* conformance/tests/test_plan.c — `dpcert plan` (docs/plan.md §9):
 *   1. bad input exits 2 naming the option; --help; a huge model is projected without allocating
 *      (peak RSS of the command stays small);
 *   2. memory and bytes EXACT against the engine: `[mpirun -n R] dpcert train dpsgd ...
 *      --memory-report` (conformance/reproduce/repro_measure.c) at 1, 2 and 4 ranks, every ZeRO stage and
 *      strategy, f64 and f32, tied and untied, micro-batches; every rank's ledger peak of every tag
 *      equals the projection's term and the bytes sent per collective kind equal steps x the
 *      projection's; under --cp 2 (and 2 x 2) the bytes of every collective kind. Negative controls:
 *      the projection with one example more, the wrong stage or one rank fewer disagrees;
 *   3. the papers' choice of layout for their largest configurations, from the framework profile:
 *      LongShield (Llama 3.1 8B on 4 x H100): at T = 16K without checkpointing ZeRO-DP+ (FSDP,
 *      book-keeping) does not fit and every layout that fits is context-parallel over the 4 GPUs,
 *      the best being LongShield-V2 (CP 4, grad-sample); at 64K only checkpointed layouts fit (V3);
 *      DP-ZeRO (GPT-100B on 256 x A100 80 GB, T = 2048, 2 examples per GPU, checkpointing): of the
 *      ZeRO stages only ZeRO3 fits. Negative control: a model that does not shard the optimizer
 *      states (stage 0 for every stage) finds no layout for DP-ZeRO.
 * Without DPCERT: SKIP; without mpirun the multi-rank runs are reported not run (the 1-rank ones
 * still count). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "common/proc.h"
#include "common/test.h"
#include "conformance/plan/plan.h"
#include "conformance/reproduce/repro.h"

static const char *dpcert;

/* ------------------------------------------------------------------ 1. CLI ---- */
static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' plan %s 2>&1", dpcert, args);
    FILE *f = popen(cmd, "r");
    size_t n = 0;
    out[0] = 0;
    if (f) { /* everything read (a pipe closed early would end the command by SIGPIPE), the head kept */
        char sink[4096];
        n = fread(out, 1, cap - 1, f);
        out[n] = 0;
        while (fread(sink, 1, sizeof sink, f) > 0) {}
    }
    int st = f ? pclose(f) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void) {
    static const struct { const char *args, *names; } bad[] = {
        {"--dp 0", "--dp"},
        {"--cp -1", "--cp"},
        {"--batch 0", "--batch"},
        {"--seq 1e3", "--seq"},
        {"--strategy flat", "--strategy"},
        {"--sharding zero4", "--sharding"},
        {"--model gpt5", "--model"},
        {"--link nvlink", "--link"},
        {"--link nvlink:fast", "--link"},
        {"--link nvlink:900GB/x", "--link"},
        {"--capacity 80Q", "--capacity"},
        {"--device nosuch.json", "--device"},
        {"--search", "--devices"},
        {"--search --devices 4 --dp 2", "--dp"},
        {"--devices 4", "--devices"},
        {"--micro-batches 2 --mbs 2", "--mbs"},
        {"--profile framework --dtype f32", "--dtype"},
        {"--kv-heads 2", "--kv-heads"},
        {"--unknown", "--unknown"},
        {"--dim 30 --heads 4", "heads"},
    };
    char out[8192];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_cli(bad[i].args, out, sizeof out);
        T_CHECK(rc == 2 && strstr(out, bad[i].names), "plan %s: exit %d (want 2), message naming %s: %s", bad[i].args, rc,
                bad[i].names, out);
    }
    T_CHECK(run_cli("--help", out, sizeof out) == 0 && strstr(out, "--search"), "plan --help: %s", out);
    /* a model far beyond this machine is projected, not allocated: the command's peak RSS stays small */
    struct rusage ru;
    int rc = run_cli("--profile framework --model gpt-100b --seq 2048 --batch 512 --mbs 2 --dp 256 --sharding zero3 "
                     "--strategy mixed-ghost --checkpoint block --device a100", out, sizeof out);
    getrusage(RUSAGE_CHILDREN, &ru);
    T_CHECK(rc == 0 && strstr(out, "fits"), "gpt-100b on 256 devices: exit %d: %s", rc, out);
    T_CHECK(ru.ru_maxrss < 256 * 1024, "the projection of a 100B model took %ld KiB of RSS", ru.ru_maxrss);
    rc = run_cli("--profile framework --model llama3.1-8b --seq 16384 --batch 4 --mbs 1 --search --devices 4 "
                 "--device h100 --json", out, sizeof out);
    T_CHECK(rc == 0 && strstr(out, "\"layouts\""), "search --json: exit %d", rc);
}

/* ------------------------------------------------- 2. exact against the engine ---- */
typedef struct {
    const char *what;
    int R, zero, f32, tied;
    int64_t dp, cp, k, B;
    const char *strategy;
    int cp_output;
} ex_cfg;

static const char *const STAGES[4] = {"replicated", "zero1", "zero2", "zero3"};

static void job_of(plan_job *j, plan_layout *l, const ex_cfg *c) {
    memset(j, 0, sizeof *j);
    j->model = (opt_cost_llama){"llama", 13, 8, 2, 2, 2, 12, c->tied};
    if (c->cp > 1) j->model = (opt_cost_llama){"llama", 16, 8, 1, 2, 2, 12, 0};
    j->batch = c->B;
    j->seq = c->cp > 1 ? 16 : 6;
    j->micro_batches = c->k;
    opt_cost_strategy_parse(&j->strategy, c->strategy);
    j->elem_bytes = c->f32 ? 4 : 8;
    j->n_states = 2;
    j->dp = 1;
    *l = (plan_layout){c->dp, c->cp, c->zero, c->cp_output};
}

/* mismatching terms of rank r's report against the projection (report: print them) */
static int compare(const repro_run *run, int r, const plan_result *p, int steps, int cp, int report,
                   const char *what) {
    static const int tagmap[PLAN_N_MEMS] = {REPRO_TAG_params, REPRO_TAG_grads, REPRO_TAG_optimizer_state,
                                                  REPRO_TAG_master_weights, REPRO_TAG_activations, REPRO_TAG_per_example,
                                                  REPRO_TAG_workspace, REPRO_TAG_comm_buffers, REPRO_TAG_gathered_params};
    int bad = 0;
    for (int m = 0; cp == 1 && m < PLAN_N_MEMS; m++)
        if (run->peak[r][tagmap[m]] != p->mem[m]) {
            bad++;
            if (report) T_CHECK(0, "%s rank %d: %s peak %.0f, plan %.0f", what, r, plan_mem_names[m],
                                run->peak[r][tagmap[m]], p->mem[m]);
        }
    static const int collmap[PLAN_N_COLLS] = {REPRO_COLL_allreduce_sum, REPRO_COLL_reduce_scatter_sum,
                                                    REPRO_COLL_allgather, REPRO_COLL_alltoall, REPRO_COLL_send};
    for (int k = 0; k < PLAN_N_COLLS; k++) {
        if (k == REPRO_COLL_allreduce_sum && cp > 1) continue; /* per-example losses and norms: not in the plan */
        const double want = steps * (p->sent_dp[k] + p->sent_cp[k]);
        if (run->sent[r][collmap[k]] != want) {
            bad++;
            if (report) T_CHECK(0, "%s rank %d: %s sent %.0f, plan %.0f", what, r, plan_coll_names[k],
                                run->sent[r][collmap[k]], want);
        }
    }
    return bad;
}

static void test_exact(void) {
    static const ex_cfg cfgs[] = {
        {"replicated grad-sample N=1", 1, 0, 0, 0, 1, 1, 1, 8, "grad-sample", 0},
        {"zero1 ghost N=2", 2, 1, 0, 0, 2, 1, 1, 8, "ghost", 0},
        {"zero2 fused N=2 f32", 2, 2, 1, 0, 2, 1, 1, 8, "fused", 0},
        {"zero3 book-keeping N=2", 2, 3, 0, 0, 2, 1, 1, 8, "book-keeping", 0},
        {"zero3 mixed-ghost N=4 tied", 4, 3, 0, 1, 4, 1, 1, 8, "mixed-ghost", 0},
        {"replicated grad-sample N=4 2 micro-batches", 4, 0, 0, 0, 4, 1, 2, 16, "grad-sample", 0},
        {"zero2 grad-sample N=4 f32 tied", 4, 2, 1, 1, 4, 1, 1, 8, "grad-sample", 0},
        {"cp 2 input", 2, 0, 0, 0, 1, 2, 1, 4, "grad-sample", 0},
        {"cp 2 output", 2, 0, 0, 0, 1, 2, 1, 4, "grad-sample", 1},
        {"dp 2 x cp 2 zero2 input", 4, 2, 0, 0, 2, 2, 1, 4, "grad-sample", 0},
    };
    repro_ctx rp = {NULL, NULL, dpcert};
    const int steps = 2;
    int ran = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const ex_cfg *c = &cfgs[i];
        plan_job job;
        plan_layout lay;
        job_of(&job, &lay, c);
        char args[768];
        snprintf(args, sizeof args,
                 "--impl optimized --backend host --threads 1 --model llama --vocab %lld --dim 8 --layers %lld "
                 "--heads 2 --ffn 12 --seq %lld%s --dataset-size %lld --q 1 --steps %d --clip 1 --sigma 1 --seed 1 "
                 "--noise-key 2 --optimizer adamw --dtype %s --sharding %s --strategy %s --micro-batches %lld%s%s",
                 (long long)job.model.vocab, (long long)job.model.layers, (long long)job.seq, c->tied ? " --tied" : "",
                 (long long)c->B, steps, c->f32 ? "f32" : "f64", STAGES[c->zero], c->strategy, (long long)c->k,
                 c->cp > 1 ? (c->dp > 1 ? " --dp 2 --cp 2" : " --cp 2") : "", c->cp_output ? " --cp-pattern output" : "");
        repro_run run;
        dp_status st = repro_train(&run, &rp, c->R, args);
        T_CHECK(st == DP_OK, "%s: %s", c->what, dp_last_error());
        if (st != DP_OK) continue;
        if (run.missing[0]) { printf("# not run (%s): %s\n", run.missing, c->what); continue; }
        ran++;
        plan_device dev;
        plan_device_builtin(&dev, "h100"); /* the device does not enter memory or bytes */
        plan_result p;
        T_OK(plan_project(&p, &job, &lay, &dev, PLAN_ENGINE));
        T_CHECK(p.supported, "%s: the plan refuses a layout the engine runs: %s", c->what, p.why);
        const int r = c->cp > 1 ? 1 : c->R - 1; /* the last rank (CP: CP rank 1 of DP rank 0) */
        int bad = compare(&run, r, &p, steps, (int)c->cp, 1, c->what);
        for (int q = 0; q < c->R && c->cp == 1; q++) bad += compare(&run, q, &p, steps, 1, 1, c->what);
        printf("# exact %-44s R=%d: memory %.0f B per rank (%s), bytes sent %.0f per step: %s\n", c->what, c->R,
               p.mem_total, c->cp > 1 ? "states only under --cp" : "every tag",
               p.sent_dp[0] + p.sent_dp[1] + p.sent_dp[2] + p.sent_cp[1] + p.sent_cp[2] + p.sent_cp[3],
               bad ? "DIFFERS" : "equal");
        /* negative controls: one example more, another stage, one rank fewer */
        plan_job j2 = job;
        plan_layout l2 = lay;
        j2.batch += c->R;
        plan_result q;
        T_OK(plan_project(&q, &j2, &l2, &dev, PLAN_ENGINE));
        if (c->cp == 1) T_CHECK(compare(&run, r, &q, steps, 1, 0, c->what) > 0, "%s: B + R matched", c->what);
        if (c->R > 1 && c->cp == 1) {
            l2 = lay;
            l2.zero = (lay.zero + 1) % 4;
            T_OK(plan_project(&q, &job, &l2, &dev, PLAN_ENGINE));
            T_CHECK(!q.supported || compare(&run, r, &q, steps, 1, 0, c->what) > 0, "%s: stage %d matched", c->what, l2.zero);
            l2 = lay;
            l2.dp = lay.dp - 1;
            T_OK(plan_project(&q, &job, &l2, &dev, PLAN_ENGINE));
            T_CHECK(!q.supported || compare(&run, r, &q, steps, 1, 0, c->what) > 0, "%s: one rank fewer matched", c->what);
        }
    }
    T_CHECK(ran > 0, "no engine run could be compared");
}

/* ----------------------------------------------------- 3. the papers' layouts ---- */
typedef struct { plan_layout lay; plan_job job; plan_result r; } pcand;

/* every layout of R devices (dp x cp, stages, the given strategies, checkpointing or not) */
static int layouts(pcand *out, int cap, const plan_job *base, int64_t R, int64_t mbs, const opt_cost_strategy *st,
                   int ns, int ckpt_both, const plan_device *dev, int max_cp, int force_stage0) {
    int n = 0;
    for (int64_t M = 1; M <= R && M <= max_cp; M++) {
        if (R % M) continue;
        for (int z = 0; z < 4; z++)
            for (int s = 0; s < ns; s++)
                for (int ck = 0; ck <= ckpt_both; ck++) {
                    if (n == cap) return n;
                    pcand *x = &out[n];
                    x->job = *base;
                    x->job.strategy = st[s];
                    x->job.checkpoint = ckpt_both ? ck : base->checkpoint;
                    x->lay = (plan_layout){R / M, M, z, 0};
                    const int64_t share = (base->batch + x->lay.dp - 1) / x->lay.dp;
                    x->job.micro_batches = (share + mbs - 1) / mbs;
                    plan_layout l = x->lay;
                    if (force_stage0) l.zero = 0;
                    if (plan_project(&x->r, &x->job, &l, dev, PLAN_FRAMEWORK) != DP_OK) { dp_clear_error(); continue; }
                    n++;
                }
    }
    return n;
}

static const pcand *best(const pcand *c, int n) {
    const pcand *b = NULL;
    for (int i = 0; i < n; i++)
        if (c[i].r.supported && c[i].r.fits && (!b || c[i].r.t_step < b->r.t_step)) b = &c[i];
    return b;
}

/* a private job of the framework profile: bf16 + f32 AdamW */
static plan_job fw_job(const opt_cost_llama *m, int64_t batch, int64_t seq, int checkpoint) {
    plan_job j;
    memset(&j, 0, sizeof j);
    j.model = *m;
    j.batch = batch;
    j.seq = seq;
    j.micro_batches = 1;
    j.elem_bytes = 2;
    j.n_states = 2;
    j.dp = 1;
    j.checkpoint = checkpoint;
    return j;
}

static void test_papers(void) {
    plan_device h100, a100;
    plan_device_builtin(&h100, "h100");
    plan_device_builtin(&a100, "a100");
    h100.devices_per_node = a100.devices_per_node = 8;
    static pcand c[512];
    /* LongShield §4 (Tables 2-5): Llama 3.1 8B, 4 x H100 80 GB, micro-batch 1 per GPU */
    plan_job j = fw_job(&OPT_COST_LLAMA31_8B, 4, 16384, 0);
    const opt_cost_strategy ls[2] = {OPT_COST_BOOK_KEEPING, OPT_COST_GRAD_SAMPLE};
    int n = layouts(c, 512, &j, 4, 1, ls, 2, 0, &h100, 4, 0);
    int fit_cp = 0, fit_other = 0, zero_dp_fits = 0;
    for (int i = 0; i < n; i++) {
        if (!c[i].r.supported || !c[i].r.fits) continue;
        if (c[i].lay.cp == 4) fit_cp++; else fit_other++;
        if (c[i].lay.dp == 4 && c[i].lay.zero == 3 && c[i].job.strategy == OPT_COST_BOOK_KEEPING) zero_dp_fits = 1;
    }
    const pcand *b = best(c, n);
    printf("# LongShield 8B, T 16K, 4 x H100: %d layout(s) fit with CP 4, %d without; best: dp %lld cp %lld %s %s, "
           "%.3f s/step, %.1f GB\n", fit_cp, fit_other, b ? (long long)b->lay.dp : 0, b ? (long long)b->lay.cp : 0,
           b ? opt_cost_strategy_name(b->job.strategy) : "-", b ? (const char *[]){"replicated", "zero1", "zero2", "zero3"}[b->lay.zero] : "-",
           b ? b->r.t_step : 0, b ? b->r.mem_total / 1e9 : 0);
    T_CHECK(!zero_dp_fits, "LongShield: ZeRO-DP+ (FSDP over 4, book-keeping) fits 16K on 80 GB; the paper's OOMs");
    T_CHECK(fit_cp > 0 && fit_other == 0, "LongShield: at 16K %d layout(s) fit without CP over the 4 GPUs", fit_other);
    T_CHECK(b && b->lay.cp == 4 && b->job.strategy == OPT_COST_GRAD_SAMPLE,
            "LongShield: the best layout at 16K is not LongShield-V2 (CP 4, grad-sample)");
    /* 64K: only with DP-safe activation checkpointing (V3) */
    j.seq = 65536;
    n = layouts(c, 512, &j, 4, 1, ls, 2, 1, &h100, 4, 0);
    int fit_ckpt = 0, fit_nock = 0;
    for (int i = 0; i < n; i++)
        if (c[i].r.supported && c[i].r.fits) { if (c[i].job.checkpoint) fit_ckpt++; else fit_nock++; }
    b = best(c, n);
    printf("# LongShield 8B, T 64K: %d checkpointed layout(s) fit, %d without checkpointing; best: cp %lld %s ckpt %d\n",
           fit_ckpt, fit_nock, b ? (long long)b->lay.cp : 0, b ? opt_cost_strategy_name(b->job.strategy) : "-",
           b ? b->job.checkpoint : -1);
    T_CHECK(fit_ckpt > 0 && fit_nock == 0 && b && b->lay.cp == 4, "LongShield: at 64K only V3-like layouts (CP 4, "
            "checkpointing) may fit (%d with, %d without)", fit_ckpt, fit_nock);
    /* DP-ZeRO Figure 8: GPT-100B on 256 A100 80 GB, T 2048, 2 examples per GPU, activation checkpointing,
     * layer-wise clipping (mixed ghost norm: no persistent per-example buffer); no context parallelism */
    const opt_cost_llama gpt100b = {"GPT-100B", 50257, 9216, 96, 96, 96, 24576, 1};
    j = fw_job(&gpt100b, 512, 2048, 1);
    const opt_cost_strategy dz[1] = {OPT_COST_MIXED_GHOST};
    n = layouts(c, 512, &j, 256, 2, dz, 1, 0, &a100, 1, 0);
    int fits[4] = {0};
    for (int i = 0; i < n; i++)
        if (c[i].r.supported && c[i].r.fits) fits[c[i].lay.zero] = 1;
    printf("# DP-ZeRO GPT-100B on 256 x A100: fits per stage 0-3: %d %d %d %d\n", fits[0], fits[1], fits[2], fits[3]);
    T_CHECK(!fits[0] && !fits[1] && !fits[2] && fits[3], "DP-ZeRO: ZeRO3 must be the only stage that fits");
    /* negative control: a model that never shards (every stage projected as stage 0) finds nothing */
    n = layouts(c, 512, &j, 256, 2, dz, 1, 0, &a100, 1, 1);
    T_CHECK(best(c, n) == NULL, "negative control: an unsharded model found a layout for GPT-100B on 256 GPUs");
}

int main(void) {
    dpcert = getenv("DPCERT");
    if (!dpcert || !*dpcert) return t_skip("DPCERT (the dpcert binary) is not set; run through ci/run-tests.sh");
    test_cli();
    test_papers();
    test_exact();
    return t_finish();
}
