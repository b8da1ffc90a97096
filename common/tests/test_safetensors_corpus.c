/* common/tests/test_safetensors_corpus.c — replays the fuzz seed corpus
 * (common/tests/data/safetensors-corpus/, plus crash reproducers added there)
 * through the reader with the ordinary compiler; under `make SANITIZE=1` this is
 * the ASan+UBSan crash-free run the CI does.
 *
 * For every file F: dp_st_read(F) is DP_OK or DP_ERR_FORMAT with a message
 * ("valid_*" files must be DP_OK, "bad_*" files DP_ERR_FORMAT); an accepted file
 * round-trips (serialise, parse, same tensors; re-serialising is byte-identical,
 * and for valid_* files equal to F itself, since our writer made them). Then the
 * same properties for every prefix of F and for two one-byte mutations (bit 0
 * flipped, byte set to 0xff) at each of its first 512 bytes: a deterministic
 * mini-fuzz of the structure around each seed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "common/test.h"

static long n_ok, n_rejected, n_bad;

/* Parse one image; 1 if accepted. Checks the properties; counts violations in n_bad. */
static int check_image(const char *what, const uint8_t *p, size_t len, const uint8_t *must_equal) {
    dp_tensor_set s, r;
    dp_clear_error();
    dp_status st = dp_st_parse(&s, p, len);
    if (st != DP_OK) {
        if (st != DP_ERR_FORMAT || !dp_last_error()[0]) {
            if (n_bad++ < 10) fprintf(stderr, "%s: status %s without a message\n", what, dp_status_name(st));
        }
        n_rejected++;
        return 0;
    }
    n_ok++;
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    int good = dp_st_serialize(&b1, &l1, &s) == DP_OK && dp_st_parse(&r, b1, l1) == DP_OK;
    if (good) {
        good = dp_tset_equal(&s, &r) && dp_st_serialize(&b2, &l2, &r) == DP_OK && l1 == l2 && !memcmp(b1, b2, l1);
        if (good && must_equal) good = l1 == len && !memcmp(b1, must_equal, len);
        dp_tset_free(&r);
    }
    if (!good && n_bad++ < 10) fprintf(stderr, "%s: accepted but does not round-trip (%s)\n", what, dp_last_error());
    free(b1);
    free(b2);
    dp_tset_free(&s);
    return 1;
}

int main(void) {
    const char *root = getenv("DPCERT_ROOT");
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/common/tests/data/safetensors-corpus", root ? root : ".");
    DIR *d = opendir(dir);
    T_CHECK(d != NULL, "cannot open the corpus directory %s (set DPCERT_ROOT)", dir);
    if (!d) return t_finish();
    int nfiles = 0, nvalid = 0, nbadfiles = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "README.md") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint8_t *buf;
        size_t len;
        T_OK(dp_read_file(&buf, &len, path));
        if (!buf) continue;
        nfiles++;
        int is_valid = strncmp(e->d_name, "valid_", 6) == 0, is_bad = strncmp(e->d_name, "bad_", 4) == 0;
        dp_tensor_set s;
        dp_status st = dp_st_read(&s, path);
        if (st == DP_OK) dp_tset_free(&s);
        if (is_valid) { nvalid++; T_CHECK(st == DP_OK, "%s must parse: %s", e->d_name, dp_last_error()); }
        if (is_bad) { nbadfiles++; T_CHECK(st == DP_ERR_FORMAT, "%s must be rejected as malformed", e->d_name); }
        check_image(e->d_name, buf, len, is_valid ? buf : NULL);
        /* prefixes and one-byte mutations */
        for (size_t k = 0; k < len; k++) check_image(e->d_name, buf, k, NULL);
        uint8_t *m = malloc(len ? len : 1);
        size_t lim = len < 512 ? len : 512;
        for (size_t k = 0; m && k < lim; k++) {
            memcpy(m, buf, len);
            m[k] ^= 1;
            check_image(e->d_name, m, len, NULL);
            m[k] = 0xff;
            check_image(e->d_name, m, len, NULL);
        }
        free(m);
        free(buf);
    }
    closedir(d);
    printf("%d corpus files (%d valid, %d malformed): %ld images accepted, %ld rejected, %ld property violations\n",
           nfiles, nvalid, nbadfiles, n_ok, n_rejected, n_bad);
    T_CHECK(nvalid >= 3 && nbadfiles >= 30, "corpus too small: %d valid, %d malformed", nvalid, nbadfiles);
    T_CHECK(n_ok > nvalid && n_rejected > nbadfiles, "mutations should produce both accepted and rejected images");
    T_CHECK(n_bad == 0, "%ld images violated the reader's contract", n_bad);
    return t_finish();
}
