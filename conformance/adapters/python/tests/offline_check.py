#!/usr/bin/env python3
"""The library adapters' logic that runs without PyPI (numpy only), for `make test`
(conformance/tests/adapters_offline.sh): offline_check.py VECTOR_DIR

1. dpcert_adapter.array_models (the model the JAX and TensorFlow adapters differentiate),
   evaluated with numpy, against the numpy candidate's independent forward passes
   (numpy_candidate.mlp_per_example, numpy_llama.per_example) on every step vector of the
   certify suite: per-example losses equal to 1e-12 relative (both are float64 evaluations of
   docs/models.md; a 1e-12 bound leaves ~4000 ulps for reordered sums over at most 64 terms).
   Negative controls that must be caught: a wrong rotary base, the untied llama read as tied,
   a missing tanh.
2. dpcert_adapter.candidate: mask_from_batches (a known mask; too few batches, an index twice,
   an index out of range refused), expand, finite_rows, group_norms (against a direct sum).
Prints one line per check and exits 1 on the first failure."""
import glob
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from dpcert_adapter import Vector, array_models, candidate  # noqa: E402
import numpy_candidate  # noqa: E402
import numpy_llama  # noqa: E402

REL = 1e-12


def ref_losses(v):
    if v.meta["model"] == "llama":
        return numpy_llama.per_example(v, grad=False)[0]
    return numpy_candidate.mlp_per_example(v, grad=False)[0]


def close(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    fin = np.isfinite(b)
    return a.shape == b.shape and np.array_equal(np.isfinite(a), fin) and \
        bool(np.all(np.abs(a[fin] - b[fin]) <= REL * np.maximum(1.0, np.abs(b[fin]))))


def check_models(vdir):
    n = 0
    for f in sorted(glob.glob(os.path.join(vdir, "step-*.safetensors"))):
        v = Vector.load(f)
        if not candidate.batch_size(v.batch):
            continue
        with np.errstate(all="ignore"):
            got = array_models.per_example_loss(np, v.meta, v.params, v.batch)
            want = ref_losses(v)
        assert close(got, want), f"{os.path.basename(f)}: array_models losses differ from the numpy candidate's"
        n += 1
        if v.meta["model"] == "llama":  # negative controls: each must be caught by the same comparison
            for what, meta in (("rope_theta 1000", dict(v.meta, rope_theta="1000")),
                               ("tied", dict(v.meta, tied="1"))):
                with np.errstate(all="ignore"):
                    bad = array_models.per_example_loss(np, meta, v.params, v.batch) if what != "tied" else \
                        array_models.per_example_loss(np, meta, dict(v.params, lm_head=None), v.batch)
                assert not close(bad, want), f"negative control not caught: llama with {what}"
        elif v.meta.get("hidden"):
            real_tanh = np.tanh
            try:
                np.tanh = lambda x: x  # a missing activation
                with np.errstate(all="ignore"):
                    bad = array_models.per_example_loss(np, v.meta, v.params, v.batch)
            finally:
                np.tanh = real_tanh
            assert not close(bad, want), "negative control not caught: mlp without tanh"
    assert n >= 8, f"only {n} step vectors checked"
    print(f"ok: array_models (numpy) equals the numpy candidate's losses on {n} step vectors (rel {REL}); "
          "negative controls (rope base, tied head, no tanh) caught")


def check_candidate():
    m = candidate.mask_from_batches([np.array([0, 2]), np.array([], dtype=np.int64), np.array([1])], 3, 4)
    assert m.dtype == np.int32 and m.tolist() == [[1, 0, 1, 0], [0, 0, 0, 0], [0, 1, 0, 0]], m
    m = candidate.mask_from_batches(iter([np.array([3])] * 10), 2, 4)  # extra batches are not consumed
    assert m.tolist() == [[0, 0, 0, 1], [0, 0, 0, 1]]
    for bad, why in (([np.array([0])], "too few batches"), ([np.array([1, 1]), np.array([0])], "an index twice"),
                     ([np.array([4]), np.array([0])], "an index out of range"), ([np.array([-1]), np.array([0])], "negative")):
        try:
            candidate.mask_from_batches(bad, 2, 4)
        except ValueError:
            continue
        raise AssertionError(f"mask_from_batches accepted {why}")
    keep = candidate.finite_rows([1.0, np.nan, np.inf, -2.0])
    assert keep.tolist() == [True, False, False, True]
    e = candidate.expand([5.0, 6.0], keep, np.nan)
    assert np.array_equal(e, [5.0, np.nan, np.nan, 6.0], equal_nan=True)
    g = {"a": np.arange(6.0).reshape(2, 3), "b": np.ones((2, 2, 2)), "c": np.zeros((0, 3))}
    norms, total = candidate.group_norms({"a": g["a"], "b": g["b"]}, ["a", "b"], {"a": "x", "b": "y"})
    assert np.allclose(norms["x"], [np.sqrt(5.0), np.sqrt(50.0)]) and np.allclose(norms["y"], [2.0, 2.0])
    assert np.allclose(total, np.sqrt([9.0, 54.0]))
    assert candidate.group_norms({"c": g["c"]}, ["c"], {"c": "all"})[1].shape == (0,)
    print("ok: candidate helpers (mask_from_batches and its refusals, finite_rows, expand, group_norms)")


def main():
    check_models(sys.argv[1])
    check_candidate()


if __name__ == "__main__":
    main()
