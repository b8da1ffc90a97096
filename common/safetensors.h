/* common/safetensors.h — safetensors reader and writer (docs/formats.md).
 *
 * File = 8-byte little-endian u64 N, then N bytes of UTF-8 JSON header, then the
 * byte buffer. Header: {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
 * ..., "__metadata__": {"key": "string", ...}}; offsets are relative to the buffer.
 * The reader validates everything (see dp_st_parse) and never trusts sizes. */
#ifndef DP_SAFETENSORS_H
#define DP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

/* Largest header the reader accepts (the reference implementation uses 100 MB). */
#define DP_ST_MAX_HEADER (100u * 1000u * 1000u)

/* Serialize `s` into a malloc'd buffer. Tensors in insertion order, metadata in
 * insertion order, header padded with spaces to a multiple of 8 bytes. */
dp_status dp_st_serialize(uint8_t **buf, size_t *len, const dp_tensor_set *s);
dp_status dp_st_write(const char *path, const dp_tensor_set *s);

/* Parse a complete file image into `out` (initialised here). Rejects, with
 * DP_ERR_FORMAT and a message: a file shorter than 8 bytes; a header length
 * beyond the file or DP_ST_MAX_HEADER; invalid UTF-8/JSON or duplicate keys; a
 * non-object root; unknown dtypes; ranks above 4; negative or non-integer
 * dimensions; sizes that overflow; data_offsets that are not [begin <= end]
 * inside the buffer, that overlap, leave holes, or disagree with the shape; a
 * __metadata__ that is not a string-to-string map. */
dp_status dp_st_parse(dp_tensor_set *out, const uint8_t *buf, size_t len);
dp_status dp_st_read(dp_tensor_set *out, const char *path);

/* Read a safetensors file by its declared sizes: 8 bytes, the header (refused at once when its
 * length is < 2 or > DP_ST_MAX_HEADER: `inspect /dev/zero` stops after 8 bytes), then exactly
 * the data the header declares plus one probe byte (so a longer file is seen by dp_st_parse);
 * a declared data size above the physical memory is refused before allocating. The image is
 * then validated by dp_st_parse. */
dp_status dp_st_read_image(uint8_t **buf, size_t *len, const char *path);
/* Read a whole file into memory (shared helper). */
dp_status dp_read_file(uint8_t **buf, size_t *len, const char *path);

#endif
