/* optimized/tests/opt_test_tiny.h — the tiny mlp (3 inputs, 4 hidden, 2 classes, N = 8,
 * q = 0.5, one step, C = 1, sigma = 1) and a one-thread host backend of dtype dt, for the
 * engine tests that check refusals at opt_dpsgd_init (static; include after common/test.h
 * and optimized/dpsgd.h). Returns 1 when both exist (else frees what it made). */
#ifndef OPT_TEST_TINY_H
#define OPT_TEST_TINY_H

static int opt_test_tiny(dp_model *m, dp_model_config *mc, dp_dpsgd_config *c, opt_backend **be, dp_dtype dt) {
    dp_model_config_default(mc, DP_MLP);
    mc->in = 3; mc->hidden[0] = 4; mc->nhidden = 1; mc->classes = 2;
    dp_dpsgd_config_default(c);
    c->n = 8; c->q = 0.5; c->steps = 1; c->clip = 1; c->sigma = 1;
    T_OK(dp_model_init(m, mc, c->seed));
    opt_backend_config bc = {.name = "host", .dtype = dt, .threads = 1, .use_mpi = 0};
    *be = NULL;
    T_OK(opt_backend_create(be, &bc));
    if (!*be) { dp_model_free(m); return 0; }
    return 1;
}

#endif
