#!/usr/bin/env bash
# conformance/tests/reproduce_cli.sh — `dpcert reproduce`: --list names every target with
# its paper, tables and what is modelled or measured; every target finishes in under a
# minute of CPU (its measured runs included), prints the kind and the verdict of every
# row, the per-kind summary, its expected verdict, exit code and number of differing rows
# (docs/reproduce.md, "Result" of each target); bad usage exits 2 naming the problem. The
# rows' values against independent computations: test_reproduce.c.
set -u
D=${DPCERT:?DPCERT not set}
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
TARGETS="dpzo-tables longshield-table2 longshield-memory longshield-comm longshield-claims dp-zero-memory dp-zero-time flashdp-memory dp-zero-losscale"

"$D" reproduce --list >list.txt; rc=$?
check "--list exits 0" '[ $rc -eq 0 ]'
for t in $TARGETS; do
  check "--list names $t with its paper and tables" 'grep -Eq "^$t +[A-Za-z].*: .*([Tt]able|[Ss]ection)" list.txt'
done
check "--list: no target unavailable" '! grep -q "UNAVAILABLE" list.txt'
"$D" reproduce --list --json >list.json; rc=$?
check "--list --json" '[ $rc -eq 0 ] && grep -q "\"modelled_vs_measured\"" list.json && [ "$(grep -c "\"target\"" list.json)" -eq 9 ]'

KINDS='(independent|measured|arithmetic|bound-only|derived|not-in-paper)'
# target, expected exit code, expected verdict, expected "N row(s) differ"
expect() {
  local t=$1 want_rc=$2 want_verdict=$3 want_bad=$4 cpu rc TIMEFORMAT='%U %S'
  # the budget is CPU seconds (user + system of the target and the runs it waits for): the
  # wall clock of a loaded machine would measure the other processes
  { time "$D" reproduce "$t" >"$t.txt" 2>"$t.err"; } 2>"$t.time"; rc=$?
  cpu=$(awk '{printf "%d", $1 + $2}' "$t.time")
  echo "$t: exit $rc in $cpu CPU s"
  check "$t: exit $want_rc" '[ $rc -eq $want_rc ]'
  # the one-minute budget is for the optimized build (a sanitizer build runs several times slower)
  case "${DPCERT_BUILD:-}" in *-san*) echo "     $t: not timed (sanitizer build)" ;;
    *) check "$t: under a minute of CPU" '[ "$cpu" -lt 60 ]' ;; esac
  check "$t: verdict $want_verdict" 'grep -qx "verdict: $want_verdict" "$t.txt"'
  check "$t: $want_bad row(s) differ" 'grep -q "^$want_bad row(s) differ, 0 not run" "$t.txt"'
  check "$t: a kind column and a summary by kind" 'grep -Eq "^[a-z].* kind +verdict" "$t.txt" && grep -q "^summary by kind" "$t.txt" && grep -Eq "^  $KINDS " "$t.txt"'
  # every data row of the main table (header .. first blank line, caveat or summary) ends in kind, verdict
  local rows bad
  rows=$(awk '/^summary by kind|^caveat:|^$/ {f=0} f {print} / kind +verdict/ {f=1}' "$t.txt" | wc -l)
  bad=$(awk '/^summary by kind|^caveat:|^$/ {f=0} f {print} / kind +verdict/ {f=1}' "$t.txt" | grep -Evc " $KINDS +(match|differs: .+|n/a \(.+\)|not run: .+|CONSISTENT|UNDER-REPORTED|INCONCLUSIVE)")
  check "$t: a kind and a verdict on each of its $rows rows" '[ "$rows" -gt 0 ] && [ "$bad" -eq 0 ]'
}
expect dpzo-tables 1 DIFFERS 1
check "dpzo-tables: Table 11 row is independent and CONSISTENT" 'grep -Eq "^11 +gaussian +15.9 .* 0.35 .*independent +CONSISTENT" dpzo-tables.txt'
check "dpzo-tables: Table 8 is the paper's arithmetic, row 5 UNDER-REPORTED" \
  '[ "$(grep -Ec "^8 +laplace .* arithmetic " dpzo-tables.txt)" -eq 5 ] && grep -Eq "^8 +laplace +2.3 .*arithmetic +UNDER-REPORTED" dpzo-tables.txt'
expect longshield-table2 1 DIFFERS 4
check "longshield-table2: 8 of 9 independent outcomes; the 8B infinite-GPU column differs" \
  'grep -q "^reproduced: 8 of 9 " longshield-table2.txt && [ "$(grep "differs" longshield-table2.txt | grep -c "Llama 3.1 8B  inf ")" -eq 4 ]'
check "longshield-table2: the sensitivity table, one row per choice" \
  'grep -q "^Sensitivity of Table 2" longshield-table2.txt && [ "$(grep -Ec "^(book-keeping|mixed-ghost rule|logit upcast|capacity) " longshield-table2.txt)" -eq 5 ]'
expect longshield-memory 1 DIFFERS 26
check "longshield-memory: no 'fits' rule, no stale CP caveat" '! grep -q "match (fits)" longshield-memory.txt && ! grep -qi "model only" longshield-memory.txt'
expect longshield-comm 0 REPRODUCED 0
check "longshield-comm: 6 measured rows match" 'grep -Eq "^  measured +6 +6 +0 +0 +0" longshield-comm.txt'
expect longshield-claims 1 DIFFERS 8
expect dp-zero-memory 1 DIFFERS 1
expect dp-zero-time 1 DIFFERS 5
expect flashdp-memory 1 DIFFERS 43
check "flashdp-memory: no FlashDP row matches by assumption" '! grep -E "FlashDP .*DP overhead" flashdp-memory.txt | grep -q " match$"'
expect dp-zero-losscale 77 UNCORROBORATED 0
check "dp-zero-losscale: Table 3's DP ghost Gram overflows, Table 4 has the six pipelines and dynamic" \
  'grep -Eq "DP w/ scaling .*ghost vec\(dL/ds .*1e0\.\.1e6 \(fp16: overflow\) +derived +match" dp-zero-losscale.txt && [ "$(grep -c "^4 .*fp16 issue" dp-zero-losscale.txt)" -eq 7 ]'
"$D" reproduce dp-zero-losscale --json >ls.json; rc=$?
check "dp-zero-losscale --json: derived rows match, dp-dynamic not in the paper, the losscale rows" \
  '[ $rc -eq 77 ] && python3 -c "import json,sys; t=json.load(open(\"ls.json\")); r=t[\"rows\"]; assert all(x[\"verdict\"]==\"match\" for x in r if x[\"kind\"]==\"derived\"); assert [x for x in r if \"dp-dynamic\" in x[\"row\"]][0][\"kind\"]==\"not-in-paper\"; assert len(t[\"losscale\"][\"rows\"])==42; assert t[\"verdict\"]==\"UNCORROBORATED\""'
"$D" reproduce nosuch 2>err.txt; rc=$?
check "unknown target: exit 2 naming it and the known ones" '[ $rc -eq 2 ] && grep -q "nosuch" err.txt && grep -q "longshield-table2" err.txt'
"$D" reproduce 2>err.txt; rc=$?
check "no target: exit 2" '[ $rc -eq 2 ] && grep -q "TARGET" err.txt'
"$D" reproduce dp-zero-memory --bogus 2>err.txt; rc=$?
check "unknown option: exit 2 naming it" '[ $rc -eq 2 ] && grep -q -- "--bogus" err.txt'
"$D" reproduce dp-zero-memory --dpcert /nonexistent/dpcert 2>err.txt; rc=$?
check "--dpcert not an executable: exit 2 naming it" '[ $rc -eq 2 ] && grep -q -- "--dpcert" err.txt'
: > afile
"$D" reproduce dp-zero-memory --report afile >/dev/null 2>err.txt; rc=$?
check "--report onto a file: exit 2 naming --report" '[ $rc -eq 2 ] && grep -q -- "--report" err.txt'
exit $fail
