#!/usr/bin/env python3
"""Opacus's own DPOptimizer as a `dpcert certify` candidate (docs/certification.md):

    dpcert certify --candidate 'python examples/opacus_candidate.py [--declare abadi]' --suite certify
    dpcert certify --candidate 'python examples/opacus_candidate.py' --candidate-mode persistent --suite certify

Step vectors: dpcert's model (dpcert_adapter.torch_models, float64) with the vector's
parameters wrapped in Opacus's GradSampleModule; loss = mean of the per-example losses with
loss_reduction="mean" and expected_batch_size = qN, so Opacus releases
p.grad = (sum_i clip_i g_i + N(0, sigma^2 C_total^2)) / qN. Flat clipping uses
max_grad_norm = C; per-layer clipping uses clipping="per_layer" with the vector's per-tensor
thresholds. Opacus clips with min(1, C / (n + 1e-6)): declared as clip_fn abadi_eps:1e-6
(--declare abadi declares plain abadi instead, which certify must reject in f64).
The wrapper drops examples with a non-finite loss before Opacus sees them (Opacus itself
does not: a NaN example would poison the sum). Sampling vectors: Opacus's
UniformWithReplacementSampler (Poisson).
"""
import argparse
import os
import sys

import numpy as np
import torch

try:  # installed (dpcert-opacus-candidate) or run as a script from the repository
    from dpcert_adapter import Vector, run, write_output
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from dpcert_adapter import Vector, run, write_output  # noqa: E402
from dpcert_adapter.torch_models import dpcert_name, from_vector  # noqa: E402


def expand(t, keep, B, fill):
    """[B'] values of the kept examples -> [B] with `fill` for the dropped ones."""
    out = np.full(B, fill, dtype=np.float64)
    out[keep.cpu().numpy()] = t.detach().cpu().numpy()
    return out


def step(v, out, declare):
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer, DPPerLayerOptimizer

    model = from_vector(v)
    batch = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in v.batch.items()}
    B = next(iter(batch.values())).shape[0]
    keep = torch.ones(B, dtype=torch.bool)
    losses = np.zeros(B)
    if B:
        with torch.no_grad():
            lo = model.per_example_loss(batch)
        keep = torch.isfinite(lo)
        losses = lo.cpu().numpy().astype(np.float64)
        batch = {k: a[keep] for k, a in batch.items()}
    gsm = GradSampleModule(model)
    params = [p for p in gsm.parameters() if p.requires_grad]
    names = [dpcert_name(n[len("_module."):] if n.startswith("_module.") else n) for n, _ in gsm.named_parameters()]
    base = torch.optim.SGD(params, lr=0.0)
    qn = v.expected_batch_size
    if v.meta["clipping"] == "flat":
        opt = DPOptimizer(base, noise_multiplier=v.sigma, max_grad_norm=v.clip, expected_batch_size=int(round(qn)),
                          loss_reduction="mean")
    else:
        pg, th = v.groups()
        opt = DPPerLayerOptimizer(base, noise_multiplier=v.sigma, max_grad_norm=[th[pg[n]] for n in names],
                                  expected_batch_size=int(round(qn)), loss_reduction="mean")
    if abs(round(qn) - qn) > 0:
        sys.exit("opacus_candidate: Opacus needs an integer expected batch size")
    nb = next(iter(batch.values())).shape[0]
    if nb:
        loss = gsm._module.per_example_loss(batch).mean() if hasattr(gsm, "_module") else model.per_example_loss(batch).mean()
        loss.backward()
    else:  # an empty batch: zero per-sample gradients of batch size 0
        for p in params:
            p.grad_sample = torch.zeros((0,) + tuple(p.shape), dtype=p.dtype)
    opt.pre_step()
    res = {"per_sample.loss": losses}
    for n, p in zip(names, params):
        g = p.grad.detach().cpu().numpy().astype(np.float64)
        res[f"step.private_grad.{n}"] = g
        # Opacus keeps the clipped sum until zero_grad: S, and the noise it added is qN G - S
        sg = p.summed_grad.detach().cpu().numpy().astype(np.float64)
        res[f"step.clipped_sum.{n}"] = sg
        res[f"step.noise.{n}"] = g * qn - sg
    # per-example norms and factors exactly as Opacus forms them (B rows; dropped examples NaN / 0)
    if nb:
        per = [p.grad_sample.reshape(nb, -1).norm(2, dim=-1) for p in params]
        if v.meta["clipping"] == "flat":
            norm = torch.stack(per, dim=1).norm(2, dim=1)
            fac = (v.clip / (norm + 1e-6)).clamp(max=1.0)
            res["per_sample.norm"] = expand(norm, keep, B, np.nan)
            res["per_sample.clip_factor"] = expand(fac, keep, B, 0.0)
        else:
            pg, th = v.groups()
            for n, pn in zip(names, per):
                fac = (th[pg[n]] / (pn + 1e-6)).clamp(max=1.0)
                res[f"per_sample.norm.{pg[n]}"] = expand(pn, keep, B, np.nan)
                res[f"per_sample.clip_factor.{pg[n]}"] = expand(fac, keep, B, 0.0)
    write_output(out, res, {"dtype": "f64", "clip_fn": "abadi" if declare == "abadi" else "abadi_eps:1e-6",
                            "candidate": "opacus DPOptimizer " + __import__("opacus").__version__})


def sampling(v, out):
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler
    K, N = (int(t) for t in v.tensors["sampling.shape"])
    s = UniformWithReplacementSampler(num_samples=N, sample_rate=v.num("q"), steps=K)
    mask = np.zeros((K, N), dtype=np.int32)
    for k, idx in enumerate(s):
        mask[k, list(idx)] = 1
    write_output(out, {"sampling.mask": mask}, {"candidate": "opacus UniformWithReplacementSampler"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--declare", default="abadi_eps:1e-6")
    a, rest = ap.parse_known_args()
    torch.set_default_dtype(torch.float64)

    def handle(inp, out):  # one request (one-call or persistent mode: dpcert_adapter.run)
        v = Vector.load(inp)
        if v.kind == "sampling":
            sampling(v, out)
        else:
            step(v, out, a.declare)

    run(handle, rest)


if __name__ == "__main__":
    main()
