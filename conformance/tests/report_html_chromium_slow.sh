#!/usr/bin/env bash
# conformance/tests/report_html_chromium_slow.sh — every kind of report.html (conform, certify,
# audit, mia, and reproduce: dpzo-tables and longshield-memory; every available target's page
# gets the static checks) opens in headless Chromium (Debian's `chromium`), which takes a
# screenshot; the test checks that it rendered:
#   - Chromium exits 0 and writes a PNG of exactly the window size (1200 x 1600);
#   - non-blank: the screenshot has more non-white pixels than the same page cut after
#     its summary verdict (title + verdict only), i.e. the body (plots, tables) drew;
#   - no console message at all (our pages have no scripts; a CSP violation, a failed
#     load or a script error is logged as one);
#   - the page holds one inline <svg> per plot of its report.json (audit: its one ROC; mia:
#     one ROC per run) and no external reference.
# Negative controls that must be caught: a blank page (non-blank check), a page whose
# inline script throws and one that loads an external image (console check).
# Exit 77 only when Chromium is not installed (ci/install-deps.sh installs it).
set -u
D=${DPCERT:?DPCERT not set}
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || { echo "SKIP: chromium is not installed (ci/install-deps.sh installs Debian's chromium)"; exit 77; }
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
W=1200; H=1600
# Chromium puts its sockets in TMPDIR: a short directory (a Unix socket path has at most 107 bytes)
CTMP=$(mktemp -d /tmp/dpcert-chromium.XXXXXX) || exit 1
trap 'rm -rf "$CTMP"' EXIT
PROFILE=$CTMP/profile
chrome() { TMPDIR=$CTMP timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions \
  --hide-scrollbars --user-data-dir="$PROFILE" "$@"; }

render() { # page.html -> page.png, page.log; returns Chromium's status
  chrome --enable-logging=stderr --v=0 --window-size=$W,$H --screenshot="${1%.html}.png" "file://$PWD/$1" \
    >"${1%.html}.log" 2>&1
}

# Pages: a real conformance run (two fast cases) and every available reproduce target.
"$D" conform --suite ci --filter 'mlp-batch1-grad-sample|dpzo-mlp' --ranks 1 --report conf >conf.txt 2>&1
check "conform --report writes report.html" '[ -s conf/report.html ]'
pages=(conf)
for t in $("$D" reproduce --list | awk '/^[a-z]/ {print $1}'); do
  "$D" reproduce "$t" --report "rep-$t" >"rep-$t.txt" 2>&1; rc=$?
  if grep -q "UNAVAILABLE" <("$D" reproduce --list | grep -A1 "^$t "); then
    check "reproduce $t: unavailable, exit 3, no report" '[ $rc -eq 3 ] && [ ! -e rep-$t/report.html ]'
    continue
  fi
  check "reproduce $t --report: exit 0/1/77 and report.html" '{ [ $rc -le 1 ] || [ $rc -eq 77 ]; } && [ -s rep-$t/report.html ]'
  pages+=("rep-$t")
done
# certify: the numpy candidate when python3 has numpy (residual and batch-size histograms),
# else the vector copied back as output (INCOMPLETE: no residuals; the epsilon plot only)
PY=""; for p in ${DPCERT_PYTHON:-} python3 /usr/bin/python3; do
  command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' >/dev/null 2>&1 && { PY=$(command -v "$p"); break; }; done
if [ -n "$PY" ]; then cand="$PY ${DPCERT_ROOT:?}/conformance/adapters/python/examples/numpy_candidate.py"
else cand="sh -c 'cp \"\$1\" \"\$2\"' x"; echo "note: no python3 with numpy: certify page without histograms"; fi
"$D" certify --candidate "$cand" --suite ci --filter 'sampling|step-mlp-flat-abadi' --repeats 2 --report cert >cert.txt 2>&1
check "certify --report writes report.html" '[ -s cert/report.html ]'
"$D" audit --level custom --trials 1000 --in 8 --hidden 16 --classes 4 --dataset-size 8 --onerun-canaries 200 --quiet \
  --noise-key 4 --report audit >audit.txt 2>&1
check "audit --report writes report.html" '[ -s audit/report.html ]'
"$D" mia --population 64 --models 4 --steps 100 --epsilons 8 --zo-steps 50 --quiet --noise-key 2 --report mia >mia.txt 2>&1
check "mia --report writes report.html" '[ -s mia/report.html ]'
pages+=(cert audit mia)

# every page: static checks; rendered: the conform page and two reproduce pages (one per
# page writer and plot mix; a Chromium start costs seconds on a shared 2-core machine)
rendered=(conf cert audit mia rep-dpzo-tables rep-longshield-memory)
for p in "${pages[@]}"; do
  cp "$p/report.html" "$p.html"
  sed '/<h2>/,$d' "$p/report.html" > "$p-head.html"; echo '</body></html>' >> "$p-head.html"
  nplots=$(grep -o '"kind": *"\(line\|bars\|histogram\|roc\)"' "$p/report.json" | wc -l)
  [ "$p" = conf ] && nplots=1
  [ "$p" = audit ] && nplots=1
  [ "$p" = mia ] && nplots=$(grep -c '"kind": *"\(non-dp\|dpsgd\|dpzo\)"' mia/report.json)
  check "$p: one inline <svg> per plot ($nplots)" '[ "$(grep -c "<svg " "$p.html")" -eq "$nplots" ]'
  check "$p: no script and no external reference" \
    '! grep -Eiq "<script|<link|<iframe|src=|href=|url\(|@import" "$p.html" && [ -z "$(grep -o "http[s]*://[^\" ]*" "$p.html" | grep -v "^http://www.w3.org/2000/svg$")" ]'
done
printf '<!DOCTYPE html><html><head><title>blank</title></head><body></body></html>\n' > neg-blank.html
printf '<!DOCTYPE html><html><body><h1>x</h1><script>throw new Error("boom")</script></body></html>\n' > neg-throw.html
# a report page (its Content-Security-Policy included) that references an external image
sed 's|</h1>|</h1><img src="https://example.invalid/dpcert.png">|' conf.html > neg-load.html
all=()
for p in "${rendered[@]}"; do all+=("$p" "$p-head"); done
all+=(neg-blank neg-throw neg-load)
for p in "${all[@]}"; do
  render "$p.html"; rc=$?
  check "$p: chromium exit 0 and a screenshot" '[ $rc -eq 0 ] && [ -s "$p.png" ]'
done

# Pixel statistics of every screenshot, computed by Chromium itself from data: URLs (no
# image library needed): width, height, pixels with any channel below 240.
{
  echo '<!DOCTYPE html><html><body><pre id="r">pending</pre>'
  for p in "${all[@]}"; do printf '<img data-n="%s" src="data:image/png;base64,%s">\n' "$p" "$(base64 -w0 "$p.png" 2>/dev/null)"; done
  cat <<'JS'
<script>
window.onload = function () {
  var out = [];
  document.querySelectorAll('img').forEach(function (i) {
    var c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight;
    var x = c.getContext('2d'); var n = 0;
    if (c.width > 0) { x.drawImage(i, 0, 0); var d = x.getImageData(0, 0, c.width, c.height).data;
      for (var k = 0; k < d.length; k += 4) if (d[k] < 240 || d[k + 1] < 240 || d[k + 2] < 240) n++; }
    out.push('STAT ' + i.dataset.n + ' ' + c.width + ' ' + c.height + ' ' + n);
  });
  document.getElementById('r').textContent = out.join('\n');
};
</script></body></html>
JS
} > analyse.html
chrome --dump-dom "file://$PWD/analyse.html" 2>/dev/null | grep '^STAT\|STAT ' | sed 's/.*STAT /STAT /' > stats.txt
stat_of() { awk -v n="$1" '$1 == "STAT" && $2 == n {print $3, $4, $5}' stats.txt; }
consoles() { grep -c ':CONSOLE' "$1.log"; }
for p in "${rendered[@]}"; do
  read -r w h nw <<<"$(stat_of "$p")"; read -r _ _ nh <<<"$(stat_of "$p-head")"
  echo "$p: ${w:-?}x${h:-?}, non-white pixels ${nw:-?} (header only: ${nh:-?}), console messages $(consoles "$p")"
  check "$p: screenshot is ${W}x${H}" '[ "${w:-0}" = $W ] && [ "${h:-0}" = $H ]'
  check "$p: non-blank (body drew more than the header alone)" '[ "${nw:-0}" -gt "${nh:-0}" ] && [ "${nh:-0}" -gt 0 ]'
  check "$p: no console message" '[ "$(consoles "$p")" -eq 0 ]'
done
# negative controls: each must be caught by the check it targets
read -r _ _ nb <<<"$(stat_of neg-blank)"
check "negative control: the blank page is caught as blank" '[ -n "$nb" ] && [ "$nb" -eq 0 ]'
check "negative control: a throwing script is caught on the console" '[ "$(consoles neg-throw)" -gt 0 ]'
check "negative control: a failed load is caught on the console" '[ "$(consoles neg-load)" -gt 0 ]'
[ $fail -eq 0 ] || { echo "logs and screenshots in $PWD"; for p in "${rendered[@]}"; do grep ':CONSOLE' "$p.log"; done; }
exit $fail
