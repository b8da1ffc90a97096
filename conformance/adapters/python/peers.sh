#!/usr/bin/env bash
# conformance/adapters/python/peers.sh BUILD — `make test-peers` (not part of `make test`):
# installs numpy, torch, opacus and safetensors from PyPI into BUILD/peers-venv (once), then
#  1. the adapter's safetensors reader/writer against safetensors.numpy (every ci vector
#     read identically; an adapter-written output read back by safetensors.numpy);
#  2. Opacus's DPOptimizer (examples/opacus_candidate.py) on the certify suite with --scope
#     dpsgd (its DP-SGD and sampling vectors; Opacus has no DP-ZO): CERTIFIED when it declares
#     clip_fn abadi_eps:1e-6, FAILED (at the clip factors) when it declares abadi.
# Record the results in docs/certification.md ("Peers").
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
D=$ROOT/$BUILD/dpcert
[ -x "$D" ] || D=$BUILD/dpcert
VENV=$BUILD/peers-venv
PY=$VENV/bin/python
if ! "$PY" -c 'import torch, opacus, safetensors, numpy' >/dev/null 2>&1; then
  python3 -m venv "$VENV" || { echo "peers: cannot create $VENV (python3 -m venv)"; exit 1; }
  "$VENV/bin/pip" install --progress-bar off numpy torch opacus safetensors || { echo "peers: pip install failed"; exit 1; }
fi
"$PY" -c 'import torch, opacus; print("peers: torch", torch.__version__, "opacus", opacus.__version__)'
W=$(mktemp -d "${TMPDIR:-/tmp}/dpcert-peers.XXXXXX")
fail=0
"$D" vectors --suite certify --out "$W/vec" >/dev/null || { echo "peers: dpcert vectors failed"; exit 1; }
"$PY" - "$W/vec" "$ROOT/conformance/adapters/python" <<'PYEOF' || fail=1
import glob, os, sys
import numpy as np
from safetensors.numpy import load_file as st_load, save_file as st_save
sys.path.insert(0, sys.argv[2])
from dpcert_adapter import load_file, save_file
n = 0
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.safetensors"))):
    a, _ = load_file(f)
    b = st_load(f)
    assert a.keys() == b.keys(), f
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k], equal_nan=True), (f, k)
    n += 1
out = os.path.join(sys.argv[1], "adapter_out.safetensors")
t = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "m": np.ones((2, 5), dtype=np.int32), "e": np.zeros((0, 4))}
save_file(out, t, {"dtype": "f32"})
r = st_load(out)
assert all(np.array_equal(r[k], t[k]) and r[k].dtype == t[k].dtype for k in t)
os.remove(out)
st_save({"y": np.linspace(0, 1, 7)}, out)
assert np.array_equal(load_file(out)[0]["y"], np.linspace(0, 1, 7))
os.remove(out)
print(f"peers: adapter safetensors reader/writer agrees with safetensors.numpy on {n} vectors and both directions")
PYEOF
C="$PY $ROOT/conformance/adapters/python/examples/opacus_candidate.py"
# Opacus has no DP-ZO: it is certified on the DP-SGD scope (--scope dpsgd: every step and
# sampling vector of the certify suite, none left out; the verdict names the scope)
"$D" certify --candidate "$C" --suite certify --scope dpsgd --timeout 600 --report "$W/opacus" \
  > "$W/opacus.txt" 2>&1; rc=$?
tail -6 "$W/opacus.txt"
if [ $rc -ne 0 ] || ! grep -q "^verdict: CERTIFIED (scope dpsgd)" "$W/opacus.txt"; then
  echo "peers: FAIL: Opacus (abadi_eps:1e-6) not CERTIFIED on the DP-SGD scope (exit $rc)"; grep -v '^PASS' "$W/opacus.txt" | head -20; fail=1
else echo "peers: ok: Opacus DPOptimizer CERTIFIED (scope dpsgd, certify suite) with clip_fn abadi_eps:1e-6"; fi
# one vector is enough to see the declared convention rejected (a deterministic check: the
# ci level's 2 repeats; a partial run can FAIL, never pass)
"$D" certify --candidate "$C --declare abadi" --suite ci --filter step-mlp-flat-abadi --timeout 600 \
  --report "$W/opacus-abadi" > "$W/opacus-abadi.txt" 2>&1; rc=$?
tail -3 "$W/opacus-abadi.txt"
if [ $rc -ne 1 ] || ! grep -q "^verdict: FAILED -- deterministic .*per_sample.clip_factor" "$W/opacus-abadi.txt"; then echo "peers: FAIL: Opacus declaring abadi not FAILED at per_sample.clip_factor (exit $rc)"; fail=1
else echo "peers: ok: Opacus declaring plain abadi FAILED: $(grep '^verdict' "$W/opacus-abadi.txt" | cut -c1-200)"; fi
echo "peers: bundles in $W"
exit $fail
