#!/usr/bin/env bash
# ci/tests/conformance_layers.sh — conformance/ stays separate products (issue 26 item 4):
# ci/conformance-layers.sh on this tree and this build finds no include or call circle
# between the subfolders of conformance/ and no call circle between certification's files.
# Negative controls (each must FAIL): a synthetic tree whose two products include each
# other; one whose objects call each other; one with two certify files calling each other;
# a file left at the top of conformance/. A control that passes means the check is blind.
set -u
source "$DPCERT_ROOT/common/tests/check_lib.bash"
L=$DPCERT_ROOT/ci/conformance-layers.sh
ls "$DPCERT_BUILD"/obj/conformance/*/*.o > /dev/null 2>&1 || { echo "SKIP: $DPCERT_BUILD has no conformance objects"; exit 77; }
out=$(bash "$L" --build "$DPCERT_BUILD" 2>&1); rc=$?
echo "$out"
check "this tree: exit 0" test $rc = 0
check "this tree: the call check ran" grep -q '^ok    calls between conformance/ products' <<< "$out"
check "this tree: certify's files checked" grep -q '^ok    calls between the files of conformance/certify' <<< "$out"

CC=${CC:-cc}
mk() { # $1 tree, $2 product, $3 file base, $4 source text
    mkdir -p "$1/conformance/$2" "$1/build/obj/conformance/$2"
    printf '%s\n' "$4" > "$1/conformance/$2/$3.c"
    $CC -c -I"$1" "$1/conformance/$2/$3.c" -o "$1/build/obj/conformance/$2/$3.o"
}
T=$PWD/neg-include
mkdir -p "$T/conformance/alpha" "$T/conformance/beta"
printf '#include "conformance/alpha/a.h"\n' > "$T/conformance/beta/b.h"
printf 'int fa(void);\n' > "$T/conformance/alpha/a.h"
mk "$T" alpha a '#include "conformance/beta/b.h"
int fa(void) { return 1; }'
mk "$T" beta b 'int fb(void) { return 2; }'
out=$(bash "$L" --root "$T" --build "$T/build" 2>&1); rc=$?
echo "$out"
check "negative control (include circle alpha <-> beta): exit 1" test $rc = 1
check "negative control (include circle): reported" grep -q '^FAIL  includes' <<< "$out"

T=$PWD/neg-call
mk "$T" alpha a 'int fb(void); int fa(void) { return fb(); }'
mk "$T" beta b 'int fa(void); int fb(int x) { return x ? fa() : 0; }'
out=$(bash "$L" --root "$T" --build "$T/build" 2>&1); rc=$?
echo "$out"
check "negative control (call circle alpha <-> beta): exit 1" test $rc = 1
check "negative control (call circle): reported" grep -q '^FAIL  calls between conformance/ products' <<< "$out"

T=$PWD/neg-certify
mk "$T" certify driver 'int cert_helper(void); int cert_drive(void) { return cert_helper(); }'
mk "$T" certify eval 'int cert_drive(void); int cert_helper(void) { return 0; } int cert_eval(void) { return cert_drive(); }'
out=$(bash "$L" --root "$T" --build "$T/build" 2>&1); rc=$?
echo "$out"
check "negative control (certify driver <-> evaluator): exit 1" test $rc = 1
check "negative control (certify files): reported" grep -q '^FAIL  calls between the files of conformance/certify' <<< "$out"

T=$PWD/neg-top
mk "$T" alpha a 'int fa(void) { return 1; }'
printf 'int stray;\n' > "$T/conformance/stray.c"
bash "$L" --root "$T" --build "$T/build"; rc=$?
check "negative control (a file at the top of conformance/): exit 1" test $rc = 1
echo "$checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]
