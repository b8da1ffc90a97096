#!/usr/bin/env python3
"""TensorFlow Privacy's Keras DP optimizer (`tensorflow_privacy.DPKerasSGDOptimizer`) as a
`dpcert certify` candidate (docs/certification.md "Peers"):

    dpcert certify --candidate 'python examples/tf_privacy_candidate.py' --suite certify --scope dpsgd

Step vectors: dpcert's model written with TensorFlow's numpy API (dpcert_adapter.array_models
on `tf.experimental.numpy`, float32: TF Privacy keeps its clip norm and noise in float32, so
the adapter declares `dtype f32`), the parameters as `tf.Variable`s, and one
`DPKerasSGDOptimizer(l2_norm_clip=C, noise_multiplier=sigma, num_microbatches=None,
learning_rate=lr).minimize(per-example losses, variables)` call, as Keras's `fit` makes it:
TF Privacy clips each example (`tf.clip_by_global_norm`: clip_fn abadi), sums, adds
`N(0, (sigma C)^2)` (TensorFlow's global generator) and divides by the number of
microbatches, i.e. the batch's own size. The adapter exports `params_after` (the vector's
plain SGD with its lr) and the losses. Flat clipping only (per-layer vectors: nothing
written but the losses, INCOMPLETE).

Sampling vectors: TF Privacy has no sampler; its tutorials train with Keras on shuffled
fixed-size batches (`tf.data`: shuffle every epoch, then batch) while its accountant
(`compute_dp_sgd_privacy`) assumes Poisson sampling at q = batch_size / n. The adapter
writes the batches of that pipeline (batch size round(q N)).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402

from dpcert_adapter import array_models, candidate, write_output  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow.experimental.numpy as tnp  # noqa: E402
import tensorflow_privacy  # noqa: E402

tnp.experimental_enable_numpy_behavior(prefer_float32=True)
NAME = f"tensorflow-privacy {getattr(tensorflow_privacy, '__version__', '?')} (tensorflow {tf.__version__})"


def step(v, out, a):
    names = list(v.params.keys())
    B = candidate.batch_size(v.batch)
    res, meta = {}, {"dtype": "f32", "clip_fn": "abadi", "candidate": f"{NAME} DPKerasSGDOptimizer"}
    params = {n: tf.Variable(np.asarray(a, dtype=np.float32), name=n.replace(".", "_")) for n, a in v.params.items()}
    batch = {k: tf.constant(a.astype(np.float32) if a.dtype.kind == "f" else a) for k, a in v.batch.items()}
    loss_fn = lambda: array_models.per_example_loss(tnp, v.meta, params, batch)  # noqa: E731
    losses = np.asarray(loss_fn(), dtype=np.float64) if B else np.zeros(0)
    res["per_sample.loss"] = losses
    if a.nonfinite == "drop" and B:
        keep = candidate.finite_rows(losses)
        batch = {k: tf.constant(np.asarray(a)[keep]) for k, a in batch.items()}
    if v.meta["clipping"] != "flat":
        sys.stderr.write(f"tf_privacy_candidate: DPKerasSGDOptimizer clips by the global norm; {v.meta['clipping']} "
                         "clipping is not available (no private gradient written)\n")
        write_output(out, res, meta)
        return
    lr = float(v.meta["lr"])
    opt = tensorflow_privacy.DPKerasSGDOptimizer(l2_norm_clip=v.clip, noise_multiplier=v.sigma, num_microbatches=None,
                                                 learning_rate=lr)
    var_list = [params[n] for n in names]
    opt.minimize(loss_fn, var_list)
    for n in names:
        res[f"params_after.{n}"] = params[n].numpy()
    write_output(out, res, meta)


def sampling(v, out, a):
    K, N = (int(t) for t in v.tensors["sampling.shape"])
    b = max(1, int(round(v.num("q") * N)))
    epochs = -(-K * b // N) + 1
    ds = tf.data.Dataset.range(N).shuffle(N, reshuffle_each_iteration=True).batch(b).repeat(epochs).take(K)
    mask = candidate.mask_from_batches((x.numpy() for x in ds), K, N)
    write_output(out, {"sampling.mask": mask}, {"candidate": f"{NAME} tf.data shuffle+batch (the tutorials' pipeline)"})


def main():
    candidate.main(__doc__, NAME, step=step, sampling=sampling)


if __name__ == "__main__":
    main()
