/* attacks/mia_eval.c — attack scores (leave-one-out over the R models), statistics, the
 * checks (non-DP leak, DP hypothesis-testing bound) and the whole run (docs/audits.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/mia.h"
#include "common/alloc.h"
#include "common/safetensors.h"

dp_status mia_train_all(double *loss, double *acc, unsigned char *in, double *sigma_out, double *eps_out,
                        mia_run_kind *kind_out, int *nruns_out, double *seconds, const mia_config *c);

/* Logit-scaled confidence of the true label, phi = log(p / (1 - p)), p = exp(-loss). */
static double logit_conf(double loss) {
    double om = -expm1(-loss); /* 1 - p */
    if (!(om > 0)) om = 1e-300;
    return -loss - log(om);
}

/* Shadow s serves target t on example x: s != t, and of the shadows on x's majority side
 * (R/2 of them, since the target took one from the other side) the one of highest index is
 * left out, so every example has exactly R/2 - 1 IN and R/2 - 1 OUT shadows whichever side
 * the target is on (unequal counts would bias the online score against members). */
static int use(const unsigned char *in, int64_t s, int64_t t, int64_t x, int64_t R, int64_t P) {
    if (s == t) return 0;
    int side = in[s * P + x];
    if (side == in[t * P + x]) return 1;
    for (int64_t u = R - 1; u >= 0; u--)
        if (u != t && in[u * P + x] == side) return u != s;
    return 1;
}

dp_status mia_scores(double *const *neg, double *const *pos, const double *loss, const unsigned char *in,
                     int64_t models, int64_t pop) {
    int64_t R = models, P = pop, kn = 0, kp = 0;
    double *mi = dp_malloc((size_t)P * sizeof *mi), *mo = dp_malloc((size_t)P * sizeof *mo);
    if (!mi || !mo) { dp_free(mi); dp_free(mo); return DP_ERR_NOMEM; }
    for (int64_t t = 0; t < R; t++) {
        /* per-example IN/OUT means over the shadows s != t, pooled variances */
        double si = 0, so = 0;
        int64_t ci = 0, co = 0, ki = 0, ko = 0;
        for (int64_t x = 0; x < P; x++) {
            double a = 0, b = 0;
            int64_t na = 0, nb = 0;
            for (int64_t s = 0; s < R; s++) {
                if (!use(in, s, t, x, R, P)) continue;
                double f = logit_conf(loss[s * P + x]);
                if (in[s * P + x]) { a += f; na++; } else { b += f; nb++; }
            }
            mi[x] = na ? a / (double)na : NAN;
            mo[x] = nb ? b / (double)nb : NAN;
            for (int64_t s = 0; s < R; s++) {
                if (!use(in, s, t, x, R, P)) continue;
                double f = logit_conf(loss[s * P + x]);
                if (in[s * P + x]) { si += (f - mi[x]) * (f - mi[x]); ci++; } else { so += (f - mo[x]) * (f - mo[x]); co++; }
            }
            ki += na > 0;
            ko += nb > 0;
        }
        double sdi = (ci - ki > 0 && si > 0) ? sqrt(si / (double)(ci - ki)) : 1.0;
        double sdo = (co - ko > 0 && so > 0) ? sqrt(so / (double)(co - ko)) : 1.0;
        for (int64_t x = 0; x < P; x++) {
            double l = loss[t * P + x], f = logit_conf(l);
            double muo = isfinite(mo[x]) ? mo[x] : 0.0, mui = isfinite(mi[x]) ? mi[x] : muo;
            double sc[MIA_NATTACKS];
            sc[MIA_ATTACK_LOSS] = -l;
            sc[MIA_ATTACK_LIRA_OFFLINE] = (f - muo) / sdo;
            sc[MIA_ATTACK_LIRA_ONLINE] = (-(f - mui) * (f - mui) / (2 * sdi * sdi) - log(sdi)) -
                                         (-(f - muo) * (f - muo) / (2 * sdo * sdo) - log(sdo));
            for (int a = 0; a < MIA_NATTACKS; a++) {
                if (in[t * P + x]) pos[a][kp] = sc[a]; else neg[a][kn] = sc[a];
            }
            if (in[t * P + x]) kp++; else kn++;
        }
    }
    dp_free(mi);
    dp_free(mo);
    return DP_OK;
}

dp_status mia_attack_stats(mia_attack_result *a, double *neg, size_t n_neg, double *pos, size_t n_pos, double eps,
                           double delta, double confidence) {
    memset(a, 0, sizeof *a);
    DP_TRY(audit_roc(a->roc_fpr, a->roc_tpr, &a->roc_n, AUDIT_ROC_POINTS, &a->auc, neg, n_neg, pos, n_pos));
    a->auc_se = audit_auc_se(a->auc, n_neg, n_pos);
    double z = audit_phi_inv(1.0 - (1.0 - confidence) / 2);
    a->auc_lo = a->auc - z * a->auc_se;
    a->auc_hi = a->auc + z * a->auc_se;
    /* Bonferroni over the attacks and FPR targets of a run: each test at (1 - conf) / 6 */
    double alpha = (1.0 - confidence) / (MIA_NATTACKS * MIA_NFPR);
    for (int k = 0; k < MIA_NFPR; k++) {
        mia_fpr_point *p = &a->at[k];
        audit_tpr_at_fpr(&p->t, neg, n_neg, pos, n_pos, mia_fpr_targets[k], alpha);
        p->tpr_lo = 1.0 - p->t.fnr_hi;
        p->tpr_hi = 1.0 - p->t.fnr_lo;
        p->fpr_hi = p->t.fpr_hi;
        p->bound = isfinite(eps) ? exp(eps) * p->fpr_hi + delta : INFINITY;
        p->violated = p->tpr_lo > p->bound;
    }
    return DP_OK;
}

static void judge(mia_run_result *rr, const mia_config *c) {
    if (rr->kind == MIA_RUN_NONDP) {
        /* leak check: the best attack's AUC lower bound at alpha / 3 (Bonferroni) above 0.5 */
        double z = audit_phi_inv(1.0 - c->alpha / MIA_NATTACKS), best = -1;
        int ba = 0;
        for (int a = 0; a < MIA_NATTACKS; a++) {
            double lo = rr->a[a].auc - z * rr->a[a].auc_se;
            if (lo > best) { best = lo; ba = a; }
        }
        rr->verdict = best > 0.5 ? AUDIT_PASS : AUDIT_INVALID;
        snprintf(rr->message, sizeof rr->message,
                 "non-DP control %s: best attack %s, AUC %.4f, lower bound %.4f at alpha %g %s 0.5%s",
                 best > 0.5 ? "leaks" : "does not leak", mia_attack_names[ba], rr->a[ba].auc, best, c->alpha,
                 best > 0.5 ? ">" : "<=", best > 0.5 ? "" : ": the attacks are too weak to say anything (INVALID)");
        return;
    }
    rr->verdict = AUDIT_PASS;
    snprintf(rr->message, sizeof rr->message, "every TPR lower bound <= e^eps FPR_hi + delta (eps %.4f)", rr->eps);
    for (int a = 0; a < MIA_NATTACKS; a++)
        for (int k = 0; k < MIA_NFPR; k++) {
            const mia_fpr_point *p = &rr->a[a].at[k];
            if (!p->violated || rr->verdict == AUDIT_FAIL) continue;
            rr->verdict = AUDIT_FAIL;
            snprintf(rr->message, sizeof rr->message,
                     "%s at FPR %g: TPR >= %.4g > e^%.4f * FPR_hi %.4g + delta %g = %.4g (the hypothesis-testing bound "
                     "of (eps, delta)-DP)",
                     mia_attack_names[a], mia_fpr_targets[k], p->tpr_lo, rr->eps, p->fpr_hi, c->delta, p->bound);
        }
}

/* --signals FILE (docs/audits.md "Signals"): loss [runs, R, P] F64 (model r of run k on
 * example x), member [R, P] I32 (the membership bits, the same for every run), and metadata
 * naming each run and its accountant epsilon. */
static dp_status write_signals(const mia_config *c, const double *loss, const unsigned char *in,
                               const mia_run_kind *kind, const double *eps, int nruns) {
    int64_t R = c->models, P = c->pop;
    int32_t *mem = dp_malloc((size_t)(R * P) * sizeof *mem);
    if (!mem) return DP_ERR_NOMEM;
    for (int64_t i = 0; i < R * P; i++) mem[i] = in[i];
    dp_tensor_set s;
    dp_tset_init(&s);
    char runs[1024] = "", one[64];
    for (int k = 0; k < nruns; k++) {
        snprintf(one, sizeof one, "%s%s:%.17g", k ? ";" : "",
                 kind[k] == MIA_RUN_NONDP ? "non-dp" : kind[k] == MIA_RUN_DPSGD ? "dp-sgd" : "dp-zo", eps[k]);
        strncat(runs, one, sizeof runs - strlen(runs) - 1);
    }
    int64_t ls[3] = {nruns, R, P}, ms[2] = {R, P};
    dp_status st = dp_tset_add_f64(&s, "loss", loss, 3, ls);
    if (st == DP_OK) st = dp_tset_add_raw(&s, "member", DP_I32, mem, 2, ms);
    if (st == DP_OK) st = dp_tset_set_meta(&s, "format", "dpcert-mia-signals/1");
    if (st == DP_OK) st = dp_tset_set_meta(&s, "runs", runs);
    if (st == DP_OK) st = dp_st_write(c->signals, &s);
    dp_tset_free(&s);
    dp_free(mem);
    return st;
}

dp_status mia_run_all(mia_result *res, const mia_config *c) {
    memset(res, 0, sizeof *res);
    DP_TRY(mia_config_check(c));
    int64_t R = c->models, P = c->pop, nmax = MIA_MAX_EPS + 2;
    size_t half = (size_t)(R * P / 2);
    double *loss = dp_malloc((size_t)(nmax * R * P) * sizeof *loss), *acc = dp_calloc((size_t)(nmax * R), sizeof *acc);
    unsigned char *in = dp_malloc((size_t)(R * P));
    double *neg[MIA_NATTACKS] = {0}, *pos[MIA_NATTACKS] = {0};
    double sigma[MIA_MAX_EPS + 2], eps[MIA_MAX_EPS + 2];
    mia_run_kind kind[MIA_MAX_EPS + 2];
    dp_status st = (loss && acc && in) ? DP_OK : DP_ERR_NOMEM;
    for (int a = 0; st == DP_OK && a < MIA_NATTACKS; a++) {
        neg[a] = dp_malloc(half * sizeof **neg);
        pos[a] = dp_malloc(half * sizeof **pos);
        if (!neg[a] || !pos[a]) st = DP_ERR_NOMEM;
    }
    if (st == DP_OK) st = mia_train_all(loss, acc, in, sigma, eps, kind, &res->nruns, &res->seconds, c);
    if (st == DP_OK && c->signals) st = write_signals(c, loss, in, kind, eps, res->nruns);
    for (int k = 0; st == DP_OK && k < res->nruns; k++) {
        mia_run_result *rr = &res->run[k];
        rr->kind = kind[k];
        rr->sigma = sigma[k];
        rr->eps = eps[k];
        rr->eps_target = INFINITY;
        if (kind[k] == MIA_RUN_DPSGD) rr->eps_target = c->eps[k - 1];
        for (int j = 0; kind[k] == MIA_RUN_DPZO && j < c->neps; j++)
            if (j == 0 || c->eps[j] > rr->eps_target) rr->eps_target = c->eps[j];
        double s = 0;
        for (int64_t r = 0; r < R; r++) s += acc[k * R + r];
        rr->train_acc = s / (double)R;
        st = mia_scores(neg, pos, loss + k * R * P, in, R, P);
        for (int a = 0; st == DP_OK && a < MIA_NATTACKS; a++)
            st = mia_attack_stats(&rr->a[a], neg[a], half, pos[a], half, rr->eps, c->delta, c->confidence);
        double z3 = audit_phi_inv(1.0 - MIA_HALF_ALPHA / 2);
        rr->auc_near_half = 1;
        for (int a = 0; a < MIA_NATTACKS; a++)
            rr->auc_near_half &= fabs(rr->a[a].auc - 0.5) <= z3 * rr->a[a].auc_se;
        if (st == DP_OK) judge(rr, c);
    }
    if (st == DP_OK) {
        res->models_per_s = res->seconds > 0 ? (double)(res->nruns * R) / res->seconds : 0;
        res->verdict = res->run[0].verdict == AUDIT_INVALID ? AUDIT_INVALID : AUDIT_PASS;
        snprintf(res->message, sizeof res->message, "%s", res->run[0].message);
        for (int k = 1; res->verdict == AUDIT_PASS && k < res->nruns; k++)
            if (res->run[k].verdict == AUDIT_FAIL) {
                res->verdict = AUDIT_FAIL;
                snprintf(res->message, sizeof res->message, "run %d (%s, eps %.4g): %s", k,
                         res->run[k].kind == MIA_RUN_DPZO ? "DP-ZO" : "DP-SGD", res->run[k].eps, res->run[k].message);
            }
    }
    for (int a = 0; a < MIA_NATTACKS; a++) { dp_free(neg[a]); dp_free(pos[a]); }
    dp_free(loss); dp_free(acc); dp_free(in);
    return st;
}
