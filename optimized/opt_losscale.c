/* optimized/opt_losscale.c — the engine's loss scaling (docs/precision.md "Loss
 * scaling"): --loss-scale parsing, the clipping/export scales, step 5 (unscale before the
 * noise) and the dynamic scaler. The engine's own implementation: the losscale check
 * (conformance/losscale*.c) judges it from its exports. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "optimized/shard.h"

enum { OPT_LS_MAX_LOG2 = 127 };            /* the largest power of two finite in f32 */
#define OPT_LS_DYNAMIC_S0 65536.0          /* torch GradScaler's init_scale 2^16 */
#define OPT_LS_DYNAMIC_K 2000              /* and its growth_interval */

static dp_status scale_in_range(const char *what, double S) {
    if (S > ldexp(1.0, OPT_LS_MAX_LOG2))
        return dp_error(DP_ERR_INVALID, "%s: the loss scale must be at most 2^%d (got %g)", what, OPT_LS_MAX_LOG2, S);
    return DP_OK;
}

dp_status opt_loss_scale_parse(opt_loss_scale *out, const char *s) {
    memset(out, 0, sizeof *out);
    out->S = 1;
    if (!strcmp(s, "none")) return DP_OK;
    if (!strncmp(s, "static:", 7)) {
        out->mode = OPT_LS_STATIC;
        DP_TRY(dp_parse_pow2(&out->S, "--loss-scale static:S", s + 7));
        return scale_in_range("--loss-scale static:S", out->S);
    }
    if (!strcmp(s, "dynamic") || !strncmp(s, "dynamic:", 8)) {
        out->mode = OPT_LS_DYNAMIC;
        out->S = OPT_LS_DYNAMIC_S0;
        out->K = OPT_LS_DYNAMIC_K;
        if (!s[7]) return DP_OK;
        char buf[128];
        if (strlen(s + 8) >= sizeof buf) return dp_error(DP_ERR_INVALID, "--loss-scale: '%s' is too long", s);
        strcpy(buf, s + 8);
        char *k = strchr(buf, ':');
        if (k) *k++ = 0;
        DP_TRY(dp_parse_pow2(&out->S, "--loss-scale dynamic:S0", buf));
        DP_TRY(scale_in_range("--loss-scale dynamic:S0", out->S));
        if (k) {
            DP_TRY(dp_parse_i64(&out->K, "--loss-scale dynamic:S0:K", k));
            DP_TRY(dp_check_range("--loss-scale dynamic:S0:K", (double)out->K, 1, 1, 1e9, 1));
        }
        return DP_OK;
    }
    return dp_error(DP_ERR_USAGE, "--loss-scale: unknown '%s' (expected none, static:S or dynamic[:S0[:K]])", s);
}

dp_status opt_ls_init(opt_dpsgd *s) {
    const opt_loss_scale *ls = &s->o.ls;
    s->ls_S = ls->mode == OPT_LS_NONE ? 1 : ls->S;
    s->ls_used = s->ls_S;
    s->ls_good = 0;
    s->ls_skipped = 0;
    /* S C and S gamma must stay finite in the backend's type (an inf threshold would turn
     * clipping off): the largest admissible S, also the dynamic scaler's ceiling */
    double big = s->cfg.clip_fn == DP_CLIPFN_AUTOMATIC ? s->cfg.gamma : 0;
    for (int g = 0; g < s->groups.ngroups; g++) big = fmax(big, s->groups.thresh[g]);
    const double tmax = s->be->dtype == DP_F32 ? (double)FLT_MAX : DBL_MAX;
    s->ls_max = ldexp(1.0, OPT_LS_MAX_LOG2);
    while (s->ls_max > 1 && big * s->ls_max >= tmax) s->ls_max *= 0.5;
    if (s->ls_S > s->ls_max)
        return dp_error(DP_ERR_INVALID, "--loss-scale: S = %g times the clipping threshold %g overflows %s (S at most %g)",
                        s->ls_S, big, s->be->dtype == DP_F32 ? "f32" : "f64", s->ls_max);
    return DP_OK;
}

double opt_ls_clip_scale(const opt_dpsgd *s) { return s->hooks->clip_scale(s); }
double opt_ls_export_scale(const opt_dpsgd *s) { return s->hooks->export_scale(s); }

static dp_status dynamic_decide(int *skip, opt_dpsgd *s, const double *loss, const int *dropped, int64_t nl);

dp_status opt_ls_after_chunks(int *skip, opt_dpsgd *s, const double *loss, const int *dropped, int64_t nl) {
    *skip = 0;
    s->ls_skipped = 0;
    if (s->o.ls.mode == OPT_LS_NONE) return DP_OK;
    if (s->o.ls.mode == OPT_LS_DYNAMIC) DP_TRY(dynamic_decide(skip, s, loss, dropped, nl));
    /* step 5: the local clipped sums (flat's S part) / S, exact for a power of two (the
     * unscale seam of s->hooks) */
    return s->hooks->unscale(s, s->flat, s->zoff);
}

static dp_status dynamic_decide(int *skip, opt_dpsgd *s, const double *loss, const int *dropped, int64_t nl) {
    /* overflow: an example with a finite loss whose scaled gradient is not finite (the
     * engine drops it, docs/engine.md); decided on every DP rank alike */
    int mine = 0;
    for (int64_t b = 0; b < nl; b++) mine |= dropped[b] && isfinite(loss[b]);
    /* ... or the scaled clipped sum (up to B S C) overflowed */
    double *h = dp_malloc(sizeof(double) * (size_t)(s->zoff + 1));
    if (!h) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    dp_status st = OPT_CALL(s->be, download_f64, h, s->flat, s->zoff);
    for (int64_t i = 0; st == DP_OK && i < s->zoff; i++) mine |= !isfinite(h[i]);
    dp_free(h);
    DP_TRY(st);
    void *all = NULL;
    size_t len = 0;
    DP_TRY(OPT_CALL(s->be, allgatherv_bytes, &all, &len, &mine, sizeof mine));
    int any = 0;
    for (size_t i = 0; i + sizeof(int) <= len; i += sizeof(int)) {
        int v;
        memcpy(&v, (char *)all + i, sizeof v);
        any |= v;
    }
    dp_free(all);
    if (any) { /* halve and skip: the data-dependent release the losscale check FAILs */
        if (s->ls_S > 1) s->ls_S *= 0.5;
        s->ls_good = 0;
        *skip = s->ls_skipped = 1;
    } else if (++s->ls_good >= s->o.ls.K) {
        if (s->ls_S < s->ls_max) s->ls_S *= 2;
        s->ls_good = 0;
    }
    return DP_OK;
}

void opt_ls_describe(char *buf, size_t n, const opt_loss_scale *ls) {
    if (ls->mode == OPT_LS_NONE) snprintf(buf, n, "none");
    else if (ls->mode == OPT_LS_STATIC) snprintf(buf, n, "static:%.17g", ls->S);
    else snprintf(buf, n, "dynamic:%.17g:%lld", ls->S, (long long)ls->K);
}
