#!/usr/bin/env bash
# common/tests/rng_xcheck.sh — an independent reimplementation of docs/rng.md
# sections 1-3 (Philox4x32-10, stream layout, uniform/Gaussian/Laplace) in Python,
# written from the document only, compared with `dpcert rng` bit for bit
# (values printed with %.17g round-trip exactly; Python's math module calls the
# same C library log/sqrt/cos/sin). Skipped (77) without python3.
set -u
D=${DPCERT:?run through ci/run-tests.sh}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
cat >ref.py <<'PY'
import math, sys
M = 0xFFFFFFFF
def philox(c, k):
    c = list(c); k = list(k)
    for r in range(10):
        if r > 0:
            k[0] = (k[0] + 0x9E3779B9) & M; k[1] = (k[1] + 0xBB67AE85) & M
        p0 = 0xD2511F53 * c[0]; p1 = 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & M, (p0 >> 32) ^ c[3] ^ k[1], p0 & M]
    return c
PURPOSE = {"data": 1, "init": 2, "dpzo-dir": 3, "attack-data": 4, "test": 5,
           "noise": 0x81, "sampling": 0x82, "dpzo-noise": 0x83, "audit-noise": 0x84}
def block(key, p, s, l, j): return philox([j & M, j >> 32, s, (p << 24) | l], [key & M, key >> 32])
def word(b, odd): return (b[2] | b[3] << 32) if odd else (b[0] | b[1] << 32)
def u(w): return float(2 * (w >> 12) + 1) * 2.0 ** -53
def sample(dist, key, p, s, l, i):
    b = block(key, p, s, l, i >> 1)
    if dist == "uniform": return u(word(b, i & 1))
    if dist == "laplace":
        d = u(word(b, i & 1)) - 0.5; m = -math.log(1.0 - 2.0 * abs(d)); return -m if d < 0 else m
    r = math.sqrt(-2.0 * math.log(u(word(b, 0)))); a = 6.283185307179586 * u(word(b, 1))
    return r * math.sin(a) if i & 1 else r * math.cos(a)
mode = sys.argv[1]
if mode == "philox":
    k = [int(x, 0) for x in sys.argv[2].split(",")]; c = [int(x, 0) for x in sys.argv[3].split(",")]
    print(" ".join("%08x" % w for w in philox(c, k)))
else:
    dist, key, purpose, stream, lane, off, cnt = sys.argv[2:9]
    for i in range(int(off), int(off) + int(cnt)):
        print(repr(sample(dist, int(key, 0), PURPOSE[purpose], int(stream), int(lane), i)))
PY
fails=0; checks=0
for args in "0,0 0,0,0,0" "0xffffffff,0xffffffff 0xffffffff,0xffffffff,0xffffffff,0xffffffff" \
            "42,0 2,0,3,0x02000000" "0x12345678,0x9abcdef0 7,1,0xffffffff,0x81ffffff"; do
  set -- $args
  a=$("$D" rng philox --key "$1" --counter "$2"); b=$(python3 ref.py philox "$1" "$2")
  checks=$((checks+1)); if [ "$a" = "$b" ]; then echo "ok   philox $1 $2: $a"; else fails=$((fails+1)); echo "FAIL philox $1 $2: dpcert '$a' python '$b'"; fi
done
# dist key purpose stream lane offset count
cases=("uniform 42 init 3 0 0 40" "gaussian 42 init 3 0 1 41" "laplace 7 noise 0 5 0 40"
       "gaussian 0xfedcba9876543210 noise 4294967295 16777215 18446744073709551000 20"
       "uniform 1 sampling 17 0 4294967290 12" "gaussian 3 dpzo-dir 9 65539 100 30" "laplace 5 audit-noise 2 0 3 25")
for c in "${cases[@]}"; do
  set -- $c
  "$D" rng sample --dist "$1" --key "$2" --purpose "$3" --stream "$4" --lane "$5" --offset "$6" --count "$7" >d.txt
  python3 ref.py sample "$@" >p.txt
  # compare numerically-exact: both sides parsed as doubles by python
  if python3 -c 'import sys; a=[float(x) for x in open("d.txt")]; b=[float(x) for x in open("p.txt")]; sys.exit(0 if a==b and len(a)==int(sys.argv[1]) else 1)' "$7"; then
    checks=$((checks+1)); echo "ok   sample $c"
  else checks=$((checks+1)); fails=$((fails+1)); echo "FAIL sample $c"; paste d.txt p.txt | head -5; fi
done
# negative control: the old uniform formula ((w >> 11) + 0.5) 2^-53 must NOT match dpcert
sed 's/return float(2 \* (w >> 12) + 1) \* 2.0 \*\* -53/return ((w >> 11) + 0.5) * 2.0 ** -53/' ref.py >old.py
"$D" rng sample --dist uniform --key 42 --purpose init --stream 3 --lane 0 --offset 0 --count 40 >d.txt
python3 old.py sample uniform 42 init 3 0 0 40 >p.txt
checks=$((checks+1))
if python3 -c 'import sys; a=[float(x) for x in open("d.txt")]; b=[float(x) for x in open("p.txt")]; sys.exit(0 if a!=b else 1)'; then
  echo "ok   negative control: a different uniform conversion is detected"
else fails=$((fails+1)); echo "FAIL negative control not detected"; fi
echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
