#!/usr/bin/env bash
# common/tests/cli.sh — the dpcert command's common subcommands end to end:
# --help, version, `rng philox` against the Philox known-answer vectors,
# `rng sample` determinism, offset consistency and key/purpose separation,
# `inspect` on a safetensors file written byte by byte with printf (digests
# checked against coreutils sha256sum), and exit code 2 with a message for bad
# usage. Run through ci/run-tests.sh ($DPCERT, $DPCERT_ROOT; cwd is a temp dir).
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
differ() { ! cmp -s "$1" "$2"; }
# expect_rc CODE PATTERN ARGS...: exit code CODE and stderr matching PATTERN (grep -E)
expect_rc() {
  local want=$1 pat=$2; shift 2
  "$D" "$@" >out.txt 2>err.txt; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$pat" err.txt; then ok "exit $want: dpcert $*"
  else bad "dpcert $* -> exit $rc (want $want), stderr: $(head -c 300 err.txt)"; fi
}

# --- help and version ---
"$D" --help >help.txt; check "--help exits 0" [ $? = 0 ]
check "--help lists rng and inspect" grep -q '^  rng ' help.txt
check "--help lists inspect" grep -q '^  inspect ' help.txt
# the command tables (common/cmd.h): one per module, no name twice (a second one would be shadowed)
check "--help lists every command once" test -z "$(sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' help.txt | sort | uniq -d)"
check "--help lists a command of every module's table" bash -c 'for c in version rng reference train conform certify account mia; do grep -q "^  $c " help.txt || exit 1; done'
"$D" version >ver.txt; check "version exits 0" [ $? = 0 ]
check "version prints version and git revision" grep -Eq '^dpcert [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]+|unknown' ver.txt
check "version prints the backends" grep -q '^backends: host' ver.txt
"$D" rng --help >/dev/null; check "rng --help exits 0" [ $? = 0 ]
"$D" rng sample --help >/dev/null; check "rng sample --help exits 0" [ $? = 0 ]
"$D" inspect --help >/dev/null; check "inspect --help exits 0" [ $? = 0 ]

# --- rng philox: the known-answer vectors ---
nkat=0
while read -r name rounds c0 c1 c2 c3 k0 k1 e0 e1 e2 e3; do
  case $name in '#'*|'') continue ;; esac
  got=$("$D" rng philox --key "0x$k0,0x$k1" --counter "0x$c0,0x$c1,0x$c2,0x$c3")
  if [ "$got" = "$e0 $e1 $e2 $e3" ]; then ok "philox KAT $nkat"; else bad "philox KAT $nkat: got '$got' want '$e0 $e1 $e2 $e3'"; fi
  nkat=$((nkat+1))
done < "$ROOT/common/tests/data/philox4x32_10.txt"
check "read 3 known-answer vectors" [ "$nkat" = 3 ]
# decimal and hex spellings agree; a different counter gives different words
a=$("$D" rng philox --key 0,0 --counter 1,0,0,0); b=$("$D" rng philox --key=0x0,0x0 --counter=0x1,0,0,0)
check "decimal and hex spellings agree" [ "$a" = "$b" ]
c=$("$D" rng philox --key 0,0 --counter 0,0,0,0)
check "different counters differ (negative control)" [ "$a" != "$c" ]

# --- rng sample ---
S=(rng sample --dist gaussian --key 42 --stream 3 --purpose init)
"$D" "${S[@]}" --count 5 >s5.txt; check "sample exits 0" [ $? = 0 ]
"$D" "${S[@]}" --count 5 >s5b.txt
check "same arguments, identical output" cmp -s s5.txt s5b.txt
check "5 lines" [ "$(wc -l < s5.txt)" = 5 ]
check "every line is a number" awk '$0 !~ /^-?[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?$/ { exit 1 }' s5.txt
# %.17g drops trailing zeros, so not every line shows 17 digits; rng_xcheck.sh checks exact round trips
check "17 significant digits" grep -Eq '^-?[0-9]\.[0-9]{16}(e[-+][0-9]+)?$|^-?0\.0*[1-9][0-9]{16}$' s5.txt
"$D" "${S[@]}" --count 2 --offset 3 >o.txt
check "--offset 3 --count 2 equals lines 4-5 of --count 5" cmp -s o.txt <(sed -n 4,5p s5.txt)
"$D" "${S[@]}" --count 2 --offset 4 >o4.txt
check "--offset 4 differs from --offset 3 (negative control)" differ o.txt o4.txt
for dist in laplace uniform; do
  "$D" rng sample --dist $dist --key 7 --stream 0 --purpose noise --count 6 >d1.txt
  "$D" rng sample --dist $dist --key 7 --stream 0 --purpose noise --count 3 --offset 3 >d2.txt
  check "$dist offset consistency" cmp -s d2.txt <(sed -n 4,6p d1.txt)
done
"$D" rng sample --dist uniform --key 7 --stream 0 --purpose test --count 1000 >u.txt
check "uniforms in (0,1)" awk '{ if (!($1 > 0 && $1 < 1)) exit 1 }' u.txt
"$D" rng sample --dist gaussian --key 42 --stream 3 --purpose data --count 5 >p.txt
check "purpose separates streams (same key)" differ p.txt s5.txt
"$D" rng sample --dist gaussian --key 43 --stream 3 --purpose init --count 5 >k.txt
check "key separates streams" differ k.txt s5.txt
"$D" rng sample --dist gaussian --key 42 --stream 3 --purpose init --lane 1 --count 5 >l.txt
check "lane separates streams" differ l.txt s5.txt
"$D" rng sample --dist gaussian --key 42 --stream 0 --purpose init --count 0 >z.txt
check "count 0 prints nothing" [ ! -s z.txt ]

# --- inspect: a file written byte by byte ---
# header (84 bytes, a multiple of 8 after padding) + F32 [2] = {1.0, -2.0} little-endian
H='{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}}'
pad=$(( (8 - ${#H} % 8) % 8 )); H="$H$(printf '%*s' $pad '')"; n=${#H}
printf "$(printf '\\%03o\\%03o\\000\\000\\000\\000\\000\\000' $((n & 255)) $((n >> 8)))" >t.safetensors
printf '%s' "$H" >>t.safetensors
printf '\000\000\200\077\000\000\000\300' >>t.safetensors
printf '\000\000\200\077\000\000\000\300' >w.bin
"$D" inspect t.safetensors >ins.txt; check "inspect exits 0" [ $? = 0 ]
cat ins.txt
fsha=$(sha256sum t.safetensors | cut -d' ' -f1); wsha=$(sha256sum w.bin | cut -d' ' -f1)
check "inspect: file digest equals sha256sum" grep -qx "sha256 $fsha" ins.txt
check "inspect: tensor line (name, dtype, shape, digest of its bytes)" grep -qx "tensor w dtype=F32 shape=\[2\] sha256=$wsha" ins.txt
check "inspect: metadata" grep -qx "meta format=pt" ins.txt
check "inspect: counts" grep -qx "tensors 1" ins.txt
# a malformed copy: shape disagrees with data_offsets
sed 's/"shape":\[2\]/"shape":\[3\]/' t.safetensors >m.safetensors
expect_rc 2 'm\.safetensors.*shape needs 12 bytes' inspect m.safetensors
head -c 20 t.safetensors >tr.safetensors
expect_rc 2 'tr\.safetensors.*longer than the rest' inspect tr.safetensors
expect_rc 2 'cannot open .nope\.safetensors' inspect nope.safetensors
expect_rc 2 'expected one' inspect
expect_rc 2 'unexpected argument' inspect t.safetensors t.safetensors

# --- bad usage: exit 2 with a message naming the problem ---
expect_rc 2 "--count.*'nan'" "${S[@]}" --count nan
expect_rc 2 'NaN|not an' rng sample --dist gaussian --key nan --stream 0 --purpose test --count 1
expect_rc 2 '--count must be >= 0' "${S[@]}" --count -1
expect_rc 2 '--offset.*negative' "${S[@]}" --count 1 --offset -1
expect_rc 2 '--count needs a value' "${S[@]}" --count
expect_rc 2 'missing --count' "${S[@]}"
expect_rc 2 'missing --key' rng sample --dist gaussian --stream 0 --purpose test --count 1
expect_rc 2 "unknown option '--bogus'" "${S[@]}" --count 1 --bogus 3
expect_rc 2 "given more than once" "${S[@]}" --count 1 --count 2
expect_rc 2 "unknown value 'cauchy'" rng sample --dist cauchy --key 1 --stream 0 --purpose test --count 1
expect_rc 2 "unknown purpose 'secret'" rng sample --dist gaussian --key 1 --stream 0 --purpose secret --count 1
expect_rc 2 '--stream .* 32 bits' rng sample --dist gaussian --key 1 --stream 4294967296 --purpose test --count 1
expect_rc 2 '--lane .* 24 bits' rng sample --dist gaussian --key 1 --stream 0 --lane 16777216 --purpose test --count 1
expect_rc 2 'exceeds 2\^64' rng sample --dist gaussian --key 1 --stream 0 --purpose test --count 2 --offset 0xffffffffffffffff
expect_rc 2 '--key.*2 comma-separated' rng philox --key 1 --counter 0,0,0,0
expect_rc 2 '--counter.*32 bits' rng philox --key 0,0 --counter 0,0,0,0x100000000
expect_rc 2 "--counter.*empty word" rng philox --key 0,0 --counter 0,,0,0
expect_rc 2 'missing --counter' rng philox --key 0,0
expect_rc 2 "unknown subcommand 'frobnicate'" rng frobnicate
expect_rc 2 "unknown command 'frobnicate'" frobnicate
expect_rc 2 "unexpected argument" version extra

echo "$checks checks, $fails failed"
[ "$fails" = 0 ] && [ "$checks" -gt 0 ]
