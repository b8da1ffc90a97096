#!/usr/bin/env bash
# conformance/tests/hostile_inputs.sh — the hostile-input probe of issue 15, kept in `make test`:
# per subcommand, inputs a hostile or careless user gives (bad numbers, extreme accountant
# queries, planted symlinks, full devices, malformed files, signals), grouped by the issue's
# classes; each probe asserts the promised exit code and a message naming the option, file or
# field (README: exit 2 for bad input, 3 for a lost result; nothing crashes, hangs, is silently
# clamped or silently lost). Every probe can fail: each asserts an exit code and a message or a
# file state, and the "control" probes assert that the valid neighbour of a refused input runs.
# Run through ci/run-tests.sh ($DPCERT, $DPCERT_ROOT; cwd is a fresh temporary folder).
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
# expect CODE PATTERN ARGS...: exit code CODE and stderr matching PATTERN (grep -E), within 60 s
expect() {
  local want=$1 pat=$2; shift 2
  timeout 60 "$D" "$@" >out.txt 2>err.txt; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$pat" err.txt; then ok "exit $want: dpcert $*"
  else bad "dpcert $* -> exit $rc (want $want /$pat/), stderr: $(head -c 300 err.txt)"; fi
}
# expect_out CODE PATTERN ARGS...: exit code CODE and stdout matching PATTERN
expect_out() {
  local want=$1 pat=$2; shift 2
  timeout 60 "$D" "$@" >out.txt 2>err.txt; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$pat" out.txt; then ok "exit $want, stdout /$pat/: dpcert $*"
  else bad "dpcert $* -> exit $rc (want $want /$pat/), stdout: $(head -c 300 out.txt) stderr: $(head -c 300 err.txt)"; fi
}
ACC="--q 0.01 --steps 10 --delta 1e-5"

echo "--- class 2: accountant answers at the extremes ---"
expect_out 0 'rdp +epsilon = inf \(no finite bound' account --accountant rdp --sigma 1e-200 $ACC
expect_out 0 'exact \(randomized-response composition\) inf' account --mechanism pure --epsilon0 1e308 --steps 10 --delta 1e-5 --accountant pure
expect 2 '--precision must be in \[1e-12' account --target-epsilon 1 --precision 1e-16 $ACC
expect_out 0 'rdp +epsilon = 0 ' account --sigma 1e200 $ACC --accountant all
expect_out 0 'pld +n/a: .*sigma=1e\+200 outside the PLD domain' account --sigma 1e200 $ACC --accountant all
expect_out 0 'rdp +epsilon = inf \(a Gaussian segment: the privacy loss is unbounded' account --sigma 1 --q 0.01 --steps 10 --delta 0
expect_out 0 'pure +epsilon = 0.0646626' account --mechanism laplace --scale 2 --q 0.01 --steps 10 --delta 0
expect 2 'no accountant could answer: pld: .*cap' account --sigma 0.01 $ACC --accountant pld
expect 2 '--pld-h must be > 0' account --sigma 1 $ACC --pld-h -1
printf '[{"mechanism":"gaussian","q":0.01,"sigma":1,"scale":2,"steps":10}]\n' > both.json
expect 2 "both.json: segment 1: field 'scale' is not allowed" account --schedule both.json --delta 1e-5
expect 2 'steps must be <= 1e12' account --sigma 1 --q 0.01 --steps 1000000000001 --delta 1e-5
printf 'mechanism,q,sigma,steps,delta,epsilon\npure,1,1e308,10,1e-5,1\n' > huge.csv
timeout 120 "$D" audit-accounting huge.csv >out.txt 2>err.txt; rc=$?
check "audit-accounting: eps0 = 1e308 claiming epsilon 1 is UNDER-REPORTED (exit $rc)" \
  bash -c "[ $rc = 1 ] && grep -q 'UNDER-REPORTED' out.txt && ! grep -q ' CONSISTENT' out.txt"

echo "--- class 4 (files): read by declared sizes, with limits ---"
expect 2 '/dev/zero: header of 0 bytes cannot hold a JSON object' inspect /dev/zero
expect 2 '/dev/urandom: header length [0-9]+ exceeds the limit' inspect /dev/urandom
# a header declaring 2^60 bytes of data, streamed from a pipe: refused before allocating
python3 -c 'import struct,sys; h=b"{\"a\":{\"dtype\":\"U8\",\"shape\":[1152921504606846976],\"data_offsets\":[0,1152921504606846976]}}"; sys.stdout.buffer.write(struct.pack("<Q", len(h)) + h)' > big.safetensors
expect 2 'declares 1.15e\+18 bytes of data, more than this machine' inspect big.safetensors
expect 2 'claims file /dev/zero: longer than the limit of 67108864 bytes' audit-accounting /dev/zero
expect 2 '--schedule /dev/zero: longer than the limit' account --schedule /dev/zero --delta 1e-5
expect 2 'update log /dev/zero: longer than the limit|NUL byte' reference dpzo --model mlp --replay /dev/zero
# --data is hashed into the ranks' configuration digest: only a regular file (train --data /dev/zero
# hung in the hash, found by common/tests/cli_fuzz.sh)
expect 2 '/dev/zero: header of 0 bytes cannot hold a JSON object' train dpsgd --model mlp --dataset-size 8 --q 0.5 --data /dev/zero
mkdir -p zc && ln -sf /dev/zero zc/zero.json
expect 2 'case file zc/zero.json: longer than the limit' conform --suite x --cases zc --list

echo "--- class 5: writes never follow a planted link ---"
mkdir -p exp && echo precious > victim
ln -s ../victim exp/step-000002.safetensors
timeout 120 "$D" reference dpsgd --model mlp --dataset-size 8 --q 0.5 --steps 2 --seed 1 --noise-key 2 --export exp >/dev/null 2>err.txt
check "reference dpsgd --export with a planted link exits 0" [ $? = 0 ]
check "the link's target is untouched" grep -qx precious victim
check "the export replaced the link by a regular file" bash -c '[ -f exp/step-000002.safetensors ] && [ ! -L exp/step-000002.safetensors ]'
check "no temporary file left behind" bash -c '! ls -A exp | grep -q tmp'
mkdir -p exp2 && echo precious > victim2 && ln -s ../victim2 exp2/step-000001.safetensors
timeout 120 "$D" train dpsgd --impl optimized --backend host --strategy fused --model mlp --dataset-size 8 --q 0.5 \
  --steps 1 --seed 1 --noise-key 2 --export exp2 >/dev/null 2>err.txt
trc=$?
check "train --export with a planted link: exit 0 (got $trc), target untouched, link replaced" \
  bash -c "[ $trc = 0 ] && grep -qx precious victim2 && [ -f exp2/step-000001.safetensors ] && [ ! -L exp2/step-000001.safetensors ]"
echo precious > victim3 && ln -s victim3 dz.log
timeout 120 "$D" reference dpzo --model mlp --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 \
  --seed 1 --noise-key 2 --log dz.log >/dev/null 2>err.txt
check "reference dpzo --log onto a planted link: target untouched, log written in its place" \
  bash -c 'grep -qx precious victim3 && [ ! -L dz.log ] && grep -q "^end steps 1 sha256" dz.log'

echo "--- class 7: case files, a strict schema ---"
check "every committed case file loads" bash -c "'$D' conform --suite all --list --cases '$ROOT/conformance/cases' >/dev/null"
case_probe() { # KEY-JSON PATTERN: one case file with KEY-JSON added; --list must exit 2 naming it
  rm -rf cs; mkdir cs
  printf '{"name": "p", "suites": ["x"], "algorithm": "dpsgd", %s, "args": {"model": "mlp"}}\n' "$1" > cs/p.json
  expect 2 "$2" conform --suite x --cases cs --list
}
case_probe '"sigma": -0.5' "'sigma' must be a number in \[0, "
case_probe '"steps": -5' "'steps' must be an integer in \[1, "
case_probe '"steps": 2.5' "'steps' must be an integer \(a JSON number"
case_probe '"dataset_size": 16.7, "steps": 1' "'dataset_size' must be an integer"
case_probe '"micro_batches": 1e300' "'micro_batches' must be an integer"
case_probe '"description": 5' "'description' must be a string"
case_probe '"strategy": "warp-drive"' "'strategy' has an unknown value 'warp-drive'"
case_probe '"colour": "red"' "unknown key 'colour'"
case_probe '"clip": 0' "'clip' must be a number in \(0, "
case_probe '"q2": 1' "unknown key 'q2'"
case_probe '"sigma": 1e-400' "'1e-400' underflows"   # jansson alone would read it as 0: no noise
printf '[{"mechanism":"gaussian","q":0.01,"sigma":1e-400,"steps":10}]\n' > tiny.json
expect 2 "tiny.json: '1e-400' underflows" account --schedule tiny.json --delta 1e-5
# (a long argument value is passed whole: conformance/tests/test_cases.c)

echo "--- class 8: a lost result is exit 3 with a message ---"
lost() { timeout 120 "$D" "$@" >/dev/full 2>err.txt; local rc=$?
  if [ $rc = 3 ] && grep -q 'cannot write' err.txt; then ok "exit 3 on /dev/full: dpcert $*"
  else bad "dpcert $* >/dev/full -> exit $rc, stderr: $(head -c 300 err.txt)"; fi; }
lost rng philox --key 0,0 --counter 0,0,0,0
lost rng sample --dist gaussian --key 1 --stream 0 --purpose init --count 3
lost account --sigma 1 $ACC --accountant rdp
printf 'mechanism,q,sigma,steps,delta,epsilon\ngaussian,0.01,1,10,1e-5,5\n' > claims.csv
lost audit-accounting claims.csv
lost reproduce dpzo-tables --json
"$D" reference dpsgd --model mlp --dataset-size 8 --q 0.5 --steps 1 --seed 1 --noise-key 2 --export ra >/dev/null 2>&1
lost compare --json ra ra
lost plan --profile framework --model llama3.1-8b --seq 4096 --batch 4 --dp 4 --sharding zero3 --device h100
# plan: bad numbers and files name the option; a planted device file is read strictly
expect 2 -- '--link: bandwidth' plan --link nvlink:9xGB/s
expect 2 -- '--dp must be in' plan --dp 1e9
printf '{"name": "x"}' > dev.json
expect 2 'dev.json: .*must be' plan --device dev.json
expect 2 -- '--device: .*/dev/zero: longer than the limit' plan --device /dev/zero
expect_out 0 'step [0-9.e+-]+ s' plan --profile framework --model gpt-26b --seq 2048 --batch 64 --dp 64 --sharding zero3 --device a100

echo "--- class 9: parsers (claims CSV, DP-ZO update log) ---"
printf 'mechanism,q,sigma,steps,delta,epsilon,sigma\ngaussian,0.01,1,10,1e-5,5,2\n' > dup.csv
expect 2 "dup.csv: header \(line 1\): column 'sigma' \(column 7\) duplicates 'sigma' \(column 3\)" audit-accounting dup.csv
printf 'mechanism,q,sigma,scale,steps,delta,epsilon\ngaussian,0.01,1,1,10,1e-5,5\n' > dup2.csv
expect 2 "column 'scale' \(column 4\) duplicates 'sigma'" audit-accounting dup2.csv
printf 'mechanism,q,sigma,steps,delta,epsilon\ngaussian,0.01,1,10,1e-5,5\0junk\n' > nul.csv
expect 2 'nul.csv: line 2: a NUL byte' audit-accounting nul.csv
printf 'mechanism,q,sigma,steps,delta,epsilon\ngaussian,0.01,1,10,1e-400,5\n' > uf.csv
expect 2 "field 'delta': '1e-400' underflows" audit-accounting uf.csv
expect_out 0 'CONSISTENT' audit-accounting claims.csv
M="--model mlp --in 4 --hidden 8 --classes 3"
"$D" reference dpzo $M --dataset-size 24 --q 0.5 --steps 3 --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 --seed 1 --noise-key 2 --log run.log >/dev/null 2>&1
expect_out 0 '^theta_T sha256 ' reference dpzo $M --replay run.log
head -c -5 run.log > cut.log
expect 2 'cut.log: does not end with a complete line' reference dpzo $M --replay cut.log
{ cat run.log; printf '\0junk\n'; } > junk.log
expect 2 'junk.log: a NUL byte at offset' reference dpzo $M --replay junk.log
lost reference dpzo $M --replay run.log

echo "--- class 10: numeric options ---"
expect 2 "--sigma: '1e-400' underflows" account --sigma 1e-400 $ACC
expect 2 "--sigma: '1e400' is not a finite number" account --sigma 1e400 $ACC
expect 2 "--steps: '99999999999999999999' is out of range" account --sigma 1 --q 0.01 --steps 99999999999999999999 --delta 1e-5
expect 2 '--micro-batches must be in \[1, 2\^32 - 1\]' reference dpsgd --model mlp --dataset-size 8 --q 0.5 --micro-batches 9223372036854775807
expect 2 '--noise-ranks must be in \[1, 255\]' compare --noise-shares --noise-ranks 0 ra ra
expect 2 '--model-k must be in \[1, ' compare --model-k 9223372036854775807 ra ra
expect 2 "--loss-scale: '1000' is not a positive finite power of two" losscale --loss-scale 1000
expect 2 "--loss-scale static:S: '1e400' is not a finite number" train dpsgd --model mlp --dataset-size 8 --q 0.5 --loss-scale static:1e400
lost losscale --json
expect 2 "--dtype: unknown value 'f16x'" ops --dtype f16x
expect 2 "unknown backend 'nope'" ops --backend nope
expect 2 "plugin '/dev/null/x.so': no readable file" ops --backend plugin:/dev/null/x.so
expect 2 "plugin /dev/null: cannot load" ops --backend plugin:/dev/null
expect 2 "--threads must be in \[1, 256\]" ops --threads 100000
lost ops --filter '^add$'
expect_out 0 '^6627e8d5 e169c58d bc57ac4c 9b00dbd8$' rng philox --key 00000000,00000000 --counter 00000000,0,0x0,0
w=$("$D" rng philox --key 0,0 --counter 0,0,0,0 | tr ' ' ',')
expect_out 0 '^[0-9a-f]{8} [0-9a-f]{8} [0-9a-f]{8} [0-9a-f]{8}$' rng philox --key 0,0 --counter "$w"
expect 2 "word 0 '12345678' is ambiguous" rng philox --key 0,0 --counter 12345678,0,0,0
expect_out 0 '^[0-9a-f]{8} ' rng philox --key 42,0 --counter 2,0,3,0x02000000

echo "--- class 11: a candidate that overwrites its own input (issue 29 item 4) ---"
# certify gives the candidate a read-only copy of each vector and checks its SHA-256 after every
# call: a candidate that writes to IN (then the output) is FAILED (exit 1) naming the check, with
# a complete bundle; the bundle's vectors are untouched (verify-report would reject them)
printf '#!/bin/sh\nchmod u+w "$1" 2>/dev/null; printf junk > "$1"\necho x > "$2"\n' > clobber.sh; chmod +x clobber.sh
expect_out 1 '^verdict: FAILED -- candidate output \[step-mlp-batch1 r1\]: INPUT_MODIFIED: the candidate modified its input' \
  certify --candidate ./clobber.sh --suite ci --filter '^step-mlp-batch1$' --report clob
if [ -s clob/report.json ] && [ -s clob/report.md ] && grep -q INPUT_MODIFIED clob/outputs/step-mlp-batch1.r1.status; then
  ok "the INPUT_MODIFIED bundle is complete (report.json, report.md, status)"
else bad "the INPUT_MODIFIED bundle is incomplete"; fi
# the same as a persistent candidate (READY on fd 3, then one request per line)
printf '#!/bin/sh\necho READY >&3\nwhile IFS="$(printf "\\t")" read -r seq in out; do\n  chmod u+w "$in"; printf junk > "$in"; echo x > "$out"; echo "$seq OK" >&3\ndone\n' > clobber_p.sh; chmod +x clobber_p.sh
expect_out 1 '^verdict: FAILED -- candidate output \[step-mlp-batch1 r1\]: INPUT_MODIFIED' \
  certify --candidate ./clobber_p.sh --candidate-mode persistent --suite ci --filter '^step-mlp-batch1$' --report clob2
expect 2 "--candidate-mode: unknown candidate mode 'twice'" certify --candidate true --candidate-mode twice --suite ci

echo "--- issue 29: fifteen broken promises (item 4: class 11 above; 8: optimized/tests/train_cp1_options.sh; 13: compare_cli.sh, test_compare; 14: certify_extremes.sh, test_report_scale, test_html; 15: .ci/run, ci/coverage.sh) ---"
DZ="reference dpzo --model mlp --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 --seed 1 --noise-key 2"
# item 1: a target that exists and is not a regular file is written in place (a character device,
# a FIFO with a reader) or refused (exit 2), never replaced. The devices are reached through links
# in this folder: a regression replaces the link, never /dev/full itself.
ln -s /dev/full full.log && ln -s /dev/null null.log
expect 3 '--log full.log: write failed: No space left on device' $DZ --log full.log
check "item 1: the link to /dev/full is still a link to the device" bash -c '[ -L full.log ] && [ -c full.log ]'
expect_out 0 '^theta_T sha256' $DZ --log null.log
check "item 1: the link to /dev/null is still a link to the device" bash -c '[ -L null.log ] && [ -c null.log ]'
mkfifo fifo.log
(timeout 60 cat fifo.log > fifo-read.txt &)
expect_out 0 '^theta_T sha256' $DZ --log fifo.log
sleep 1
check "item 1: the FIFO stays a FIFO and its reader got the whole log" \
  bash -c '[ -p fifo.log ] && head -1 fifo-read.txt | grep -q "update log" && grep -q "^end steps 1 sha256" fifo-read.txt'
mkfifo lonely.log
expect 2 '--log lonely.log: a FIFO that no process is reading' $DZ --log lonely.log
check "item 1: the FIFO without a reader is left as it was" [ -p lonely.log ]
mkdir dir.log
expect 2 '--log dir.log: is a directory' $DZ --log dir.log
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock.log")' &&
  expect 2 '--log sock.log: a socket: dpcert writes regular files, character devices and FIFOs only' $DZ --log sock.log
mkdir -p fexp && mkfifo fexp/step-000001.safetensors
expect 2 'step-000001.safetensors: a FIFO that no process is reading' reference dpsgd --model mlp --dataset-size 8 --q 0.5 --steps 1 --seed 1 --noise-key 2 --export fexp
check "item 1: a FIFO planted in an export directory is not replaced" [ -p fexp/step-000001.safetensors ]
mkdir -p vdir/step-mlp-batch1.safetensors
expect 2 'step-mlp-batch1.safetensors: is a directory' vectors --suite ci --out vdir
# items 2 and 3: keygen refuses one file for both keys and an existing private key without
# --force; verify-report refuses a file added anywhere in a signed bundle
expect 2 'name the same file .*the public key would overwrite the private key' keygen --private same.pem --public same.pem
expect 2 'name the same file' keygen --private same.pem --public ./same.pem
check "item 3: nothing written when refused" bash -c '[ ! -e same.pem ]'
"$D" keygen --private k.pem --public k.pub >/dev/null 2>&1
cp k.pem k.pem.before
ln -s k.pem klink.pem
expect 2 'are the same file' keygen --private k.pem --public klink.pem --force
expect 2 'k.pem exists: refusing to overwrite a private key \(--force replaces it\)' keygen --private k.pem --public k2.pub
check "item 3: the private key is untouched" cmp -s k.pem k.pem.before
timeout 60 "$D" keygen --private k.pem --public k.pub --force >/dev/null 2>&1; rc=$?
check "item 3: --force replaces the pair (exit $rc)" bash -c "[ $rc = 0 ] && ! cmp -s k.pem k.pem.before"
timeout 300 "$D" certify --candidate "sh -c 'cp \"\$1\" \"\$2\"' x" --suite ci --filter '^step-mlp-batch1$' --repeats 1 \
  --report bundle --sign k.pem >/dev/null 2>&1
expect_out 0 'verified' verify-report bundle --pubkey k.pub
echo x > bundle/extra.txt
expect 1 'NOT VERIFIED: file extra.txt is in the bundle but not in report.json' verify-report bundle --pubkey k.pub
rm bundle/extra.txt && echo x > bundle/vectors/.hidden
expect 1 'NOT VERIFIED: file vectors/.hidden is in the bundle' verify-report bundle --pubkey k.pub
rm bundle/vectors/.hidden && mkfifo bundle/outputs/pipe
expect 1 'NOT VERIFIED: .*outputs/pipe' verify-report bundle --pubkey k.pub
rm bundle/outputs/pipe
# the signature and report.json themselves: never followed, never read until they end (a link to
# /dev/zero, or a FIFO, hung verify-report before)
mv bundle/report.json.sig sig.bak && ln -s /dev/zero bundle/report.json.sig
expect 1 'NOT VERIFIED: bundle/report.json.sig is not a regular file' verify-report bundle --pubkey k.pub
rm bundle/report.json.sig && mv sig.bak bundle/report.json.sig && mv bundle/report.json rj.bak && mkfifo bundle/report.json
expect 1 'NOT VERIFIED: bundle/report.json is not a regular file' verify-report bundle --pubkey k.pub
rm bundle/report.json && mv rj.bak bundle/report.json
expect_out 0 'verified' verify-report bundle --pubkey k.pub
# items 5, 6, 11: the accountant answers or refuses naming the limit, never exit 3
expect_out 0 'pld +n/a: PLD: one step needs .* grid points at h=1e-300 \(cap ' account --sigma 1 $ACC --pld-h 1e-300
expect 2 'no accountant could answer: pld: .*cap .*use a coarser --pld-h' account --sigma 1 $ACC --pld-h 1e-300 --accountant pld
printf 'mechanism,q,sigma,steps,delta,epsilon\ngaussian,0.01,1,10,0,5\ngaussian,0.01,0.01,10,1e-5,1e9\ngaussian,0.01,1e300,10,1e-5,5\npure,0.5,1e308,10,1e-5,1e300\n' > c29.csv
timeout 120 "$D" audit-accounting c29.csv >out.txt 2>err.txt; rc=$?
check "item 6: audit-accounting answers every claim (exit $rc, want 1)" [ $rc = 1 ]
check "item 6: a Gaussian claim at delta 0 is UNDER-REPORTED (+inf)" grep -Eq '^1 .*\[inf, inf\] UNDER-REPORTED' out.txt
check "item 6: sigma 0.01 past PLD's point cap is answered by RDP (CONSISTENT)" grep -Eq '^2 .* CONSISTENT' out.txt
check "item 6: sigma 1e300 outside PLD's domain is answered by RDP (CONSISTENT)" grep -Eq '^3 .* CONSISTENT' out.txt
check "item 11: pure eps0 1e308 at q 0.5 has a lower bound of at least 1e308 (finite), not 0" grep -Eq '^4 .*\[1(\.[0-9]+)?e\+308, inf\] UNDER-REPORTED' out.txt
# item 7: what --help says about audit --model is what audit does
check "item 7: audit --help gives --model a default, not 'required'" \
  bash -c "'$D' audit --help | grep -E -- '^  --model ' | grep -q 'default mlp' && ! '$D' audit --help | grep -E -- '^  --model ' | grep -q required"
# item 9: the help and the version are results: on a full device, exit 3 with a message, every command
for c in "" $("$D" --help | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p'); do
  lost $c --help
done
lost version
# item 10: a path over PATH_MAX: the message names it whole (or shortened in the middle) with the reason
long=$(printf 'd/%.0s' $(seq 2100))x.safetensors
timeout 60 "$D" inspect "$long" >/dev/null 2>err.txt; rc=$?
check "item 10: inspect of a 4213-byte path: exit 2, the file's name to its end and the reason (exit $rc, $(wc -c < err.txt) bytes)" \
  bash -c "[ $rc = 2 ] && grep -q 'x.safetensors.*File name too long' err.txt"
timeout 60 "$D" reference dpsgd --model mlp --dataset-size 8 --q 0.5 --export "$long" >/dev/null 2>err.txt; rc=$?
check "item 10: --export of a 4213-byte directory name: exit 2 naming it whole with the limit (exit $rc)" \
  bash -c "[ $rc = 2 ] && grep -q 'd/d/x.safetensors: a directory name of 4213 bytes, longer than the 3840 allowed' err.txt"
# item 12: a name that is not UTF-8 is escaped in messages, control characters included
timeout 60 "$D" inspect $'\xff\x01\x1b[31mname' >/dev/null 2>err.txt; rc=$?
check "item 12: a non-UTF-8 name is escaped (exit $rc)" \
  bash -c "[ $rc = 2 ] && grep -qF '\\xff\\x01\\x1b[31mname' err.txt && ! LC_ALL=C grep -q \$'[\\x01\\x1b\\xff]' err.txt"
# found by the command-line fuzzer (common/tests/cli_fuzz.sh; its corpus replays these too)
expect 2 'ra: read error: Is a directory' inspect ra
expect_out 0 'not demonstrated at this S and C' losscale --loss-scale 1

echo "$checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]
