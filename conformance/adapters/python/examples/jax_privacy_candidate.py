#!/usr/bin/env python3
"""jax-privacy 2.x's clipped-gradient and noise path as a `dpcert certify` candidate
(docs/certification.md "Peers"):

    dpcert certify --candidate 'python examples/jax_privacy_candidate.py' --suite certify --scope dpsgd

Step vectors: `jax_privacy.clipped_grad(loss, l2_clip_norm=C, normalize_by=qN)` of dpcert's
model (dpcert_adapter.jax_models, float64) gives the sum of per-example clipped gradients
divided by the expected batch size (jax-privacy clips with `min(1, C / n)`: clip_fn abadi;
its `nan_safe` default zeroes non-finite gradient entries before clipping), and
`jax_privacy.noise_addition.gaussian_privatizer(stddev = sigma * l2_norm_bound)` adds the
noise, exactly as jax-privacy's own Keras API pairs them (keras_api.py: `normalize_by =
batch_size`, `stddev = noise_multiplier * l2_norm_bound`). The privatizer's key is
jax-privacy's default (`prng_key=None`: a key drawn from numpy's global generator, which a
fresh process seeds from OS entropy). Flat clipping only (per-layer vectors: no private
gradient, INCOMPLETE). Exported besides: the losses and per-example norms jax-privacy
returns (`return_values`, `return_grad_norms`), and the clipped sum (qN times its output).
clipped_grad refuses an empty batch (optax's micro_vmap: `num_microbatches=0`); the adapter
pads every batch to a multiple of 8 rows (8 when empty) with jax-privacy's padding examples
(`is_padding_example`, which clip to exactly zero), as its Poisson training path does.

Sampling vectors: `jax_privacy.batch_selection.CyclicPoissonSampling(sampling_prob=q,
iterations=K)` (cycle_length 1: Poisson sampling) with a generator seeded from OS entropy.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402

from dpcert_adapter import candidate, write_output  # noqa: E402
from dpcert_adapter import jax_models  # noqa: E402  (enables float64 before jax is used)
import jax_privacy  # noqa: E402
from jax_privacy import batch_selection, noise_addition  # noqa: E402

PAD = 8  # batches are padded to a multiple of this (at least one padding example when empty)
NAME = f"jax-privacy {jax_privacy.__version__}"


def step(v, out, a):
    params, batch = jax_models.load(v)
    names = list(v.params.keys())
    B = candidate.batch_size(v.batch)
    qn = v.expected_batch_size
    meta = {"dtype": "f64", "clip_fn": "abadi", "candidate": f"{NAME} clipped_grad + gaussian_privatizer"}
    res = {}
    if B:
        losses = np.asarray(jax_models.batch_loss(v.meta)(params, batch))
        keep = candidate.finite_rows(losses) if a.nonfinite == "drop" else np.ones(B, dtype=bool)
        batch = {k: a[np.asarray(keep)] for k, a in batch.items()}
    else:
        losses, keep = np.zeros(0), np.ones(0, dtype=bool)
    res["per_sample.loss"] = losses
    if v.meta["clipping"] != "flat":
        sys.stderr.write(f"jax_privacy_candidate: clipped_grad clips by the global norm; {v.meta['clipping']} "
                         "clipping is not available (no private gradient written)\n")
        write_output(out, res, meta)
        return
    # jax-privacy's way to give clipped_grad a batch of any size (also 0, which it refuses):
    # padding examples flagged by is_padding_example, which contribute exactly zero
    idx = batch_selection.pad_to_multiple_of(np.arange(int(np.sum(keep))), PAD)
    if idx.size == 0:
        idx = np.full(PAD, -1)
    pad = idx < 0
    batch = {k: jax_models.jnp.concatenate([a, jax_models.jnp.zeros((int(pad.sum()),) + a.shape[1:], a.dtype)])
             for k, a in batch.items()}
    grad_fn = jax_privacy.clipped_grad(jax_models.batch_loss_mean(v.meta), l2_clip_norm=v.clip, normalize_by=qn,
                                       batch_argnums=1, return_values=True, return_grad_norms=True)
    clipped, aux = grad_fn(params, batch, is_padding_example=jax_models.jnp.asarray(pad))
    privatizer = noise_addition.gaussian_privatizer(stddev=v.sigma * grad_fn.l2_norm_bound)
    noisy, _ = privatizer.update(clipped, privatizer.init(params))
    if int(np.sum(keep)):
        res["per_sample.norm"] = candidate.expand(np.asarray(aux.grad_norms)[~pad], keep, np.nan)
    for n in names:
        res[f"step.private_grad.{n}"] = np.asarray(noisy[n], dtype=np.float64)
        res[f"step.clipped_sum.{n}"] = np.asarray(clipped[n], dtype=np.float64) * qn
    write_output(out, res, meta)


def sampling(v, out, a):
    K, N = (int(t) for t in v.tensors["sampling.shape"])
    strategy = batch_selection.CyclicPoissonSampling(sampling_prob=v.num("q"), iterations=K)
    rng = np.random.default_rng()  # OS entropy
    mask = candidate.mask_from_batches(strategy.batch_iterator(N, rng), K, N)
    write_output(out, {"sampling.mask": mask}, {"candidate": f"{NAME} CyclicPoissonSampling"})


def main():
    candidate.main(__doc__, NAME, step=step, sampling=sampling)


if __name__ == "__main__":
    main()
