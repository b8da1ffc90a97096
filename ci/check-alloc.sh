#!/usr/bin/env bash
# ci/check-alloc.sh [ROOT] — exit 1 listing every direct malloc/calloc/realloc/free/strdup/
# strndup call in non-test code (common/test.h is the test harness) outside common/alloc.c (the one allocation module,
# docs/development.md "Allocation"); 0 when there is none. The same scope and pattern as
# ci/route-alloc.sh, which fixes what this lists. Run by common/tests/alloc_routed.sh.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2
files=$(find common accountant reference optimized conformance attacks \
  \( -path 'optimized/plugins/*' -o -path '*/tests/*' -o -path '*/bench/*' -o -path '*/fuzz/*' \) -prune -o \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -type f -print | grep -v '^common/alloc\.[ch]$' | grep -v '^common/test\.h$' | sort)
[ -n "$files" ] || { echo "check-alloc: no source files under $ROOT" >&2; exit 2; }
hits=$(perl -ne 'print "$ARGV:$.: $_" if /(?<![\w.>\x27"])(malloc|calloc|realloc|free|strdup|strndup)\s*\(/; close ARGV if eof' $files)
if [ -n "$hits" ]; then
  printf '%s\n' "$hits"
  echo "check-alloc: $(printf '%s\n' "$hits" | wc -l) direct heap call(s) outside common/alloc.c: run ci/route-alloc.sh"
  exit 1
fi
echo "check-alloc: $(echo "$files" | wc -l) files, every heap call goes through common/alloc.h"
