/* common/tests/test_philox.c — Philox4x32-10 known-answer vectors (Random123's
 * kat_vectors, common/tests/data/philox4x32_10.txt) and stream-layout properties. */
#include <stdio.h>
#include <string.h>

#include "common/philox.h"
#include "common/rng.h"
#include "common/test.h"

int main(void) {
    const char *root = getenv("DPCERT_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/common/tests/data/philox4x32_10.txt", root ? root : ".");
    FILE *f = fopen(path, "r");
    T_CHECK(f != NULL, "cannot open %s", path);
    int nvec = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char name[32];
        unsigned rounds, c[4], k[2], e[4];
        int n = sscanf(line, "%31s %u %x %x %x %x %x %x %x %x %x %x", name, &rounds, &c[0], &c[1], &c[2], &c[3],
                       &k[0], &k[1], &e[0], &e[1], &e[2], &e[3]);
        T_CHECK(n == 12 && strcmp(name, "philox4x32") == 0 && rounds == 10, "bad vector line: %s", line);
        if (n != 12) continue;
        dp_philox_ctr ctr = {{c[0], c[1], c[2], c[3]}};
        dp_philox_key key = {{k[0], k[1]}};
        dp_philox_ctr out = dp_philox4x32_10(ctr, key);
        for (int i = 0; i < 4; i++)
            T_CHECK(out.v[i] == e[i], "vector %d word %d: got %08x expected %08x", nvec, i, out.v[i], e[i]);
        nvec++;
    }
    if (f) fclose(f);
    T_CHECK(nvec == 3, "expected 3 known-answer vectors, read %d", nvec);

    /* Stream layout: element-wise access equals bulk fill, any offset. */
    dp_seed seed = {12345};
    dp_stream s;
    T_OK(dp_stream_public(&s, seed, DP_PURPOSE_INIT, 7, 3));
    double bulk[101];
    dp_rng_fill_gaussian(bulk, &s, 5, 101);
    for (int i = 0; i < 101; i++)
        T_CHECK(bulk[i] == dp_rng_gaussian(&s, 5 + (uint64_t)i), "gaussian element %d differs from bulk", i);
    /* the eight-block path across the 2^32 block boundary (counter word 1 changes), with a
     * key using both words */
    dp_stream s2;
    T_OK(dp_stream_secret(&s2, (dp_noise_key){0xF00DCAFE12345678ull}, DP_PURPOSE_NOISE, 3, 77));
    const uint64_t off2 = ((uint64_t)1 << 33) - 40;
    dp_rng_fill_gaussian(bulk, &s2, off2, 101);
    for (int i = 0; i < 101; i++)
        T_CHECK(bulk[i] == dp_rng_gaussian(&s2, off2 + (uint64_t)i), "gaussian element 2^33 - 40 + %d differs from bulk",
                i);
    /* Public/secret separation is enforced. */
    dp_noise_key nk = {12345};
    T_CHECK(dp_stream_public(&s, seed, DP_PURPOSE_NOISE, 0, 0) != DP_OK, "public seed must not key noise");
    T_CHECK(dp_stream_secret(&s, nk, DP_PURPOSE_DATA, 0, 0) != DP_OK, "noise key must not key data");
    T_CHECK(dp_stream_public(&s, seed, DP_PURPOSE_DATA, 0, 1u << 24) != DP_OK, "lane must fit 24 bits");
    /* Same key value, different purpose: different words. */
    dp_stream a, b;
    T_OK(dp_stream_public(&a, seed, DP_PURPOSE_DATA, 0, 0));
    T_OK(dp_stream_secret(&b, nk, DP_PURPOSE_NOISE, 0, 0));
    T_CHECK(dp_rng_u64(&a, 0) != dp_rng_u64(&b, 0), "purpose tag must separate streams");
    return t_finish();
}
