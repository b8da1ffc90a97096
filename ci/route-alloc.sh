#!/usr/bin/env bash
# ci/route-alloc.sh [ROOT] — route every direct heap call of non-test code through the one
# allocation module (common/alloc.h, docs/development.md "Allocation"): malloc, calloc,
# realloc, free, strdup and strndup become dp_malloc, dp_calloc, dp_realloc, dp_free,
# dp_strdup and dp_strndup, and a file that then uses them without including
# common/alloc.h (or common/status.h, which includes it) gets the include after its first
# project include. Idempotent: a second run changes nothing. Run it after merging a branch
# that added direct calls; ci/check-alloc.sh (the test common/tests/alloc_routed.sh) lists
# what is left. Scope: *.c, *.h, *.cu of the modules outside tests/, bench/, fuzz/ and
# optimized/plugins/ (built against the public plugin header only, docs/plugin-abi.md), less
# common/alloc.c itself and common/test.h (the test harness). Method calls (x->free(...), x.free(...)) and prefixed names
# (fftw_free, OPENSSL_free, cudaMalloc) are left alone.
set -eu
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT"
files=$(find common accountant reference optimized conformance attacks \
  \( -path 'optimized/plugins/*' -o -path '*/tests/*' -o -path '*/bench/*' -o -path '*/fuzz/*' \) -prune -o \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -type f -print | grep -v '^common/alloc\.[ch]$' | grep -v '^common/test\.h$' | sort)
changed=0
for f in $files; do
  before=$(cksum < "$f")
  perl -0pi -e 's/(?<![\w.>\x27"])(malloc|calloc|realloc|free|strdup|strndup)(\s*\()/dp_$1$2/g' "$f"
  if grep -Eq '\bdp_(malloc|calloc|realloc|free|strdup|strndup)\s*\(' "$f" &&
     ! grep -Eq '#include "(common/)?(alloc|status)\.h"' "$f"; then
    # after the first project include (every file of these modules has one)
    perl -0pi -e 's/^(#include "[^"]+"\n)/$1#include "common\/alloc.h"\n/m' "$f"
  fi
  [ "$before" = "$(cksum < "$f")" ] || { echo "routed: $f"; changed=$((changed + 1)); }
done
echo "route-alloc: $changed file(s) changed"
