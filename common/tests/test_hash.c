/* common/tests/test_hash.c — SHA-256 of buffers, files and tensors against the
 * FIPS 180-2 / NIST example vectors ("abc", the empty string, the 448-bit
 * message, one million 'a'), file streaming across chunk boundaries, and the
 * little-endian byte convention for tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/test.h"

static const char *million_a_hex = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

int main(void) {
    static const struct { const char *msg, *hex; } vec[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char hex[DP_SHA256_HEX_LEN];
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        T_OK(dp_sha256_buf_hex(hex, vec[i].msg, strlen(vec[i].msg)));
        T_CHECK(strcmp(hex, vec[i].hex) == 0, "SHA-256('%s') = %s, expected %s", vec[i].msg, hex, vec[i].hex);
    }
    /* Negative control: one flipped bit changes the digest. */
    T_OK(dp_sha256_buf_hex(hex, "abd", 3));
    T_CHECK(strcmp(hex, vec[1].hex) != 0, "SHA-256('abd') must differ from SHA-256('abc')");

    /* One million 'a': as a buffer and as a file (> 64 KiB chunk, not a multiple of it). */
    size_t n = 1000000;
    char *a = malloc(n);
    T_CHECK(a != NULL, "malloc");
    if (!a) return t_finish();
    memset(a, 'a', n);
    T_OK(dp_sha256_buf_hex(hex, a, n));
    T_CHECK(strcmp(hex, million_a_hex) == 0, "SHA-256(10^6 x 'a') = %s", hex);
    FILE *f = fopen("million_a.bin", "wb");
    T_CHECK(f != NULL, "cannot create million_a.bin in the working directory");
    if (f) {
        T_CHECK(fwrite(a, 1, n, f) == n, "short write");
        fclose(f);
        T_OK(dp_sha256_file_hex(hex, "million_a.bin"));
        T_CHECK(strcmp(hex, million_a_hex) == 0, "file SHA-256(10^6 x 'a') = %s", hex);
        remove("million_a.bin");
    }
    /* Exactly one chunk (65536 bytes) and an empty file: file digest == buffer digest. */
    size_t sizes[] = {0, 65536, 65537};
    for (size_t k = 0; k < 3; k++) {
        char want[DP_SHA256_HEX_LEN];
        T_OK(dp_sha256_buf_hex(want, a, sizes[k]));
        f = fopen("chunk.bin", "wb");
        if (f) { fwrite(a, 1, sizes[k], f); fclose(f); }
        T_OK(dp_sha256_file_hex(hex, "chunk.bin"));
        T_CHECK(strcmp(hex, want) == 0, "file of %zu bytes: %s vs %s", sizes[k], hex, want);
        remove("chunk.bin");
    }
    free(a);

    /* Missing file: DP_ERR_IO naming the file. */
    dp_clear_error();
    T_CHECK(dp_sha256_file_hex(hex, "no/such/file.bin") == DP_ERR_IO, "missing file must be DP_ERR_IO");
    T_CHECK(strstr(dp_last_error(), "no/such/file.bin") != NULL, "message must name the file: %s", dp_last_error());

    /* Tensor digest = digest of its little-endian bytes. F32 1.0 = 00 00 80 3f. */
    float one[2] = {1.0f, -2.0f};   /* -2.0f = 00 00 00 c0 */
    dp_tensor t = {.dtype = DP_F32, .ndim = 1, .shape = {2}, .data = one};
    const uint8_t le[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    char want[DP_SHA256_HEX_LEN];
    T_OK(dp_sha256_buf_hex(want, le, sizeof le));
    T_OK(dp_sha256_tensor_hex(hex, &t));
    T_CHECK(strcmp(hex, want) == 0, "tensor digest %s vs bytes digest %s", hex, want);
    /* A scalar and an empty tensor. */
    dp_tensor e = {.dtype = DP_F64, .ndim = 1, .shape = {0}, .data = NULL};
    T_OK(dp_sha256_tensor_hex(hex, &e));
    T_CHECK(strcmp(hex, vec[0].hex) == 0, "empty tensor must hash like the empty string: %s", hex);
    dp_tensor bad = {.dtype = DP_F32, .ndim = 1, .shape = {3}, .data = NULL};
    T_CHECK(dp_sha256_tensor_hex(hex, &bad) == DP_ERR_INVALID, "tensor without data must be rejected");

    /* dp_hex */
    const uint8_t b[3] = {0x00, 0xab, 0xff};
    char h[7];
    dp_hex(h, b, 3);
    T_CHECK(strcmp(h, "00abff") == 0, "dp_hex gave %s", h);
    return t_finish();
}
