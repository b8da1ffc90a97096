/* optimized/host/host_gemm_kern.h — the GEMM driver (packing, blocking, write-back),
 * written once and instantiated by host_gemm.c for double and float:
 *     #define R double / float     the element type
 *     #define GK(name) name##_f64  the instance suffix
 *     GK(ukr_avx2)                 the AVX2 micro-kernel of that type (defined before)
 * Blocking (host_gemm.c): a macro-tile is HG_MC rows x HG_NC columns of one batch
 * entry's C; K is cut into HG_KC slices whose partial accumulators are kept in the
 * tile's accumulator buffer between slices (stored and reloaded exactly), so each
 * C element still sees one accumulator over k = 0..K-1 in order. */

/* acc[r][c] += a[k][r] * b[k][c] over k in order: a rounded product, then a rounded add;
 * first = 1 starts from acc = 0 (the first K slice) instead of loading acc */
typedef void (*GK(ukr_fn))(int64_t kc, const R *a, const R *b, R *acc, int first);

static void GK(ukr_generic)(int64_t kc, const R *restrict a, const R *restrict b, R *restrict acc, int first) {
    R c[HG_MR][GK(NR)];
    if (first) memset(c, 0, sizeof c);
    else memcpy(c, acc, sizeof c);
    for (int64_t k = 0; k < kc; k++) {
        for (int r = 0; r < HG_MR; r++) {
            R ar = a[k * HG_MR + r];
            for (int j = 0; j < GK(NR); j++) {
                R prod = ar * b[k * GK(NR) + j];
                c[r][j] = c[r][j] + prod;
            }
        }
    }
    memcpy(acc, c, sizeof c);
}

/* Ap: ceil(mc/MR) panels, panel q = rows i0 + q MR .. + MR, stored [k][r]; rows past
 * the matrix are 0 (their accumulators are never written back). Full panels copy with
 * constant-length inner loops (vectorised, no memmove call per k). */
static void GK(pack_a)(R *restrict Ap, const opt_hgemm_problem *p, const R *A, int64_t i0, int64_t mc, int64_t k0,
                       int64_t kc) {
    const R *ks = p->kscale;
    const int64_t lda = p->lda ? p->lda : (p->ta ? p->M : p->K);
    int64_t panels = (mc + HG_MR - 1) / HG_MR;
    for (int64_t q = 0; q < panels; q++) {
        R *dst = Ap + q * HG_MR * kc;
        int64_t rn = mc - q * HG_MR < HG_MR ? mc - q * HG_MR : HG_MR, ib = i0 + q * HG_MR;
        if (p->ta) { /* op(A) rows are columns of A: read k-major, contiguous in r */
            for (int64_t k = 0; k < kc; k++) {
                const R *src = A + (k0 + k) * lda + ib;
                R *d = dst + k * HG_MR, f = ks ? ks[(k0 + k) / p->kdiv] : 0;
                int r = 0;
                if (rn == HG_MR) {
                    if (ks) for (r = 0; r < HG_MR; r++) d[r] = f * src[r];
                    else memcpy(d, src, sizeof(R) * HG_MR);
                    continue;
                }
                if (ks) for (; r < rn; r++) d[r] = f * src[r];
                else for (; r < rn; r++) d[r] = src[r];
                for (; r < HG_MR; r++) d[r] = 0;
            }
            continue;
        }
        if (rn == HG_MR) { /* MR row streams, written contiguously */
            const R *s[HG_MR];
            for (int r = 0; r < HG_MR; r++) s[r] = A + (ib + r) * lda + k0;
            if (ks)
                for (int64_t k = 0; k < kc; k++) {
                    R f = ks[(k0 + k) / p->kdiv];
                    for (int r = 0; r < HG_MR; r++) dst[k * HG_MR + r] = f * s[r][k];
                }
            else
                for (int64_t k = 0; k < kc; k++)
                    for (int r = 0; r < HG_MR; r++) dst[k * HG_MR + r] = s[r][k];
            continue;
        }
        for (int r = 0; r < HG_MR; r++) {
            if (r >= rn) {
                for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = 0;
                continue;
            }
            const R *src = A + (ib + r) * lda + k0;
            if (ks) for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = ks[(k0 + k) / p->kdiv] * src[k];
            else for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = src[k];
        }
    }
}

/* Bp: ceil(nc/NR) panels, panel q = columns j0 + q NR .. + NR, stored [k][c]; columns
 * past the matrix are 0. */
static void GK(pack_b)(R *restrict Bp, const opt_hgemm_problem *p, const R *B, int64_t j0, int64_t nc, int64_t k0,
                       int64_t kc) {
    const int64_t ldb = p->ldb ? p->ldb : (p->tb ? p->K : p->N);
    int64_t panels = (nc + GK(NR) - 1) / GK(NR);
    for (int64_t q = 0; q < panels; q++) {
        R *dst = Bp + q * GK(NR) * kc;
        int64_t jn = nc - q * GK(NR) < GK(NR) ? nc - q * GK(NR) : GK(NR);
        int64_t jb = j0 + q * GK(NR);
        if (!p->tb) {
            for (int64_t k = 0; k < kc; k++) {
                const R *src = B + (k0 + k) * ldb + jb;
                R *d = dst + k * GK(NR);
                if (jn == GK(NR)) { memcpy(d, src, sizeof(R) * GK(NR)); continue; }
                int64_t c = 0;
                for (; c < jn; c++) d[c] = src[c];
                for (; c < GK(NR); c++) d[c] = 0;
            }
        } else if (jn == GK(NR)) { /* NR row streams, written contiguously */
            const R *s[GK(NR)];
            for (int c = 0; c < GK(NR); c++) s[c] = B + (jb + c) * ldb + k0;
            for (int64_t k = 0; k < kc; k++)
                for (int c = 0; c < GK(NR); c++) dst[k * GK(NR) + c] = s[c][k];
        } else {
            for (int64_t c = 0; c < GK(NR); c++) {
                if (c >= jn) { for (int64_t k = 0; k < kc; k++) dst[k * GK(NR) + c] = 0; continue; }
                const R *src = B + (jb + c) * ldb + k0;
                for (int64_t k = 0; k < kc; k++) dst[k * GK(NR) + c] = src[k];
            }
        }
    }
}

static GK(ukr_fn) GK(pick_ukr)(opt_hgemm_isa isa) {
    if (isa == OPT_HGEMM_ISA_AUTO) isa = opt_hgemm_isa_best();
    if (isa == OPT_HGEMM_ISA_AVX2 && opt_hgemm_isa_best() == OPT_HGEMM_ISA_AVX2) return GK(ukr_avx2);
    return GK(ukr_generic);
}

/* C[i, j0 + c] for c < nc from the accumulator row accr (micro-tile rows of NR) */
static void GK(write_row)(R *Ci, const R *accr, int64_t nc, R alpha, R beta) {
    for (int64_t jr = 0; jr * GK(NR) < nc; jr++) {
        const R *a = accr + jr * HG_MR * GK(NR);
        R *c = Ci + jr * GK(NR);
        int64_t n = nc - jr * GK(NR) < GK(NR) ? nc - jr * GK(NR) : GK(NR);
        if (beta == 0 && n == GK(NR)) for (int j = 0; j < GK(NR); j++) c[j] = alpha * a[j];
        else if (beta == 0) for (int64_t j = 0; j < n; j++) c[j] = alpha * a[j];
        else for (int64_t j = 0; j < n; j++) { R v = alpha * a[j]; c[j] = v + beta * c[j]; }
    }
}

/* One micro-panel (rows ri..ri+MR-1) over the K slice [k0, k0 + kc) of a triangular
 * problem, accumulators already holding the earlier slices (zero at the start): the k
 * where all MR rows take part run on the micro-kernel; the at most MR - 1 k where only
 * some do run row by row (opt_hgemm_axpy: the same rounded product and add per lane);
 * a row never sees a k outside its triangle. Every row's k stay in increasing order. */
static void GK(tri_panel)(GK(ukr_fn) ukr, opt_hgemm_tri tri, int64_t ri, int64_t k0, int64_t kc, const R *a,
                          const R *b, R *acc) {
    const int64_t ke = k0 + kc;
    /* lower: all rows for k <= ri, some for ri < k < ri + MR; upper: some for ri <= k <
     * ri + MR - 1, all from ri + MR - 1 on */
    int64_t fb = tri == OPT_HGEMM_TRI_LOWER ? k0 : ri + HG_MR - 1, fe = tri == OPT_HGEMM_TRI_LOWER ? ri + 1 : ke;
    int64_t mb = tri == OPT_HGEMM_TRI_LOWER ? ri + 1 : ri, me = tri == OPT_HGEMM_TRI_LOWER ? ri + HG_MR : ri + HG_MR - 1;
    if (fb < k0) fb = k0;
    if (fe > ke) fe = ke;
    if (mb < k0) mb = k0;
    if (me > ke) me = ke;
    if (tri == OPT_HGEMM_TRI_LOWER && fb < fe) ukr(fe - fb, a + (fb - k0) * HG_MR, b + (fb - k0) * GK(NR), acc, 0);
    for (int64_t k = mb; k < me; k++)
        for (int r = 0; r < HG_MR; r++)
            if (tri == OPT_HGEMM_TRI_LOWER ? k <= ri + r : k >= ri + r)
                GK(opt_hgemm_axpy)(acc + r * GK(NR), a[(k - k0) * HG_MR + r], b + (k - k0) * GK(NR), GK(NR));
    if (tri == OPT_HGEMM_TRI_UPPER && fb < fe) ukr(fe - fb, a + (fb - k0) * HG_MR, b + (fb - k0) * GK(NR), acc, 0);
}

void GK(opt_hgemm_run)(const opt_hgemm_problem *p, int64_t lo, int64_t hi, void *ws) {
    const int64_t mt = (p->M + HG_MC - 1) / HG_MC, nt = (p->N + HG_NC - 1) / HG_NC;
    const int64_t ldc = p->ldc ? p->ldc : p->N;
    GK(ukr_fn) ukr = GK(pick_ukr)(p->isa);
    R *Ap = ws, *Bp = Ap + HG_MC * HG_KC, *acc = Bp + HG_NC * HG_KC;
    const R alpha = (R)p->alpha, beta = (R)p->beta;
    for (int64_t t = lo; t < hi; t++) {
        int64_t b = t / (mt * nt), ic = (t / nt) % mt, jc = t % nt;
        int64_t i0 = ic * HG_MC, j0 = jc * HG_NC;
        int64_t mc = p->M - i0 < HG_MC ? p->M - i0 : HG_MC, nc = p->N - j0 < HG_NC ? p->N - j0 : HG_NC;
        if (p->sym && j0 > i0 + mc - 1) continue; /* strictly above the diagonal: mirrored */
        const R *A = (const R *)p->A + b * p->sA, *B = (const R *)p->B + b * p->sB;
        R *C = (R *)p->C + b * p->sC;
        /* accumulator micro-tile (ir, jr) at acc + (ir njr + jr) MR NR, row-major MR x NR */
        int64_t nir = (mc + HG_MR - 1) / HG_MR, njr = (nc + GK(NR) - 1) / GK(NR);
        if (p->K == 0 || p->tri) memset(acc, 0, sizeof(R) * (size_t)(nir * njr * HG_MR * GK(NR)));
        for (int64_t k0 = 0; k0 < p->K; k0 += HG_KC) {
            int64_t kc = p->K - k0 < HG_KC ? p->K - k0 : HG_KC;
            GK(pack_a)(Ap, p, A, i0, mc, k0, kc);
            GK(pack_b)(Bp, p, B, j0, nc, k0, kc);
            for (int64_t jr = 0; jr < njr; jr++)
                for (int64_t ir = 0; ir < nir; ir++) {
                    if (p->sym && j0 + jr * GK(NR) > i0 + ir * HG_MR + HG_MR - 1) continue;
                    if (p->tri) {
                        GK(tri_panel)(ukr, p->tri, i0 + ir * HG_MR, k0, kc, Ap + ir * HG_MR * kc, Bp + jr * GK(NR) * kc,
                                      acc + (ir * njr + jr) * HG_MR * GK(NR));
                        continue;
                    }
                    ukr(kc, Ap + ir * HG_MR * kc, Bp + jr * GK(NR) * kc, acc + (ir * njr + jr) * HG_MR * GK(NR),
                        k0 == 0);
                }
        }
        for (int64_t ir = 0; ir < nir; ir++)
            for (int r = 0; r < HG_MR && ir * HG_MR + r < mc; r++) {
                int64_t i = i0 + ir * HG_MR + r;
                const R *accr = acc + ir * njr * HG_MR * GK(NR) + r * GK(NR);
                if (!p->sym) { GK(write_row)(C + i * ldc + j0, accr, nc, alpha, beta); continue; }
                for (int64_t j = j0; j < j0 + nc && j <= i; j++) {
                    int64_t jj = j - j0;
                    R v = alpha * accr[(jj / GK(NR)) * HG_MR * GK(NR) + jj % GK(NR)];
                    C[i * ldc + j] = v;
                    C[j * ldc + i] = v;
                }
            }
    }
}
