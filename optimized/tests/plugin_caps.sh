#!/usr/bin/env bash
# optimized/tests/plugin_caps.sh — a plugin's declaration is checked before any use
# (optimized/plugin_loader.c pl_check_caps, docs/plugin-abi.md "Declaration"): for each rule, a
# skeleton plugin that breaks it (optimized/tests/plugin_caps_variants.c, -DCAPS=N) is refused
# by `dpcert ops` with exit 2 and the message naming the field (name, description, dtypes,
# memory, inherit_host, collectives, determinism, ops[], arith[], device memory without its own
# alloc); the unchanged skeleton through the same build passes (positive control: the refusals
# are the declaration's, not the build's). Also plugin names and paths: an invalid name, a
# missing file, a file that is not a shared object.
set -u
D=${DPCERT:?}
R=${DPCERT_ROOT:?}
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($CC)"; exit 77; }
"$D" ops --help >/dev/null 2>&1 || { echo "SKIP: this dpcert has no 'ops' command"; exit 77; }
fail=0; n=0
VF=(-std=c11 -O1 -Wall -Wextra -Wno-unused-parameter -Wno-unused-function -Werror -shared -fPIC
    -I"$R/optimized/plugins/skeleton" "$R/optimized/tests/plugin_caps_variants.c" -lm)
# expect RC PATTERN WHAT ARGS...: `dpcert ARGS` exits RC with output matching PATTERN (grep -E)
expect() {
  local want=$1 pat=$2 what=$3; shift 3
  local out; out=$("$D" "$@" 2>&1); local rc=$?; n=$((n + 1))
  if [ "$rc" = "$want" ] && grep -qE -- "$pat" <<< "$out"; then echo "ok   $what (exit $rc)"
  else echo "FAIL $what: exit $rc (want $want): $(head -c 400 <<< "$out")"; fail=1; fi
}
# case number | the message's words
cases=(
  "1|caps.name must be 1 to 31 characters of \[a-z0-9_-\]"
  "2|caps.name must be 1 to 31 characters"
  "3|caps.description is not NUL-terminated"
  "4|caps.dtypes 0x0 is not a non-empty set"
  "5|caps.dtypes 0x83 is not a non-empty set"
  "6|caps.memory 7 is neither DPCERT_MEMORY_HOST nor _DEVICE"
  "7|caps.inherit_host must be 0 or 1"
  "8|caps.inherit_host needs DPCERT_MEMORY_HOST"
  "9|caps.collectives 99 is not a DPCERT_COLLECTIVES_\* value"
  "10|caps.determinism 99 is not a DPCERT_DET_\* value"
  "11|caps.ops\[axpby\] = 2 \(0 or 1\)"
  "12|caps.arith\[F64\] out of range"
  "13|caps.arith\[F32\] out of range"
  "14|caps.arith\[F64\] out of range"
  "15|device memory without 'alloc'"
)
"$CC" -DCAPS=0 "${VF[@]}" -o caps0.so || { echo "FAIL: the unchanged variant does not build"; exit 1; }
expect 0 "3 PASS" "positive control: the unchanged skeleton through this build passes" ops --backend plugin:./caps0.so
for c in "${cases[@]}"; do
  k=${c%%|*}; pat=${c#*|}
  if ! "$CC" -DCAPS="$k" "${VF[@]}" -o "caps$k.so"; then echo "FAIL: variant $k does not build"; fail=1; continue; fi
  expect 2 "plugin .*caps$k.so: $pat" "declaration $k refused: $pat" ops --backend "plugin:./caps$k.so"
done
expect 2 "plugin name 'Bad_Name': a name is \[a-z0-9_-\]" "an invalid plugin name" ops --backend plugin:Bad_Name
expect 2 "plugin './none.so': no readable file ./none.so" "a missing plugin file" ops --backend plugin:./none.so
printf 'not an ELF file\n' > text.so
expect 2 "plugin .*text.so: cannot load" "a file that is not a shared object" ops --backend plugin:./text.so
echo "plugin_caps: $n checks"
exit $fail
