/* common/memlimit.c — memory limit of a run (common/memlimit.h, docs/memory.md). */
#include "common/memlimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

dp_status dp_mem_parse(uint64_t *out, const char *what, const char *s) {
    uint64_t v = 0;
    const char *p = s;
    if (!s || *s < '0' || *s > '9')
        return dp_error(DP_ERR_INVALID, "%s: expected BYTES[K|M|G|T] (e.g. 512M), got '%s'", what, s ? s : "");
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return dp_error(DP_ERR_INVALID, "%s '%s' is too large (at most 2^63 bytes)", what, s);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    static const char units[] = "KMGT";
    int shift = 0;
    if (*p) {
        const char *u = strchr(units, *p);
        if (!u || p[1] != '\0')
            return dp_error(DP_ERR_INVALID, "%s: unknown unit in '%s' (expected BYTES, or a K, M, G or T suffix)", what, s);
        shift = 10 * (int)(u - units + 1);
    }
    if (v == 0) return dp_error(DP_ERR_INVALID, "%s must be > 0 (got '%s')", what, s);
    if (v > ((uint64_t)1 << 63) >> shift)
        return dp_error(DP_ERR_INVALID, "%s '%s' is too large (at most 2^63 bytes)", what, s);
    *out = v << shift;
    return DP_OK;
}

dp_status dp_mem_available(uint64_t *out) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return dp_error(DP_ERR_IO, "cannot open /proc/meminfo");
    char line[256];
    dp_status st = dp_error(DP_ERR_IO, "/proc/meminfo has no MemAvailable line");
    while (fgets(line, sizeof line, f)) {
        unsigned long long kib = 0;
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
            *out = (uint64_t)kib * 1024u;
            st = DP_OK;
            break;
        }
    }
    fclose(f);
    return st;
}

dp_status dp_mem_check(double need, const char *what, const char *max_memory) {
    uint64_t limit = 0;
    const char *source = "--max-memory";
    if (max_memory) {
        DP_TRY(dp_mem_parse(&limit, "--max-memory", max_memory));
    } else if (dp_mem_available(&limit) != DP_OK) {
        fprintf(stderr, "dpcert: warning: %s; the memory pre-check of %s is skipped (give --max-memory BYTES)\n",
                dp_last_error(), what);
        return DP_OK;
    } else {
        source = "MemAvailable in /proc/meminfo; --max-memory sets another limit";
    }
    if (!(need <= (double)limit)) /* NaN or larger: refuse */
        return dp_error(DP_ERR_INVALID, "%s needs an estimated %.3g GiB (%.0f bytes; the upper estimate of docs/memory.md), "
                        "more than the limit of %.3g GiB (%" PRIu64 " bytes, %s)", what, need / 1073741824.0, need,
                        (double)limit / 1073741824.0, limit, source);
    return DP_OK;
}
