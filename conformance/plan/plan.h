/* conformance/plan/plan.h — `dpcert plan`: a scaling model of one DP-SGD step on a DP x CP x ZeRO
 * layout (docs/plan.md gives every term, its formula, its source and its validation error).
 *
 * A projection is three parts, per device: memory (the engine's ledger formulas of
 * optimized/opt_cost.h, or the papers' framework model), communication (bytes per collective
 * kind and group, the engine's host algorithms or ring algorithms) and time (the step's
 * operations, each with its work units, times a device's per-operation cost, plus the
 * collectives over the links). Nothing here allocates in proportion to the model: the
 * calibration (plan_device.c) runs the host backend's operations on capped shapes. */
#ifndef PLAN_H
#define PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "common/status.h"
#include "conformance/reproduce/repro.h"
#include "optimized/opt_cost.h"

/* What the memory and communication terms describe (docs/plan.md §1). */
#define PLAN_PROFILES(X)                                                                                     \
    X(PLAN_ENGINE, "engine", "dpcert's engine: its ledger and byte-counter formulas (exact, validated here)") \
    X(PLAN_FRAMEWORK, "framework", "the papers' setting: bf16 + f32 AdamW, flash attention, ring collectives")
typedef enum {
#define PLAN_PROF_ENUM_(id, name, what) id,
    PLAN_PROFILES(PLAN_PROF_ENUM_)
#undef PLAN_PROF_ENUM_
    PLAN_N_PROFILES
} plan_profile;

/* The step's operation kinds and their work units (docs/plan.md §4). */
#define PLAN_OPS(X)                                                                                          \
    X(PLAN_OP_GEMM, "gemm", "FLOP", "dense GEMMs: forward, input gradients, summed weight gradients, bk_gemm")    \
    X(PLAN_OP_BGEMM, "pe-gemm", "FLOP", "per-example GEMMs (K = T): instantiation, fused norms")                 \
    X(PLAN_OP_ATTN, "attention", "FLOP", "causal attention, 4 B T^2 D forward + 8 B T^2 D backward per layer")   \
    X(PLAN_OP_GHOST, "ghost", "FLOP", "ghost norms 2 B T^2 (p + d) + B T^2 per linear layer")                    \
    X(PLAN_OP_ELEM, "elementwise", "element", "activation-sized passes: norms, rope, swiglu, softmax-xent, adds") \
    X(PLAN_OP_PEELEM, "pe-elementwise", "element", "per-example parameter-sized passes: squared norms, clipped sums") \
    X(PLAN_OP_NOISE, "noise", "element", "Gaussian noise draws (Philox)")                                        \
    X(PLAN_OP_OPTIM, "optimizer", "element", "private gradient and optimizer update")                            \
    X(PLAN_OP_ALLOC, "alloc", "byte", "fresh zeroed step buffers (the pass arenas)")
typedef enum {
#define PLAN_OP_ENUM_(id, name, unit, what) id,
    PLAN_OPS(PLAN_OP_ENUM_)
#undef PLAN_OP_ENUM_
    PLAN_N_OPS
} plan_op;
const char *plan_op_name(plan_op k);
const char *plan_op_unit(plan_op k);

/* The memory terms per device (ledger tags of docs/engine.md "Memory ledger"). */
#define PLAN_MEMS(X) X(params) X(grads) X(optimizer_state) X(master_weights) X(activations) X(per_example) \
    X(workspace) X(comm_buffers) X(gathered_params)
typedef enum {
#define PLAN_MEM_ENUM_(n) PLAN_MEM_##n,
    PLAN_MEMS(PLAN_MEM_ENUM_)
#undef PLAN_MEM_ENUM_
    PLAN_N_MEMS
} plan_mem;
extern const char *const plan_mem_names[PLAN_N_MEMS];

/* Collective kinds per group: the byte counters' kinds of conformance/reproduce/repro.h (REPRO_COLLS). */
#define PLAN_N_COLLS REPRO_N_COLLS
typedef repro_coll plan_coll;
extern const char *const plan_coll_names[PLAN_N_COLLS];

/* What is trained. */
typedef struct {
    opt_cost_llama model;     /* V, D, L, H, H_kv (engine: = H), F, tied */
    int64_t batch;            /* B: examples per step (the whole batch, over the DP ranks) */
    int64_t seq;              /* T */
    int64_t micro_batches;    /* k: chunks of a rank's share per step */
    opt_cost_strategy strategy;
    int elem_bytes;           /* engine: 8 (f64) or 4 (f32); framework: 2 (bf16 + f32 master) */
    int n_states;             /* optimizer states per parameter: AdamW 2, momentum 1, SGD 0 */
    int checkpoint;           /* 1: block activation checkpointing */
    int dp;                   /* 0: non-private (no per-example terms) */
} plan_job;

/* Where it runs. */
typedef struct {
    int64_t dp, cp;           /* N data-parallel x M context-parallel devices */
    int zero;                 /* 0 replicated, 1..3 ZeRO stages over the DP group */
    int cp_output;            /* 1: --cp-pattern output (engine); 0: input */
} plan_layout;

/* One link class: bandwidth per device (bytes/s) and latency per algorithm step (s). */
typedef struct { char name[32]; double bw, lat; } plan_link;

/* A device's per-operation costs (docs/plan.md §5). kind 0: roofline constants (GPUs,
 * entered with their source); kind 1: measured seconds per work unit of each operation
 * (the host, by plan_calibrate or read from a file). */
typedef struct {
    char name[64], source[640];
    int measured;                         /* 1: sec_per_unit holds measured costs */
    double sec_per_unit[PLAN_N_OPS]; /* measured: seconds per FLOP / element / byte */
    double flops, flops_attn, mem_bw;     /* roofline: FLOP/s (GEMMs), FLOP/s (attention), bytes/s */
    double capacity;                      /* device memory, bytes (0: not stated) */
    plan_link intra, inter;          /* links: within a node, between nodes */
    int64_t devices_per_node;
    int ring;                             /* collectives: 1 ring (NCCL), 0 the host's algorithms */
    double cores;                         /* host: cores the ranks of a node share (0: one device each) */
} plan_device;

/* Built-in devices: "host" (calibrated here), "h100", "h200" (roofline constants with their
 * sources). 0 when name is unknown. */
int plan_device_builtin(plan_device *out, const char *name);
/* Measures the host backend's per-operation costs at the shapes of job (capped so that the
 * calibration takes well under a second: docs/plan.md §5) on one thread, for a rank whose
 * largest chunk holds `chunk` examples; dtype by job->elem_bytes; working_set: the bytes of the
 * step (its memory projection) written before each timed run (the caches as a step leaves them). */
dp_status plan_calibrate(plan_device *dev, const plan_job *job, int64_t chunk, double working_set);
/* A device as JSON (write) and back (read, strict: every key known and typed). */
dp_status plan_device_write(const plan_device *dev, const char *path);
dp_status plan_device_read(plan_device *dev, const char *path);

/* The projection of one layout. */
typedef struct {
    int supported;            /* 0: the layout is refused (why says so) */
    char why[200];
    int64_t chunk;            /* largest chunk of a rank (examples) */
    int64_t tokens_local;     /* positions per example on a device (T / M, rounded up) */
    double mem[PLAN_N_MEMS], mem_total; /* bytes, the peaks of every term (their sum: an upper
                                              * bound of the peak total) */
    double sent_dp[PLAN_N_COLLS], sent_cp[PLAN_N_COLLS]; /* bytes one device sends per step */
    double calls_dp[PLAN_N_COLLS], calls_cp[PLAN_N_COLLS];
    double work[PLAN_N_OPS];   /* per device per step */
    double t_op[PLAN_N_OPS];   /* seconds */
    double t_compute, t_comm_dp, t_comm_cp, t_exposed, t_step;
    double tokens_per_s;            /* per device */
    int fits;                       /* mem_total <= the device's capacity (1 when not stated) */
} plan_result;

dp_status plan_job_check(const plan_job *job, plan_profile prof);
/* The projection (memory, bytes, work, time) of job on layout, device dev. A layout the engine
 * refuses (e.g. --cp with zero3) gives supported = 0 and DP_OK. */
dp_status plan_project(plan_result *out, const plan_job *job, const plan_layout *lay,
                            const plan_device *dev, plan_profile prof);

/* The engine's largest chunk on a rank: ceil(ceil(B / N) / k). */
int64_t plan_chunk(int64_t batch, int64_t dp, int64_t micro_batches);

#endif
