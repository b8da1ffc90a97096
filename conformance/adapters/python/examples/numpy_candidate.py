#!/usr/bin/env python3
"""A DP-SGD candidate in plain numpy for `dpcert certify` (docs/certification.md):

    dpcert certify --candidate 'python3 examples/numpy_candidate.py' --suite ci
    dpcert certify --candidate 'dpcert-numpy-candidate' --candidate-mode persistent --suite ci   (installed adapter)

Run as `numpy_candidate.py [--mutant M] [--params-after] [--f32] IN OUT` (one call), or with
no IN OUT under `--candidate-mode persistent` (dpcert_adapter.run serves both). DP-ZO vectors:
n directions, clipped loss differences, noisy scalars (docs/dpzo.md). Step vectors (mlp and
llama): per-example gradients of dpcert's models (docs/models.md; the llama's backward in
numpy_llama.py), per-example clipping (flat / per-layer / group, abadi or automatic), sum,
Gaussian noise sigma * C_total * N(0, 1) from OS entropy (one generator per process, fresh in
every run), division by the expected batch size. Sampling vectors: Poisson masks. Trajectory
vectors: served by dpcert_adapter.run as consecutive step vectors in this process.

Deliberate mutants (tests that `certify` catches them): no-noise, no-clip, no-noise-1d (no noise on
1-D tensors: biases, norm gains), clip-after-sum, noise-scale:F (under- or over-noised by F),
fixed-noise (the same noise every run), same-noise-steps (stateful: the noise drawn once per
process and reused at every step), reseed-epoch (the generator reseeded every epoch with a
seed drawn once per process: noise and batches repeat), shuffle (fixed-size batches from a
shuffled epoch), fixed-size (round(qN) examples without replacement each step), correlated
(examples 2j and 2j+1 always together), fixed-sampling-seed (the same masks every run),
wrong-q:F (rate F q), fixed-dirs (DP-ZO: the same directions every run), no-drop (DP-ZO: a
non-finite loss difference counted as +C; no-noise, noise-scale:F, same-noise-steps and
reseed-epoch also apply to DP-ZO: its scalar noise, its directions), group-thresh-total (group
clipping: every group clipped at C_total instead of its own threshold R_m: the sensitivity is
sqrt(groups) times the claim), group-noise-own-r (group clipping: each group's noise std
sigma R_m instead of sigma C_total).
"""
import argparse
import os
import sys

import numpy as np

try:  # installed as dpcert_adapter.examples (the dpcert-numpy-candidate entry point)
    from dpcert_adapter import Vector, run, write_output
    from . import numpy_llama
except ImportError:  # run as a script from the repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dpcert_adapter import Vector, run, write_output  # noqa: E402
    import numpy_llama  # noqa: E402  (this directory: the llama's forward and backward)

# working precision of step vectors (--f32: float32 parameters, data, gradients, sums, outputs)
W_DTYPE, W_NAME = np.float64, "f64"


def mlp_per_example(v, params=None, grad=True):
    """Per-example losses [B] and gradients {name: [B, ...]} of dpcert's mlp at `params`
    (default the vector's); grad=False: the losses only."""
    params = v.params if params is None else params
    nin, hidden, classes = v.mlp_sizes()
    x = v.batch["x"].astype(W_DTYPE)
    y = v.batch["y"].astype(np.int64)
    B = x.shape[0]
    nl = len(hidden) + 1
    W = [params[f"layers.{i}.weight"] for i in range(nl)]
    b = [params[f"layers.{i}.bias"] for i in range(nl)]
    hs = [x]
    with np.errstate(all="ignore"):
        for i in range(nl - 1):
            hs.append(np.tanh(hs[-1] @ W[i].T + b[i]))
        z = hs[-1] @ W[-1].T + b[-1]                       # [B, classes]
        m = np.max(z, axis=1, keepdims=True)
        e = np.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        loss = (m[:, 0] + np.log(s[:, 0])) - z[np.arange(B), y]
        if not grad:
            return loss, None
        d = e / s
        d[np.arange(B), y] -= 1.0                          # p - e_y  [B, classes]
        grads = {}
        for i in range(nl - 1, -1, -1):
            grads[f"layers.{i}.weight"] = np.einsum("bo,bi->boi", d, hs[i])
            grads[f"layers.{i}.bias"] = d.copy()
            if i:
                d = (d @ W[i]) * (1.0 - hs[i] * hs[i])
    return loss, grads


def rows(a):
    """[B, ...] -> [B, prod(...)] (also for B = 0)."""
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:])))


def step(v, out, mutant, rng, params_after=False):
    if v.meta.get("model") == "llama":
        loss, grads = numpy_llama.per_example(v)
    else:
        loss, grads = mlp_per_example(v)
    names = list(v.params.keys())
    B = loss.shape[0]
    finite = np.isfinite(loss)
    for n in names:
        finite &= np.all(np.isfinite(rows(grads[n])), axis=1)
    pg, th = v.groups()
    groups = list(th.keys())
    gnorm = {}
    with np.errstate(all="ignore"):
        for g in groups:
            sq = np.zeros(B, dtype=W_DTYPE)
            for n in names:
                if pg[n] == g:
                    sq += np.sum(rows(grads[n]) ** 2, axis=1)
            gnorm[g] = np.sqrt(sq)
        total = np.sqrt(sum(gnorm[g] ** 2 for g in groups))
    fn = v.meta["clip_fn"]
    cf = {}
    for g in groups:
        R, nr = th[g], gnorm[g]
        if mutant == "group-thresh-total":  # every group clipped at C_total instead of its own R_m
            R = v.c_total
        with np.errstate(all="ignore"):
            if fn == "automatic":
                c = R / (nr + float(v.meta["gamma"]))
            else:
                c = np.where(nr <= R, 1.0, R / nr)
        if mutant == "no-clip":  # no clipping at all: every factor 1
            c = np.ones(B, dtype=W_DTYPE)
        cf[g] = np.where(finite, c, 0.0)
    sums = {}
    for n in names:
        gi = np.where(finite.reshape((B,) + (1,) * (grads[n].ndim - 1)), grads[n], 0.0)
        if mutant == "clip-after-sum":
            sums[n] = gi.sum(axis=0)
        else:
            sums[n] = np.tensordot(cf[pg[n]], gi, axes=(0, 0)) if B else np.zeros(v.params[n].shape)
    if mutant == "clip-after-sum":
        tot = np.sqrt(sum(np.sum(s * s) for s in sums.values()))
        f = 1.0 if tot <= v.clip else v.clip / tot
        sums = {n: s * f for n, s in sums.items()}
    scale = v.sigma * v.c_total
    if mutant == "no-noise":
        scale = 0.0
    elif mutant.startswith("noise-scale:"):
        scale *= float(mutant.split(":", 1)[1])
    res = {}
    qn = v.expected_batch_size
    rng = STATE.step_rng(rng, v)
    for n in names:
        sc = 0.0 if (mutant == "no-noise-1d" and v.params[n].ndim == 1) else scale
        if mutant == "group-noise-own-r":  # each group's noise sized by its own threshold: sigma R_m, not sigma C_total
            sc = v.sigma * th[pg[n]]
        z = sc * STATE.normal(rng, n, v.params[n].shape, mutant)
        res[f"step.noise.{n}"] = z
        res[f"step.clipped_sum.{n}"] = sums[n]
        if params_after:  # SGD with the vector's lr: params - lr G in place of G
            res[f"params_after.{n}"] = v.params[n] - float(v.meta["lr"]) * ((sums[n] + z) / qn)
        else:
            res[f"step.private_grad.{n}"] = (sums[n] + z) / qn
    with np.errstate(all="ignore"):
        res["per_sample.norm"] = np.where(finite, total, np.nan)
    if len(groups) == 1:
        res["per_sample.clip_factor"] = cf[groups[0]]
    else:
        for g in groups:
            res[f"per_sample.clip_factor.{g}"] = cf[g]
            res[f"per_sample.norm.{g}"] = np.where(finite, gnorm[g], np.nan)
    clip_fn = fn if fn != "automatic" else "automatic:" + v.meta["gamma"]
    if DECLARE_CLIP:
        clip_fn = DECLARE_CLIP
    res = {k: a.astype(W_DTYPE) for k, a in res.items()}
    write_output(out, res, {"dtype": W_NAME, "clip_fn": clip_fn, "candidate": "numpy_candidate.py " + mutant})


def dpzo(v, out, mutant, rng):
    """One DP-ZO step (docs/dpzo.md step 2; docs/certification.md "DP-ZO"): n directions
    z_j ~ N(0, I), clipped loss differences at theta +- phi z_j (a non-finite difference is
    dropped), S_j + N(0, n sigma^2 C^2), divided by qN 2 phi."""
    losses = numpy_llama.per_example if v.meta.get("model") == "llama" else mlp_per_example
    n, phi, C, sigma, qn = int(v.num("n_spsa")), v.num("phi"), v.clip, v.sigma, v.expected_batch_size
    rng = STATE.step_rng(rng, v)  # reseed-epoch: directions and noise repeat every epoch
    # directions: fresh (not secret); the fixed-dirs mutant reuses the same ones every run
    zrng = np.random.default_rng(777) if mutant == "fixed-dirs" else rng
    names = list(v.params.keys())
    z = {k: zrng.standard_normal((n,) + v.params[k].shape) for k in names}
    B = next(iter(v.batch.values())).shape[0]
    lp, lm = np.zeros((n, B)), np.zeros((n, B))
    for j in range(n):
        lp[j], _ = losses(v, {k: v.params[k] + phi * z[k][j] for k in names}, grad=False)
        lm[j], _ = losses(v, {k: v.params[k] - phi * z[k][j] for k in names}, grad=False)
    with np.errstate(invalid="ignore"):
        d = lp - lm
    dc = np.where(np.isfinite(d), np.clip(np.nan_to_num(d), -C, C), C if mutant == "no-drop" else 0.0)
    S = dc.sum(axis=1)
    scale = sigma * C * np.sqrt(n)
    if mutant == "no-noise":
        scale = 0.0
    elif mutant.startswith("noise-scale:"):
        scale *= float(mutant.split(":", 1)[1])
    Z = scale * STATE.normal(rng, "dpzo.noise", (n,), mutant)  # same-noise-steps: drawn once, reused
    res = {f"dpzo.z.{k}": z[k] for k in names}
    res["step.scalar"] = (S + Z) / ((qn * 2.0) * phi)
    res["step.noise"] = Z
    res["per_sample.diff_clipped"] = dc
    res["per_sample.loss_plus"] = lp
    res["per_sample.loss_minus"] = lm
    write_output(out, res, {"dtype": "f64", "candidate": "numpy_candidate.py " + mutant})  # DP-ZO: always f64


def sampling(v, out, mutant, rng):
    K, N = (int(t) for t in v.tensors["sampling.shape"])
    q = v.num("q")
    if mutant.startswith("wrong-q:"):
        q *= float(mutant.split(":", 1)[1])
    if mutant == "fixed-sampling-seed":
        rng = np.random.default_rng(4242)
    bs = max(1, int(round(q * N)))
    mask = np.zeros((K, N), dtype=np.int32)
    if mutant == "shuffle":  # fixed-size batches of q N from a shuffled epoch
        perm = rng.permutation(N)
        pos = 0
        for k in range(K):
            if pos + bs > N:
                perm, pos = rng.permutation(N), 0
            mask[k, perm[pos:pos + bs]] = 1
            pos += bs
    elif mutant == "fixed-size":  # round(qN) examples drawn without replacement, each step afresh
        for k in range(K):
            mask[k, rng.choice(N, bs, replace=False)] = 1
    elif mutant == "correlated":  # examples 2j and 2j+1 are in or out together
        pairs = rng.random((K, (N + 1) // 2)) < q
        mask = np.repeat(pairs, 2, axis=1)[:, :N].astype(np.int32)
    else:
        for k in range(K):  # one step at a time: the reseed-epoch mutant reseeds between steps
            r = STATE.step_rng(rng, v, epoch=max(1, int(round(1 / q))))
            mask[k] = r.random(N) < q
    write_output(out, {"sampling.mask": mask}, {"candidate": "numpy_candidate.py " + mutant})


class State:
    """What the process keeps from request to request (persistent mode, trajectories): the
    generator (OS entropy, drawn once) and, for the stateful mutants, a step counter, the
    cached noise (same-noise-steps) and the per-process epoch seed (reseed-epoch)."""

    def __init__(self):
        self.rng = np.random.default_rng()
        self.mutant = "none"
        self.steps = 0
        self.cache = {}
        self.epoch_seed = int(np.random.default_rng().integers(1 << 62))

    def step_rng(self, rng, v, epoch=None):
        """The generator of the next step (counts it)."""
        self.steps += 1
        if self.mutant != "reseed-epoch":
            return rng
        if epoch is None:
            epoch = 10
            if "dataset_size" in v.meta and "expected_batch_size" in v.meta:
                epoch = max(1, int(round(v.num("dataset_size") / v.num("expected_batch_size"))))
        if (self.steps - 1) % epoch == 0:
            self.rng = np.random.default_rng(self.epoch_seed)
        return self.rng

    def normal(self, rng, name, shape, mutant):
        if mutant != "same-noise-steps":
            return rng.standard_normal(shape)
        if name not in self.cache or self.cache[name].shape != tuple(shape):
            self.cache[name] = rng.standard_normal(shape)
        return self.cache[name]


STATE = State()
DECLARE_CLIP = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutant", default="none")
    ap.add_argument("--f32", action="store_true", help="step vectors: compute in float32 and declare dtype f32")
    ap.add_argument("--declare-dtype", default=None, help="declare this dtype instead of the working one (a negative control)")
    ap.add_argument("--declare-clip", default=None, help="declare this clip_fn (e.g. plain automatic) instead of the exact one")
    ap.add_argument("--params-after", action="store_true",
                    help="step vectors: export params_after = params - lr G instead of G (SGD vectors)")
    a, rest = ap.parse_known_args()
    global DECLARE_CLIP
    DECLARE_CLIP = a.declare_clip
    STATE.mutant = a.mutant

    def handle(inp, out):
        global W_DTYPE, W_NAME
        # secret randomness: OS entropy, never a fixed or public seed (except the fixed-noise mutant)
        rng = np.random.default_rng(12345) if a.mutant == "fixed-noise" else STATE.rng
        v = Vector.load(inp)
        W_DTYPE, W_NAME = np.float64, "f64"
        if a.f32 and v.kind == "step":
            W_DTYPE, W_NAME = np.float32, "f32"
            v.params = {k: x.astype(np.float32) for k, x in v.params.items()}
        if a.declare_dtype:
            W_NAME = a.declare_dtype
        if v.kind == "sampling":
            sampling(v, out, a.mutant, rng)
        elif v.kind == "dpzo":
            dpzo(v, out, a.mutant, rng)
        else:
            step(v, out, a.mutant, rng, a.params_after and v.meta.get("optimizer") == "sgd")

    run(handle, rest)


if __name__ == "__main__":
    main()
