#!/usr/bin/env bash
# conformance/tests/certify_hostile.sh — `dpcert certify` against hostile candidates: a crash,
# a hang (time limit), garbage, a truncated file, a header claiming 10 GiB, a 10 GiB write,
# the wrong shapes, a missing required output (DP-SGD and DP-ZO vectors). Each ends FAILED or INCOMPLETE (exit 1) with a
# message naming what happened, never a crash or a hang of dpcert; the bundle's report
# is written. One vector each (--filter), so no python is needed.
set -u
D=${DPCERT:?}
$D certify --help >/dev/null 2>&1 || { echo "SKIP: dpcert certify not available"; exit 77; }
fail=0
hostile() { # verdict pattern description candidate [extra args]
  local want=$1 pat=$2 what=$3 cand=$4; shift 4
  local word=${want%ED} # the check lines say FAIL / INCOMPLETE
  timeout 120 $D certify --candidate "$cand" --suite ci --filter "${VEC:-step-mlp-batch1}" --repeats 2 --report "b-$what" "$@" > out.txt 2>&1
  local rc=$?
  if [ $rc -ne 1 ]; then echo "FAIL: $what: exit $rc, expected 1"; sed 's/^/  | /' out.txt | tail -8; fail=1; return; fi
  grep -qE "^verdict: $want" out.txt && grep -qE "^$word .*$pat" out.txt || { echo "FAIL: $what: no verdict $want and check line matching '$pat'"; sed 's/^/  | /' out.txt | tail -6; fail=1; return; }
  [ -s "b-$what/report.json" ] || { echo "FAIL: $what: no report.json"; fail=1; return; }
  echo "ok: $what: $(grep -E "^$word .*$pat" out.txt | head -1 | cut -c1-150)"
}
hostile FAILED "signal 11|status 139" crash "sh -c 'kill -SEGV \$\$'"
hostile INCOMPLETE "time limit" hang "sleep 100;" --timeout 1
hostile FAILED "not a valid safetensors" garbage "sh -c 'head -c 5000 /dev/urandom > \"\$2\"' x"
hostile FAILED "not a valid safetensors" truncated "sh -c 'head -c 100 \"\$1\" > \"\$2\"' x"
printf '\x00\x00\x00\x80\x02\x00\x00\x00{"a":' > huge.bin
hostile FAILED "not a valid safetensors" huge-header "sh -c 'cp $PWD/huge.bin \"\$2\"' x"
hostile FAILED "SIGXFSZ|signal 25|status 153" huge-write "sh -c 'ulimit -f 2048; head -c 10737418240 /dev/zero > \"\$2\"' x"
# the vector itself as output: the parameters are there, the required private gradient is not
hostile INCOMPLETE "neither step.private_grad" missing "sh -c 'cp \"\$1\" \"\$2\"' x"
VEC=dpzo-mlp-nonfinite hostile INCOMPLETE "dpzo.z|step.scalar" dpzo-missing "sh -c 'cp \"\$1\" \"\$2\"' x"
# wrong shapes: a private gradient of every parameter, but transposed/flattened
cat > wrong.py <<'PYEOF'
import json, struct, sys
# every <prefix>.* (argv[3], default step.private_grad.) with one element too many (a flat vector)
h = json.loads(open(sys.argv[1], "rb").read()[8:8 + struct.unpack("<Q", open(sys.argv[1], "rb").read(8))[0]])
out, off, data = {}, 0, b""
for k, v in h.items():
    if not k.startswith("params."): continue
    n = 1
    for d in v["shape"]: n *= d
    out[(sys.argv[3] if len(sys.argv) > 3 else "step.private_grad.") + k[7:]] = {"dtype": "F64", "shape": [n + 1], "data_offsets": [off, off + 8 * (n + 1)]}
    off += 8 * (n + 1)
hb = json.dumps(out).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b"\0" * off)
PYEOF
if command -v python3 >/dev/null 2>&1; then
  hostile FAILED "shape" wrong-shape "python3 $PWD/wrong.py"
  VEC=dpzo-mlp-nonfinite hostile FAILED "shape" dpzo-wrong-shape "sh -c 'python3 $PWD/wrong.py \"\$1\" \"\$2\" dpzo.z.' x"
fi
exit $fail
