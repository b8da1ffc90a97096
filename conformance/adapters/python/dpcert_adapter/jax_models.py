"""dpcert's models in JAX (imports jax; float64): the vector's parameters and batch as jax
arrays and the loss functions the JAX adapters differentiate (array_models with jax.numpy).

    params, batch = jax_models.load(v)            # {canonical name: f64 array}, {x, y | tokens}
    f = jax_models.batch_loss(v.meta)             # f(params, batch) -> [B] per-example losses
    g = jax_models.example_loss(v.meta)           # g(params, example) -> scalar (no batch axis)
    h = jax_models.batch_loss_mean(v.meta)        # h(params, batch) -> the batch's mean loss
"""
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from . import array_models  # noqa: E402


def load(v):
    params = {k: jnp.asarray(np.ascontiguousarray(a), dtype=jnp.float64) for k, a in v.params.items()}
    batch = {k: jnp.asarray(np.ascontiguousarray(a)) for k, a in v.batch.items()}
    return params, batch


def batch_loss(meta):
    return lambda params, batch: array_models.per_example_loss(jnp, meta, params, batch)


def batch_loss_mean(meta):
    """The mean loss over the batch (a scalar): on a batch of one (jax-privacy's clipped_grad
    keeps a batch axis of size 1 per example), that example's loss."""
    f = batch_loss(meta)
    return lambda params, batch: jnp.mean(f(params, batch))


def example_loss(meta):
    f = batch_loss(meta)
    return lambda params, example: f(params, {k: a[None] for k, a in example.items()})[0]


def secret_key():
    """A JAX PRNG key from 64 bits of OS entropy (the noise must not come from a fixed or public seed)."""
    return jax.random.key(int.from_bytes(__import__("os").urandom(8), "little") >> 1)
