#!/usr/bin/env python3
"""pyvacy (the PyPI release, an old PyTorch DP-SGD package) as a `dpcert certify` candidate
(docs/certification.md "Peers"):

    dpcert certify --candidate 'python examples/pyvacy_candidate.py' --suite certify --scope dpsgd

Step vectors: dpcert's model (dpcert_adapter.torch_models, float64) trained "as usual", as
pyvacy's README says: the batch's mean loss, `loss.backward()`, then one step of
`pyvacy.optim.DPSGD(l2_norm_clip=C, noise_multiplier=sigma, batch_size=qN, lr=lr)`. The
adapter exports `params_after` (the vector's plain SGD with its lr) and the losses. pyvacy
has no per-layer clipping (per-layer vectors: nothing written but the losses, INCOMPLETE).

Sampling vectors: pyvacy has no sampler ("do training as usual": a torch DataLoader with
shuffled fixed-size batches) while its accountant (`pyvacy.analysis.moments_accountant`)
assumes Poisson sampling at q = batch_size / N; the adapter writes the batches of
`DataLoader(range(N), batch_size=round(q N), shuffle=True)`.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402
import torch  # noqa: E402

from dpcert_adapter import candidate, write_output  # noqa: E402
from dpcert_adapter.torch_models import dpcert_name, from_vector  # noqa: E402
from pyvacy import optim  # noqa: E402

NAME = "pyvacy 0.0.32"


def step(v, out, a):
    model = from_vector(v)
    batch = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in v.batch.items()}
    B = candidate.batch_size(v.batch)
    res, meta = {}, {"dtype": "f64", "clip_fn": "abadi", "candidate": f"{NAME} optim.DPSGD"}
    losses = np.zeros(B)
    if B:
        with torch.no_grad():
            losses = model.per_example_loss(batch).numpy().astype(np.float64)
    res["per_sample.loss"] = losses
    keep = candidate.finite_rows(losses) if a.nonfinite == "drop" else np.ones(B, dtype=bool)
    batch = {k: a[torch.from_numpy(keep)] for k, a in batch.items()}
    if v.meta["clipping"] != "flat":
        sys.stderr.write(f"pyvacy_candidate: pyvacy has no {v.meta['clipping']} clipping; no private gradient written\n")
        write_output(out, res, meta)
        return
    names = [dpcert_name(n) for n, _ in model.named_parameters()]
    opt = optim.DPSGD(l2_norm_clip=v.clip, noise_multiplier=v.sigma, batch_size=int(round(v.expected_batch_size)),
                      params=model.parameters(), lr=float(v.meta["lr"]))
    opt.zero_grad()
    if int(keep.sum()):
        model.per_example_loss(batch).mean().backward()
    else:  # an empty batch: no loss to differentiate; the gradients are zero
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in zip(names, model.parameters()):
        res[f"params_after.{n}"] = p.detach().numpy().astype(np.float64)
    write_output(out, res, meta)


def sampling(v, out, a):
    from torch.utils.data import DataLoader
    K, N = (int(t) for t in v.tensors["sampling.shape"])
    loader = DataLoader(range(N), batch_size=max(1, int(round(v.num("q") * N))), shuffle=True)

    def batches():
        while True:
            for idx in loader:
                yield idx.numpy()
    write_output(out, {"sampling.mask": candidate.mask_from_batches(batches(), K, N)},
                 {"candidate": f"{NAME}: a shuffled torch DataLoader (pyvacy has no sampler)"})


def main():
    torch.set_default_dtype(torch.float64)
    candidate.main(__doc__, NAME, step=step, sampling=sampling)


if __name__ == "__main__":
    main()
