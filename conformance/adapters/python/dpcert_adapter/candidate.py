"""What every library adapter under examples/ shares (numpy only; tested offline by
conformance/tests/adapters_offline.sh):

    candidate.main(__doc__, NAME, options, step=step, sampling=sampling)   # parse, then serve
    ap = candidate.parser(__doc__)           # --nonfinite library|drop (main calls it)
    keep = candidate.finite_rows(losses)     # examples whose loss is finite
    mask = candidate.mask_from_batches(batches, K, N)

`--nonfinite library` (the default) hands the library the vector's batch as it is, so what
the library does with an example whose loss is NaN is what certify sees; `--nonfinite drop`
removes such examples before the library sees the batch (the user-level fix that the
protocol's drop rule asks for; docs/certification.md "Peers").
"""
import argparse
import sys

import numpy as np

NONFINITE_MODES = ("library", "drop")


def parser(doc):
    """An argument parser with the options every library adapter takes."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--nonfinite", choices=NONFINITE_MODES, default="library",
                    help="library: the batch as it is (default); drop: the adapter drops examples with a non-finite loss first")
    return ap


def batch_size(batch):
    """B of a vector's batch ({x, y} or {tokens}); 0 for an empty batch."""
    return int(next(iter(batch.values())).shape[0])


def finite_rows(losses):
    """[B] bool: the examples whose loss is finite."""
    return np.isfinite(np.asarray(losses, dtype=np.float64))


def select(batch, keep):
    """The batch restricted to the rows where keep is True."""
    return {k: np.ascontiguousarray(a[keep]) for k, a in batch.items()}


def expand(values, keep, fill):
    """Values of the kept rows -> [len(keep)] with `fill` at the dropped ones."""
    keep = np.asarray(keep, dtype=bool)
    out = np.full(keep.shape[0], fill, dtype=np.float64)
    out[keep] = np.asarray(values, dtype=np.float64).reshape(-1)
    return out


def mask_from_batches(batches, steps, n):
    """sampling.mask [steps, n] (I32) from an iterable of index batches, one per step.
    Fewer batches than steps, an index outside [0, n) or an index twice in one batch is an
    error (the library did something the protocol cannot express)."""
    mask = np.zeros((steps, n), dtype=np.int32)
    k = -1
    for k, idx in enumerate(batches):
        if k == steps:
            break
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"step {k}: an index outside [0, {n})")
        if np.unique(idx).size != idx.size:
            raise ValueError(f"step {k}: an example twice in one batch")
        mask[k, idx] = 1
    else:
        if k + 1 < steps:
            raise ValueError(f"the library gave {k + 1} batches, {steps} needed")
    return mask


def group_norms(per_example, names, param_group):
    """Per-example gradients {name: [B, ...]} -> ({group: [B] norm}, [B] total norm), in f64."""
    sq = {}
    for n in names:
        g = np.asarray(per_example[n], dtype=np.float64)
        s = np.sum(g.reshape(g.shape[0], int(np.prod(g.shape[1:]))) ** 2, axis=1)
        grp = param_group[n]
        sq[grp] = sq.get(grp, 0.0) + s
    total = np.sqrt(sum(sq.values()))
    return {g: np.sqrt(s) for g, s in sq.items()}, total


def dispatch(name, args, **by_kind):
    """The adapter's `handle(IN, OUT)`: by_kind[v.kind](v, OUT, args) for the vector's kind
    (step, sampling, dpzo); a kind the library has no mechanism for gets an output without
    tensors (so certify says INCOMPLETE, never a pass) and a line on stderr saying why."""
    from .vector import Vector, write_output

    def handle(inp, out):
        v = Vector.load(inp)
        f = by_kind.get(v.kind)
        if f is None:
            sys.stderr.write(f"{name}: the library has no {v.kind} mechanism; no output tensors written\n")
            write_output(out, {}, {"candidate": name})
        else:
            f(v, out, args)
    return handle


def main(doc, name, options=None, **by_kind):
    """Parse the adapter's options (`options(parser)` adds its own), then serve the requests
    with dpcert_adapter.run (one-call mode, or the persistent mode behind the same call)."""
    from .protocol import run
    ap = parser(doc)
    if options:
        options(ap)
    a, rest = ap.parse_known_args()
    run(dispatch(name, a, **by_kind), rest)
