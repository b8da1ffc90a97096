#!/usr/bin/env bash
# attacks/tests/audit_html.sh — report.html of `dpcert audit` and `dpcert mia` (docs/reports.md),
# on small configurations: the page is written beside report.json, shows report.json's verdict
# first, one ROC plot (inline SVG) per curve set — the audit's white-box ROC with the DP bound
# of the claimed epsilon and the claimed Gaussian trade-off, one per MIA run with the bound
# only for the DP runs — the curves are report.json's points, the tables carry its numbers
# (lower bounds, one-run summary, every AUC with its interval); no script, no external
# reference. Negative control: a planted half-noise audit (DPCERT_TEST_INJECT=1) gives a FAIL
# page. Rendering in Chromium: conformance/tests/report_html_chromium_slow.sh.
set -u
D=${DPCERT:?}
. "${DPCERT_ROOT:?}/attacks/tests/cli_check.inc"
cli_require audit
cli_require mia
small="--in 8 --hidden 16 --classes 4 --dataset-size 8 --level custom --trials 1000 --onerun-canaries 200 --quiet"
check 0 "audit (small)" $D audit $small --noise-key 4 --report aud
DPCERT_TEST_INJECT=1 check 1 "audit, planted half noise" $D audit $small --plant half-noise --noise-key 4 --report bad
check 0 "mia (small)" $D mia --population 64 --models 4 --steps 100 --epsilons 8 --zo-steps 50 --quiet --noise-key 2 --report mia
cat > check.py <<'PY'
import html, json, re, sys
kind, d, want = sys.argv[1], sys.argv[2], sys.argv[3]
j = json.load(open(d + "/report.json")); h = open(d + "/report.html").read()
bad = []
def check(what, cond):
    if not cond: bad.append(what)
m = re.search(r'<p class="verdict (ok|bad)">([A-Z]+)', h)
check("verdict first", m is not None and m.group(2) == j["verdict"] == want and (m.group(1) == "ok") == (want == "PASS")
      and h.find('class="verdict') < h.find("<h2>"))
check("no script or external reference", not re.search(r"<script|<link|<iframe|src=|href=|@import", h)
      and set(re.findall(r"https?://[^\" ]*", h)) <= {"http://www.w3.org/2000/svg"})
svgs = re.findall(r"<svg .*?</svg>", h, re.S)
def pts(svg):  # every polyline's points, in plot pixels
    return [p for p in re.findall(r'points="([^"]*)"', svg)]
if kind == "audit":
    wb = j["white_box"]
    check("one ROC plot", len(svgs) == 1)
    check("DP bound and claimed trade-off drawn", ">DP bound</text>" in h and "Gaussian trade-off of the claimed mu" in h)
    # the ROC curve has report.json's points (thinned roc, plus the bound and the trade-off polylines)
    check("curve points", any(len(p.split()) == len(wb["roc"]["fpr"]) for p in pts(svgs[0] if svgs else "")))
    for k in ["epsilon_lb_standard", "epsilon_lb_gaussian", "mu_lb"]:
        check(k + " in the table", ("<td>%.4g</td>" % wb[k]) in h)
    one = j["one_run"]
    check("one-run summary", one is not None and ("<td>%d</td>" % one["correct"]) in h and html.escape(one["message"], quote=False) in h)
else:
    runs = j["runs"]
    check("one ROC plot per run", len(svgs) == len(runs))
    for r, svg in zip(runs, svgs):
        check("bound drawn iff the run is DP (%s)" % r["kind"], (">DP bound</text>" in svg) == (r["epsilon"] is not None))
        for a, x in r["attacks"].items():
            check("%s %s AUC and interval" % (r["kind"], a), ("<td>%s</td><td>%.4g</td><td>%.4g</td><td>%.4g</td>"
                  % (a, x["auc"], x["auc_lower"], x["auc_upper"])) in h)
    check("a row per run and attack", h.count("<tr>") == 1 + sum(len(r["attacks"]) for r in runs))
print("%s %s: failed checks: %s" % (kind, d, bad or "none"))
sys.exit(1 if bad else 0)
PY
python3 check.py audit aud PASS || fail=1
python3 check.py audit bad FAIL || fail=1
python3 check.py mia mia PASS || fail=1
# negative control of the checker itself: a page whose verdict was edited must fail it
sed 's/class="verdict ok">PASS/class="verdict ok">FAIL/' aud/report.html > aud/x && mv aud/x aud/report.html
python3 check.py audit aud PASS >/dev/null && { echo "FAIL: an edited verdict was not caught"; fail=1; }
exit $fail
