#!/usr/bin/env bash
# conformance/tests/plan_cli.sh — `dpcert plan` beyond conformance/tests/test_plan.c's option errors
# (docs/plan.md §4): the --link grammar NAME:BW[UNIT][/s][/LAT[us|ns|ms|s]] read back through
# --save-device (every unit and latency unit, one link standing for both, the documented
# nvlink:900GB/s/5us form: a regression, it was refused), malformed links, --capacity and
# --devices-per-node; device files (--device FILE): a saved device round-trips to the same
# projection, and each defect of the file (not JSON, not an object, unknown field, wrong types,
# missing or out-of-range numbers, seconds_per_unit incomplete or with an extra entry, a roofline
# device without rates) exits 2 naming the file and the field; --search's JSON ranks and --top;
# --mbs derives the micro-batches. Runs on the builtin h100 device (no host calibration): fast.
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
expect() { expect_exit "$1" "$2" plan "${@:3}"; } # expect CODE PATTERN ARGS...: of `dpcert plan ARGS`
# field FILE KEY: the JSON value of KEY in FILE
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }
# same A B: the numbers A and B agree to 1e-12 relative
same() { python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-12 * max(abs(a), abs(b)))' "$1" "$2" 2>/dev/null; }

# --- --link, read back from the saved device ---
# link SPEC INTRA_BW INTRA_LAT INTER_BW INTER_LAT
link() {
  rm -f dev.json
  "$D" plan --device h100 --link "$1" --save-device dev.json >out.txt 2>err.txt; local rc=$?
  if [ "$rc" = 0 ] && same "$(field dev.json intra_bw)" "$2" && same "$(field dev.json intra_latency)" "$3" &&
     same "$(field dev.json inter_bw)" "$4" && same "$(field dev.json inter_latency)" "$5"; then ok "--link $1"
  else bad "--link $1: exit $rc, saved $(field dev.json intra_bw) $(field dev.json intra_latency) $(field dev.json inter_bw) $(field dev.json inter_latency) (want $2 $3 $4 $5): $(head -c 200 err.txt)"; fi
}
link nvlink:900GB/s/5us,ib:50Gb/s/2ms 9e11 5e-6 6.25e9 2e-3
link nvlink:900GB/s,ib:50GB/s 9e11 5e-6 5e10 1e-5         # latencies kept from the device (h100: 5 us, 10 us)
link shm:2e9/20us 2e9 2e-5 2e9 2e-5                      # bytes/s without a unit; one link is both
link a:1TB/s/3ns,b:1Tb/7s 1e12 3e-9 1.25e11 7
link a:5KB/1,b:3MB/s/0 5e3 1 3e6 0
link a:7B/s/4ms 7 4e-3 7 4e-3
for l in nvlink:900GB/x nvlink:900GBs nvlink:900GB/s/5xs nvlink:-1GB/s nvlink:0GB/s nvlink:900GB/s/ nvlink:900XB/s \
         nvlink:1e999GB/s nvlink:900GB/s/-5us nvlink:900GB/s/5us/1 nvlink:900GB/s/5usecs; do
  expect 2 "--link: bandwidth '.*' of nvlink must be" --device h100 --link "$l"
done
expect 2 "--link must be NAME:BANDWIDTH" --device h100 --link a:1GB/s,b:1GB/s,c:1GB/s
expect 2 "--link must be NAME:BANDWIDTH" --device h100 --link :1GB/s
expect 2 "--link must be NAME:BANDWIDTH" --device h100 --link a-name-longer-than-any-link-name-field-can-hold-at-all:1GB/s

# --- --capacity and --devices-per-node ---
rm -f dev.json; "$D" plan --device h100 --capacity 40G --devices-per-node 4 --save-device dev.json >/dev/null 2>&1
check "--capacity 40G saved as 40 x 2^30 bytes" same "$(field dev.json capacity)" 42949672960
check "--devices-per-node 4 saved" [ "$(field dev.json devices_per_node)" = 4 ]
expect 2 "--capacity" --device h100 --capacity 40Q
expect 2 "--devices-per-node must be" --device h100 --devices-per-node 0   # was taken as "the device's" (regression)
expect 2 "--devices-per-node must be" --device h100 --devices-per-node -3

# --- device files ---
"$D" plan --device h100 --save-device h100.json >/dev/null 2>&1
check "--save-device writes the device" [ "$(field h100.json name)" = "H100 SXM (80 GB)" ]
"$D" plan --device h100 --json >a.json 2>/dev/null && "$D" plan --device h100.json --json >b.json 2>/dev/null
check "a saved device gives the same projection (JSON identical)" cmp -s a.json b.json
grep -q '"t_step"\|"step_seconds"\|"seconds"' a.json; check "the projection has timings" [ $? = 0 ]
# devfile NAME PATTERN PYTHON: h100.json edited by PYTHON (d is the object) must exit 2 naming the field
devfile() {
  python3 -c 'import json, sys
d = json.load(open("h100.json"))
exec(sys.argv[2])
open(sys.argv[1], "w").write(json.dumps(d))' "$1.json" "$3"
  expect 2 "$1.json: $2" --device "$1.json"
}
devfile unknown 'unknown field "speed"' 'd["speed"] = 1'
devfile name 'name and source must be strings' 'd["name"] = 3'
devfile ring 'name and source must be strings, measured and ring booleans' 'd["ring"] = "yes"'
devfile dpn 'name and source .*devices_per_node a positive integer' 'd["devices_per_node"] = 0'
devfile noflops 'field "flops" must be a number' 'del d["flops"]'
devfile negbw 'field "memory_bandwidth" must be finite and >= 0' 'd["memory_bandwidth"] = -1'
devfile lowlink 'field "intra_bw" must be finite and >= 1' 'd["intra_bw"] = 0.5'
devfile strlat 'field "inter_latency" must be a number' 'd["inter_latency"] = "5us"'
devfile ops 'seconds_per_unit must be an object' 'd["seconds_per_unit"] = [0]'
devfile opmiss 'field "gemm" must be a number' 'del d["seconds_per_unit"]["gemm"]'
devfile opextra 'seconds_per_unit has 10 entries' 'd["seconds_per_unit"]["warp"] = 0'
devfile roof 'a roofline device needs flops' 'd["flops"] = 0'
printf '[1, 2]' > arr.json
expect 2 "arr.json: not a JSON object" --device arr.json
printf '{"name": ' > cut.json
expect 2 "cut.json: not a JSON object \(line 1" --device cut.json
printf '{"name": "a", "name": "b"}' > dup.json
expect 2 "dup.json: not a JSON object" --device dup.json

# --- --search and --mbs ---
"$D" plan --device h100 --search --devices 8 --json >s.json 2>err.txt
check "--search --json: ranks 1.. over the layouts that fit, 0 for the rest" python3 -c '
import json; o = json.load(open("s.json")); L = o["layouts"]
r = [x["rank"] for x in L if x["rank"]]
assert o["devices"] == 8 and len(L) > 1 and r == list(range(1, len(r) + 1)), r
assert all(x["dp"] * x["cp"] == 8 for x in L)'
"$D" plan --device h100 --search --devices 8 --top 2 >t.txt 2>err.txt
check "--search --top 2 prints 2 ranked rows" [ "$(grep -cE '^ +[0-9-]+ +[0-9]+ +[0-9]+ ' t.txt)" = 2 ]
"$D" plan --device h100 --mbs 4 --dp 2 --json >m.json 2>err.txt
check "--mbs 4 --dp 2 --batch 16: 2 micro-batches of the share 8" [ "$(field m.json micro_batches)" = 2 ]
"$D" plan --device h100 --non-private --json >n.json 2>err.txt
check "--non-private: strategy non-private" [ "$(field n.json strategy)" = non-private ]
echo "plan_cli: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]
