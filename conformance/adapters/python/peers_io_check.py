#!/usr/bin/env python3
"""`make test-peers` part io: the adapter's safetensors reader/writer (dpcert_adapter.safetensors_io)
against the `safetensors` package from PyPI: every vector in DIR read identically by both, and
files written by either side read back by the other. Usage: peers_io_check.py VECTOR_DIR"""
import glob
import os
import sys

import numpy as np
from safetensors.numpy import load_file as st_load, save_file as st_save

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dpcert_adapter import load_file, save_file  # noqa: E402


def main():
    d = sys.argv[1]
    n = 0
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        a, _ = load_file(f)
        b = st_load(f)
        assert a.keys() == b.keys(), f
        for k in a:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k], equal_nan=True), (f, k)
        n += 1
    assert n, f"no vectors in {d}"
    out = os.path.join(d, "adapter_out.tmp")
    t = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "m": np.ones((2, 5), dtype=np.int32), "e": np.zeros((0, 4))}
    save_file(out, t, {"dtype": "f32"})
    r = st_load(out)
    assert all(np.array_equal(r[k], t[k]) and r[k].dtype == t[k].dtype for k in t)
    os.remove(out)
    st_save({"y": np.linspace(0, 1, 7)}, out)
    assert np.array_equal(load_file(out)[0]["y"], np.linspace(0, 1, 7))
    os.remove(out)
    print(f"peers: ok: adapter safetensors reader/writer agrees with safetensors.numpy on {n} vectors and both directions")


if __name__ == "__main__":
    main()
