/* common/hash.c — SHA-256 through OpenSSL EVP (docs/formats.md, "Digests"). */
#include "hash.h"

#include "fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dpcert stores tensors in native byte order and assumes a little-endian host"
#endif

/* One EVP digest context: begin, update (any number of chunks), end. On failure
 * the context is freed before returning. */
typedef struct { EVP_MD_CTX *ctx; } sha_ctx;

static dp_status sha_begin(sha_ctx *s) {
    s->ctx = EVP_MD_CTX_new();
    if (!s->ctx) return dp_error(DP_ERR_NOMEM, "EVP_MD_CTX_new failed");
    if (EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(s->ctx);
        return dp_error(DP_ERR_INTERNAL, "EVP_DigestInit_ex(SHA-256) failed");
    }
    return DP_OK;
}

static dp_status sha_update(sha_ctx *s, const void *p, size_t n) {
    if (n && EVP_DigestUpdate(s->ctx, p, n) != 1) {
        EVP_MD_CTX_free(s->ctx);
        return dp_error(DP_ERR_INTERNAL, "EVP_DigestUpdate failed");
    }
    return DP_OK;
}

static dp_status sha_end(sha_ctx *s, uint8_t out[DP_SHA256_LEN]) {
    unsigned int len = 0;
    int ok = EVP_DigestFinal_ex(s->ctx, out, &len);
    EVP_MD_CTX_free(s->ctx);
    if (ok != 1 || len != DP_SHA256_LEN) return dp_error(DP_ERR_INTERNAL, "EVP_DigestFinal_ex failed");
    return DP_OK;
}

dp_status dp_sha256_buf(uint8_t out[DP_SHA256_LEN], const void *data, size_t n) {
    sha_ctx s;
    DP_TRY(sha_begin(&s));
    DP_TRY(sha_update(&s, data, n));
    return sha_end(&s, out);
}

dp_status dp_sha256_file(uint8_t out[DP_SHA256_LEN], const char *path) {
    struct stat sb;
    FILE *f = dp_fopen_read_stat(path, &sb);
    if (!f && errno == ENOMEM) return dp_error(DP_ERR_NOMEM, "out of memory opening '%s'", path);
    if (!f) return dp_error(dp_errno_status(errno), "cannot open '%s': %s", path, strerror(errno));
    /* only a regular file has a content to hash: a device or a pipe may never end (train --data
     * /dev/zero hung here, found by common/tests/cli_fuzz.sh), and reading a pipe consumes it */
    if (!S_ISREG(sb.st_mode)) {
        fclose(f);
        return dp_error(DP_ERR_IO, "'%s' is not a regular file: it has no fixed content to hash", path);
    }
    sha_ctx s;
    dp_status st = sha_begin(&s);
    if (st != DP_OK) { fclose(f); return st; }
    static _Thread_local unsigned char chunk[1 << 16];
    for (;;) {
        size_t r = fread(chunk, 1, sizeof chunk, f);
        if (r && (st = sha_update(&s, chunk, r)) != DP_OK) { fclose(f); return st; }
        if (r < sizeof chunk) break;
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err) {
        EVP_MD_CTX_free(s.ctx);
        return dp_read_error("", path, err);
    }
    return sha_end(&s, out);
}

dp_status dp_sha256_tensor(uint8_t out[DP_SHA256_LEN], const dp_tensor *t) {
    if ((unsigned)t->dtype >= DP_DTYPE_COUNT) return dp_error(DP_ERR_INVALID, "invalid dtype %d", (int)t->dtype);
    size_t nb = dp_tensor_nbytes(t);
    if (nb && !t->data) return dp_error(DP_ERR_INVALID, "tensor has %zu bytes but no data", nb);
    return dp_sha256_buf(out, t->data, nb);
}

void dp_hex(char *out, const uint8_t *in, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

dp_status dp_sha256_buf_hex(char out[DP_SHA256_HEX_LEN], const void *data, size_t n) {
    uint8_t d[DP_SHA256_LEN];
    DP_TRY(dp_sha256_buf(d, data, n));
    dp_hex(out, d, sizeof d);
    return DP_OK;
}

dp_status dp_sha256_file_hex(char out[DP_SHA256_HEX_LEN], const char *path) {
    uint8_t d[DP_SHA256_LEN];
    DP_TRY(dp_sha256_file(d, path));
    dp_hex(out, d, sizeof d);
    return DP_OK;
}

dp_status dp_sha256_tensor_hex(char out[DP_SHA256_HEX_LEN], const dp_tensor *t) {
    uint8_t d[DP_SHA256_LEN];
    DP_TRY(dp_sha256_tensor(d, t));
    dp_hex(out, d, sizeof d);
    return DP_OK;
}
