#!/usr/bin/env bash
# conformance/tests/reproduce_cli.sh — `dpcert reproduce`: --list names every target with
# its paper, tables and what is modelled; every available target finishes in under a
# minute, prints a verdict on every row and its expected exit code and not-reproduced
# count (docs/reproduce.md, "Result" of each target); the unavailable target exits 3
# naming issue 11; bad usage exits 2 naming the problem.
set -u
D=${DPCERT:?DPCERT not set}
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

"$D" reproduce --list >list.txt; rc=$?
check "--list exits 0" '[ $rc -eq 0 ]'
for t in dpzo-tables longshield-table2 longshield-memory dp-zero-memory flashdp-memory dp-zero-losscale; do
  check "--list names $t with its paper and tables" 'grep -Eq "^$t +[A-Za-z].*: .*Table" list.txt'
done
check "--list: dp-zero-losscale is available (issue 11)" '! grep -A1 "^dp-zero-losscale" list.txt | grep -q "UNAVAILABLE"'
"$D" reproduce --list --json >list.json; rc=$?
check "--list --json" '[ $rc -eq 0 ] && grep -q "\"modelled_vs_measured\"" list.json && [ "$(grep -c "\"target\"" list.json)" -eq 6 ]'

# target, expected exit code, expected "N row(s) not reproduced", verdict words of its rows
expect() {
  local t=$1 want_rc=$2 want_bad=$3 words=$4 cpu rc TIMEFORMAT='%U %S'
  # the budget is CPU seconds (user + system, the target is single-threaded): the wall
  # clock of a loaded machine would measure the other processes
  { time "$D" reproduce "$t" >"$t.txt" 2>"$t.err"; } 2>"$t.time"; rc=$?
  cpu=$(awk '{printf "%d", $1 + $2}' "$t.time")
  echo "$t: exit $rc in $cpu CPU s"
  check "$t: exit $want_rc" '[ $rc -eq $want_rc ]'
  # the one-minute budget is for the optimized build (a sanitizer build runs several times slower)
  case "${DPCERT_BUILD:-}" in *-san*) echo "     $t: not timed (sanitizer build)" ;;
    *) check "$t: under a minute of CPU" '[ "$cpu" -lt 60 ]' ;; esac
  check "$t: $want_bad row(s) not reproduced" 'grep -q "^$want_bad row(s) not reproduced" "$t.txt"'
  # every data row (after the header line) ends in a verdict
  local rows bad
  rows=$(awk 'f && !/^caveat:/ && !/row\(s\) not reproduced/ {print} /verdict/ {f=1}' "$t.txt" | wc -l)
  bad=$(awk 'f && !/^caveat:/ && !/row\(s\) not reproduced/ {print} /verdict/ {f=1}' "$t.txt" | grep -Evc "$words")
  check "$t: a verdict on each of its $rows rows" '[ "$rows" -gt 0 ] && [ "$bad" -eq 0 ]'
}
expect longshield-table2 1 4 ' (match|differs: .+)$'
expect longshield-memory 1 4 ' (match \((fits|OOM)\)|match|differs: .+)$'
expect dp-zero-memory 1 1 ' (match|n/a \(computed\)|differs: .+)$'
expect flashdp-memory 1 31 ' (match|n/a \(paper: failed\)|differs: .+)$'
expect dpzo-tables 1 1 '(CONSISTENT|UNDER-REPORTED|INCONCLUSIVE)'
check "dpzo-tables: Table 11 row is CONSISTENT" 'grep -Eq "^11 +gaussian +15.9 .* 0.35 .*CONSISTENT" dpzo-tables.txt'
check "longshield-table2: the 8B infinite-GPU cells are the ones that differ" \
  '[ "$(grep -c "differs" longshield-table2.txt)" -eq 4 ] && [ "$(grep "differs" longshield-table2.txt | grep -c "Llama 3.1 8B .* inf ")" -eq 4 ]'

expect dp-zero-losscale 0 0 ' match$'
check "dp-zero-losscale: Table 3's DP ghost Gram overflows, Table 4 has the six pipelines and dynamic" \
  'grep -Eq "DP w/ scaling .*ghost vec\(dL/ds .*1e0\.\.1e6 \(fp16: overflow\) +match" dp-zero-losscale.txt && [ "$(grep -c "^4 .*fp16 issue" dp-zero-losscale.txt)" -eq 7 ]'
"$D" reproduce dp-zero-losscale --json >ls.json; rc=$?
check "dp-zero-losscale --json: rows with verdicts and the losscale side-by-side rows" \
  '[ $rc -eq 0 ] && python3 -c "import json,sys; d=json.load(open(\"ls.json\")); t=d[\"targets\"][0] if \"targets\" in d else d; r=t[\"rows\"]; assert all(x[\"verdict\"]==\"match\" for x in r); assert len(t[\"losscale\"][\"rows\"])==42"'
"$D" reproduce nosuch 2>err.txt; rc=$?
check "unknown target: exit 2 naming it and the known ones" '[ $rc -eq 2 ] && grep -q "nosuch" err.txt && grep -q "longshield-table2" err.txt'
"$D" reproduce 2>err.txt; rc=$?
check "no target: exit 2" '[ $rc -eq 2 ] && grep -q "TARGET" err.txt'
"$D" reproduce dp-zero-memory --bogus 2>err.txt; rc=$?
check "unknown option: exit 2 naming it" '[ $rc -eq 2 ] && grep -q -- "--bogus" err.txt'
: > afile
"$D" reproduce dp-zero-memory --report afile >/dev/null 2>err.txt; rc=$?
check "--report onto a file: exit 2 naming --report" '[ $rc -eq 2 ] && grep -q -- "--report" err.txt'
exit $fail
