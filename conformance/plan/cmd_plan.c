/* conformance/plan/cmd_plan.c — `dpcert plan`: the projected memory per device, communication and step
 * time of a DP-SGD job on a DP x CP x ZeRO layout, or (--search) every layout of R devices ranked
 * by step time under the memory capacity (docs/plan.md). Bad input exits 2 naming the option;
 * nothing is allocated in proportion to the model (the host calibration runs capped shapes). */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "common/memlimit.h"
#include "conformance/plan/plan.h"

int dp_cmd_plan(int argc, char **argv);

/* Named models: the papers' released configurations (docs/models-of-cost.md §1) and DP-ZeRO's
 * GPT-100B (Figure 8: GPT-3's 96 layers and 96 heads at a smaller width, docs/plan.md §8). */
static const opt_cost_llama GPT_100B = {"GPT-100B (DP-ZeRO Fig. 8)", 50257, 9216, 96, 96, 96, 24576, 1};
static const opt_cost_llama GPT_26B = {"GPT-26B (DP-ZeRO Fig. 8)", 50257, 6144, 56, 48, 48, 16384, 1};

static int model_named(opt_cost_llama *m, const char *name) {
    if (strcmp(name, "llama3.2-1b") == 0) *m = OPT_COST_LLAMA32_1B;
    else if (strcmp(name, "llama3.2-3b") == 0) *m = OPT_COST_LLAMA32_3B;
    else if (strcmp(name, "llama3.1-8b") == 0) *m = OPT_COST_LLAMA31_8B;
    else if (strcmp(name, "gpt-100b") == 0) *m = GPT_100B;
    else if (strcmp(name, "gpt-26b") == 0) *m = GPT_26B;
    else return 0;
    return 1;
}

/* "BW" with a unit: 900GB/s, 50Gb/s, 2e9 (bytes/s); "/LAT" seconds or us: nvlink:900GB/s/5us, 2e9/5us.
 * Grammar: NUMBER [UNIT] ["/s"] ["/" LATENCY [us|ns|ms|s]], nothing after. */
static dp_status parse_bw(double *bw, double *lat, const char *s) {
    char num[64];
    int used = 0;
    if (sscanf(s, "%63[0-9.eE+-]%n", num, &used) < 1) return DP_ERR_INVALID;
    double v;
    if (dp_parse_double(&v, "--link", num) != DP_OK) { dp_clear_error(); return DP_ERR_INVALID; }
    const char *p = s + used, *u = p;
    while (isalpha((unsigned char)*p)) p++;
    const size_t ul = (size_t)(p - u);
    double mul = 1;
    if (ul == 0 || (ul == 1 && u[0] == 'B')) mul = 1;
    else if (ul == 2 && strncmp(u, "KB", 2) == 0) mul = 1e3;
    else if (ul == 2 && strncmp(u, "MB", 2) == 0) mul = 1e6;
    else if (ul == 2 && strncmp(u, "GB", 2) == 0) mul = 1e9;
    else if (ul == 2 && strncmp(u, "TB", 2) == 0) mul = 1e12;
    else if (ul == 2 && strncmp(u, "Gb", 2) == 0) mul = 1e9 / 8;
    else if (ul == 2 && strncmp(u, "Tb", 2) == 0) mul = 1e12 / 8;
    else return DP_ERR_INVALID;
    if (strncmp(p, "/s", 2) == 0 && (p[2] == 0 || p[2] == '/')) p += 2; /* "per second" */
    *bw = v * mul;
    if (!(*bw > 0) || !isfinite(*bw)) return DP_ERR_INVALID;
    if (*p == 0) return DP_OK;
    if (*p != '/') return DP_ERR_INVALID;
    double x;
    char lu[8] = "";
    int n = 0;
    if (sscanf(p + 1, "%lf%n", &x, &n) < 1 || !(x >= 0) || !isfinite(x)) return DP_ERR_INVALID;
    if (strlen(p + 1 + n) >= sizeof lu) return DP_ERR_INVALID;
    snprintf(lu, sizeof lu, "%s", p + 1 + n);
    *lat = strcmp(lu, "us") == 0 ? x * 1e-6 : strcmp(lu, "ns") == 0 ? x * 1e-9 : strcmp(lu, "ms") == 0 ? x * 1e-3
         : strcmp(lu, "s") == 0 || !lu[0] ? x : -1;
    if (*lat < 0) return DP_ERR_INVALID;
    return DP_OK;
}

/* --link NAME:BW[/s][/LAT],NAME:BW...: the first link is within a node, the second between nodes */
static dp_status parse_links(plan_device *dev, const char *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), i++) {
        char *colon = strchr(tok, ':');
        plan_link *l = i == 0 ? &dev->intra : i == 1 ? &dev->inter : NULL;
        if (!l || !colon || colon == tok || colon - tok >= (long)sizeof l->name)
            return dp_error(DP_ERR_INVALID, "--link must be NAME:BANDWIDTH[,NAME:BANDWIDTH] (within a node, then "
                            "between nodes; e.g. nvlink:900GB/s,ib:50GB/s; got '%s')", s);
        *colon = 0;
        if (parse_bw(&l->bw, &l->lat, colon + 1) != DP_OK)
            return dp_error(DP_ERR_INVALID, "--link: bandwidth '%s' of %s must be a positive number with a unit "
                            "(B, KB, MB, GB, TB per second, or Gb, Tb), optionally /LATENCY (us, ns, ms, s)", colon + 1, tok);
        snprintf(l->name, sizeof l->name, "%s", tok);
    }
    if (i == 1) dev->inter = dev->intra;
    return DP_OK;
}

typedef struct {
    plan_job job;
    plan_layout lay;
    plan_device dev;
    plan_profile prof;
    int64_t mbs;     /* > 0: micro-batch size per device (micro_batches derived per layout) */
    int fixed_strategy, fixed_ckpt, calibrate, json;
} plan_ctx;

static const char *const SHARD_NAMES[] = {"replicated", "zero1", "zero2", "zero3", NULL};

/* The job of a layout: micro-batches from --mbs; the host's per-op costs calibrated for its chunk. */
static dp_status layout_project(plan_result *r, plan_ctx *c, const plan_layout *lay, plan_job *job) {
    *job = c->job;
    if (c->mbs > 0) {
        const int64_t share = (job->batch + lay->dp - 1) / lay->dp;
        job->micro_batches = (share + c->mbs - 1) / c->mbs;
    }
    plan_device dev = c->dev;
    if (c->calibrate) { /* the memory first (it does not depend on the costs): the calibration's working set */
        DP_TRY(plan_project(r, job, lay, &dev, c->prof));
        DP_TRY(plan_calibrate(&dev, job, plan_chunk(job->batch, lay->dp, job->micro_batches), r->mem_total));
    }
    return plan_project(r, job, lay, &dev, c->prof);
}

static void print_bytes(FILE *f, double b) {
    if (b >= 1e9) fprintf(f, "%.3f GB", b / 1e9);
    else if (b >= 1e6) fprintf(f, "%.3f MB", b / 1e6);
    else fprintf(f, "%.0f B", b);
}

static json_t *result_json(const plan_result *r, const plan_job *job, const plan_layout *lay) {
    json_t *o = json_object(), *mem = json_object(), *dp = json_object(), *cp = json_object(), *ops = json_object();
    json_object_set_new(o, "dp", json_integer(lay->dp));
    json_object_set_new(o, "cp", json_integer(lay->cp));
    json_object_set_new(o, "sharding", json_string(SHARD_NAMES[lay->zero]));
    json_object_set_new(o, "strategy", json_string(job->dp ? opt_cost_strategy_name(job->strategy) : "non-private"));
    json_object_set_new(o, "checkpoint", json_string(job->checkpoint ? "block" : "none"));
    json_object_set_new(o, "micro_batches", json_integer(job->micro_batches));
    json_object_set_new(o, "supported", json_boolean(r->supported));
    if (r->why[0]) json_object_set_new(o, "note", json_string(r->why));
    if (!r->supported) return o;
    json_object_set_new(o, "chunk", json_integer(r->chunk));
    for (int i = 0; i < PLAN_N_MEMS; i++) json_object_set_new(mem, plan_mem_names[i], json_real(r->mem[i]));
    json_object_set_new(mem, "total", json_real(r->mem_total));
    json_object_set_new(o, "memory_bytes", mem);
    json_object_set_new(o, "fits", json_boolean(r->fits));
    for (int k = 0; k < PLAN_N_COLLS; k++) {
        if (r->sent_dp[k] > 0 || r->calls_dp[k] > 0)
            json_object_set_new(dp, plan_coll_names[k], json_pack("{s:f,s:f}", "bytes", r->sent_dp[k], "calls", r->calls_dp[k]));
        if (r->sent_cp[k] > 0 || r->calls_cp[k] > 0)
            json_object_set_new(cp, plan_coll_names[k], json_pack("{s:f,s:f}", "bytes", r->sent_cp[k], "calls", r->calls_cp[k]));
    }
    json_object_set_new(o, "sent_dp", dp);
    json_object_set_new(o, "sent_cp", cp);
    for (int k = 0; k < PLAN_N_OPS; k++)
        json_object_set_new(ops, plan_op_name((plan_op)k),
                            json_pack("{s:f,s:s,s:f}", "work", r->work[k], "unit", plan_op_unit((plan_op)k),
                                      "seconds", r->t_op[k]));
    json_object_set_new(o, "operations", ops);
    json_object_set_new(o, "seconds", json_pack("{s:f,s:f,s:f,s:f,s:f}", "compute", r->t_compute, "comm_dp", r->t_comm_dp,
                                                "comm_cp", r->t_comm_cp, "exposed", r->t_exposed, "step", r->t_step));
    json_object_set_new(o, "tokens_per_s_per_device", json_real(r->tokens_per_s));
    return o;
}

static void print_one(FILE *f, const plan_ctx *c, const plan_result *r, const plan_job *job,
                      const plan_layout *lay) {
    const opt_cost_llama *m = &job->model;
    fprintf(f, "plan (%s profile): llama V %lld D %lld L %lld H %lld/%lld F %lld%s, %lld parameters; batch %lld, seq %lld, "
            "%lld micro-batch(es)\n", c->prof == PLAN_ENGINE ? "engine" : "framework", (long long)m->vocab,
            (long long)m->dim, (long long)m->layers, (long long)m->heads, (long long)m->kv_heads, (long long)m->ffn,
            m->tied ? " tied" : "", (long long)opt_cost_llama_params(m), (long long)job->batch, (long long)job->seq,
            (long long)job->micro_batches);
    fprintf(f, "layout: dp %lld x cp %lld, %s, %s, checkpoint %s\n", (long long)lay->dp, (long long)lay->cp,
            SHARD_NAMES[lay->zero], job->dp ? opt_cost_strategy_name(job->strategy) : "non-private",
            job->checkpoint ? "block" : "none");
    fprintf(f, "device: %s (%s)\n", c->dev.name, c->dev.source);
    if (!r->supported) { fprintf(f, "not supported: %s\n", r->why); return; }
    if (r->why[0]) fprintf(f, "note: %s\n", r->why);
    fprintf(f, "memory per device (largest chunk %lld examples):\n", (long long)r->chunk);
    for (int i = 0; i < PLAN_N_MEMS; i++)
        if (r->mem[i] > 0) { fprintf(f, "  %-16s ", plan_mem_names[i]); print_bytes(f, r->mem[i]); fprintf(f, "\n"); }
    fprintf(f, "  %-16s ", "total");
    print_bytes(f, r->mem_total);
    if (c->dev.capacity > 0) { fprintf(f, " of "); print_bytes(f, c->dev.capacity); fprintf(f, ": %s", r->fits ? "fits" : "DOES NOT FIT"); }
    fprintf(f, "\ncommunication per device per step (bytes sent, calls):\n");
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < PLAN_N_COLLS; k++) {
            const double b = g ? r->sent_cp[k] : r->sent_dp[k], n = g ? r->calls_cp[k] : r->calls_dp[k];
            if (b > 0 || n > 0) fprintf(f, "  %s group %-20s %.0f B in %.0f call(s)\n", g ? "CP" : "DP", plan_coll_names[k], b, n);
        }
    fprintf(f, "time per step (seconds):\n");
    for (int k = 0; k < PLAN_N_OPS; k++)
        if (r->t_op[k] > 0) fprintf(f, "  %-16s %.6g (%.4g %s)\n", plan_op_name((plan_op)k), r->t_op[k], r->work[k],
                                    plan_op_unit((plan_op)k));
    fprintf(f, "  compute %.6g, DP collectives %.6g, CP collectives %.6g, exposed %.6g: step %.6g s, %.4g tokens/s "
            "per device\n", r->t_compute, r->t_comm_dp, r->t_comm_cp, r->t_exposed, r->t_step, r->tokens_per_s);
}

/* ---------------------------------------------------------------- search ---- */
typedef struct { plan_layout lay; plan_job job; plan_result r; } cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    const int ox = !x->r.supported ? 2 : !x->r.fits, oy = !y->r.supported ? 2 : !y->r.fits;
    if (ox != oy) return ox - oy;
    if (ox == 2) return 0;
    return (x->r.t_step > y->r.t_step) - (x->r.t_step < y->r.t_step);
}

static dp_status search(plan_ctx *c, int64_t devices, int64_t top) {
    size_t cap = 0, n = 0;
    cand *cs = NULL;
    dp_status st = DP_OK;
    for (int64_t M = 1; M <= devices && st == DP_OK; M++) {
        if (devices % M) continue;
        for (int z = 0; z < 4 && st == DP_OK; z++)
            for (int s = 0; s < OPT_COST_N_STRATEGIES && st == DP_OK; s++)
                for (int ck = 0; ck < 2 && st == DP_OK; ck++) {
                    if (c->fixed_strategy && s != (int)c->job.strategy) continue;
                    if (c->fixed_ckpt && ck != c->job.checkpoint) continue;
                    if (!c->job.dp && s > 0) continue;
                    if (n == cap) {
                        cap = cap ? 2 * cap : 64;
                        cand *g = dp_realloc(cs, cap * sizeof *cs);
                        if (!g) { st = DP_ERR_NOMEM; break; }
                        cs = g;
                    }
                    cand *x = &cs[n];
                    x->lay = c->lay;
                    x->lay.dp = devices / M;
                    x->lay.cp = M;
                    x->lay.zero = z;
                    plan_ctx cc = *c;
                    cc.job.strategy = (opt_cost_strategy)s;
                    cc.job.checkpoint = ck;
                    st = layout_project(&x->r, &cc, &x->lay, &x->job);
                    if (st == DP_OK) n++;
                }
    }
    if (st != DP_OK) { dp_free(cs); return st; }
    qsort(cs, n, sizeof *cs, cand_cmp);
    if (c->json) {
        json_t *o = json_object(), *arr = json_array();
        json_object_set_new(o, "devices", json_integer(devices));
        json_object_set_new(o, "device", json_string(c->dev.name));
        json_object_set_new(o, "source", json_string(c->dev.source));
        json_object_set_new(o, "capacity", json_real(c->dev.capacity));
        for (size_t i = 0; i < n; i++) {
            json_t *r = result_json(&cs[i].r, &cs[i].job, &cs[i].lay);
            json_object_set_new(r, "rank", json_integer(cs[i].r.supported && cs[i].r.fits ? (json_int_t)i + 1 : 0));
            json_array_append_new(arr, r);
        }
        json_object_set_new(o, "layouts", arr);
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
        json_decref(o);
        if (!s) return DP_ERR_NOMEM;
        printf("%s\n", s);
        dp_free(s);
    } else {
        printf("layouts of %lld device(s) on %s, ranked by step time among those that fit", (long long)devices, c->dev.name);
        if (c->dev.capacity > 0) { printf(" ("); print_bytes(stdout, c->dev.capacity); printf(" per device)"); }
        printf("\n%4s %6s %6s %-10s %-12s %-5s %4s %12s %12s %12s %12s  %s\n", "rank", "dp", "cp", "sharding", "strategy",
               "ckpt", "mb", "memory", "step s", "comm s", "tok/s/dev", "fits");
        for (size_t i = 0; i < n && (top <= 0 || (int64_t)i < top); i++) {
            const cand *x = &cs[i];
            if (!x->r.supported) continue;
            char mem[32], rk[24] = "-";
            snprintf(mem, sizeof mem, "%.4g GB", x->r.mem_total / 1e9);
            if (x->r.fits) snprintf(rk, sizeof rk, "%zu", i + 1);
            printf("%4s %6lld %6lld %-10s %-12s %-5s %4lld %12s %12.5g %12.5g %12.5g  %s\n", rk, (long long)x->lay.dp,
                   (long long)x->lay.cp, SHARD_NAMES[x->lay.zero],
                   x->job.dp ? opt_cost_strategy_name(x->job.strategy) : "non-private", x->job.checkpoint ? "block" : "none",
                   (long long)x->job.micro_batches, mem, x->r.t_step, x->r.t_exposed, x->r.tokens_per_s,
                   x->r.fits ? "yes" : "no (OOM)");
        }
        size_t uns = 0;
        for (size_t i = 0; i < n; i++) uns += !cs[i].r.supported;
        if (uns) printf("(%zu layout(s) not supported, e.g. %s)\n", uns, cs[n - 1].r.why);
    }
    dp_free(cs);
    return DP_OK;
}

/* Over 150 lines (one reason): one table of 33 options and their cross-checks in one place. */
/* ---------------------------------------------------------------- command ---- */
int dp_cmd_plan(int argc, char **argv) {
    const char *model = "llama", *strategy = "grad-sample", *dtype = "f64", *optimizer = "adamw", *sharding = "replicated";
    const char *profile = "engine", *device = NULL, *link = NULL, *checkpoint = "none", *pattern = "input";
    const char *capacity = NULL, *calib_out = NULL;
    int64_t V = 64, D = 32, L = 2, H = 4, KV = 0, F = 0, B = 16, T = 32, k = 1, dpn = 0, N = 1, M = 1, devices = 0,
            mbs = 0, top = 0;
    int tied = 0, nonpriv = 0, json = 0, help = 0, do_search = 0;
    int s_strategy = 0, s_ckpt = 0, s_k = 0, s_dp = 0, s_dtype = 0, s_dev = 0, s_F = 0, s_dpn = 0;
    const dp_opt opts[] = {
        {"--profile", DP_OPT_STRING, &profile, NULL, "engine (dpcert's engine, default) | framework (the papers' setting)"},
        {"--model", DP_OPT_STRING, &model, NULL, "llama (dimensions below) | llama3.2-1b | llama3.2-3b | llama3.1-8b | gpt-26b | gpt-100b"},
        {"--vocab", DP_OPT_INT, &V, NULL, "vocabulary V (64)"},
        {"--dim", DP_OPT_INT, &D, NULL, "width D (32)"},
        {"--layers", DP_OPT_INT, &L, NULL, "blocks L (2)"},
        {"--heads", DP_OPT_INT, &H, NULL, "attention heads H (4)"},
        {"--kv-heads", DP_OPT_INT, &KV, NULL, "key/value heads (= heads; framework profile only otherwise)"},
        {"--ffn", DP_OPT_INT, &F, &s_F, "MLP width F (2 D)"},
        {"--tied", DP_OPT_FLAG, &tied, NULL, "lm_head shares the embedding"},
        {"--batch", DP_OPT_INT, &B, NULL, "examples per step, over all DP ranks (16)"},
        {"--seq", DP_OPT_INT, &T, NULL, "positions per example T (32)"},
        {"--micro-batches", DP_OPT_INT, &k, &s_k, "chunks of a rank's share per step (1)"},
        {"--mbs", DP_OPT_INT, &mbs, NULL, "micro-batch size per device instead of --micro-batches"},
        {"--strategy", DP_OPT_STRING, &strategy, &s_strategy, "grad-sample | ghost | mixed-ghost | book-keeping | fused"},
        {"--non-private", DP_OPT_FLAG, &nonpriv, NULL, "no per-example clipping or noise"},
        {"--dtype", DP_OPT_STRING, &dtype, &s_dtype, "engine: f64 | f32 (f64); the framework computes in bf16"},
        {"--optimizer", DP_OPT_STRING, &optimizer, NULL, "adamw | momentum | sgd (adamw)"},
        {"--checkpoint", DP_OPT_STRING, &checkpoint, &s_ckpt, "none | block"},
        {"--dp", DP_OPT_INT, &N, &s_dp, "data-parallel devices N (1)"},
        {"--cp", DP_OPT_INT, &M, NULL, "context-parallel devices M (1)"},
        {"--sharding", DP_OPT_STRING, &sharding, NULL, "replicated | zero1 | zero2 | zero3"},
        {"--cp-pattern", DP_OPT_STRING, &pattern, NULL, "engine: input | output"},
        {"--device", DP_OPT_STRING, &device, &s_dev, "host | h100 | h200 | a100 | FILE (per-operation costs; host)"},
        {"--save-device", DP_OPT_STRING, &calib_out, NULL, "write the device's per-operation costs (host: measured now) to FILE"},
        {"--link", DP_OPT_STRING, &link, NULL, "NAME:BW[/LAT],NAME:BW: within a node, between nodes (nvlink:900GB/s,ib:50GB/s)"},
        {"--devices-per-node", DP_OPT_INT, &dpn, &s_dpn, "devices of one node (the device's)"},
        {"--capacity", DP_OPT_STRING, &capacity, NULL, "memory per device, BYTES[K|M|G|T] (the device's)"},
        {"--search", DP_OPT_FLAG, &do_search, NULL, "rank every layout of --devices R by step time under the capacity"},
        {"--devices", DP_OPT_INT, &devices, NULL, "devices R for --search"},
        {"--top", DP_OPT_INT, &top, NULL, "--search: print the first N layouts only"},
        {"--json", DP_OPT_FLAG, &json, NULL, "JSON output"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    int npos = 0;
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, NULL, 0, &npos, &help);
    if (st != DP_OK) return dp_cli_fail("plan", st);
    if (help) {
        printf("usage: dpcert plan [options]   (docs/plan.md)\n"
               "projects memory per device, communication and step time of one DP-SGD step on a DP x CP x ZeRO\n"
               "layout; --search ranks every layout of --devices R under the memory capacity.\n\n");
        dp_opts_print_help(opts, nopts);
        return 0;
    }
    plan_ctx c;
    memset(&c, 0, sizeof c);
    int x;
    static const char *const profs[] = {"engine", "framework", NULL};
    if ((st = dp_parse_choice(&x, "--profile", profile, profs)) != DP_OK) return dp_cli_fail("plan", st);
    c.prof = (plan_profile)x;
    opt_cost_llama *m = &c.job.model;
    if (strcmp(model, "llama") == 0) {
        if (!s_F) F = 2 * D;
        *m = (opt_cost_llama){"llama", V, D, L, H, KV > 0 ? KV : H, F, tied};
    } else if (!model_named(m, model))
        return dp_cli_fail("plan", dp_error(DP_ERR_INVALID, "--model must be llama, llama3.2-1b, llama3.2-3b, llama3.1-8b, "
                                                            "gpt-26b or gpt-100b (got '%s')", model));
    if (!opt_cost_strategy_parse(&c.job.strategy, strategy))
        return dp_cli_fail("plan", dp_error(DP_ERR_INVALID, "--strategy must be grad-sample, ghost, mixed-ghost, "
                                                            "book-keeping or fused (got '%s')", strategy));
    static const char *const dts[] = {"f64", "f32", NULL}, *const opts_[] = {"adamw", "momentum", "sgd", NULL};
    static const char *const cks[] = {"none", "block", NULL}, *const pats[] = {"input", "output", NULL};
    if ((st = dp_parse_choice(&x, "--dtype", dtype, dts)) != DP_OK) return dp_cli_fail("plan", st);
    c.job.elem_bytes = c.prof == PLAN_FRAMEWORK ? 2 : x == 0 ? 8 : 4;
    if (c.prof == PLAN_FRAMEWORK && s_dtype)
        return dp_cli_fail("plan", dp_error(DP_ERR_INVALID, "--dtype applies to --profile engine (the framework computes in bf16)"));
    if ((st = dp_parse_choice(&x, "--optimizer", optimizer, opts_)) != DP_OK) return dp_cli_fail("plan", st);
    c.job.n_states = x == 0 ? 2 : x == 1 ? 1 : 0;
    if ((st = dp_parse_choice(&x, "--checkpoint", checkpoint, cks)) != DP_OK) return dp_cli_fail("plan", st);
    c.job.checkpoint = x;
    if ((st = dp_parse_choice(&x, "--sharding", sharding, SHARD_NAMES)) != DP_OK) return dp_cli_fail("plan", st);
    c.lay.zero = x;
    if ((st = dp_parse_choice(&x, "--cp-pattern", pattern, pats)) != DP_OK) return dp_cli_fail("plan", st);
    c.lay.cp_output = x;
    c.job.batch = B;
    c.job.seq = T;
    c.job.micro_batches = k;
    c.job.dp = !nonpriv;
    c.lay.dp = N;
    c.lay.cp = M;
    c.mbs = mbs;
    c.fixed_strategy = s_strategy || nonpriv;
    c.fixed_ckpt = s_ckpt;
    c.json = json;
    if ((st = dp_check_range("--batch", (double)B, 1, 1, (double)((int64_t)1 << 40), 1)) != DP_OK ||
        (st = dp_check_range("--seq", (double)T, 1, 1, (double)(1 << 24), 1)) != DP_OK ||
        (st = dp_check_range("--dp", (double)N, 1, 1, (double)(1 << 24), 1)) != DP_OK ||
        (st = dp_check_range("--cp", (double)M, 1, 1, (double)(1 << 24), 1)) != DP_OK ||
        (st = dp_check_range("--micro-batches", (double)k, 1, 1, (double)B, 1)) != DP_OK)
        return dp_cli_fail("plan", st);
    if (mbs && s_k) return dp_cli_fail("plan", dp_error(DP_ERR_INVALID, "--mbs and --micro-batches exclude each other"));
    if (mbs && (st = dp_check_range("--mbs", (double)mbs, 1, 1, (double)B, 1)) != DP_OK) return dp_cli_fail("plan", st);
    if (do_search && (st = dp_check_range("--devices", (double)devices, 1, 1, (double)(1 << 20), 1)) != DP_OK)
        return dp_cli_fail("plan", st);
    if (!do_search && devices) return dp_cli_fail("plan", dp_error(DP_ERR_INVALID, "--devices applies to --search"));
    if (do_search && s_dp) return dp_cli_fail("plan", dp_error(DP_ERR_INVALID, "--dp and --search exclude each other "
                                                                               "(the search tries every dp x cp of --devices)"));
    if ((st = plan_job_check(&c.job, c.prof)) != DP_OK) return dp_cli_fail("plan", st);
    if (!do_search && (uint64_t)N * (uint64_t)M > ((uint64_t)1 << 24))
        return dp_cli_fail("plan", dp_error(DP_ERR_INVALID, "--dp x --cp must be at most 2^24 devices"));
    /* the device and its per-operation costs */
    const char *dn = device ? device : c.prof == PLAN_FRAMEWORK ? "h100" : "host";
    if (!plan_device_builtin(&c.dev, dn) && (st = plan_device_read(&c.dev, dn)) != DP_OK)
        return dp_cli_fail("plan", dp_error(st, "--device: %s (host, h100, h200, a100, or a device file)", dp_last_error()));
    c.calibrate = strcmp(dn, "host") == 0; /* the host's per-operation costs are measured for every layout */
    if (link && (st = parse_links(&c.dev, link)) != DP_OK) return dp_cli_fail("plan", st);
    if (s_dpn) { /* given: 1.. (0 is not "the device's") */
        if ((st = dp_check_range("--devices-per-node", (double)dpn, 1, 1, (double)(1 << 20), 1)) != DP_OK)
            return dp_cli_fail("plan", st);
        c.dev.devices_per_node = dpn;
    }
    if (capacity) {
        uint64_t cb;
        if ((st = dp_mem_parse(&cb, "--capacity", capacity)) != DP_OK) return dp_cli_fail("plan", st);
        c.dev.capacity = (double)cb;
    }
    if (calib_out) {
        plan_device d = c.dev;
        plan_job j = c.job;
        plan_result r0;
        if (c.calibrate && ((st = plan_project(&r0, &j, &c.lay, &d, c.prof)) != DP_OK ||
                            (st = plan_calibrate(&d, &j, plan_chunk(j.batch, N, j.micro_batches), r0.mem_total)) != DP_OK))
            return dp_cli_fail("plan", st);
        if ((st = plan_device_write(&d, calib_out)) != DP_OK) return dp_cli_fail("plan", st);
    }
    if (do_search) {
        st = search(&c, devices, top);
        return st == DP_OK ? 0 : dp_cli_fail("plan", st);
    }
    plan_result r;
    plan_job job;
    if ((st = layout_project(&r, &c, &c.lay, &job)) != DP_OK) return dp_cli_fail("plan", st);
    if (json) {
        json_t *o = result_json(&r, &job, &c.lay);
        json_object_set_new(o, "profile", json_string(profs[c.prof]));
        json_object_set_new(o, "device", json_string(c.dev.name));
        json_object_set_new(o, "source", json_string(c.dev.source));
        json_object_set_new(o, "parameters", json_integer(opt_cost_llama_params(&job.model)));
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(12));
        json_decref(o);
        if (!s) return dp_cli_fail("plan", DP_ERR_NOMEM);
        printf("%s\n", s);
        dp_free(s);
    } else
        print_one(stdout, &c, &r, &job, &c.lay);
    return 0;
}
