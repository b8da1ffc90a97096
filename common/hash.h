/* common/hash.h — SHA-256 (through OpenSSL's EVP interface) of byte buffers,
 * files and tensors, and lowercase hex output.
 *
 * The digest of a tensor is the SHA-256 of its raw storage bytes, row-major,
 * little-endian (exactly the bytes a safetensors file holds for it); dtype and
 * shape are NOT part of the digest (print them beside it). */
#ifndef DP_HASH_H
#define DP_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

#define DP_SHA256_LEN 32
#define DP_SHA256_HEX_LEN 65 /* 64 hex digits + NUL */

dp_status dp_sha256_buf(uint8_t out[DP_SHA256_LEN], const void *data, size_t n);
/* Streams a regular file in 64 KiB chunks; DP_ERR_IO when it cannot be opened or is not a regular
 * file (a device or a pipe: never read until it ends), DP_ERR_SYSIO on a read error. */
dp_status dp_sha256_file(uint8_t out[DP_SHA256_LEN], const char *path);
dp_status dp_sha256_tensor(uint8_t out[DP_SHA256_LEN], const dp_tensor *t);

/* out = lowercase hex of in[0..n) followed by NUL; out must hold 2n+1 chars. */
void dp_hex(char *out, const uint8_t *in, size_t n);
/* Convenience: hex digest of a buffer / file / tensor into out[65]. */
dp_status dp_sha256_buf_hex(char out[DP_SHA256_HEX_LEN], const void *data, size_t n);
dp_status dp_sha256_file_hex(char out[DP_SHA256_HEX_LEN], const char *path);
dp_status dp_sha256_tensor_hex(char out[DP_SHA256_HEX_LEN], const dp_tensor *t);

#endif
