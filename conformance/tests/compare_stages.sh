#!/usr/bin/env bash
# conformance/tests/compare_stages.sh — the comparison's stage table (compare_step.c, printed by
# `dpcert compare --stages`) follows docs/tolerances.md section by section: every row names a
# heading that exists in the document and, where it names a numbered item ("## H / N."), that
# item exists under the heading and mentions the row's first tensor name; DP-SGD's numbered rows
# come in the document's order (1, 2, 3, ...). Negative controls: a row naming a missing heading,
# a missing item, and an item that does not mention the row's tensor must each be refused by the
# same checker. Deterministic.
set -u
D=${DPCERT:?}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DOC="$ROOT/docs/tolerances.md"
fail=0
# check_row HEADING ITEM FIRST_TENSOR DOCFILE: 0 when the heading exists and (ITEM given) the item
# "ITEM **" (or "ITEM ") starts a line under it, before the next "## ", and its text names FIRST_TENSOR.
check_row() {
  awk -v h="$1" -v it="$2" -v t="$3" '
    $0 == h { inh = 1; found_h = 1; next }
    inh && /^## / { inh = 0 }
    inh && it != "" && index($0, it " ") == 1 { initem = 1; found_i = 1; if (index($0, t)) named = 1; next }
    initem && /^[0-9]+\. / { initem = 0 }
    initem && index($0, t) { named = 1 }
    END { exit !(found_h && (it == "" || (found_i && named))) }' "$4"
}
"$D" compare --stages >stages.txt 2>err.txt || { echo "FAIL: compare --stages exit $?: $(cat err.txt)"; exit 1; }
rows=0; last=0
while IFS=$'\t' read -r alg n family doc; do
  case $alg in '#'*) continue;; esac
  rows=$((rows + 1))
  heading=${doc%% / *}; item=""; [ "$heading" != "$doc" ] && item=${doc##* / }
  first=${family%%[ ,;(]*}; first=${first%%\[*}; first=${first%%\|*}; first=${first%\*}; first=${first%.}
  if check_row "$heading" "$item" "$first" "$DOC"; then echo "ok: $alg $n ($first): $doc"
  else echo "FAIL: $alg stage $n ($family): '$doc' not found in docs/tolerances.md (or the item does not name $first)"; fail=1; fi
  if [ "$alg" = dpsgd ] && [ -n "$item" ]; then
    k=${item%.}; [ "$k" -gt "$last" ] || { echo "FAIL: dpsgd stage $n cites item $k after item $last"; fail=1; }; last=$k
  fi
done <stages.txt
[ "$rows" -ge 10 ] || { echo "FAIL: only $rows stage rows printed"; fail=1; }
# negative controls: the checker must refuse what is not in the document
H="## Stages (DP-SGD), in comparison order"
check_row "## No such section" "" "x" "$DOC" && { echo "FAIL: control: a missing heading was accepted"; fail=1; }
check_row "$H" "42." "per_sample.norm" "$DOC" && { echo "FAIL: control: a missing item was accepted"; fail=1; }
check_row "$H" "2." "step.private_grad" "$DOC" && { echo "FAIL: control: an item not naming the tensor was accepted"; fail=1; }
check_row "$H" "2." "per_sample.norm" "$DOC" || { echo "FAIL: control: a true row was refused"; fail=1; }
"$D" compare --stages a b >/dev/null 2>err.txt; rc=$?
[ $rc = 2 ] && grep -q -- '--stages takes no exports' err.txt && echo "ok: --stages with exports: exit 2" ||
  { echo "FAIL: --stages with exports: exit $rc"; fail=1; }
exit $fail
