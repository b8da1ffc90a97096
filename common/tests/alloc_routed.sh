#!/usr/bin/env bash
# common/tests/alloc_routed.sh — every heap call of non-test code goes through common/alloc.h
# (issue 29: so that DPCERT_FAIL_ALLOC reaches every allocation, also in code merged later):
# ci/check-alloc.sh on the tree must find no direct malloc/calloc/realloc/free/strdup/strndup
# outside common/alloc.c. Controls on a scratch tree: a direct call is caught (and
# ci/route-alloc.sh routes it, adding the include, idempotently); method calls and prefixed
# names are not flagged.
set -u
ROOT=${DPCERT_ROOT:?}
fail=0
out=$("$ROOT/ci/check-alloc.sh" "$ROOT" 2>&1); rc=$?
if [ $rc = 0 ]; then echo "ok: $out"; else echo "FAIL: the tree has direct heap calls:"; printf '%s\n' "$out" | tail -20; fail=1; fi
mkdir -p s/common s/accountant s/reference s/optimized/tests s/conformance s/attacks
cat > s/common/x.c <<'C'
/* scratch */
#include "common/status.h"
#include <stdlib.h>
void f(void) { char *p = malloc(4); free(p); p = strdup("a"); free (p); }
C
cat > s/common/ok.c <<'C'
#include "common/fsutil.h"
struct be { void (*free)(void *); };
void g(struct be *b, struct be v) { b->free(0); v.free(0); fftw_free(0); OPENSSL_free(0); dp_free(0); }
C
printf '#include "x.h"\nvoid h(void) { free(0); }\n' > s/attacks/noinc.c
printf 'void t(void) { free(0); }\n' > s/optimized/tests/test_skip.c
"$ROOT/ci/check-alloc.sh" s > c1.txt 2>&1; rc=$?
if [ $rc = 1 ] && grep -q 'common/x.c:4' c1.txt && grep -q 'attacks/noinc.c' c1.txt && ! grep -q 'ok.c\|test_skip' c1.txt; then
  echo "ok: a direct call is caught, method calls, prefixed names and tests are not"
else echo "FAIL: control: exit $rc: $(cat c1.txt)"; fail=1; fi
"$ROOT/ci/route-alloc.sh" s > r1.txt 2>&1 && "$ROOT/ci/check-alloc.sh" s > c2.txt 2>&1; rc=$?
if [ $rc = 0 ] && grep -q 'dp_malloc(4)' s/common/x.c && grep -q 'dp_strdup("a")' s/common/x.c &&
   grep -q '^#include "common/alloc.h"' s/attacks/noinc.c && ! grep -q 'common/alloc.h' s/common/x.c &&
   grep -q 'b->free(0); v.free(0); fftw_free' s/common/ok.c; then
  echo "ok: route-alloc routes the scratch tree and adds the include where needed"
else echo "FAIL: route-alloc on the scratch tree: $(cat r1.txt c2.txt)"; fail=1; fi
sum1=$(cat s/common/*.c s/attacks/*.c | cksum); "$ROOT/ci/route-alloc.sh" s >/dev/null; sum2=$(cat s/common/*.c s/attacks/*.c | cksum)
[ "$sum1" = "$sum2" ] && echo "ok: route-alloc is idempotent" || { echo "FAIL: a second route-alloc run changed files"; fail=1; }
exit $fail
