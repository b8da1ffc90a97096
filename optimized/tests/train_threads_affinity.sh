#!/usr/bin/env bash
# optimized/tests/train_threads_affinity.sh — `train --threads N` on a process whose affinity
# mask holds fewer than N CPUs (what `mpirun -n 1` or `-n 2` does by default: each rank is
# bound to one core) prints a note on stderr naming the cause and the fix (docs/performance.md,
# "Ranks on one machine"), and the step is unchanged (results are bit-identical for any thread
# count). Negative control: the same run pinned to 1 CPU at --threads 1, and the run at
# --threads 2 on 2 CPUs (when this machine has 2), print no note. Deterministic.
set -u
D=${DPCERT:?}
command -v taskset >/dev/null 2>&1 || { echo "SKIP: taskset not found"; exit 77; }
fail=0
A="train dpsgd --impl optimized --backend host --strategy book-keeping --model llama --dim 8 --layers 1
   --seq 4 --heads 2 --ffn 8 --vocab 8 --dataset-size 4 --q 1 --steps 1 --seed 3 --noise-key 4"
taskset -c 0 "$D" $A --threads 2 >o2.txt 2>e2.txt; rc=$?
if [ $rc = 0 ] && grep -q 'note: --threads 2 but this process may run on 1 CPU' e2.txt && grep -q 'bind-to none' e2.txt
then echo "ok: pinned to 1 CPU at --threads 2: the note"; else echo "FAIL: pinned, --threads 2: exit $rc, stderr: $(head -c 300 e2.txt)"; fail=1; fi
taskset -c 0 "$D" $A --threads 1 >o1.txt 2>e1.txt; rc=$?
if [ $rc = 0 ] && ! grep -q 'note:' e1.txt; then echo "ok: pinned to 1 CPU at --threads 1: no note"
else echo "FAIL: pinned, --threads 1: exit $rc, stderr: $(head -c 300 e1.txt)"; fail=1; fi
if cmp -s o1.txt o2.txt; then echo "ok: the step's line is the same at 1 and 2 threads"
else echo "FAIL: the step differs: $(cat o1.txt) vs $(cat o2.txt)"; fail=1; fi
if [ "$(taskset -c 0,1 true 2>/dev/null && echo y)" = y ]; then
  taskset -c 0,1 "$D" $A --threads 2 >/dev/null 2>e3.txt; rc=$?
  if [ $rc = 0 ] && ! grep -q 'note:' e3.txt; then echo "ok: 2 CPUs at --threads 2: no note"
  else echo "FAIL: 2 CPUs, --threads 2: exit $rc, stderr: $(head -c 300 e3.txt)"; fail=1; fi
fi
exit $fail
