#!/usr/bin/env bash
# conformance/tests/certify_html.sh — `certify`'s report.html and the plots in report.json
# (docs/reports.md, docs/certification.md §4): the page is written, listed in the bundle's
# hashed files (verify-report rejects an edited or missing page), shows the verdict first
# and one row per check; the plotted data is the measured data: the residual histogram
# holds every draw and has std ~ 1, the batch-size histogram holds every step with the
# binomial's variance, the binomial overlay sums to the steps, and the epsilon-vs-steps
# curve ends at report.json's implied epsilons. Negative controls: a candidate with half the
# noise (histogram std ~ 0.5) and one with fixed-size batches (variance 0) must fail those
# checks, and their pages show FAILED. Rendering in Chromium: report_html_chromium_slow.sh.
# False rejects (Laurent-Massart bounds on the chi-square tails): the std check
# (|s - 1| < 0.15 over >= 1000 N(0,1) draws; the 0.25-wide bins add w^2/12 = 0.005 to the
# variance) fails with probability < 1e-8; the variance check (ratio in [0.5, 1.6] over 200
# batch sizes, 199 degrees of freedom, the sizes treated as Gaussian, which Binomial(200,
# 0.1) nearly is: excess kurtosis 0.03) < 2e-5. Power: the controls sit at std 0.5 and
# variance 0, far outside both acceptance ranges.
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
$D keygen --private k.pem --public k.pub >/dev/null || { echo "FAIL: keygen"; exit 1; }
# the correct candidate on a step vector and the sampling vector (filtered: INCOMPLETE, exit 1)
run 1 "numpy candidate (filtered)" $D certify --candidate "$PY $CAND" --suite ci --filter 'sampling|step-mlp-flat-abadi' \
  --repeats 2 --report good --sign k.pem
run 0 "verify-report with report.html" $D verify-report good --pubkey k.pub
cp -r good edited; sed -i 's/INCOMPLETE/CERTIFIED/g' edited/report.html
run 1 "an edited report.html is rejected" $D verify-report edited --pubkey k.pub
expect "report.html" "the rejection names report.html"
cp -r good gone; rm gone/report.html
run 1 "a missing report.html is rejected" $D verify-report gone --pubkey k.pub
# plotted data vs the measurement; argv: bundle, "ok" or the check that must fail
cat > check.py <<'PYEOF'
import hashlib, json, re, sys
b, want = sys.argv[1], sys.argv[2]
j = json.load(open(b + "/report.json")); html = open(b + "/report.html").read()
fails = []
def check(name, cond):
    if not cond: fails.append(name)
check("html hashed", j["files"].get("report.html") == hashlib.sha256(open(b + "/report.html", "rb").read()).hexdigest())
m = re.search(r'<p class="verdict (ok|bad)">([A-Z]+)', html)
check("verdict first", m and m.group(2) == j["verdict"] and html.find('class="verdict') < html.find("<h2>"))
check("a row per check", html.count("<tr>") == len(j["checks"]) + 1)
check("an svg per plot", html.count("<svg ") == len(j["plots"]))
for p in j["plots"]:
    t = p["title"]
    if p["kind"] == "histogram" and t.startswith("noise residuals"):
        e, h = p["edges"], p["heights"]
        c = [(e[i] + e[i + 1]) / 2 for i in range(len(h))]; n = sum(h)
        out = [int(x) for x in re.findall(r"(\d+) (?:below|above)", t)]
        check("residuals: every draw", n + sum(out) == j["noise"]["draws"])
        s = (sum(hi * ci * ci for hi, ci in zip(h, c)) / n) ** 0.5
        print("%s: residual histogram std %.4f over %d draws" % (b, s, n))
        check("residual std", abs(s - 1) < 0.15)
    elif p["kind"] == "histogram" and t.startswith("batch sizes"):
        e, h = p["edges"], p["heights"]; N, q = [float(x) for x in re.search(r"N = (\d+), q = ([0-9.e-]+)", t).groups()]
        steps = int(re.search(r"\((\d+) steps", t).group(1))
        c = [(e[i] + e[i + 1]) / 2 for i in range(len(h))]; n = sum(h)
        check("batches: every step", n == steps)
        check("binomial overlay sums to the steps", abs(sum(p["series"][0]["y"]) - steps) < 1e-3 * steps)
        mu = sum(hi * ci for hi, ci in zip(h, c)) / n; var = sum(hi * (ci - mu) ** 2 for hi, ci in zip(h, c)) / (n - 1)
        print("%s: batch-size variance / binomial %.4f over %d steps" % (b, var / (N * q * (1 - q)), n))
        check("batch variance", 0.5 <= var / (N * q * (1 - q)) <= 1.6)
    elif p["kind"] == "line" and t.startswith("epsilon vs steps"):
        im = j["noise"]["implied"]; s = p["series"]
        check("epsilon curve ends at the claimed epsilon", abs(s[0]["y"][-1] - im["epsilon_claimed"]) <= 1e-12 * im["epsilon_claimed"])
        if im["epsilon_supported"] is not None:
            check("epsilon curve ends at the supported epsilon", abs(s[1]["y"][-1] - im["epsilon_supported"]) <= 1e-12 * im["epsilon_supported"])
print("%s: failed checks: %s" % (b, fails or "none"))
sys.exit(0 if (fails == [] if want == "ok" else (fails == [want] and m.group(1) == "bad" and j["verdict"] == "FAILED")) else 1)
PYEOF
kinds=$(grep -o '"kind": "[a-z]*"' good/report.json | sort | uniq -c | tr -s ' ' | tr '\n' ';')
echo "good: plots $kinds"
[ "$(grep -c '"kind": "histogram"' good/report.json)" -eq 2 ] || { echo "FAIL: good: expected 2 histograms"; fail=1; }
"$PY" check.py good ok || { echo "FAIL: good bundle's page and plots"; fail=1; }
# negative controls: the plots show what is broken
run 1 "half the noise" $D certify --candidate "$PY $CAND --mutant noise-scale:0.5" --suite ci --filter 'step-mlp-flat-abadi' \
  --repeats 2 --report half
"$PY" check.py half "residual std" || { echo "FAIL: half the noise: the residual histogram does not show it"; fail=1; }
run 1 "fixed-size batches" $D certify --candidate "$PY $CAND --mutant shuffle" --suite ci --filter 'sampling' --repeats 2 \
  --report shuffle
"$PY" check.py shuffle "batch variance" || { echo "FAIL: fixed-size batches: the batch-size histogram does not show it"; fail=1; }
exit $fail
