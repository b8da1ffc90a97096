/* optimized/tests/test_cp_geom.c — the CP slice geometry (optimized/shard.h opt_cp_geom,
 * docs/longshield.md section 4 "Slice geometry") on every shape R x c with R, c in 1..9
 * (vectors: c = 1) and M = 1..5, both patterns, linear and non-linear parameters:
 *   - orientation: columns exactly for a linear W [P, d] with P < d under --cp-pattern
 *     output (ties and every other case: rows);
 *   - the M slices partition the tensor: every element is reached exactly once over the
 *     CP ranks, slice j's packed element u = k w + i is element e0 + k stride + i, and a
 *     column slice is W[:, floor(d j / M) : floor(d (j + 1) / M)] packed [P, w];
 *   - n_j <= the documented pmax (rows: ceil(R / M) c; columns: P ceil(d / M)) with
 *     equality for some j;
 *   - the runs of any packed sub-range [u0, u1) cover exactly u0..u1-1, in order, each
 *     mapped as the whole slice maps it (the zero1 ranges and the noise spans use them);
 *     runs are maximal within a segment (no empty run, none past a segment's end). */
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/shard.h"

/* The tensor element of packed element u of slice g by the definition. */
static int64_t elem_of(const opt_cp_geom *g, int64_t u) { return g->e0 + u / g->w * g->stride + u % g->w; }

static void check_ranges(const opt_cp_geom *g, int64_t n, const char *what) {
    for (int64_t u0 = 0; u0 <= n; u0++)
        for (int64_t u1 = u0; u1 <= n; u1++) {
            int64_t next = u0, u, e, len;
            int ok = 1;
            for (int64_t k = 0; opt_cp_geom_run(&u, &e, &len, g, u0, u1, k); k++) {
                ok &= u == next && len > 0 && u / g->w == (u + len - 1) / g->w;
                for (int64_t i = 0; ok && i < len; i++) ok &= e + i == elem_of(g, u + i);
                next = u + len;
                if (k > n) { ok = 0; break; }
            }
            ok &= next == u1;
            T_CHECK(ok, "%s: the runs of [%lld, %lld) do not cover it in order with the slice's mapping", what,
                    (long long)u0, (long long)u1);
            if (!ok) return;
        }
}

static void check_shape(int64_t R, int64_t c, int M, int output, opt_src_kind src) {
    int64_t numel = R * c, shape[1][2] = {{R, c > 1 ? c : 0}};
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    s.par.cp = M;
    s.o.cp_output = output;
    s.om.np = 1;
    s.om.numel = &numel;
    s.om.shape = shape;
    s.om.src = &src;
    char what[96];
    snprintf(what, sizeof what, "[%lld, %lld] M=%d %s src %d", (long long)R, (long long)c, M, output ? "output" : "input",
             (int)src);
    const int cols = output && src == OPT_SRC_LINEAR && R < c;
    T_CHECK(opt_cp_by_columns(&s, 0) == cols, "%s: orientation %d, want %d", what, opt_cp_by_columns(&s, 0), cols);
    const int64_t pmax = cols ? R * ((c + M - 1) / M) : (R + M - 1) / M * c;
    int *seen = calloc((size_t)numel, sizeof *seen);
    int64_t nmax = 0;
    for (int j = 0; j < M; j++) {
        opt_cp_geom g;
        opt_cp_geom_of(&g, &s, 0, j);
        const int64_t n = g.nseg * g.w;
        if (n > nmax) nmax = n;
        T_CHECK(g.cols == cols && n <= pmax, "%s j=%d: cols %d, n %lld > pmax %lld", what, j, g.cols, (long long)n,
                (long long)pmax);
        if (cols)
            T_CHECK(g.e0 == c * j / M && g.w == c * (j + 1) / M - c * j / M && g.nseg == R && g.stride == c,
                    "%s j=%d: column slice e0 %lld w %lld nseg %lld stride %lld", what, j, (long long)g.e0,
                    (long long)g.w, (long long)g.nseg, (long long)g.stride);
        else
            T_CHECK(g.e0 == R * j / M * c && g.w == (R * (j + 1) / M - R * j / M) * c && g.nseg == 1,
                    "%s j=%d: row slice e0 %lld w %lld nseg %lld", what, j, (long long)g.e0, (long long)g.w,
                    (long long)g.nseg);
        int64_t u, e, len;
        for (int64_t k = 0; opt_cp_geom_run(&u, &e, &len, &g, 0, n, k); k++)
            for (int64_t i = 0; i < len; i++)
                if (e + i >= 0 && e + i < numel) seen[e + i]++;
        if (n > 0) check_ranges(&g, n, what);
    }
    T_CHECK(nmax == pmax, "%s: largest slice %lld, pmax %lld", what, (long long)nmax, (long long)pmax);
    int64_t bad = 0;
    for (int64_t e = 0; e < numel; e++) bad += seen[e] != 1;
    T_CHECK(bad == 0, "%s: %lld elements not reached exactly once over the CP ranks", what, (long long)bad);
    free(seen);
}

int main(void) {
    static const opt_src_kind srcs[] = {OPT_SRC_LINEAR, OPT_SRC_DIRECT, OPT_SRC_BOTH};
    for (int64_t R = 1; R <= 9; R++)
        for (int64_t c = 1; c <= 9; c++)
            for (int M = 1; M <= 5; M++)
                for (int out = 0; out < 2; out++)
                    for (int k = 0; k < 3; k++) check_shape(R, c, M, out, srcs[k]);
    /* the llama's down [D, F] = [8, 12] at M = 2 under output: columns [0, 6) and [6, 12) */
    int64_t numel = 96, shape[1][2] = {{8, 12}};
    opt_src_kind src = OPT_SRC_LINEAR;
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    s.par.cp = 2; s.o.cp_output = 1; s.om.np = 1; s.om.numel = &numel; s.om.shape = shape; s.om.src = &src;
    opt_cp_geom g;
    opt_cp_geom_of(&g, &s, 0, 1);
    T_CHECK(g.cols && g.e0 == 6 && g.w == 6 && g.nseg == 8 && g.stride == 12 && elem_of(&g, 13) == 2 * 12 + 6 + 1,
            "down [8, 12] M=2 rank 1: cols %d e0 %lld w %lld (packed 13 = row 2, column 7 -> element %lld, want 31)", g.cols,
            (long long)g.e0, (long long)g.w, (long long)elem_of(&g, 13));
    return t_finish();
}
