/* common/tests/test_status.c — status codes, exit-code mapping and messages,
 * including a message built from the previous one (dp_error reading
 * dp_last_error()), context prefixes, and the CLI number parsers' rejections. */
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "common/cli.h"
#include "common/status.h"
#include "common/test.h"
#include <string.h>
#include <unistd.h>

int main(void) {
    T_CHECK(dp_status_exit_code(DP_OK) == 0, "ok -> 0");
    T_CHECK(dp_status_exit_code(DP_ERR_CHECK_FAILED) == 1, "check failed -> 1");
    const dp_status two[] = {DP_ERR_USAGE, DP_ERR_INVALID, DP_ERR_FORMAT, DP_ERR_IO};
    for (int i = 0; i < 4; i++) T_CHECK(dp_status_exit_code(two[i]) == 2, "%s -> 2", dp_status_name(two[i]));
    const dp_status three[] = {DP_ERR_NOT_SUPPORTED, DP_ERR_NOMEM, DP_ERR_NUMERIC, DP_ERR_INTERNAL, DP_ERR_DEVICE};
    for (int i = 0; i < 5; i++) T_CHECK(dp_status_exit_code(three[i]) == 3, "%s -> 3", dp_status_name(three[i]));

    T_CHECK(dp_error(DP_ERR_INVALID, "sigma must be >= 0, got %g", -1.0) == DP_ERR_INVALID, "dp_error returns st");
    T_CHECK(strcmp(dp_last_error(), "sigma must be >= 0, got -1") == 0, "message: %s", dp_last_error());
    dp_error(DP_ERR_FORMAT, "tensor 'a': %s", dp_last_error()); /* reads the buffer it replaces */
    T_CHECK(strcmp(dp_last_error(), "tensor 'a': sigma must be >= 0, got -1") == 0, "self-referencing message: %s",
            dp_last_error());
    dp_error_context(DP_ERR_FORMAT, "%s", "file.safetensors");
    T_CHECK(strcmp(dp_last_error(), "file.safetensors: tensor 'a': sigma must be >= 0, got -1") == 0, "context: %s",
            dp_last_error());
    dp_clear_error();
    T_CHECK(dp_last_error()[0] == '\0', "clear");

    double d;
    int64_t i64;
    uint64_t u64;
    T_CHECK(dp_parse_double(&d, "--sigma", "nan") == DP_ERR_INVALID && strstr(dp_last_error(), "--sigma"), "NaN");
    T_CHECK(dp_parse_double(&d, "--sigma", "inf") == DP_ERR_INVALID, "inf");
    T_CHECK(dp_parse_double(&d, "--sigma", "1e999") == DP_ERR_INVALID, "overflow");
    T_CHECK(dp_parse_double(&d, "--sigma", "1.5x") == DP_ERR_INVALID, "garbage");
    T_CHECK(dp_parse_double(&d, "--sigma", "") == DP_ERR_USAGE, "empty");
    T_CHECK(dp_parse_double(&d, "--sigma", "2.5") == DP_OK && d == 2.5, "2.5");
    T_CHECK(dp_parse_i64(&i64, "--count", "-3") == DP_OK && i64 == -3, "-3");
    T_CHECK(dp_parse_i64(&i64, "--count", "99999999999999999999") == DP_ERR_INVALID, "i64 overflow");
    T_CHECK(dp_parse_u64(&u64, "--key", "-1") == DP_ERR_INVALID, "negative u64");
    /* strtoull would skip the blank and wrap " -1" / "+-1" to 2^64-1 */
    T_CHECK(dp_parse_u64(&u64, "--key", " -1") == DP_ERR_INVALID, "blank then negative u64");
    T_CHECK(dp_parse_u64(&u64, "--key", "+5") == DP_ERR_INVALID, "signed u64");
    T_CHECK(dp_parse_u64(&u64, "--key", " 5") == DP_ERR_INVALID, "leading blank u64");
    T_CHECK(dp_parse_u64(&u64, "--key", "0xffffffffffffffff") == DP_OK && u64 == UINT64_MAX, "hex u64");
    T_CHECK(dp_parse_u64(&u64, "--key", "0x") == DP_ERR_INVALID, "bare 0x");
    T_CHECK(dp_parse_u64(&u64, "--key", "0x1ffffffffffffffff") == DP_ERR_INVALID, "u64 overflow");
    T_CHECK(dp_check_min("--sigma", -1, 0, 1) == DP_ERR_INVALID && strstr(dp_last_error(), "--sigma must be >= 0"),
            "check_min: %s", dp_last_error());
    T_CHECK(dp_check_range("--q", 0, 0, 0, 1, 1) == DP_ERR_INVALID, "q = 0 outside (0,1]");
    T_CHECK(dp_check_range("--q", 1, 0, 0, 1, 1) == DP_OK, "q = 1 inside (0,1]");
    /* dp_cli_fail: message on stderr, exit code; NOT_SUPPORTED carries its marker. */
    {
        const dp_status sts[2] = {DP_ERR_NOT_SUPPORTED, DP_ERR_INTERNAL};
        const char *want[2] = {"dpcert x: not supported: op y missing\n", "dpcert x: op y missing\n"};
        for (int k = 0; k < 2; k++) {
            FILE *f = tmpfile();
            T_CHECK(f != NULL, "tmpfile");
            if (!f) break;
            fflush(stderr);
            int saved = dup(2);
            dup2(fileno(f), 2);
            int rc = dp_cli_fail("x", dp_error(sts[k], "op y missing"));
            fflush(stderr);
            dup2(saved, 2);
            close(saved);
            char line[256] = "";
            rewind(f);
            if (!fgets(line, sizeof line, f)) line[0] = '\0';
            fclose(f);
            T_CHECK(rc == 3 && strcmp(line, want[k]) == 0, "dp_cli_fail(%s) printed '%s' rc %d",
                    dp_status_name(sts[k]), line, rc);
        }
    }
    /* DP_GROW: doubling from `first`, contents kept, overflow refused with the array untouched */
    {
        int *a = NULL;
        size_t cap = 0;
        T_CHECK(DP_GROW(a, cap, 1, 4, "ints") == DP_OK && cap == 4 && a, "first growth: cap %zu", cap);
        for (int i = 0; i < 4; i++) a[i] = i * 7;
        T_CHECK(DP_GROW(a, cap, 4, 4, "ints") == DP_OK && cap == 4, "no growth needed: cap %zu", cap);
        T_CHECK(DP_GROW(a, cap, 9, 4, "ints") == DP_OK && cap == 16, "doubling to 16: cap %zu", cap);
        T_CHECK(a[3] == 21, "contents kept: %d", a[3]);
        int *before = a;
        T_CHECK(DP_GROW(a, cap, SIZE_MAX / 2, 4, "ints") == DP_ERR_NOMEM, "an overflowing size is refused");
        T_CHECK(a == before && cap == 16, "a failed growth leaves the array as it was");
        T_CHECK(strstr(dp_last_error(), "ints") != NULL, "the message names the array: %s", dp_last_error());
        free(a);
    }
    return t_finish();
}
