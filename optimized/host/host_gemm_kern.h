/* optimized/host/host_gemm_kern.h — the GEMM driver (packing, blocking, write-back),
 * written once and instantiated by host_gemm.c for every (element type, ISA):
 *     #define R double / float         the element type
 *     #define MR, NR                   the register block (rows x columns of C)
 *     #define GK(name) name##_f64_avx2 the instance suffix
 *     HG_UKR_CALL(kc, a, b, acc, first) the micro-kernel: acc[MR][NR] (+)= sum_k a[k][r] b[k][c]
 *     HG_TRANS4(d, ldd, s, kc)         d[k ldd + r] = s[r][k], 4 row streams, k < kc
 *     HG_TRANS2(d, ldd, s, kc)         the same for 2 row streams
 *     HG_WB(c, a, n, alpha, beta)      c[j] = alpha a[j] (+ beta c[j]), j < n
 *     HG_AXPY_ROW(y, a, x, n)          y[j] = y[j] + a x[j] (a rounded product, then add)
 * Blocking (host_gemm.c): a macro-tile is HG_MC (or HG_MC / 2, hg_mc) rows x HG_NC columns of one batch
 * entry's C; K is cut into HG_KC slices whose partial accumulators are kept in the
 * tile's accumulator buffer between slices (stored and reloaded exactly), so each C
 * element still sees one accumulator over k = 0..K-1 in order. Packing only copies values (or
 * forms book-keeping's exact products c_b op(A)[i,k]), so its vectorisation never
 * changes a result. */

/* d[k w + r] = src[r ld + k] for r < w (w = MR or NR, even), k < kc: the rows
 * transposed 4 at a time, then 2 */
static void GK(hg_trans_rows)(R *restrict d, int w, const R *src, int64_t ld, int64_t kc) {
    int g = 0;
    for (; g + 4 <= w; g += 4) {
        const R *s[4] = {src + g * ld, src + (g + 1) * ld, src + (g + 2) * ld, src + (g + 3) * ld};
        HG_TRANS4(d + g, w, s, kc);
    }
    for (; g + 2 <= w; g += 2) {
        const R *s[2] = {src + g * ld, src + (g + 1) * ld};
        HG_TRANS2(d + g, w, s, kc);
    }
}

/* Ap: ceil(mc/MR) panels, panel q = rows i0 + q MR .. + MR, stored [k][r]; rows past
 * the matrix are 0 (their accumulators are never written back). */
static void GK(hg_pack_a)(R *restrict Ap, const opt_hgemm_problem *p, const R *A, int64_t i0, int64_t mc, int64_t k0,
                          int64_t kc) {
    const R *ks = p->kscale;
    const int64_t lda = p->lda ? p->lda : (p->ta ? p->M : p->K);
    int64_t panels = (mc + MR - 1) / MR;
    for (int64_t q = 0; q < panels; q++) {
        R *dst = Ap + q * MR * kc;
        int64_t rn = mc - q * MR < MR ? mc - q * MR : MR, ib = i0 + q * MR;
        if (p->ta) { /* op(A) rows are columns of A: read k-major, contiguous in r */
            for (int64_t k = 0; k < kc; k++) {
                const R *src = A + (k0 + k) * lda + ib;
                R *d = dst + k * MR, f = ks ? ks[(k0 + k) / p->kdiv] : 0;
                int r = 0;
                if (rn == MR) { /* constant-length copies: a few vector moves */
                    if (ks) for (r = 0; r < MR; r++) d[r] = f * src[r];
                    else memcpy(d, src, sizeof(R) * MR);
                    continue;
                }
                if (ks) for (; r < rn; r++) d[r] = f * src[r];
                else for (; r < rn; r++) d[r] = src[r];
                for (; r < MR; r++) d[r] = 0;
            }
            continue;
        }
        if (rn == MR && !ks) { /* MR row streams, transposed 4 (then 2) rows at a time */
            GK(hg_trans_rows)(dst, MR, A + ib * lda + k0, lda, kc);
            continue;
        }
        for (int r = 0; r < MR; r++) {
            if (r >= rn) {
                for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = 0;
                continue;
            }
            const R *src = A + (ib + r) * lda + k0;
            if (ks) for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = ks[(k0 + k) / p->kdiv] * src[k];
            else for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = src[k];
        }
    }
}

/* Bp: ceil(nc/NR) panels, panel q = columns j0 + q NR .. + NR, stored [k][c]; columns
 * past the matrix are 0. */
static void GK(hg_pack_b)(R *restrict Bp, const opt_hgemm_problem *p, const R *B, int64_t j0, int64_t nc, int64_t k0,
                          int64_t kc) {
    const int64_t ldb = p->ldb ? p->ldb : (p->tb ? p->K : p->N);
    int64_t panels = (nc + NR - 1) / NR;
    for (int64_t q = 0; q < panels; q++) {
        R *dst = Bp + q * NR * kc;
        int64_t jn = nc - q * NR < NR ? nc - q * NR : NR;
        int64_t jb = j0 + q * NR;
        if (!p->tb) {
            for (int64_t k = 0; k < kc; k++) {
                const R *src = B + (k0 + k) * ldb + jb;
                R *d = dst + k * NR;
                if (jn == NR) { memcpy(d, src, sizeof(R) * NR); continue; }
                int64_t c = 0;
                for (; c < jn; c++) d[c] = src[c];
                for (; c < NR; c++) d[c] = 0;
            }
        } else if (jn == NR) { /* NR row streams, transposed 4 rows at a time */
            GK(hg_trans_rows)(dst, NR, B + jb * ldb + k0, ldb, kc);
        } else {
            for (int64_t c = 0; c < NR; c++) {
                if (c >= jn) { for (int64_t k = 0; k < kc; k++) dst[k * NR + c] = 0; continue; }
                const R *src = B + (jb + c) * ldb + k0;
                for (int64_t k = 0; k < kc; k++) dst[k * NR + c] = src[k];
            }
        }
    }
}

/* One micro-panel (rows ri..ri+MR-1) over the K slice [k0, k0 + kc) of a triangular
 * problem, accumulators already holding the earlier slices (zero at the start): the k
 * where all MR rows take part run on the micro-kernel; the at most MR - 1 k where only
 * some do run row by row (HG_AXPY_ROW: the same rounded product and add per lane);
 * a row never sees a k outside its triangle. Every row's k stay in increasing order. */
static void GK(hg_tri_panel)(opt_hgemm_tri tri, int64_t ri, int64_t k0, int64_t kc, const R *a, const R *b, R *acc) {
    const int64_t ke = k0 + kc;
    /* lower: all rows for k <= ri, some for ri < k < ri + MR; upper: some for ri <= k <
     * ri + MR - 1, all from ri + MR - 1 on */
    int64_t fb = tri == OPT_HGEMM_TRI_LOWER ? k0 : ri + MR - 1, fe = tri == OPT_HGEMM_TRI_LOWER ? ri + 1 : ke;
    int64_t mb = tri == OPT_HGEMM_TRI_LOWER ? ri + 1 : ri, me = tri == OPT_HGEMM_TRI_LOWER ? ri + MR : ri + MR - 1;
    if (fb < k0) fb = k0;
    if (fe > ke) fe = ke;
    if (mb < k0) mb = k0;
    if (me > ke) me = ke;
    if (tri == OPT_HGEMM_TRI_LOWER && fb < fe) HG_UKR_CALL(fe - fb, a + (fb - k0) * MR, b + (fb - k0) * NR, acc, 0);
    for (int64_t k = mb; k < me; k++)
        for (int r = 0; r < MR; r++)
            if (tri == OPT_HGEMM_TRI_LOWER ? k <= ri + r : k >= ri + r)
                HG_AXPY_ROW(acc + r * NR, a[(k - k0) * MR + r], b + (k - k0) * NR, NR);
    if (tri == OPT_HGEMM_TRI_UPPER && fb < fe) HG_UKR_CALL(fe - fb, a + (fb - k0) * MR, b + (fb - k0) * NR, acc, 0);
}

/* C rows [i, i + rows) x columns [j, j + n) = alpha acc (+ beta C) from a micro-tile */
static void GK(hg_write_tile)(R *C, int64_t ldc, const R *acc, int64_t rows, int64_t n, R alpha, R beta) {
    for (int64_t r = 0; r < rows; r++) HG_WB(C + r * ldc, acc + r * NR, n, alpha, beta);
}

static void GK(hg_run)(const opt_hgemm_problem *p, int64_t lo, int64_t hi, void *ws) {
    const int64_t MCt = hg_mc(p), mt = (p->M + MCt - 1) / MCt, nt = (p->N + HG_NC - 1) / HG_NC;
    const int64_t ldc = p->ldc ? p->ldc : p->N;
    R *Ap = ws, *Bp = Ap + HG_MC * HG_KC, *acc = Bp + HG_NC * HG_KC;
    const R alpha = (R)p->alpha, beta = (R)p->beta;
    int64_t packed = -1; /* with one K slice: the (b, jc) whose B block Bp holds */
    for (int64_t t = lo; t < hi; t++) {
        int64_t b = t / (mt * nt), jc = (t / mt) % nt, ic = t % mt; /* consecutive tiles share B */
        int64_t i0 = ic * MCt, j0 = jc * HG_NC;
        int64_t mc = p->M - i0 < MCt ? p->M - i0 : MCt, nc = p->N - j0 < HG_NC ? p->N - j0 : HG_NC;
        if (p->sym && j0 > i0 + mc - 1) continue; /* strictly above the diagonal: mirrored */
        const R *A = (const R *)p->A + b * p->sA, *B = (const R *)p->B + b * p->sB;
        R *C = (R *)p->C + b * p->sC;
        /* accumulator micro-tile (ir, jr) at acc + (ir njr + jr) MR NR, row-major MR x NR */
        int64_t nir = (mc + MR - 1) / MR, njr = (nc + NR - 1) / NR;
        if (p->K == 0 || p->tri) memset(acc, 0, sizeof(R) * (size_t)(nir * njr * MR * NR));
        for (int64_t k0 = 0; k0 < p->K; k0 += HG_KC) {
            int64_t kc = p->K - k0 < HG_KC ? p->K - k0 : HG_KC;
            GK(hg_pack_a)(Ap, p, A, i0, mc, k0, kc);
            if (p->K > HG_KC || packed != b * nt + jc) GK(hg_pack_b)(Bp, p, B, j0, nc, k0, kc);
            packed = p->K > HG_KC ? -1 : b * nt + jc;
            for (int64_t jr = 0; jr < njr; jr++)
                for (int64_t ir = 0; ir < nir; ir++) {
                    if (p->sym && j0 + jr * NR > i0 + ir * MR + MR - 1) continue;
                    R *at = acc + (ir * njr + jr) * MR * NR;
                    if (p->tri) GK(hg_tri_panel)(p->tri, i0 + ir * MR, k0, kc, Ap + ir * MR * kc, Bp + jr * NR * kc, at);
                    else HG_UKR_CALL(kc, Ap + ir * MR * kc, Bp + jr * NR * kc, at, k0 == 0);
                }
        }
        if (!p->sym) { /* C = alpha acc (+ beta C), vectorised along the rows */
            for (int64_t ir = 0; ir < nir; ir++)
                for (int64_t jr = 0; jr < njr; jr++) {
                    int64_t rows = mc - ir * MR < MR ? mc - ir * MR : MR, n = nc - jr * NR < NR ? nc - jr * NR : NR;
                    GK(hg_write_tile)(C + (i0 + ir * MR) * ldc + j0 + jr * NR, ldc, acc + (ir * njr + jr) * MR * NR,
                                      rows, n, alpha, beta);
                }
            continue;
        }
        for (int64_t ir = 0; ir < nir; ir++)
            for (int r = 0; r < MR && ir * MR + r < mc; r++) {
                int64_t i = i0 + ir * MR + r;
                const R *accr = acc + ir * njr * MR * NR + r * NR;
                for (int64_t j = j0; j < j0 + nc && j <= i; j++) {
                    int64_t jj = j - j0;
                    R v = alpha * accr[(jj / NR) * MR * NR + jj % NR];
                    C[i * ldc + j] = v;
                    C[j * ldc + i] = v;
                }
            }
    }
}
