#!/usr/bin/env bash
# accountant/tests/acct_options.sh — `dpcert account`'s option rules and its rarely used answers
# (docs/accounting.md), beyond acct_cli.sh: each invalid combination exits 2 with the message
# naming the rule (choices, --delta/--epsilon exactly one, --target-epsilon's needs, --precision
# and --pld-h ranges, --schedule excluding the single-segment options, a mechanism without its
# noise option or with another's); the delta query (--epsilon) of every accountant; the pure
# accountant's basic / advanced / exact randomized-response answers and GDP's exact q = 1 label,
# checked against values computed here independently (python3: the analytic Gaussian delta of
# Balle & Wang 2018, and the exact composition of randomized response, Kairouz et al. 2015);
# --certified's MPFR bound is never below the floating-point RDP epsilon.
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
"$D" account --help >/dev/null 2>&1 || { echo "SKIP: dpcert account not built"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
expect() { expect_exit "$1" "$2" account "${@:3}"; } # expect CODE PATTERN ARGS...: of `dpcert account ARGS`
G="--mechanism gaussian --sigma 1 --q 0.01 --steps 10"
expect 2 "--mechanism.*gaussian" --mechanism poisson --sigma 1 --q 0.01 --steps 10 --delta 1e-5
expect 2 "--conversion" $G --delta 1e-5 --conversion fancy
expect 2 "--neighbouring" $G --delta 1e-5 --neighbouring swap
expect 2 "--accountant" $G --delta 1e-5 --accountant prv
expect 2 "give exactly one of --delta and --epsilon" $G
expect 2 "give exactly one of --delta and --epsilon" $G --delta 1e-5 --epsilon 1
expect 2 "--delta" $G --delta 1
expect 2 "--delta" $G --delta -1e-5
expect 2 "--epsilon must be >= 0" $G --epsilon -1
expect 2 "--target-epsilon needs --delta > 0" $G --delta 0 --target-epsilon 8
expect 2 "--target-epsilon must be > 0 and finite" $G --delta 1e-5 --target-epsilon 0
expect 2 "--precision must be in" $G --delta 1e-5 --target-epsilon 8 --precision 2
expect 2 "--pld-h must be > 0" $G --delta 1e-5 --pld-h -1
printf '{"segments": []}' > s.json
expect 2 "--schedule excludes" --schedule s.json --q 0.01 --delta 1e-5
expect 2 "--schedule excludes" --schedule s.json --sigma 1 --delta 1e-5
expect 2 "--mechanism laplace needs --scale" --mechanism laplace --sigma 1 --q 0.1 --steps 3 --delta 1e-5
expect 2 "--mechanism pure needs --epsilon0" --mechanism pure --epsilon0 1 --sigma 1 --q 0.1 --steps 3 --delta 1e-5
expect 2 "--mechanism gaussian needs --sigma" --mechanism gaussian --q 0.1 --steps 3 --delta 1e-5
expect 2 "--q" $G --delta 1e-5 --q 1.5
expect 2 "--sigma" --mechanism gaussian --sigma 0 --q 0.1 --steps 3 --delta 1e-5

# num LABEL FILE: the first number after LABEL on a line of FILE
num() { sed -n "s/.*$1 *\([-0-9.e+]*\).*/\1/p" "$2" | head -1; }
close() { python3 -c 'import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(not abs(a - b) <= r * abs(b))' "$@" 2>/dev/null; }

# GDP at q = 1, one step, sigma 1: mu = 1, exact delta(1) of the analytic Gaussian
"$D" account --mechanism gaussian --sigma 1 --q 1 --steps 1 --epsilon 1 --accountant all >g.txt 2>&1
want=$(python3 -c 'import math
P = lambda x: 0.5 * math.erfc(-x / math.sqrt(2))
e, mu = 1.0, 1.0
print(repr(P(-e / mu + mu / 2) - math.exp(e) * P(-e / mu - mu / 2)))')
check "gdp at q = 1: exact label" grep -q 'gdp   delta ~ .*\[exact: analytic Gaussian, q = 1\]' g.txt
check "gdp delta(1) = analytic Gaussian $want (got $(num 'gdp   delta ~' g.txt))" close "$(num 'gdp   delta ~' g.txt)" "$want" 1e-8
lo=$(sed -n 's/^pld   delta in \[\([^,]*\), \([^]]*\)\].*/\1/p' g.txt); hi=$(sed -n 's/^pld   delta in \[\([^,]*\), \([^]]*\)\].*/\2/p' g.txt)
check "pld's delta interval [$lo, $hi] holds the exact $want" python3 -c "import sys; sys.exit(not ($lo <= $want * (1 + 1e-9) and $want <= $hi * (1 + 1e-9)))"
check "rdp's delta (an upper bound) is above the exact one" python3 -c "import sys; sys.exit(not ($(num 'rdp   delta =' g.txt) >= $want))"
check "pure is n/a for the Gaussian mechanism" grep -q '^pure  n/a' g.txt

# pure DP, q = 1, 10 steps of eps0 = 0.5: basic 5; exact randomized-response composition
"$D" account --mechanism pure --epsilon0 0.5 --q 1 --steps 10 --delta 1e-5 --accountant all >p.txt 2>&1
check "pure: basic 5, advanced 5 (capped by basic)" grep -q '^pure  epsilon: basic 5, advanced 5, ' p.txt
rr=$(sed -n 's/.*exact (randomized-response composition) \([0-9.e+-]*\).*/\1/p' p.txt)
# the exact RR delta at that epsilon (Kairouz et al. 2015, Theorem 3.5 form) must be 1e-5
check "pure: exact RR epsilon $rr gives delta 1e-5 (independent sum)" python3 -c "
import math, sys
T, e0, e = 10, 0.5, float('$rr')
d = sum(math.comb(T, i) * max(0.0, math.exp((T - i) * e0) - math.exp(e + i * e0)) for i in range(T + 1)) / (1 + math.exp(e0)) ** T
sys.exit(not abs(d - 1e-5) < 1e-9)"
check "gdp is n/a for the pure mechanism" grep -q '^gdp   n/a' p.txt
"$D" account --mechanism pure --epsilon0 0.5 --q 1 --steps 10 --epsilon 6 --accountant pure >p6.txt 2>&1
check "pure delta query beyond basic: delta(6) = 0" grep -q '^pure  basic epsilon 5; exact (randomized-response) delta(6) = 0$' p6.txt
"$D" account --mechanism pure --epsilon0 0.5 --q 1 --steps 10 --epsilon 4 --accountant pure >p4.txt 2>&1
d4=$(sed -n 's/.*delta(4) = \([0-9.e+-]*\)$/\1/p' p4.txt)
check "pure delta(4) = the independent sum (got $d4)" python3 -c "
import math, sys
T, e0, e = 10, 0.5, 4.0
d = sum(math.comb(T, i) * max(0.0, math.exp((T - i) * e0) - math.exp(e + i * e0)) for i in range(T + 1)) / (1 + math.exp(e0)) ** T
sys.exit(not abs(float('$d4') - d) <= 1e-9 * d)"

# --certified: the MPFR bound is never below the floating-point value
for m in "--mechanism gaussian --sigma 1 --q 1 --steps 1" "--mechanism laplace --scale 2 --q 0.5 --steps 4"; do
  "$D" account $m --delta 1e-5 --accountant rdp --certified >c.txt 2>&1
  e=$(num 'rdp   epsilon =' c.txt); ce=$(num 'rdp   certified epsilon <=' c.txt)
  check "--certified ($m): $ce >= $e" python3 -c "import sys; sys.exit(not ($ce >= $e > 0))"
done
check "laplace at q < 1: certified through the pure/RR bound, said so" grep -q 'certified via the pure-DP/RR bound' c.txt
"$D" account --mechanism gaussian --sigma 1 --q 1 --steps 1 --epsilon 1 --accountant all --json >j.json 2>/dev/null
check "--json delta query: every accountant's delta" python3 -c '
import json; r = json.load(open("j.json"))
s = json.dumps(r); assert "delta" in s and "gdp" in s and "pld" in s and "rdp" in s, s[:300]'
echo "acct_options: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]
