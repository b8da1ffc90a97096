/* conformance/commands.c — the commands of conformance/'s products (the table `main`
 * dispatches from, common/cmd.h); the one file at the top of conformance/, above every
 * product (ci/conformance-layers.sh). */
#include "common/cmd.h"

#define CONF_COMMANDS(X)                                                                                       \
    X("conform", dp_cmd_conform, "run a conformance suite: optimized vs reference, tensor by tensor")          \
    X("compare", dp_cmd_compare, "compare two exports (A.safetensors B.safetensors) under derived tolerances") \
    X("reproduce", dp_cmd_reproduce, "reproduce tables of the papers (e.g. 'reproduce dpzo-tables')")          \
    X("losscale", dp_cmd_losscale, "loss-scaling pipelines side by side; --check REF CAND: the losscale check") \
    X("plan", dp_cmd_plan, "project memory, communication and step time of a DP x CP x ZeRO layout; --search ranks layouts") \
    X("vectors", dp_cmd_vectors, "write the certification test vectors (--suite ci|certify --out DIR)")        \
    X("certify", dp_cmd_certify, "certify a third-party DP-SGD candidate command on the test vectors")         \
    X("keygen", dp_cmd_keygen, "make an Ed25519 key pair for signing certification reports")                  \
    X("verify-report", dp_cmd_verify_report, "check a certification bundle: signature, hashes, recomputed verdicts")
DP_COMMAND_TABLE(conformance, CONF_COMMANDS);
