#!/usr/bin/env bash
# common/tests/fsutil_targets.sh — the write rule for existing targets and the readers' size limit
# (common/fsutil.c, docs/development.md "Writing files"), through `reference dpzo --log FILE` (a
# writer) and `audit-accounting FILE` (a reader of text input, 64 MiB at most), fast:
# - refused with exit 2 and the file left as it was: an empty name, a name ending in '/', a
#   directory, a socket and a link to one ("dpcert writes regular files, character devices and
#   FIFOs only"), a FIFO no process reads ("a FIFO that no process is reading");
# - written: a dangling link and a link to a directory are replaced by the file (the link's
#   target not created or touched); a FIFO with a reader and /dev/null are written in place and
#   stay what they were; what the reader of the FIFO gets is the log a regular file gets;
# - read: a regular file over the limit is refused from its size, a stream over it (/dev/zero)
#   after reading limit + 1 bytes, each exit 2 naming the file and the limit;
# - the test hooks DPCERT_FAIL_IO and DPCERT_FAIL_ALLOC with a malformed value say "ignored" on
#   stderr and change nothing (the run exits 0 with the same output).
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
DZ="--model mlp --in 4 --hidden 8 --classes 3 --dataset-size 8 --q 0.5 --steps 2 --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 --seed 1 --noise-key 2"
# log TARGET: rc of `reference dpzo --log TARGET` (stderr in err.txt)
log() { "$D" reference dpzo $DZ --log "$1" >out.txt 2>err.txt; }
# refused TARGET PATTERN WHAT
refused() {
  log "$1"; local rc=$?
  if [ $rc = 2 ] && grep -Eq -- "$2" err.txt; then ok "$3: exit 2"; else bad "$3: exit $rc, stderr: $(head -c 300 err.txt)"; fi
}
log ref.log; check "a regular file: written (exit 0)" [ $? = 0 ] && [ -s ref.log ]
refused "" "option --log needs a value" "an empty name (refused by the option parser)"
refused nodir/ "--log nodir/: names a directory, not a file" "a name ending in /"
check "  nothing created for nodir/" [ ! -e nodir ]
mkdir dir
refused dir "--log dir: is a directory" "a directory"
check "  the directory is still an empty directory" [ -d dir ] && [ -z "$(ls -A dir)" ]
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
refused sock "--log sock: a socket: dpcert writes regular files, character devices and FIFOs only" "a socket"
check "  the socket is still a socket" [ -S sock ]
ln -s sock sock-link
refused sock-link "--log sock-link: a link to a socket" "a link to a socket"
check "  the link is still a link to the socket" [ -L sock-link ] && [ -S sock-link ]
mkfifo fifo
refused fifo "--log fifo: a FIFO that no process is reading" "a FIFO without a reader"
check "  the FIFO is still a FIFO" [ -p fifo ]
ln -s nowhere/x dangling
log dangling; check "a dangling link: exit 0, replaced by the file" [ $? = 0 ] && [ -f dangling ] && [ ! -L dangling ]
check "  the dangling link's target not created" [ ! -e nowhere ]
check "  the file is the log a regular file gets" cmp -s dangling ref.log
ln -s dir dir-link
log dir-link; check "a link to a directory: exit 0, the link replaced by the file" [ $? = 0 ] && [ -f dir-link ] && [ ! -L dir-link ]
check "  the directory untouched" [ -d dir ] && [ -z "$(ls -A dir)" ]
timeout 60 cat fifo > got.txt & reader=$!
# the reader must have opened the FIFO before the writer looks for one: retry while it has not
for i in $(seq 1 50); do log fifo; rc=$?; [ $rc = 2 ] && grep -q 'no process is reading' err.txt || break; sleep 0.1; done
wait $reader
check "a FIFO with a reader: exit 0 (got $rc), written in place" [ "$rc" = 0 ] && [ -p fifo ]
check "  the reader got the log a regular file gets" cmp -s got.txt ref.log
if [ -w /dev/null ]; then
  log /dev/null; check "/dev/null: exit 0, still a character device" [ $? = 0 ] && [ -c /dev/null ]
fi

# readers: the 64 MiB limit of text inputs
truncate -s 65M big.csv
"$D" audit-accounting big.csv >out.txt 2>err.txt; rc=$?
check "a 65 MiB claims file: exit 2 naming its size and the limit (got $rc)" [ $rc = 2 ] && \
  grep -q 'big.csv: 68157440 bytes, longer than the limit of 67108864 bytes' err.txt
"$D" audit-accounting /dev/zero >out.txt 2>err.txt; rc=$?
check "an endless stream: exit 2 after the limit (got $rc)" [ $rc = 2 ] && \
  grep -q '/dev/zero: longer than the limit of 67108864 bytes' err.txt

# malformed test hooks: ignored, said so, nothing changed
A="account --sigma 1 --q 0.01 --steps 10 --delta 1e-5 --accountant rdp"
"$D" $A > want.txt 2>/dev/null
for v in bogus enospc:0 enospc:x enospc:2junk short-write: ; do
  DPCERT_FAIL_IO=$v "$D" $A >out.txt 2>err.txt; rc=$?
  check "DPCERT_FAIL_IO='$v': ignored, said so, same output" [ $rc = 0 ] && grep -q "DPCERT_FAIL_IO='$v' ignored" err.txt && cmp -s out.txt want.txt
done
for v in 0 x 3++ -1 +; do
  DPCERT_FAIL_ALLOC=$v "$D" $A >out.txt 2>err.txt; rc=$?
  check "DPCERT_FAIL_ALLOC='$v': ignored, said so, same output" [ $rc = 0 ] && grep -q "DPCERT_FAIL_ALLOC='$v' ignored" err.txt && cmp -s out.txt want.txt
done
echo "fsutil_targets: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]
