#!/usr/bin/env bash
# attacks/tests/audit_cli.sh — `dpcert audit`: the CI level on the default release (the
# reference, Dirac canary, plus the one-run audit) passes in under 60 s (wall clock; not
# checked in sanitizer and coverage builds); the audit key is fixed, so the verdict is deterministic (over keys a
# correct release fails with probability <= 0.05 + 0.05 at the default confidence), writes a
# parseable report.json with ROC data and an SVG; a planted bug (negative control, needs
# DPCERT_TEST_INJECT=1) exits 1 with both numbers; the one-run audit runs on the engine too
# (and catches no-clip there); bad input exits 2 naming the option.
set -u
D=${DPCERT:?}
. "${DPCERT_ROOT:?}/attacks/tests/cli_check.inc"
cli_require audit
t0=$(date +%s)
check 0 "audit --level ci" $D audit --level ci --noise-key 3 --report rep --quiet
t1=$(date +%s)
echo "audit --level ci: $((t1 - t0)) s"; sed 's/^/  | /' out.txt
# the 60 s requirement is the optimized build's; an ASan+UBSan build (build-san) and the
# coverage build (build-cov, -O0 with counters) are slower
case "${DPCERT_BUILD:-}" in
  *san*|*cov*) echo "(sanitizer or coverage build: time not checked)";;
  *) [ $((t1 - t0)) -lt 60 ] || { echo "FAIL: audit --level ci took $((t1 - t0)) s (>= 60)"; fail=1; };;
esac
python3 - <<'PY' || fail=1
import json, sys
r = json.load(open("rep/report.json"))
wb = r["white_box"]
ok = (r["format"] == "dpcert-audit-report/1" and r["verdict"] == "PASS" and len(wb["roc"]["fpr"]) >= 2
      and wb["epsilon_lb_gaussian"] <= wb["epsilon_claimed"] and r["one_run"]["canaries"] == 1000)
print("ok: report.json" if ok else "FAIL: report.json content")
sys.exit(0 if ok else 1)
PY
grep -q "<polyline" rep/roc.svg || { echo "FAIL: roc.svg has no curve"; fail=1; }
small="--in 8 --hidden 16 --classes 4 --dataset-size 8 --level custom --trials 1000 --onerun-canaries 0 --quiet"
check 0 "engine, input canary" $D audit --impl optimized --backend host $small --noise-key 4
check 0 "DP-ZO engine" $D audit --algo dpzo --impl optimized $small --noise-key 4
# the one-run audit on the engine (input canaries, dual-basis scores; docs/audits.md): a
# model wide enough for 300 canaries (hidden 128,128), sigma 2 (claim 1.99), 100 guesses.
# Correct engine: PASS (a false FAIL has probability <= 0.05 by the theorem; the key is
# fixed); planted no-clip (canary gradients >= 4 C unclipped): 95/100 correct guesses,
# epsilon_LB 2.17 > 1.99 at key 3 (FAIL); half-noise is not caught at this size (0.61).
eng="--hidden 128,128 --sigma 2 --level custom --trials 200 --onerun-canaries 300 --onerun-guesses 100 --quiet"
check 0 "one-run audit on the engine" $D audit --impl optimized $eng --noise-key 3 --report eng
grep "one-run" out.txt | sed 's/^/  | /'
python3 - <<'PY' || fail=1
import json, sys
r = json.load(open("eng/report.json"))
o = r["one_run"]
ok = (o is not None and o["impl"] == "optimized" and o["canary"] == "input" and o["canaries"] == 300
      and o["verdict"] == "PASS" and o["epsilon_lb"] <= o["epsilon_claimed"] and r["white_box"]["verdict"] == "PASS")
print(("ok" if ok else "FAIL") + ": engine one-run beside the white-box audit in report.json")
sys.exit(0 if ok else 1)
PY
DPCERT_TEST_INJECT=1 check 1 "one-run on the engine catches no-clip" $D audit --impl optimized $eng --noise-key 3 --plant no-clip
grep -q "FAIL: one-run (optimized, input canaries)" out.txt || { echo "FAIL: the engine's one-run audit did not FAIL"; fail=1; }
check 2 "engine one-run: more canaries than parameters" $D audit --impl optimized --in 8 --hidden 16 --classes 4 \
  --level custom --trials 100 --quiet --onerun-canaries 5000
grep -q "cannot be represented" out.txt || { echo "FAIL: message does not say the canaries cannot be represented"; fail=1; }
check 2 "one-run: odd guesses" $D audit --impl optimized --level custom --trials 100 --quiet --onerun-canaries 100 --onerun-guesses 7
DPCERT_TEST_INJECT=1 check 1 "planted half-noise caught" $D audit $small --plant half-noise --noise-key 4
grep -q "verdict: FAIL" out.txt && grep -q "claimed epsilon" out.txt || { echo "FAIL: no FAIL verdict with numbers"; fail=1; }
check 2 "planted bug without DPCERT_TEST_INJECT" $D audit $small --plant half-noise
check 2 "delta 0" $D audit $small --delta 0
grep -q -- "--delta" out.txt || { echo "FAIL: message does not name --delta"; fail=1; }
check 2 "delta 1" $D audit $small --delta 1
check 2 "zero trials" $D audit --level custom --trials 0
check 2 "canary element outside the model" $D audit $small --canary-elem 100000
check 2 "unknown canary parameter" $D audit $small --canary-param nosuch
check 2 "dirac canary on DP-ZO" $D audit $small --algo dpzo --canary dirac
check 2 "unknown option" $D audit --colour
exit $fail
