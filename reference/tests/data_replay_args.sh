#!/usr/bin/env bash
# reference/tests/data_replay_args.sh — two input checks of the reference commands, fast:
# 1. `reference dpsgd --data FILE` (common/spec_model.c, docs/architecture.md "Data"): mlp data
#    need 'x' [N, in] F64|F32 and 'y' [N] I32|I64 with labels in [0, classes) and finite
#    features; llama data need 'tokens' [N, seq] I32|I64 in [0, vocab). Each defect exits 2
#    naming the file and the tensor; well-formed files in every accepted dtype train (exit 0), and
#    F32 features give the same step as the same values in F64 (the export's params_after agree).
# 2. `reference dpzo --replay LOG` (reference/dpzo_cmd.c, docs/dpzo.md "Replay"): a --seed, --lr,
#    --weight-decay, --n-spsa or model flag that contradicts the log exits 2 naming both values.
# The safetensors files are written here by python3 (the format's header: 8-byte length, JSON).
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
expect() { expect_exit "$@"; }
# st FILE NAME:DTYPE:SHAPE:VALUES ...: a safetensors file (SHAPE like 4x3, VALUES comma-separated, cycled)
st() {
  python3 - "$@" <<'PY'
import json, struct, sys
fmt = {"F64": "d", "F32": "f", "I32": "i", "I64": "q", "U8": "B"}
out, specs = sys.argv[1], sys.argv[2:]
hdr, blobs, off = {}, [], 0
for s in specs:
    name, dt, shape, vals = s.split(":")
    shp = [int(x) for x in shape.split("x")] if shape else []
    n = 1
    for x in shp: n *= x
    vs = [float(v) if dt[0] == "F" else int(v) for v in vals.split(",")]
    data = struct.pack("<%d%s" % (n, fmt[dt]), *[vs[i % len(vs)] for i in range(n)])
    hdr[name] = {"dtype": dt, "shape": shp, "data_offsets": [off, off + len(data)]}
    blobs.append(data); off += len(data)
h = json.dumps(hdr).encode()
open(out, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
}
MLP=(reference dpsgd --model mlp --in 3 --hidden 4 --classes 2 --q 0.5 --steps 1 --clip 1 --sigma 1 --lr 0.1 --seed 1 --noise-key 2)
LL=(reference dpsgd --model llama --vocab 16 --dim 8 --layers 1 --heads 2 --seq 4 --q 0.5 --steps 1 --clip 1 --sigma 1 --lr 0.1 --seed 1 --noise-key 2)
X="x:F64:6x3:0.5,-1,2,0.25,3,-0.75"; Y="y:I32:6:0,1,1"
st ok64.st "$X" "$Y";                   expect 0 "" "${MLP[@]}" --data ok64.st --export e64
st ok32.st "x:F32:6x3:0.5,-1,2,0.25,3,-0.75" "y:I64:6:0,1,1"; expect 0 "" "${MLP[@]}" --data ok32.st --export e32
# F32 holds these values exactly: the same data, the same step (the whole export agrees)
a=$(cd e64 && cat step-*.safetensors | sha256sum); b=$(cd e32 && cat step-*.safetensors | sha256sum)
check "F32/I64 data give the export of the same values in F64/I32" [ -n "$a" ] && [ "$a" = "$b" ]
st noy.st "$X";                         expect 2 "noy.st: mlp datasets need tensors 'x' \[N, in\] and 'y' \[N\]" "${MLP[@]}" --data noy.st
st xint.st "x:I32:6x3:1" "$Y";          expect 2 "xint.st: 'x' must be F64 or F32 \(got I32\)" "${MLP[@]}" --data xint.st
st yflt.st "$X" "y:F64:6:0";            expect 2 "yflt.st: 'y' must be I32 or I64 \(got F64\)" "${MLP[@]}" --data yflt.st
st xwide.st "x:F64:6x4:1" "$Y";         expect 2 "xwide.st: 'x' must have shape \[N >= 1, 3\]" "${MLP[@]}" --data xwide.st
st x1d.st "x:F64:18:1" "$Y";            expect 2 "x1d.st: 'x' must have shape" "${MLP[@]}" --data x1d.st
st ylen.st "$X" "y:I32:5:0";            expect 2 "ylen.st: 'y' must have shape \[6\]" "${MLP[@]}" --data ylen.st
st ylab.st "$X" "y:I32:6:0,1,2";        expect 2 "ylab.st: y element 2 = 2 is outside \[0, 2\)" "${MLP[@]}" --data ylab.st
st yneg.st "$X" "y:I64:6:0,-1";         expect 2 "yneg.st: y element 1 = -1 is outside" "${MLP[@]}" --data yneg.st
st xnan.st "x:F64:6x3:0,nan" "$Y";      expect 2 "xnan.st" "${MLP[@]}" --data xnan.st
T="tokens:I32:5x4:1,2,3,15,0"
st tok.st "$T";                         expect 0 "" "${LL[@]}" --data tok.st
st tok64.st "tokens:I64:5x4:1,2,3,15,0"; expect 0 "" "${LL[@]}" --data tok64.st
st notok.st "$X";                       expect 2 "notok.st: no tensor 'tokens'" "${LL[@]}" --data notok.st
st tokf.st "tokens:F32:5x4:1";          expect 2 "tokf.st: 'tokens' must be I32 or I64 \(got F32\)" "${LL[@]}" --data tokf.st
st toks.st "tokens:I32:5x5:1";          expect 2 "toks.st: 'tokens' must have shape \[N >= 1, 4\]" "${LL[@]}" --data toks.st
st tokv.st "tokens:I32:5x4:1,16";       expect 2 "tokv.st: tokens element 1 = 16 is outside \[0, 16\)" "${LL[@]}" --data tokv.st

# --- dpzo --replay: flags that contradict the log ---
Z=(--model mlp --in 4 --hidden 8 --classes 3)
"$D" reference dpzo "${Z[@]}" --dataset-size 8 --q 0.5 --steps 2 --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 --seed 7 \
  --noise-key 2 --log run.log >run.txt 2>&1
check "dpzo run with --log" [ -s run.log ]
expect 0 "" reference dpzo "${Z[@]}" --replay run.log --seed 7 --lr 1e-3 --weight-decay 0 --n-spsa 1
check "a replay with the log's own values agrees (same theta_T)" [ "$(grep theta_T out.txt)" = "$(grep theta_T run.txt)" ]
expect 2 "--seed 8 differs from the log's seed 7" reference dpzo "${Z[@]}" --replay run.log --seed 8
expect 2 "--seed" reference dpzo "${Z[@]}" --replay run.log --seed x7
expect 2 "--lr 0.5 differs from the log's 0.001" reference dpzo "${Z[@]}" --replay run.log --lr 0.5
expect 2 "--weight-decay 0.1 differs from the log's 0" reference dpzo "${Z[@]}" --replay run.log --weight-decay 0.1
expect 2 "--n-spsa 2 differs from the log's 1" reference dpzo "${Z[@]}" --replay run.log --n-spsa 2
expect 2 "the model flags give '.*' but the log 'run.log' was written for '.*'" reference dpzo --model mlp --in 4 --hidden 9 --classes 3 --replay run.log
expect 2 "--q is not used with --replay" reference dpzo "${Z[@]}" --replay run.log --q 0.5
echo "data_replay_args: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]
