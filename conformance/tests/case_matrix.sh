#!/usr/bin/env bash
# conformance/tests/case_matrix.sh — the conformance case list is what the snapshot says: the
# hand-written case files plus the expansion of the case matrices (conformance/cases/matrix/,
# docs/conformance.md "Case matrices"), as `dpcert conform --expand-cases` writes them, have
# exactly the names and sha256 digests of conformance/tests/data/cases-snapshot.txt (a case
# changed on purpose updates the snapshot in the same commit: docs/conformance.md).
# Negative controls, each must fail as stated: one value changed in a matrix changes digests;
# a hand-written file that repeats an expanded case with another content, a matrix with an
# unknown key, a template with an unknown variable and a rule on an undefined variable or axis value are refused (exit 2, naming them); an
# identical repeat is accepted (kept once).
set -u
D=${DPCERT:?}
R=${DPCERT_ROOT:?}
SNAP=$R/conformance/tests/data/cases-snapshot.txt
out=$("$D" conform --help 2>&1) || { echo "SKIP: 'dpcert conform' is not available in $D: $out"; exit 77; }
fail=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

digests() { # CASES_DIR OUT_DIR -> "name sha256" lines, sorted
  rm -rf "$2"
  "$D" conform --suite all --cases "$1" --expand-cases "$2" >"$T/expand.log" 2>&1 || { cat "$T/expand.log"; return 1; }
  (cd "$2" && sha256sum -- *.json) | awk '{n = $2; sub(/\.json$/, "", n); print n, $1}' | LC_ALL=C sort
}

# 1. the committed cases equal the snapshot, name by name
if ! digests "$R/conformance/cases" "$T/exp" > "$T/now.txt"; then
  echo "FAIL: --expand-cases of the committed cases failed"; fail=1
elif ! diff "$SNAP" "$T/now.txt" > "$T/diff.txt"; then
  echo "FAIL: the case list differs from $SNAP (< snapshot, > now):"; head -40 "$T/diff.txt"; fail=1
else
  echo "PASS: $(wc -l < "$T/now.txt") cases ($(ls "$R/conformance/cases/matrix/"*.json | wc -l) matrices + $(ls "$R/conformance/cases/"*.json | wc -l) files) equal the snapshot"
fi
nmat=$(grep -c '' "$SNAP")
[ "$nmat" -gt 400 ] || { echo "FAIL: the snapshot has only $nmat cases"; fail=1; }

# 2. negative control: one value of a matrix changed -> the check fails
cp -r "$R/conformance/cases" "$T/mut"
sed -i 's/"noise-key": 12345}/"noise-key": 12346}/' "$T/mut/matrix/strategy-grid.json"
cmp -s "$R/conformance/cases/matrix/strategy-grid.json" "$T/mut/matrix/strategy-grid.json" &&
  { echo "FAIL: the mutation did not apply"; fail=1; }
if digests "$T/mut" "$T/exp-mut" > "$T/mut.txt" && ! diff -q "$SNAP" "$T/mut.txt" >/dev/null; then
  echo "PASS (control): a changed matrix value changes $(diff "$SNAP" "$T/mut.txt" | grep -c '^>') digests"
else
  echo "FAIL (control): a changed matrix value went unnoticed"; fail=1
fi

# 3. a hand-written file equal to an expanded case is kept once; a different one is refused
name=zero1-mlp-flat-abadi-grad-sample
cp -r "$R/conformance/cases" "$T/dup"
cp "$T/exp/$name.json" "$T/dup/$name.json"
n0=$("$D" conform --suite all --list --cases "$R/conformance/cases" | wc -l)
n1=$("$D" conform --suite all --list --cases "$T/dup" 2>"$T/dup.err" | wc -l)
if [ "$n1" -eq "$n0" ] && [ "$n0" -gt 0 ]; then echo "PASS: an identical hand-written repeat is kept once ($n1 runs)"
else echo "FAIL: identical repeat: $n1 runs, expected $n0"; cat "$T/dup.err"; fail=1; fi
sed -i 's/"lr": 1/"lr": 2/' "$T/dup/$name.json"
"$D" conform --suite all --list --cases "$T/dup" >/dev/null 2>"$T/dup.err"; rc=$?
if [ $rc -eq 2 ] && grep -q "'$name' is defined by .*$name.json and by .*strategy-grid.json.*different content" "$T/dup.err"; then
  echo "PASS: a different hand-written repeat is refused: $(head -c 200 "$T/dup.err")"
else echo "FAIL: a different repeat: exit $rc: $(cat "$T/dup.err")"; fail=1; fi

# 4. strict matrix schema: unknown keys and unknown template variables exit 2 naming them
refused() { # WHAT SED_EXPR NEEDLE
  rm -rf "$T/bad"; cp -r "$R/conformance/cases" "$T/bad"
  sed -i "$2" "$T/bad/matrix/cp-grid.json"
  "$D" conform --suite all --list --cases "$T/bad" >/dev/null 2>"$T/bad.err"; local rc=$?
  if [ $rc -eq 2 ] && grep -q "cp-grid.json" "$T/bad.err" && grep -q -- "$3" "$T/bad.err"; then echo "PASS: $1 refused: $(head -c 160 "$T/bad.err")"
  else echo "FAIL: $1: exit $rc: $(cat "$T/bad.err")"; fail=1; fi
}
refused "an unknown root key" 's/^ "matrix": "cp_grid",/ "matrix": "cp_grid", "colour": 1,/' "unknown key 'colour'"
refused "an unknown key of an axis value" 's/{"value": "ring", "case"/{"value": "ring", "colour": 1, "case"/' "unknown key 'colour'"
refused "an unknown template variable" 's/llama-{clipping}-T{t}/llama-{clipping}-T{tee}/' "unknown variable {tee}"
refused "a rule on nothing" 's/"when": {"variant": "ckpt"}, "case"/"when": {"variant": "ckpt"}, "exclude": false, "case"/' "'exclude' must be true"
refused "a rule on an axis value that does not exist" 's/"when": {"variant": "ckpt"}, "case"/"when": {"variant": "chkpt"}, "case"/' "not a value of the axis 'variant'"
refused "a rule on an undefined variable" 's/"when": {"variant": "ckpt"}, "case"/"when": {"varient": "ckpt"}, "case"/' "undefined variable 'varient'"
refused "a case key the schema lacks" 's/"clip_mix": false/"clip_mix": false, "colour": 1/' "unknown key 'colour'"
exit $fail
