/* common/fuzz/fuzz.h — the libFuzzer entry of a parser target: DP_FUZZ_TARGET(check) defines
 * LLVMFuzzerTestOneInput to abort (a crash for libFuzzer) when check(data, size) returns 0, i.e.
 * when a property of the parser is violated. With DP_FUZZ_NO_MAIN defined (the corpus replay
 * in `make test` includes the target's .c file) it defines nothing, and check is called there. */
#ifndef DP_FUZZ_H
#define DP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef DP_FUZZ_NO_MAIN
#define DP_FUZZ_TARGET(check)
#else
#define DP_FUZZ_TARGET(check)                                                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);              \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {             \
        if (!check(data, size)) abort();                                       \
        return 0;                                                              \
    }
#endif

#endif
