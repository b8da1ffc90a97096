/* common/cmd_inspect.c — `dpcert inspect FILE.safetensors`.
 *
 * Output (docs/formats.md, "dpcert inspect"):
 *   file PATH
 *   bytes N
 *   sha256 HEX                      (of the whole file)
 *   tensors T
 *   tensor NAME dtype=DT shape=[d0, d1] sha256=HEX    (one line per tensor, header order)
 *   metadata M
 *   meta KEY=VALUE                  (one line per entry, header order)
 * Names, keys and values are printed with C-style escapes for backslash,
 * control characters and bytes >= 0x7f (\n, \t, \\, \xHH), so every entry is
 * exactly one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/alloc.h"
#include "hash.h"
#include "safetensors.h"

static void put_escaped(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\') fputs("\\\\", stdout);
        else if (*p == '\n') fputs("\\n", stdout);
        else if (*p == '\t') fputs("\\t", stdout);
        else if (*p < 0x20 || *p >= 0x7f) printf("\\x%02x", *p);
        else putchar(*p);
    }
}

int dp_cmd_inspect(int argc, char **argv) {
    int help = 0, npos = 0;
    char *pos[1];
    dp_status st = dp_opts_parse(NULL, 0, argc, argv, pos, 1, &npos, &help);
    if (st != DP_OK) return dp_cli_fail("inspect", st);
    if (help) {
        printf("usage: dpcert inspect FILE.safetensors\n"
               "Lists the tensors (name, dtype, shape, SHA-256 of the raw little-endian bytes) and the metadata.\n");
        return 0;
    }
    if (npos != 1) return dp_cli_fail("inspect", dp_error(DP_ERR_USAGE, "expected one FILE.safetensors argument"));
    const char *path = pos[0];
    uint8_t *buf;
    size_t len;
    if ((st = dp_st_read_image(&buf, &len, path)) != DP_OK) return dp_cli_fail("inspect", st);
    dp_tensor_set set;
    st = dp_st_parse(&set, buf, len);
    char hex[DP_SHA256_HEX_LEN];
    if (st == DP_OK) st = dp_sha256_buf_hex(hex, buf, len);
    dp_free(buf);
    if (st != DP_OK) {
        dp_error_context(st, "%s", path);
        dp_tset_free(&set);
        return dp_cli_fail("inspect", st);
    }
    printf("file %s\nbytes %zu\nsha256 %s\ntensors %zu\n", path, len, hex, set.n);
    for (size_t i = 0; i < set.n; i++) {
        const dp_tensor *t = &set.items[i].t;
        char shape[128];
        if ((st = dp_sha256_tensor_hex(hex, t)) != DP_OK) break;
        fputs("tensor ", stdout);
        put_escaped(set.items[i].name);
        printf(" dtype=%s shape=%s sha256=%s\n", dp_dtype_name(t->dtype), dp_shape_str(shape, sizeof shape, t), hex);
    }
    if (st == DP_OK) {
        printf("metadata %zu\n", set.nmeta);
        for (size_t i = 0; i < set.nmeta; i++) {
            fputs("meta ", stdout);
            put_escaped(set.meta[i].key);
            putchar('=');
            put_escaped(set.meta[i].value);
            putchar('\n');
        }
    }
    dp_tset_free(&set);
    if (st != DP_OK) return dp_cli_fail("inspect", st);
    if (fflush(stdout) != 0) return dp_cli_fail("inspect", dp_error(DP_ERR_IO, "cannot write to standard output"));
    return 0;
}
