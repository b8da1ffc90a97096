#!/usr/bin/env bash
# conformance/adapters/python/peers.sh BUILD [PART...] — `make test-peers` (never part of `make test`).
# Certifies the real DP-SGD libraries through their adapters (examples/*_candidate.py), compares
# the accountants and runs the membership-inference peer (docs/certification.md "Peers",
# docs/accounting.md "Peer accountants", docs/audits.md "Peer: ML Privacy Meter").
#
# Virtual environments under BUILD/ (created and filled from PyPI once; separate because the
# pins conflict: TensorFlow Privacy 0.9 needs numpy < 2 and TensorFlow <= 2.15, jax-privacy
# the newest jax):
#   peers-venv      torch, opacus 1.6, pyvacy, the accountants (autodp, opendp, dp-accounting,
#                   prv-accountant), privacy-meter 1.0.1 (+ tensorflow-cpu, which it imports)
#   peers-venv-jax  jax[cpu], optax, jax-privacy 2.x
#   peers-venv-tf   tensorflow-privacy 0.9.0 with tensorflow 2.15
# PART: any of io certify accountants mia (default all). PEERS_RUNS=REGEX keeps the certify
# runs whose name matches. Every run serves its requests from one candidate process
# (--candidate-mode persistent: the library's imports once per run, not once per call);
# PEERS_MODE=one-call runs them the old way. Every run's verdict is compared with the expected one (below);
# results: BUILD/peers/verdicts.tsv, the bundles under BUILD/peers/<run>/.
set -u
BUILD=${1:-build}; shift || true
PARTS=${*:-io certify accountants mia}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
D=$BUILD/dpcert
[ -x "$D" ] || { echo "peers: $D missing (make first)"; exit 1; }
AD=$ROOT/conformance/adapters/python
OUT=$BUILD/peers
mkdir -p "$OUT"
fail=0

venv() { # DIR IMPORTS PIP-ARGS...: create and fill DIR once (when IMPORTS do not import)
  local dir=$1 imports=$2; shift 2
  if ! "$dir/bin/python" -c "import $imports" >/dev/null 2>&1; then
    python3 -m venv "$dir" || { echo "peers: cannot create $dir (python3 -m venv)"; return 1; }
    "$dir/bin/pip" install --progress-bar off -q "$@" || { echo "peers: pip install into $dir failed"; return 1; }
  fi
}
TORCH=$BUILD/peers-venv JAX=$BUILD/peers-venv-jax TF=$BUILD/peers-venv-tf
need_torch() { venv "$TORCH" "torch, opacus, pyvacy, safetensors, autodp, opendp, dp_accounting, prv_accountant, privacy_meter" \
  numpy torch opacus==1.6.0 safetensors pyvacy==0.0.32 autodp opendp dp-accounting prv-accountant \
  "tensorflow-cpu==2.15.*" privacy-meter==1.0.1 scikit-learn scipy pandas matplotlib seaborn pillow jinja2; }
need_jax() { venv "$JAX" "jax, optax, jax_privacy, safetensors" "jax[cpu]" optax "jax-privacy>=2,<3" safetensors; }
need_tf() { venv "$TF" "tensorflow, tensorflow_privacy" "tensorflow-privacy==0.9.0" "tensorflow==2.15.*" safetensors; }

if [[ " $PARTS " == *" io "* ]]; then
  need_torch || exit 1
  "$D" vectors --suite certify --out "$OUT/vec" >/dev/null || { echo "peers: dpcert vectors failed"; exit 1; }
  "$TORCH/bin/python" "$AD/peers_io_check.py" "$OUT/vec" || fail=1
  # dp-transformers 1.0.0 pins torch <= 1.12.1, which has no wheel for this Python (recorded, not a failure)
  if "$TORCH/bin/pip" install --dry-run -q dp-transformers > "$OUT/dp-transformers.txt" 2>&1; then
    echo "peers: note: dp-transformers would install now (add an adapter): see $OUT/dp-transformers.txt"
  else echo "peers: dp-transformers does not install: $(grep -m1 'No matching distribution' "$OUT/dp-transformers.txt")"; fi
fi

# name @ venv @ candidate command (after the interpreter) @ suite and filter @ expected verdict line
# (regex) [@ a line the output must also have (regex): the reason of an INCOMPLETE filtered run]
# ('@' separates the fields: the regular expressions contain '|').
# A CERTIFIED verdict needs the whole certify suite; a FAILED one is valid from any vector that
# fails (a partial run can FAIL, never pass), and an INCOMPLETE one from the vectors the library
# cannot take (its other vectors run beside them). So the runs use the smallest set that gives
# their verdict (a filtered certify-level run takes the repeats its few step vectors need for
# the 0.97 power, e.g. 16 for two small vectors, so the FAILED runs use the ci level's 2);
# PEERS_FULL=1 runs every library on the whole certify suite (--scope dpsgd).
FULL="--suite certify --scope dpsgd"
KEY='^step-(mlp-flat-abadi|llama-flat-abadi|mlp-perlayer-abadi|mlp-empty|mlp-batch1)$'
RUNS=(
  "opacus-hooks@$TORCH@$AD/examples/opacus_candidate.py --mode hooks --nonfinite drop@$FULL@^verdict: INCOMPLETE \(scope dpsgd\) -- candidate output \[step-mlp-group-abadi r1\]: MISSING"
  "opacus-functorch@$TORCH@$AD/examples/opacus_candidate.py --mode functorch --nonfinite drop@$FULL@^verdict: INCOMPLETE \(scope dpsgd\) -- candidate output \[step-mlp-group-abadi r1\]: MISSING"
  "jax-privacy@$JAX@$AD/examples/jax_privacy_candidate.py@$FULL@^verdict: INCOMPLETE \\(scope dpsgd\\) -- candidate output \\[step-(llama|mlp)-perlayer-abadi"
  "opacus-ghost@$TORCH@$AD/examples/opacus_candidate.py --mode ghost --nonfinite drop@--suite certify --filter $KEY@^verdict: INCOMPLETE@^INCOMPLETE candidate output \\[step-mlp-perlayer-abadi r1\\]: MISSING"
  "opacus-ew@$TORCH@$AD/examples/opacus_candidate.py --mode ew --nonfinite drop@--suite certify --filter $KEY@^verdict: INCOMPLETE@^INCOMPLETE candidate output \\[step-llama-flat-abadi r1\\]: MISSING"
  "opacus-hooks-nonfinite@$TORCH@$AD/examples/opacus_candidate.py --mode hooks@--suite ci --filter ^step-mlp-nonfinite\$@^verdict: FAILED -- "
  "opacus-shuffle@$TORCH@$AD/examples/opacus_candidate.py --sampler shuffle@--suite certify --filter ^sampling-certify\$@^verdict: FAILED -- (batch sizes|per-example counts)"
  "opacus-declare-abadi@$TORCH@$AD/examples/opacus_candidate.py --declare abadi --nonfinite drop@--suite ci --filter ^step-mlp-flat-abadi\$@^verdict: FAILED -- deterministic .*per_sample.clip_factor"
  "optax@$JAX@$AD/examples/optax_candidate.py@--suite ci --filter ^step-mlp-(batch1|nonfinite)\$@^verdict: FAILED -- "
  "tf-privacy@$TF@$AD/examples/tf_privacy_candidate.py@--suite ci --filter ^(step-mlp-batch1|sampling-ci)\$@^verdict: FAILED -- "
  "pyvacy@$TORCH@$AD/examples/pyvacy_candidate.py@--suite ci --filter ^(step-mlp-flat-abadi|sampling-ci)\$@^verdict: FAILED -- "
)
if [[ " $PARTS " == *" certify "* ]]; then
  need_torch && need_jax && need_tf || exit 1
  # a PEERS_RUNS subset adds its rows to the table of the earlier runs
  [ -n "${PEERS_RUNS:-}" ] && [ -f "$OUT/verdicts.tsv" ] || printf 'run\tverdict\tcandidate\tseconds\n' > "$OUT/verdicts.tsv"
  for r in "${RUNS[@]}"; do
    IFS='@' read -r name env cmd args expect also <<< "$r"
    [ -n "${PEERS_RUNS:-}" ] && ! [[ $name =~ $PEERS_RUNS ]] && continue
    [ "${PEERS_FULL:-0}" = 1 ] && args=$FULL
    rm -rf "${OUT:?}/$name"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$D" certify --candidate "$env/bin/python $cmd" --candidate-mode "${PEERS_MODE:-persistent}" $args --timeout 900 \
      --report "$OUT/$name" > "$OUT/$name.txt" 2>&1
    line=$(grep '^verdict:' "$OUT/$name.txt" | head -1)
    printf '%s\t%s\t%s\t%s\n' "$name" "${line:-no verdict}" "$cmd" "$(( $(date +%s) - t0 ))" >> "$OUT/verdicts.tsv"
    if [[ $line =~ $expect ]] && { [ -z "$also" ] || grep -Eq "$also" "$OUT/$name.txt"; }; then
      echo "peers: ok: $name: ${line:0:220}${also:+ (and /$also/)}"
    else echo "peers: FAIL: $name: expected /$expect/, got: ${line:-no verdict (see $OUT/$name.txt)}"; fail=1; fi
  done
fi

if [[ " $PARTS " == *" accountants "* ]]; then
  need_torch || exit 1
  "$TORCH/bin/python" "$ROOT/ci/peers/accountants.py" --dpcert "$D" --out "$OUT/accountants.md" || fail=1
fi
if [[ " $PARTS " == *" mia "* ]]; then
  need_torch || exit 1
  "$TORCH/bin/python" "$ROOT/ci/peers/mia_privacy_meter.py" --dpcert "$D" --work "$OUT/mia" --out "$OUT/mia.md" || fail=1
fi
echo "peers: results in $OUT"
exit $fail
