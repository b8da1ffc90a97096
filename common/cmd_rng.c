/* common/cmd_rng.c — `dpcert rng`: raw Philox4x32-10 words and samples from the
 * dpcert stream layout, for cross-checks against other implementations
 * (docs/rng.md, "Cross-checking with dpcert rng").
 *
 *   dpcert rng philox --key K0,K1 --counter C0,C1,C2,C3
 *       prints the four output words as 8-digit lowercase hex, space-separated
 *       (the column layout of common/tests/data/philox4x32_10.txt).
 *   dpcert rng sample --dist gaussian|laplace|uniform --key K --stream N
 *                     --purpose NAME --count M [--offset I] [--lane L]
 *       prints elements I .. I+M-1 of the stream, one per line, %.17g.
 *       K is the public seed for public purposes and the secret noise key for
 *       secret ones; the typed constructor of rng.h is used accordingly. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "rng.h"

static void rng_usage(FILE *f) {
    fprintf(f,
            "usage: dpcert rng philox --key K0,K1 --counter C0,C1,C2,C3\n"
            "       dpcert rng sample --dist gaussian|laplace|uniform --key K --stream N --purpose NAME\n"
            "                         --count M [--offset I] [--lane L]\n"
            "Numbers are decimal or 0x-prefixed hex; philox words may also be the 8-digit hex it prints. Purposes: data init dpzo-dir attack-data test (public,\n"
            "K is the seed) and noise sampling dpzo-noise audit-noise (secret, K is the noise key).\n");
}

/* One word as `rng philox` accepts it: 0x-prefixed hex; exactly 8 hex digits (the form
 * it prints, %08x) when the word has a letter a-f or a leading 0; otherwise decimal.
 * Eight decimal digits without a leading 0 could be either and are refused. */
static dp_status parse_word(uint64_t *v, const char *what, size_t k, const char *p) {
    size_t len = strlen(p), nhex = strspn(p, "0123456789abcdefABCDEF"), ndec = strspn(p, "0123456789");
    if (len == 8 && nhex == 8 && (ndec < 8 || p[0] == '0')) {
        char buf[16];
        snprintf(buf, sizeof buf, "0x%.8s", p); /* len == 8; the bound keeps -O1 -Wformat-truncation quiet */
        return dp_parse_u64(v, what, buf);
    }
    if (len == 8 && ndec == 8)
        return dp_error(DP_ERR_INVALID,
                        "%s: word %zu '%s' is ambiguous (8 digits is the printed hex form): write 0x%s for hex, "
                        "or the decimal value in hex with 0x",
                        what, k, p, p);
    return dp_parse_u64(v, what, p);
}

/* Comma-separated list of exactly n unsigned words < 2^32 (decimal, 0x hex, or the 8-digit
 * hex words `rng philox` prints). */
static dp_status parse_words(uint32_t *out, size_t n, const char *what, const char *s) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return dp_error(DP_ERR_INVALID, "%s: value too long", what);
    strcpy(buf, s);
    size_t k = 0;
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (k >= n) return dp_error(DP_ERR_INVALID, "%s: expected %zu comma-separated words, got more", what, n);
        uint64_t v;
        if (!*p) return dp_error(DP_ERR_INVALID, "%s: empty word %zu in '%s'", what, k, s);
        DP_TRY(parse_word(&v, what, k, p));
        if (v > UINT32_MAX) return dp_error(DP_ERR_INVALID, "%s: word %zu (%s) does not fit in 32 bits", what, k, p);
        out[k++] = (uint32_t)v;
        if (!comma) break;
        p = comma + 1;
    }
    if (k != n) return dp_error(DP_ERR_INVALID, "%s: expected %zu comma-separated words, got %zu", what, n, k);
    return DP_OK;
}

static int rng_philox(int argc, char **argv) {
    const char *key_s = NULL, *ctr_s = NULL;
    int help = 0;
    const dp_opt opts[] = {
        {"--key", DP_OPT_STRING, &key_s, NULL, "K0,K1: the two 32-bit key words"},
        {"--counter", DP_OPT_STRING, &ctr_s, NULL, "C0,C1,C2,C3: the four 32-bit counter words"},
    };
    dp_status st = dp_opts_parse(opts, 2, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail("rng philox", st);
    if (help) {
        printf("usage: dpcert rng philox --key K0,K1 --counter C0,C1,C2,C3\n");
        dp_opts_print_help(opts, 2);
        return 0;
    }
    if (!key_s) return dp_cli_fail("rng philox", dp_error(DP_ERR_USAGE, "missing --key K0,K1"));
    if (!ctr_s) return dp_cli_fail("rng philox", dp_error(DP_ERR_USAGE, "missing --counter C0,C1,C2,C3"));
    dp_philox_key key;
    dp_philox_ctr ctr;
    if ((st = parse_words(key.v, 2, "--key", key_s)) != DP_OK) return dp_cli_fail("rng philox", st);
    if ((st = parse_words(ctr.v, 4, "--counter", ctr_s)) != DP_OK) return dp_cli_fail("rng philox", st);
    dp_philox_ctr out = dp_philox4x32_10(ctr, key);
    printf("%08" PRIx32 " %08" PRIx32 " %08" PRIx32 " %08" PRIx32 "\n", out.v[0], out.v[1], out.v[2], out.v[3]);
    return 0;
}

static int rng_sample(int argc, char **argv) {
    const char *dist_s = NULL, *purpose_s = NULL;
    uint64_t key = 0, stream = 0, lane = 0, offset = 0;
    int64_t count = 0;
    int has_key = 0, has_stream = 0, has_count = 0, help = 0;
    const dp_opt opts[] = {
        {"--dist", DP_OPT_STRING, &dist_s, NULL, "gaussian | laplace | uniform"},
        {"--key", DP_OPT_U64, &key, &has_key, "64-bit key: the seed (public purposes) or noise key (secret)"},
        {"--stream", DP_OPT_U64, &stream, &has_stream, "stream id, 0 .. 2^32-1 (counter word 2)"},
        {"--purpose", DP_OPT_STRING, &purpose_s, NULL, "purpose name (see docs/rng.md)"},
        {"--count", DP_OPT_INT, &count, &has_count, "number of elements to print (>= 0)"},
        {"--offset", DP_OPT_U64, &offset, NULL, "index of the first element (default 0)"},
        {"--lane", DP_OPT_U64, &lane, NULL, "lane, 0 .. 2^24-1 (default 0)"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail("rng sample", st);
    if (help) {
        printf("usage: dpcert rng sample --dist D --key K --stream N --purpose NAME --count M [--offset I] [--lane L]\n");
        dp_opts_print_help(opts, nopts);
        return 0;
    }
    if (!dist_s) st = dp_error(DP_ERR_USAGE, "missing --dist (gaussian|laplace|uniform)");
    else if (!has_key) st = dp_error(DP_ERR_USAGE, "missing --key");
    else if (!has_stream) st = dp_error(DP_ERR_USAGE, "missing --stream");
    else if (!purpose_s) st = dp_error(DP_ERR_USAGE, "missing --purpose");
    else if (!has_count) st = dp_error(DP_ERR_USAGE, "missing --count");
    if (st != DP_OK) return dp_cli_fail("rng sample", st);
    static const char *const dists[] = {"gaussian", "laplace", "uniform", NULL};
    int dist;
    if ((st = dp_parse_choice(&dist, "--dist", dist_s, dists)) != DP_OK) return dp_cli_fail("rng sample", st);
    uint32_t purpose = dp_purpose_from_name(purpose_s);
    if (!purpose)
        return dp_cli_fail("rng sample", dp_error(DP_ERR_USAGE,
                                                  "--purpose: unknown purpose '%s' (expected data|init|dpzo-dir|"
                                                  "attack-data|test|noise|sampling|dpzo-noise|audit-noise)",
                                                  purpose_s));
    if (count < 0)
        return dp_cli_fail("rng sample", dp_error(DP_ERR_INVALID, "--count must be >= 0 (got %lld)", (long long)count));
    if (stream > UINT32_MAX)
        return dp_cli_fail("rng sample", dp_error(DP_ERR_INVALID, "--stream %" PRIu64 " does not fit in 32 bits", stream));
    if (lane >= (1u << 24))
        return dp_cli_fail("rng sample", dp_error(DP_ERR_INVALID, "--lane %" PRIu64 " does not fit in 24 bits", lane));
    if ((uint64_t)count > UINT64_MAX - offset)
        return dp_cli_fail("rng sample", dp_error(DP_ERR_INVALID, "--offset + --count exceeds 2^64"));
    dp_stream s;
    if (DP_PURPOSE_IS_SECRET(purpose)) {
        dp_noise_key nk = {key};
        st = dp_stream_secret(&s, nk, purpose, (uint32_t)stream, (uint32_t)lane);
    } else {
        dp_seed seed = {key};
        st = dp_stream_public(&s, seed, purpose, (uint32_t)stream, (uint32_t)lane);
    }
    if (st != DP_OK) return dp_cli_fail("rng sample", st);
    for (uint64_t k = 0; k < (uint64_t)count; k++) {
        uint64_t i = offset + k;
        double v = dist == 0 ? dp_rng_gaussian(&s, i) : dist == 1 ? dp_rng_laplace(&s, i) : dp_rng_uniform(&s, i);
        if (printf("%.17g\n", v) < 0)
            return dp_cli_fail("rng sample", dp_error(DP_ERR_IO, "cannot write to standard output"));
    }
    if (fflush(stdout) != 0) return dp_cli_fail("rng sample", dp_error(DP_ERR_IO, "cannot write to standard output"));
    return 0;
}

int dp_cmd_rng(int argc, char **argv) {
    if (argc < 1) {
        rng_usage(stderr);
        return 2;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        rng_usage(stdout);
        return 0;
    }
    if (strcmp(argv[0], "philox") == 0) return rng_philox(argc - 1, argv + 1);
    if (strcmp(argv[0], "sample") == 0) return rng_sample(argc - 1, argv + 1);
    dp_error(DP_ERR_USAGE, "unknown subcommand '%s' (expected philox or sample)", argv[0]);
    fprintf(stderr, "dpcert rng: %s\n", dp_last_error());
    return 2;
}
