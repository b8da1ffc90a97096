/* common/spec_model_cli.c — the model and dataset options shared by every training
 * command (common/spec_model.h). */
#include "common/spec_model.h"

#include <inttypes.h>
#include <string.h>

#include "common/memlimit.h"

void dp_model_cli_init(dp_model_cli *c, int64_t n) {
    memset(c, 0, sizeof *c);
    c->n = n;
}

dp_status dp_model_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, dp_model_cli *c, const char *n_help) {
    const dp_opt mine[DP_MODEL_NOPTS] = {
        {"--model", DP_OPT_STRING, &c->model, &c->seen_model, "mlp | llama (required)"},
        {"--in", DP_OPT_INT, &c->in, &c->seen_in, "mlp input size (16)"},
        {"--hidden", DP_OPT_STRING, &c->hidden, &c->seen_hidden, "mlp hidden widths, comma-separated, or none (32,32)"},
        {"--classes", DP_OPT_INT, &c->classes, &c->seen_classes, "mlp classes (10)"},
        {"--vocab", DP_OPT_INT, &c->vocab, &c->seen_vocab, "llama vocabulary V (64)"},
        {"--dim", DP_OPT_INT, &c->dim, &c->seen_dim, "llama dim D (32)"},
        {"--layers", DP_OPT_INT, &c->layers, &c->seen_layers, "llama layers L (2)"},
        {"--heads", DP_OPT_INT, &c->heads, &c->seen_heads, "llama heads H, dividing D (4)"},
        {"--ffn", DP_OPT_INT, &c->ffn, &c->seen_ffn, "llama ffn F (64)"},
        {"--seq", DP_OPT_INT, &c->seq, &c->seen_seq, "llama sequence length T (16)"},
        {"--tied", DP_OPT_FLAG, &c->tied, &c->seen_tied, "llama: lm_head = tok_emb"},
        {"--data", DP_OPT_STRING, &c->data, &c->seen_data, "dataset safetensors file (tokens | x, y)"},
        {"--dataset-size", DP_OPT_INT, &c->n, &c->seen_n, n_help},
        {"--max-memory", DP_OPT_STRING, &c->max_memory, &c->seen_max_memory,
         "refuse a run whose memory estimate exceeds BYTES[K|M|G|T] (default: MemAvailable)"},
    };
    if (*n + DP_MODEL_NOPTS > cap) return dp_error(DP_ERR_INTERNAL, "option table too small");
    for (size_t k = 0; k < DP_MODEL_NOPTS; k++) opts[(*n)++] = mine[k];
    return DP_OK;
}

static dp_status fits_int(int *out, const char *what, int64_t v) {
    if (v < INT32_MIN || v > INT32_MAX) return dp_error(DP_ERR_INVALID, "%s: %" PRId64 " is out of range", what, v);
    *out = (int)v;
    return DP_OK;
}

dp_status dp_model_cli_finish(dp_model_config *mc, const dp_model_cli *o) {
    static const char *const kinds[] = {"mlp", "llama", NULL};
    int kind = 0;
    if (!o->seen_model || !o->model) return dp_error(DP_ERR_USAGE, "missing required option --model mlp|llama");
    DP_TRY(dp_parse_choice(&kind, "--model", o->model, kinds));
    dp_model_config_default(mc, (dp_model_kind)kind);
    const char *mlp_only = o->seen_in ? "--in" : o->seen_hidden ? "--hidden" : o->seen_classes ? "--classes" : NULL;
    const char *llama_only = o->seen_vocab ? "--vocab" : o->seen_dim ? "--dim" : o->seen_layers ? "--layers"
                           : o->seen_heads ? "--heads" : o->seen_ffn ? "--ffn" : o->seen_seq ? "--seq"
                           : o->seen_tied ? "--tied" : NULL;
    if (kind == DP_MLP && llama_only) return dp_error(DP_ERR_USAGE, "%s applies to --model llama only", llama_only);
    if (kind == DP_LLAMA && mlp_only) return dp_error(DP_ERR_USAGE, "%s applies to --model mlp only", mlp_only);
    if (o->seen_in) DP_TRY(fits_int(&mc->in, "--in", o->in));
    if (o->seen_classes) DP_TRY(fits_int(&mc->classes, "--classes", o->classes));
    if (o->seen_hidden) {
        int64_t h[DP_MAX_HIDDEN + 1];
        size_t nh = 0;
        if (strcmp(o->hidden, "none") != 0) DP_TRY(dp_parse_i64_list(h, DP_MAX_HIDDEN, &nh, "--hidden", o->hidden));
        mc->nhidden = (int)nh;
        for (size_t k = 0; k < nh; k++) DP_TRY(fits_int(&mc->hidden[k], "--hidden", h[k]));
    }
    if (o->seen_vocab) DP_TRY(fits_int(&mc->vocab, "--vocab", o->vocab));
    if (o->seen_dim) DP_TRY(fits_int(&mc->dim, "--dim", o->dim));
    if (o->seen_layers) DP_TRY(fits_int(&mc->layers, "--layers", o->layers));
    if (o->seen_heads) DP_TRY(fits_int(&mc->heads, "--heads", o->heads));
    if (o->seen_ffn) DP_TRY(fits_int(&mc->ffn, "--ffn", o->ffn));
    if (o->seen_seq) DP_TRY(fits_int(&mc->seq, "--seq", o->seq));
    mc->tied = o->tied ? 1 : 0;
    return dp_model_config_check(mc);
}

dp_status dp_model_cli_dataset(dp_dataset *d, int64_t *n, const dp_model_config *mc, const dp_model_cli *c,
                                dp_seed seed) {
    if (!c->seen_data) {
        DP_TRY(dp_dataset_generate(d, mc, *n, seed));
        return DP_OK;
    }
    DP_TRY(dp_dataset_load(d, mc, c->data));
    if (c->seen_n && d->n != c->n) {
        int64_t have = d->n;
        dp_dataset_free(d);
        return dp_error(DP_ERR_INVALID, "--dataset-size %lld but %s holds %lld examples", (long long)c->n, c->data,
                        (long long)have);
    }
    *n = d->n;
    return DP_OK;
}

dp_status dp_model_cli_mem_check(const dp_model_cli *c, double need, const char *what) {
    return dp_mem_check(need, what, c->seen_max_memory ? c->max_memory : NULL);
}
