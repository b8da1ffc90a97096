/* optimized/host/host_gemm_kern.h — the GEMM driver (packing, blocking, write-back),
 * written once and instantiated by host_gemm.c for double and float:
 *     #define R double / float     the element type
 *     #define GK(name) name##_f64  the instance suffix
 *     GK(ukr_avx2)                 the AVX2 micro-kernel of that type (defined before)
 * Blocking (host_gemm.c): a macro-tile is HG_MC rows x HG_NC columns of one batch
 * entry's C; K is cut into HG_KC slices whose partial accumulators are kept in the
 * tile's accumulator buffer between slices (stored and reloaded exactly), so each
 * C element still sees one accumulator over k = 0..K-1 in order. */

typedef void (*GK(ukr_fn))(int64_t kc, const R *a, const R *b, R *acc);

/* acc[r][c] += a[k][r] * b[k][c] over k in order: a rounded product, then a rounded add */
static void GK(ukr_generic)(int64_t kc, const R *restrict a, const R *restrict b, R *restrict acc) {
    R c[HG_MR][GK(NR)];
    memcpy(c, acc, sizeof c);
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
 * the matrix are 0 (their accumulators are never written back). */
static void GK(pack_a)(R *restrict Ap, const opt_hgemm_problem *p, const R *A, int64_t i0, int64_t mc, int64_t k0,
                       int64_t kc) {
    const R *ks = p->kscale;
    int64_t panels = (mc + HG_MR - 1) / HG_MR;
    for (int64_t q = 0; q < panels; q++) {
        R *dst = Ap + q * HG_MR * kc;
        for (int r = 0; r < HG_MR; r++) {
            int64_t i = i0 + q * HG_MR + r;
            if (q * HG_MR + r >= mc) {
                for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = 0;
                continue;
            }
            if (!p->ta) {
                const R *src = A + i * p->K + k0;
                if (ks) for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = ks[(k0 + k) / p->kdiv] * src[k];
                else for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = src[k];
            } else {
                const R *src = A + k0 * p->M + i;
                if (ks) for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = ks[(k0 + k) / p->kdiv] * src[k * p->M];
                else for (int64_t k = 0; k < kc; k++) dst[k * HG_MR + r] = src[k * p->M];
            }
        }
    }
}

/* Bp: ceil(nc/NR) panels, panel q = columns j0 + q NR .. + NR, stored [k][c]; columns
 * past the matrix are 0. */
static void GK(pack_b)(R *restrict Bp, const opt_hgemm_problem *p, const R *B, int64_t j0, int64_t nc, int64_t k0,
                       int64_t kc) {
    int64_t panels = (nc + GK(NR) - 1) / GK(NR);
    for (int64_t q = 0; q < panels; q++) {
        R *dst = Bp + q * GK(NR) * kc;
        int64_t jn = nc - q * GK(NR) < GK(NR) ? nc - q * GK(NR) : GK(NR);
        int64_t jb = j0 + q * GK(NR);
        if (!p->tb) {
            for (int64_t k = 0; k < kc; k++) {
                const R *src = B + (k0 + k) * p->N + jb;
                R *d = dst + k * GK(NR);
                int64_t c = 0;
                for (; c < jn; c++) d[c] = src[c];
                for (; c < GK(NR); c++) d[c] = 0;
            }
        } else {
            for (int64_t c = 0; c < GK(NR); c++) {
                if (c >= jn) { for (int64_t k = 0; k < kc; k++) dst[k * GK(NR) + c] = 0; continue; }
                const R *src = B + (jb + c) * p->K + k0;
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

void GK(opt_hgemm_run)(const opt_hgemm_problem *p, int64_t lo, int64_t hi, void *ws) {
    const int64_t mt = (p->M + HG_MC - 1) / HG_MC, nt = (p->N + HG_NC - 1) / HG_NC;
    GK(ukr_fn) ukr = GK(pick_ukr)(p->isa);
    R *Ap = ws, *Bp = Ap + HG_MC * HG_KC, *acc = Bp + HG_NC * HG_KC;
    const R alpha = (R)p->alpha, beta = (R)p->beta;
    const int64_t njr = HG_NC / GK(NR);
    for (int64_t t = lo; t < hi; t++) {
        int64_t b = t / (mt * nt), ic = (t / nt) % mt, jc = t % nt;
        int64_t i0 = ic * HG_MC, j0 = jc * HG_NC;
        int64_t mc = p->M - i0 < HG_MC ? p->M - i0 : HG_MC, nc = p->N - j0 < HG_NC ? p->N - j0 : HG_NC;
        if (p->sym && j0 > i0 + mc - 1) continue; /* strictly above the diagonal: mirrored */
        const R *A = (const R *)p->A + b * p->sA, *B = (const R *)p->B + b * p->sB;
        R *C = (R *)p->C + b * p->sC;
        int64_t nir = (mc + HG_MR - 1) / HG_MR, njrr = (nc + GK(NR) - 1) / GK(NR);
        memset(acc, 0, sizeof(R) * HG_MC * HG_NC);
        for (int64_t k0 = 0; k0 < p->K; k0 += HG_KC) {
            int64_t kc = p->K - k0 < HG_KC ? p->K - k0 : HG_KC;
            GK(pack_a)(Ap, p, A, i0, mc, k0, kc);
            GK(pack_b)(Bp, p, B, j0, nc, k0, kc);
            for (int64_t jr = 0; jr < njrr; jr++)
                for (int64_t ir = 0; ir < nir; ir++) {
                    if (p->sym && j0 + jr * GK(NR) > i0 + ir * HG_MR + HG_MR - 1) continue;
                    ukr(kc, Ap + ir * HG_MR * kc, Bp + jr * GK(NR) * kc, acc + (ir * njr + jr) * HG_MR * GK(NR));
                }
        }
        for (int64_t ir = 0; ir < nir; ir++)
            for (int r = 0; r < HG_MR && ir * HG_MR + r < mc; r++) {
                int64_t i = i0 + ir * HG_MR + r;
                for (int64_t j = j0; j < j0 + nc; j++) {
                    if (p->sym && j > i) break;
                    int64_t jj = j - j0;
                    R v = alpha * acc[((ir * njr + jj / GK(NR)) * HG_MR + r) * GK(NR) + jj % GK(NR)];
                    if (p->sym) { C[i * p->N + j] = v; C[j * p->N + i] = v; continue; }
                    C[i * p->N + j] = beta == 0 ? v : v + beta * C[i * p->N + j];
                }
            }
    }
}
