#!/usr/bin/env python3
"""optax's DP-SGD aggregation (`optax.contrib.differentially_private_aggregate`) as a
`dpcert certify` candidate (docs/certification.md "Peers"):

    dpcert certify --candidate 'python examples/optax_candidate.py [--nonfinite drop]' --suite certify --scope dpsgd

Step vectors: per-example gradients by `jax.vmap(jax.grad(loss))` of dpcert's model
(dpcert_adapter.jax_models, float64), handed to optax's transformation as it documents
(per-example gradients with the batch on axis 0), keyed by 64 bits of OS entropy (optax's own
default key is the fixed `key(0)`). optax clips each example to the global norm `C`
(`min(1, C / n)`: clip_fn abadi), sums, adds `N(0, (sigma C)^2)` and divides by the batch's
own size (it has no expected batch size). Flat clipping only: on a per-layer vector the
adapter writes no private gradient (INCOMPLETE). Exported besides: the losses, the
per-example norms of the gradients optax receives, and optax's clipped sum
(`optax.per_example_global_norm_clip`, the function the aggregation calls).

optax has no sampler: on sampling vectors the adapter writes no mask (INCOMPLETE).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402

from dpcert_adapter import candidate, write_output  # noqa: E402
from dpcert_adapter import jax_models  # noqa: E402  (enables float64 before jax is used)
import jax  # noqa: E402
import optax  # noqa: E402


def step(v, out, a):
    params, batch = jax_models.load(v)
    names = list(v.params.keys())
    B = candidate.batch_size(v.batch)
    meta = {"dtype": "f64", "clip_fn": "abadi", "candidate": f"optax {optax.__version__} differentially_private_aggregate"}
    res = {}
    losses = np.asarray(jax_models.batch_loss(v.meta)(params, batch)) if B else np.zeros(0)
    res["per_sample.loss"] = losses
    keep = candidate.finite_rows(losses) if a.nonfinite == "drop" else np.ones(B, dtype=bool)
    if v.meta["clipping"] != "flat":
        sys.stderr.write("optax_candidate: differentially_private_aggregate clips by the global norm only; "
                         f"{v.meta['clipping']} clipping is not available (no private gradient written)\n")
        write_output(out, res, meta)
        return
    sub = {k: a[np.asarray(keep)] for k, a in batch.items()}
    per_ex = jax.vmap(jax.grad(jax_models.example_loss(v.meta)), in_axes=(None, 0))(params, sub)
    per_np = {n: np.asarray(per_ex[n]) for n in names}
    _, total = candidate.group_norms(per_np, names, {n: "all" for n in names})
    res["per_sample.norm"] = candidate.expand(total, keep, np.nan)
    tx = optax.contrib.differentially_private_aggregate(l2_norm_clip=v.clip, noise_multiplier=v.sigma,
                                                        key=jax_models.secret_key())
    flat = [per_ex[n] for n in names]
    g, _ = tx.update(per_ex, tx.init(params))
    clipped, _ = optax.per_example_global_norm_clip(flat, v.clip)
    for n, s in zip(names, clipped):
        res[f"step.private_grad.{n}"] = np.asarray(g[n], dtype=np.float64)
        res[f"step.clipped_sum.{n}"] = np.asarray(s, dtype=np.float64)
    write_output(out, res, meta)


def main():
    candidate.main(__doc__, f"optax {optax.__version__}", step=step)


if __name__ == "__main__":
    main()
