#!/usr/bin/env python3
"""Opacus as a `dpcert certify` candidate, in each of its per-sample-gradient modes
(docs/certification.md "Peers"):

    dpcert certify --candidate 'python examples/opacus_candidate.py [--mode M] [--sampler S] [--nonfinite drop]' \
        --suite certify --scope dpsgd
    dpcert certify --candidate dpcert-opacus-candidate --candidate-mode persistent --suite certify --scope dpsgd

Step vectors: dpcert's model (dpcert_adapter.torch_models, float64) wrapped the way Opacus's
`PrivacyEngine.make_private` wraps it for `grad_sample_mode = M` (`opacus.grad_sample.utils.
prepare_module`: `hooks` GradSampleModule, `functorch` the same with force_functorch, `ew`
GradSampleModuleExpandedWeights, `ghost` GradSampleModuleFastGradientClipping), with the
optimizer class make_private picks (`opacus.optimizers.get_optimizer_class`: DPOptimizer,
DPPerLayerOptimizer for per-layer vectors with the vector's per-tensor thresholds, or
DPOptimizerFastGradientClipping for ghost, whose two backward passes run through
DPLossFastGradientClipping), `loss_reduction="mean"` and `expected_batch_size = qN`. Opacus
releases p.grad = (sum_i clip_i g_i + N(0, sigma^2 C_total^2)) / qN and clips with
min(1, C / (n + 1e-6)): declared as clip_fn abadi_eps:1e-6 (`--declare abadi` declares plain
abadi instead, which certify must reject in f64). Exported: the private gradients, the
losses and, where Opacus exposes them (`p.summed_grad`, `p.grad_sample`: not in ghost mode),
its clipped sums, the noise it added (qN G - S) and the per-example norms and factors as it
forms them. Ghost clipping offers flat clipping only (make_private refuses per_layer): on
per-layer vectors nothing but the losses is written (INCOMPLETE). Opacus's per-layer clipping
is per parameter tensor: on a group-clipping vector whose groups hold several tensors
(step-mlp-group-abadi) nothing but the losses is written either (INCOMPLETE).

`--nonfinite library` (default): Opacus gets the batch as it is (a NaN example makes its clip
factor NaN, optimizer.py's `.clamp(max=1.0)` keeps it, and every sum is NaN); `drop`: the
adapter removes non-finite examples first.

Sampling vectors: the data loader `PrivacyEngine.make_private` returns for a DataLoader of
batch size round(q N) over N examples: `--sampler poisson` (default, `poisson_sampling=True`:
DPDataLoader / UniformWithReplacementSampler, Poisson at sample_rate 1/len(loader) = q) or
`--sampler shuffle` (`poisson_sampling=False`: the user's shuffled fixed-size batches, left
unchanged, while the accountant is still told sample_rate 1/len(loader)).
"""
import os
import sys

import numpy as np  # noqa: E402
import torch  # noqa: E402

try:  # installed (the entry point dpcert-opacus-candidate) or run as a script from the repository
    from dpcert_adapter import candidate, write_output
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from dpcert_adapter import candidate, write_output  # noqa: E402
from dpcert_adapter.torch_models import dpcert_name, from_vector  # noqa: E402
import opacus  # noqa: E402

MODES = ("hooks", "functorch", "ew", "ghost")


class PerExampleLoss:
    """The criterion Opacus's ghost clipping wraps (reduction "none": one loss per example)
    from the model's output: mlp logits [B, K] and labels, or llama logits [B, T, V] and tokens."""

    def __init__(self, llama):
        self.llama, self.reduction = llama, "mean"

    def __call__(self, z, target):
        if self.llama:
            z, target = z[:, :-1, :], target[:, 1:].long()
            nll = torch.logsumexp(z, dim=-1) - z.gather(-1, target[..., None])[..., 0]
            per = nll.mean(dim=1)
        else:
            per = torch.logsumexp(z, dim=1) - z.gather(1, target.long().view(-1, 1))[:, 0]
        return per if self.reduction == "none" else (per.mean() if self.reduction == "mean" else per.sum())


def model_io(model, batch):
    """(model input, criterion target) of a batch."""
    return (batch["tokens"].long(), batch["tokens"]) if "tokens" in batch else (batch["x"], batch["y"])


def step(v, out, a):
    mode, declare, nonfinite = a.mode, a.declare, a.nonfinite
    from opacus.grad_sample.utils import prepare_module
    from opacus.optimizers import get_optimizer_class
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

    model = from_vector(v)
    batch = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in v.batch.items()}
    B = candidate.batch_size(v.batch)
    losses = np.zeros(B)
    if B:
        with torch.no_grad():
            losses = model.per_example_loss(batch).cpu().numpy().astype(np.float64)
    keep = candidate.finite_rows(losses) if nonfinite == "drop" else np.ones(B, dtype=bool)
    batch = {k: a[torch.from_numpy(keep)] for k, a in batch.items()}
    nb = int(keep.sum())
    qn = v.expected_batch_size
    if abs(round(qn) - qn) > 0:
        sys.exit("opacus_candidate: Opacus needs an integer expected batch size")
    res = {"per_sample.loss": losses}
    meta = {"dtype": "f64", "clip_fn": "abadi" if declare == "abadi" else "abadi_eps:1e-6",
            "candidate": f"opacus {opacus.__version__} grad_sample_mode={mode}"}
    clipping = "flat" if v.meta["clipping"] == "flat" else "per_layer"
    if mode == "ghost" and clipping != "flat":
        sys.stderr.write("opacus_candidate: ghost clipping offers flat clipping only (get_optimizer_class refuses "
                         "per_layer); no private gradient written\n")
        write_output(out, res, meta)
        return
    pg, th = v.groups()
    if clipping == "per_layer" and len(set(pg.values())) != len(pg):
        sys.stderr.write("opacus_candidate: Opacus's per-layer clipping clips each parameter tensor on its own "
                         "(DPPerLayerOptimizer, one max_grad_norm per parameter); a clipping group of several tensors "
                         "is not available; no private gradient written\n")
        write_output(out, res, meta)
        return
    kw = {"loss_reduction": "mean", "batch_first": True}
    if mode == "ghost":
        kw.update(max_grad_norm=v.clip, use_ghost_clipping=True)
    gsm = prepare_module(model, mode, **kw)
    params = [p for p in gsm.parameters() if p.requires_grad]
    names = [dpcert_name(n[len("_module."):] if n.startswith("_module.") else n) for n, _ in gsm.named_parameters()]
    max_norm = v.clip if clipping == "flat" else [th[pg[n]] for n in names]
    opt = get_optimizer_class(clipping, False, mode)(torch.optim.SGD(params, lr=0.0), noise_multiplier=v.sigma,
                                                     max_grad_norm=max_norm, expected_batch_size=int(round(qn)),
                                                     loss_reduction="mean")
    inp, target = model_io(model, batch)
    if mode == "ghost":
        crit = DPLossFastGradientClipping(gsm, opt, PerExampleLoss("tokens" in batch), "mean")
        if nb:
            crit(gsm(inp), target).backward()
        else:  # an empty batch: the clipped sum is zero (Opacus's own empty-batch rule)
            for p in params:
                p.grad = torch.zeros_like(p)
    elif nb:  # ew computes per-sample gradients inside the wrapped call (torch's ExpandedWeights)
        try:
            PerExampleLoss("tokens" in batch)(gsm(inp), target).backward()
        except RuntimeError as e:  # torch's ExpandedWeights has no rule for this model's operations
            if mode != "ew" or "Expanded Weights" not in str(e):
                raise
            sys.stderr.write(f"opacus_candidate: grad_sample_mode=ew cannot differentiate this model ({e}); "
                             "no private gradient written\n")
            write_output(out, res, meta)
            return
    else:  # an empty batch: zero per-sample gradients of batch size 0 (Opacus's empty-batch rule)
        for p in params:
            p.grad_sample = torch.zeros((0,) + tuple(p.shape), dtype=p.dtype)
    opt.pre_step()
    for n, p in zip(names, params):
        g = p.grad.detach().cpu().numpy().astype(np.float64)
        res[f"step.private_grad.{n}"] = g
        if getattr(p, "summed_grad", None) is not None:
            sg = p.summed_grad.detach().cpu().numpy().astype(np.float64)
            res[f"step.clipped_sum.{n}"] = sg
            res[f"step.noise.{n}"] = g * qn - sg
    if nb and mode != "ghost":  # per-example norms and factors exactly as Opacus forms them
        per = [p.grad_sample.reshape(nb, -1).norm(2, dim=-1) for p in params]
        if clipping == "flat":
            norm = torch.stack(per, dim=1).norm(2, dim=1)
            fac = (v.clip / (norm + 1e-6)).clamp(max=1.0)
            res["per_sample.norm"] = candidate.expand(norm.detach().numpy(), keep, np.nan)
            res["per_sample.clip_factor"] = candidate.expand(fac.detach().numpy(), keep, 0.0)
        else:
            for n, pn in zip(names, per):
                fac = (th[pg[n]] / (pn + 1e-6)).clamp(max=1.0)
                res[f"per_sample.norm.{pg[n]}"] = candidate.expand(pn.detach().numpy(), keep, np.nan)
                res[f"per_sample.clip_factor.{pg[n]}"] = candidate.expand(fac.detach().numpy(), keep, 0.0)
    elif nb:  # ghost: the per-example norms its first backward pass computed
        res["per_sample.norm"] = candidate.expand(gsm.get_norm_sample().detach().numpy(), keep, np.nan)
    write_output(out, res, meta)


def sampling(v, out, a):
    sampler = a.sampler
    from torch.utils.data import DataLoader, TensorDataset
    from opacus import PrivacyEngine

    K, N = (int(t) for t in v.tensors["sampling.shape"])
    b = max(1, int(round(v.num("q") * N)))
    model = torch.nn.Linear(1, 1)
    loader = DataLoader(TensorDataset(torch.arange(N)), batch_size=b, shuffle=True)
    _, _, dp_loader = PrivacyEngine().make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                                   data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0,
                                                   poisson_sampling=(sampler == "poisson"))

    def batches():
        while True:
            for (idx,) in dp_loader:
                yield idx.numpy()
    mask = candidate.mask_from_batches(batches(), K, N)
    write_output(out, {"sampling.mask": mask},
                 {"candidate": f"opacus {opacus.__version__} make_private(poisson_sampling={sampler == 'poisson'}) "
                               f"data loader (sample_rate {1 / len(dp_loader):.6g})"})


def options(ap):
    ap.add_argument("--mode", choices=MODES, default="hooks", help="Opacus grad_sample_mode (default hooks)")
    ap.add_argument("--sampler", choices=("poisson", "shuffle"), default="poisson",
                    help="sampling vectors: make_private(poisson_sampling=True|False)")
    ap.add_argument("--declare", default="abadi_eps:1e-6")


def main():
    torch.set_default_dtype(torch.float64)
    candidate.main(__doc__, f"opacus {opacus.__version__}", options, step=step, sampling=sampling)


if __name__ == "__main__":
    main()
