/* conformance/tests/test_plan_time.c — `dpcert plan`'s step time against the engine measured here
 * at 1, 2 and 4 MPI ranks (docs/plan.md §9; the machinery and the negative control:
 * conformance/tests/plan_time.h). One llama, grad-sample and fused, replicated and zero2.
 * Without mpirun: SKIP (77). */
#include "conformance/tests/plan_time.h"

/* the bound of the step-time check (docs/plan.md §8: up to 28 % seen alone, 33 % under make test's
 * two tests at once; the room is for a loaded CI machine) */
#define PT_BOUND 0.50

int main(int argc, char **argv) {
    int rc;
    if (pt_prelude(&rc, argc, argv)) return rc;
    static const pt_cfg cfgs[] = {
        {"llama D32 L2 T32 B16 grad-sample replicated", 64, 32, 2, 4, 64, 32, 16, 1, "grad-sample", "replicated", 0},
        {"llama D32 L2 T32 B16 fused zero2", 64, 32, 2, 4, 64, 32, 16, 1, "fused", "zero2", 0},
    };
    const double worst = pt_validate(argv[0], cfgs, 2, PT_BOUND);
    printf("# worst |projected / measured - 1| = %.1f%% (bound %.0f%%)\n", 100 * worst, 100 * PT_BOUND);
    /* negative control: without its per-example work (instantiation, norms, clipped sums, noise) the
     * projection of a grad-sample step with short sequences, where that work dominates, misses by
     * more than the bound */
    {
        const pt_cfg c = {"llama D64 L2 F256 T2 B32 grad-sample", 64, 64, 2, 4, 256, 2, 32, 1, "grad-sample", "replicated", 0};
        double ms, mm, lat, bw, with, without, wc;
        if (pt_measure(&ms, &mm, &lat, &bw, argv[0], &c, 1) == 0) {
            T_OK(pt_project(&with, &wc, &c, 1, lat, bw, 1));
            T_OK(pt_project(&without, &wc, &c, 1, lat, bw, 0));
            printf("# negative control %s: measured %.6f s, projected %.6f s, without the DP terms %.6f s\n", c.what, ms,
                   with, without);
            T_CHECK(fabs(without / ms - 1) > PT_BOUND, "the projection without the per-example work (%.6f s) is within "
                    "%.0f%% of the measurement (%.6f s): the test cannot see a missing term", without, 100 * PT_BOUND, ms);
        } else
            T_CHECK(0, "negative control: the worker failed");
    }
    return t_finish();
}
