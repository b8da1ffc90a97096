#!/usr/bin/env bash
# optimized/tests/train_option_rules.sh — `dpcert train`'s option rules (optimized/train_cmd.c,
# docs/engine.md "Command"), fast: each option that does not apply to the algorithm, each
# out-of-range value and each contradiction exits 2 with a message naming the option and the rule
# (--dtype vs --precision, --threads, --strategy / --noise-mode / --sharding / --dp / --cp /
# --cp-* / --checkpoint / --loss-scale / --memory-report for dpzo, --mixed-rule outside
# mixed-ghost and book-keeping, --inject-bug without DPCERT_TEST_INJECT=1, --collective-timeout);
# the DP-SGD options shared with `reference dpsgd` (common/spec_dpsgd.c: --gamma needs
# --clip-fn automatic, adamw's options refused with sgd and --momentum with adamw), through both
# commands; the accepted spellings of the same options run (exit 0), so a rule that refuses too
# much fails too. No MPI: one rank.
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
unset DPCERT_TEST_INJECT                              # the test-only switches stay refused
expect() { expect_exit "$1" "$2" train "${@:3}"; } # expect CODE PATTERN ARGS...: of `dpcert train ARGS`
M="--model mlp --in 4 --hidden 8 --classes 3 --dataset-size 8 --q 0.5 --steps 1 --seed 1 --noise-key 2"
S="dpsgd $M --clip 1 --sigma 1 --lr 0.1"
Z="dpzo $M --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3"
expect 2 "--dtype f32 and --precision f64 disagree" $S --dtype f32 --precision f64
expect 0 "" $S --dtype f32 --precision f32
expect 2 "--precision" $S --precision f128
expect 2 "--threads" $S --threads 0
expect 2 "--threads" $S --threads 257
expect 2 "--strategy does not apply to dpzo" $Z --strategy ghost
expect 2 "--noise-mode does not apply to dpzo" $Z --noise-mode shares
expect 2 "--noise-mode" $S --noise-mode loud
expect 2 "--mixed-rule applies to --strategy mixed-ghost or book-keeping only \(got --strategy grad-sample\)" $S --mixed-rule memory
expect 2 "--mixed-rule applies to .*none: dpzo" $Z --mixed-rule flop
expect 0 "" $S --strategy mixed-ghost --mixed-rule memory
expect 0 "" $S --strategy book-keeping --mixed-rule flop
expect 2 "--mixed-rule" $S --strategy mixed-ghost --mixed-rule speed
expect 2 "--inject-bug is a test-only switch .* DPCERT_TEST_INJECT=1" $S --inject-bug clip-after-sum
expect 2 "--inject-bug" $S --inject-bug no-such-bug
for o in "--sharding zero1" "--dp 1" "--cp 1" "--memory-report"; do
  expect 2 "--sharding, --dp, --cp and --memory-report apply to dpsgd only" $Z $o
done
expect 2 "--dp" $S --dp 0
expect 2 "--cp" $S --cp 0
for o in "--cp-attention ring" "--cp-pattern output" "--cp-overlap off"; do
  expect 2 "--cp-attention, --cp-pattern and --cp-overlap apply to dpsgd only" $Z $o
done
expect 2 "--checkpoint applies to dpsgd only" $Z --checkpoint block
expect 2 "--checkpoint" $S --checkpoint layer
expect 2 "--cp-overlap" $S --cp-overlap maybe
expect 2 "--collective-timeout must be in \(0, 1e6\] seconds \(got 0\)" $S --collective-timeout 0
expect 2 "--collective-timeout must be in \(0, 1e6\] seconds" $S --collective-timeout 2e6
expect 0 "" $S --collective-timeout 30
expect 2 "--loss-scale applies to dpsgd only" $Z --loss-scale 1024
# the shared DP-SGD options, the same rules in both commands
for cmd in train reference; do
  R="dpsgd $M --clip 1 --sigma 1 --lr 0.1"
  e() { expect_exit "$1" "$2" "$cmd" "${@:3}"; }
  e 2 "--gamma applies to --clip-fn automatic only" $R --gamma 0.1
  e 0 "" $R --clip-fn automatic --gamma 0.1
  e 2 "--clip-fn" $R --clip-fn soft
  for o in "--beta1 0.8" "--beta2 0.9" "--adam-eps 1e-6" "--weight-decay 0.1"; do
    e 2 "--beta1, --beta2, --adam-eps and --weight-decay apply to --optimizer adamw only" $R --optimizer sgd $o
  done
  e 0 "" $R --optimizer adamw --beta1 0.8 --weight-decay 0.1
  e 2 "--momentum applies to --optimizer sgd only" $R --optimizer adamw --momentum 0.5
  e 0 "" $R --optimizer sgd --momentum 0.5
  e 2 "--optimizer" $R --optimizer lamb
  e 2 "--clipping" $R --clipping diagonal
done
echo "train_option_rules: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]
