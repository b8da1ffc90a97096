#!/usr/bin/env bash
# attacks/tests/mia_dataset_files.sh — `dpcert mia --dataset FILE` (attacks/mia_data.c, docs/audits.md
# "Data"), fast: every malformed layout exits 2 with a message naming the file, the line and the
# defect (header numbers, class count, field count, non-finite numbers, labels, extra rows, a
# missing file, --population beyond the data); a well-formed file (also with CRLF line ends and
# blanks around the fields) loads and the run reports "N examples of FILE"; the shipped
# breast-cancer set passes its SHA-256 check and reports its size. The full audit on real data
# is attacks/tests/mia_dataset_slow.sh. Each check fails when the parser accepts the defect
# (exit 0/1 instead of 2) or words it without the file and line.
set -u
D=${DPCERT:?}
. "${DPCERT_ROOT:?}/attacks/tests/cli_check.inc"
cli_require mia
run="--models 4 --steps 5 --epsilons 8 --no-dpzo --quiet --noise-key 2"
# bad NAME WHAT PATTERN LINES...: the file NAME.csv of LINES must exit 2 with PATTERN (grep -E) in the message
bad() {
  local name=$1 what=$2 pat=$3; shift 3
  printf '%s\n' "$@" > "$name.csv"
  check 2 "$what" $D mia --dataset "$name.csv" $run
  grep -Eq -- "$pat" out.txt || { echo "FAIL: $what: message does not match /$pat/: $(head -c 300 out.txt)"; fail=1; }
}
bad hdrnum "header: n is not a number" "hdrnum.csv: line 1: expected a finite number" 'x,2,a,b' '1,2,0'
bad hdrzero "header: n = 0" "hdrzero.csv: line 1: n = 0 and d = 2 must be integers" '0,2,a,b'
bad hdrfrac "header: fractional n" "hdrfrac.csv: line 1: n = 1.5" '1.5,2,a,b' '1,2,0'
bad hdrwide "header: d above 4096" "hdrwide.csv: line 1: n = 1 and d = 5000" '1,5000,a,b' '1,2,0'
bad onecls "header: one class" "onecls.csv: line 1 names 1 classes \(at least 2\)" '1,2,a' '1,2,0'
bad nocls "header: no class names" "nocls.csv: line 1: expected ','" '1,2'
bad few "a row with too few fields" "few.csv: line 3: expected ','" '2,2,a,b' '1,2,0' '3,4'
bad many "a row with too many fields" "many.csv: line 2: expected the end of the line" '2,2,a,b' '1,2,0,7' '3,4,1'
bad nan "a NaN feature" "nan.csv: line 3: expected a finite number" '2,2,a,b' '1,2,0' 'nan,4,1'
bad huge "an overflowing feature" "huge.csv: line 2: expected a finite number" '2,2,a,b' '1e999,2,0' '3,4,1'
bad word "a word for a number" "word.csv: line 2: expected a finite number" '2,2,a,b' 'one,2,0' '3,4,1'
bad lab2 "a label past the classes" "lab2.csv: line 3: label 2 is not an integer in \[0, 2\)" '2,2,a,b' '1,2,0' '3,4,2'
bad labneg "a negative label" "labneg.csv: line 2: label -1 is not" '2,2,a,b' '1,2,-1' '3,4,1'
bad labfrac "a fractional label" "labfrac.csv: line 2: label 0.5 is not" '2,2,a,b' '1,2,0.5' '3,4,1'
bad extra "more rows than n" "extra.csv: more than n = 2 rows" '2,2,a,b' '1,2,0' '3,4,1' '5,6,0'
bad short "fewer rows than n" "short.csv: line 4: expected a finite number" '3,2,a,b' '1,2,0' '3,4,1'
check 2 "a missing file" $D mia --dataset no-such.csv $run
grep -q -- "--dataset.*no-such.csv" out.txt || { echo "FAIL: the message does not name --dataset and the file"; fail=1; }
: > empty.csv
check 2 "an empty file" $D mia --dataset empty.csv $run
grep -q "empty.csv" out.txt || { echo "FAIL: the message does not name the file"; fail=1; }

# a well-formed file: 40 rows of 3 features (the third constant: standardised to 0), 2 classes
awk 'BEGIN { print "40,3,neg,pos"; for (i = 0; i < 40; i++) printf "%d.5,%d,7,%d\n", i % 7, (i * 3) % 11, i % 2 }' > ok.csv
check 2 "--population beyond the data" $D mia --dataset ok.csv $run --population 41
grep -q "the data set ok.csv has 40 examples" out.txt || { echo "FAIL: the message does not give the size"; fail=1; }
for f in ok crlf; do
  [ $f = crlf ] && sed 's/,/ ,\t/g; s/$/\r/' ok.csv > crlf.csv   # blanks before the commas, CRLF line ends
  "$D" mia --dataset $f.csv $run --population 32 > out.txt 2>&1; rc=$?
  if { [ $rc = 0 ] || [ $rc = 1 ]; } && grep -q "on 32 examples of $f.csv" out.txt; then echo "ok: $f.csv loads (exit $rc)"
  else echo "FAIL: $f.csv: exit $rc, or not 32 examples: $(head -c 300 out.txt)"; fail=1; fi
  sed -n 's/.*non-DP control: train accuracy \([0-9.]*\).*/\1/p' out.txt > acc-$f.txt
done
# the same numbers whatever the blanks and line ends: the same training (the accuracy line agrees)
if [ -s acc-ok.txt ] && cmp -s acc-ok.txt acc-crlf.txt; then echo "ok: CRLF and blanks read as the same data"
else echo "FAIL: CRLF file trains differently ($(cat acc-ok.txt) vs $(cat acc-crlf.txt))"; fail=1; fi

# the shipped data set: its SHA-256 holds, and its size is in the --population message
check 2 "breast-cancer: --population beyond its 569 examples" $D mia --dataset breast-cancer $run --population 600
grep -q "has 569 examples" out.txt || { echo "FAIL: breast-cancer not loaded or size not given: $(head -c 300 out.txt)"; fail=1; }
exit $fail
