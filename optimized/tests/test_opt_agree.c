/* optimized/tests/test_opt_agree.c — the canonical configuration text and the agreement
 * of ranks (optimized/opt_agree.h, docs/ranks.md), in one process:
 *   - the canonical lines of every option type (%.17g, decimal, flags, absent strings,
 *     escaped bytes), the skip / hashed (SHA-256 of a file, "unreadable") / presence lists
 *     and the model line;
 *   - opt_config_agree over a fake two-rank backend whose "rank 1" text is given:
 *     identical texts agree (two rounds not needed: one gather); a text that differs in
 *     --steps gives DP_ERR_INVALID naming "rank 1 has --steps 3, rank 0 has --steps 2";
 *     a rank 1 with an extra line is named too (negative controls: each must fail);
 *   - one rank (no MPI) agrees trivially. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/test.h"
#include "optimized/opt_agree.h"

/* fake two-rank backend: rank 0 is this process, rank 1's bytes are g_peer */
static const char *g_peer;
static size_t g_peer_len;
static int g_round;
static dp_status fake_allgatherv(void *ctx, void **recv, size_t *len, const void *send, size_t n) {
    (void)ctx;
    const void *other = send;
    size_t on = n;
    uint8_t digest[DP_SHA256_LEN + 8];
    if (g_round++ == 0) { /* round 1: rank 1's digest and length */
        dp_sha256_buf(digest, g_peer, g_peer_len);
        for (int k = 0; k < 8; k++) digest[DP_SHA256_LEN + k] = (uint8_t)((uint64_t)g_peer_len >> (8 * k));
        other = digest;
        on = sizeof digest;
    } else {
        other = g_peer;
        on = g_peer_len;
    }
    char *buf = malloc(n + on + 1);
    if (!buf) return DP_ERR_NOMEM;
    memcpy(buf, send, n);
    memcpy(buf + n, other, on);
    *recv = buf;
    *len = n + on;
    return DP_OK;
}

static dp_status agree_with(const opt_canon *mine, const char *peer) {
    opt_backend be;
    memset(&be, 0, sizeof be);
    be.name = "fake";
    be.comm.size = 2;
    be.ops.allgatherv_bytes = fake_allgatherv;
    g_peer = peer;
    g_peer_len = strlen(peer);
    g_round = 0;
    return opt_config_agree(&be, mine);
}

int main(void) {
    double x = 0.1;
    int64_t steps = 2;
    uint64_t seed = 18446744073709551615u;
    int flag = 1, seen_data = 1, seen_export = 0;
    const char *s_space = "a b\n\\", *s_null = NULL, *data = "d.bin", *exp = "out", *threads = "4";
    FILE *f = fopen("d.bin", "wb");
    T_CHECK(f != NULL, "temp file");
    if (f) { fputs("abc", f); fclose(f); }
    dp_opt opts[] = {
        {"--x", DP_OPT_DOUBLE, &x, NULL, ""},       {"--steps", DP_OPT_INT, &steps, NULL, ""},
        {"--seed", DP_OPT_U64, &seed, NULL, ""},    {"--flag", DP_OPT_FLAG, &flag, NULL, ""},
        {"--s", DP_OPT_STRING, &s_space, NULL, ""}, {"--none", DP_OPT_STRING, &s_null, NULL, ""},
        {"--data", DP_OPT_STRING, &data, &seen_data, ""}, {"--export", DP_OPT_STRING, &exp, &seen_export, ""},
        {"--threads", DP_OPT_STRING, &threads, NULL, ""},
    };
    static const char *const skip[] = {"--threads", NULL}, *const hashed[] = {"--data", NULL},
                             *const presence[] = {"--export", NULL};
    opt_canon c;
    opt_canon_init(&c);
    T_OK(opt_canon_options(&c, opts, sizeof opts / sizeof opts[0], skip, hashed, presence));
    const char *want = "--x 0.10000000000000001\n--steps 2\n--seed 18446744073709551615\n--flag 1\n"
                       "--s a b\\x0a\\x5c\n--none (absent)\n"
                       "--data sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
                       "--export absent\n";
    T_CHECK(c.text && strcmp(c.text, want) == 0, "canonical text:\n%s\nexpected:\n%s", c.text ? c.text : "(null)", want);
    opt_canon_free(&c);

    data = "no_such_file";
    opt_canon_init(&c);
    T_OK(opt_canon_options(&c, opts + 6, 1, NULL, hashed, NULL));
    T_CHECK(c.text && strcmp(c.text, "--data unreadable\n") == 0, "unreadable data file: %s", c.text);
    opt_canon_free(&c);

    dp_model_config mc;
    dp_model_config_default(&mc, DP_MLP);
    mc.in = 4; mc.nhidden = 2; mc.hidden[0] = 5; mc.hidden[1] = 6; mc.classes = 3;
    opt_canon_init(&c);
    T_OK(opt_canon_model(&c, &mc));
    T_CHECK(c.text && strcmp(c.text, "model mlp in=4 hidden=5,6 classes=3\n") == 0, "mlp model line: %s", c.text);
    opt_canon_free(&c);
    mc.nhidden = 0;
    opt_canon_init(&c);
    T_OK(opt_canon_model(&c, &mc));
    T_CHECK(c.text && strcmp(c.text, "model mlp in=4 hidden=none classes=3\n") == 0, "mlp without hidden: %s", c.text);
    opt_canon_free(&c);

    /* agreement over the fake pair */
    opt_canon_init(&c);
    T_OK(opt_canon_line(&c, "--q", "%.17g", 0.5));
    T_OK(opt_canon_line(&c, "--steps", "%d", 2));
    T_CHECK(agree_with(&c, "--q 0.5\n--steps 2\n") == DP_OK, "identical texts agree: %s", dp_last_error());
    T_CHECK(g_round == 1, "identical texts need one gather (got %d)", g_round);
    dp_status st = agree_with(&c, "--q 0.5\n--steps 3\n");
    T_CHECK(st == DP_ERR_INVALID && strstr(dp_last_error(), "rank 1 has --steps 3, rank 0 has --steps 2"),
            "differing --steps named: %s", dp_last_error());
    st = agree_with(&c, "--q 0.5\n--steps 2\n--extra 1\n");
    T_CHECK(st == DP_ERR_INVALID && strstr(dp_last_error(), "rank 1 has --extra 1, rank 0 has (nothing)"),
            "an extra line named: %s", dp_last_error());
    st = agree_with(&c, "--q 0.25\n--steps 3\n");
    T_CHECK(st == DP_ERR_INVALID && strstr(dp_last_error(), "rank 1 has --q 0.25, rank 0 has --q 0.5"),
            "the FIRST differing line named: %s", dp_last_error());
    /* one rank: nothing to agree on */
    opt_backend one;
    memset(&one, 0, sizeof one);
    one.comm.size = 1;
    T_OK(opt_config_agree(&one, &c));
    opt_canon_free(&c);
    remove("d.bin");
    return t_finish();
}
